// csd_q8_scale: the scale r = 1 / a of a q8 block being written, one per clock.
//
// docs/state-formats.md, "Quantization", step 4, and QuantizeBlockQ8 (state_q8.h): r = 1 / a,
// one binary32 division rounded to nearest even, for a block's absmax a >= 2^-126 (finite; the
// non-finite and tiny blocks need no scale). The C++ core divides with the plain host division
// (`1.0f / a`), not under the launch's policy, so this unit is IEEE whatever the policy: for
// a > 2^126 the quotient is subnormal and is kept (the policy applies later, when q = |x| * r
// is formed under DAZ and reads such an r as zero). So there is no FtzDaz parameter; the
// divider is csd_fp_div with FtzDaz = 0.
//
// Outside that domain the result is csd_fp_div's (1/0 = +inf, 1/inf = +0, NaN canonical), which
// no caller uses.

`default_nettype none

module csd_q8_scale #(
  /// Quotient bits per divider stage (1..24), as csd_fp_div's BitsPerStage.
  parameter int unsigned BitsPerStage = 2
) (
  /// Clock.
  input  wire logic        clk_i,
  /// Synchronous reset, active low (clears the valid pipeline only).
  input  wire logic        rst_ni,
  /// absmax_i is valid: start a division.
  input  wire logic        valid_i,
  /// The block's absmax a, binary32 (>= 2^-126 and finite for a block that has codes).
  input  wire logic [31:0] absmax_i,
  /// scale_o holds the scale of the absmax given Latency cycles earlier.
  output logic             valid_o,
  /// r = 1 / a, binary32, IEEE round to nearest even (subnormal results kept).
  output logic [31:0]      scale_o
);
  /// Cycles from valid_i to valid_o: csd_fp_div's (16 with the default BitsPerStage).
  localparam int unsigned Latency = csd_fp_pkg::digit_latency(BitsPerStage);

  /// binary32 1.0.
  localparam logic [31:0] ONE = 32'h3f80_0000;

  // The unit's valid bit (its only reset state). The divider's own valid pipe is not used: its
  // input is tied low and its output collected as unused (synthesis removes both); the bench
  // checks that the results come out Latency cycles after their inputs.
  logic unused_div_valid;

  csd_valid_pipe #(
    .Depth(Latency)
  ) u_valid_pipe (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(valid_i),
    .valid_o(valid_o)
  );

  csd_fp_div #(
    .FtzDaz      (1'b0),
    .BitsPerStage(BitsPerStage)
  ) u_div (
    .clk_i   (clk_i),
    .rst_ni  (rst_ni),
    .valid_i (1'b0),
    .a_i     (ONE),
    .b_i     (absmax_i),
    .valid_o (unused_div_valid),
    .result_o(scale_o)
  );

endmodule
