// csd_update_ctrl_tb_top: csd_axil_ctrl with the register map of csd_update (the generated
// csd_update_args_pkg) and its core-side handshake brought out, for the unit bench
// tb_csd_update_ctrl.cpp: the bench plays the core (ap_start -> busy -> ap_done/ap_ready) and
// checks every register of the map, the clear-on-read and toggle-on-write bits, auto_restart
// and the interrupt, and that each argument arrives in its field of args_t.

`default_nettype none

module csd_update_ctrl_tb_top import csd_axi_pkg::*; (
  /// Clock.
  input  wire logic                  ap_clk,
  /// Reset, active low, synchronous (registered once inside).
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

  // ---- Core side ----
  /// ap_start to the core.
  output logic                       ap_start_o,
  /// ap_done from the core.
  input  wire logic                  ap_done_i,
  /// ap_idle from the core.
  input  wire logic                  ap_idle_i,
  /// ap_ready from the core.
  input  wire logic                  ap_ready_i,
  /// The arguments as the core would see them.
  output csd_update_args_pkg::args_t args_o
);

  localparam int unsigned ArgWords = csd_update_args_pkg::ARG_WORDS;

  logic                   rst_nq;
  axil_req_t              axil_req;
  axil_resp_t             axil_resp;
  logic [ArgWords*32-1:0] arg_words;

  always_ff @(posedge ap_clk) begin
    rst_nq <= ap_rst_n;
  end

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
    .ArgWordMask(csd_update_args_pkg::ARG_WORD_MASK)
  ) u_ctrl (
    .clk_i      (ap_clk),
    .rst_ni     (rst_nq),
    .axil_req_i (axil_req),
    .axil_resp_o(axil_resp),
    .args_o     (arg_words),
    .ap_start_o (ap_start_o),
    .ap_done_i  (ap_done_i),
    .ap_idle_i  (ap_idle_i),
    .ap_ready_i (ap_ready_i),
    .interrupt_o(interrupt)
  );

  assign args_o = csd_update_args_pkg::args_from_words(arg_words);

endmodule
