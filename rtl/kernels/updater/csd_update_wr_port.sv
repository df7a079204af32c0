// csd_update_wr_port: one write channel of the updater core.
//
// The controller asks for a command of `count_i` words from word `offset_i` (req_i); the port
// presents it (cmd_valid_o until cmd_ready_i). The producer pushes words into the port's FIFO
// (Depth entries; the producer keeps count, with count_o, so it never pushes into a full FIFO);
// the port offers them on the data channel only once the command has been accepted, so a
// wrapper never sees data ahead of its command. The channel answers each command with one
// done_i pulse once all of its words are committed; idle_o is then set again.

`default_nettype none

module csd_update_wr_port #(
  /// Bits per word.
  parameter int unsigned Width = 512,
  /// FIFO entries, at least 1.
  parameter int unsigned Depth = 2,
  /// Width of the FIFO occupancy (derived).
  localparam int unsigned CountBits = $clog2(Depth + 1)
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
  /// Words to write, at least 1.
  input  wire logic [csd_update_pkg::CMD_BITS-1:0] count_i,
  /// No command pending and no acknowledgement outstanding.
  output logic                                     idle_o,
  // ---- Producer ---------------------------------------------------------------------------------
  /// Push a word (the FIFO must not be full).
  input  wire logic                                push_i,
  /// The word.
  input  wire logic [Width-1:0]                    data_i,
  /// Words in the FIFO (a register).
  output logic      [CountBits-1:0]                count_o,
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
  output logic                                     valid_o,
  /// Data word accepted.
  input  wire logic                                ready_i,
  /// Data word.
  output logic      [Width-1:0]                    data_o,
  /// All words of the command are committed (one pulse per command).
  input  wire logic                                done_i
);
  logic                                cmd_pending_q, cmd_pending_d, cmd_sent_q, cmd_sent_d;
  logic                                await_done_q, await_done_d;
  logic [csd_update_pkg::CMD_BITS-1:0] offset_q, count_q;
  logic                                fifo_valid, fifo_ready;

  // pending: req_i until accepted; sent: accepted (data may flow); await: until done_i.
  always_comb begin
    cmd_pending_d = cmd_pending_q;
    cmd_sent_d = cmd_sent_q;
    await_done_d = await_done_q;
    if (req_i) begin
      cmd_pending_d = 1'b1;
      cmd_sent_d = 1'b0;
      await_done_d = 1'b1;
    end else begin
      if (cmd_ready_i) cmd_pending_d = 1'b0;
      if (cmd_pending_q && cmd_ready_i) cmd_sent_d = 1'b1;
      if (done_i) await_done_d = 1'b0;
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      cmd_pending_q <= 1'b0;
      cmd_sent_q <= 1'b0;
      await_done_q <= 1'b0;
    end else begin
      cmd_pending_q <= cmd_pending_d;
      cmd_sent_q <= cmd_sent_d;
      await_done_q <= await_done_d;
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
  assign idle_o = !cmd_pending_q && !await_done_q;

  // Words are offered on the channel only after the command was accepted.
  csd_fifo #(
    .Width (Width),
    .Depth (Depth),
    .OutReg(1'b0)
  ) u_fifo (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .in_valid_i (push_i),
    .in_ready_o (fifo_ready),
    .in_data_i  (data_i),
    .out_valid_o(fifo_valid),
    .out_ready_i(cmd_sent_q && ready_i),
    .out_data_o (data_o),
    .count_o    (count_o)
  );

  assign valid_o = fifo_valid && cmd_sent_q;

`ifndef SYNTHESIS
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      assert (!(req_i && !idle_o)) else $error("csd_update_wr_port: command while busy");
      assert (!(req_i && count_i == '0)) else $error("csd_update_wr_port: zero-word command");
      assert (!(done_i && !await_done_q)) else $error("csd_update_wr_port: unexpected done");
      assert (!(push_i && !fifo_ready)) else $error("csd_update_wr_port: push into full FIFO");
    end
  end
`endif

endmodule
