// csd_axi_master_tb_top: csd_axi_rd_master and csd_axi_wr_master on the two halves of one
// AXI4 bundle (as a kernel reads and writes a buffer in place), with their command, stream and
// status ports brought out, for the unit bench tb_csd_axi_masters.cpp. The bench drives the
// commands and both streams itself (random gaps), so it can queue commands back to back, stall
// either stream, and inject error responses. Verilated with small, non-power-of-two parameters
// to cover what the copy kernel's defaults do not.

`default_nettype none

module csd_axi_master_tb_top import csd_axi_pkg::*; #(
  /// Bursts in flight per master.
  parameter int unsigned MaxOutstanding = 8,
  /// Longest burst in beats (1..64).
  parameter int unsigned MaxBurstLen = PAGE_BEATS,
  /// Words of the read master's data FIFO.
  parameter int unsigned RdFifoDepth = 512,
  /// Words of the write master's data FIFO.
  parameter int unsigned WrFifoDepth = 2 * PAGE_BEATS
) (
  /// Clock.
  input  wire logic                  ap_clk,
  /// Reset, active low, synchronous (registered once inside).
  input  wire logic                  ap_rst_n,

  // ---- Read master ----
  /// Read command valid.
  input  wire logic                  rd_cmd_valid_i,
  /// Read command ready.
  output logic                       rd_cmd_ready_o,
  /// Read command base address.
  input  wire logic [ADDR_WIDTH-1:0] rd_cmd_base_i,
  /// Read command length in words.
  input  wire logic [31:0]           rd_cmd_len_i,
  /// Read stream valid.
  output logic                       rd_data_valid_o,
  /// Read stream ready.
  input  wire logic                  rd_data_ready_i,
  /// Read stream word.
  output logic [DATA_WIDTH-1:0]      rd_data_o,
  /// Read master idle.
  output logic                       rd_idle_o,
  /// Read error (sticky).
  output logic                       rd_err_o,
  /// Clears the read error.
  input  wire logic                  rd_err_clr_i,

  // ---- Write master ----
  /// Write command valid.
  input  wire logic                  wr_cmd_valid_i,
  /// Write command ready.
  output logic                       wr_cmd_ready_o,
  /// Write command base address.
  input  wire logic [ADDR_WIDTH-1:0] wr_cmd_base_i,
  /// Write command length in words.
  input  wire logic [31:0]           wr_cmd_len_i,
  /// Write stream valid.
  input  wire logic                  wr_data_valid_i,
  /// Write stream ready.
  output logic                       wr_data_ready_o,
  /// Write stream word.
  input  wire logic [DATA_WIDTH-1:0] wr_data_i,
  /// Write command done (pulse).
  output logic                       wr_done_o,
  /// Write master idle.
  output logic                       wr_idle_o,
  /// Write error (sticky).
  output logic                       wr_err_o,
  /// Clears the write error.
  input  wire logic                  wr_err_clr_i,

  // ---- m_axi_gmem: the bundle both masters share ----
  /// gmem AW valid.
  output logic                       m_axi_gmem_AWVALID,
  /// gmem AW ready.
  input  wire logic                  m_axi_gmem_AWREADY,
  /// gmem AW address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem_AWADDR,
  /// gmem AW ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem_AWID,
  /// gmem AW length (beats - 1).
  output logic [7:0]                 m_axi_gmem_AWLEN,
  /// gmem AW size.
  output logic [2:0]                 m_axi_gmem_AWSIZE,
  /// gmem AW burst type.
  output logic [1:0]                 m_axi_gmem_AWBURST,
  /// gmem AW lock.
  output logic                       m_axi_gmem_AWLOCK,
  /// gmem AW cache.
  output logic [3:0]                 m_axi_gmem_AWCACHE,
  /// gmem AW protection.
  output logic [2:0]                 m_axi_gmem_AWPROT,
  /// gmem AW QoS.
  output logic [3:0]                 m_axi_gmem_AWQOS,
  /// gmem AW region.
  output logic [3:0]                 m_axi_gmem_AWREGION,
  /// gmem W valid.
  output logic                       m_axi_gmem_WVALID,
  /// gmem W ready.
  input  wire logic                  m_axi_gmem_WREADY,
  /// gmem W data.
  output logic [DATA_WIDTH-1:0]      m_axi_gmem_WDATA,
  /// gmem W strobes.
  output logic [STRB_WIDTH-1:0]      m_axi_gmem_WSTRB,
  /// gmem W last.
  output logic                       m_axi_gmem_WLAST,
  /// gmem B valid.
  input  wire logic                  m_axi_gmem_BVALID,
  /// gmem B ready.
  output logic                       m_axi_gmem_BREADY,
  /// gmem B response.
  input  wire logic [1:0]            m_axi_gmem_BRESP,
  /// gmem B ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem_BID,
  /// gmem AR valid.
  output logic                       m_axi_gmem_ARVALID,
  /// gmem AR ready.
  input  wire logic                  m_axi_gmem_ARREADY,
  /// gmem AR address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem_ARADDR,
  /// gmem AR ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem_ARID,
  /// gmem AR length (beats - 1).
  output logic [7:0]                 m_axi_gmem_ARLEN,
  /// gmem AR size.
  output logic [2:0]                 m_axi_gmem_ARSIZE,
  /// gmem AR burst type.
  output logic [1:0]                 m_axi_gmem_ARBURST,
  /// gmem AR lock.
  output logic                       m_axi_gmem_ARLOCK,
  /// gmem AR cache.
  output logic [3:0]                 m_axi_gmem_ARCACHE,
  /// gmem AR protection.
  output logic [2:0]                 m_axi_gmem_ARPROT,
  /// gmem AR QoS.
  output logic [3:0]                 m_axi_gmem_ARQOS,
  /// gmem AR region.
  output logic [3:0]                 m_axi_gmem_ARREGION,
  /// gmem R valid.
  input  wire logic                  m_axi_gmem_RVALID,
  /// gmem R ready.
  output logic                       m_axi_gmem_RREADY,
  /// gmem R data.
  input  wire logic [DATA_WIDTH-1:0] m_axi_gmem_RDATA,
  /// gmem R last.
  input  wire logic                  m_axi_gmem_RLAST,
  /// gmem R ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem_RID,
  /// gmem R response.
  input  wire logic [1:0]            m_axi_gmem_RRESP

);

  logic rst_nq;
  always_ff @(posedge ap_clk) begin
    rst_nq <= ap_rst_n;
  end

  axi_rd_req_t  rd_req;
  axi_wr_req_t  wr_req;
  axi_req_t     req;
  axi_resp_t    resp;

  csd_axi_rd_master #(
    .MaxOutstanding(MaxOutstanding),
    .MaxBurstLen   (MaxBurstLen),
    .FifoDepth     (RdFifoDepth)
  ) u_rd (
    .clk_i       (ap_clk),
    .rst_ni      (rst_nq),
    .cmd_valid_i (rd_cmd_valid_i),
    .cmd_ready_o (rd_cmd_ready_o),
    .cmd_base_i  (rd_cmd_base_i),
    .cmd_len_i   (rd_cmd_len_i),
    .data_valid_o(rd_data_valid_o),
    .data_ready_i(rd_data_ready_i),
    .data_o      (rd_data_o),
    .idle_o      (rd_idle_o),
    .err_o       (rd_err_o),
    .err_clr_i   (rd_err_clr_i),
    .axi_req_o   (rd_req),
    .axi_resp_i  (axi_resp_rd(resp))
  );

  csd_axi_wr_master #(
    .MaxOutstanding(MaxOutstanding),
    .MaxBurstLen   (MaxBurstLen),
    .FifoDepth     (WrFifoDepth)
  ) u_wr (
    .clk_i       (ap_clk),
    .rst_ni      (rst_nq),
    .cmd_valid_i (wr_cmd_valid_i),
    .cmd_ready_o (wr_cmd_ready_o),
    .cmd_base_i  (wr_cmd_base_i),
    .cmd_len_i   (wr_cmd_len_i),
    .data_valid_i(wr_data_valid_i),
    .data_ready_o(wr_data_ready_o),
    .data_i      (wr_data_i),
    .done_o      (wr_done_o),
    .idle_o      (wr_idle_o),
    .err_o       (wr_err_o),
    .err_clr_i   (wr_err_clr_i),
    .axi_req_o   (wr_req),
    .axi_resp_i  (axi_resp_wr(resp))
  );

  // One bundle: the package helpers join the request halves and split the response.
  assign req = axi_req_join(rd_req, wr_req);

  assign m_axi_gmem_AWVALID  = req.aw_valid;
  assign m_axi_gmem_AWADDR   = req.aw.addr;
  assign m_axi_gmem_AWID     = req.aw.id;
  assign m_axi_gmem_AWLEN    = req.aw.len;
  assign m_axi_gmem_AWSIZE   = req.aw.size;
  assign m_axi_gmem_AWBURST  = req.aw.burst;
  assign m_axi_gmem_AWLOCK   = req.aw.lock;
  assign m_axi_gmem_AWCACHE  = req.aw.cache;
  assign m_axi_gmem_AWPROT   = req.aw.prot;
  assign m_axi_gmem_AWQOS    = req.aw.qos;
  assign m_axi_gmem_AWREGION = req.aw.region;
  assign m_axi_gmem_WVALID   = req.w_valid;
  assign m_axi_gmem_WDATA    = req.w.data;
  assign m_axi_gmem_WSTRB    = req.w.strb;
  assign m_axi_gmem_WLAST    = req.w.last;
  assign m_axi_gmem_BREADY   = req.b_ready;
  assign m_axi_gmem_ARVALID  = req.ar_valid;
  assign m_axi_gmem_ARADDR   = req.ar.addr;
  assign m_axi_gmem_ARID     = req.ar.id;
  assign m_axi_gmem_ARLEN    = req.ar.len;
  assign m_axi_gmem_ARSIZE   = req.ar.size;
  assign m_axi_gmem_ARBURST  = req.ar.burst;
  assign m_axi_gmem_ARLOCK   = req.ar.lock;
  assign m_axi_gmem_ARCACHE  = req.ar.cache;
  assign m_axi_gmem_ARPROT   = req.ar.prot;
  assign m_axi_gmem_ARQOS    = req.ar.qos;
  assign m_axi_gmem_ARREGION = req.ar.region;
  assign m_axi_gmem_RREADY   = req.r_ready;

  assign resp.aw_ready = m_axi_gmem_AWREADY;
  assign resp.ar_ready = m_axi_gmem_ARREADY;
  assign resp.w_ready  = m_axi_gmem_WREADY;
  assign resp.b_valid  = m_axi_gmem_BVALID;
  assign resp.b.id     = m_axi_gmem_BID;
  assign resp.b.resp   = m_axi_gmem_BRESP;
  assign resp.r_valid  = m_axi_gmem_RVALID;
  assign resp.r.id     = m_axi_gmem_RID;
  assign resp.r.data   = m_axi_gmem_RDATA;
  assign resp.r.resp   = m_axi_gmem_RRESP;
  assign resp.r.last   = m_axi_gmem_RLAST;

endmodule
