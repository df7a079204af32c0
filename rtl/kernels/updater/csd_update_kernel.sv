// csd_update_kernel: the updater kernel (ap_ctrl_hs) behind its Vitis port wrapper.
//
// The wrapper `csd_update` (the RTL kernel's top, with the port names Vitis expects: ap_clk,
// ap_rst_n, s_axi_control_*, m_axi_gmem<k>_*, interrupt) is generated from the argument table
// hls/include/csdkit/hls/update_args.h by rtl/gen/gen_args_pkg.cpp; it only renames its ports
// into the packed structs of csd_axi_pkg and instantiates this module, forwarding the
// parameters. The register map is csd_update_args_pkg, generated from the same table.
//
// Inside: the control slave (csd_axil_ctrl), one read master per read channel and one write
// master per write channel of the core (csd_axi_rd_master / csd_axi_wr_master: INCR bursts that
// never cross 4 KiB, several in flight), and csd_update_core, which sequences the launch
// (validation pass, streaming update, status last). A channel's command names a word offset
// within its array; the array's base pointer from the registers is added here.
//
// Bundles (update_args.h): gmem0 theta, gmem1 m and m_absmax, gmem2 v and v_absmax (read and
// written), gmem3 grad, gmem4 sp_idx (read), gmem5 sp_blk (read) and status (written), gmem6
// out16 (written). The unused half of a bundle is tied idle; the two read and two write masters
// of gmem1 / gmem2 share their bundle through csd_update_bundle_mux (told apart by the AXI ID).
// AXI error responses (SLVERR/DECERR) of any master are reported in status lane 12: bit 0 and
// the first failing bundle's number in bits [15:8].
//
// Launch: ap_start (level, from the control slave) starts the core once; the core's done pulse
// is ap_done and ap_ready; ap_idle while no launch runs.

`default_nettype none

module csd_update_kernel import csd_axi_pkg::*; #(
  /// The fp policy of this build: 1 FTZ/DAZ, 0 IEEE (launches must set mode bit 8 to match).
  parameter bit FtzDaz = 1'b0,
  /// binary32 lanes of the core (16 = one 512-bit beat per cycle).
  parameter int unsigned Lanes = 16,
  /// Read and write bursts in flight per master.
  parameter int unsigned MaxOutstanding = 8,
  /// Longest burst in beats (1..64: 64 beats of 64 bytes fill a 4 KiB page).
  parameter int unsigned MaxBurstLen = PAGE_BEATS,
  /// Words of each read master's data FIFO.
  parameter int unsigned RdFifoDepth = 512,
  /// Words of each write master's data FIFO.
  parameter int unsigned WrFifoDepth = 2 * PAGE_BEATS
) (
  /// Kernel clock (ap_clk).
  input  wire logic       clk_i,
  /// Kernel reset (ap_rst_n), active low, synchronous; registered once inside.
  input  wire logic       rst_ni,
  /// Control slave (s_axi_control), requests.
  input  wire axil_req_t  ctrl_req_i,
  /// Control slave, responses.
  output axil_resp_t      ctrl_resp_o,
  /// Interrupt (ap_done / ap_ready, as enabled by GIE and IER).
  output logic            interrupt_o,
  /// Bundle gmem0 (theta, read and written in place), requests.
  output axi_req_t        gmem0_req_o,
  /// Bundle gmem0, responses.
  input  wire axi_resp_t  gmem0_resp_i,
  /// Bundle gmem1 (m, read and written in place), requests.
  output axi_req_t        gmem1_req_o,
  /// Bundle gmem1, responses.
  input  wire axi_resp_t  gmem1_resp_i,
  /// Bundle gmem2 (v, read and written in place), requests.
  output axi_req_t        gmem2_req_o,
  /// Bundle gmem2, responses.
  input  wire axi_resp_t  gmem2_resp_i,
  /// Bundle gmem3 (grad: dense gradient or sparse values, read only), requests.
  output axi_req_t        gmem3_req_o,
  /// Bundle gmem3, responses (the write half is ignored).
  input  wire axi_resp_t  gmem3_resp_i,
  /// Bundle gmem4 (sp_idx: sparse offsets, read only), requests.
  output axi_req_t        gmem4_req_o,
  /// Bundle gmem4, responses (the write half is ignored).
  input  wire axi_resp_t  gmem4_resp_i,
  /// Bundle gmem5 (sp_blk reads and the status write), requests.
  output axi_req_t        gmem5_req_o,
  /// Bundle gmem5, responses.
  input  wire axi_resp_t  gmem5_resp_i,
  /// Bundle gmem6 (out16: low-precision weights, write only), requests.
  output axi_req_t        gmem6_req_o,
  /// Bundle gmem6, responses (the read half is ignored).
  input  wire axi_resp_t  gmem6_resp_i
);

  localparam int unsigned WordBits = Lanes * 32;

  localparam int unsigned NumRd = csd_update_pkg::NUM_RD;
  localparam int unsigned NumWr = csd_update_pkg::NUM_WR;

  // ---- Reset: rst_ni (the top's ap_rst_n) registered once, then synchronous everywhere -----

  logic rst_nq;
  always_ff @(posedge clk_i) begin
    rst_nq <= rst_ni;
  end

  // ---- Control slave ------------------------------------------------------------------------

  localparam int unsigned ArgWords = csd_update_args_pkg::ARG_WORDS;

  logic [ArgWords*32-1:0]       arg_words;
  csd_update_args_pkg::args_t   args;
  logic                         ap_start, ap_done, ap_idle, ap_ready;

  csd_axil_ctrl #(
    .ArgWords   (ArgWords),
    .ArgWordMask(csd_update_args_pkg::ARG_WORD_MASK)
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

  assign args = csd_update_args_pkg::args_from_words(arg_words);

  // ---- Launch sequencing: ap_start starts the core once; its done is ap_done/ap_ready -------

  typedef enum logic [1:0] {
    StIdle,   // waiting for ap_start
    StStart,  // start pulse to the core
    StBusy,   // the core runs
    StDone    // ap_done and ap_ready for one cycle
  } state_e;

  state_e state_d, state_q;
  logic   core_start, core_done, core_idle;

  always_comb begin
    state_d = state_q;
    unique case (state_q)
      StIdle:  if (ap_start && core_idle) state_d = StStart;
      StStart: state_d = StBusy;
      StBusy:  if (core_done) state_d = StDone;
      StDone:  state_d = StIdle;
      default: state_d = StIdle;
    endcase
  end

  assign core_start = (state_q == StStart);
  assign ap_idle    = (state_q == StIdle);
  assign ap_done    = (state_q == StDone);
  assign ap_ready   = (state_q == StDone);

  always_ff @(posedge clk_i) begin
    if (!rst_nq) begin
      state_q <= StIdle;
    end else begin
      state_q <= state_d;
    end
  end

  // ---- The core -----------------------------------------------------------------------------

  logic [NumRd-1:0]                                rd_cmd_valid, rd_cmd_ready;
  logic [NumRd-1:0][csd_update_pkg::CMD_BITS-1:0]  rd_cmd_offset, rd_cmd_count;
  logic [NumRd-1:0]                                rd_valid, rd_ready;
  logic [NumRd-1:0][WordBits-1:0]                  rd_data;
  logic [NumWr-1:0]                                wr_cmd_valid, wr_cmd_ready;
  logic [NumWr-1:0][csd_update_pkg::CMD_BITS-1:0]  wr_cmd_offset, wr_cmd_count;
  logic [NumWr-1:0]                                wr_valid, wr_ready, wr_done;
  logic [NumWr-1:0][WordBits-1:0]                  wr_data;

  csd_update_core #(
    .Lanes  (Lanes),
    .FtzDaz (FtzDaz),
    .StateQ8(1'b1)
  ) u_core (
    .clk_i          (clk_i),
    .rst_ni         (rst_nq),
    .start_i        (core_start),
    .done_o         (core_done),
    .idle_o         (core_idle),
    .n_i            (args.n),
    .nnz_i          (args.nnz),
    .mode_i         (args.mode),
    .unscale_i      (args.unscale),
    .lr_i           (args.lr),
    .beta1_i        (args.beta1),
    .omb1_i         (args.omb1),
    .beta2_i        (args.beta2),
    .omb2_i         (args.omb2),
    .eps_i          (args.eps),
    .wd_i           (args.wd),
    .c1_i           (args.c1),
    .c2_i           (args.c2),
    .seed_lo_i      (args.seed_lo),
    .seed_hi_i      (args.seed_hi),
    .step_lo_i      (args.step_lo),
    .step_hi_i      (args.step_hi),
    .index_lo_i     (args.index_lo),
    .index_hi_i     (args.index_hi),
    .rd_cmd_valid_o (rd_cmd_valid),
    .rd_cmd_ready_i (rd_cmd_ready),
    .rd_cmd_offset_o(rd_cmd_offset),
    .rd_cmd_count_o (rd_cmd_count),
    .rd_valid_i     (rd_valid),
    .rd_ready_o     (rd_ready),
    .rd_data_i      (rd_data),
    .wr_cmd_valid_o (wr_cmd_valid),
    .wr_cmd_ready_i (wr_cmd_ready),
    .wr_cmd_offset_o(wr_cmd_offset),
    .wr_cmd_count_o (wr_cmd_count),
    .wr_valid_o     (wr_valid),
    .wr_ready_i     (wr_ready),
    .wr_data_o      (wr_data),
    .wr_done_i      (wr_done),
    .axi_err_i      (axi_err_q)
  );

  // ---- Masters: one per channel; base pointer + word offset * 64 ----------------------------

  /// The array base pointer of each channel, from the argument registers.
  logic [NumRd-1:0][ADDR_WIDTH-1:0] rd_base;
  logic [NumWr-1:0][ADDR_WIDTH-1:0] wr_base;

  assign rd_base[csd_update_pkg::RdTheta] = args.theta;
  assign rd_base[csd_update_pkg::RdM] = args.m;
  assign rd_base[csd_update_pkg::RdV] = args.v;
  assign rd_base[csd_update_pkg::RdGrad] = args.grad;
  assign rd_base[csd_update_pkg::RdIdx] = args.sp_idx;
  assign rd_base[csd_update_pkg::RdBlk] = args.sp_blk;
  assign rd_base[csd_update_pkg::RdMAbs] = args.m_absmax;
  assign rd_base[csd_update_pkg::RdVAbs] = args.v_absmax;
  assign wr_base[csd_update_pkg::WrTheta] = args.theta;
  assign wr_base[csd_update_pkg::WrM] = args.m;
  assign wr_base[csd_update_pkg::WrV] = args.v;
  assign wr_base[csd_update_pkg::WrOut16] = args.out16;
  assign wr_base[csd_update_pkg::WrStatus] = args.status;
  assign wr_base[csd_update_pkg::WrMAbs] = args.m_absmax;
  assign wr_base[csd_update_pkg::WrVAbs] = args.v_absmax;

  axi_rd_req_t  [NumRd-1:0] rd_req;
  axi_rd_resp_t [NumRd-1:0] rd_resp;
  axi_wr_req_t  [NumWr-1:0] wr_req;
  axi_wr_resp_t [NumWr-1:0] wr_resp;
  logic         [NumRd-1:0] rd_idle, rd_err;
  logic         [NumWr-1:0] wr_idle, wr_err;

  for (genvar c = 0; c < NumRd; c++) begin : gen_rd
    csd_axi_rd_master #(
      .MaxOutstanding(MaxOutstanding),
      .MaxBurstLen   (MaxBurstLen),
      .FifoDepth     (RdFifoDepth)
    ) u_rd (
      .clk_i       (clk_i),
      .rst_ni      (rst_nq),
      .cmd_valid_i (rd_cmd_valid[c]),
      .cmd_ready_o (rd_cmd_ready[c]),
      .cmd_base_i  (rd_base[c] + {26'b0, rd_cmd_offset[c], 6'b0}),
      .cmd_len_i   (rd_cmd_count[c]),
      .data_valid_o(rd_valid[c]),
      .data_ready_i(rd_ready[c]),
      .data_o      (rd_data[c]),
      .idle_o      (rd_idle[c]),
      .err_o       (rd_err[c]),
      .err_clr_i   (core_start),
      .axi_req_o   (rd_req[c]),
      .axi_resp_i  (rd_resp[c])
    );
  end

  for (genvar c = 0; c < NumWr; c++) begin : gen_wr
    csd_axi_wr_master #(
      .MaxOutstanding(MaxOutstanding),
      .MaxBurstLen   (MaxBurstLen),
      .FifoDepth     (WrFifoDepth)
    ) u_wr (
      .clk_i       (clk_i),
      .rst_ni      (rst_nq),
      .cmd_valid_i (wr_cmd_valid[c]),
      .cmd_ready_o (wr_cmd_ready[c]),
      .cmd_base_i  (wr_base[c] + {26'b0, wr_cmd_offset[c], 6'b0}),
      .cmd_len_i   (wr_cmd_count[c]),
      .data_valid_i(wr_valid[c]),
      .data_ready_o(wr_ready[c]),
      .data_i      (wr_data[c]),
      .done_o      (wr_done[c]),
      .idle_o      (wr_idle[c]),
      .err_o       (wr_err[c]),
      .err_clr_i   (core_start),
      .axi_req_o   (wr_req[c]),
      .axi_resp_i  (wr_resp[c])
    );
  end

  // AXI error responses of the launch: status lane 12 (mode.h kStatusAxiError), bit 0 set once a
  // master saw SLVERR/DECERR, bits [15:8] the bundle (gmem<k>: k, update_args.h) of the first
  // one; of several in one cycle the lowest bundle number. Cleared at each start. The masters'
  // err_o are sticky, so a channel's error is seen one cycle after its response and stays; the
  // status write's own B response comes after the status word and cannot be reported in it.
  localparam logic [NumRd-1:0][7:0] RdBundle = {8'd2, 8'd1, 8'd5, 8'd4, 8'd3, 8'd2, 8'd1, 8'd0};
  localparam logic [NumWr-1:0][7:0] WrBundle = {8'd2, 8'd1, 8'd5, 8'd6, 8'd2, 8'd1, 8'd0};

  logic [6:0]  bundle_err;
  logic [7:0]  first_bundle;
  logic [31:0] axi_err_q, axi_err_d;

  always_comb begin
    bundle_err = '0;
    for (int unsigned c = 0; c < NumRd; c++) begin
      if (rd_err[c]) bundle_err[RdBundle[c][2:0]] = 1'b1;
    end
    for (int unsigned c = 0; c < NumWr; c++) begin
      if (wr_err[c]) bundle_err[WrBundle[c][2:0]] = 1'b1;
    end
    first_bundle = '0;
    for (int k = 6; k >= 0; k--) begin
      if (bundle_err[k]) first_bundle = 8'(k);
    end
    axi_err_d = axi_err_q;
    if (core_start) begin
      axi_err_d = '0;
    end else if (!axi_err_q[csd_update_pkg::AXI_ERROR_SEEN] && (|bundle_err)) begin
      axi_err_d = 32'(first_bundle) << csd_update_pkg::AXI_ERROR_BUNDLE_SHIFT;
      axi_err_d[csd_update_pkg::AXI_ERROR_SEEN] = 1'b1;
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_nq) begin
      axi_err_q <= '0;
    end else begin
      axi_err_q <= axi_err_d;
    end
  end
  logic unused_idle;
  assign unused_idle = (|rd_idle) ^ (|wr_idle);

  // ---- Bundles: each array's masters onto its m_axi bundle (update_args.h) ------------------
  // A bundle that is read and written joins the two halves; a bundle used in one direction
  // ties the other half idle and ignores that half's responses.

  assign gmem0_req_o = axi_req_join(rd_req[csd_update_pkg::RdTheta],
                                    wr_req[csd_update_pkg::WrTheta]);
  csd_update_bundle_mux u_mux_gmem1 (
    .clk_i    (clk_i),
    .rst_ni   (rst_nq),
    .rd_req_i ({rd_req[csd_update_pkg::RdMAbs], rd_req[csd_update_pkg::RdM]}),
    .rd_resp_o({rd_resp[csd_update_pkg::RdMAbs], rd_resp[csd_update_pkg::RdM]}),
    .wr_req_i ({wr_req[csd_update_pkg::WrMAbs], wr_req[csd_update_pkg::WrM]}),
    .wr_resp_o({wr_resp[csd_update_pkg::WrMAbs], wr_resp[csd_update_pkg::WrM]}),
    .req_o    (gmem1_req_o),
    .resp_i   (gmem1_resp_i)
  );
  csd_update_bundle_mux u_mux_gmem2 (
    .clk_i    (clk_i),
    .rst_ni   (rst_nq),
    .rd_req_i ({rd_req[csd_update_pkg::RdVAbs], rd_req[csd_update_pkg::RdV]}),
    .rd_resp_o({rd_resp[csd_update_pkg::RdVAbs], rd_resp[csd_update_pkg::RdV]}),
    .wr_req_i ({wr_req[csd_update_pkg::WrVAbs], wr_req[csd_update_pkg::WrV]}),
    .wr_resp_o({wr_resp[csd_update_pkg::WrVAbs], wr_resp[csd_update_pkg::WrV]}),
    .req_o    (gmem2_req_o),
    .resp_i   (gmem2_resp_i)
  );
  assign gmem3_req_o = axi_req_join(rd_req[csd_update_pkg::RdGrad], AXI_WR_REQ_IDLE);
  assign gmem4_req_o = axi_req_join(rd_req[csd_update_pkg::RdIdx], AXI_WR_REQ_IDLE);
  assign gmem5_req_o = axi_req_join(rd_req[csd_update_pkg::RdBlk],
                                    wr_req[csd_update_pkg::WrStatus]);
  assign gmem6_req_o = axi_req_join(AXI_RD_REQ_IDLE, wr_req[csd_update_pkg::WrOut16]);

  assign rd_resp[csd_update_pkg::RdTheta]  = axi_resp_rd(gmem0_resp_i);
  assign wr_resp[csd_update_pkg::WrTheta]  = axi_resp_wr(gmem0_resp_i);
  assign rd_resp[csd_update_pkg::RdGrad]   = axi_resp_rd(gmem3_resp_i);
  assign rd_resp[csd_update_pkg::RdIdx]    = axi_resp_rd(gmem4_resp_i);
  assign rd_resp[csd_update_pkg::RdBlk]    = axi_resp_rd(gmem5_resp_i);
  assign wr_resp[csd_update_pkg::WrStatus] = axi_resp_wr(gmem5_resp_i);
  assign wr_resp[csd_update_pkg::WrOut16]  = axi_resp_wr(gmem6_resp_i);

  // The responses of the idle halves.
  logic unused_idle_halves;
  assign unused_idle_halves = ^{axi_resp_wr(gmem3_resp_i), axi_resp_wr(gmem4_resp_i),
                                axi_resp_rd(gmem6_resp_i)};

endmodule
