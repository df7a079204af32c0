// csd_update_decode: the mode word and scalar registers of one launch, decoded into what the
// updater needs: validity, stream formats, which state arrays are used, and the datapath's
// operands and selects. Combinational; the core registers the result once per launch.
//
// The rules are those of DecodeMode, UsesM/UsesV, IsQ8 (hls/include/csdkit/hls/mode.h) and
// MakeRuleCtl (rules.h), plus one of this build: the RTL implements ONE fp policy, chosen at
// build time (FtzDaz), so a mode word whose ftz bit differs from FtzDaz is a bad mode too
// (status error 0x01, nothing written) rather than a launch computed under the wrong policy.

`default_nettype none

module csd_update_decode #(
  /// The build's fp policy: 1 FTZ/DAZ, 0 IEEE. Launches must set mode bit 8 to match.
  parameter bit FtzDaz = 1'b0
) (
  /// The mode word.
  input  wire logic [31:0]               mode_i,
  /// The scalar registers as the host wrote them.
  input  wire csd_update_pkg::operands_t scalars_i,
  /// The mode word is valid for this build.
  output logic                           ok_o,
  /// The gradient is a block-sparse stream.
  output logic                           sparse_o,
  /// Gradient data type (csd_update_pkg::DT_*).
  output logic      [1:0]                grad_fmt_o,
  /// Low-precision copy data type (DT_FP16, DT_BF16, or DT_FP32 for none).
  output logic      [1:0]                out_fmt_o,
  /// The optimizer reads and writes m.
  output logic                           use_m_o,
  /// The optimizer reads and writes v.
  output logic                           use_v_o,
  /// A low-precision copy is written.
  output logic                           use_out_o,
  /// q8 or q8-bf16: the moments are 8-bit codes with an absmax per block of 256.
  output logic                           q8_o,
  /// q8-bf16: theta is bf16, rounded stochastically when written.
  output logic                           bf16_o,
  /// The datapath operands, the optimizer's fixed constants substituted.
  output csd_update_pkg::operands_t      operands_o,
  /// The datapath selects.
  output csd_update_pkg::sel_t           sel_o
);
  import csd_update_pkg::*;

  logic [2:0] opt;
  logic [1:0] grad_fmt, out_fmt, state;
  logic       l2, momentum, nesterov, first, ftz;
  logic       is_adamw, is_adam, is_sgd, is_adagrad, is_lion;
  logic       known_ok, l2_ok, sgd_flags_ok, nesterov_ok, state_ok;

  assign opt = mode_i[2:0];
  assign grad_fmt = mode_i[4:3];
  assign out_fmt = mode_i[6:5];
  assign ftz = mode_i[MODE_FTZ];
  assign l2 = mode_i[MODE_L2];
  assign momentum = mode_i[MODE_MOMENTUM];
  assign nesterov = mode_i[MODE_NESTEROV];
  assign first = mode_i[MODE_FIRST];
  assign state = mode_i[MODE_STATE+:2];

  assign is_adamw = opt == OPT_ADAMW;
  assign is_adam = opt == OPT_ADAM;
  assign is_sgd = opt == OPT_SGD;
  assign is_adagrad = opt == OPT_ADAGRAD;
  assign is_lion = opt == OPT_LION;

  // DecodeMode: no unknown bits, a known optimizer and dtypes, and only the flags the
  // optimizer has (L2: Adam, SGD, Adagrad; momentum/Nesterov/first: SGD; Nesterov needs
  // momentum), a known state format, and no fp16 copy of bf16 weights (the copy of a q8-bf16
  // store is theta itself). Then this build's policy.
  assign known_ok = (mode_i[31:MODE_KNOWN_BITS] == '0) && (opt <= OPT_LION) &&
                    (grad_fmt != 2'd3) && (out_fmt != 2'd3);
  assign l2_ok = !l2 || is_adam || is_sgd || is_adagrad;
  assign sgd_flags_ok = is_sgd || !(momentum || nesterov || first);
  assign nesterov_ok = !nesterov || momentum;
  assign state_ok = (state != 2'd3) && !(state == ST_Q8_BF16 && out_fmt == DT_FP16);
  assign ok_o = known_ok && l2_ok && sgd_flags_ok && nesterov_ok && state_ok &&
                (ftz == FtzDaz);

  assign sparse_o = mode_i[MODE_SPARSE];
  assign grad_fmt_o = grad_fmt;
  assign out_fmt_o = out_fmt;
  assign use_m_o = is_adamw || is_adam || is_lion || (is_sgd && momentum);
  assign use_v_o = is_adamw || is_adam || is_adagrad;
  assign use_out_o = out_fmt != DT_FP32;
  assign q8_o = state == ST_Q8 || state == ST_Q8_BF16;
  assign bf16_o = state == ST_Q8_BF16;

  // MakeRuleCtl: operands the optimizer does not have are forced so that the unified graph
  // reduces to the optimizer's textbook form bit for bit.
  always_comb begin
    operands_o = scalars_i;
    if (is_adagrad) begin
      operands_o.beta2 = FP32_ONE;
      operands_o.omb2 = FP32_ONE;
    end
    if (!(is_adamw || is_lion)) operands_o.c1 = FP32_ONE;
    if (!(is_adamw || is_adam)) operands_o.c2 = FP32_ONE;
  end

  assign sel_o.l2 = l2;
  assign sel_o.mom_pass = is_sgd && (first || !momentum);
  assign sel_o.lion = is_lion;
  assign sel_o.adagrad = is_adagrad;
  assign sel_o.use_q = is_adamw || is_adam || is_adagrad;
  assign sel_o.sgd = is_sgd;
  assign sel_o.nesterov = nesterov;

endmodule
