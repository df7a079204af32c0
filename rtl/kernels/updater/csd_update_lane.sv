// csd_update_lane: one element of the optimizer update per cycle: the unified datapath of
// hls/include/csdkit/hls/rules.h, built from the rtl/fp units, fully pipelined, no stalls.
//
//   (0)  g_in = widen(g_raw)                 fp32 as is, fp16 / bf16 exactly (csd_fp_cast)
//   (1)  g   = g_in * unscale
//   (2)  g   = l2 ? g + wd * theta : g
//   (3)  mom = mom_pass ? g : beta1 * m + omb1 * g
//   (4)  sq  = lion ? g : g * g
//   (5)  acc = beta2 * (lion ? m : v) + omb2 * sq
//   (6)  den = sqrt(acc) * c2 + eps
//   (7)  q   = (adagrad ? g : mom) / den
//   (8)  u   = use_q ? q : sgd ? (nesterov ? g + beta1 * mom : mom) : sign(mom)
//   (9)  theta' = theta * c1 - lr * u
//   (10) m'  = lion ? acc : mom;  v' = acc;  half' = fp16 or bf16 of theta'
//
// State formats: m and v arrive as binary32 (delayed to T_MV), or, in the q8 formats, as an
// 8-bit code and its block's absmax, dequantized by csd_q8_dequant (signed map for m, unsigned
// for v) in the same T_MV = LAT_DQ cycles, so the rest of the graph does not depend on the
// format. In q8-bf16 the bf16 narrowing of theta' rounds stochastically with the element's
// random number, which the core delivers at T_TH; the lane itself never quantizes (a block's
// codes need the whole block: csd_update_q8_quant, after the lanes).
//
// Every line is one binary32 operation of the numeric contract with its operands in the model's
// order (nothing fused); selects route bits only. Each unit returns the canonical NaN and
// applies the build's policy (FtzDaz), so the lane's outputs equal the model's, whose NaNs are
// canonicalised at the outputs (equivalent, see fp32.h). Every operation is evaluated whatever
// the optimizer; the selects (launch constants) pick the graph's path.
//
// Schedule: csd_update_pkg::T_* give the cycle each value is ready; operands that are ready
// early wait in csd_delay lines. All outputs appear LANE_LATENCY cycles after the inputs.
// In simulation, every unit's valid_o is checked against the schedule.

`default_nettype none

module csd_update_lane #(
  /// The build's fp policy: 1 FTZ/DAZ, 0 IEEE (all arithmetic units).
  parameter bit FtzDaz = 1'b0
) (
  /// Clock.
  input  wire logic                      clk_i,
  /// Synchronous reset, active low (valid pipelines and delay-line pointers only).
  input  wire logic                      rst_ni,
  /// The inputs below are an element (used only to check the schedule in simulation).
  input  wire logic                      valid_i,
  /// theta, binary32.
  input  wire logic [31:0]               theta_i,
  /// m, binary32 (any value when the optimizer has no m).
  input  wire logic [31:0]               m_i,
  /// v, binary32 (any value when the optimizer has no v).
  input  wire logic [31:0]               v_i,
  /// The q8 formats (a launch constant): m and v are the codes and absmax below, not m_i, v_i.
  input  wire logic                      q8_i,
  /// q8: m's code (signed map) and its block's absmax, binary32.
  input  wire logic [7:0]                m_code_i,
  input  wire logic [31:0]               m_absmax_i,
  /// q8: v's code (unsigned map) and its block's absmax, binary32.
  input  wire logic [7:0]                v_code_i,
  input  wire logic [31:0]               v_absmax_i,
  /// Round theta' to bf16 stochastically (q8-bf16, a launch constant); else nearest even.
  input  wire logic                      stoch_i,
  /// The element's random number R, T_TH cycles after the inputs above (stoch_i only).
  input  wire logic [15:0]               rnd_bits_i,
  /// Gradient as stored: binary32, or fp16 / bf16 in bits [15:0].
  input  wire logic [31:0]               g_i,
  /// Gradient data type (csd_update_pkg::DT_*), a launch constant.
  input  wire logic [1:0]                grad_fmt_i,
  /// Low-precision copy data type (DT_BF16 selects bf16, anything else fp16), a constant.
  input  wire logic [1:0]                out_fmt_i,
  /// Operands, launch constants.
  input  wire csd_update_pkg::operands_t ops_i,
  /// Selects, launch constants.
  input  wire csd_update_pkg::sel_t      sel_i,
  /// theta', LANE_LATENCY cycles after the inputs.
  output logic      [31:0]               theta_o,
  /// m' (meaningful when the optimizer has m).
  output logic      [31:0]               m_o,
  /// v' (meaningful when the optimizer has v).
  output logic      [31:0]               v_o,
  /// theta' narrowed to fp16 or bf16 (out_fmt_i).
  output logic      [15:0]               half_o
);
  import csd_update_pkg::*;

  localparam int unsigned Lat = LANE_LATENCY;

  // ---- Schedule valid bits (simulation check only; synthesis removes them) ----------------------
  logic [Lat:0]   vld;
  logic [Lat:1]   vld_q;
  assign vld = {vld_q, valid_i};
  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      vld_q <= '0;
    end else begin
      vld_q <= vld[Lat-1:0];
    end
  end

  // Unit valid outputs, and the schedule's expectation for each, checked below.
  localparam int unsigned NumUnits = 26;
  logic [NumUnits-1:0] unit_vld, sched_vld;

  // ---- (0) Widening -----------------------------------------------------------------------------
  logic [31:0] g_f16, g_bf16, g_f32, g_in;

  // Widening is exact: the rounding mode is ignored.
  csd_fp_cast #(
    .SrcFmt(csd_fp_pkg::FmtFp16), .DstFmt(csd_fp_pkg::FmtFp32), .QuietNan(1'b1)
  ) u_widen_f16 (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[0]), .a_i(g_i[15:0]),
    .rnd_mode_i(csd_fp_pkg::RndNearestEven), .rnd_bits_i('0),
    .valid_o(unit_vld[0]), .result_o(g_f16)
  );
  assign sched_vld[0] = vld[T_GIN];

  // bf16 -> fp32 is the bits shifted left by 16, NaN payloads kept (not quieted).
  csd_fp_cast #(
    .SrcFmt(csd_fp_pkg::FmtBf16), .DstFmt(csd_fp_pkg::FmtFp32), .QuietNan(1'b0)
  ) u_widen_bf16 (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[0]), .a_i(g_i[15:0]),
    .rnd_mode_i(csd_fp_pkg::RndNearestEven), .rnd_bits_i('0),
    .valid_o(unit_vld[1]), .result_o(g_bf16)
  );
  assign sched_vld[1] = vld[T_GIN];

  csd_delay #(.Width(32), .Depth(T_GIN)) u_d_g32 (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(g_i), .data_o(g_f32)
  );

  always_comb begin
    unique case (grad_fmt_i)
      DT_FP16: g_in = g_f16;
      DT_BF16: g_in = g_bf16;
      default: g_in = g_f32;
    endcase
  end

  // ---- m and v at T_MV: binary32 as read, or q8 codes dequantized -------------------------------
  logic [31:0] m_dq, v_dq, m_raw, v_raw, m_mv, v_mv;

  csd_q8_dequant #(.FtzDaz(FtzDaz)) u_dq_m (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[0]), .code_i(m_code_i),
    .absmax_i(m_absmax_i), .signed_map_i(1'b1), .valid_o(unit_vld[24]), .value_o(m_dq)
  );
  assign sched_vld[24] = vld[T_MV];

  csd_q8_dequant #(.FtzDaz(FtzDaz)) u_dq_v (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[0]), .code_i(v_code_i),
    .absmax_i(v_absmax_i), .signed_map_i(1'b0), .valid_o(unit_vld[25]), .value_o(v_dq)
  );
  assign sched_vld[25] = vld[T_MV];

  csd_delay #(.Width(64), .Depth(T_MV)) u_d_mv (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i({m_i, v_i}), .data_o({m_raw, v_raw})
  );
  assign m_mv = q8_i ? m_dq : m_raw;
  assign v_mv = q8_i ? v_dq : v_raw;

  // ---- State operands, delayed to their first use -----------------------------------------------
  logic [31:0] theta_gin, theta_u, m_g, m_p, v_p;

  csd_delay #(.Width(32), .Depth(T_GIN)) u_d_theta_gin (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(theta_i), .data_o(theta_gin)
  );
  csd_delay #(.Width(32), .Depth(T_U - T_GIN)) u_d_theta_u (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(theta_gin), .data_o(theta_u)
  );
  csd_delay #(.Width(32), .Depth(T_G - T_MV)) u_d_m_g (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(m_mv), .data_o(m_g)
  );
  csd_delay #(.Width(32), .Depth(T_P - T_G)) u_d_m_p (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(m_g), .data_o(m_p)
  );
  csd_delay #(.Width(32), .Depth(T_P - T_MV)) u_d_v_p (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(v_mv), .data_o(v_p)
  );

  // ---- (1) g1 = g_in * unscale; wd * theta ------------------------------------------------------
  logic [31:0] g1, wd_theta;

  csd_fp_mul #(.FtzDaz(FtzDaz)) u_mul_g1 (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_GIN]), .a_i(g_in), .b_i(ops_i.unscale),
    .valid_o(unit_vld[2]), .result_o(g1)
  );
  assign sched_vld[2] = vld[T_G1];

  csd_fp_mul #(.FtzDaz(FtzDaz)) u_mul_wd_theta (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_GIN]), .a_i(ops_i.wd), .b_i(theta_gin),
    .valid_o(unit_vld[3]), .result_o(wd_theta)
  );
  assign sched_vld[3] = vld[T_G1];

  // ---- (2) g = l2 ? g1 + wd * theta : g1 --------------------------------------------------------
  logic [31:0] g2, g1_g, g;

  csd_fp_add #(.FtzDaz(FtzDaz)) u_add_g2 (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_G1]), .a_i(g1), .b_i(wd_theta),
    .sub_i(1'b0), .valid_o(unit_vld[4]), .result_o(g2)
  );
  assign sched_vld[4] = vld[T_G];

  csd_delay #(.Width(32), .Depth(T_G - T_G1)) u_d_g1 (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(g1), .data_o(g1_g)
  );
  assign g = sel_i.l2 ? g2 : g1_g;

  // ---- beta1 * m, omb1 * g, g * g; (4) sq -------------------------------------------------------
  logic [31:0] beta1_m, omb1_g, g_sq, g_p, sq;

  csd_fp_mul #(.FtzDaz(FtzDaz)) u_mul_beta1_m (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_G]), .a_i(ops_i.beta1), .b_i(m_g),
    .valid_o(unit_vld[5]), .result_o(beta1_m)
  );
  assign sched_vld[5] = vld[T_P];

  csd_fp_mul #(.FtzDaz(FtzDaz)) u_mul_omb1_g (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_G]), .a_i(ops_i.omb1), .b_i(g),
    .valid_o(unit_vld[6]), .result_o(omb1_g)
  );
  assign sched_vld[6] = vld[T_P];

  csd_fp_mul #(.FtzDaz(FtzDaz)) u_mul_g_sq (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_G]), .a_i(g), .b_i(g),
    .valid_o(unit_vld[7]), .result_o(g_sq)
  );
  assign sched_vld[7] = vld[T_P];

  csd_delay #(.Width(32), .Depth(T_P - T_G)) u_d_g_p (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(g), .data_o(g_p)
  );
  assign sq = sel_i.lion ? g_p : g_sq;

  // ---- (3) mom = mom_pass ? g : beta1 * m + omb1 * g --------------------------------------------
  logic [31:0] ema1, g_mom, mom;

  csd_fp_add #(.FtzDaz(FtzDaz)) u_add_ema1 (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_P]), .a_i(beta1_m), .b_i(omb1_g),
    .sub_i(1'b0), .valid_o(unit_vld[8]), .result_o(ema1)
  );
  assign sched_vld[8] = vld[T_MOM];

  csd_delay #(.Width(32), .Depth(T_MOM - T_P)) u_d_g_mom (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(g_p), .data_o(g_mom)
  );
  assign mom = sel_i.mom_pass ? g_mom : ema1;

  // ---- (5) acc = beta2 * (lion ? m : v) + omb2 * sq ---------------------------------------------
  logic [31:0] x_p, beta2_x, omb2_sq, acc;

  assign x_p = sel_i.lion ? m_p : v_p;

  csd_fp_mul #(.FtzDaz(FtzDaz)) u_mul_beta2_x (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_P]), .a_i(ops_i.beta2), .b_i(x_p),
    .valid_o(unit_vld[9]), .result_o(beta2_x)
  );
  assign sched_vld[9] = vld[T_Q];

  csd_fp_mul #(.FtzDaz(FtzDaz)) u_mul_omb2_sq (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_P]), .a_i(ops_i.omb2), .b_i(sq),
    .valid_o(unit_vld[10]), .result_o(omb2_sq)
  );
  assign sched_vld[10] = vld[T_Q];

  csd_fp_add #(.FtzDaz(FtzDaz)) u_add_acc (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_Q]), .a_i(beta2_x), .b_i(omb2_sq),
    .sub_i(1'b0), .valid_o(unit_vld[11]), .result_o(acc)
  );
  assign sched_vld[11] = vld[T_ACC];

  // ---- (6) den = sqrt(acc) * c2 + eps -----------------------------------------------------------
  logic [31:0] sqrt_acc, sqrt_c2, den;

  csd_fp_sqrt #(.FtzDaz(FtzDaz), .BitsPerStage(DIGIT_BITS_PER_STAGE)) u_sqrt (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_ACC]), .a_i(acc),
    .valid_o(unit_vld[12]), .result_o(sqrt_acc)
  );
  assign sched_vld[12] = vld[T_SR];

  csd_fp_mul #(.FtzDaz(FtzDaz)) u_mul_c2 (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_SR]), .a_i(sqrt_acc), .b_i(ops_i.c2),
    .valid_o(unit_vld[13]), .result_o(sqrt_c2)
  );
  assign sched_vld[13] = vld[T_SRC2];

  csd_fp_add #(.FtzDaz(FtzDaz)) u_add_eps (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_SRC2]), .a_i(sqrt_c2), .b_i(ops_i.eps),
    .sub_i(1'b0), .valid_o(unit_vld[14]), .result_o(den)
  );
  assign sched_vld[14] = vld[T_DEN];

  // ---- (7) q = (adagrad ? g : mom) / den --------------------------------------------------------
  logic [31:0] num, num_den, quo;

  assign num = sel_i.adagrad ? g_mom : mom;
  csd_delay #(.Width(32), .Depth(T_DEN - T_MOM)) u_d_num (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(num), .data_o(num_den)
  );

  csd_fp_div #(.FtzDaz(FtzDaz), .BitsPerStage(DIGIT_BITS_PER_STAGE)) u_div (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_DEN]), .a_i(num_den), .b_i(den),
    .valid_o(unit_vld[15]), .result_o(quo)
  );
  assign sched_vld[15] = vld[T_QUO];

  // ---- (8) u ------------------------------------------------------------------------------------
  logic [31:0] beta1_mom, g_bmom, nes, mom_nes, u_sgd, u_sgd_alt, sgn, sgn_alt, u_alt, u_alt_u;
  logic [31:0] quo_u, u;

  csd_fp_mul #(.FtzDaz(FtzDaz)) u_mul_beta1_mom (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_MOM]), .a_i(ops_i.beta1), .b_i(mom),
    .valid_o(unit_vld[16]), .result_o(beta1_mom)
  );
  assign sched_vld[16] = vld[T_BMOM];

  csd_delay #(.Width(32), .Depth(T_BMOM - T_MOM)) u_d_g_bmom (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(g_mom), .data_o(g_bmom)
  );

  csd_fp_add #(.FtzDaz(FtzDaz)) u_add_nesterov (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_BMOM]), .a_i(g_bmom), .b_i(beta1_mom),
    .sub_i(1'b0), .valid_o(unit_vld[17]), .result_o(nes)
  );
  assign sched_vld[17] = vld[T_NES];

  csd_delay #(.Width(32), .Depth(T_NES - T_MOM)) u_d_mom_nes (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(mom), .data_o(mom_nes)
  );
  assign u_sgd = sel_i.nesterov ? nes : mom_nes;

  csd_fp_sign #(.FtzDaz(FtzDaz)) u_sign (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_MOM]), .a_i(mom),
    .valid_o(unit_vld[18]), .result_o(sgn)
  );
  assign sched_vld[18] = vld[T_SIGN];

  csd_delay #(.Width(32), .Depth(T_ALT - T_NES)) u_d_u_sgd (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(u_sgd), .data_o(u_sgd_alt)
  );
  csd_delay #(.Width(32), .Depth(T_ALT - T_SIGN)) u_d_sgn (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(sgn), .data_o(sgn_alt)
  );
  assign u_alt = sel_i.sgd ? u_sgd_alt : sgn_alt;

  csd_delay #(.Width(32), .Depth(T_U - T_ALT)) u_d_u_alt (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(u_alt), .data_o(u_alt_u)
  );
  csd_delay #(.Width(32), .Depth(T_U - T_QUO)) u_d_quo (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(quo), .data_o(quo_u)
  );
  assign u = sel_i.use_q ? quo_u : u_alt_u;

  // ---- (9) theta' = theta * c1 - lr * u ---------------------------------------------------------
  logic [31:0] theta_c1, lr_u, theta_new;

  csd_fp_mul #(.FtzDaz(FtzDaz)) u_mul_theta_c1 (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_U]), .a_i(theta_u), .b_i(ops_i.c1),
    .valid_o(unit_vld[19]), .result_o(theta_c1)
  );
  assign sched_vld[19] = vld[T_LU];

  csd_fp_mul #(.FtzDaz(FtzDaz)) u_mul_lr_u (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_U]), .a_i(ops_i.lr), .b_i(u),
    .valid_o(unit_vld[20]), .result_o(lr_u)
  );
  assign sched_vld[20] = vld[T_LU];

  csd_fp_add #(.FtzDaz(FtzDaz)) u_sub_theta (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_LU]), .a_i(theta_c1), .b_i(lr_u),
    .sub_i(1'b1), .valid_o(unit_vld[21]), .result_o(theta_new)
  );
  assign sched_vld[21] = vld[T_TH];

  // ---- (10) Outputs, aligned at LANE_LATENCY ----------------------------------------------------
  logic [15:0] half_f16, half_bf16;
  logic [31:0] mom_acc, m_new;

  // fp16 has only nearest even (VCVTPS2PH); bf16 rounds stochastically in q8-bf16 (the stored
  // theta and its copy), with the element's Philox bits.
  csd_fp_cast #(
    .SrcFmt(csd_fp_pkg::FmtFp32), .DstFmt(csd_fp_pkg::FmtFp16), .QuietNan(1'b1)
  ) u_narrow_f16 (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_TH]), .a_i(theta_new),
    .rnd_mode_i(csd_fp_pkg::RndNearestEven), .rnd_bits_i('0),
    .valid_o(unit_vld[22]), .result_o(half_f16)
  );
  assign sched_vld[22] = vld[Lat];

  csd_fp_cast #(
    .SrcFmt(csd_fp_pkg::FmtFp32), .DstFmt(csd_fp_pkg::FmtBf16), .QuietNan(1'b1)
  ) u_narrow_bf16 (
    .clk_i(clk_i), .rst_ni(rst_ni), .valid_i(vld[T_TH]), .a_i(theta_new),
    .rnd_mode_i(stoch_i ? csd_fp_pkg::RndStochastic : csd_fp_pkg::RndNearestEven),
    .rnd_bits_i(rnd_bits_i), .valid_o(unit_vld[23]), .result_o(half_bf16)
  );
  assign sched_vld[23] = vld[Lat];

  assign half_o = (out_fmt_i == DT_BF16) ? half_bf16 : half_f16;

  csd_delay #(.Width(32), .Depth(Lat - T_TH)) u_d_theta_out (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(theta_new), .data_o(theta_o)
  );

  csd_delay #(.Width(32), .Depth(T_ACC - T_MOM)) u_d_mom_acc (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(mom), .data_o(mom_acc)
  );
  assign m_new = sel_i.lion ? acc : mom_acc;

  csd_delay #(.Width(32), .Depth(Lat - T_ACC)) u_d_m_out (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(m_new), .data_o(m_o)
  );
  csd_delay #(.Width(32), .Depth(Lat - T_ACC)) u_d_v_out (
    .clk_i(clk_i), .rst_ni(rst_ni), .data_i(acc), .data_o(v_o)
  );

  // ---- Schedule check ---------------------------------------------------------------------------
`ifndef SYNTHESIS
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      assert (unit_vld == sched_vld)
        else $error("csd_update_lane: fp unit latency differs from csd_update_pkg (units %b)",
                    unit_vld ^ sched_vld);
    end
  end
`else
  logic unused_vld;
  assign unused_vld = ^{unit_vld, sched_vld};
`endif

endmodule
