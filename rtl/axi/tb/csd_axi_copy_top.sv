// csd_axi_copy_top: a small Vitis-style RTL kernel that copies n_words 512-bit words from src
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

`default_nettype none

module csd_axi_copy_top import csd_axi_pkg::*; #(
  /// Read and write bursts in flight per master.
  parameter int unsigned MaxOutstanding = 8,
  /// Longest burst in beats (1..64).
  parameter int unsigned MaxBurstLen = PAGE_BEATS,
  /// Words of the read master's data FIFO.
  parameter int unsigned RdFifoDepth = 512,
  /// Words of the write master's data FIFO.
  parameter int unsigned WrFifoDepth = 2 * PAGE_BEATS
) (
  /// Kernel clock.
  input  wire logic                  ap_clk,
  /// Kernel reset, active low, synchronous (registered once inside).
  input  wire logic                  ap_rst_n,

  // ---- s_axi_control: AXI4-Lite control slave ----
  /// Control AW valid.
  input  wire logic                  s_axi_control_AWVALID,
  /// Control AW ready.
  output logic                       s_axi_control_AWREADY,
  /// Control AW byte address.
  input  wire logic [7:0]            s_axi_control_AWADDR,
  /// Control W valid.
  input  wire logic                  s_axi_control_WVALID,
  /// Control W ready.
  output logic                       s_axi_control_WREADY,
  /// Control W data.
  input  wire logic [31:0]           s_axi_control_WDATA,
  /// Control W byte strobes.
  input  wire logic [3:0]            s_axi_control_WSTRB,
  /// Control AR valid.
  input  wire logic                  s_axi_control_ARVALID,
  /// Control AR ready.
  output logic                       s_axi_control_ARREADY,
  /// Control AR byte address.
  input  wire logic [7:0]            s_axi_control_ARADDR,
  /// Control R valid.
  output logic                       s_axi_control_RVALID,
  /// Control R ready.
  input  wire logic                  s_axi_control_RREADY,
  /// Control R data.
  output logic [31:0]                s_axi_control_RDATA,
  /// Control R response (always OKAY).
  output logic [1:0]                 s_axi_control_RRESP,
  /// Control B valid.
  output logic                       s_axi_control_BVALID,
  /// Control B ready.
  input  wire logic                  s_axi_control_BREADY,
  /// Control B response (always OKAY).
  output logic [1:0]                 s_axi_control_BRESP,
  /// Interrupt (ap_done / ap_ready, as enabled by GIE and IER).
  output logic                       interrupt,

  // ---- m_axi_gmem0: source (read; write channels tied off) ----
  /// gmem0 AW valid (always 0).
  output logic                       m_axi_gmem0_AWVALID,
  /// gmem0 AW ready.
  input  wire logic                  m_axi_gmem0_AWREADY,
  /// gmem0 AW address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem0_AWADDR,
  /// gmem0 AW ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem0_AWID,
  /// gmem0 AW length (beats - 1).
  output logic [7:0]                 m_axi_gmem0_AWLEN,
  /// gmem0 AW size.
  output logic [2:0]                 m_axi_gmem0_AWSIZE,
  /// gmem0 AW burst type.
  output logic [1:0]                 m_axi_gmem0_AWBURST,
  /// gmem0 AW lock.
  output logic                       m_axi_gmem0_AWLOCK,
  /// gmem0 AW cache.
  output logic [3:0]                 m_axi_gmem0_AWCACHE,
  /// gmem0 AW protection.
  output logic [2:0]                 m_axi_gmem0_AWPROT,
  /// gmem0 AW QoS.
  output logic [3:0]                 m_axi_gmem0_AWQOS,
  /// gmem0 AW region.
  output logic [3:0]                 m_axi_gmem0_AWREGION,
  /// gmem0 W valid (always 0).
  output logic                       m_axi_gmem0_WVALID,
  /// gmem0 W ready.
  input  wire logic                  m_axi_gmem0_WREADY,
  /// gmem0 W data.
  output logic [DATA_WIDTH-1:0]      m_axi_gmem0_WDATA,
  /// gmem0 W strobes.
  output logic [STRB_WIDTH-1:0]      m_axi_gmem0_WSTRB,
  /// gmem0 W last.
  output logic                       m_axi_gmem0_WLAST,
  /// gmem0 B valid.
  input  wire logic                  m_axi_gmem0_BVALID,
  /// gmem0 B ready.
  output logic                       m_axi_gmem0_BREADY,
  /// gmem0 B response.
  input  wire logic [1:0]            m_axi_gmem0_BRESP,
  /// gmem0 B ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem0_BID,
  /// gmem0 AR valid.
  output logic                       m_axi_gmem0_ARVALID,
  /// gmem0 AR ready.
  input  wire logic                  m_axi_gmem0_ARREADY,
  /// gmem0 AR address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem0_ARADDR,
  /// gmem0 AR ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem0_ARID,
  /// gmem0 AR length (beats - 1).
  output logic [7:0]                 m_axi_gmem0_ARLEN,
  /// gmem0 AR size.
  output logic [2:0]                 m_axi_gmem0_ARSIZE,
  /// gmem0 AR burst type.
  output logic [1:0]                 m_axi_gmem0_ARBURST,
  /// gmem0 AR lock.
  output logic                       m_axi_gmem0_ARLOCK,
  /// gmem0 AR cache.
  output logic [3:0]                 m_axi_gmem0_ARCACHE,
  /// gmem0 AR protection.
  output logic [2:0]                 m_axi_gmem0_ARPROT,
  /// gmem0 AR QoS.
  output logic [3:0]                 m_axi_gmem0_ARQOS,
  /// gmem0 AR region.
  output logic [3:0]                 m_axi_gmem0_ARREGION,
  /// gmem0 R valid.
  input  wire logic                  m_axi_gmem0_RVALID,
  /// gmem0 R ready.
  output logic                       m_axi_gmem0_RREADY,
  /// gmem0 R data.
  input  wire logic [DATA_WIDTH-1:0] m_axi_gmem0_RDATA,
  /// gmem0 R last.
  input  wire logic                  m_axi_gmem0_RLAST,
  /// gmem0 R ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem0_RID,
  /// gmem0 R response.
  input  wire logic [1:0]            m_axi_gmem0_RRESP,

  // ---- m_axi_gmem1: destination (write; read channels tied off) ----
  /// gmem1 AW valid.
  output logic                       m_axi_gmem1_AWVALID,
  /// gmem1 AW ready.
  input  wire logic                  m_axi_gmem1_AWREADY,
  /// gmem1 AW address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem1_AWADDR,
  /// gmem1 AW ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem1_AWID,
  /// gmem1 AW length (beats - 1).
  output logic [7:0]                 m_axi_gmem1_AWLEN,
  /// gmem1 AW size.
  output logic [2:0]                 m_axi_gmem1_AWSIZE,
  /// gmem1 AW burst type.
  output logic [1:0]                 m_axi_gmem1_AWBURST,
  /// gmem1 AW lock.
  output logic                       m_axi_gmem1_AWLOCK,
  /// gmem1 AW cache.
  output logic [3:0]                 m_axi_gmem1_AWCACHE,
  /// gmem1 AW protection.
  output logic [2:0]                 m_axi_gmem1_AWPROT,
  /// gmem1 AW QoS.
  output logic [3:0]                 m_axi_gmem1_AWQOS,
  /// gmem1 AW region.
  output logic [3:0]                 m_axi_gmem1_AWREGION,
  /// gmem1 W valid.
  output logic                       m_axi_gmem1_WVALID,
  /// gmem1 W ready.
  input  wire logic                  m_axi_gmem1_WREADY,
  /// gmem1 W data.
  output logic [DATA_WIDTH-1:0]      m_axi_gmem1_WDATA,
  /// gmem1 W strobes.
  output logic [STRB_WIDTH-1:0]      m_axi_gmem1_WSTRB,
  /// gmem1 W last.
  output logic                       m_axi_gmem1_WLAST,
  /// gmem1 B valid.
  input  wire logic                  m_axi_gmem1_BVALID,
  /// gmem1 B ready.
  output logic                       m_axi_gmem1_BREADY,
  /// gmem1 B response.
  input  wire logic [1:0]            m_axi_gmem1_BRESP,
  /// gmem1 B ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem1_BID,
  /// gmem1 AR valid (always 0).
  output logic                       m_axi_gmem1_ARVALID,
  /// gmem1 AR ready.
  input  wire logic                  m_axi_gmem1_ARREADY,
  /// gmem1 AR address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem1_ARADDR,
  /// gmem1 AR ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem1_ARID,
  /// gmem1 AR length (beats - 1).
  output logic [7:0]                 m_axi_gmem1_ARLEN,
  /// gmem1 AR size.
  output logic [2:0]                 m_axi_gmem1_ARSIZE,
  /// gmem1 AR burst type.
  output logic [1:0]                 m_axi_gmem1_ARBURST,
  /// gmem1 AR lock.
  output logic                       m_axi_gmem1_ARLOCK,
  /// gmem1 AR cache.
  output logic [3:0]                 m_axi_gmem1_ARCACHE,
  /// gmem1 AR protection.
  output logic [2:0]                 m_axi_gmem1_ARPROT,
  /// gmem1 AR QoS.
  output logic [3:0]                 m_axi_gmem1_ARQOS,
  /// gmem1 AR region.
  output logic [3:0]                 m_axi_gmem1_ARREGION,
  /// gmem1 R valid.
  input  wire logic                  m_axi_gmem1_RVALID,
  /// gmem1 R ready.
  output logic                       m_axi_gmem1_RREADY,
  /// gmem1 R data.
  input  wire logic [DATA_WIDTH-1:0] m_axi_gmem1_RDATA,
  /// gmem1 R last.
  input  wire logic                  m_axi_gmem1_RLAST,
  /// gmem1 R ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem1_RID,
  /// gmem1 R response.
  input  wire logic [1:0]            m_axi_gmem1_RRESP
);

  // ---- Reset: ap_rst_n registered once, then synchronous everywhere --------------------------

  logic rst_nq;
  always_ff @(posedge ap_clk) begin
    rst_nq <= ap_rst_n;
  end

  // ---- Control slave ------------------------------------------------------------------------

  localparam int unsigned ArgWords = csd_axi_copy_args_pkg::ARG_WORDS;

  axil_req_t                      axil_req;
  axil_resp_t                     axil_resp;
  logic [ArgWords*32-1:0]         arg_words;
  csd_axi_copy_args_pkg::args_t   args;
  logic                           ap_start, ap_done, ap_idle, ap_ready;

  assign axil_req.aw_addr  = s_axi_control_AWADDR;
  assign axil_req.aw_valid = s_axi_control_AWVALID;
  assign axil_req.w.data   = s_axi_control_WDATA;
  assign axil_req.w.strb   = s_axi_control_WSTRB;
  assign axil_req.w_valid  = s_axi_control_WVALID;
  assign axil_req.b_ready  = s_axi_control_BREADY;
  assign axil_req.ar_addr  = s_axi_control_ARADDR;
  assign axil_req.ar_valid = s_axi_control_ARVALID;
  assign axil_req.r_ready  = s_axi_control_RREADY;

  assign s_axi_control_AWREADY = axil_resp.aw_ready;
  assign s_axi_control_WREADY  = axil_resp.w_ready;
  assign s_axi_control_BVALID  = axil_resp.b_valid;
  assign s_axi_control_BRESP   = axil_resp.b_resp;
  assign s_axi_control_ARREADY = axil_resp.ar_ready;
  assign s_axi_control_RVALID  = axil_resp.r_valid;
  assign s_axi_control_RDATA   = axil_resp.r.data;
  assign s_axi_control_RRESP   = axil_resp.r.resp;

  csd_axil_ctrl #(
    .ArgWords   (ArgWords),
    .ArgWordMask(csd_axi_copy_args_pkg::ARG_WORD_MASK)
  ) u_ctrl (
    .clk_i      (ap_clk),
    .rst_ni     (rst_nq),
    .axil_req_i (axil_req),
    .axil_resp_o(axil_resp),
    .args_o     (arg_words),
    .ap_start_o (ap_start),
    .ap_done_i  (ap_done),
    .ap_idle_i  (ap_idle),
    .ap_ready_i (ap_ready),
    .interrupt_o(interrupt)
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

  always_ff @(posedge ap_clk) begin
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
    .clk_i       (ap_clk),
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
    .clk_i       (ap_clk),
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

  // ---- gmem0: the read half from the read master, the write half idle -----------------------

  assign m_axi_gmem0_ARVALID  = rd_req.ar_valid;
  assign m_axi_gmem0_ARADDR   = rd_req.ar.addr;
  assign m_axi_gmem0_ARID     = rd_req.ar.id;
  assign m_axi_gmem0_ARLEN    = rd_req.ar.len;
  assign m_axi_gmem0_ARSIZE   = rd_req.ar.size;
  assign m_axi_gmem0_ARBURST  = rd_req.ar.burst;
  assign m_axi_gmem0_ARLOCK   = rd_req.ar.lock;
  assign m_axi_gmem0_ARCACHE  = rd_req.ar.cache;
  assign m_axi_gmem0_ARPROT   = rd_req.ar.prot;
  assign m_axi_gmem0_ARQOS    = rd_req.ar.qos;
  assign m_axi_gmem0_ARREGION = rd_req.ar.region;
  assign m_axi_gmem0_RREADY   = rd_req.r_ready;
  assign rd_resp.ar_ready     = m_axi_gmem0_ARREADY;
  assign rd_resp.r_valid      = m_axi_gmem0_RVALID;
  assign rd_resp.r.data       = m_axi_gmem0_RDATA;
  assign rd_resp.r.last       = m_axi_gmem0_RLAST;
  assign rd_resp.r.id         = m_axi_gmem0_RID;
  assign rd_resp.r.resp       = m_axi_gmem0_RRESP;

  assign m_axi_gmem0_AWVALID  = AXI_WR_REQ_IDLE.aw_valid;
  assign m_axi_gmem0_AWADDR   = AXI_WR_REQ_IDLE.aw.addr;
  assign m_axi_gmem0_AWID     = AXI_WR_REQ_IDLE.aw.id;
  assign m_axi_gmem0_AWLEN    = AXI_WR_REQ_IDLE.aw.len;
  assign m_axi_gmem0_AWSIZE   = AXI_WR_REQ_IDLE.aw.size;
  assign m_axi_gmem0_AWBURST  = AXI_WR_REQ_IDLE.aw.burst;
  assign m_axi_gmem0_AWLOCK   = AXI_WR_REQ_IDLE.aw.lock;
  assign m_axi_gmem0_AWCACHE  = AXI_WR_REQ_IDLE.aw.cache;
  assign m_axi_gmem0_AWPROT   = AXI_WR_REQ_IDLE.aw.prot;
  assign m_axi_gmem0_AWQOS    = AXI_WR_REQ_IDLE.aw.qos;
  assign m_axi_gmem0_AWREGION = AXI_WR_REQ_IDLE.aw.region;
  assign m_axi_gmem0_WVALID   = AXI_WR_REQ_IDLE.w_valid;
  assign m_axi_gmem0_WDATA    = AXI_WR_REQ_IDLE.w.data;
  assign m_axi_gmem0_WSTRB    = AXI_WR_REQ_IDLE.w.strb;
  assign m_axi_gmem0_WLAST    = AXI_WR_REQ_IDLE.w.last;
  assign m_axi_gmem0_BREADY   = AXI_WR_REQ_IDLE.b_ready;

  // ---- gmem1: the write half from the write master, the read half idle ----------------------

  assign m_axi_gmem1_AWVALID  = wr_req.aw_valid;
  assign m_axi_gmem1_AWADDR   = wr_req.aw.addr;
  assign m_axi_gmem1_AWID     = wr_req.aw.id;
  assign m_axi_gmem1_AWLEN    = wr_req.aw.len;
  assign m_axi_gmem1_AWSIZE   = wr_req.aw.size;
  assign m_axi_gmem1_AWBURST  = wr_req.aw.burst;
  assign m_axi_gmem1_AWLOCK   = wr_req.aw.lock;
  assign m_axi_gmem1_AWCACHE  = wr_req.aw.cache;
  assign m_axi_gmem1_AWPROT   = wr_req.aw.prot;
  assign m_axi_gmem1_AWQOS    = wr_req.aw.qos;
  assign m_axi_gmem1_AWREGION = wr_req.aw.region;
  assign m_axi_gmem1_WVALID   = wr_req.w_valid;
  assign m_axi_gmem1_WDATA    = wr_req.w.data;
  assign m_axi_gmem1_WSTRB    = wr_req.w.strb;
  assign m_axi_gmem1_WLAST    = wr_req.w.last;
  assign m_axi_gmem1_BREADY   = wr_req.b_ready;
  assign wr_resp.aw_ready     = m_axi_gmem1_AWREADY;
  assign wr_resp.w_ready      = m_axi_gmem1_WREADY;
  assign wr_resp.b_valid      = m_axi_gmem1_BVALID;
  assign wr_resp.b.resp       = m_axi_gmem1_BRESP;
  assign wr_resp.b.id         = m_axi_gmem1_BID;

  assign m_axi_gmem1_ARVALID  = AXI_RD_REQ_IDLE.ar_valid;
  assign m_axi_gmem1_ARADDR   = AXI_RD_REQ_IDLE.ar.addr;
  assign m_axi_gmem1_ARID     = AXI_RD_REQ_IDLE.ar.id;
  assign m_axi_gmem1_ARLEN    = AXI_RD_REQ_IDLE.ar.len;
  assign m_axi_gmem1_ARSIZE   = AXI_RD_REQ_IDLE.ar.size;
  assign m_axi_gmem1_ARBURST  = AXI_RD_REQ_IDLE.ar.burst;
  assign m_axi_gmem1_ARLOCK   = AXI_RD_REQ_IDLE.ar.lock;
  assign m_axi_gmem1_ARCACHE  = AXI_RD_REQ_IDLE.ar.cache;
  assign m_axi_gmem1_ARPROT   = AXI_RD_REQ_IDLE.ar.prot;
  assign m_axi_gmem1_ARQOS    = AXI_RD_REQ_IDLE.ar.qos;
  assign m_axi_gmem1_ARREGION = AXI_RD_REQ_IDLE.ar.region;
  assign m_axi_gmem1_RREADY   = AXI_RD_REQ_IDLE.r_ready;

  // The tied-off channels' inputs, and the status this kernel cannot report.
  logic unused_tieoff;
  assign unused_tieoff = ^{m_axi_gmem0_AWREADY, m_axi_gmem0_WREADY, m_axi_gmem0_BVALID,
                           m_axi_gmem0_BRESP, m_axi_gmem0_BID, m_axi_gmem1_ARREADY,
                           m_axi_gmem1_RVALID, m_axi_gmem1_RDATA, m_axi_gmem1_RLAST,
                           m_axi_gmem1_RID, m_axi_gmem1_RRESP, rd_err, wr_err, wr_idle};

endmodule
