// csd_update_core: the streaming optimizer-updater core of the csd_update kernel, independent of
// AXI. One launch updates one subgroup of n elements in place: AdamW, Adam, SGD (momentum,
// dampening, Nesterov), Adagrad or Lion; dense or block-sparse gradients in fp32/fp16/bf16; an
// optional fp16/bf16 copy of the updated weights. It computes exactly what the C++ model
// hls/kernels/csd_update.cpp computes, bit for bit, on every byte it writes.
//
// ---- Memory side --------------------------------------------------------------------------------
// Every array is a sequence of words of Lanes x 32 bits (binary32 / uint32 lane j in bits
// [32 j +: 32]; 16-bit arrays pack 2 * Lanes values, value j in bits [16 j +: 16]). Each array
// has its own channel, indexed by csd_update_pkg::rd_port_e / wr_port_e:
//   read  (theta, m, v, grad, idx, blk): a command (word offset within the array, word count,
//         valid/ready), then exactly `count` data words in order (valid/ready);
//   write (theta, m, v, out16, status): a command, then `count` data words in order
//         (valid/ready; offered only after the command was accepted), then one done pulse
//         from the memory side once all of them are committed.
// Commands always have count >= 1 and offset 0 (each pass reads or writes whole arrays); a
// channel has at most one command outstanding. The top wrapper adds base addresses
// (byte address = base + offset * Lanes * 4) and the AXI masters.
//
// ---- Launch -------------------------------------------------------------------------------------
// start_i (while idle_o) samples n, nnz, the mode word and the ten binary32 scalars. Then:
//   1. decode: a mode that DecodeMode (mode.h) rejects is a bad mode (0x01); so is a mode whose
//      ftz bit (8) differs from this build's FtzDaz: the RTL implements one fp policy per
//      build and refuses to compute under the other. Dense with nnz != 0: ERR_COUNT.
//   2. sparse only, the VALIDATION pass (ValidateSparse, same rules, order and positions):
//      nnz > n (no reads); the block table (csd_update_blk_check), then the indices against a
//      second read of the table (csd_update_idx_check). Values are not read.
//   3. the MAIN pass (no error so far): theta, m, v (only if the optimizer has them), and the
//      gradient (dense words, or blk + idx + values merged by csd_update_merge) stream through
//      Lanes copies of csd_update_lane, one word per cycle; theta', m', v' and out16 (if a copy
//      is requested) stream back out.
//   4. the status word (16 x 32 bits: error, position, n or 0, nnz or 0, magic in lane 15),
//      written last, after every other write was acknowledged. On any error it is the only
//      write. done_o pulses after its acknowledgement.
// Bytes read: the main pass reads each array it uses once: theta, m, v (4 n each), and the
// dense gradient (s n, s = 4 or 2) or the sparse stream (4 (nb + 1) + 2 nnz + s nnz), each
// rounded up to whole words; nb = ceil(n / 2^16). The validation pass reads the block table
// twice more (the table check; the block starts for the index check) and the indices once
// more: 8 (nb + 1) + 2 nnz bytes, rounded up to words, and about nnz / (2 Lanes) + nb cycles.
// (1 %-dense fp16 stream: +0.02 bytes per element against 0.04 for the stream and 24 for
// AdamW's state traffic.)
//
// ---- Flow control -------------------------------------------------------------------------------
// The fp units cannot stall, so the pipeline never does: a word is issued only with all of its
// inputs present (a join over the read skid buffers / the merge output) and only if every
// output FIFO it will enter has a slot reserved for it (credits: words in flight + words in
// the FIFO < FifoDepth, FifoDepth >= pipeline depth + 4). Back-pressure on any write channel
// therefore stops issue, never a pipeline stage; the FIFOs absorb what is in flight. With
// ideal streams one word enters and leaves per cycle.
//
// Element counts that are not a multiple of Lanes: the last word's lanes past n are written
// back exactly as read (the raw input word is held aside at issue and restored at the exit),
// and out16 lanes past n are zero. With Lanes < 16 the status buffer (64 bytes) takes
// 16 / Lanes words.

`default_nettype none

module csd_update_core #(
  /// binary32 lanes per memory word (a power of two, 2..16; 16 = 512-bit words).
  parameter int unsigned Lanes = 16,
  /// The fp policy of the build: 1 FTZ/DAZ, 0 IEEE; launches must set mode bit 8 to match.
  parameter bit FtzDaz = 1'b0,
  /// Bits per memory word (derived).
  localparam int unsigned WordBits = Lanes * 32
) (
  /// Clock.
  input  wire logic                                                    clk_i,
  /// Synchronous reset, active low (from a registered ap_rst_n).
  input  wire logic                                                    rst_ni,
  // ---- Control ----------------------------------------------------------------------------------
  /// Start a launch (sampled while idle_o; the arguments below are sampled with it).
  input  wire logic                                                    start_i,
  /// The launch finished (status written and acknowledged): one-cycle pulse.
  output logic                                                         done_o,
  /// No launch in progress.
  output logic                                                         idle_o,
  // ---- Launch arguments (register map of docs/kernel-interface.md) ------------------------------
  /// Elements in the subgroup.
  input  wire logic [31:0]                                             n_i,
  /// Sparse entries (0 when dense).
  input  wire logic [31:0]                                             nnz_i,
  /// Mode word (hls/include/csdkit/hls/mode.h).
  input  wire logic [31:0]                                             mode_i,
  /// binary32 bits: gradient multiplier (clip / loss scale).
  input  wire logic [31:0]                                             unscale_i,
  /// binary32 bits: step size.
  input  wire logic [31:0]                                             lr_i,
  /// binary32 bits: beta1 / momentum.
  input  wire logic [31:0]                                             beta1_i,
  /// binary32 bits: 1 - beta1 / 1 - dampening.
  input  wire logic [31:0]                                             omb1_i,
  /// binary32 bits: beta2.
  input  wire logic [31:0]                                             beta2_i,
  /// binary32 bits: 1 - beta2.
  input  wire logic [31:0]                                             omb2_i,
  /// binary32 bits: epsilon.
  input  wire logic [31:0]                                             eps_i,
  /// binary32 bits: L2 weight decay.
  input  wire logic [31:0]                                             wd_i,
  /// binary32 bits: weight multiplier.
  input  wire logic [31:0]                                             c1_i,
  /// binary32 bits: 1 / sqrt(bias correction 2).
  input  wire logic [31:0]                                             c2_i,
  // ---- Read channels, indexed by csd_update_pkg::rd_port_e --------------------------------------
  /// Command valid.
  output logic [csd_update_pkg::NUM_RD-1:0]                            rd_cmd_valid_o,
  /// Command accepted.
  input  wire logic [csd_update_pkg::NUM_RD-1:0]                       rd_cmd_ready_i,
  /// Command: first word, as a word offset within the array.
  output logic [csd_update_pkg::NUM_RD-1:0][csd_update_pkg::CMD_BITS-1:0] rd_cmd_offset_o,
  /// Command: words to read (>= 1).
  output logic [csd_update_pkg::NUM_RD-1:0][csd_update_pkg::CMD_BITS-1:0] rd_cmd_count_o,
  /// Read data word valid.
  input  wire logic [csd_update_pkg::NUM_RD-1:0]                       rd_valid_i,
  /// Read data word accepted (a register: never depends on rd_valid_i).
  output logic [csd_update_pkg::NUM_RD-1:0]                            rd_ready_o,
  /// Read data word.
  input  wire logic [csd_update_pkg::NUM_RD-1:0][WordBits-1:0]         rd_data_i,
  // ---- Write channels, indexed by csd_update_pkg::wr_port_e -------------------------------------
  /// Command valid.
  output logic [csd_update_pkg::NUM_WR-1:0]                            wr_cmd_valid_o,
  /// Command accepted.
  input  wire logic [csd_update_pkg::NUM_WR-1:0]                       wr_cmd_ready_i,
  /// Command: first word, as a word offset within the array.
  output logic [csd_update_pkg::NUM_WR-1:0][csd_update_pkg::CMD_BITS-1:0] wr_cmd_offset_o,
  /// Command: words to write (>= 1).
  output logic [csd_update_pkg::NUM_WR-1:0][csd_update_pkg::CMD_BITS-1:0] wr_cmd_count_o,
  /// Write data word valid (never depends on wr_ready_i).
  output logic [csd_update_pkg::NUM_WR-1:0]                            wr_valid_o,
  /// Write data word accepted.
  input  wire logic [csd_update_pkg::NUM_WR-1:0]                       wr_ready_i,
  /// Write data word.
  output logic [csd_update_pkg::NUM_WR-1:0][WordBits-1:0]              wr_data_o,
  /// All words of the channel's command are committed: one pulse per command.
  input  wire logic [csd_update_pkg::NUM_WR-1:0]                       wr_done_i,
  // ---- Status from outside the core -------------------------------------------------------------
  /// Lane 12 of the status word (the kernel's AXI error report; 0 without one), sampled when the
  /// status word is pushed.
  input  wire logic [31:0]                                             axi_err_i
);
  import csd_update_pkg::*;

  localparam int unsigned LaneBits = $clog2(Lanes);
  localparam int unsigned HalfBits = LaneBits + 1;  // log2 of 16-bit values per word
  /// Words of the 16-lane status buffer.
  localparam int unsigned StatusWords = STATUS_LANES / Lanes;
  localparam int unsigned StatusDepth = (StatusWords < 2) ? 2 : StatusWords;
  /// Output FIFO entries: room for everything in flight plus a few, a power of two.
  localparam int unsigned FifoDepth = 1 << $clog2(LANE_LATENCY + 1 + 4);
  localparam int unsigned FifoCountBits = $clog2(FifoDepth) + 1;

  if (Lanes < 2 || Lanes > 16 || (1 << LaneBits) != Lanes) begin : g_bad_lanes
    $error("csd_update_core: Lanes must be a power of two in 2..16");
  end

  // ---- Launch arguments -------------------------------------------------------------------------
  logic [31:0] n_q, nnz_q, mode_q;
  operands_t   scalars_q;

  always_ff @(posedge clk_i) begin
    if (start_i && idle_o) begin
      n_q <= n_i;
      nnz_q <= nnz_i;
      mode_q <= mode_i;
      scalars_q <= '{unscale: unscale_i, lr: lr_i, beta1: beta1_i, omb1: omb1_i,
                     beta2: beta2_i, omb2: omb2_i, eps: eps_i, wd: wd_i, c1: c1_i, c2: c2_i};
    end
  end

  // ---- Decoded launch constants (static from the launch's start to its end) ---------------------
  logic      dec_ok, sparse, use_m, use_v, use_out, half_grad;
  logic [1:0] grad_fmt, out_fmt;
  operands_t ops;
  sel_t      sel;

  csd_update_decode #(
    .FtzDaz(FtzDaz)
  ) u_decode (
    .mode_i    (mode_q),
    .scalars_i (scalars_q),
    .ok_o      (dec_ok),
    .sparse_o  (sparse),
    .grad_fmt_o(grad_fmt),
    .out_fmt_o (out_fmt),
    .use_m_o   (use_m),
    .use_v_o   (use_v),
    .use_out_o (use_out),
    .operands_o(ops),
    .sel_o     (sel)
  );

  assign half_grad = grad_fmt != DT_FP32;

  // Sizes, in words, by ceil(x / 2^s) without overflow.
  function automatic logic [31:0] ceil_shift(logic [31:0] x, int unsigned s);
    return (x >> s) + 32'(|(x & ((32'd1 << s) - 32'd1)));
  endfunction

  logic [31:0] words, hwords, idx_words, val_words, blk_words, grad_words;
  logic [16:0] nb, last_size;
  logic [LaneBits:0] n_last;

  assign words = ceil_shift(n_q, LaneBits);
  assign hwords = ceil_shift(n_q, HalfBits);
  assign nb = 17'(ceil_shift(n_q, BLOCK_BITS));
  assign last_size = {1'b0, n_q[BLOCK_BITS-1:0] - 16'd1} + 17'd1;
  assign blk_words = ceil_shift(32'(nb) + 32'd1, LaneBits);
  assign idx_words = ceil_shift(nnz_q, HalfBits);
  assign val_words = half_grad ? ceil_shift(nnz_q, HalfBits) : ceil_shift(nnz_q, LaneBits);
  assign grad_words = half_grad ? hwords : words;
  assign n_last = {1'b0, n_q[LaneBits-1:0] - LaneBits'(1)} + (LaneBits + 1)'(1);

  // ---- Channels ---------------------------------------------------------------------------------
  logic [NUM_RD-1:0]                rd_req, rd_drain, rd_idle, rd_valid, rd_pop;
  logic [NUM_RD-1:0][CMD_BITS-1:0]  rd_count;
  logic [NUM_RD-1:0][WordBits-1:0]  rd_data;
  logic [NUM_WR-1:0]                wr_req, wr_idle, wr_push;
  logic [NUM_WR-1:0][CMD_BITS-1:0]  wr_count;
  logic [NUM_WR-1:0][WordBits-1:0]  wr_data;
  logic [NUM_WR-1:0][FifoCountBits-1:0] wr_occ;

  assign rd_count[RdTheta] = words;
  assign rd_count[RdM] = words;
  assign rd_count[RdV] = words;
  assign rd_count[RdGrad] = sparse ? val_words : grad_words;
  assign rd_count[RdIdx] = idx_words;
  assign rd_count[RdBlk] = blk_words;
  assign wr_count[WrTheta] = words;
  assign wr_count[WrM] = words;
  assign wr_count[WrV] = words;
  assign wr_count[WrOut16] = hwords;
  assign wr_count[WrStatus] = 32'(StatusWords);

  for (genvar p = 0; p < NUM_RD; p++) begin : g_rd
    csd_update_rd_port #(
      .Width(WordBits)
    ) u_port (
      .clk_i       (clk_i),
      .rst_ni      (rst_ni),
      .req_i       (rd_req[p]),
      .offset_i    ('0),
      .count_i     (rd_count[p]),
      .drain_i     (rd_drain[p]),
      .idle_o      (rd_idle[p]),
      .cmd_valid_o (rd_cmd_valid_o[p]),
      .cmd_ready_i (rd_cmd_ready_i[p]),
      .cmd_offset_o(rd_cmd_offset_o[p]),
      .cmd_count_o (rd_cmd_count_o[p]),
      .valid_i     (rd_valid_i[p]),
      .ready_o     (rd_ready_o[p]),
      .data_i      (rd_data_i[p]),
      .valid_o     (rd_valid[p]),
      .ready_i     (rd_pop[p]),
      .data_o      (rd_data[p])
    );
  end

  for (genvar p = 0; p < NUM_WR; p++) begin : g_wr
    localparam int unsigned Depth = (p == WrStatus) ? StatusDepth : FifoDepth;
    logic [$clog2(Depth):0] occ;

    csd_update_wr_port #(
      .Width(WordBits),
      .Depth(Depth)
    ) u_port (
      .clk_i       (clk_i),
      .rst_ni      (rst_ni),
      .req_i       (wr_req[p]),
      .offset_i    ('0),
      .count_i     (wr_count[p]),
      .idle_o      (wr_idle[p]),
      .push_i      (wr_push[p]),
      .data_i      (wr_data[p]),
      .count_o     (occ),
      .cmd_valid_o (wr_cmd_valid_o[p]),
      .cmd_ready_i (wr_cmd_ready_i[p]),
      .cmd_offset_o(wr_cmd_offset_o[p]),
      .cmd_count_o (wr_cmd_count_o[p]),
      .valid_o     (wr_valid_o[p]),
      .ready_i     (wr_ready_i[p]),
      .data_o      (wr_data_o[p]),
      .done_i      (wr_done_i[p])
    );
    assign wr_occ[p] = FifoCountBits'(occ);
  end

  // ---- Controller -------------------------------------------------------------------------------
  typedef enum logic [3:0] {
    StIdle,       // waiting for start_i
    StDecode,     // mode and count checks; issue the table read of a sparse launch
    StTab,        // validation: block table
    StIdxStart,   // validation: issue the index and table reads
    StIdx,        // validation: indices
    StMainStart,  // main pass: issue every command
    StMain,       // main pass: stream
    StDrain,      // discard unread words of every read channel, then go to next_q
    StStatus,     // push the status word(s)
    StStatusWait, // wait for the status acknowledgement
    StDone        // done_o
  } state_e;

  state_e      state_q, state_d, next_q, next_d;
  logic [31:0] err_q, err_d, pos_q, pos_d;
  logic [$clog2(StatusWords + 1)-1:0] st_word_q, st_word_d;

  logic        tab_start, tab_done, idx_start, idx_done, main_start;
  logic [31:0] tab_err, tab_pos, idx_err, idx_pos;
  logic        main_finished;

  always_comb begin
    state_d = state_q;
    next_d = next_q;
    err_d = err_q;
    pos_d = pos_q;
    st_word_d = st_word_q;
    rd_req = '0;
    rd_drain = '0;
    wr_req = '0;
    tab_start = 1'b0;
    idx_start = 1'b0;
    main_start = 1'b0;
    unique case (state_q)
      StIdle: begin
        if (start_i) begin
          err_d = '0;
          pos_d = '0;
          state_d = StDecode;
        end
      end
      StDecode: begin
        if (!dec_ok) begin
          err_d = ERR_BAD_MODE;
          state_d = StStatus;
        end else if (sparse) begin
          if (nnz_q > n_q) begin
            err_d = ERR_COUNT;
            state_d = StStatus;
          end else begin
            rd_req[RdBlk] = 1'b1;
            tab_start = 1'b1;
            state_d = StTab;
          end
        end else if (nnz_q != '0) begin
          err_d = ERR_COUNT;
          state_d = StStatus;
        end else begin
          state_d = StMainStart;
        end
      end
      StTab: begin
        if (tab_done) begin
          err_d = tab_err;
          pos_d = tab_pos;
          next_d = (tab_err != '0) ? StStatus : (nnz_q == '0) ? StMainStart : StIdxStart;
          state_d = StDrain;
        end
      end
      StIdxStart: begin
        rd_req[RdIdx] = 1'b1;
        rd_req[RdBlk] = 1'b1;
        idx_start = 1'b1;
        state_d = StIdx;
      end
      StIdx: begin
        if (idx_done) begin
          err_d = idx_err;
          pos_d = idx_pos;
          next_d = (idx_err != '0) ? StStatus : StMainStart;
          state_d = StDrain;
        end
      end
      StMainStart: begin
        if (words == '0) begin
          state_d = StStatus;
        end else begin
          rd_req[RdTheta] = 1'b1;
          rd_req[RdM] = use_m;
          rd_req[RdV] = use_v;
          rd_req[RdGrad] = !sparse || (nnz_q != '0);
          rd_req[RdIdx] = sparse && (nnz_q != '0);
          rd_req[RdBlk] = sparse;
          wr_req[WrTheta] = 1'b1;
          wr_req[WrM] = use_m;
          wr_req[WrV] = use_v;
          wr_req[WrOut16] = use_out;
          main_start = 1'b1;
          state_d = StMain;
        end
      end
      StMain: begin
        if (main_finished) begin
          next_d = StStatus;
          state_d = StDrain;
        end
      end
      StDrain: begin
        rd_drain = '1;
        if (&rd_idle) state_d = next_q;
      end
      StStatus: begin
        wr_req[WrStatus] = st_word_q == '0;
        st_word_d = st_word_q + 1'b1;
        if (32'(st_word_q) == 32'(StatusWords - 1)) begin
          st_word_d = '0;
          state_d = StStatusWait;
        end
      end
      StStatusWait: begin
        if (wr_idle[WrStatus]) state_d = StDone;
      end
      StDone: begin
        state_d = StIdle;
      end
      default: begin
        state_d = StIdle;
      end
    endcase
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      state_q <= StIdle;
      next_q <= StIdle;
      err_q <= '0;
      pos_q <= '0;
      st_word_q <= '0;
    end else begin
      state_q <= state_d;
      next_q <= next_d;
      err_q <= err_d;
      pos_q <= pos_d;
      st_word_q <= st_word_d;
    end
  end

  assign idle_o = state_q == StIdle;
  assign done_o = state_q == StDone;

  // ---- Status word ------------------------------------------------------------------------------
  logic [STATUS_LANES-1:0][31:0] status;
  always_comb begin
    status = '0;
    status[STATUS_ERROR] = err_q;
    status[STATUS_ERROR_POS] = pos_q;
    status[STATUS_ELEMS] = (err_q == '0) ? n_q : '0;
    status[STATUS_NNZ] = (err_q == '0 && sparse) ? nnz_q : '0;
    if (err_q == '0 && n_q != '0) begin
      status[STATUS_CRC_THETA_IN] = crc_val[0];
      status[STATUS_CRC_M_IN] = use_m ? crc_val[1] : '0;
      status[STATUS_CRC_V_IN] = use_v ? crc_val[2] : '0;
      status[STATUS_CRC_THETA_OUT] = crc_val[3];
      status[STATUS_CRC_M_OUT] = use_m ? crc_val[4] : '0;
      status[STATUS_CRC_V_OUT] = use_v ? crc_val[5] : '0;
      status[STATUS_NON_FINITE] = nf_count_q;
    end
    status[STATUS_NON_FINITE_POS] = (err_q == '0 && nf_count_q != '0) ? nf_pos_q
                                                                       : STATUS_NO_POSITION;
    status[STATUS_AXI_ERROR] = axi_err_i;
    status[STATUS_MAGIC] = STATUS_MAGIC_VALUE;
  end
  assign wr_push[WrStatus] = state_q == StStatus;
  assign wr_data[WrStatus] = status[32'(st_word_q) * Lanes +: Lanes];

  // ---- Block table stream (validation passes and the sparse main pass) --------------------------
  logic        ent_valid, ent_ready, ent_tab_ready, ent_idx_ready, ent_merge_ready;
  logic [31:0] ent;

  csd_update_blk_unpack #(
    .Lanes(Lanes)
  ) u_blk_unpack (
    .clk_i       (clk_i),
    .rst_ni      (rst_ni),
    .clear_i     (rd_req[RdBlk]),
    .word_valid_i(rd_valid[RdBlk]),
    .word_ready_o(rd_pop[RdBlk]),
    .word_i      (rd_data[RdBlk]),
    .ent_valid_o (ent_valid),
    .ent_ready_i (ent_ready),
    .ent_o       (ent)
  );

  always_comb begin
    unique case (state_q)
      StTab:   ent_ready = ent_tab_ready;
      StIdx:   ent_ready = ent_idx_ready;
      StMain:  ent_ready = ent_merge_ready;
      default: ent_ready = 1'b0;
    endcase
  end

  // ---- Validation -------------------------------------------------------------------------------
  csd_update_blk_check u_blk_check (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .start_i    (tab_start),
    .nb_i       (nb),
    .nnz_i      (nnz_q),
    .ent_valid_i(ent_valid && state_q == StTab),
    .ent_ready_o(ent_tab_ready),
    .ent_i      (ent),
    .done_o     (tab_done),
    .err_o      (tab_err),
    .pos_o      (tab_pos)
  );

  logic idx_check_ready, merge_idx_ready;

  csd_update_idx_check #(
    .Lanes(Lanes)
  ) u_idx_check (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .start_i    (idx_start),
    .nb_i       (nb),
    .last_size_i(last_size),
    .ent_valid_i(ent_valid && state_q == StIdx),
    .ent_ready_o(ent_idx_ready),
    .ent_i      (ent),
    .idx_valid_i(rd_valid[RdIdx] && state_q == StIdx),
    .idx_ready_o(idx_check_ready),
    .idx_i      (rd_data[RdIdx]),
    .done_o     (idx_done),
    .err_o      (idx_err),
    .pos_o      (idx_pos)
  );

  // ---- Main pass: gradient source ---------------------------------------------------------------
  logic                           merge_valid, merge_ready, merge_val_ready;
  logic [WordBits-1:0]            merge_grad;

  csd_update_merge #(
    .Lanes(Lanes)
  ) u_merge (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .start_i    (main_start && sparse),
    .words_i    (words),
    .half_i     (half_grad),
    .blk_valid_i(ent_valid && state_q == StMain),
    .blk_ready_o(ent_merge_ready),
    .blk_i      (ent),
    .idx_valid_i(rd_valid[RdIdx] && state_q == StMain),
    .idx_ready_o(merge_idx_ready),
    .idx_i      (rd_data[RdIdx]),
    .val_valid_i(rd_valid[RdGrad] && sparse),
    .val_ready_o(merge_val_ready),
    .val_i      (rd_data[RdGrad]),
    .valid_o    (merge_valid),
    .ready_i    (merge_ready),
    .grad_o     (merge_grad)
  );

  // ---- Main pass: issue -------------------------------------------------------------------------
  logic [31:0]              issued_q;
  logic                     issue, inputs_ok, credit_ok, last_word, odd_word, grad_valid;
  logic [FifoCountBits:0]   inflight_q;
  logic                     ex_valid;

  assign last_word = issued_q == words - 32'd1;
  assign odd_word = issued_q[0];
  assign grad_valid = sparse ? merge_valid : rd_valid[RdGrad];
  assign inputs_ok = rd_valid[RdTheta] && (!use_m || rd_valid[RdM]) &&
                     (!use_v || rd_valid[RdV]) && grad_valid;

  // A slot in every output FIFO the word will enter: in flight + held < depth.
  function automatic logic fits(logic [FifoCountBits:0] inflight,
                                logic [FifoCountBits-1:0] occ);
    return ({1'b0, inflight} + (FifoCountBits + 2)'(occ)) < (FifoCountBits + 2)'(FifoDepth);
  endfunction
  assign credit_ok = fits(inflight_q, wr_occ[WrTheta]) &&
                     (!use_m || fits(inflight_q, wr_occ[WrM])) &&
                     (!use_v || fits(inflight_q, wr_occ[WrV])) &&
                     (!use_out || fits(inflight_q, wr_occ[WrOut16]));

  assign issue = (state_q == StMain) && (issued_q != words) && inputs_ok && credit_ok;

  // Who takes each read channel's words: the issue stage (state, dense gradient), the merge
  // (sparse values and indices in the main pass), the checkers (validation), the unpacker
  // (block table).
  assign merge_ready = issue && sparse;
  assign rd_pop[RdTheta] = issue;
  assign rd_pop[RdM] = issue && use_m;
  assign rd_pop[RdV] = issue && use_v;
  assign rd_pop[RdGrad] = sparse ? merge_val_ready
                                 : issue && (!half_grad || odd_word || last_word);
  assign rd_pop[RdIdx] = (state_q == StIdx) ? idx_check_ready :
                         (state_q == StMain) ? merge_idx_ready : 1'b0;

  logic [31:0]            issued_d;
  logic [FifoCountBits:0] inflight_d;
  assign issued_d = main_start ? '0 : issued_q + 32'(issue);
  assign inflight_d = inflight_q + (FifoCountBits + 1)'(issue) -
                      (FifoCountBits + 1)'(ex_valid);

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      issued_q <= '0;
      inflight_q <= '0;
    end else begin
      issued_q <= issued_d;
      inflight_q <= inflight_d;
    end
  end

  // Issue register: the lanes' inputs. Unused state lanes are zero (their value never reaches
  // an output). The gradient is raw: binary32 lanes, or the word's half of a 16-bit word.
  logic                         iss_valid_q, iss_last_q, iss_odd_q;
  logic [Lanes-1:0][31:0]       iss_theta_q, iss_m_q, iss_v_q, iss_g_q;
  logic [Lanes-1:0][31:0]       g_raw;
  logic [Lanes-1:0][31:0]       rd_theta_w, rd_m_w, rd_v_w, rd_grad_w;

  assign rd_theta_w = rd_data[RdTheta];
  assign rd_m_w = rd_data[RdM];
  assign rd_v_w = rd_data[RdV];
  assign rd_grad_w = rd_data[RdGrad];

  always_comb begin
    for (int unsigned j = 0; j < Lanes; j++) begin
      if (sparse) begin
        g_raw[j] = merge_grad[32 * j +: 32];
      end else if (half_grad) begin
        g_raw[j] = {16'h0000, rd_data[RdGrad][16 * (32'(odd_word) * Lanes + j) +: 16]};
      end else begin
        g_raw[j] = rd_grad_w[j];
      end
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      iss_valid_q <= 1'b0;
    end else begin
      iss_valid_q <= issue;
    end
  end

  always_ff @(posedge clk_i) begin
    if (issue) begin
      iss_theta_q <= rd_theta_w;
      iss_m_q <= use_m ? rd_m_w : '0;
      iss_v_q <= use_v ? rd_v_w : '0;
      iss_g_q <= g_raw;
      iss_last_q <= last_word;
      iss_odd_q <= odd_word;
    end
  end

  // The last word's input state, restored in its lanes past n at the exit.
  logic [Lanes-1:0][31:0] tail_theta_q, tail_m_q, tail_v_q;
  always_ff @(posedge clk_i) begin
    if (iss_valid_q && iss_last_q) begin
      tail_theta_q <= iss_theta_q;
      tail_m_q <= iss_m_q;
      tail_v_q <= iss_v_q;
    end
  end

  // ---- Lanes ------------------------------------------------------------------------------------
  logic [Lanes-1:0][31:0] lane_theta, lane_m, lane_v;
  logic [Lanes-1:0][15:0] lane_half;

  for (genvar j = 0; j < Lanes; j++) begin : g_lane
    csd_update_lane #(
      .FtzDaz(FtzDaz)
    ) u_lane (
      .clk_i     (clk_i),
      .rst_ni    (rst_ni),
      .valid_i   (iss_valid_q),
      .theta_i   (iss_theta_q[j]),
      .m_i       (iss_m_q[j]),
      .v_i       (iss_v_q[j]),
      .g_i       (iss_g_q[j]),
      .grad_fmt_i(grad_fmt),
      .out_fmt_i (out_fmt),
      .ops_i     (ops),
      .sel_i     (sel),
      .theta_o   (lane_theta[j]),
      .m_o       (lane_m[j]),
      .v_o       (lane_v[j]),
      .half_o    (lane_half[j])
    );
  end

  // Valid and word flags alongside the lanes.
  logic [LANE_LATENCY-1:0] ex_vld_q;
  logic [1:0]              ex_flags;
  logic                    ex_last, ex_odd;

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      ex_vld_q <= '0;
    end else begin
      ex_vld_q <= {ex_vld_q[LANE_LATENCY-2:0], iss_valid_q};
    end
  end
  assign ex_valid = ex_vld_q[LANE_LATENCY-1];

  csd_delay #(
    .Width(2),
    .Depth(LANE_LATENCY)
  ) u_d_flags (
    .clk_i (clk_i),
    .rst_ni(rst_ni),
    .data_i({iss_last_q, iss_odd_q}),
    .data_o(ex_flags)
  );
  assign {ex_last, ex_odd} = ex_flags;

  // ---- Exit: lanes past n, out16 packing, output FIFOs ------------------------------------------
  logic [Lanes-1:0]       keep;  // lane holds an element of the subgroup
  logic [Lanes-1:0][31:0] out_theta, out_m, out_v;
  logic [Lanes-1:0][15:0] out_half, half_lo_q;

  always_comb begin
    for (int unsigned j = 0; j < Lanes; j++) begin
      keep[j] = !ex_last || ((LaneBits + 1)'(j) < n_last);
      out_theta[j] = keep[j] ? lane_theta[j] : tail_theta_q[j];
      out_m[j] = keep[j] ? lane_m[j] : tail_m_q[j];
      out_v[j] = keep[j] ? lane_v[j] : tail_v_q[j];
      out_half[j] = keep[j] ? lane_half[j] : 16'h0000;
    end
  end

  // out16 word k = state words 2k (low half) and 2k + 1 (high half); a last word that is even
  // goes out with a zero high half.
  logic half_push;
  assign half_push = ex_valid && use_out && (ex_odd || ex_last);
  always_ff @(posedge clk_i) begin
    if (ex_valid && !ex_odd) half_lo_q <= out_half;
  end

  assign wr_push[WrTheta] = ex_valid;
  assign wr_push[WrM] = ex_valid && use_m;
  assign wr_push[WrV] = ex_valid && use_v;
  assign wr_push[WrOut16] = half_push;
  assign wr_data[WrTheta] = out_theta;
  assign wr_data[WrM] = out_m;
  assign wr_data[WrV] = out_v;
  assign wr_data[WrOut16] = ex_odd ? {out_half, half_lo_q} : {{Lanes{16'h0000}}, out_half};

  assign main_finished = (issued_q == words) && (inflight_q == '0) && wr_idle[WrTheta] &&
                         wr_idle[WrM] && wr_idle[WrV] && wr_idle[WrOut16];

  // ---- Integrity: CRC-32 of theta/m/v as read and as written; non-finite values written --------
  // The input CRCs take the words at the issue register (every state word passes it once, in
  // order), the output CRCs the words entering the output FIFOs. Lanes past n of the last word
  // are fed as zero; csd_update_crc undoes them at the end. Unused m/v stream zeros and are
  // reported as 0 by the status word. All six restart with the main pass.
  function automatic logic [Lanes-1:0][31:0] keep_lanes(logic [Lanes-1:0][31:0] w,
                                                        logic [Lanes-1:0] k);
    for (int unsigned j = 0; j < Lanes; j++) w[j] = k[j] ? w[j] : 32'h0;
    return w;
  endfunction

  logic [Lanes-1:0]       iss_keep;
  logic [5:0][WordBits-1:0] crc_data;
  logic [5:0]             crc_valid;
  logic [5:0][31:0]       crc_val;

  always_comb begin
    for (int unsigned j = 0; j < Lanes; j++) begin
      iss_keep[j] = !iss_last_q || ((LaneBits + 1)'(j) < n_last);
    end
  end
  assign crc_data[0] = keep_lanes(iss_theta_q, iss_keep);
  assign crc_data[1] = keep_lanes(iss_m_q, iss_keep);
  assign crc_data[2] = keep_lanes(iss_v_q, iss_keep);
  assign crc_data[3] = keep_lanes(out_theta, keep);
  assign crc_data[4] = keep_lanes(out_m, keep);
  assign crc_data[5] = keep_lanes(out_v, keep);
  assign crc_valid = {{3{ex_valid}}, {3{iss_valid_q}}};

  for (genvar c = 0; c < 6; c++) begin : g_crc
    csd_update_crc #(
      .Lanes(Lanes)
    ) u_crc (
      .clk_i       (clk_i),
      .rst_ni      (rst_ni),
      .clear_i     (main_start),
      .valid_i     (crc_valid[c]),
      .data_i      (crc_data[c]),
      .last_lanes_i(n_last),
      .crc_o       (crc_val[c])
    );
  end

  // Non-finite values written (exponent all ones) in lanes < n of theta, and of m / v when the
  // optimizer has them; the count saturates, the position is the first word's first such lane.
  localparam int unsigned NfBits = $clog2(3 * Lanes + 1);
  logic [Lanes-1:0]  nf_lane;
  logic [NfBits-1:0] nf_word;
  logic [LaneBits-1:0] nf_first;
  logic [31:0]       nf_count_q, nf_count_d, nf_pos_q, nf_pos_d, ex_word_q;
  logic [32:0]       nf_sum;

  // x: the exponent field, bits [30:23] of a binary32 value.
  function automatic logic non_finite(logic [7:0] x);
    return &x;
  endfunction

  always_comb begin
    nf_word = '0;
    nf_first = '0;
    for (int j = Lanes - 1; j >= 0; j--) begin
      nf_lane[j] = keep[j] && (non_finite(out_theta[j][30:23]) || (use_m && non_finite(out_m[j][30:23])) ||
                               (use_v && non_finite(out_v[j][30:23])));
      nf_word = nf_word + NfBits'(keep[j] && non_finite(out_theta[j][30:23])) +
                NfBits'(keep[j] && use_m && non_finite(out_m[j][30:23])) +
                NfBits'(keep[j] && use_v && non_finite(out_v[j][30:23]));
      if (nf_lane[j]) nf_first = LaneBits'(j);
    end
  end

  assign nf_sum = {1'b0, nf_count_q} + 33'(nf_word);
  always_comb begin
    nf_count_d = nf_count_q;
    nf_pos_d = nf_pos_q;
    if (main_start || (start_i && idle_o)) begin
      nf_count_d = '0;
      nf_pos_d = STATUS_NO_POSITION;
    end else if (ex_valid) begin
      nf_count_d = nf_sum[32] ? 32'hffff_ffff : nf_sum[31:0];
      if (nf_pos_q == STATUS_NO_POSITION && (|nf_lane)) begin
        nf_pos_d = (ex_word_q << LaneBits) | 32'(nf_first);
      end
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      nf_count_q <= '0;
      nf_pos_q <= STATUS_NO_POSITION;
      ex_word_q <= '0;
    end else begin
      nf_count_q <= nf_count_d;
      nf_pos_q <= nf_pos_d;
      ex_word_q <= main_start ? '0 : ex_word_q + 32'(ex_valid);
    end
  end

  logic unused_bits;
  assign unused_bits = ^{wr_occ[WrStatus]};

endmodule
