// csd_fp_pkg: formats, operand classes and the two internal interfaces of the binary32 units
// in rtl/fp/ (the unpacked operand that csd_fp_classify produces and the unrounded result that
// csd_fp_round consumes), plus the small helper functions they share.
//
// Numeric contract (docs/numeric-contract.md): IEEE-754 binary32, round to nearest even,
// gradual underflow, overflow to infinity, no exception flags, canonical NaN 0x7fc00000 for
// every arithmetic NaN result, no fused multiply-add. The optional FTZ/DAZ policy reads
// subnormal operands as zero of the same sign and flushes subnormal results to zero of the
// same sign after IEEE rounding. fp16/bf16 conversions are exact integer functions (F16C
// semantics for fp16) and ignore the policy; fp32 -> bf16 also has the stochastic rounding of
// docs/state-formats.md, chosen per operation (rnd_e).

`default_nettype none

package csd_fp_pkg;

  // ---- Formats ---------------------------------------------------------------------------

  /// The interchange formats the units read and write.
  typedef enum logic [1:0] {
    FmtFp32 = 2'd0,  // IEEE binary32: 8 exponent bits, 23 fraction bits
    FmtFp16 = 2'd1,  // IEEE binary16: 5 exponent bits, 10 fraction bits
    FmtBf16 = 2'd2   // bfloat16: 8 exponent bits, 7 fraction bits
  } fmt_e;

  /// Exponent field width of a format.
  function automatic int unsigned fmt_exp_bits(fmt_e fmt);
    return (fmt == FmtFp16) ? 5 : 8;
  endfunction

  /// Fraction (trailing significand) field width of a format.
  function automatic int unsigned fmt_man_bits(fmt_e fmt);
    unique case (fmt)
      FmtFp16: return 10;
      FmtBf16: return 7;
      default: return 23;
    endcase
  endfunction

  /// Total width of a format: sign, exponent, fraction.
  function automatic int unsigned fmt_width(fmt_e fmt);
    return 1 + fmt_exp_bits(fmt) + fmt_man_bits(fmt);
  endfunction

  /// Exponent bias of a format (2^(E-1) - 1).
  function automatic int unsigned fmt_bias(fmt_e fmt);
    return (1 << (fmt_exp_bits(fmt) - 1)) - 1;
  endfunction

  /// True when every value of format src is exactly a value of format dst (a widening cast, or
  /// the same format): such a cast never rounds, so the rounding mode does not matter.
  function automatic bit fmt_cast_exact(fmt_e src, fmt_e dst);
    return fmt_exp_bits(dst) >= fmt_exp_bits(src) && fmt_man_bits(dst) >= fmt_man_bits(src);
  endfunction

  // ---- Rounding modes of the conversions (csd_fp_cast) ------------------------------------

  /// How csd_fp_cast rounds, chosen per operation (its rnd_mode_i). The arithmetic units always
  /// round to nearest even.
  typedef enum logic [0:0] {
    RndNearestEven = 1'b0,  // IEEE round to nearest, ties to even: every format pair
    RndStochastic  = 1'b1   // fp32 -> bf16 only: (bits + R) >> 16, NaN -> BF16_CANONICAL_NAN
  } rnd_e;

  /// Width of the random number R that one stochastic rounding consumes (the 16 bits that
  /// fp32 -> bf16 drops).
  localparam int unsigned RND_BITS = 16;
  /// The one bf16 NaN that stochastic rounding returns, whatever the operand's sign and payload
  /// (docs/state-formats.md, section "theta in bf16 with stochastic rounding", q8-bf16).
  localparam logic [15:0] BF16_CANONICAL_NAN = 16'h7fc0;

  // ---- Internal number representation ----------------------------------------------------

  /// Fraction bits of binary32, the widest fraction handled.
  localparam int unsigned FRAC_BITS = 23;
  /// Significand bits of binary32 including the hidden bit.
  localparam int unsigned SIG_BITS = FRAC_BITS + 1;
  /// Width of the unbiased, signed exponent inside the units. Products reach 2^-298 and
  /// quotients 2^+277 before rounding (normalised subnormal operands included), so ten bits
  /// (-512..511) hold every intermediate exponent.
  localparam int unsigned UEXP_BITS = 10;
  /// Width of a significand with guard and sticky bits, as csd_fp_round takes it.
  localparam int unsigned RSIG_BITS = SIG_BITS + 2;

  /// The one NaN every arithmetic operation returns.
  localparam logic [31:0] CANONICAL_NAN = 32'h7fc0_0000;
  /// Fraction of a quiet NaN with an all-zero payload (the quiet bit alone), left-aligned.
  localparam logic [FRAC_BITS-1:0] QUIET_BIT = 23'h40_0000;

  // ---- Latencies: cycles from valid_i to valid_o, for aligning datapath pipelines ----------
  // Each unit's `Latency` localparam is defined from these (and its benches check it).

  /// csd_fp_classify (operand in, unpacked operand out).
  localparam int unsigned CLASSIFY_LATENCY = 1;
  /// csd_fp_round (unrounded result in, packed result out).
  localparam int unsigned ROUND_LATENCY = 2;
  /// csd_fp_add: classify, align, add, normalise, round.
  localparam int unsigned ADD_LATENCY = CLASSIFY_LATENCY + 3 + ROUND_LATENCY;
  /// csd_fp_mul: classify, product, product register, normalise, round.
  localparam int unsigned MUL_LATENCY = CLASSIFY_LATENCY + 3 + ROUND_LATENCY;
  /// csd_fp_sign: classify, round.
  localparam int unsigned SIGN_LATENCY = CLASSIFY_LATENCY + ROUND_LATENCY;
  /// csd_fp_cast, every format pair and both rounding modes: classify, round.
  localparam int unsigned CVT_LATENCY = CLASSIFY_LATENCY + ROUND_LATENCY;

  /// Digit stages of csd_fp_div and csd_fp_sqrt: 24 result bits after the integer bit
  /// (23 fraction bits and the guard bit), bits_per_stage at a time.
  function automatic int unsigned digit_stages(int unsigned bits_per_stage);
    return (SIG_BITS + bits_per_stage - 1) / bits_per_stage;
  endfunction

  /// csd_fp_div and csd_fp_sqrt: classify, prepare, digit stages, round.
  function automatic int unsigned digit_latency(int unsigned bits_per_stage);
    return CLASSIFY_LATENCY + 1 + digit_stages(bits_per_stage) + ROUND_LATENCY;
  endfunction

  /// Unbiased signed exponent.
  typedef logic signed [UEXP_BITS-1:0] uexp_t;

  /// Class of an operand. Under DAZ a subnormal operand is classified as ClassZero.
  typedef enum logic [2:0] {
    ClassZero      = 3'd0,
    ClassSubnormal = 3'd1,
    ClassNormal    = 3'd2,
    ClassInf       = 3'd3,
    ClassQnan      = 3'd4,
    ClassSnan      = 3'd5
  } fp_class_e;

  /// An operand after csd_fp_classify. Its value, for a finite non-zero operand, is
  /// (-1)^sign * sig * 2^(exp - 23), sig normalised to [2^23, 2^24) (subnormals included, so
  /// exp may be below -126). For Inf and NaN, sig = {1, fraction left-aligned}, which keeps a
  /// NaN's payload for the conversions. For a zero, exp = 0 and sig = 0.
  typedef struct packed {
    logic                sign;
    uexp_t               exp;
    logic [SIG_BITS-1:0] sig;
    fp_class_e           cls;
  } fp_unpacked_t;

  /// What csd_fp_round produces: a rounded finite value, or a special value decided by the
  /// operation (the rounding stage only packs those).
  typedef enum logic [1:0] {
    ResFinite = 2'd0,  // round {sig, guard, sticky} * 2^exp
    ResZero   = 2'd1,  // zero with the given sign
    ResInf    = 2'd2,  // infinity with the given sign
    ResNan    = 2'd3   // NaN with the given sign and payload
  } res_kind_e;

  /// An unrounded result, the input of csd_fp_round. For ResFinite, sig[RSIG_BITS-1] must be
  /// set; the value is (-1)^sign * 1.f * 2^exp with f = sig[RSIG_BITS-2:2], sig[1] the guard
  /// (half-ulp) bit and sig[0] the sticky bit (OR of everything below). payload is the NaN
  /// fraction, left-aligned, quiet bit included (the operation decides whether to set it); the
  /// rounding stage keeps its top bits.
  typedef struct packed {
    res_kind_e            kind;
    logic                 sign;
    uexp_t                exp;
    logic [RSIG_BITS-1:0] sig;
    logic [FRAC_BITS-1:0] payload;
  } fp_round_in_t;

  /// True for either NaN class.
  function automatic logic is_nan(fp_class_e cls);
    return (cls == ClassQnan) || (cls == ClassSnan);
  endfunction

  /// Leading zero count of a 32-bit vector (32 for zero). Callers left-align narrower vectors
  /// and pad them with ones on the right to bound the count.
  function automatic logic [5:0] lzc32(logic [31:0] x);
    logic [5:0] n;
    n = 6'd32;
    for (int unsigned i = 0; i < 32; i++) begin
      if (x[i]) n = 6'(31 - i);
    end
    return n;
  endfunction

  /// Right shift of a right-aligned vector with sticky: the bits shifted out are ORed into
  /// bit 0 of the result. Shift amounts of 32 or more leave only the sticky bit.
  function automatic logic [31:0] shift_right_sticky32(logic [31:0] x, logic [5:0] sh);
    logic [31:0] lost_mask;
    lost_mask = (sh >= 6'd32) ? '1 : ~('1 << sh);
    return (x >> sh) | {31'b0, |(x & lost_mask)};
  endfunction

endpackage
