// csd_fp_sign: the sign of a binary32 value as a value, one result per clock.
//
// result = +1.0 / -1.0 by the sign bit for a non-zero value (infinities included), +0.0 for
// both zeros, the canonical NaN 0x7fc00000 for any NaN (numeric contract; Lion's update
// direction). Exact. Under FtzDaz = 1 a subnormal operand is read as zero of its sign and gives
// +0.0; under FtzDaz = 0 it gives +-1.0.
//
// Pipeline: the shared classify stage | the shared round stage (which packs the exact +-1.0
// as it packs every other result; with constant exponent and significand it reduces to a few
// gates).

`default_nettype none

module csd_fp_sign #(
  /// 1: DAZ (subnormal operands read as zero of the same sign); 0: IEEE.
  parameter bit FtzDaz = 1'b0
) (
  /// Clock.
  input  wire logic        clk_i,
  /// Synchronous reset, active low (clears the valid pipeline only).
  input  wire logic        rst_ni,
  /// Operand below is valid: start an operation.
  input  wire logic        valid_i,
  /// Operand, binary32.
  input  wire logic [31:0] a_i,
  /// result_o holds the result of the operation started Latency cycles earlier.
  output logic             valid_o,
  /// +1.0, -1.0, +0.0 or the canonical NaN, binary32.
  output logic [31:0]      result_o
);
  /// Cycles from valid_i to valid_o.
  localparam int unsigned Latency = csd_fp_pkg::SIGN_LATENCY;

  csd_valid_pipe #(
    .Depth(Latency)
  ) u_valid_pipe (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(valid_i),
    .valid_o(valid_o)
  );

  csd_fp_pkg::fp_unpacked_t a;

  csd_fp_classify #(
    .SrcFmt     (csd_fp_pkg::FmtFp32),
    .FtzDaz     (FtzDaz),
    .NumOperands(1)
  ) u_classify (
    .clk_i     (clk_i),
    .operands_i(a_i),
    .unpacked_o(a)
  );

  // +-1.0 is exponent 0 and significand 1.0; zeros give +0, NaNs the canonical NaN.
  csd_fp_pkg::fp_round_in_t round_in;

  always_comb begin
    round_in.sign = a.sign;
    round_in.exp = '0;
    round_in.sig = csd_fp_pkg::RSIG_BITS'(1) << (csd_fp_pkg::RSIG_BITS - 1);
    round_in.payload = csd_fp_pkg::QUIET_BIT;
    unique case (a.cls)
      csd_fp_pkg::ClassQnan, csd_fp_pkg::ClassSnan: begin
        round_in.kind = csd_fp_pkg::ResNan;
        round_in.sign = 1'b0;
      end
      csd_fp_pkg::ClassZero: begin
        round_in.kind = csd_fp_pkg::ResZero;
        round_in.sign = 1'b0;
      end
      default: begin
        round_in.kind = csd_fp_pkg::ResFinite;
      end
    endcase
  end

  // Only the class and the sign matter.
  logic unused_value;
  assign unused_value = ^{a.exp, a.sig};

  csd_fp_round #(
    .DstFmt(csd_fp_pkg::FmtFp32),
    .FtzDaz(FtzDaz)
  ) u_round (
    .clk_i   (clk_i),
    .in_i    (round_in),
    .result_o(result_o)
  );

endmodule
