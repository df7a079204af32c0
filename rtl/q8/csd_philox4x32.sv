// csd_philox4x32: the counter-based generator Philox4x32-10, one counter per clock.
//
// words = Philox4x32-10(ctr, key) exactly as Random123's philox4x32_R(10, ctr, key) and
// csdkit::hls::Philox4x32x10 (hls/include/csdkit/hls/state_q8.h) define it (Salmon, Moraes,
// Dror, Shaw, SC'11; docs/state-formats.md, "The random bits"). Each of the ten rounds maps
// (c0, c1, c2, c3) under the round key (k0, k1) to
//   (hi(M1 * c2) ^ c1 ^ k0,  lo(M1 * c2),  hi(M0 * c0) ^ c3 ^ k1,  lo(M0 * c0))
// with M0 = 0xD2511F53, M1 = 0xCD9E8D57 (32 x 32 -> 64-bit products); the key of round r is
// key + r * (0x9E3779B9, 0xBB67AE85) (mod 2^32 per word).
//
// Pipeline, per round: MulStages registers on the two products (with c1, c3 and the round key
// travelling beside them), then one register on the round's result (the XOR and the next round
// key). The result register of round r is the multiplier input register of round r + 1, so with
// the default MulStages = 1 a round maps onto multiplier blocks with input and product
// registers (DSP48E2: A/B and M registers); MulStages = 2 adds the output register (P). The
// key schedule is an adder per round and word beside the products, off the multiplier path.

`default_nettype none

module csd_philox4x32 #(
  /// Registers on each round's products (1..3): more give the multiplier blocks their
  /// internal pipeline registers, at one cycle of latency per round each.
  parameter int unsigned MulStages = 1
) (
  /// Clock.
  input  wire logic             clk_i,
  /// Synchronous reset, active low (clears the valid pipeline only).
  input  wire logic             rst_ni,
  /// ctr_i and key_i below are valid: start a generation.
  input  wire logic             valid_i,
  /// Counter, four 32-bit words; ctr_i[0] is Random123's ctr.v[0].
  input  wire logic [3:0][31:0] ctr_i,
  /// Key, two 32-bit words; key_i[0] is Random123's key.v[0].
  input  wire logic [1:0][31:0] key_i,
  /// words_o holds the output of the generation started Latency cycles earlier.
  output logic                  valid_o,
  /// The four output words; words_o[0] is Random123's result v[0].
  output logic      [3:0][31:0] words_o
);
  /// Rounds of Philox4x32-10.
  localparam int unsigned Rounds = 10;
  /// Cycles from valid_i to valid_o: per round MulStages product registers and one result
  /// register (20 with the default).
  localparam int unsigned Latency = Rounds * (MulStages + 1);

  /// The round multipliers (Random123's PHILOX_M4x32_0 and _1).
  localparam logic [31:0] PHILOX_M0 = 32'hD251_1F53;
  localparam logic [31:0] PHILOX_M1 = 32'hCD9E_8D57;
  /// The key increments per round, the Weyl sequence (PHILOX_W32_0 and _1).
  localparam logic [31:0] PHILOX_W0 = 32'h9E37_79B9;
  localparam logic [31:0] PHILOX_W1 = 32'hBB67_AE85;

  if (MulStages < 1 || MulStages > 3) begin : g_bad_mul_stages
    $error("csd_philox4x32: MulStages must be 1, 2 or 3");
  end

  csd_valid_pipe #(
    .Depth(Latency)
  ) u_valid_pipe (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(valid_i),
    .valid_o(valid_o)
  );

  /// What travels through the product registers of a round.
  typedef struct packed {
    logic [63:0]      p0;   // M0 * c0
    logic [63:0]      p1;   // M1 * c2
    logic [31:0]      c1;
    logic [31:0]      c3;
    logic [1:0][31:0] key;  // this round's key
  } prod_t;

  // ctr[r], key[r]: the input of round r (round 0: the ports; round r > 0: the result
  // register of round r - 1). The last round's key is not bumped, so key has one entry less.
  logic [3:0][31:0] ctr [Rounds+1];
  logic [1:0][31:0] key [Rounds];

  assign ctr[0] = ctr_i;
  assign key[0] = key_i;

  for (genvar r = 0; r < Rounds; r++) begin : g_round
    // ---- Products: MulStages registers --------------------------------------------------------
    prod_t prod_d;
    prod_t prod_q [MulStages];
    prod_t prod;

    assign prod_d.p0 = {32'b0, PHILOX_M0} * {32'b0, ctr[r][0]};
    assign prod_d.p1 = {32'b0, PHILOX_M1} * {32'b0, ctr[r][2]};
    assign prod_d.c1 = ctr[r][1];
    assign prod_d.c3 = ctr[r][3];
    assign prod_d.key = key[r];

    always_ff @(posedge clk_i) begin
      prod_q[0] <= prod_d;
    end
    for (genvar m = 1; m < MulStages; m++) begin : g_mul_stage
      always_ff @(posedge clk_i) begin
        prod_q[m] <= prod_q[m-1];
      end
    end
    assign prod = prod_q[MulStages-1];

    // ---- Result: the round function, registered -----------------------------------------------
    logic [3:0][31:0] ctr_d, ctr_q;

    assign ctr_d[0] = prod.p1[63:32] ^ prod.c1 ^ prod.key[0];
    assign ctr_d[1] = prod.p1[31:0];
    assign ctr_d[2] = prod.p0[63:32] ^ prod.c3 ^ prod.key[1];
    assign ctr_d[3] = prod.p0[31:0];

    always_ff @(posedge clk_i) begin
      ctr_q <= ctr_d;
    end
    assign ctr[r+1] = ctr_q;

    // The next round's key (the bump happens beside the XOR, off the multiplier path).
    if (r < Rounds - 1) begin : g_key
      logic [1:0][31:0] key_d, key_q;

      assign key_d[0] = prod.key[0] + PHILOX_W0;
      assign key_d[1] = prod.key[1] + PHILOX_W1;

      always_ff @(posedge clk_i) begin
        key_q <= key_d;
      end
      assign key[r+1] = key_q;
    end
  end

  assign words_o = ctr[Rounds];

endmodule
