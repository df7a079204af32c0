// csd_q8_rand16: the 16-bit random numbers R of the stochastic bf16 rounding of q8-bf16 stores,
// for eight consecutive elements per clock.
//
// docs/state-formats.md, "The random bits", and csdkit::hls::Random16 (state_q8.h): the
// elements 8e .. 8e + 7 of the store's element space share one Philox4x32-10 output, of
// counter (e mod 2^32, e >> 32, step mod 2^32, step >> 32) under key (seed mod 2^32,
// seed >> 32); element 8e + j takes the low (j even) or high (j odd) half of word j >> 1.
// Those halves in that order are exactly the bits of the four words, so rand_o is words_o of
// csd_philox4x32 read as eight 16-bit fields: no logic beyond the generator.

`default_nettype none

module csd_q8_rand16 #(
  /// Registers on each Philox round's products (1..3), as csd_philox4x32's MulStages.
  parameter int unsigned MulStages = 1
) (
  /// Clock.
  input  wire logic             clk_i,
  /// Synchronous reset, active low (clears the valid pipeline only).
  input  wire logic             rst_ni,
  /// The inputs below are valid: draw the numbers of one group of eight elements.
  input  wire logic             valid_i,
  /// The store's 64-bit seed (the Philox key).
  input  wire logic [63:0]      seed_i,
  /// The step being committed (the store's committed step + 1).
  input  wire logic [63:0]      step_i,
  /// The group e = i >> 3 of element index i (a 64-bit index gives at most 61 bits of e).
  input  wire logic [60:0]      group_i,
  /// rand_o holds the numbers of the group given Latency cycles earlier.
  output logic                  valid_o,
  /// rand_o[j]: R of element 8e + j, j = 0..7.
  output logic      [7:0][15:0] rand_o
);
  /// Cycles from valid_i to valid_o: those of csd_philox4x32 (20 with the default).
  localparam int unsigned Latency = 10 * (MulStages + 1);

  // The unit's valid bit (its only reset state). The generator's own valid pipe is not used:
  // its input is tied low and its output collected as unused (synthesis removes both); the
  // benches check that the results come out Latency cycles after their inputs.
  logic unused_philox_valid;

  csd_valid_pipe #(
    .Depth(Latency)
  ) u_valid_pipe (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(valid_i),
    .valid_o(valid_o)
  );

  // ---- The generator: counter (e lo, e hi, step lo, step hi), key (seed lo, seed hi) ---------
  logic [3:0][31:0] ctr;
  logic [1:0][31:0] key;
  logic [3:0][31:0] words;

  assign ctr = {step_i[63:32], step_i[31:0], {3'b0, group_i[60:32]}, group_i[31:0]};
  assign key = {seed_i[63:32], seed_i[31:0]};

  csd_philox4x32 #(
    .MulStages(MulStages)
  ) u_philox (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(1'b0),
    .ctr_i  (ctr),
    .key_i  (key),
    .valid_o(unused_philox_valid),
    .words_o(words)
  );

  // rand_o[2w] = words[w][15:0], rand_o[2w + 1] = words[w][31:16]: the same 128 bits.
  assign rand_o = words;

endmodule
