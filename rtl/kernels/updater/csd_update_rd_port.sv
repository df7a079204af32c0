// csd_update_rd_port: one read channel of the updater core.
//
// The controller asks for `count_i` words from word `offset_i` of the array (req_i); the port
// presents that command on the channel (cmd_valid_o until cmd_ready_i), then accepts exactly
// `count_i` data words into a 2-entry skid buffer and hands them to the consumer in order.
// ready_o is a register (skid not full and words still expected), so it never depends
// combinationally on valid_i, and the port never accepts a word it did not ask for.
//
// drain_i discards words instead of handing them out (valid_o low): a pass that stops early
// (an error found half-way through a stream, or a table word with unused entries) still takes
// every word it commanded, which an AXI master needs. idle_o says the port has nothing
// outstanding: its command was accepted and all its words have been received and consumed.

`default_nettype none

module csd_update_rd_port #(
  /// Bits per word.
  parameter int unsigned Width = 512
) (
  /// Clock.
  input  wire logic                                clk_i,
  /// Synchronous reset, active low.
  input  wire logic                                rst_ni,
  // ---- Controller -------------------------------------------------------------------------------
  /// Issue a command (only when idle_o).
  input  wire logic                                req_i,
  /// Word offset of the first word, within the array.
  input  wire logic [csd_update_pkg::CMD_BITS-1:0] offset_i,
  /// Words to read, at least 1.
  input  wire logic [csd_update_pkg::CMD_BITS-1:0] count_i,
  /// Discard the words of the command instead of handing them to the consumer.
  input  wire logic                                drain_i,
  /// No command pending or words outstanding.
  output logic                                     idle_o,
  // ---- Channel: command -------------------------------------------------------------------------
  /// Command valid.
  output logic                                     cmd_valid_o,
  /// Command accepted.
  input  wire logic                                cmd_ready_i,
  /// Command: word offset within the array.
  output logic      [csd_update_pkg::CMD_BITS-1:0] cmd_offset_o,
  /// Command: words.
  output logic      [csd_update_pkg::CMD_BITS-1:0] cmd_count_o,
  // ---- Channel: data ----------------------------------------------------------------------------
  /// Data word valid.
  input  wire logic                                valid_i,
  /// Data word accepted.
  output logic                                     ready_o,
  /// Data word.
  input  wire logic [Width-1:0]                    data_i,
  // ---- Consumer ---------------------------------------------------------------------------------
  /// A word is available (never while draining).
  output logic                                     valid_o,
  /// The consumer takes the word.
  input  wire logic                                ready_i,
  /// The word.
  output logic      [Width-1:0]                    data_o
);
  logic                                cmd_pending_q, cmd_pending_d;
  logic [csd_update_pkg::CMD_BITS-1:0] offset_q, count_q, remaining_q, remaining_d;
  logic                                accept, skid_valid, skid_ready;
  logic [1:0]                          skid_count;

  assign accept = valid_i && ready_o;

  // A command is pending from req_i until accepted; words are expected until count arrived.
  always_comb begin
    cmd_pending_d = cmd_pending_q;
    remaining_d = remaining_q;
    if (req_i) begin
      cmd_pending_d = 1'b1;
      remaining_d = count_i;
    end else begin
      if (cmd_ready_i) cmd_pending_d = 1'b0;
      if (accept) remaining_d = remaining_q - 1'b1;
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      cmd_pending_q <= 1'b0;
      remaining_q <= '0;
    end else begin
      cmd_pending_q <= cmd_pending_d;
      remaining_q <= remaining_d;
    end
  end

  // The command's fields are datapath: meaningful only while cmd_pending_q is set.
  always_ff @(posedge clk_i) begin
    if (req_i) begin
      offset_q <= offset_i;
      count_q <= count_i;
    end
  end

  assign cmd_valid_o = cmd_pending_q;
  assign cmd_offset_o = offset_q;
  assign cmd_count_o = count_q;

  assign ready_o = (remaining_q != '0) && skid_ready;

  // The skid buffer: its ready (not full) is a register; a word leaves it when the consumer
  // takes it or when it is drained.
  csd_fifo #(
    .Width (Width),
    .Depth (2),
    .OutReg(1'b0)
  ) u_skid (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .in_valid_i (accept),
    .in_ready_o (skid_ready),
    .in_data_i  (data_i),
    .out_valid_o(skid_valid),
    .out_ready_i(drain_i || ready_i),
    .out_data_o (data_o),
    .count_o    (skid_count)
  );

  assign valid_o = skid_valid && !drain_i;
  assign idle_o = !cmd_pending_q && (remaining_q == '0) && !skid_valid;

  logic unused_count;
  assign unused_count = ^skid_count;

`ifndef SYNTHESIS
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      assert (!(req_i && !idle_o)) else $error("csd_update_rd_port: command while busy");
      assert (!(req_i && count_i == '0)) else $error("csd_update_rd_port: zero-word command");
    end
  end
`endif

endmodule
