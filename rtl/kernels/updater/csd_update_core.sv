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
//   read  (theta, m, v, grad, idx, blk, m_absmax, v_absmax): a command (word offset within the
//         array, word count, valid/ready), then exactly `count` data words in order
//         (valid/ready);
//   write (theta, m, v, out16, status, m_absmax, v_absmax): a command, then `count` data words
//         in order
//         (valid/ready; offered only after the command was accepted), then one done pulse
//         from the memory side once all of them are committed.
// Commands always have count >= 1 and offset 0 (each pass reads or writes whole arrays); a
// channel has at most one command outstanding. The top wrapper adds base addresses
// (byte address = base + offset * Lanes * 4) and the AXI masters.
//
// ---- Launch -------------------------------------------------------------------------------------
// start_i (while idle_o) samples n, nnz, the mode word, the ten binary32 scalars and the q8
// formats' seed, step and element index. Then:
//   1. decode: a mode that DecodeMode (mode.h) rejects is a bad mode (0x01); so is a mode whose
//      ftz bit (8) differs from this build's FtzDaz: the RTL implements one fp policy per
//      build and refuses to compute under the other. q8 formats with n or index_lo not a
//      multiple of 256: ERR_BLOCK_LEN (0x40). Dense with nnz != 0: ERR_COUNT.
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
// ---- State formats (mode bits [14:13], docs/state-formats.md) -----------------------------------
// fp32: theta, m, v are binary32 words. q8: each moment is a codes array (8-bit codes, 4 Lanes
// per word: element word w takes bytes [Lanes (w mod 4), +Lanes) of codes word w / 4) and an
// absmax array (one binary32 per block of 256 elements, Lanes blocks per word), read on its own
// channel; the lanes dequantize (csd_q8_dequant), csd_update_q8_quant requantizes each block
// after the lanes, and the absmax values are packed back into words here (the lanes of the
// last word past the last block written back as read). q8-bf16: theta is bf16 (2 Lanes per
// word), widened exactly, and rounded stochastically when written, with csd_q8_rand16's
// number of (seed, step, index + element); its copy (out16, bf16 or none) is theta itself.
// A moment's status CRCs cover its codes then its absmax values: two CRCs, joined once at the
// end (csd_update_crc_join). n is a whole number of blocks, so every word is full.
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
  /// 1: the q8 and q8-bf16 state formats are accepted; 0: refused as a bad mode (a wrapper
  /// without the absmax channels ties them off).
  parameter bit StateQ8 = 1'b1,
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
  /// q8-bf16: the store's 64-bit seed (the Philox key), low and high words.
  input  wire logic [31:0]                                             seed_lo_i,
  input  wire logic [31:0]                                             seed_hi_i,
  /// q8-bf16: the step being committed, low and high words.
  input  wire logic [31:0]                                             step_lo_i,
  input  wire logic [31:0]                                             step_hi_i,
  /// q8 formats: the store index of element 0 (a multiple of 256), low and high words.
  input  wire logic [31:0]                                             index_lo_i,
  input  wire logic [31:0]                                             index_hi_i,
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
  /// The absmax output FIFOs: one word per 256 element words; at most one in flight.
  localparam int unsigned AbsDepth = 8;
  /// q8: element words per block, and bits of an element word's index within its block.
  localparam int unsigned BlkBeatBits = Q8_BLOCK_BITS - LaneBits;
  /// q8-bf16: Philox instances per element word (8 elements each).
  localparam int unsigned RandInst = (Lanes >= 8) ? Lanes / 8 : 1;

  if (Lanes < 2 || Lanes > 16 || (1 << LaneBits) != Lanes) begin : g_bad_lanes
    $error("csd_update_core: Lanes must be a power of two in 2..16");
  end

  // ---- Launch arguments -------------------------------------------------------------------------
  logic [31:0] n_q, nnz_q, mode_q;
  operands_t   scalars_q;
  logic [63:0] seed_q, step_q, index_q;

  always_ff @(posedge clk_i) begin
    if (start_i && idle_o) begin
      n_q <= n_i;
      nnz_q <= nnz_i;
      mode_q <= mode_i;
      scalars_q <= '{unscale: unscale_i, lr: lr_i, beta1: beta1_i, omb1: omb1_i,
                     beta2: beta2_i, omb2: omb2_i, eps: eps_i, wd: wd_i, c1: c1_i, c2: c2_i};
      seed_q <= {seed_hi_i, seed_lo_i};
      step_q <= {step_hi_i, step_lo_i};
      index_q <= {index_hi_i, index_lo_i};
    end
  end

  // ---- Decoded launch constants (static from the launch's start to its end) ---------------------
  logic      dec_ok, sparse, use_m, use_v, use_out, half_grad, q8, bf16, q8_m, q8_v;
  logic [1:0] grad_fmt, out_fmt, lane_out_fmt;
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
    .q8_o      (q8),
    .bf16_o    (bf16),
    .operands_o(ops),
    .sel_o     (sel)
  );

  assign half_grad = grad_fmt != DT_FP32;
  assign q8_m = q8 && use_m;
  assign q8_v = q8 && use_v;
  // q8-bf16: the lanes' bf16 narrowing (stochastic) is theta as written, whatever the copy.
  assign lane_out_fmt = bf16 ? DT_BF16 : out_fmt;

  // Sizes, in words, by ceil(x / 2^s) without overflow.
  function automatic logic [31:0] ceil_shift(logic [31:0] x, int unsigned s);
    return (x >> s) + 32'(|(x & ((32'd1 << s) - 32'd1)));
  endfunction

  logic [31:0] words, hwords, idx_words, val_words, blk_words, grad_words;
  logic [31:0] theta_words, moment_words, blocks, abs_words;
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
  // q8 formats (n a multiple of 256): bf16 theta, codes, absmax words.
  assign theta_words = bf16 ? hwords : words;
  assign moment_words = q8 ? (words >> 2) : words;
  assign blocks = n_q >> Q8_BLOCK_BITS;
  assign abs_words = ceil_shift(blocks, LaneBits);

  // ---- Channels ---------------------------------------------------------------------------------
  logic [NUM_RD-1:0]                rd_req, rd_drain, rd_idle, rd_valid, rd_pop;
  logic [NUM_RD-1:0][CMD_BITS-1:0]  rd_count;
  logic [NUM_RD-1:0][WordBits-1:0]  rd_data;
  logic [NUM_WR-1:0]                wr_req, wr_idle, wr_push;
  logic [NUM_WR-1:0][CMD_BITS-1:0]  wr_count;
  logic [NUM_WR-1:0][WordBits-1:0]  wr_data;
  logic [NUM_WR-1:0][FifoCountBits-1:0] wr_occ;

  assign rd_count[RdTheta] = theta_words;
  assign rd_count[RdM] = moment_words;
  assign rd_count[RdV] = moment_words;
  assign rd_count[RdGrad] = sparse ? val_words : grad_words;
  assign rd_count[RdIdx] = idx_words;
  assign rd_count[RdBlk] = blk_words;
  assign rd_count[RdMAbs] = abs_words;
  assign rd_count[RdVAbs] = abs_words;
  assign wr_count[WrTheta] = theta_words;
  assign wr_count[WrM] = moment_words;
  assign wr_count[WrV] = moment_words;
  assign wr_count[WrOut16] = hwords;
  assign wr_count[WrStatus] = 32'(StatusWords);
  assign wr_count[WrMAbs] = abs_words;
  assign wr_count[WrVAbs] = abs_words;

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
    localparam int unsigned Depth = (p == WrStatus) ? StatusDepth :
                                    (p == WrMAbs || p == WrVAbs) ? AbsDepth : FifoDepth;
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
    StJoin,       // q8: join each moment's codes and absmax CRCs
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
  logic        main_finished, join_start, join_done;

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
    join_start = 1'b0;
    unique case (state_q)
      StIdle: begin
        if (start_i) begin
          err_d = '0;
          pos_d = '0;
          state_d = StDecode;
        end
      end
      StDecode: begin
        if (!dec_ok || (q8 && !StateQ8)) begin
          err_d = ERR_BAD_MODE;
          state_d = StStatus;
        end else if (q8 && (n_q[Q8_BLOCK_BITS-1:0] != '0 ||
                            index_q[Q8_BLOCK_BITS-1:0] != '0)) begin
          err_d = ERR_BLOCK_LEN;
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
          rd_req[RdMAbs] = q8_m;
          rd_req[RdVAbs] = q8_v;
          wr_req[WrTheta] = 1'b1;
          wr_req[WrM] = use_m;
          wr_req[WrV] = use_v;
          wr_req[WrOut16] = use_out;
          wr_req[WrMAbs] = q8_m;
          wr_req[WrVAbs] = q8_v;
          main_start = 1'b1;
          state_d = StMain;
        end
      end
      StMain: begin
        if (main_finished) begin
          if (q8) begin
            join_start = 1'b1;
            state_d = StJoin;
          end else begin
            next_d = StStatus;
            state_d = StDrain;
          end
        end
      end
      StJoin: begin
        if (join_done) begin
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
      status[STATUS_CRC_M_IN] = !use_m ? '0 : q8 ? joined[0] : crc_val[1];
      status[STATUS_CRC_V_IN] = !use_v ? '0 : q8 ? joined[1] : crc_val[2];
      status[STATUS_CRC_THETA_OUT] = crc_val[3];
      status[STATUS_CRC_M_OUT] = !use_m ? '0 : q8 ? joined[2] : crc_val[4];
      status[STATUS_CRC_V_OUT] = !use_v ? '0 : q8 ? joined[3] : crc_val[5];
      status[STATUS_NON_FINITE] = nf_count_q;
    end
    // The first element of the lanes' non-finite values and of the non-finite q8 blocks.
    status[STATUS_NON_FINITE_POS] = (err_q == '0 && nf_count_q != '0) ?
                                    ((nf_pos_q < blk_pos_q) ? nf_pos_q : blk_pos_q) :
                                    STATUS_NO_POSITION;
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

  // q8: the element word's place in its codes word, its block, and its block's absmax word.
  logic code_last, blk_first, abs_last;
  logic [LaneBits-1:0] blk_lane;

  assign last_word = issued_q == words - 32'd1;
  assign odd_word = issued_q[0];
  assign code_last = issued_q[1:0] == 2'd3;
  assign blk_first = issued_q[BlkBeatBits-1:0] == '0;
  assign blk_lane = issued_q[Q8_BLOCK_BITS-1:BlkBeatBits];
  assign abs_last = issued_q[Q8_BLOCK_BITS-1:0] == '1 || last_word;
  assign grad_valid = sparse ? merge_valid : rd_valid[RdGrad];
  assign inputs_ok = rd_valid[RdTheta] && (!use_m || rd_valid[RdM]) &&
                     (!use_v || rd_valid[RdV]) && grad_valid &&
                     (!q8_m || rd_valid[RdMAbs]) && (!q8_v || rd_valid[RdVAbs]);

  // A slot in every output FIFO the word will enter: in flight + held < depth.
  function automatic logic fits(logic [FifoCountBits:0] inflight,
                                logic [FifoCountBits-1:0] occ);
    return ({1'b0, inflight} + (FifoCountBits + 2)'(occ)) < (FifoCountBits + 2)'(FifoDepth);
  endfunction
  // q8: the codes FIFOs take a word per 4 element words, after the lanes AND the quantizer
  // (inflight8_q counts element words issued whose codes have not left the search, the block
  // FIFO included; the packing register holds at most one more word). An absmax word covers 256
  // element words and fewer than that are ever between issue and the absmax unit, so at most
  // one absmax word is pending: two free slots suffice.
  logic [FifoCountBits:0] inflight8_q;
  function automatic logic fits_q8(logic [FifoCountBits:0] inflight,
                                   logic [FifoCountBits-1:0] occ);
    return ({1'b0, inflight >> 2} + (FifoCountBits + 2)'(occ) + (FifoCountBits + 2)'(2)) <
           (FifoCountBits + 2)'(FifoDepth);
  endfunction
  function automatic logic fits_abs(logic [FifoCountBits-1:0] occ);
    return (occ + FifoCountBits'(2)) < FifoCountBits'(AbsDepth);
  endfunction
  assign credit_ok = fits(inflight_q, wr_occ[WrTheta]) &&
                     (!use_m || (q8 ? fits_q8(inflight8_q, wr_occ[WrM])
                                    : fits(inflight_q, wr_occ[WrM]))) &&
                     (!use_v || (q8 ? fits_q8(inflight8_q, wr_occ[WrV])
                                    : fits(inflight_q, wr_occ[WrV]))) &&
                     (!use_out || fits(inflight_q, wr_occ[WrOut16])) &&
                     (!q8_m || fits_abs(wr_occ[WrMAbs])) && (!q8_v || fits_abs(wr_occ[WrVAbs]));

  assign issue = (state_q == StMain) && (issued_q != words) && inputs_ok && credit_ok;

  // Who takes each read channel's words: the issue stage (state, dense gradient), the merge
  // (sparse values and indices in the main pass), the checkers (validation), the unpacker
  // (block table).
  assign merge_ready = issue && sparse;
  assign rd_pop[RdTheta] = issue && (!bf16 || odd_word || last_word);
  assign rd_pop[RdM] = issue && use_m && (!q8 || code_last);
  assign rd_pop[RdV] = issue && use_v && (!q8 || code_last);
  assign rd_pop[RdMAbs] = issue && q8_m && abs_last;
  assign rd_pop[RdVAbs] = issue && q8_v && abs_last;
  assign rd_pop[RdGrad] = sparse ? merge_val_ready
                                 : issue && (!half_grad || odd_word || last_word);
  assign rd_pop[RdIdx] = (state_q == StIdx) ? idx_check_ready :
                         (state_q == StMain) ? merge_idx_ready : 1'b0;

  logic [31:0]            issued_d;
  logic [FifoCountBits:0] inflight_d, inflight8_d;
  logic                   q8_beat;  // an element word's codes left the quantizers
  assign issued_d = main_start ? '0 : issued_q + 32'(issue);
  assign inflight_d = inflight_q + (FifoCountBits + 1)'(issue) -
                      (FifoCountBits + 1)'(ex_valid);
  assign inflight8_d = inflight8_q + (FifoCountBits + 1)'(issue && q8) -
                       (FifoCountBits + 1)'(q8_beat);

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      issued_q <= '0;
      inflight_q <= '0;
      inflight8_q <= '0;
    end else begin
      issued_q <= issued_d;
      inflight_q <= inflight_d;
      inflight8_q <= inflight8_d;
    end
  end

  // Issue register: the lanes' inputs. Unused state lanes are zero (their value never reaches
  // an output). The gradient is raw: binary32 lanes, or the word's half of a 16-bit word.
  logic                         iss_valid_q, iss_last_q, iss_odd_q, iss_bfirst_q;
  logic [Lanes-1:0][31:0]       iss_theta_q, iss_m_q, iss_v_q, iss_g_q;
  logic [Lanes-1:0][7:0]        iss_mc_q, iss_vc_q;
  logic [31:0]                  iss_ma_q, iss_va_q;
  logic [Lanes-1:0][31:0]       g_raw, theta_in;
  logic [Lanes-1:0][31:0]       rd_theta_w, rd_m_w, rd_v_w, rd_grad_w, rd_ma_w, rd_va_w;
  logic [Lanes-1:0][7:0]        mc_in, vc_in;

  assign rd_theta_w = rd_data[RdTheta];
  assign rd_m_w = rd_data[RdM];
  assign rd_v_w = rd_data[RdV];
  assign rd_grad_w = rd_data[RdGrad];
  assign rd_ma_w = rd_data[RdMAbs];
  assign rd_va_w = rd_data[RdVAbs];

  // q8: the element word's codes (a quarter of a codes word); bf16 theta widened (exactly: the
  // bits shifted left by 16, payloads kept).
  assign mc_in = rd_data[RdM][8 * Lanes * 32'(issued_q[1:0]) +: 8 * Lanes];
  assign vc_in = rd_data[RdV][8 * Lanes * 32'(issued_q[1:0]) +: 8 * Lanes];

  always_comb begin
    for (int unsigned j = 0; j < Lanes; j++) begin
      theta_in[j] = bf16 ? {rd_data[RdTheta][16 * (32'(odd_word) * Lanes + j) +: 16], 16'h0000}
                         : rd_theta_w[j];
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
      iss_theta_q <= theta_in;
      iss_m_q <= (use_m && !q8) ? rd_m_w : '0;
      iss_v_q <= (use_v && !q8) ? rd_v_w : '0;
      iss_mc_q <= use_m ? mc_in : '0;
      iss_vc_q <= use_v ? vc_in : '0;
      iss_ma_q <= q8_m ? rd_ma_w[blk_lane] : '0;
      iss_va_q <= q8_v ? rd_va_w[blk_lane] : '0;
      iss_g_q <= g_raw;
      iss_last_q <= last_word;
      iss_odd_q <= odd_word;
      iss_bfirst_q <= blk_first;
    end
  end

  // q8: the last absmax word read, for its lanes past the last block (written back as read).
  logic [Lanes-1:0][31:0] abs_hold_m_q, abs_hold_v_q;
  always_ff @(posedge clk_i) begin
    if (rd_pop[RdMAbs]) abs_hold_m_q <= rd_ma_w;
    if (rd_pop[RdVAbs]) abs_hold_v_q <= rd_va_w;
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
  logic [Lanes-1:0][15:0] lane_half, lane_rnd;

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
      .q8_i      (q8),
      .m_code_i  (iss_mc_q[j]),
      .m_absmax_i(iss_ma_q),
      .v_code_i  (iss_vc_q[j]),
      .v_absmax_i(iss_va_q),
      .stoch_i   (bf16),
      .rnd_bits_i(lane_rnd[j]),
      .g_i       (iss_g_q[j]),
      .grad_fmt_i(grad_fmt),
      .out_fmt_i (lane_out_fmt),
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

  // ---- q8-bf16: the random numbers of theta's stochastic rounding ------------------------------
  // The Philox of an element word starts when the word is at lane stage T_RAND, so that its
  // numbers meet theta' at T_TH. rnd_word_q counts the words passing that stage; element
  // index0 + w Lanes + j takes number (w Lanes + j) mod 8 of group (index0 + w Lanes + j) / 8
  // (index0 is a multiple of 256). At Lanes < 8 a group spans several words (each word draws it
  // again); at Lanes >= 8 a word holds Lanes / 8 groups, one instance each.
  logic                           rnd_start;
  logic [31:0]                    rnd_word_q;
  logic [60:0]                    rnd_group;
  logic [2:0]                     rnd_sub, rnd_sub_q;
  logic [RandInst-1:0]            rnd_valid;
  logic [RandInst-1:0][7:0][15:0] rnd_out;

  assign rnd_start = ex_vld_q[T_RAND-1];
  assign rnd_group = index_q[63:3] + 61'((64'(rnd_word_q) << LaneBits) >> 3);
  assign rnd_sub = 3'(rnd_word_q << LaneBits);

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      rnd_word_q <= '0;
    end else begin
      rnd_word_q <= main_start ? '0 : rnd_word_q + 32'(rnd_start);
    end
  end

  for (genvar g = 0; g < RandInst; g++) begin : g_rand
    csd_q8_rand16 u_rand (
      .clk_i  (clk_i),
      .rst_ni (rst_ni),
      .valid_i(rnd_start),
      .seed_i (seed_q),
      .step_i (step_q),
      .group_i(rnd_group + 61'(g)),
      .valid_o(rnd_valid[g]),
      .rand_o (rnd_out[g])
    );
  end

  csd_delay #(.Width(3), .Depth(LAT_RAND)) u_d_rnd_sub (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(rnd_sub), .data_o(rnd_sub_q)
  );

  always_comb begin
    for (int unsigned j = 0; j < Lanes; j++) begin
      logic [4:0] t;
      t = 5'(rnd_sub_q) + 5'(j);
      lane_rnd[j] = rnd_out[(32'(t) >> 3) % RandInst][t[2:0]];
    end
  end

`ifndef SYNTHESIS
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      assert (rnd_valid == {RandInst{ex_vld_q[T_TH-1]}})
        else $error("csd_update_core: Philox latency differs from csd_update_pkg::LAT_RAND");
    end
  end
`endif

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

  // q8-bf16: theta leaves as the bf16 words that out16 would hold (two element words each).
  logic [WordBits-1:0] half_word;
  assign half_word = ex_odd ? {out_half, half_lo_q} : {{Lanes{16'h0000}}, out_half};

  assign wr_push[WrTheta] = bf16 ? (ex_valid && (ex_odd || ex_last)) : ex_valid;
  assign wr_push[WrM] = q8 ? (qm_word_valid && use_m) : (ex_valid && use_m);
  assign wr_push[WrV] = q8 ? (qv_word_valid && use_v) : (ex_valid && use_v);
  assign wr_push[WrOut16] = half_push;
  assign wr_data[WrTheta] = bf16 ? half_word : out_theta;
  assign wr_data[WrM] = q8 ? qm_word : out_m;
  assign wr_data[WrV] = q8 ? qv_word : out_v;
  assign wr_data[WrOut16] = half_word;

  assign main_finished = (issued_q == words) && (inflight_q == '0) && (inflight8_q == '0) &&
                         wr_idle[WrTheta] && wr_idle[WrM] && wr_idle[WrV] &&
                         wr_idle[WrOut16] && wr_idle[WrMAbs] && wr_idle[WrVAbs];

  // ---- q8: requantization of m' and v', absmax words --------------------------------------------
  // Both quantizers take every element word of a q8 launch (in step, so one beat count serves
  // both); an unused moment's outputs are ignored. Block b's absmax goes into lane b mod Lanes
  // of its word; the word is written when its last lane or the launch's last block is known,
  // lanes past the last block as the last word was read.
  logic                         ex_blk_last, qm_word_valid, qv_word_valid, qv_beat;
  logic [WordBits-1:0]          qm_word, qv_word;
  logic [1:0]                   abs_valid, abs_nf;
  logic [1:0][31:0]             abs_val;
  logic [1:0][Lanes-1:0][31:0]  abs_pack_q, abs_word;
  logic [31:0]                  abs_blk_q;  // blocks whose absmax came out since main_start
  logic [LaneBits-1:0]          abs_lane;
  logic                         abs_push;

  assign ex_blk_last = ex_word_q[BlkBeatBits-1:0] == '1;

  csd_update_q8_quant #(
    .Lanes    (Lanes),
    .FtzDaz   (FtzDaz),
    .SignedMap(1'b1)
  ) u_quant_m (
    .clk_i          (clk_i),
    .rst_ni         (rst_ni),
    .clear_i        (main_start),
    .valid_i        (ex_valid && q8),
    .blk_last_i     (ex_blk_last),
    .x_i            (lane_m),
    .blk_valid_o    (abs_valid[0]),
    .absmax_o       (abs_val[0]),
    .blk_nonfinite_o(abs_nf[0]),
    .beat_o         (q8_beat),
    .word_valid_o   (qm_word_valid),
    .word_o         (qm_word)
  );

  csd_update_q8_quant #(
    .Lanes    (Lanes),
    .FtzDaz   (FtzDaz),
    .SignedMap(1'b0)
  ) u_quant_v (
    .clk_i          (clk_i),
    .rst_ni         (rst_ni),
    .clear_i        (main_start),
    .valid_i        (ex_valid && q8),
    .blk_last_i     (ex_blk_last),
    .x_i            (lane_v),
    .blk_valid_o    (abs_valid[1]),
    .absmax_o       (abs_val[1]),
    .blk_nonfinite_o(abs_nf[1]),
    .beat_o         (qv_beat),
    .word_valid_o   (qv_word_valid),
    .word_o         (qv_word)
  );

  assign abs_lane = abs_blk_q[LaneBits-1:0];
  assign abs_push = abs_valid[0] && (abs_lane == '1 || abs_blk_q == blocks - 32'd1);

  always_comb begin
    for (int unsigned k = 0; k < 2; k++) begin
      for (int unsigned l = 0; l < Lanes; l++) begin
        if (LaneBits'(l) < abs_lane) begin
          abs_word[k][l] = abs_pack_q[k][l];
        end else if (LaneBits'(l) == abs_lane) begin
          abs_word[k][l] = abs_val[k];
        end else begin
          abs_word[k][l] = (k == 0) ? abs_hold_m_q[l] : abs_hold_v_q[l];
        end
      end
    end
  end

  always_ff @(posedge clk_i) begin
    if (abs_valid[0]) begin
      abs_pack_q[0][abs_lane] <= abs_val[0];
      abs_pack_q[1][abs_lane] <= abs_val[1];
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      abs_blk_q <= '0;
    end else begin
      abs_blk_q <= main_start ? '0 : abs_blk_q + 32'(abs_valid[0]);
    end
  end

  assign wr_push[WrMAbs] = abs_push && q8_m;
  assign wr_push[WrVAbs] = abs_push && q8_v;
  assign wr_data[WrMAbs] = abs_word[0];
  assign wr_data[WrVAbs] = abs_word[1];

  // ---- Integrity: CRC-32 of theta/m/v as read and as written; non-finite values written --------
  // The input CRCs take the words at the issue register (every state word passes it once, in
  // order), the output CRCs the words entering the output FIFOs. Lanes past n of the last word
  // are fed as zero; csd_update_crc undoes them at the end. Unused m/v stream zeros and are
  // reported as 0 by the status word. All six restart with the main pass. In the q8 formats
  // they take the words as stored (bf16 theta words, codes words) when the read channel pops
  // them / when they enter the FIFO, and four one-lane CRCs take each moment's absmax values
  // in block order (at the issue of a block's first element word; as they come out of the
  // quantizer); csd_update_crc_join then gives each moment's codes ++ absmax CRC.
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
  assign crc_data[0] = bf16 ? rd_data[RdTheta] : keep_lanes(iss_theta_q, iss_keep);
  assign crc_data[1] = q8 ? rd_data[RdM] : keep_lanes(iss_m_q, iss_keep);
  assign crc_data[2] = q8 ? rd_data[RdV] : keep_lanes(iss_v_q, iss_keep);
  assign crc_data[3] = bf16 ? wr_data[WrTheta] : keep_lanes(out_theta, keep);
  assign crc_data[4] = q8 ? wr_data[WrM] : keep_lanes(out_m, keep);
  assign crc_data[5] = q8 ? wr_data[WrV] : keep_lanes(out_v, keep);
  assign crc_valid[0] = bf16 ? rd_pop[RdTheta] : iss_valid_q;
  assign crc_valid[1] = q8 ? rd_pop[RdM] : iss_valid_q;
  assign crc_valid[2] = q8 ? rd_pop[RdV] : iss_valid_q;
  assign crc_valid[3] = bf16 ? wr_push[WrTheta] : ex_valid;
  assign crc_valid[4] = q8 ? wr_push[WrM] : ex_valid;
  assign crc_valid[5] = q8 ? wr_push[WrV] : ex_valid;

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

  // The absmax CRCs: m in, v in, m out, v out.
  logic [3:0]       abs_crc_valid;
  logic [3:0][31:0] abs_crc_data, abs_crc, joined;

  assign abs_crc_valid = {{2{abs_valid[0]}}, {2{iss_valid_q && iss_bfirst_q && q8}}};
  assign abs_crc_data = {abs_val[1], abs_val[0], iss_va_q, iss_ma_q};

  for (genvar c = 0; c < 4; c++) begin : g_abs_crc
    csd_update_crc #(
      .Lanes(1)
    ) u_crc (
      .clk_i       (clk_i),
      .rst_ni      (rst_ni),
      .clear_i     (main_start),
      .valid_i     (abs_crc_valid[c]),
      .data_i      (abs_crc_data[c]),
      .last_lanes_i(1'b1),
      .crc_o       (abs_crc[c])
    );
  end

  csd_update_crc_join #(
    .Count  (4),
    .LenBits(32 - Q8_BLOCK_BITS)
  ) u_join (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .start_i(join_start),
    .len_i  (blocks[31-Q8_BLOCK_BITS:0]),
    .crc_a_i({crc_val[5], crc_val[4], crc_val[2], crc_val[1]}),
    .crc_b_i(abs_crc),
    .done_o (join_done),
    .crc_o  (joined)
  );

  // Non-finite values written (exponent all ones) in lanes < n of theta, and of m / v when the
  // optimizer has them; the count saturates, the position is the first word's first such lane.
  // q8 formats: theta as stored (a bf16 theta by its bf16 exponent), and each moment block whose
  // absmax is written non-finite counts all of its 256 elements, its first element a candidate
  // for the position (blk_pos_q; the status word takes the smaller of the two positions).
  localparam int unsigned NfBits = $clog2(3 * Lanes + 1);
  logic [Lanes-1:0]  nf_lane, nf_theta, nf_m, nf_v;
  logic [NfBits-1:0] nf_word;
  logic [LaneBits-1:0] nf_first;
  logic [31:0]       nf_count_q, nf_count_d, nf_pos_q, nf_pos_d, ex_word_q, blk_pos_q, blk_pos_d;
  logic [32:0]       nf_sum, nf_add;
  logic [1:0]        blk_bad;

  // x: the exponent field, bits [30:23] of a binary32 value.
  function automatic logic non_finite(logic [7:0] x);
    return &x;
  endfunction

  always_comb begin
    nf_word = '0;
    nf_first = '0;
    for (int j = Lanes - 1; j >= 0; j--) begin
      nf_theta[j] = keep[j] && (bf16 ? non_finite(lane_half[j][14:7])
                                     : non_finite(out_theta[j][30:23]));
      nf_m[j] = keep[j] && use_m && !q8 && non_finite(out_m[j][30:23]);
      nf_v[j] = keep[j] && use_v && !q8 && non_finite(out_v[j][30:23]);
      nf_lane[j] = nf_theta[j] || nf_m[j] || nf_v[j];
      nf_word = nf_word + NfBits'(nf_theta[j]) + NfBits'(nf_m[j]) + NfBits'(nf_v[j]);
      if (nf_lane[j]) nf_first = LaneBits'(j);
    end
  end

  assign blk_bad = {abs_valid[1] && q8_v && abs_nf[1], abs_valid[0] && q8_m && abs_nf[0]};
  assign nf_add = (ex_valid ? 33'(nf_word) : 33'd0) +
                  (33'(blk_bad[0]) << Q8_BLOCK_BITS) + (33'(blk_bad[1]) << Q8_BLOCK_BITS);
  assign nf_sum = {1'b0, nf_count_q} + nf_add;
  always_comb begin
    nf_count_d = nf_count_q;
    nf_pos_d = nf_pos_q;
    blk_pos_d = blk_pos_q;
    if (main_start || (start_i && idle_o)) begin
      nf_count_d = '0;
      nf_pos_d = STATUS_NO_POSITION;
      blk_pos_d = STATUS_NO_POSITION;
    end else begin
      nf_count_d = nf_sum[32] ? 32'hffff_ffff : nf_sum[31:0];
      if (ex_valid && nf_pos_q == STATUS_NO_POSITION && (|nf_lane)) begin
        nf_pos_d = (ex_word_q << LaneBits) | 32'(nf_first);
      end
      if (blk_pos_q == STATUS_NO_POSITION && (|blk_bad)) begin
        blk_pos_d = abs_blk_q << Q8_BLOCK_BITS;
      end
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      nf_count_q <= '0;
      nf_pos_q <= STATUS_NO_POSITION;
      blk_pos_q <= STATUS_NO_POSITION;
      ex_word_q <= '0;
    end else begin
      nf_count_q <= nf_count_d;
      nf_pos_q <= nf_pos_d;
      blk_pos_q <= blk_pos_d;
      ex_word_q <= main_start ? '0 : ex_word_q + 32'(ex_valid);
    end
  end

  logic unused_bits;
  assign unused_bits = ^{wr_occ[WrStatus], qv_beat, abs_valid[1]};

endmodule
