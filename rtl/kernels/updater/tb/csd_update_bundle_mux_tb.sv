// csd_update_bundle_mux_tb: the bench top of csd_update_bundle_mux (tb_csd_update_bundle_mux.cpp).
//
// The mux's ports are packed AXI structs of 512-bit beats; the bench drives narrow flat ports
// instead. Each request carries a 32-bit tag that this top spreads over every field the mux
// must pass through unchanged, and each output reports the tag back with an `intact` flag that
// says every copy arrived as it was put in, so one compare in the bench covers the whole
// payload:
//   AR / AW: addr = {~tag, tag}, len = tag[7:0], size = tag[10:8], burst = tag[12:11],
//            lock = tag[13], cache = tag[17:14], prot = tag[20:18], qos = tag[24:21],
//            region = tag[28:25], id = tag[29] (the mux must replace it by the source);
//   W:       data = 16 copies of the word, strb = 2 copies;
//   R:       data = 16 copies of the word (id, resp and last from their own ports).
// Nothing else: the mux itself is instantiated as it is.

`default_nettype none

module csd_update_bundle_mux_tb import csd_axi_pkg::*; #(
  /// Passed to the mux: AW bursts whose W beats may be pending at once.
  parameter int unsigned MaxBursts = 3
) (
  /// Clock.
  input  wire logic             clk_i,
  /// Synchronous reset, active low.
  input  wire logic             rst_ni,

  // ---- The two read masters (index = source: 0 codes, 1 absmax) ----
  /// AR valid, per master.
  input  wire logic [1:0]       m_ar_valid_i,
  /// AR tag (see above), per master.
  input  wire logic [1:0][31:0] m_ar_tag_i,
  /// AR ready, per master.
  output logic      [1:0]       m_ar_ready_o,
  /// R ready, per master.
  input  wire logic [1:0]       m_r_ready_i,
  /// R valid, per master.
  output logic      [1:0]       m_r_valid_o,
  /// R data word (bits [31:0] of the beat), per master.
  output logic      [1:0][31:0] m_r_data_o,
  /// R id as the master sees it (the mux returns 0), per master.
  output logic      [1:0]       m_r_id_o,
  /// R resp, per master.
  output logic      [1:0][1:0]  m_r_resp_o,
  /// R last, per master.
  output logic      [1:0]       m_r_last_o,
  /// R data holds 16 copies of its word, per master.
  output logic      [1:0]       m_r_intact_o,

  // ---- The two write masters ----
  /// AW valid, per master.
  input  wire logic [1:0]       m_aw_valid_i,
  /// AW tag, per master.
  input  wire logic [1:0][31:0] m_aw_tag_i,
  /// AW ready, per master.
  output logic      [1:0]       m_aw_ready_o,
  /// W valid, per master.
  input  wire logic [1:0]       m_w_valid_i,
  /// W data word, per master.
  input  wire logic [1:0][31:0] m_w_data_i,
  /// W last, per master.
  input  wire logic [1:0]       m_w_last_i,
  /// W ready, per master.
  output logic      [1:0]       m_w_ready_o,
  /// B ready, per master.
  input  wire logic [1:0]       m_b_ready_i,
  /// B valid, per master.
  output logic      [1:0]       m_b_valid_o,
  /// B id as the master sees it (0), per master.
  output logic      [1:0]       m_b_id_o,
  /// B resp, per master.
  output logic      [1:0][1:0]  m_b_resp_o,

  // ---- The bundle ----
  /// AR valid.
  output logic                  s_ar_valid_o,
  /// AR id (the source).
  output logic                  s_ar_id_o,
  /// AR tag (addr[31:0]).
  output logic      [31:0]      s_ar_tag_o,
  /// Every AR field equals what the tag gives.
  output logic                  s_ar_intact_o,
  /// AR ready.
  input  wire logic             s_ar_ready_i,
  /// R valid.
  input  wire logic             s_r_valid_i,
  /// R id: the source the beat belongs to.
  input  wire logic             s_r_id_i,
  /// R data word.
  input  wire logic [31:0]      s_r_data_i,
  /// R resp.
  input  wire logic [1:0]       s_r_resp_i,
  /// R last.
  input  wire logic             s_r_last_i,
  /// R ready.
  output logic                  s_r_ready_o,
  /// AW valid.
  output logic                  s_aw_valid_o,
  /// AW id (the source).
  output logic                  s_aw_id_o,
  /// AW tag.
  output logic      [31:0]      s_aw_tag_o,
  /// Every AW field equals what the tag gives.
  output logic                  s_aw_intact_o,
  /// AW ready.
  input  wire logic             s_aw_ready_i,
  /// W valid.
  output logic                  s_w_valid_o,
  /// W data word.
  output logic      [31:0]      s_w_data_o,
  /// W last.
  output logic                  s_w_last_o,
  /// W data and strobes hold their copies of the word.
  output logic                  s_w_intact_o,
  /// W ready.
  input  wire logic             s_w_ready_i,
  /// B valid.
  input  wire logic             s_b_valid_i,
  /// B id.
  input  wire logic             s_b_id_i,
  /// B resp.
  input  wire logic [1:0]       s_b_resp_i,
  /// B ready.
  output logic                  s_b_ready_o
);

  /// An AR / AW payload from its tag.
  function automatic ax_chan_t ax_from_tag(logic [31:0] tag);
    ax_chan_t ax;
    ax.id = id_t'(tag[29]);
    ax.addr = {~tag, tag};
    ax.len = tag[7:0];
    ax.size = tag[10:8];
    ax.burst = tag[12:11];
    ax.lock = tag[13];
    ax.cache = tag[17:14];
    ax.prot = tag[20:18];
    ax.qos = tag[24:21];
    ax.region = tag[28:25];
    return ax;
  endfunction

  /// The payload agrees with the tag in addr[31:0] (the id is checked by the bench).
  function automatic logic ax_intact(ax_chan_t ax);
    ax_chan_t exp;
    exp = ax_from_tag(ax.addr[31:0]);
    exp.id = ax.id;
    return ax == exp;
  endfunction

  axi_rd_req_t  [1:0] rd_req;
  axi_rd_resp_t [1:0] rd_resp;
  axi_wr_req_t  [1:0] wr_req;
  axi_wr_resp_t [1:0] wr_resp;
  axi_req_t           req;
  axi_resp_t          resp;

  for (genvar k = 0; k < 2; k++) begin : g_master
    assign rd_req[k].ar = ax_from_tag(m_ar_tag_i[k]);
    assign rd_req[k].ar_valid = m_ar_valid_i[k];
    assign rd_req[k].r_ready = m_r_ready_i[k];
    assign m_ar_ready_o[k] = rd_resp[k].ar_ready;
    assign m_r_valid_o[k] = rd_resp[k].r_valid;
    assign m_r_data_o[k] = rd_resp[k].r.data[31:0];
    assign m_r_id_o[k] = rd_resp[k].r.id[0];
    assign m_r_resp_o[k] = rd_resp[k].r.resp;
    assign m_r_last_o[k] = rd_resp[k].r.last;
    assign m_r_intact_o[k] = rd_resp[k].r.data == {16{rd_resp[k].r.data[31:0]}};

    assign wr_req[k].aw = ax_from_tag(m_aw_tag_i[k]);
    assign wr_req[k].aw_valid = m_aw_valid_i[k];
    assign wr_req[k].w.data = {16{m_w_data_i[k]}};
    assign wr_req[k].w.strb = {2{m_w_data_i[k]}};
    assign wr_req[k].w.last = m_w_last_i[k];
    assign wr_req[k].w_valid = m_w_valid_i[k];
    assign wr_req[k].b_ready = m_b_ready_i[k];
    assign m_aw_ready_o[k] = wr_resp[k].aw_ready;
    assign m_w_ready_o[k] = wr_resp[k].w_ready;
    assign m_b_valid_o[k] = wr_resp[k].b_valid;
    assign m_b_id_o[k] = wr_resp[k].b.id[0];
    assign m_b_resp_o[k] = wr_resp[k].b.resp;
  end

  csd_update_bundle_mux #(
    .MaxBursts(MaxBursts)
  ) u_mux (
    .clk_i    (clk_i),
    .rst_ni   (rst_ni),
    .rd_req_i (rd_req),
    .rd_resp_o(rd_resp),
    .wr_req_i (wr_req),
    .wr_resp_o(wr_resp),
    .req_o    (req),
    .resp_i   (resp)
  );

  assign s_ar_valid_o = req.ar_valid;
  assign s_ar_id_o = req.ar.id[0];
  assign s_ar_tag_o = req.ar.addr[31:0];
  assign s_ar_intact_o = ax_intact(req.ar);
  assign s_r_ready_o = req.r_ready;
  assign s_aw_valid_o = req.aw_valid;
  assign s_aw_id_o = req.aw.id[0];
  assign s_aw_tag_o = req.aw.addr[31:0];
  assign s_aw_intact_o = ax_intact(req.aw);
  assign s_w_valid_o = req.w_valid;
  assign s_w_data_o = req.w.data[31:0];
  assign s_w_last_o = req.w.last;
  assign s_w_intact_o = req.w.data == {16{req.w.data[31:0]}} &&
                        req.w.strb == {2{req.w.data[31:0]}};
  assign s_b_ready_o = req.b_ready;

  assign resp.ar_ready = s_ar_ready_i;
  assign resp.aw_ready = s_aw_ready_i;
  assign resp.w_ready = s_w_ready_i;
  assign resp.r_valid = s_r_valid_i;
  assign resp.r.id = id_t'(s_r_id_i);
  assign resp.r.data = {16{s_r_data_i}};
  assign resp.r.resp = s_r_resp_i;
  assign resp.r.last = s_r_last_i;
  assign resp.b_valid = s_b_valid_i;
  assign resp.b.id = id_t'(s_b_id_i);
  assign resp.b.resp = s_b_resp_i;

endmodule
