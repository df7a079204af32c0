// csd_update_pkg: constants, types and the pipeline schedule of the streaming updater core
// (csd_update_core and its submodules).
//
// Mirrors, for the RTL, what the C++ kernel takes from hls/include/csdkit/hls/: the mode word
// layout and its validity rules (mode.h), the status word and its error bits (mode.h), the
// sparse block size (sparse.h), and the launch-constant controls of the unified datapath
// (MakeRuleCtl in rules.h). The C++ headers are normative; a difference here is a bug here.
//
// The lane schedule (T_*) is derived from the latencies of the rtl/fp units, which csd_fp_pkg
// exports (each unit's Latency localparam is defined from them). Every lane also checks in
// simulation that each unit's valid_o arrives exactly when the schedule says
// (csd_update_lane), so a change in an fp unit cannot silently misalign the delay lines.

`default_nettype none

package csd_update_pkg;

  // ---- Memory channels --------------------------------------------------------------------------

  /// Read channels of the core (index into its rd_* port arrays).
  typedef enum int unsigned {
    RdTheta = 0,  // binary32 master weights
    RdM     = 1,  // first moment / momentum
    RdV     = 2,  // second moment / Adagrad sum
    RdGrad  = 3,  // dense gradient, or the sparse values
    RdIdx   = 4,  // sparse: uint16 in-block offsets
    RdBlk   = 5,  // sparse: uint32 block table
    RdMAbs  = 6,  // q8 formats: m's absmax, one binary32 per block of 256
    RdVAbs  = 7   // q8 formats: v's absmax
  } rd_port_e;
  /// Number of read channels.
  localparam int unsigned NUM_RD = 8;

  /// Write channels of the core (index into its wr_* port arrays).
  typedef enum int unsigned {
    WrTheta  = 0,  // updated weights, in place
    WrM      = 1,  // updated first moment, in place
    WrV      = 2,  // updated second moment, in place
    WrOut16  = 3,  // fp16/bf16 copy of the updated weights
    WrStatus = 4,  // the status word (16 x 32 bits), always written, last
    WrMAbs   = 5,  // q8 formats: m's new absmax values, in place
    WrVAbs   = 6   // q8 formats: v's new absmax values, in place
  } wr_port_e;
  /// Number of write channels.
  localparam int unsigned NUM_WR = 7;

  /// Width of a command's word offset and word count.
  localparam int unsigned CMD_BITS = 32;

  // ---- Mode word (hls/include/csdkit/hls/mode.h) ------------------------------------------------

  /// Optimizer codes, mode bits [2:0].
  localparam logic [2:0] OPT_ADAMW = 3'd0;
  localparam logic [2:0] OPT_ADAM = 3'd1;
  localparam logic [2:0] OPT_SGD = 3'd2;
  localparam logic [2:0] OPT_ADAGRAD = 3'd3;
  localparam logic [2:0] OPT_LION = 3'd4;

  /// Data type codes: gradient (mode bits [4:3]) and low-precision copy (bits [6:5], where
  /// DT_FP32 means "no copy").
  localparam logic [1:0] DT_FP32 = 2'd0;
  localparam logic [1:0] DT_FP16 = 2'd1;
  localparam logic [1:0] DT_BF16 = 2'd2;

  /// Single-bit mode flags.
  localparam int unsigned MODE_SPARSE = 7;
  localparam int unsigned MODE_FTZ = 8;
  localparam int unsigned MODE_L2 = 9;
  localparam int unsigned MODE_MOMENTUM = 10;
  localparam int unsigned MODE_NESTEROV = 11;
  localparam int unsigned MODE_FIRST = 12;
  /// State format field [14:13] (mode.h StateFmt).
  localparam int unsigned MODE_STATE = 13;
  /// Bits above the known fields must be zero.
  localparam int unsigned MODE_KNOWN_BITS = 15;

  /// State formats, mode bits [14:13]: binary32 theta/m/v; q8 moments; q8 moments + bf16 theta.
  localparam logic [1:0] ST_FP32 = 2'd0;
  localparam logic [1:0] ST_Q8 = 2'd1;
  localparam logic [1:0] ST_Q8_BF16 = 2'd2;

  // ---- Status word (lanes of the 512-bit status buffer) and error bits --------------------------

  localparam int unsigned STATUS_ERROR = 0;
  localparam int unsigned STATUS_ERROR_POS = 1;
  localparam int unsigned STATUS_ELEMS = 2;
  localparam int unsigned STATUS_NNZ = 3;
  localparam int unsigned STATUS_CRC_THETA_IN = 4;    // CRC-32 of theta as read
  localparam int unsigned STATUS_CRC_M_IN = 5;        // CRC-32 of m as read (0 without m)
  localparam int unsigned STATUS_CRC_V_IN = 6;        // CRC-32 of v as read (0 without v)
  localparam int unsigned STATUS_CRC_THETA_OUT = 7;   // CRC-32 of theta as written
  localparam int unsigned STATUS_CRC_M_OUT = 8;       // CRC-32 of m as written (0 without m)
  localparam int unsigned STATUS_CRC_V_OUT = 9;       // CRC-32 of v as written (0 without v)
  localparam int unsigned STATUS_NON_FINITE = 10;     // non-finite values written (saturating)
  localparam int unsigned STATUS_NON_FINITE_POS = 11; // first element with one, or NO_POSITION
  localparam int unsigned STATUS_AXI_ERROR = 12;      // RTL: AXI error responses (the kernel's)
  localparam int unsigned STATUS_MAGIC = 15;
  /// Lane 11 when nothing non-finite was written.
  localparam logic [31:0] STATUS_NO_POSITION = 32'hffff_ffff;
  /// Lane 12: bit 0 an error response was seen; bits [15:8] the first failing bundle (gmem<k>).
  localparam int unsigned AXI_ERROR_SEEN = 0;
  localparam int unsigned AXI_ERROR_BUNDLE_SHIFT = 8;
  /// 32-bit lanes of the status buffer (one 512-bit word of the model).
  localparam int unsigned STATUS_LANES = 16;
  localparam logic [31:0] STATUS_MAGIC_VALUE = 32'hc5d0_001b;

  localparam logic [31:0] ERR_BAD_MODE = 32'h01;     // invalid mode word (or policy mismatch)
  localparam logic [31:0] ERR_BLK_TABLE = 32'h02;    // table does not start at 0, or decreases
  localparam logic [31:0] ERR_UNSORTED = 32'h04;     // an offset below its predecessor
  localparam logic [31:0] ERR_DUPLICATE = 32'h08;    // an offset equal to its predecessor
  localparam logic [31:0] ERR_OUT_OF_RANGE = 32'h10; // an offset at or past its block's size
  localparam logic [31:0] ERR_COUNT = 32'h20;        // table total != nnz, entry > nnz, nnz > n
  localparam logic [31:0] ERR_BLOCK_LEN = 32'h40;    // q8: n or index_lo not whole blocks

  // ---- Sparse format (hls/include/csdkit/hls/sparse.h) ------------------------------------------

  /// Elements per sparse block: 2^BLOCK_BITS.
  localparam int unsigned BLOCK_BITS = 16;

  // ---- q8 formats (hls/include/csdkit/hls/state_q8.h) -------------------------------------------

  /// Elements per q8 block (one absmax per moment): 2^Q8_BLOCK_BITS.
  localparam int unsigned Q8_BLOCK_BITS = 8;
  /// 8-bit codes per 32-bit lane: a codes word holds the codes of 4 element words.
  localparam int unsigned Q8_CODES_PER_LANE = 4;

  // ---- Launch-constant datapath controls (MakeRuleCtl, rules.h) ---------------------------------

  /// binary32 1.0, the value MakeRuleCtl substitutes for operands an optimizer does not have.
  localparam logic [31:0] FP32_ONE = 32'h3f80_0000;

  /// The binary32 operands of the datapath, with the optimizer's fixed constants substituted
  /// (c1 = 1 except AdamW/Lion, c2 = 1 except Adam/AdamW, Adagrad beta2 = omb2 = 1).
  typedef struct packed {
    logic [31:0] unscale;
    logic [31:0] lr;
    logic [31:0] beta1;
    logic [31:0] omb1;
    logic [31:0] beta2;
    logic [31:0] omb2;
    logic [31:0] eps;
    logic [31:0] wd;
    logic [31:0] c1;
    logic [31:0] c2;
  } operands_t;

  /// The select signals of the datapath graph (rules.h); 1 takes the first input of Sel().
  typedef struct packed {
    logic l2;        // (2)  g = g + wd * theta
    logic mom_pass;  // (3)  mom = g
    logic lion;      // (4), (5), (8), (10)
    logic adagrad;   // (7)  numerator g
    logic use_q;     // (8)  u = q
    logic sgd;       // (8)  u = mom or Nesterov
    logic nesterov;  // (8)  u = g + beta1 * mom
  } sel_t;

  // ---- Latencies of the rtl/fp units ------------------------------------------------------------

  /// Quotient / root bits per digit stage of csd_fp_div and csd_fp_sqrt as instantiated here.
  localparam int unsigned DIGIT_BITS_PER_STAGE = 2;
  /// csd_fp_mul, csd_fp_add.
  localparam int unsigned LAT_MUL = csd_fp_pkg::MUL_LATENCY;
  localparam int unsigned LAT_ADD = csd_fp_pkg::ADD_LATENCY;
  /// csd_fp_div and csd_fp_sqrt at DIGIT_BITS_PER_STAGE.
  localparam int unsigned LAT_DIV = csd_fp_pkg::digit_latency(DIGIT_BITS_PER_STAGE);
  localparam int unsigned LAT_SQRT = csd_fp_pkg::digit_latency(DIGIT_BITS_PER_STAGE);
  /// csd_fp_sign and the four format conversions.
  localparam int unsigned LAT_SIGN = csd_fp_pkg::SIGN_LATENCY;
  localparam int unsigned LAT_CVT = csd_fp_pkg::CVT_LATENCY;
  /// rtl/q8 units as the core instantiates them: csd_q8_dequant (table, mul, sign),
  /// csd_q8_index (8 search stages), csd_q8_rand16 (Philox, MulStages 1), csd_q8_scale (the
  /// divider at DIGIT_BITS_PER_STAGE); csd_q8_absmax's depends on the lanes (q8_absmax_latency).
  localparam int unsigned LAT_DQ = 1 + LAT_MUL + 1;
  localparam int unsigned LAT_IDX = 8;
  localparam int unsigned LAT_RAND = 10 * 2;
  localparam int unsigned LAT_SCALE = LAT_DIV;

  /// csd_q8_absmax's latency at `lanes` (a power of two): magnitude, tree, running max, pack.
  function automatic int unsigned q8_absmax_latency(int unsigned lanes);
    return 1 + ($clog2(lanes) + 1) / 2 + 2;
  endfunction

  function automatic int unsigned max2(int unsigned a, int unsigned b);
    return (a > b) ? a : b;
  endfunction

  // ---- Lane schedule ----------------------------------------------------------------------------
  // Cycle, counted from the lane's input, at which each value of the rules.h graph is ready;
  // an operation starts when its last operand is ready and other operands wait in delay lines.
  // Numbers in brackets are the values with the current units (mul/add 6, div/sqrt 16, sign
  // and conversions 3).

  /// g_in: the gradient widened from its storage type [3].
  localparam int unsigned T_GIN = LAT_CVT;
  /// m and v as the lane reads them: binary32 state delayed, or q8 codes dequantized [8].
  localparam int unsigned T_MV = LAT_DQ;
  /// (1) g1 = g_in * unscale, and wd * theta [9].
  localparam int unsigned T_G1 = T_GIN + LAT_MUL;
  /// (2) g [15].
  localparam int unsigned T_G = T_G1 + LAT_ADD;
  /// beta1 * m, omb1 * g, g * g; (4) sq [21].
  localparam int unsigned T_P = T_G + LAT_MUL;
  /// (3) mom [27].
  localparam int unsigned T_MOM = T_P + LAT_ADD;
  /// beta2 * (Lion ? m : v), omb2 * sq [27].
  localparam int unsigned T_Q = T_P + LAT_MUL;
  /// (5) acc [33].
  localparam int unsigned T_ACC = T_Q + LAT_ADD;
  /// sqrt(acc) [49].
  localparam int unsigned T_SR = T_ACC + LAT_SQRT;
  /// sqrt(acc) * c2 [55].
  localparam int unsigned T_SRC2 = T_SR + LAT_MUL;
  /// (6) den [61].
  localparam int unsigned T_DEN = T_SRC2 + LAT_ADD;
  /// (7) q [77].
  localparam int unsigned T_QUO = T_DEN + LAT_DIV;
  /// beta1 * mom [33].
  localparam int unsigned T_BMOM = T_MOM + LAT_MUL;
  /// g + beta1 * mom (Nesterov) [39].
  localparam int unsigned T_NES = T_BMOM + LAT_ADD;
  /// sign(mom) [30].
  localparam int unsigned T_SIGN = T_MOM + LAT_SIGN;
  /// SGD's or Lion's u (the alternative to q) [39].
  localparam int unsigned T_ALT = max2(T_NES, T_SIGN);
  /// (8) u [77].
  localparam int unsigned T_U = max2(T_QUO, T_ALT);
  /// lr * u, theta * c1 [83].
  localparam int unsigned T_LU = T_U + LAT_MUL;
  /// (9) theta' [89].
  localparam int unsigned T_TH = T_LU + LAT_ADD;
  /// The lane's outputs: theta', m', v' and the fp16/bf16 narrowing of theta' [92].
  localparam int unsigned LANE_LATENCY = T_TH + LAT_CVT;
  /// q8-bf16: the Philox of a word starts here, so that its bits meet theta' at T_TH [69].
  localparam int unsigned T_RAND = T_TH - LAT_RAND;

endpackage
