// csd_fp_div: binary32 division, one result per clock.
//
// result = a / b, correctly rounded to nearest even (numeric contract): gradual underflow
// (FtzDaz = 0) or DAZ operands and FTZ results after rounding (FtzDaz = 1), overflow to +-inf,
// x / 0 = +-inf for x != 0, 0 / 0 = inf / inf = NaN, NaN results canonical (0x7fc00000), the
// sign of zero and infinity results is sign(a) ^ sign(b). Under DAZ a subnormal divisor is a
// zero (x / subnormal = +-inf).
//
// Algorithm: radix-2 restoring division of the normalised significands, fully unrolled. The
// dividend is pre-scaled so that the quotient lies in [1, 2): its integer bit is 1 and is
// produced by the preparation stage; BitsPerStage quotient bits follow per pipeline stage,
// each a compare-and-subtract of a 25-bit partial remainder. After 1 + 23 + 1 quotient bits
// (integer, fraction, guard) the remainder is zero exactly when the quotient is exact, which
// gives the sticky bit. No lookup tables, no multipliers.
//
// Pipeline: classify | prepare (exponent, pre-scale, first bit) | ceil(24 / BitsPerStage)
// digit stages | round (2 stages).

`default_nettype none

module csd_fp_div #(
  /// 1: FTZ/DAZ policy (subnormal operands read as zero, subnormal results flushed after
  /// rounding); 0: IEEE gradual underflow.
  parameter bit FtzDaz = 1'b0,
  /// Quotient bits computed per pipeline stage (1..24): fewer stages, longer paths.
  parameter int unsigned BitsPerStage = 2
) (
  /// Clock.
  input  wire logic        clk_i,
  /// Synchronous reset, active low (clears the valid pipeline only).
  input  wire logic        rst_ni,
  /// Operands below are valid: start an operation.
  input  wire logic        valid_i,
  /// Dividend, binary32.
  input  wire logic [31:0] a_i,
  /// Divisor, binary32.
  input  wire logic [31:0] b_i,
  /// result_o holds the result of the operation started Latency cycles earlier.
  output logic             valid_o,
  /// Quotient, binary32.
  output logic [31:0]      result_o
);
  localparam int unsigned SigBits = csd_fp_pkg::SIG_BITS;
  /// Quotient bits after the integer bit: 23 fraction bits and the guard bit.
  localparam int unsigned IterBits = SigBits;
  /// Digit-recurrence stages.
  localparam int unsigned IterStages = csd_fp_pkg::digit_stages(BitsPerStage);
  /// Cycles from valid_i to valid_o (classify, prepare, digit stages, round).
  localparam int unsigned Latency = csd_fp_pkg::digit_latency(BitsPerStage);

  csd_valid_pipe #(
    .Depth(Latency)
  ) u_valid_pipe (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(valid_i),
    .valid_o(valid_o)
  );

  // ---- Classify -----------------------------------------------------------------------------
  csd_fp_pkg::fp_unpacked_t [1:0] unpacked;
  csd_fp_pkg::fp_unpacked_t       a, b;

  csd_fp_classify #(
    .SrcFmt     (csd_fp_pkg::FmtFp32),
    .FtzDaz     (FtzDaz),
    .NumOperands(2)
  ) u_classify (
    .clk_i     (clk_i),
    .operands_i({b_i, a_i}),
    .unpacked_o(unpacked)
  );

  assign a = unpacked[0];
  assign b = unpacked[1];

  // ---- Stage state ----------------------------------------------------------------------------
  // rem is the partial remainder already doubled for the next digit, so rem < 2 * divisor.
  typedef struct packed {
    csd_fp_pkg::res_kind_e kind;
    logic                  sign;
    csd_fp_pkg::uexp_t     exp;
    logic [SigBits-1:0]    divisor;
    logic [SigBits:0]      rem;
    logic [SigBits:0]      quo;
  } div_stage_t;

  div_stage_t                prep;
  div_stage_t [IterStages:0] stage_d, stage_q;

  // ---- Stage 0: special results, exponent, pre-scale, integer quotient bit --------------------
  logic a_nan, b_nan, a_inf, b_inf, a_zero, b_zero;
  assign a_nan = csd_fp_pkg::is_nan(a.cls);
  assign b_nan = csd_fp_pkg::is_nan(b.cls);
  assign a_inf = a.cls == csd_fp_pkg::ClassInf;
  assign b_inf = b.cls == csd_fp_pkg::ClassInf;
  assign a_zero = a.cls == csd_fp_pkg::ClassZero;
  assign b_zero = b.cls == csd_fp_pkg::ClassZero;

  // If sig_a < sig_b the dividend is doubled (and the exponent lowered by one) so that the
  // quotient is in [1, 2). Both candidate remainders after the integer bit are formed in
  // parallel and the sign of the first picks one: sig_a - sig_b, or 2 sig_a - sig_b.
  logic [SigBits:0]   diff1, diff2;
  logic               a_below_b;
  assign diff1 = {1'b0, a.sig} - {1'b0, b.sig};
  assign diff2 = {a.sig, 1'b0} - {1'b0, b.sig};
  assign a_below_b = diff1[SigBits];

  always_comb begin
    prep.sign = a.sign ^ b.sign;
    if (a_nan || b_nan || (a_zero && b_zero) || (a_inf && b_inf)) begin
      prep.kind = csd_fp_pkg::ResNan;
      prep.sign = 1'b0;
    end else if (a_inf || b_zero) begin
      prep.kind = csd_fp_pkg::ResInf;
    end else if (a_zero || b_inf) begin
      prep.kind = csd_fp_pkg::ResZero;
    end else begin
      prep.kind = csd_fp_pkg::ResFinite;
    end
    // The quotient of the significands has its integer bit at 2^(ea - eb) (or one lower).
    prep.exp = a.exp - b.exp - csd_fp_pkg::uexp_t'(a_below_b);
    prep.divisor = b.sig;
    prep.rem = {(a_below_b ? diff2[SigBits-1:0] : diff1[SigBits-1:0]), 1'b0};
    prep.quo = (SigBits + 1)'(1);
  end

  // ---- Digit stages: one restoring step per quotient bit ---------------------------------------
  always_comb begin
    stage_d[0] = prep;
    for (int unsigned s = 1; s <= IterStages; s++) begin
      stage_d[s] = stage_q[s-1];
      for (int unsigned j = 0; j < BitsPerStage; j++) begin
        if ((s - 1) * BitsPerStage + j < IterBits) begin
          if (stage_d[s].rem >= {1'b0, stage_d[s].divisor}) begin
            stage_d[s].rem = (stage_d[s].rem - {1'b0, stage_d[s].divisor}) << 1;
            stage_d[s].quo = {stage_d[s].quo[SigBits-1:0], 1'b1};
          end else begin
            stage_d[s].rem = stage_d[s].rem << 1;
            stage_d[s].quo = {stage_d[s].quo[SigBits-1:0], 1'b0};
          end
        end
      end
    end
  end

  always_ff @(posedge clk_i) begin
    stage_q <= stage_d;
  end

  // ---- Round and pack -------------------------------------------------------------------------
  // quo = {integer bit, 23 fraction bits, guard bit}; sticky = a non-zero remainder.
  csd_fp_pkg::fp_round_in_t round_in;
  assign round_in.kind = stage_q[IterStages].kind;
  assign round_in.sign = stage_q[IterStages].sign;
  assign round_in.exp = stage_q[IterStages].exp;
  assign round_in.sig = {stage_q[IterStages].quo, |stage_q[IterStages].rem};
  assign round_in.payload = csd_fp_pkg::QUIET_BIT;

  // The divisor is not needed after the last digit; 2 sig_a - sig_b is below sig_b whenever
  // it is used, so its top bit is always clear.
  logic unused_bits;
  assign unused_bits = ^{stage_q[IterStages].divisor, diff2[SigBits]};

  csd_fp_round #(
    .DstFmt(csd_fp_pkg::FmtFp32),
    .FtzDaz(FtzDaz)
  ) u_round (
    .clk_i   (clk_i),
    .in_i    (round_in),
    .result_o(result_o)
  );

endmodule
