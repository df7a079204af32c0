// csd_update_merge: the streaming sparse-gradient decoder of the main pass, MergeDecode of
// hls/include/csdkit/hls/sparse.h, one word of Lanes dense gradient elements per cycle.
//
// Dense word w holds elements w*Lanes .. w*Lanes + Lanes-1, all in block b = (w*Lanes) >> 16 at
// in-block offsets o0 .. o0 + Lanes-1 (o0 a multiple of Lanes). The decoder keeps the next
// unread entry k and a window of the next Lanes entries k .. k+Lanes-1 (offset and raw value).
// Window entry i is a hit when it exists, belongs to block b (k + i < blk[b+1]) and its offset
// lies in the word (offset[15:log2 Lanes] == o0[15:log2 Lanes]); hits of a valid stream form a
// prefix of the window (offsets ascend), and the c leading hits are the word's entries. Lane j
// takes the value of the hit whose offset equals o0 + j (each lane compares its own offset with
// the window's entries: an index selects whether a value is taken, never an address), else +0;
// then k advances by c. Values leave raw (fp32 bits, or fp16/bf16 in bits [15:0]) and are
// widened by the lanes exactly as a dense gradient is.
//
// A word is emitted once its entries are known: c == Lanes, or window entry c exists and is a
// miss, or entry c is past the block's end; and once values k .. k+c-1 are present. Entries
// arrive through two queues of 4 * Lanes entries (offsets: 2 * Lanes per index word; values:
// Lanes per fp32 word or 2 * Lanes per fp16/bf16 word), each refilled with a whole word when it
// has room for one, so a stream of any density (up to every element present) sustains one word
// per cycle. One bubble per sparse block (2^16 / Lanes words) loads the block's end from the
// table. The stream must have passed validation (csd_update_blk_check, csd_update_idx_check).

`default_nettype none

module csd_update_merge #(
  /// binary32 lanes per word.
  parameter int unsigned Lanes = 16,
  /// Bits per word (derived).
  localparam int unsigned WordBits = Lanes * 32
) (
  /// Clock.
  input  wire logic                   clk_i,
  /// Synchronous reset, active low.
  input  wire logic                   rst_ni,
  /// Begin a pass of words_i words (at least 1): all streams start at their first word.
  input  wire logic                   start_i,
  /// Dense words of the pass, ceil(n / Lanes) (stable during the pass).
  input  wire logic [31:0]            words_i,
  /// Values are 16-bit (fp16 / bf16), 2 * Lanes per word; else binary32, Lanes per word.
  input  wire logic                   half_i,
  /// A block table entry is available (the stream starts at blk[0]).
  input  wire logic                   blk_valid_i,
  /// The entry is taken.
  output logic                        blk_ready_o,
  /// The entry.
  input  wire logic [31:0]            blk_i,
  /// An index word is available.
  input  wire logic                   idx_valid_i,
  /// The index word is taken.
  output logic                        idx_ready_o,
  /// The index word: offset j in bits [16 j +: 16].
  input  wire logic [WordBits-1:0]    idx_i,
  /// A value word is available.
  input  wire logic                   val_valid_i,
  /// The value word is taken.
  output logic                        val_ready_o,
  /// The value word: binary32 j in bits [32 j +: 32], or 16-bit j in bits [16 j +: 16].
  input  wire logic [WordBits-1:0]    val_i,
  /// A dense gradient word is available.
  output logic                        valid_o,
  /// The word is taken.
  input  wire logic                   ready_i,
  /// Dense gradient word, raw: lane j in bits [32 j +: 32] (fp16/bf16 zero-extended).
  output logic      [WordBits-1:0]    grad_o
);
  localparam int unsigned LaneBits = $clog2(Lanes);
  localparam int unsigned QEntries = 4 * Lanes;
  localparam int unsigned QBits = $clog2(QEntries);
  /// Bits of the word index within a block.
  localparam int unsigned InBlockBits = csd_update_pkg::BLOCK_BITS - LaneBits;

  // ---- State ------------------------------------------------------------------------------------
  logic        active_q, skip_q, blk_valid_q;
  logic [31:0] word_q, blk_end_q, k_q, idx_tail_q, val_tail_q;
  logic [QEntries-1:0][15:0] idx_mem_q;
  logic [QEntries-1:0][31:0] val_mem_q;

  // ---- Window -----------------------------------------------------------------------------------
  logic [31:0] idx_avail, val_avail, blk_left;
  logic [Lanes-1:0][15:0] win_idx;
  logic [Lanes-1:0][31:0] win_val;
  logic [Lanes-1:0]       hit;

  assign idx_avail = idx_tail_q - k_q;
  assign val_avail = val_tail_q - k_q;
  assign blk_left = blk_end_q - k_q;

  always_comb begin
    for (int unsigned i = 0; i < Lanes; i++) begin
      logic [QBits-1:0] slot;
      slot = k_q[QBits-1:0] + QBits'(i);
      win_idx[i] = idx_mem_q[slot];
      win_val[i] = val_mem_q[slot];
      hit[i] = (idx_avail > 32'(i)) && (blk_left > 32'(i)) &&
               (win_idx[i][15:LaneBits] == word_q[InBlockBits-1:0]);
    end
  end

  // c: the number of leading hits.
  logic [LaneBits:0] take;
  always_comb begin
    take = (LaneBits + 1)'(Lanes);
    for (int i = Lanes - 1; i >= 0; i--) begin
      if (!hit[i]) take = (LaneBits + 1)'(i);
    end
  end

  // Lane j: the leading hit whose offset is o0 + j, else +0.
  logic [Lanes-1:0][31:0] lanes;
  always_comb begin
    for (int unsigned j = 0; j < Lanes; j++) begin
      lanes[j] = '0;
      for (int unsigned i = 0; i <= j; i++) begin
        if ((LaneBits + 1)'(i) < take && win_idx[i][LaneBits-1:0] == LaneBits'(j)) begin
          lanes[j] = lanes[j] | win_val[i];
        end
      end
    end
  end

  // The word's entries are known, and so are their values.
  logic decided, emit;
  logic out_ready;
  assign decided = (take == (LaneBits + 1)'(Lanes)) || (idx_avail > 32'(take)) ||
                   (blk_left <= 32'(take));
  assign emit = active_q && blk_valid_q && decided && (val_avail >= 32'(take)) && out_ready;

  // ---- Queue refill: a whole word when it fits --------------------------------------------------
  logic idx_room, val_room;
  assign idx_room = (32'(QEntries) - idx_avail) >= 32'(2 * Lanes);
  assign val_room = (32'(QEntries) - val_avail) >= (half_i ? 32'(2 * Lanes) : 32'(Lanes));
  assign idx_ready_o = active_q && idx_room;
  assign val_ready_o = active_q && val_room;

  logic idx_take, val_take;
  assign idx_take = idx_valid_i && idx_ready_o;
  assign val_take = val_valid_i && val_ready_o;

  always_ff @(posedge clk_i) begin
    if (idx_take) begin
      // Index words fill 2 * Lanes-aligned halves of the queue.
      idx_mem_q[32'(idx_tail_q[QBits-1:LaneBits+1]) * (2 * Lanes) +: 2 * Lanes] <= idx_i;
    end
    if (val_take) begin
      if (half_i) begin
        for (int unsigned e = 0; e < 2 * Lanes; e++) begin
          val_mem_q[32'(val_tail_q[QBits-1:LaneBits+1]) * (2 * Lanes) + e] <=
              {16'h0000, val_i[16 * e +: 16]};
        end
      end else begin
        val_mem_q[32'(val_tail_q[QBits-1:LaneBits]) * Lanes +: Lanes] <= val_i;
      end
    end
  end

  // ---- Control ----------------------------------------------------------------------------------
  logic block_start_next;
  assign block_start_next = (word_q[InBlockBits-1:0] + InBlockBits'(1)) == '0;
  assign blk_ready_o = skip_q || (active_q && !blk_valid_q);

  logic        active_d, skip_d, blk_valid_d;
  logic [31:0] word_d, k_d, idx_tail_d, val_tail_d;

  // A table entry is taken to skip blk[0] or to load the block's end; an emitted word moves
  // to the next word (and, at a block boundary, asks for the next block's end).
  always_comb begin
    active_d = active_q;
    skip_d = skip_q;
    blk_valid_d = blk_valid_q;
    word_d = word_q;
    k_d = k_q;
    idx_tail_d = idx_tail_q;
    val_tail_d = val_tail_q;
    if (start_i) begin
      active_d = 1'b1;
      skip_d = 1'b1;
      blk_valid_d = 1'b0;
      word_d = '0;
      k_d = '0;
      idx_tail_d = '0;
      val_tail_d = '0;
    end else begin
      if (blk_valid_i && blk_ready_o) begin
        if (skip_q) begin
          skip_d = 1'b0;
        end else begin
          blk_valid_d = 1'b1;
        end
      end
      if (emit) begin
        word_d = word_q + 32'd1;
        k_d = k_q + 32'(take);
        if (word_q + 32'd1 == words_i) active_d = 1'b0;
        if (block_start_next) blk_valid_d = 1'b0;
      end
      if (idx_take) idx_tail_d = idx_tail_q + 32'(2 * Lanes);
      if (val_take) val_tail_d = val_tail_q + (half_i ? 32'(2 * Lanes) : 32'(Lanes));
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      active_q <= 1'b0;
      skip_q <= 1'b0;
      blk_valid_q <= 1'b0;
      word_q <= '0;
      k_q <= '0;
      idx_tail_q <= '0;
      val_tail_q <= '0;
    end else begin
      active_q <= active_d;
      skip_q <= skip_d;
      blk_valid_q <= blk_valid_d;
      word_q <= word_d;
      k_q <= k_d;
      idx_tail_q <= idx_tail_d;
      val_tail_q <= val_tail_d;
    end
  end

  // The block's end: datapath, meaningful while blk_valid_q.
  always_ff @(posedge clk_i) begin
    if (blk_valid_i && blk_ready_o && !skip_q) blk_end_q <= blk_i;
  end

  // ---- Output buffer ----------------------------------------------------------------------------
  logic [1:0] out_count;
  csd_fifo #(
    .Width (WordBits),
    .Depth (2),
    .OutReg(1'b0)
  ) u_out (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .in_valid_i (emit),
    .in_ready_o (out_ready),
    .in_data_i  (lanes),
    .out_valid_o(valid_o),
    .out_ready_i(ready_i),
    .out_data_o (grad_o),
    .count_o    (out_count)
  );

  logic unused_bits;
  assign unused_bits = ^{out_count, word_q[31:InBlockBits], idx_tail_q[LaneBits:0],
                         val_tail_q[LaneBits-1:0]};

endmodule
