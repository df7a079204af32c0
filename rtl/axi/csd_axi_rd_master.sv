// csd_axi_rd_master: reads len words of 512 bits from a 64-byte aligned base address over the
// read half of an AXI4 bundle and delivers them, in order, as a valid/ready word stream.
//
// Bursts: INCR, full-width beats, at most MaxBurstLen beats, never crossing a 4 KiB page (the
// first and last burst of a command are shortened as needed). Several bursts are in flight
// (up to MaxOutstanding); they all use ID 0, so data returns in request order.
//
// Flow control: a data FIFO of FifoDepth words sits between R and the stream. A burst is only
// requested when the FIFO has room for all of its beats, counting the beats of bursts already
// in flight (a credit counter), so the FIFO never overflows and RREADY is always high: a slow
// consumer stalls the AR channel, never the R channel.
//
// Commands: one is accepted whenever the previous command's bursts have all been requested,
// so consecutive commands stream back to back. A command of zero words is accepted and reads
// nothing. The base must be 64-byte aligned (asserted in simulation).
//
// Errors: a beat with RRESP SLVERR or DECERR sets err_o (sticky until err_clr_i; a set in the
// same cycle as a clear wins). Its data is still delivered, so the word count stays right.

`default_nettype none

module csd_axi_rd_master import csd_axi_pkg::*; #(
  /// Read bursts in flight (AR accepted, last R beat not yet received), at least 1.
  parameter int unsigned MaxOutstanding = 8,
  /// Longest burst in beats, 1 to 64 (a 4 KiB page holds 64 beats, so the AXI4 limit of 256
  /// beats is implied).
  parameter int unsigned MaxBurstLen = PAGE_BEATS,
  /// Words of the data FIFO (memory entries), at least MaxBurstLen. Sustained throughput
  /// needs it to cover the read latency plus one burst.
  parameter int unsigned FifoDepth = 512
) (
  /// Clock.
  input  wire logic         clk_i,
  /// Synchronous reset, active low.
  input  wire logic         rst_ni,
  /// Command: valid.
  input  wire logic         cmd_valid_i,
  /// Command: ready (no command is generating requests).
  output logic              cmd_ready_o,
  /// Command: byte address of the first word, 64-byte aligned.
  input  wire addr_t        cmd_base_i,
  /// Command: words to read, 0 to 2^32 - 1.
  input  wire logic [31:0]  cmd_len_i,
  /// Word stream: valid.
  output logic              data_valid_o,
  /// Word stream: ready.
  input  wire logic         data_ready_i,
  /// Word stream: the word (address order; byte k of the word is memory byte base + 64i + k).
  output data_t             data_o,
  /// No command in progress, no burst in flight, no word left to deliver.
  output logic              idle_o,
  /// Sticky: a read beat came back with an error response.
  output logic              err_o,
  /// Clears err_o.
  input  wire logic         err_clr_i,
  /// AXI4 read half, requests.
  output axi_rd_req_t       axi_req_o,
  /// AXI4 read half, responses.
  input  wire axi_rd_resp_t axi_resp_i
);

  localparam int unsigned CreditW = $clog2(FifoDepth + 1);
  localparam int unsigned OutstW  = $clog2(MaxOutstanding + 1);
  localparam beats_t             MAX_LEN   = beats_t'(MaxBurstLen);
  localparam logic [CreditW-1:0] FULL_CRED = CreditW'(FifoDepth);
  localparam logic [OutstW-1:0]  MAX_OUTST = OutstW'(MaxOutstanding);

  if (MaxBurstLen < 1 || MaxBurstLen > PAGE_BEATS) begin : g_bad_burst
    $error("csd_axi_rd_master: MaxBurstLen must be 1..64");
  end
  if (FifoDepth < MaxBurstLen) begin : g_bad_fifo
    $error("csd_axi_rd_master: FifoDepth must be at least MaxBurstLen");
  end
  if (MaxOutstanding < 1) begin : g_bad_outst
    $error("csd_axi_rd_master: MaxOutstanding must be at least 1");
  end

  // ---- Request generation -------------------------------------------------------------------

  logic                active_d, active_q;   // a command still has bursts to request
  addr_t               addr_d, addr_q;       // address of the next burst
  logic [31:0]         rem_d, rem_q;         // words of the command not yet requested
  logic [CreditW-1:0]  credit_d, credit_q;   // FIFO words neither occupied nor in flight
  logic [OutstW-1:0]   outst_d, outst_q;     // bursts in flight
  logic                err_d, err_q;
  beats_t              burst_len;
  logic                cmd_hs, ar_valid, ar_hs, r_hs, pop;
  logic                fifo_in_ready;
  logic [$clog2(FifoDepth + 2)-1:0] fifo_count;

  // The next burst: up to the page end, at most MaxBurstLen, at most what is left.
  assign burst_len = burst_beats(addr_q[PAGE_SHIFT-1:BEAT_SHIFT], rem_q, MAX_LEN);

  // Once raised, ARVALID stays up with the same payload until accepted: the credit only grows
  // and the outstanding count only shrinks while a request waits.
  assign ar_valid = active_q && (credit_q >= CreditW'(burst_len)) && (outst_q != MAX_OUTST);
  assign ar_hs    = ar_valid && axi_resp_i.ar_ready;
  assign r_hs     = axi_resp_i.r_valid;              // RREADY is always high
  assign pop      = data_valid_o && data_ready_i;

  // Not ready while in reset: a command handed over then would be lost.
  assign cmd_ready_o = rst_ni && !active_q;
  assign cmd_hs      = cmd_valid_i && cmd_ready_o;

  always_comb begin
    active_d = active_q;
    addr_d   = addr_q;
    rem_d    = rem_q;
    if (cmd_hs) begin
      active_d = (cmd_len_i != '0);
      addr_d   = cmd_base_i;
      rem_d    = cmd_len_i;
    end else if (ar_hs) begin
      active_d = (rem_q != 32'(burst_len));
      addr_d   = burst_next_addr(addr_q, burst_len);
      rem_d    = rem_q - 32'(burst_len);
    end
  end

  assign credit_d = credit_q - (ar_hs ? CreditW'(burst_len) : '0) + CreditW'(pop);
  assign outst_d  = outst_q + OutstW'(ar_hs) - OutstW'(r_hs && axi_resp_i.r.last);
  assign err_d    = (r_hs && axi_resp_i.r.resp[1]) || (err_q && !err_clr_i);

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      active_q <= 1'b0;
      credit_q <= FULL_CRED;
      outst_q  <= '0;
      err_q    <= 1'b0;
    end else begin
      active_q <= active_d;
      credit_q <= credit_d;
      outst_q  <= outst_d;
      err_q    <= err_d;
    end
  end

  // Address and count are only meaningful while active_q: not reset.
  always_ff @(posedge clk_i) begin
    addr_q <= addr_d;
    rem_q  <= rem_d;
  end

  always_comb begin
    axi_req_o          = '0;
    axi_req_o.ar.id    = '0;
    axi_req_o.ar.addr  = addr_q;
    axi_req_o.ar.len   = len_t'(burst_len - beats_t'(1));
    axi_req_o.ar.size  = SIZE_BEAT;
    axi_req_o.ar.burst = BURST_INCR;
    axi_req_o.ar.cache = CACHE_MODIFIABLE_BUFFERABLE;
    axi_req_o.ar_valid = ar_valid;
    axi_req_o.r_ready  = 1'b1;
  end

  // ---- Data FIFO ----------------------------------------------------------------------------

  csd_fifo #(
    .Width (DATA_WIDTH),
    .Depth (FifoDepth),
    .OutReg(1'b1)
  ) u_data_fifo (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .in_valid_i (r_hs),
    .in_ready_o (fifo_in_ready),
    .in_data_i  (axi_resp_i.r.data),
    .out_valid_o(data_valid_o),
    .out_ready_i(data_ready_i),
    .out_data_o (data_o),
    .count_o    (fifo_count)
  );

  // All credit back means nothing is in flight and nothing is waiting in the FIFO.
  assign idle_o = !active_q && (credit_q == FULL_CRED);
  assign err_o  = err_q;

  // The ID is always 0 (in-order completion); RRESP bit 0 only distinguishes EXOKAY/DECERR.
  // The credit counter already knows the FIFO's occupancy.
  logic unused_r;
  assign unused_r = ^{axi_resp_i.r.id, axi_resp_i.r.resp[0], fifo_count};

`ifndef SYNTHESIS
  // The credit scheme guarantees this; a push into a full FIFO would lose a beat.
  a_no_overflow: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                  r_hs |-> fifo_in_ready)
    else $error("csd_axi_rd_master: R beat with the data FIFO full");
  a_base_aligned: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                   (cmd_hs && cmd_len_i != '0) |->
                                   (cmd_base_i[BEAT_SHIFT-1:0] == '0))
    else $error("csd_axi_rd_master: base address 0x%h is not 64-byte aligned", cmd_base_i);
  a_r_expected: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                 r_hs |-> (outst_q != '0))
    else $error("csd_axi_rd_master: R beat with no burst in flight");
`endif

endmodule
