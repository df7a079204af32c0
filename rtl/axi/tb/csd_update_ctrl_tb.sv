// csd_update_ctrl_tb: csd_axil_ctrl with the register map of csd_update (the generated
// csd_update_args_pkg) and its core-side handshake brought out, for the unit bench
// tb_csd_update_ctrl.cpp: the bench plays the core (ap_start -> busy -> ap_done/ap_ready) and
// checks every register of the map, the clear-on-read and toggle-on-write bits, auto_restart
// and the interrupt, and that each argument arrives in its field of args_t.
//
// The bench's top, csd_update_ctrl_tb_top (ap_clk, ap_rst_n, s_axi_control_*, interrupt and
// the core-side ports below as they are), is generated from this module's port list and the
// argument table by rtl/gen/gen_args_pkg.cpp.

`default_nettype none

module csd_update_ctrl_tb import csd_axi_pkg::*; (
  /// Clock (ap_clk).
  input  wire logic                  clk_i,
  /// Reset (ap_rst_n), active low, synchronous; registered once inside.
  input  wire logic                  rst_ni,
  /// Control slave (s_axi_control), requests.
  input  wire axil_req_t             ctrl_req_i,
  /// Control slave, responses.
  output axil_resp_t                 ctrl_resp_o,
  /// Interrupt (ap_done / ap_ready, as enabled by GIE and IER).
  output logic                       interrupt_o,

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
  logic [ArgWords*32-1:0] arg_words;

  always_ff @(posedge clk_i) begin
    rst_nq <= rst_ni;
  end

  csd_axil_ctrl #(
    .ArgWords   (ArgWords),
    .ArgWordMask(csd_update_args_pkg::ARG_WORD_MASK)
  ) u_ctrl (
    .clk_i      (clk_i),
    .rst_ni     (rst_nq),
    .axil_req_i (ctrl_req_i),
    .axil_resp_o(ctrl_resp_o),
    .args_o     (arg_words),
    .ap_start_o (ap_start_o),
    .ap_done_i  (ap_done_i),
    .ap_idle_i  (ap_idle_i),
    .ap_ready_i (ap_ready_i),
    .interrupt_o(interrupt_o)
  );

  assign args_o = csd_update_args_pkg::args_from_words(arg_words);

endmodule
