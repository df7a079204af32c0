// csd_q8_dequant: reads one q8 moment element, one per clock.
//
// value = DequantQ8(code, absmax) of hls/include/csdkit/hls/state_q8.h (docs/state-formats.md,
// "Dequantization"):
//   signed map:   (-1)^(code >> 7) * (M[code & 0x7F] * absmax)
//   unsigned map: U[code] * absmax
// one binary32 multiplication (csd_fp_mul: round to nearest even, the FtzDaz policy: a
// subnormal absmax read as zero, a subnormal product flushed after rounding; NaN results the
// canonical 0x7fc00000), with the sign applied AFTER the product by flipping bit 31 of its
// result: a -0 code gives -0, and a negative code of a NaN absmax gives 0xffc00000, as the C++
// core does. The table values are normal or zero, so the policy never changes them.
//
// Pipeline: table lookup (registered: the 128/256-entry ROMs stay off the classifier's path) |
// csd_fp_mul (csd_fp_pkg::MUL_LATENCY) | sign (registered). The tables come from the generated
// package csd_q8_tables_pkg (gen_q8_tables_pkg.cpp, from state_q8.h).

`default_nettype none

module csd_q8_dequant #(
  /// 1: FTZ/DAZ policy (a subnormal absmax reads as zero, a subnormal product is flushed after
  /// rounding); 0: IEEE gradual underflow.
  parameter bit FtzDaz = 1'b0
) (
  /// Clock.
  input  wire logic        clk_i,
  /// Synchronous reset, active low (clears the valid pipeline only).
  input  wire logic        rst_ni,
  /// The inputs below are valid: start a dequantization.
  input  wire logic        valid_i,
  /// The element's 8-bit code.
  input  wire logic [7:0]  code_i,
  /// The absmax of the element's block, binary32.
  input  wire logic [31:0] absmax_i,
  /// 1: signed map S (m, momentum, Lion's m; bit 7 of the code is the sign); 0: unsigned map U
  /// (v, Adagrad's sum).
  input  wire logic        signed_map_i,
  /// value_o holds the result of the dequantization started Latency cycles earlier.
  output logic             valid_o,
  /// The element's value, binary32.
  output logic [31:0]      value_o
);
  /// Cycles from valid_i to valid_o: lookup 1, multiplication, sign 1 (8).
  localparam int unsigned Latency = 1 + csd_fp_pkg::MUL_LATENCY + 1;

  // The unit's valid bit (its only reset state). The multiplier's own valid pipe is not used:
  // its input is tied low and its output collected as unused (synthesis removes both).
  logic unused_mul_valid;

  csd_valid_pipe #(
    .Depth(Latency)
  ) u_valid_pipe (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(valid_i),
    .valid_o(valid_o)
  );

  // ---- Stage 1: table lookup -----------------------------------------------------------------
  logic [31:0] mag_d, mag_q;
  logic [31:0] absmax_q;
  logic        neg_d, neg_q;

  assign mag_d = signed_map_i ? csd_q8_tables_pkg::q8_signed_mag(code_i[6:0])
                              : csd_q8_tables_pkg::q8_unsigned_val(code_i);
  assign neg_d = signed_map_i & code_i[7];

  always_ff @(posedge clk_i) begin
    mag_q <= mag_d;
    absmax_q <= absmax_i;
    neg_q <= neg_d;
  end

  // ---- The product ---------------------------------------------------------------------------
  logic [31:0] prod;

  csd_fp_mul #(
    .FtzDaz(FtzDaz)
  ) u_mul (
    .clk_i   (clk_i),
    .rst_ni  (rst_ni),
    .valid_i (1'b0),
    .a_i     (mag_q),
    .b_i     (absmax_q),
    .valid_o (unused_mul_valid),
    .result_o(prod)
  );

  // The sign bit travels beside the multiplier.
  logic neg_mul;

  csd_delay #(
    .Width(1),
    .Depth(csd_fp_pkg::MUL_LATENCY)
  ) u_neg_delay (
    .clk_i (clk_i),
    .rst_ni(rst_ni),
    .data_i(neg_q),
    .data_o(neg_mul)
  );

  // ---- Last stage: the sign, applied after the product ---------------------------------------
  logic [31:0] value_d, value_q;

  assign value_d = {prod[31] ^ neg_mul, prod[30:0]};

  always_ff @(posedge clk_i) begin
    value_q <= value_d;
  end
  assign value_o = value_q;

endmodule
