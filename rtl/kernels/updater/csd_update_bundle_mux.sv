// csd_update_bundle_mux: two read masters and two write masters of the kernel on one m_axi
// bundle: a moment's codes and its absmax array (update_args.h puts m and m_absmax on gmem1,
// v and v_absmax on gmem2).
//
// The AXI ID tells the two sources apart (ID_WIDTH is 1; each master issues ID 0): AR and AW go
// out with the source's number as their ID, R and B come back to the source their ID names.
// A subordinate may reorder responses of different IDs but keeps each ID in order, which is all
// each master needs (its own bursts complete in order). W has no ID in AXI4: its bursts must
// follow the order of their AWs, so the granted AW's source is queued and W beats are taken
// from the head source until WLAST (a master's W waits, not valid-gated, until its AW went).
//
// Arbitration, AR and AW alike: a request on the bus is held until its handshake (AXI: once
// valid, stable until ready); otherwise the source that was not granted last goes first when
// both ask. An AW is offered only while the W order queue has room (it never refuses a word
// then: pops only make room), so the queue never overflows.

`default_nettype none

module csd_update_bundle_mux import csd_axi_pkg::*; #(
  /// AW bursts whose W beats may be pending at once (the W order queue).
  parameter int unsigned MaxBursts = 32
) (
  /// Clock.
  input  wire logic                clk_i,
  /// Synchronous reset, active low (arbiters and the W order queue).
  input  wire logic                rst_ni,
  /// The two read masters (0: codes, 1: absmax), requests.
  input  wire axi_rd_req_t [1:0]   rd_req_i,
  /// The two read masters, responses.
  output axi_rd_resp_t [1:0]       rd_resp_o,
  /// The two write masters, requests.
  input  wire axi_wr_req_t [1:0]   wr_req_i,
  /// The two write masters, responses.
  output axi_wr_resp_t [1:0]       wr_resp_o,
  /// The bundle, requests.
  output axi_req_t                 req_o,
  /// The bundle, responses.
  input  wire axi_resp_t           resp_i
);

  // ---- AR ---------------------------------------------------------------------------------------
  logic ar_hold_q, ar_sel_q, ar_last_q, ar_sel;

  assign ar_sel = ar_hold_q ? ar_sel_q :
                  (rd_req_i[0].ar_valid && rd_req_i[1].ar_valid) ? !ar_last_q :
                  rd_req_i[1].ar_valid;

  always_comb begin
    req_o.ar = rd_req_i[ar_sel].ar;
    req_o.ar.id = id_t'(ar_sel);
    req_o.ar_valid = rd_req_i[ar_sel].ar_valid;
    req_o.r_ready = rd_req_i[resp_i.r.id[0]].r_ready;
    for (int unsigned k = 0; k < 2; k++) begin
      rd_resp_o[k].ar_ready = resp_i.ar_ready && (ar_sel == 1'(k));
      rd_resp_o[k].r = resp_i.r;
      rd_resp_o[k].r.id = '0;
      rd_resp_o[k].r_valid = resp_i.r_valid && (resp_i.r.id[0] == 1'(k));
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      ar_hold_q <= 1'b0;
      ar_sel_q <= 1'b0;
      ar_last_q <= 1'b1;
    end else begin
      ar_hold_q <= req_o.ar_valid && !resp_i.ar_ready;
      ar_sel_q <= ar_sel;
      if (req_o.ar_valid && resp_i.ar_ready) ar_last_q <= ar_sel;
    end
  end

  // ---- AW, and the order of the W bursts ----------------------------------------------------
  logic aw_hold_q, aw_sel_q, aw_last_q, aw_sel, aw_room, aw_fire;
  logic w_head_valid, w_head, w_pop;
  logic [$clog2(MaxBursts+1)-1:0] w_count;

  assign aw_sel = aw_hold_q ? aw_sel_q :
                  (wr_req_i[0].aw_valid && wr_req_i[1].aw_valid) ? !aw_last_q :
                  wr_req_i[1].aw_valid;
  assign aw_fire = req_o.aw_valid && resp_i.aw_ready;

  csd_fifo #(
    .Width (1),
    .Depth (MaxBursts),
    .OutReg(1'b0)
  ) u_w_order (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .in_valid_i (aw_fire),
    .in_ready_o (aw_room),
    .in_data_i  (aw_sel),
    .out_valid_o(w_head_valid),
    .out_ready_i(w_pop),
    .out_data_o (w_head),
    .count_o    (w_count)
  );

  assign w_pop = req_o.w_valid && resp_i.w_ready && req_o.w.last;

  always_comb begin
    req_o.aw = wr_req_i[aw_sel].aw;
    req_o.aw.id = id_t'(aw_sel);
    req_o.aw_valid = wr_req_i[aw_sel].aw_valid && aw_room;
    req_o.w = wr_req_i[w_head].w;
    req_o.w_valid = w_head_valid && wr_req_i[w_head].w_valid;
    req_o.b_ready = wr_req_i[resp_i.b.id[0]].b_ready;
    for (int unsigned k = 0; k < 2; k++) begin
      wr_resp_o[k].aw_ready = resp_i.aw_ready && aw_room && (aw_sel == 1'(k));
      wr_resp_o[k].w_ready = resp_i.w_ready && w_head_valid && (w_head == 1'(k));
      wr_resp_o[k].b = resp_i.b;
      wr_resp_o[k].b.id = '0;
      wr_resp_o[k].b_valid = resp_i.b_valid && (resp_i.b.id[0] == 1'(k));
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      aw_hold_q <= 1'b0;
      aw_sel_q <= 1'b0;
      aw_last_q <= 1'b1;
    end else begin
      aw_hold_q <= req_o.aw_valid && !resp_i.aw_ready;
      aw_sel_q <= aw_sel;
      if (aw_fire) aw_last_q <= aw_sel;
    end
  end

  logic unused_count;
  assign unused_count = ^w_count;

endmodule
