// csd_update_blk_unpack: the block table (uint32 sp_blk words) as a stream of entries, one per
// cycle, in table order. A word is taken from the read port when its last entry is taken;
// clear_i restarts at entry 0 of the next word (each pass reads the table with its own
// command, and a pass that stops early leaves the rest of its word to the port's drain).

`default_nettype none

module csd_update_blk_unpack #(
  /// 32-bit entries per word.
  parameter int unsigned Lanes = 16
) (
  /// Clock.
  input  wire logic                  clk_i,
  /// Synchronous reset, active low.
  input  wire logic                  rst_ni,
  /// Restart at entry 0 of the next word.
  input  wire logic                  clear_i,
  /// A table word is available.
  input  wire logic                  word_valid_i,
  /// The word is taken (its last entry was taken).
  output logic                       word_ready_o,
  /// The table word.
  input  wire logic [Lanes*32-1:0]   word_i,
  /// An entry is available.
  output logic                       ent_valid_o,
  /// The consumer takes the entry.
  input  wire logic                  ent_ready_i,
  /// The entry.
  output logic      [31:0]           ent_o
);
  localparam int unsigned LaneBits = $clog2(Lanes);

  logic [LaneBits-1:0] lane_q, lane_d;
  logic                take;

  assign ent_valid_o = word_valid_i;
  assign ent_o = word_i[32 * lane_q +: 32];
  assign take = word_valid_i && ent_ready_i;
  assign word_ready_o = ent_ready_i && (lane_q == LaneBits'(Lanes - 1));

  always_comb begin
    lane_d = lane_q;
    if (clear_i) begin
      lane_d = '0;
    end else if (take) begin
      lane_d = lane_q + LaneBits'(1);
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      lane_q <= '0;
    end else begin
      lane_q <= lane_d;
    end
  end

endmodule
