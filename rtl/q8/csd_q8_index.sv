// csd_q8_index: the code of one element of a q8 block being written, one per clock.
//
// From q = |x| * r (binary32 bits; r = 1 / absmax of the block) this finds the magnitude index
// k = the number of thresholds <= q (docs/state-formats.md, "Quantization", step 5; Q8Index and
// QuantizeBlockQ8 of hls/include/csdkit/hls/state_q8.h): thresholds TM[0..126] of the signed map
// or TU[0..254] of the unsigned map, compared as unsigned 32-bit integers (for non-negative
// binary32 values the bit order is the value order; q is compared as the C++ core compares it,
// all 32 bits). Then the non-zero rule: k = 0 and x non-zero (as read under the policy) gives
// k = 1. The code is (sign << 7) | k for the signed map, k for the unsigned map.
//
// Algorithm: a pipelined binary search, one step (one comparison) per stage. The tables have
// 2^7 - 1 and 2^8 - 1 entries, so the search trees are perfect: with the index bits above b
// decided (k, lower bits 0), step b compares q with T[k | (2^b - 1)] and sets bit b of k when
// that threshold is <= q. The unsigned map takes 8 steps (b = 7..0); the signed map skips
// b = 7 (bit 7 stays 0), so both give a result after the same 8 stages. Stage s reads a
// threshold ROM of 2^s (unsigned) + 2^(s-1) (signed) entries addressed by the bits decided so
// far; the synthesiser folds the constant address bits. The non-zero rule and the code are
// formed in the last stage, behind its comparison.
//
// Why not a parallel compare: 127 + 255 comparators of 32 bits against constants (~12 LUTs each
// on a carry chain) and a thermometer-to-count stage would take ~4600 LUTs per lane; the search
// takes ~500 LUTs and ~320 FFs (rtl/q8/README.md) for the same one result per clock, at 8
// cycles of latency.

`default_nettype none

module csd_q8_index (
  /// Clock.
  input  wire logic        clk_i,
  /// Synchronous reset, active low (clears the valid pipeline only).
  input  wire logic        rst_ni,
  /// The inputs below are valid: start a search.
  input  wire logic        valid_i,
  /// q = |x| * r as binary32 bits (non-negative in the quantizer; compared as unsigned).
  input  wire logic [31:0] q_i,
  /// 1: signed map S (thresholds TM, code = sign | k); 0: unsigned map U (thresholds TU).
  input  wire logic        signed_map_i,
  /// Sign bit of x (bit 7 of a signed-map code; ignored for the unsigned map).
  input  wire logic        sign_i,
  /// x is non-zero as read under the launch's policy (DAZ: a subnormal x is zero): an index 0
  /// becomes 1.
  input  wire logic        nonzero_i,
  /// code_o holds the code of the search started Latency cycles earlier.
  output logic             valid_o,
  /// The element's 8-bit code.
  output logic [7:0]       code_o
);
  /// Search steps: the unsigned map's tree depth (8; the signed map's 7 take as long).
  localparam int unsigned Steps = 8;
  /// Cycles from valid_i to valid_o: one per search step, the code formed in the last.
  localparam int unsigned Latency = Steps;

  csd_valid_pipe #(
    .Depth(Latency)
  ) u_valid_pipe (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(valid_i),
    .valid_o(valid_o)
  );

  /// What each search stage holds.
  typedef struct packed {
    logic [31:0] q;
    logic [7:0]  k;           // index bits decided so far; the undecided ones are 0
    logic        signed_map;
    logic        sign;
    logic        nonzero;
  } search_t;

  // st[s]: the input of step s (s = 0: the ports; s > 0: the register after step s - 1).
  search_t st [Steps];

  assign st[0] = '{q: q_i, k: 8'd0, signed_map: signed_map_i, sign: sign_i,
                   nonzero: nonzero_i};

  for (genvar s = 0; s < Steps; s++) begin : g_step
    localparam int unsigned B = Steps - 1 - s;  // the index bit this step decides

    // The threshold at the middle of the remaining range: index k | (2^B - 1). Its bit B is 0,
    // so the index is never the (absent) entry 127 / 255.
    logic [7:0]  idx;
    logic [31:0] thr;
    logic        take;

    assign idx = st[s].k | 8'((1 << B) - 1);
    if (B == 7) begin : g_top
      // Signed map: its 127 thresholds are all below index 128, bit 7 stays 0.
      assign thr = csd_q8_tables_pkg::q8_unsigned_thr(idx);
      assign take = !st[s].signed_map && thr <= st[s].q;
    end else begin : g_mid
      // Signed map: k < 128, so idx[7] = 0 and idx[6:0] is the index.
      assign thr = st[s].signed_map ? csd_q8_tables_pkg::q8_signed_thr(idx[6:0])
                                    : csd_q8_tables_pkg::q8_unsigned_thr(idx);
      assign take = thr <= st[s].q;
    end

    if (s < Steps - 1) begin : g_next
      search_t st_d, st_q;

      always_comb begin
        st_d = st[s];
        st_d.k[B] = take;
      end

      always_ff @(posedge clk_i) begin
        st_q <= st_d;
      end
      assign st[s+1] = st_q;
    end else begin : g_code
      // ---- Last step: the non-zero rule and the code --------------------------------------
      logic [7:0] k, code_d, code_q;

      always_comb begin
        k = st[s].k;
        k[0] = take;
        if (k == 8'd0 && st[s].nonzero) begin
          k = 8'd1;  // a non-zero value never becomes zero
        end
        code_d = st[s].signed_map ? {st[s].sign, k[6:0]} : k;
      end

      always_ff @(posedge clk_i) begin
        code_q <= code_d;
      end
      assign code_o = code_q;
    end
  end

endmodule
