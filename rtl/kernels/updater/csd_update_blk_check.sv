// csd_update_blk_check: the block-table half of ValidateSparse (hls/include/csdkit/hls/sparse.h),
// one table entry per cycle, in the model's order:
//   blk[0] != 0                                  -> ERR_BLK_TABLE at 0
//   for b = 1 .. nb: blk[b] < blk[b-1]            -> ERR_BLK_TABLE at b
//                    blk[b] > nnz, or b == nb and blk[b] != nnz -> ERR_COUNT at b
// stopping at the first error. (nnz > n is checked by the controller before the table is read.)
// Entries are taken only while checking; what is left of the table is the controller's to
// drain.

`default_nettype none

module csd_update_blk_check (
  /// Clock.
  input  wire logic        clk_i,
  /// Synchronous reset, active low.
  input  wire logic        rst_ni,
  /// Begin a check (the entry stream starts at blk[0]).
  input  wire logic        start_i,
  /// Blocks of the subgroup, ceil(n / 2^16) (stable while checking).
  input  wire logic [16:0] nb_i,
  /// Sparse entries of the launch (stable while checking).
  input  wire logic [31:0] nnz_i,
  /// A table entry is available.
  input  wire logic        ent_valid_i,
  /// The entry is taken.
  output logic             ent_ready_o,
  /// The entry.
  input  wire logic [31:0] ent_i,
  /// The check finished this cycle (err_o / pos_o valid from now until the next start).
  output logic             done_o,
  /// Error bit (csd_update_pkg::ERR_*), 0 for a consistent table.
  output logic      [31:0] err_o,
  /// Offending table index.
  output logic      [31:0] pos_o
);
  import csd_update_pkg::*;

  logic        busy_q, busy_d;
  logic [16:0] idx_q, idx_d;
  logic [31:0] prev_q, prev_d, err_q, err_d, pos_q, pos_d;
  logic        done;
  logic [31:0] err_now;

  // The check of the entry at idx_q.
  always_comb begin
    err_now = '0;
    if (idx_q == '0) begin
      if (ent_i != '0) err_now = ERR_BLK_TABLE;
    end else if (ent_i < prev_q) begin
      err_now = ERR_BLK_TABLE;
    end else if (ent_i > nnz_i || (idx_q == nb_i && ent_i != nnz_i)) begin
      err_now = ERR_COUNT;
    end
  end

  assign ent_ready_o = busy_q;

  always_comb begin
    busy_d = busy_q;
    idx_d = idx_q;
    prev_d = prev_q;
    err_d = err_q;
    pos_d = pos_q;
    done = 1'b0;
    if (start_i) begin
      busy_d = 1'b1;
      idx_d = '0;
      prev_d = '0;
      err_d = '0;
      pos_d = '0;
    end else if (busy_q && ent_valid_i) begin
      prev_d = ent_i;
      idx_d = idx_q + 17'd1;
      if (err_now != '0) begin
        err_d = err_now;
        pos_d = 32'(idx_q);
      end
      if (err_now != '0 || idx_q == nb_i) begin
        busy_d = 1'b0;
        done = 1'b1;
      end
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      busy_q <= 1'b0;
      idx_q <= '0;
      prev_q <= '0;
      err_q <= '0;
      pos_q <= '0;
    end else begin
      busy_q <= busy_d;
      idx_q <= idx_d;
      prev_q <= prev_d;
      err_q <= err_d;
      pos_q <= pos_d;
    end
  end

  assign done_o = done;
  assign err_o = err_d;
  assign pos_o = pos_d;

endmodule
