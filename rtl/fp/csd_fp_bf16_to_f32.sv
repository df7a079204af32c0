// csd_fp_bf16_to_f32: bfloat16 -> binary32 conversion, one result per clock.
//
// Exact for every operand, NaN payloads included (not quieted): the result is the operand's
// bits shifted left by 16.
// An exact integer function of the numeric contract: the FTZ/DAZ policy does not apply, so
// the unit has no FtzDaz parameter.
//
// Pipeline: the shared classify and round stages (csd_fp_cvt).

`default_nettype none

module csd_fp_bf16_to_f32 (
  /// Clock.
  input  wire logic        clk_i,
  /// Synchronous reset, active low (clears the valid pipeline only).
  input  wire logic        rst_ni,
  /// Operand below is valid: start a conversion.
  input  wire logic        valid_i,
  /// Operand, bfloat16.
  input  wire logic [15:0] a_i,
  /// result_o holds the result of the conversion started Latency cycles earlier.
  output logic             valid_o,
  /// Result, binary32.
  output logic [31:0]      result_o
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
    .SrcFmt  (csd_fp_pkg::FmtBf16),
    .DstFmt  (csd_fp_pkg::FmtFp32),
    .QuietNan(1'b0)
  ) u_cvt (
    .clk_i   (clk_i),
    .a_i     (a_i),
    .result_o(result_o)
  );

endmodule
