// csd_fp_sqrt: binary32 square root, one result per clock.
//
// result = sqrt(a), correctly rounded to nearest even (numeric contract): sqrt(+-0) = +-0,
// sqrt(+inf) = +inf, sqrt(x < 0) = NaN (canonical 0x7fc00000), NaN operands give the canonical
// NaN. Subnormal operands are used as they are (FtzDaz = 0) or read as zero of the same sign
// (FtzDaz = 1: sqrt(-subnormal) = -0). A square root of a binary32 value is never subnormal,
// never overflows and is never exactly halfway between two binary32 values, so the policy only
// matters for the operand.
//
// Algorithm: radix-2 restoring square root (digit by digit), fully unrolled. With the exponent
// made even, the radicand x is in [1, 4) and the root Q in [1, 2); Q_0 = 1 and each digit
// stage decides the next bit 2^-k from the scaled remainder w_k = 2^k (x - Q_k^2):
//   trial = 2 w_{k-1} - (2 Q_{k-1} + 2^-k);
//   trial >= 0: w_k = trial, bit k = 1;  else w_k = 2 w_{k-1}, bit k = 0.
// In integers (w scaled by 2^25, Q by 2^24) every step is exact, so after 24 bits (23 fraction
// bits and the guard bit) the remainder is zero exactly when the root is exact: the sticky bit.
//
// Pipeline: classify | prepare (halve the exponent, scale the radicand) |
// ceil(24 / BitsPerStage) digit stages | round (2 stages).

`default_nettype none

module csd_fp_sqrt #(
  /// 1: FTZ/DAZ policy (subnormal operands read as zero of the same sign); 0: IEEE.
  parameter bit FtzDaz = 1'b0,
  /// Root bits computed per pipeline stage (1..24): fewer stages, longer paths.
  parameter int unsigned BitsPerStage = 2
) (
  /// Clock.
  input  wire logic        clk_i,
  /// Synchronous reset, active low (clears the valid pipeline only).
  input  wire logic        rst_ni,
  /// Operand below is valid: start an operation.
  input  wire logic        valid_i,
  /// Operand, binary32.
  input  wire logic [31:0] a_i,
  /// result_o holds the result of the operation started Latency cycles earlier.
  output logic             valid_o,
  /// Square root, binary32.
  output logic [31:0]      result_o
);
  localparam int unsigned SigBits = csd_fp_pkg::SIG_BITS;
  /// Root bits after the integer bit: 23 fraction bits and the guard bit.
  localparam int unsigned IterBits = SigBits;
  /// Digit-recurrence stages.
  localparam int unsigned IterStages = csd_fp_pkg::digit_stages(BitsPerStage);
  /// Cycles from valid_i to valid_o (classify, prepare, digit stages, round).
  localparam int unsigned Latency = csd_fp_pkg::digit_latency(BitsPerStage);

  /// Root Q scaled by 2^24: 25 bits. Remainder w scaled by 2^25: w < 2 Q + 2^-k <= 5, 28 bits;
  /// the trial value 2 w - ... needs one more bit and a sign.
  localparam int unsigned RootBits = SigBits + 1;
  localparam int unsigned RemBits = SigBits + 4;
  localparam int unsigned TrialBits = RemBits + 2;

  csd_valid_pipe #(
    .Depth(Latency)
  ) u_valid_pipe (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(valid_i),
    .valid_o(valid_o)
  );

  // ---- Classify -----------------------------------------------------------------------------
  csd_fp_pkg::fp_unpacked_t a;

  csd_fp_classify #(
    .SrcFmt     (csd_fp_pkg::FmtFp32),
    .FtzDaz     (FtzDaz),
    .NumOperands(1)
  ) u_classify (
    .clk_i     (clk_i),
    .operands_i(a_i),
    .unpacked_o(a)
  );

  // ---- Stage state ----------------------------------------------------------------------------
  typedef struct packed {
    csd_fp_pkg::res_kind_e kind;
    logic                  sign;
    csd_fp_pkg::uexp_t     exp;
    logic [RemBits-1:0]    rem;
    logic [RootBits-1:0]   root;
  } sqrt_stage_t;

  sqrt_stage_t                prep;
  sqrt_stage_t [IterStages:0] stage_d, stage_q;

  // ---- Stage 0: special results, exponent, radicand ------------------------------------------
  // An odd exponent moves one factor 2 into the radicand: x = 2 * sig in [2, 4); else x = sig
  // in [1, 2). rad = x * 2^23 (25 bits); w_0 = (x - 1) * 2^25 = (rad - 2^23) * 4.
  logic                   exp_odd;
  logic [SigBits:0]       rad;
  csd_fp_pkg::uexp_t      exp_even;
  logic [SigBits:0]       rad_minus_one;

  assign exp_odd = a.exp[0];
  assign rad = exp_odd ? {a.sig, 1'b0} : {1'b0, a.sig};
  assign exp_even = a.exp - csd_fp_pkg::uexp_t'(exp_odd);
  assign rad_minus_one = rad - (SigBits + 1)'(1 << (SigBits - 1));

  always_comb begin
    prep.sign = a.sign;
    if (csd_fp_pkg::is_nan(a.cls) ||
        (a.sign && a.cls != csd_fp_pkg::ClassZero)) begin
      prep.kind = csd_fp_pkg::ResNan;
      prep.sign = 1'b0;
    end else if (a.cls == csd_fp_pkg::ClassInf) begin
      prep.kind = csd_fp_pkg::ResInf;
    end else if (a.cls == csd_fp_pkg::ClassZero) begin
      prep.kind = csd_fp_pkg::ResZero;  // keeps the sign: sqrt(-0) = -0
    end else begin
      prep.kind = csd_fp_pkg::ResFinite;
    end
    prep.exp = exp_even >>> 1;
    prep.rem = {1'b0, rad_minus_one, 2'b00};
    prep.root = RootBits'(1) << (RootBits - 1);
  end

  // ---- Digit stages ---------------------------------------------------------------------------
  // Bit k (weight 2^-k, k = 1..24): trial = 2 w - 4 Q - 2^(25-k) in the scaled integers.
  logic [IterStages:1][BitsPerStage-1:0][TrialBits-1:0] trial;

  always_comb begin
    trial = '0;
    stage_d[0] = prep;
    for (int unsigned s = 1; s <= IterStages; s++) begin
      stage_d[s] = stage_q[s-1];
      for (int unsigned j = 0; j < BitsPerStage; j++) begin
        if ((s - 1) * BitsPerStage + j < IterBits) begin
          trial[s][j] = {1'b0, stage_d[s].rem, 1'b0} -
                        {3'b000, stage_d[s].root, 2'b00} -
                        (TrialBits'(1) << (SigBits - ((s - 1) * BitsPerStage + j)));
          if (!trial[s][j][TrialBits-1]) begin
            stage_d[s].rem = trial[s][j][RemBits-1:0];
            stage_d[s].root[SigBits - 1 - ((s - 1) * BitsPerStage + j)] = 1'b1;
          end else begin
            stage_d[s].rem = {stage_d[s].rem[RemBits-2:0], 1'b0};
          end
        end
      end
    end
  end

  always_ff @(posedge clk_i) begin
    stage_q <= stage_d;
  end

  // ---- Round and pack -------------------------------------------------------------------------
  // root = {integer bit, 23 fraction bits, guard bit}; sticky = a non-zero remainder.
  csd_fp_pkg::fp_round_in_t round_in;
  assign round_in.kind = stage_q[IterStages].kind;
  assign round_in.sign = stage_q[IterStages].sign;
  assign round_in.exp = stage_q[IterStages].exp;
  assign round_in.sig = {stage_q[IterStages].root, |stage_q[IterStages].rem};
  assign round_in.payload = csd_fp_pkg::QUIET_BIT;

  // The trial's top bits only carry its sign (checked above); exp_even's low bit is zero.
  logic unused_bits;
  assign unused_bits = ^{trial, exp_even[0]};

  csd_fp_round #(
    .DstFmt(csd_fp_pkg::FmtFp32),
    .FtzDaz(FtzDaz)
  ) u_round (
    .clk_i   (clk_i),
    .in_i    (round_in),
    .result_o(result_o)
  );

endmodule
