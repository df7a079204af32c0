// csd_update_idx_check: the index half of ValidateSparse (hls/include/csdkit/hls/sparse.h), a
// whole index word (2 * Lanes entries) per cycle.
//
// For every block b and every entry k of it (blk[b] <= k < blk[b+1]), in entry order:
//   x = idx[k] >= BlockSize(n, b)                       -> ERR_OUT_OF_RANGE at k
//   k is not the block's first entry and x == idx[k-1]  -> ERR_DUPLICATE at k
//   k is not the block's first entry and x <  idx[k-1]  -> ERR_UNSORTED at k
// (first matching rule of the first offending entry). Only the last block can be partial, so
// only its entries are range-checked (an offset is 16 bits: every other block holds it).
//
// The block starts come from a second read of the block table (entries blk[1..nb]; blk[0] = 0
// was checked by csd_update_blk_check). Each cycle checks the entries of the current index
// word that belong to the current block; a block ending inside a word costs one extra cycle
// (and so does each empty block), so the pass takes about nnz / (2 * Lanes) + nb cycles.

`default_nettype none

module csd_update_idx_check #(
  /// 32-bit lanes per word (an index word holds 2 * Lanes offsets).
  parameter int unsigned Lanes = 16
) (
  /// Clock.
  input  wire logic                  clk_i,
  /// Synchronous reset, active low.
  input  wire logic                  rst_ni,
  /// Begin a check (both streams start at their first word; requires nnz > 0).
  input  wire logic                  start_i,
  /// Blocks of the subgroup, ceil(n / 2^16), at least 1 (stable while checking).
  input  wire logic [16:0]           nb_i,
  /// Elements of the last block, 1 .. 2^16 (stable while checking).
  input  wire logic [16:0]           last_size_i,
  /// A block table entry is available (the stream starts at blk[0]).
  input  wire logic                  ent_valid_i,
  /// The entry is taken.
  output logic                       ent_ready_o,
  /// The entry.
  input  wire logic [31:0]           ent_i,
  /// An index word is available.
  input  wire logic                  idx_valid_i,
  /// The index word is taken (all its entries checked).
  output logic                       idx_ready_o,
  /// The index word: offset j in bits [16 j +: 16].
  input  wire logic [Lanes*32-1:0]   idx_i,
  /// The check finished this cycle (err_o / pos_o valid from now until the next start).
  output logic                       done_o,
  /// Error bit (csd_update_pkg::ERR_*), 0 for a valid stream.
  output logic      [31:0]           err_o,
  /// Offending entry index.
  output logic      [31:0]           pos_o
);
  import csd_update_pkg::*;

  localparam int unsigned Entries = 2 * Lanes;  // offsets per index word
  localparam int unsigned PosBits = $clog2(Entries);

  logic               busy_q, busy_d;
  logic               skip_q, skip_d;          // blk[0] not taken yet
  logic [16:0]        blk_q, blk_d;            // current block b
  logic [31:0]        next_q, next_d;          // blk[b + 1]: first entry of the next block
  logic               next_valid_q, next_valid_d;
  logic [31:0]        base_q, base_d;          // entry index of the word's offset 0
  logic [PosBits-1:0] pos_q, pos_d;            // first unchecked offset of the word
  logic [15:0]        last_q, last_d;          // previous offset of the block
  logic               first_q, first_d;        // the next entry is its block's first
  logic [31:0]        err_q, err_d, epos_q, epos_d;
  logic               done;

  // ---- The segment of the word in the current block: offsets [pos_q, seg_end) -------------------
  logic [31:0]        entry, rel;
  logic               block_over;
  logic [PosBits:0]   seg_end;
  logic [PosBits-1:0] seg_last;  // seg_end - 1: the segment's last offset (seg_end >= 1)
  logic               last_block;

  assign entry = base_q + 32'(pos_q);
  assign block_over = next_q <= entry;
  assign rel = next_q - base_q;
  assign seg_end = (rel >= 32'(Entries)) ? (PosBits + 1)'(Entries) : rel[PosBits:0];
  assign seg_last = PosBits'(seg_end - (PosBits + 1)'(1));
  assign last_block = blk_q == nb_i - 17'd1;

  logic [Entries-1:0][15:0] x;
  logic [Entries-1:0][31:0] code;
  assign x = idx_i;

  always_comb begin
    for (int unsigned i = 0; i < Entries; i++) begin
      logic [15:0] prev;
      logic        first, in_seg;
      prev = (i == 0) ? last_q : x[i-1];
      first = first_q && (PosBits'(i) == pos_q);
      in_seg = (PosBits'(i) >= pos_q) && ((PosBits + 1)'(i) < seg_end);
      code[i] = '0;
      if (in_seg) begin
        if (last_block && {1'b0, x[i]} >= last_size_i) begin
          code[i] = ERR_OUT_OF_RANGE;
        end else if (!first && x[i] == prev) begin
          code[i] = ERR_DUPLICATE;
        end else if (!first && x[i] < prev) begin
          code[i] = ERR_UNSORTED;
        end
      end
    end
  end

  // First offending offset of the segment.
  logic               seg_err;
  logic [PosBits-1:0] err_lane;
  logic [31:0]        err_code;
  always_comb begin
    seg_err = 1'b0;
    err_lane = '0;
    err_code = '0;
    for (int i = Entries - 1; i >= 0; i--) begin
      if (code[i] != '0) begin
        seg_err = 1'b1;
        err_lane = PosBits'(i);
        err_code = code[i];
      end
    end
  end

  // ---- Control ----------------------------------------------------------------------------------
  always_comb begin
    busy_d = busy_q;
    skip_d = skip_q;
    blk_d = blk_q;
    next_d = next_q;
    next_valid_d = next_valid_q;
    base_d = base_q;
    pos_d = pos_q;
    last_d = last_q;
    first_d = first_q;
    err_d = err_q;
    epos_d = epos_q;
    ent_ready_o = 1'b0;
    idx_ready_o = 1'b0;
    done = 1'b0;
    if (start_i) begin
      busy_d = 1'b1;
      skip_d = 1'b1;
      blk_d = '0;
      next_valid_d = 1'b0;
      base_d = '0;
      pos_d = '0;
      first_d = 1'b1;
      err_d = '0;
      epos_d = '0;
    end else if (busy_q) begin
      if (skip_q || !next_valid_q) begin
        // Load blk[b + 1] (after skipping blk[0]).
        ent_ready_o = 1'b1;
        if (ent_valid_i) begin
          if (skip_q) begin
            skip_d = 1'b0;
          end else begin
            next_d = ent_i;
            next_valid_d = 1'b1;
          end
        end
      end else if (block_over) begin
        // Block b has no entries left: move to the next block, or finish after the last.
        blk_d = blk_q + 17'd1;
        first_d = 1'b1;
        next_valid_d = 1'b0;
        if (last_block) begin
          busy_d = 1'b0;
          done = 1'b1;
        end
      end else if (idx_valid_i) begin
        if (seg_err) begin
          err_d = err_code;
          epos_d = base_q + 32'(err_lane);
          busy_d = 1'b0;
          done = 1'b1;
        end else begin
          last_d = x[seg_last];
          first_d = 1'b0;
          if (seg_end == (PosBits + 1)'(Entries)) begin
            idx_ready_o = 1'b1;
            base_d = base_q + 32'(Entries);
            pos_d = '0;
          end else begin
            pos_d = seg_end[PosBits-1:0];
          end
        end
      end
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      busy_q <= 1'b0;
      skip_q <= 1'b0;
      blk_q <= '0;
      next_valid_q <= 1'b0;
      base_q <= '0;
      pos_q <= '0;
      first_q <= 1'b0;
      err_q <= '0;
      epos_q <= '0;
    end else begin
      busy_q <= busy_d;
      skip_q <= skip_d;
      blk_q <= blk_d;
      next_valid_q <= next_valid_d;
      base_q <= base_d;
      pos_q <= pos_d;
      first_q <= first_d;
      err_q <= err_d;
      epos_q <= epos_d;
    end
  end

  // Datapath registers (meaningful only with their valid / first flags).
  always_ff @(posedge clk_i) begin
    next_q <= next_d;
    last_q <= last_d;
  end

  assign done_o = done;
  assign err_o = err_d;
  assign pos_o = epos_d;

endmodule
