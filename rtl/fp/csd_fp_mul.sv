// csd_fp_mul: binary32 multiplication, one result per clock.
//
// result = a * b, rounded to nearest even (numeric contract): gradual underflow (FtzDaz = 0) or
// DAZ operands and FTZ results after rounding (FtzDaz = 1), overflow to +-inf, NaN results
// canonical (0x7fc00000), 0 * inf = NaN, the sign of zero and infinity results is
// sign(a) ^ sign(b). Never fused with an addition.
//
// Pipeline: classify | 24x24-bit significand product | product register (the two cycles let
// synthesis use the multiplier blocks' internal pipeline registers) | normalise (the product of
// two significands in [1, 2) is in [1, 4): one optional shift) | round (2 stages).
// Subnormal operands arrive normalised from the classify stage, so the product always has its
// leading one in one of the top two bits; a result below the normal range is shifted into place
// by the round stage.

`default_nettype none

module csd_fp_mul #(
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
  /// result_o holds the result of the operation started Latency cycles earlier.
  output logic             valid_o,
  /// Result, binary32.
  output logic [31:0]      result_o
);
  /// Cycles from valid_i to valid_o (classify, three unit stages, round).
  localparam int unsigned Latency = csd_fp_pkg::MUL_LATENCY;

  localparam int unsigned SigBits = csd_fp_pkg::SIG_BITS;
  localparam int unsigned ProdBits = 2 * SigBits;

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

  // ---- Stage P1: product, exponent sum, special results ----------------------------------------
  logic a_nan, b_nan, a_inf, b_inf, a_zero, b_zero;
  assign a_nan = csd_fp_pkg::is_nan(a.cls);
  assign b_nan = csd_fp_pkg::is_nan(b.cls);
  assign a_inf = a.cls == csd_fp_pkg::ClassInf;
  assign b_inf = b.cls == csd_fp_pkg::ClassInf;
  assign a_zero = a.cls == csd_fp_pkg::ClassZero;
  assign b_zero = b.cls == csd_fp_pkg::ClassZero;

  csd_fp_pkg::res_kind_e kind_d, kind_q, kind_q2;
  logic                  sign_d, sign_q, sign_q2;
  csd_fp_pkg::uexp_t     exp_d, exp_q, exp_q2;
  logic [ProdBits-1:0]   prod_d, prod_q, prod_q2;

  // NaN for a NaN operand or 0 * inf; otherwise an infinity or a zero operand decides.
  always_comb begin
    sign_d = a.sign ^ b.sign;
    if (a_nan || b_nan || (a_inf && b_zero) || (a_zero && b_inf)) begin
      kind_d = csd_fp_pkg::ResNan;
      sign_d = 1'b0;
    end else if (a_inf || b_inf) begin
      kind_d = csd_fp_pkg::ResInf;
    end else if (a_zero || b_zero) begin
      kind_d = csd_fp_pkg::ResZero;
    end else begin
      kind_d = csd_fp_pkg::ResFinite;
    end
  end

  // The value is prod * 2^(ea + eb - 46); the exponent of bit 46 is ea + eb.
  assign exp_d = a.exp + b.exp;
  assign prod_d = a.sig * b.sig;

  always_ff @(posedge clk_i) begin
    kind_q <= kind_d;
    sign_q <= sign_d;
    exp_q <= exp_d;
    prod_q <= prod_d;
    kind_q2 <= kind_q;
    sign_q2 <= sign_q;
    exp_q2 <= exp_q;
    prod_q2 <= prod_q;
  end

  // ---- Stage N: normalise ---------------------------------------------------------------------
  // A product in [2, 4) (top bit set) is shifted one place right, which adds one to the
  // exponent. The round stage takes 24 significand bits, the guard bit and the sticky OR.
  csd_fp_pkg::fp_round_in_t round_in_d, round_in_q;

  always_comb begin
    round_in_d.kind = kind_q2;
    round_in_d.sign = sign_q2;
    round_in_d.payload = csd_fp_pkg::QUIET_BIT;
    if (prod_q2[ProdBits-1]) begin
      round_in_d.exp = exp_q2 + csd_fp_pkg::uexp_t'(1);
      round_in_d.sig = {prod_q2[ProdBits-1 -: SigBits + 1], |prod_q2[ProdBits-SigBits-2:0]};
    end else begin
      round_in_d.exp = exp_q2;
      round_in_d.sig = {prod_q2[ProdBits-2 -: SigBits + 1], |prod_q2[ProdBits-SigBits-3:0]};
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
