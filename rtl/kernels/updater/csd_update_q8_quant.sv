// csd_update_q8_quant: one moment's new binary32 values, one element word (Lanes values) per
// cycle from the lanes, quantized block by block into 8-bit codes and one absmax per block of
// 256 (QuantizeBlockQ8 of hls/include/csdkit/hls/state_q8.h, docs/state-formats.md), and the
// codes packed into memory words (4 element words per word, element e of the word in byte e).
//
//   x --+--> csd_q8_absmax --> csd_q8_scale --> r FIFO (r and flags per block)
//       |      (block's absmax, non-finite, tiny)       | head
//       +--> block FIFO (element words) --- pop when the head block's r is known -->
//              |x| * r (csd_fp_mul, policy) --> csd_q8_index (non-zero rule, sign)
//              --> flags override --> pack 4 beats --> word
//
// The block FIFO: a block's codes need its r, known LatAbs + LAT_SCALE cycles after the block's
// LAST element word, so its element words wait in a FIFO (a block RAM) and leave, one per cycle,
// once the r FIFO holds their block's r; the block's last element word pops that r. The input
// comes at most one element word per cycle and the output drains at one per cycle from the
// moment r is known, so the FIFO never holds more than one block plus the words that arrive
// while r is computed (Beats + LatAbs + LAT_SCALE + 1), and at most two r are pending: no
// back-pressure (the core's credits count the words in here too; overflow is asserted).
// Blocks must be whole (Beats element words each): the core checks that n is a multiple of 256.
//
// A block with a NaN or an infinity stores the canonical NaN and codes 0x00; a finite block
// whose absmax is below 2^-126 (zero or subnormal) stores +0 and sign-only codes (signed map)
// or 0x00 (unsigned map); the flags come from csd_q8_absmax and replace the searched code.
// |x| enters the multiplier as is: under DAZ the multiplier reads a subnormal |x| as zero,
// which is the model's q = f.Mul(f.Mul(|x|, 1), r); the non-zero flag is formed the same way.

`default_nettype none

module csd_update_q8_quant #(
  /// binary32 lanes per element word (a power of two, 2..16).
  parameter int unsigned Lanes = 16,
  /// The build's fp policy: 1 FTZ/DAZ, 0 IEEE (the product |x| * r and the non-zero test).
  parameter bit FtzDaz = 1'b0,
  /// 1: signed map (m: sign-magnitude codes); 0: unsigned map (v).
  parameter bit SignedMap = 1'b1,
  /// Bits per memory word (derived).
  localparam int unsigned WordBits = Lanes * 32
) (
  /// Clock.
  input  wire logic                     clk_i,
  /// Synchronous reset, active low (valid pipelines, block state and the packing position).
  input  wire logic                     rst_ni,
  /// A new stream: the codes word packing restarts at its first byte.
  input  wire logic                     clear_i,
  /// An element word of new values is on x_i.
  input  wire logic                     valid_i,
  /// This element word is the last of its block.
  input  wire logic                     blk_last_i,
  /// The values, binary32 (lane j = element j of the element word).
  input  wire logic [Lanes-1:0][31:0]   x_i,
  /// A block's absmax is on absmax_o (LatAbs cycles after the block's last element word).
  output logic                          blk_valid_o,
  /// The block's absmax to store: the canonical NaN, +0 or max |x|.
  output logic      [31:0]              absmax_o,
  /// The block reads back non-finite (its absmax is the canonical NaN).
  output logic                          blk_nonfinite_o,
  /// An element word's codes left the search (one per valid_i, Latency cycles later).
  output logic                          beat_o,
  /// A codes word is complete (with every fourth beat_o).
  output logic                          word_valid_o,
  /// The codes word: element word k of the four in bits [8 Lanes k +: 8 Lanes].
  output logic      [WordBits-1:0]      word_o
);
  import csd_update_pkg::*;

  localparam int unsigned LaneBits = $clog2(Lanes);
  /// Element words per block.
  localparam int unsigned Beats = (1 << Q8_BLOCK_BITS) / Lanes;
  localparam int unsigned LatAbs = q8_absmax_latency(Lanes);
  /// The block FIFO: one block and the element words that arrive while its r is computed.
  localparam int unsigned BlkDepth = 1 << $clog2(Beats + LatAbs + LAT_SCALE + 2);

  if (Lanes < 2 || Lanes > 16 || (1 << LaneBits) != Lanes) begin : g_bad_lanes
    $error("csd_update_q8_quant: Lanes must be a power of two in 2..16");
  end

  // ---- Block: absmax, flags, r = 1 / absmax -----------------------------------------------------
  logic        abs_valid, abs_nf, abs_tiny, scale_valid, nf_s, tiny_s;
  logic [31:0] abs_val, scale;

  csd_q8_absmax #(
    .Lanes(Lanes)
  ) u_absmax (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .valid_i    (valid_i),
    .last_i     (blk_last_i),
    .x_i        (x_i),
    .valid_o    (abs_valid),
    .absmax_o   (abs_val),
    .nonfinite_o(abs_nf),
    .tiny_o     (abs_tiny)
  );

  csd_q8_scale #(
    .BitsPerStage(DIGIT_BITS_PER_STAGE)
  ) u_scale (
    .clk_i   (clk_i),
    .rst_ni  (rst_ni),
    .valid_i (abs_valid),
    .absmax_i(abs_val),
    .valid_o (scale_valid),
    .scale_o (scale)
  );

  // The flags travel beside the division (the next block's may come while it runs).
  csd_delay #(.Width(2), .Depth(LAT_SCALE)) u_d_flags (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i({abs_nf, abs_tiny}), .data_o({nf_s, tiny_s})
  );

  // Each block's r and flags, in block order, until the block's last element word leaves.
  logic        r_in_ready, r_valid, r_pop, nf_q, tiny_q;
  logic [31:0] r_q;
  logic [2:0]  r_count;

  csd_fifo #(
    .Width (34),
    .Depth (4),
    .OutReg(1'b0)
  ) u_r_fifo (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .in_valid_i (scale_valid),
    .in_ready_o (r_in_ready),
    .in_data_i  ({nf_s, tiny_s, scale}),
    .out_valid_o(r_valid),
    .out_ready_i(r_pop),
    .out_data_o ({nf_q, tiny_q, r_q}),
    .count_o    (r_count)
  );

  assign blk_valid_o = abs_valid;
  assign absmax_o = abs_val;
  assign blk_nonfinite_o = abs_nf;

  // ---- Element words: the block FIFO, |x| * r, the search ---------------------------------------
  logic                        blk_in_ready, blk_valid, line_valid, line_last;
  logic [Lanes-1:0][31:0]      line_x;
  logic [$clog2(BlkDepth):0]   blk_count;

  csd_fifo #(
    .Width (WordBits + 1),
    .Depth (BlkDepth),
    .OutReg(1'b0)
  ) u_blk_fifo (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .in_valid_i (valid_i),
    .in_ready_o (blk_in_ready),
    .in_data_i  ({blk_last_i, x_i}),
    .out_valid_o(blk_valid),
    .out_ready_i(line_valid),
    .out_data_o ({line_last, line_x}),
    .count_o    (blk_count)
  );

  // An element word leaves when its block's r is known; the block's last one pops the r.
  assign line_valid = blk_valid && r_valid;
  assign r_pop = line_valid && line_last;

  // Per lane: the non-zero flag as read under the policy, the sign; they meet q at the search.
  logic [Lanes-1:0]       nonzero, sign, nonzero_q, sign_q, sign_out;
  logic [Lanes-1:0]       mul_vld, idx_vld;
  logic [Lanes-1:0][31:0] q;
  logic [Lanes-1:0][7:0]  code, code_out;
  logic [1:0]             blk_flags;  // {non-finite, tiny} of the block, at the search's output

  for (genvar j = 0; j < Lanes; j++) begin : g_lane
    assign nonzero[j] = FtzDaz ? (line_x[j][30:23] != 8'h00) : (line_x[j][30:0] != 31'h0);
    assign sign[j] = line_x[j][31];

    csd_fp_mul #(.FtzDaz(FtzDaz)) u_mul_q (
      .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(line_valid), .a_i({1'b0, line_x[j][30:0]}),
      .b_i(r_q), .valid_o(mul_vld[j]), .result_o(q[j])
    );

    csd_q8_index u_index (
      .clk_i       (clk_i),
      .rst_ni      (rst_ni),
      .valid_i     (mul_vld[j]),
      .q_i         (q[j]),
      .signed_map_i(SignedMap),
      .sign_i      (sign_q[j]),
      .nonzero_i   (nonzero_q[j]),
      .valid_o     (idx_vld[j]),
      .code_o      (code[j])
    );

    // A non-finite block: 0x00; a tiny block: the sign alone (signed map) or 0x00.
    assign code_out[j] = blk_flags[1] ? 8'h00 :
                         blk_flags[0] ? (SignedMap ? {sign_out[j], 7'h00} : 8'h00) : code[j];
  end

  csd_delay #(.Width(2 * Lanes), .Depth(LAT_MUL)) u_d_nz (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i({nonzero, sign}), .data_o({nonzero_q, sign_q})
  );
  csd_delay #(.Width(Lanes), .Depth(LAT_IDX)) u_d_sign (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(sign_q), .data_o(sign_out)
  );
  csd_delay #(.Width(2), .Depth(LAT_MUL + LAT_IDX)) u_d_blk_flags (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i({nf_q, tiny_q}), .data_o(blk_flags)
  );

  // ---- Packing: four element words per codes word -----------------------------------------------
  logic [1:0]                   pos_q;
  logic [2:0][Lanes-1:0][7:0]   pack_q;

  assign beat_o = idx_vld[0];
  assign word_valid_o = beat_o && (pos_q == 2'd3);
  assign word_o = {code_out, pack_q};

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      pos_q <= '0;
    end else if (clear_i) begin
      pos_q <= '0;
    end else if (beat_o) begin
      pos_q <= pos_q + 2'd1;
    end
  end

  always_ff @(posedge clk_i) begin
    if (beat_o && pos_q != 2'd3) pack_q[pos_q] <= code_out;
  end

`ifndef SYNTHESIS
  // The FIFOs never refuse a word, every lane's units run in step, and the codes come
  // LAT_MUL + LAT_IDX cycles after their element word left the block FIFO.
  logic beat_exp;
  csd_valid_pipe #(.Depth(LAT_MUL + LAT_IDX)) u_beat_exp (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(line_valid), .valid_o(beat_exp)
  );
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      assert (!valid_i || blk_in_ready)
        else $error("csd_update_q8_quant: block FIFO overflow");
      assert (!scale_valid || r_in_ready)
        else $error("csd_update_q8_quant: r FIFO overflow");
      assert (idx_vld == {Lanes{beat_exp}})
        else $error("csd_update_q8_quant: unit latencies differ from csd_update_pkg");
    end
  end
`endif
  logic unused_fifo;
  assign unused_fifo = ^{idx_vld, blk_count, r_count, blk_in_ready, r_in_ready};

endmodule
