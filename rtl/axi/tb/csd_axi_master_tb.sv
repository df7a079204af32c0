// csd_axi_master_tb: csd_axi_rd_master and csd_axi_wr_master on the two halves of one AXI4
// bundle (as a kernel reads and writes a buffer in place), with their command, stream and
// status ports brought out, for the unit bench tb_csd_axi_masters.cpp. The bench drives the
// commands and both streams itself (random gaps), so it can queue commands back to back, stall
// either stream, and inject error responses. Verilated with small, non-power-of-two parameters
// to cover what the copy kernel's defaults do not.
//
// The bench's top, csd_axi_master_tb_top (ap_clk, ap_rst_n, m_axi_gmem_* and the ports below
// as they are), is generated from this module's port list by rtl/gen/gen_args_pkg.cpp.

`default_nettype none

module csd_axi_master_tb import csd_axi_pkg::*; #(
  /// Bursts in flight per master.
  parameter int unsigned MaxOutstanding = 8,
  /// Longest burst in beats (1..64).
  parameter int unsigned MaxBurstLen = PAGE_BEATS,
  /// Words of the read master's data FIFO.
  parameter int unsigned RdFifoDepth = 512,
  /// Words of the write master's data FIFO.
  parameter int unsigned WrFifoDepth = 2 * PAGE_BEATS
) (
  /// Clock (ap_clk).
  input  wire logic                  clk_i,
  /// Reset (ap_rst_n), active low, synchronous; registered once inside.
  input  wire logic                  rst_ni,

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

  // ---- The bundle both masters share (m_axi_gmem) ----
  /// Bundle gmem, requests.
  output axi_req_t                   gmem_req_o,
  /// Bundle gmem, responses.
  input  wire axi_resp_t             gmem_resp_i
);

  logic rst_nq;
  always_ff @(posedge clk_i) begin
    rst_nq <= rst_ni;
  end

  axi_rd_req_t  rd_req;
  axi_wr_req_t  wr_req;

  csd_axi_rd_master #(
    .MaxOutstanding(MaxOutstanding),
    .MaxBurstLen   (MaxBurstLen),
    .FifoDepth     (RdFifoDepth)
  ) u_rd (
    .clk_i       (clk_i),
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
    .axi_resp_i  (axi_resp_rd(gmem_resp_i))
  );

  csd_axi_wr_master #(
    .MaxOutstanding(MaxOutstanding),
    .MaxBurstLen   (MaxBurstLen),
    .FifoDepth     (WrFifoDepth)
  ) u_wr (
    .clk_i       (clk_i),
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
    .axi_resp_i  (axi_resp_wr(gmem_resp_i))
  );

  // One bundle: the package helpers join the request halves and split the response.
  assign gmem_req_o = axi_req_join(rd_req, wr_req);

endmodule
