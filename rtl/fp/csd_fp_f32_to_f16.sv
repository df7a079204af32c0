// csd_fp_f32_to_f16: binary32 -> binary16 conversion, one result per clock.
//
// Round to nearest even, subnormal halves produced (down to 2^-24), |x| >= 65520 -> +-inf,
// binary32 subnormals -> signed zero, NaN keeps its sign and top 10 payload bits and is
// quieted: exactly the F16C instruction VCVTPS2PH with rounding mode 0.
// An exact integer function of the numeric contract: the FTZ/DAZ policy does not apply, so
// the unit has no FtzDaz parameter.
//
// Pipeline: the shared classify and round stages (csd_fp_cvt).

`default_nettype none

module csd_fp_f32_to_f16 (
  /// Clock.
  input  wire logic        clk_i,
  /// Synchronous reset, active low (clears the valid pipeline only).
  input  wire logic        rst_ni,
  /// Operand below is valid: start a conversion.
  input  wire logic        valid_i,
  /// Operand, binary32.
  input  wire logic [31:0] a_i,
  /// result_o holds the result of the conversion started Latency cycles earlier.
  output logic             valid_o,
  /// Result, binary16.
  output logic [15:0]      result_o
);
  /// Cycles from valid_i to valid_o.
  localparam int unsigned Latency = csd_fp_pkg::CVT_LATENCY;

  csd_valid_pipe #(
    .Depth(Latency)
  ) u_valid_pipe (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(valid_i),
    .valid_o(valid_o)
  );

  csd_fp_cvt #(
    .SrcFmt  (csd_fp_pkg::FmtFp32),
    .DstFmt  (csd_fp_pkg::FmtFp16),
    .QuietNan(1'b1)
  ) u_cvt (
    .clk_i   (clk_i),
    .a_i     (a_i),
    .result_o(result_o)
  );

endmodule
