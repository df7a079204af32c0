// csd_axi_copy_kernel: a small Vitis-style RTL kernel that copies n_words 512-bit words from src
// (bundle gmem0) to dst (bundle gmem1) through csd_axi_rd_master and csd_axi_wr_master, with
// csd_axil_ctrl as its control slave. It exists to test those modules and the emulation harness
// (emu/harness) with the port names, register map and launch protocol of a real kernel, while
// the updater core is written; see tb_csd_axi_copy_top.cpp.
//
// Register map: csd_axi_copy_args_pkg, generated from csd_axi_copy_args.h (0x10 src, 0x1c dst,
// 0x28 n_words). One launch: ap_start -> read and write commands issued together -> the read
// stream feeds the write stream directly -> the write master's done (every B response in) ->
// ap_done and ap_ready for one cycle. Both bundles carry all five channels, as a Vitis kernel's
// m_axi ports do; gmem0's write channels and gmem1's read channels are tied off.
//
// Read and write errors (SLVERR/DECERR responses) are cleared at each start and are visible only
// inside (rd_err / wr_err); this kernel has no status output.
//
// The kernel's top, csd_axi_copy_top (ap_clk, ap_rst_n, s_axi_control_*, m_axi_gmem0_*,
// m_axi_gmem1_*, interrupt), is generated from the argument table and this module's port list
// by rtl/gen/gen_args_pkg.cpp; it renames the Vitis ports into the structs below.

`default_nettype none

module csd_axi_copy_kernel import csd_axi_pkg::*; #(
  /// Read and write bursts in flight per master.
  parameter int unsigned MaxOutstanding = 8,
  /// Longest burst in beats (1..64).
  parameter int unsigned MaxBurstLen = PAGE_BEATS,
  /// Words of the read master's data FIFO.
  parameter int unsigned RdFifoDepth = 512,
  /// Words of the write master's data FIFO.
  parameter int unsigned WrFifoDepth = 2 * PAGE_BEATS
) (
  /// Kernel clock (ap_clk).
  input  wire logic      clk_i,
  /// Kernel reset (ap_rst_n), active low, synchronous; registered once inside.
  input  wire logic      rst_ni,
  /// Control slave (s_axi_control), requests.
  input  wire axil_req_t ctrl_req_i,
  /// Control slave, responses.
  output axil_resp_t     ctrl_resp_o,
  /// Interrupt (ap_done / ap_ready, as enabled by GIE and IER).
  output logic           interrupt_o,
  /// Bundle gmem0 (src, read only), requests.
  output axi_req_t       gmem0_req_o,
  /// Bundle gmem0, responses (the write half is ignored).
  input  wire axi_resp_t gmem0_resp_i,
  /// Bundle gmem1 (dst, write only), requests.
  output axi_req_t       gmem1_req_o,
  /// Bundle gmem1, responses (the read half is ignored).
  input  wire axi_resp_t gmem1_resp_i
);

  // ---- Reset: rst_ni (the top's ap_rst_n) registered once, then synchronous everywhere -----

  logic rst_nq;
  always_ff @(posedge clk_i) begin
    rst_nq <= rst_ni;
  end

  // ---- Control slave ------------------------------------------------------------------------

  localparam int unsigned ArgWords = csd_axi_copy_args_pkg::ARG_WORDS;

  logic [ArgWords*32-1:0]         arg_words;
  csd_axi_copy_args_pkg::args_t   args;
  logic                           ap_start, ap_done, ap_idle, ap_ready;

  csd_axil_ctrl #(
    .ArgWords   (ArgWords),
    .ArgWordMask(csd_axi_copy_args_pkg::ARG_WORD_MASK)
  ) u_ctrl (
    .clk_i      (clk_i),
    .rst_ni     (rst_nq),
    .axil_req_i (ctrl_req_i),
    .axil_resp_o(ctrl_resp_o),
    .args_o     (arg_words),
    .ap_start_o (ap_start),
    .ap_done_i  (ap_done),
    .ap_idle_i  (ap_idle),
    .ap_ready_i (ap_ready),
    .interrupt_o(interrupt_o)
  );

  assign args = csd_axi_copy_args_pkg::args_from_words(arg_words);

  // ---- Sequencer ----------------------------------------------------------------------------

  typedef enum logic [1:0] {
    StIdle,   // waiting for ap_start
    StCmd,    // handing the read and the write command to the masters
    StWait,   // copying: waiting for the write master's done and an idle read master
    StDone    // ap_done and ap_ready for one cycle
  } state_e;

  state_e state_d, state_q;
  logic   rd_sent_d, rd_sent_q, wr_sent_d, wr_sent_q, seen_d, seen_q;
  logic   rd_cmd_valid, rd_cmd_ready, wr_cmd_valid, wr_cmd_ready;
  logic   rd_idle, rd_err, wr_done, wr_idle, wr_err, err_clr;

  always_comb begin
    state_d   = state_q;
    rd_sent_d = rd_sent_q;
    wr_sent_d = wr_sent_q;
    seen_d    = seen_q || wr_done;
    err_clr   = 1'b0;
    unique case (state_q)
      StIdle: begin
        rd_sent_d = 1'b0;
        wr_sent_d = 1'b0;
        seen_d    = 1'b0;
        if (ap_start) begin
          err_clr = 1'b1;
          state_d = StCmd;
        end
      end
      StCmd: begin
        rd_sent_d = rd_sent_q || rd_cmd_ready;
        wr_sent_d = wr_sent_q || wr_cmd_ready;
        if (rd_sent_d && wr_sent_d) state_d = StWait;
      end
      StWait: begin
        if (seen_d && rd_idle) state_d = StDone;
      end
      StDone: begin
        state_d = StIdle;
      end
      default: state_d = StIdle;
    endcase
  end

  assign rd_cmd_valid = (state_q == StCmd) && !rd_sent_q;
  assign wr_cmd_valid = (state_q == StCmd) && !wr_sent_q;
  assign ap_idle      = (state_q == StIdle);
  assign ap_done      = (state_q == StDone);
  assign ap_ready     = (state_q == StDone);

  always_ff @(posedge clk_i) begin
    if (!rst_nq) begin
      state_q   <= StIdle;
      rd_sent_q <= 1'b0;
      wr_sent_q <= 1'b0;
      seen_q    <= 1'b0;
    end else begin
      state_q   <= state_d;
      rd_sent_q <= rd_sent_d;
      wr_sent_q <= wr_sent_d;
      seen_q    <= seen_d;
    end
  end

  // ---- Masters ------------------------------------------------------------------------------

  axi_rd_req_t  rd_req;
  axi_rd_resp_t rd_resp;
  axi_wr_req_t  wr_req;
  axi_wr_resp_t wr_resp;
  logic         word_valid, word_ready;
  data_t        word;

  csd_axi_rd_master #(
    .MaxOutstanding(MaxOutstanding),
    .MaxBurstLen   (MaxBurstLen),
    .FifoDepth     (RdFifoDepth)
  ) u_rd (
    .clk_i       (clk_i),
    .rst_ni      (rst_nq),
    .cmd_valid_i (rd_cmd_valid),
    .cmd_ready_o (rd_cmd_ready),
    .cmd_base_i  (args.src),
    .cmd_len_i   (args.n_words),
    .data_valid_o(word_valid),
    .data_ready_i(word_ready),
    .data_o      (word),
    .idle_o      (rd_idle),
    .err_o       (rd_err),
    .err_clr_i   (err_clr),
    .axi_req_o   (rd_req),
    .axi_resp_i  (rd_resp)
  );

  csd_axi_wr_master #(
    .MaxOutstanding(MaxOutstanding),
    .MaxBurstLen   (MaxBurstLen),
    .FifoDepth     (WrFifoDepth)
  ) u_wr (
    .clk_i       (clk_i),
    .rst_ni      (rst_nq),
    .cmd_valid_i (wr_cmd_valid),
    .cmd_ready_o (wr_cmd_ready),
    .cmd_base_i  (args.dst),
    .cmd_len_i   (args.n_words),
    .data_valid_i(word_valid),
    .data_ready_o(word_ready),
    .data_i      (word),
    .done_o      (wr_done),
    .idle_o      (wr_idle),
    .err_o       (wr_err),
    .err_clr_i   (err_clr),
    .axi_req_o   (wr_req),
    .axi_resp_i  (wr_resp)
  );

  // ---- Bundles: gmem0 is only read, gmem1 only written; the other halves are tied idle -----

  assign gmem0_req_o = axi_req_join(rd_req, AXI_WR_REQ_IDLE);
  assign gmem1_req_o = axi_req_join(AXI_RD_REQ_IDLE, wr_req);
  assign rd_resp     = axi_resp_rd(gmem0_resp_i);
  assign wr_resp     = axi_resp_wr(gmem1_resp_i);

  // The tied-off halves' responses, and the status this kernel cannot report.
  logic unused_tieoff;
  assign unused_tieoff = ^{axi_resp_wr(gmem0_resp_i), axi_resp_rd(gmem1_resp_i), rd_err, wr_err,
                           wr_idle};

endmodule
