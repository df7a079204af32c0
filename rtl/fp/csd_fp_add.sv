// csd_fp_add: binary32 addition and subtraction, one result per clock.
//
// result = a + b (sub_i = 0) or a - b (sub_i = 1), rounded to nearest even (numeric contract):
// gradual underflow (FtzDaz = 0) or DAZ operands and FTZ results after rounding (FtzDaz = 1),
// overflow to +-inf, NaN results canonical (0x7fc00000), inf - inf = NaN, an exact zero sum is
// +0 except (-0) + (-0) = -0. Subtraction is addition of b with its sign flipped (a NaN's sign
// does not matter: the result is the canonical NaN).
//
// Pipeline: classify | align (swap so |x| >= |y|, shift y right with sticky) | add or subtract
// the 27-bit significands (24 bits + guard, round, sticky) | normalise (leading zero count,
// left shift) | round (2 stages). The guard/round/sticky scheme is exact: a cancellation of
// more than one bit only happens when the exponents differ by at most one, where nothing was
// shifted into the sticky bit.

`default_nettype none

module csd_fp_add #(
  /// 1: FTZ/DAZ policy (subnormal operands read as zero, subnormal results flushed after
  /// rounding); 0: IEEE gradual underflow.
  parameter bit FtzDaz = 1'b0
) (
  /// Clock.
  input  wire logic        clk_i,
  /// Synchronous reset, active low (clears the valid pipeline only).
  input  wire logic        rst_ni,
  /// Operands below are valid: start an operation.
  input  wire logic        valid_i,
  /// First operand, binary32.
  input  wire logic [31:0] a_i,
  /// Second operand, binary32.
  input  wire logic [31:0] b_i,
  /// 0: a + b; 1: a - b.
  input  wire logic        sub_i,
  /// result_o holds the result of the operation started Latency cycles earlier.
  output logic             valid_o,
  /// Result, binary32.
  output logic [31:0]      result_o
);
  /// Cycles from valid_i to valid_o (classify, three unit stages, round).
  localparam int unsigned Latency = csd_fp_pkg::ADD_LATENCY;

  localparam int unsigned AlignBits = csd_fp_pkg::SIG_BITS + 3;  // significand, G, R, S
  localparam int unsigned SumBits = AlignBits + 1;               // plus the carry

  csd_valid_pipe #(
    .Depth(Latency)
  ) u_valid_pipe (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(valid_i),
    .valid_o(valid_o)
  );

  // ---- Classify (b's sign flipped for a subtraction) -------------------------------------------
  logic [1:0][31:0]                operands;
  csd_fp_pkg::fp_unpacked_t [1:0]  unpacked;
  csd_fp_pkg::fp_unpacked_t        a, b;

  assign operands = {{b_i[31] ^ sub_i, b_i[30:0]}, a_i};

  csd_fp_classify #(
    .SrcFmt     (csd_fp_pkg::FmtFp32),
    .FtzDaz     (FtzDaz),
    .NumOperands(2)
  ) u_classify (
    .clk_i     (clk_i),
    .operands_i(operands),
    .unpacked_o(unpacked)
  );

  assign a = unpacked[0];
  assign b = unpacked[1];

  // ---- Stage A: special results, swap, align -----------------------------------------------
  logic                   a_nan, b_nan, a_inf, b_inf, a_zero, b_zero;
  logic                   b_larger;
  csd_fp_pkg::fp_unpacked_t x, y;
  logic [csd_fp_pkg::UEXP_BITS:0] exp_diff;
  logic [5:0]             align_shift;
  logic [31:0]            y_shifted;

  assign a_nan = csd_fp_pkg::is_nan(a.cls);
  assign b_nan = csd_fp_pkg::is_nan(b.cls);
  assign a_inf = a.cls == csd_fp_pkg::ClassInf;
  assign b_inf = b.cls == csd_fp_pkg::ClassInf;
  assign a_zero = a.cls == csd_fp_pkg::ClassZero;
  assign b_zero = b.cls == csd_fp_pkg::ClassZero;

  // x is the operand of larger magnitude (a zero never is, unless both are zero, which is a
  // special result); the result takes x's sign and, before normalisation, x's exponent.
  // Normalised subnormals compare correctly by (exponent, significand).
  assign b_larger = a_zero ||
                    (!b_zero && ((b.exp > a.exp) || ((b.exp == a.exp) && (b.sig > a.sig))));
  assign x = b_larger ? b : a;
  assign y = b_larger ? a : b;

  // y is shifted right by the exponent difference, the lost bits ORed into the sticky bit.
  // A zero y has sig = 0 and contributes nothing whatever the shift.
  assign exp_diff = (csd_fp_pkg::UEXP_BITS + 1)'(x.exp) - (csd_fp_pkg::UEXP_BITS + 1)'(y.exp);
  assign align_shift = (exp_diff > (csd_fp_pkg::UEXP_BITS + 1)'(AlignBits)) ?
                       6'(AlignBits) : 6'(exp_diff);
  assign y_shifted = csd_fp_pkg::shift_right_sticky32(32'({y.sig, 3'b000}), align_shift);

  // Special results: any NaN, or inf - inf, gives NaN; otherwise an infinity wins with its
  // sign; two zeros give -0 only if both are -0 (round to nearest).
  csd_fp_pkg::res_kind_e  kind_a_d, kind_a_q;
  logic                   sign_a_d, sign_a_q;
  logic                   eff_sub_d, eff_sub_q;
  csd_fp_pkg::uexp_t      exp_a_d, exp_a_q;
  logic [AlignBits-1:0]   x_sig_d, x_sig_q, y_sig_d, y_sig_q;

  always_comb begin
    sign_a_d = x.sign;
    if (a_nan || b_nan || (a_inf && b_inf && (a.sign != b.sign))) begin
      kind_a_d = csd_fp_pkg::ResNan;
      sign_a_d = 1'b0;
    end else if (a_inf || b_inf) begin
      kind_a_d = csd_fp_pkg::ResInf;
      sign_a_d = a_inf ? a.sign : b.sign;
    end else if (a_zero && b_zero) begin
      kind_a_d = csd_fp_pkg::ResZero;
      sign_a_d = a.sign & b.sign;
    end else begin
      kind_a_d = csd_fp_pkg::ResFinite;
    end
  end

  assign eff_sub_d = x.sign ^ y.sign;
  assign exp_a_d = x.exp;
  assign x_sig_d = {x.sig, 3'b000};
  assign y_sig_d = y_shifted[AlignBits-1:0];

  // Bits above the aligned width are always zero; the classes were consumed above.
  logic unused_align;
  assign unused_align = ^{y_shifted[31:AlignBits], x.cls, y.cls};

  always_ff @(posedge clk_i) begin
    kind_a_q <= kind_a_d;
    sign_a_q <= sign_a_d;
    eff_sub_q <= eff_sub_d;
    exp_a_q <= exp_a_d;
    x_sig_q <= x_sig_d;
    y_sig_q <= y_sig_d;
  end

  // ---- Stage B: add or subtract the aligned significands (|x| >= |y|: never negative) ----------
  csd_fp_pkg::res_kind_e  kind_b_q;
  logic                   sign_b_q;
  csd_fp_pkg::uexp_t      exp_b_q;
  logic [SumBits-1:0]     sum_d, sum_q;

  assign sum_d = eff_sub_q ? ({1'b0, x_sig_q} - {1'b0, y_sig_q})
                           : ({1'b0, x_sig_q} + {1'b0, y_sig_q});

  always_ff @(posedge clk_i) begin
    kind_b_q <= kind_a_q;
    sign_b_q <= sign_a_q;
    exp_b_q <= exp_a_q;
    sum_q <= sum_d;
  end

  // ---- Stage C: normalise ---------------------------------------------------------------------
  // The sum's top bit (the carry) has weight 2^(exp + 1). Shift the leading one to the top and
  // take the significand, the guard bit and the sticky OR of the rest. An exact zero sum
  // (x - x) is +0 under round to nearest.
  logic [5:0]                lz;
  logic [SumBits-1:0]        sum_norm;
  csd_fp_pkg::fp_round_in_t  round_in_d, round_in_q;

  assign lz = csd_fp_pkg::lzc32({sum_q, {(32 - SumBits){1'b1}}});
  assign sum_norm = sum_q << lz;

  always_comb begin
    round_in_d.kind = kind_b_q;
    round_in_d.sign = sign_b_q;
    round_in_d.exp = exp_b_q + csd_fp_pkg::uexp_t'(1) - csd_fp_pkg::uexp_t'(lz);
    round_in_d.sig = {sum_norm[SumBits-1 -: csd_fp_pkg::SIG_BITS + 1],
                      |sum_norm[SumBits-csd_fp_pkg::SIG_BITS-2:0]};
    round_in_d.payload = csd_fp_pkg::QUIET_BIT;
    if (kind_b_q == csd_fp_pkg::ResFinite && sum_q == '0) begin
      round_in_d.kind = csd_fp_pkg::ResZero;
      round_in_d.sign = 1'b0;
    end
  end

  always_ff @(posedge clk_i) begin
    round_in_q <= round_in_d;
  end

  // ---- Round and pack -------------------------------------------------------------------------
  csd_fp_round #(
    .DstFmt(csd_fp_pkg::FmtFp32),
    .FtzDaz(FtzDaz)
  ) u_round (
    .clk_i   (clk_i),
    .in_i    (round_in_q),
    .result_o(result_o)
  );

endmodule
