// csd_axi_wr_master: writes len words of 512 bits, taken in order from a valid/ready word
// stream, to a 64-byte aligned base address over the write half of an AXI4 bundle.
//
// Bursts: INCR, full-width beats, WSTRB all ones, at most MaxBurstLen beats, never crossing a
// 4 KiB page. Several bursts are in flight (up to MaxOutstanding, AW accepted and B not yet
// received), all with ID 0, so B responses come back in request order.
//
// Flow control: words go into a FIFO of FifoDepth words. An AW is only issued once all beats
// of its burst are in the FIFO, so a burst's W beats follow each other without gaps and a slow
// producer never holds the write channel of the interconnect. W beats are sent in AW order
// (never before their AW); the burst lengths wait in a small queue between AW and W.
//
// Commands: one is accepted whenever the previous command's bursts have all been issued, so
// consecutive commands stream back to back. done_o pulses once per command, in command order,
// in the cycle its last B response arrives (a zero-word command: once everything before it has
// completed). The stream must carry exactly the commanded words, in command order; words may
// arrive before their command.
//
// Errors: a B response with SLVERR or DECERR sets err_o (sticky until err_clr_i; a set in the
// same cycle as a clear wins). The command still completes.

`default_nettype none

module csd_axi_wr_master import csd_axi_pkg::*; #(
  /// Write bursts in flight (AW accepted, B not yet received), at least 1.
  parameter int unsigned MaxOutstanding = 8,
  /// Longest burst in beats, 1 to 64 (a 4 KiB page holds 64 beats, so the AXI4 limit of 256
  /// beats is implied).
  parameter int unsigned MaxBurstLen = PAGE_BEATS,
  /// Words of the data FIFO (memory entries), at least MaxBurstLen; twice MaxBurstLen lets
  /// one burst fill while the previous one drains.
  parameter int unsigned FifoDepth = 2 * PAGE_BEATS
) (
  /// Clock.
  input  wire logic         clk_i,
  /// Synchronous reset, active low.
  input  wire logic         rst_ni,
  /// Command: valid.
  input  wire logic         cmd_valid_i,
  /// Command: ready (no command is issuing bursts).
  output logic              cmd_ready_o,
  /// Command: byte address of the first word, 64-byte aligned.
  input  wire addr_t        cmd_base_i,
  /// Command: words to write, 0 to 2^32 - 1.
  input  wire logic [31:0]  cmd_len_i,
  /// Word stream: valid.
  input  wire logic         data_valid_i,
  /// Word stream: ready (the FIFO has room).
  output logic              data_ready_o,
  /// Word stream: the word (byte k of word i goes to memory byte base + 64i + k).
  input  wire data_t        data_i,
  /// Pulse: every B response of the oldest incomplete command has arrived.
  output logic              done_o,
  /// No command in progress and no burst in flight (words may still wait in the FIFO).
  output logic              idle_o,
  /// Sticky: a B response came back with an error.
  output logic              err_o,
  /// Clears err_o.
  input  wire logic         err_clr_i,
  /// AXI4 write half, requests.
  output axi_wr_req_t       axi_req_o,
  /// AXI4 write half, responses.
  input  wire axi_wr_resp_t axi_resp_i
);

  localparam int unsigned LenW   = (MaxBurstLen > 1) ? $clog2(MaxBurstLen) : 1;  // beats - 1
  localparam int unsigned AvailW = $clog2(FifoDepth + 2);          // FIFO holds Depth + 1
  localparam int unsigned OutstW = $clog2(MaxOutstanding + 1);
  localparam int unsigned QCntW  = $clog2(MaxOutstanding + 2);     // a queue's count_o
  localparam beats_t            MAX_LEN   = beats_t'(MaxBurstLen);
  localparam logic [OutstW-1:0] MAX_OUTST = OutstW'(MaxOutstanding);

  if (MaxBurstLen < 1 || MaxBurstLen > PAGE_BEATS) begin : g_bad_burst
    $error("csd_axi_wr_master: MaxBurstLen must be 1..64");
  end
  if (FifoDepth < MaxBurstLen) begin : g_bad_fifo
    $error("csd_axi_wr_master: FifoDepth must be at least MaxBurstLen");
  end
  if (MaxOutstanding < 1) begin : g_bad_outst
    $error("csd_axi_wr_master: MaxOutstanding must be at least 1");
  end

  // ---- AW generation ------------------------------------------------------------------------

  logic               active_d, active_q;   // a command still has bursts to issue
  logic               zero_d, zero_q;       // a zero-word command waits for its done pulse
  addr_t              addr_d, addr_q;       // address of the next burst
  logic [31:0]        rem_d, rem_q;         // words of the command not yet issued
  logic [AvailW-1:0]  avail_d, avail_q;     // words in the FIFO not yet claimed by an AW
  logic [OutstW-1:0]  outst_d, outst_q;     // bursts in flight
  logic [LenW-1:0]    beat_d, beat_q;       // W beats sent of the current burst
  logic               err_d, err_q;
  beats_t             burst_len;
  logic               cmd_hs, push, aw_valid, aw_hs, w_valid, w_last, w_hs, b_hs, zero_done;
  logic               data_valid, fifo_in_ready, lenq_in_ready, lastq_in_ready;
  logic               lenq_valid, lastq_valid, lastq_flag;
  logic [LenW-1:0]    lenq_len;
  data_t              data;
  logic [AvailW-1:0]  fifo_count;
  logic [QCntW-1:0]   lenq_count, lastq_count;

  // The next burst: up to the page end, at most MaxBurstLen, at most what is left.
  assign burst_len = burst_beats(addr_q[PAGE_SHIFT-1:BEAT_SHIFT], rem_q, MAX_LEN);

  // Once raised, AWVALID stays up with the same payload until accepted: the unclaimed count
  // only grows and the outstanding count only shrinks while a request waits. The two queues
  // hold at most one entry per burst in flight, so they always have room here.
  assign aw_valid = active_q && (avail_q >= AvailW'(burst_len)) && (outst_q != MAX_OUTST);
  assign aw_hs    = aw_valid && axi_resp_i.aw_ready;

  // Not ready while in reset: a command handed over then would be lost.
  assign cmd_ready_o = rst_ni && !active_q && !zero_q;
  assign cmd_hs      = cmd_valid_i && cmd_ready_o;
  // A zero-word command completes when everything before it has.
  assign zero_done   = zero_q && (outst_q == '0);

  always_comb begin
    active_d = active_q;
    zero_d   = zero_q && !zero_done;
    addr_d   = addr_q;
    rem_d    = rem_q;
    if (cmd_hs) begin
      active_d = (cmd_len_i != '0);
      zero_d   = (cmd_len_i == '0);
      addr_d   = cmd_base_i;
      rem_d    = cmd_len_i;
    end else if (aw_hs) begin
      active_d = (rem_q != 32'(burst_len));
      addr_d   = burst_next_addr(addr_q, burst_len);
      rem_d    = rem_q - 32'(burst_len);
    end
  end

  assign avail_d = avail_q + AvailW'(push) - (aw_hs ? AvailW'(burst_len) : '0);
  assign outst_d = outst_q + OutstW'(aw_hs) - OutstW'(b_hs);
  assign beat_d  = !w_hs ? beat_q : w_last ? '0 : beat_q + LenW'(1);
  assign err_d   = (b_hs && axi_resp_i.b.resp[1]) || (err_q && !err_clr_i);

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      active_q <= 1'b0;
      zero_q   <= 1'b0;
      avail_q  <= '0;
      outst_q  <= '0;
      beat_q   <= '0;
      err_q    <= 1'b0;
    end else begin
      active_q <= active_d;
      zero_q   <= zero_d;
      avail_q  <= avail_d;
      outst_q  <= outst_d;
      beat_q   <= beat_d;
      err_q    <= err_d;
    end
  end

  // Address and count are only meaningful while active_q: not reset.
  always_ff @(posedge clk_i) begin
    addr_q <= addr_d;
    rem_q  <= rem_d;
  end

  // ---- Queues -------------------------------------------------------------------------------

  // Words are not taken while in reset (the FIFO's pointers are being cleared).
  assign data_ready_o = rst_ni && fifo_in_ready;
  assign push         = data_valid_i && data_ready_o;

  csd_fifo #(
    .Width (DATA_WIDTH),
    .Depth (FifoDepth),
    .OutReg(1'b1)
  ) u_data_fifo (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .in_valid_i (push),
    .in_ready_o (fifo_in_ready),
    .in_data_i  (data_i),
    .out_valid_o(data_valid),
    .out_ready_i(w_hs),
    .out_data_o (data),
    .count_o    (fifo_count)
  );

  // Length (beats - 1) of each issued burst whose W beats are not all sent.
  csd_fifo #(
    .Width (LenW),
    .Depth (MaxOutstanding),
    .OutReg(1'b1)
  ) u_len_fifo (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .in_valid_i (aw_hs),
    .in_ready_o (lenq_in_ready),
    .in_data_i  (LenW'(burst_len - beats_t'(1))),
    .out_valid_o(lenq_valid),
    .out_ready_i(w_hs && w_last),
    .out_data_o (lenq_len),
    .count_o    (lenq_count)
  );

  // Per burst in flight: is it the last burst of its command (B completes the command).
  csd_fifo #(
    .Width (1),
    .Depth (MaxOutstanding),
    .OutReg(1'b1)
  ) u_last_fifo (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .in_valid_i (aw_hs),
    .in_ready_o (lastq_in_ready),
    .in_data_i  (rem_q == 32'(burst_len)),
    .out_valid_o(lastq_valid),
    .out_ready_i(b_hs),
    .out_data_o (lastq_flag),
    .count_o    (lastq_count)
  );

  // ---- W and B ------------------------------------------------------------------------------

  // A beat goes out when its word is at the FIFO head and its burst has been issued.
  assign w_valid = data_valid && lenq_valid;
  assign w_last  = (beat_q == lenq_len);
  assign w_hs    = w_valid && axi_resp_i.w_ready;
  assign b_hs    = axi_resp_i.b_valid;              // BREADY is always high

  always_comb begin
    axi_req_o          = '0;
    axi_req_o.aw.id    = '0;
    axi_req_o.aw.addr  = addr_q;
    axi_req_o.aw.len   = len_t'(burst_len - beats_t'(1));
    axi_req_o.aw.size  = SIZE_BEAT;
    axi_req_o.aw.burst = BURST_INCR;
    axi_req_o.aw.cache = CACHE_MODIFIABLE_BUFFERABLE;
    axi_req_o.aw_valid = aw_valid;
    axi_req_o.w.data   = data;
    axi_req_o.w.strb   = '1;
    axi_req_o.w.last   = w_last;
    axi_req_o.w_valid  = w_valid;
    axi_req_o.b_ready  = 1'b1;
  end

  assign done_o = (b_hs && lastq_flag) || zero_done;
  assign idle_o = !active_q && !zero_q && (outst_q == '0);
  assign err_o  = err_q;

  // The ID is always 0 (in-order completion); BRESP bit 0 only distinguishes EXOKAY/DECERR.
  // The unclaimed and outstanding counters already know the queues' occupancy.
  logic unused_b;
  assign unused_b = ^{axi_resp_i.b.id, axi_resp_i.b.resp[0], fifo_count, lenq_count,
                      lastq_count};

`ifndef SYNTHESIS
  a_queues_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                  aw_hs |-> (lenq_in_ready && lastq_in_ready))
    else $error("csd_axi_wr_master: burst queue full at AW");
  a_b_expected: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                 b_hs |-> (lastq_valid && outst_q != '0))
    else $error("csd_axi_wr_master: B response with no burst in flight");
  a_base_aligned: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                   (cmd_hs && cmd_len_i != '0) |->
                                   (cmd_base_i[BEAT_SHIFT-1:0] == '0))
    else $error("csd_axi_wr_master: base address 0x%h is not 64-byte aligned", cmd_base_i);
`endif

endmodule
