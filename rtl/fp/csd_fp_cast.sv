// csd_fp_cast: conversion between the interchange formats (fp32 <-> fp16, fp32 <-> bf16), one
// result per clock, the rounding mode chosen per operation (as cvfpu's fpnew_cast_multi does;
// one unit for every format pair instead of one module per pair).
//
// Exact integer functions of the numeric contract, independent of the FTZ/DAZ policy (the unit
// has no FtzDaz parameter):
//   * widening (fp16/bf16 -> fp32): exact (subnormal halves become normal binary32 values);
//     rnd_mode_i and rnd_bits_i are ignored;
//   * narrowing, rnd_mode_i = RndNearestEven: round to nearest even at the destination
//     precision, subnormal destination values produced (gradual underflow), overflow to +-inf
//     (fp16: |x| >= 65520), zeros and infinities keep their sign: exactly VCVTPS2PH (imm 0) for
//     fp32 -> fp16; rnd_bits_i is ignored;
//   * NaN, nearest even: the sign and the top payload bits are kept; QuietNan sets the quiet
//     bit (F16C, and the contract's fp32 -> bf16), otherwise the payload is moved unchanged
//     (bf16 -> fp32, which the contract defines as the bits shifted left by 16);
//   * fp32 -> bf16, rnd_mode_i = RndStochastic (docs/state-formats.md, "theta in bf16 with
//     stochastic rounding"): b = bits(a_i); a NaN gives 0x7fc0 whatever its sign and payload;
//     otherwise the result is (b + R) >> 16, an unsigned 32-bit add of R = rnd_bits_i (no carry
//     out of bit 31 is possible for a non-NaN b). A bf16 value is unchanged; any other value
//     rounds away from zero with probability (low 16 bits of b) / 2^16, up to +-inf above the
//     largest finite bf16, through the subnormal range like any other; no FTZ. Bit for bit
//     RoundBf16Stochastic of hls/include/csdkit/hls/state_q8.h.
//   * Stochastic rounding is defined for fp32 -> bf16 only. For any other narrowing pair
//     (fp32 -> fp16) rnd_mode_i must be RndNearestEven with every valid_i (asserted in
//     simulation); the unit rounds to nearest even whatever rnd_mode_i says.
//
// Pipeline (Latency = csd_fp_pkg::CVT_LATENCY = 3 in both modes, so results align whatever the
// mode; one conversion per cycle, the mode may change every cycle):
//   a_i -> csd_fp_classify (SrcFmt) -> csd_fp_round (DstFmt) ------------> nearest even --+
//   a_i, rnd_bits_i -> NaN check, 32-bit add -> csd_delay (Latency) -----> stochastic ----+-> mux
//   rnd_mode_i ------------------------------> (same csd_delay) --------> select ---------'
//   valid_i -> csd_valid_pipe (Depth = Latency) ------------------------------------------> valid_o
// The stochastic path and the output mux exist only for fp32 -> bf16 (generate); the mux is
// the one gate level after the last registers.

`default_nettype none

module csd_fp_cast #(
  /// Format of the operand.
  parameter csd_fp_pkg::fmt_e SrcFmt = csd_fp_pkg::FmtFp32,
  /// Format of the result.
  parameter csd_fp_pkg::fmt_e DstFmt = csd_fp_pkg::FmtBf16,
  /// 1: NaN results of nearest-even casts get the quiet bit; 0: NaN payloads are moved
  /// unchanged (bf16 -> fp32). Stochastic rounding returns 0x7fc0 for every NaN either way.
  parameter bit QuietNan = 1'b1,
  /// Operand width (derived from SrcFmt).
  localparam int unsigned SrcWidth = csd_fp_pkg::fmt_width(SrcFmt),
  /// Result width (derived from DstFmt).
  localparam int unsigned DstWidth = csd_fp_pkg::fmt_width(DstFmt)
) (
  /// Clock.
  input  wire logic                              clk_i,
  /// Synchronous reset, active low (clears the valid pipeline only).
  input  wire logic                              rst_ni,
  /// Operand, mode and random bits below are valid: start a conversion.
  input  wire logic                              valid_i,
  /// Operand, in SrcFmt.
  input  wire logic [SrcWidth-1:0]               a_i,
  /// Rounding of this operation: RndNearestEven, or RndStochastic (fp32 -> bf16 only).
  /// Ignored by widening casts.
  input  wire csd_fp_pkg::rnd_e                  rnd_mode_i,
  /// The random number R of a stochastic rounding; ignored otherwise.
  input  wire logic [csd_fp_pkg::RND_BITS-1:0]   rnd_bits_i,
  /// result_o holds the result of the conversion started Latency cycles earlier.
  output logic                                   valid_o,
  /// Result, in DstFmt.
  output logic [DstWidth-1:0]                    result_o
);
  /// Cycles from valid_i to valid_o, in both rounding modes.
  localparam int unsigned Latency = csd_fp_pkg::CVT_LATENCY;

  csd_valid_pipe #(
    .Depth(Latency)
  ) u_valid_pipe (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(valid_i),
    .valid_o(valid_o)
  );

  // ---- Nearest even: the shared classify and round stages -------------------------------------
  csd_fp_pkg::fp_unpacked_t a;

  // Conversions never apply the policy: DAZ off here, FTZ off in the round stage.
  csd_fp_classify #(
    .SrcFmt     (SrcFmt),
    .FtzDaz     (1'b0),
    .NumOperands(1)
  ) u_classify (
    .clk_i     (clk_i),
    .operands_i(a_i),
    .unpacked_o(a)
  );

  // The value passes unchanged to the round stage, which rounds it at the destination's
  // precision and range. A NaN's fraction (sig below the hidden bit) is its payload.
  csd_fp_pkg::fp_round_in_t round_in;

  always_comb begin
    round_in.sign = a.sign;
    round_in.exp = a.exp;
    round_in.sig = {a.sig, 2'b00};
    round_in.payload = a.sig[csd_fp_pkg::FRAC_BITS-1:0] |
                       (QuietNan ? csd_fp_pkg::QUIET_BIT : '0);
    unique case (a.cls)
      csd_fp_pkg::ClassQnan, csd_fp_pkg::ClassSnan: round_in.kind = csd_fp_pkg::ResNan;
      csd_fp_pkg::ClassInf:                         round_in.kind = csd_fp_pkg::ResInf;
      csd_fp_pkg::ClassZero:                        round_in.kind = csd_fp_pkg::ResZero;
      default:                                      round_in.kind = csd_fp_pkg::ResFinite;
    endcase
  end

  logic [DstWidth-1:0] nearest;

  csd_fp_round #(
    .DstFmt(DstFmt),
    .FtzDaz(1'b0)
  ) u_round (
    .clk_i   (clk_i),
    .in_i    (round_in),
    .result_o(nearest)
  );

  // ---- Stochastic rounding (fp32 -> bf16) and the mode select ---------------------------------
  if (SrcFmt == csd_fp_pkg::FmtFp32 && DstFmt == csd_fp_pkg::FmtBf16) begin : g_stochastic
    logic                is_nan;
    logic [31:0]         sum;
    logic [DstWidth:0]   sto_d, sto_q;  // {stochastic selected, stochastic result}

    // The contract's integer definition as it stands: b + R in 32 bits, keep the top half. Below
    // NaN the top half is at most 0x7f80 / 0xff80 (infinity), so the add never wraps; a carry
    // out of the low half rounds the magnitude up, into the next binade, from the largest
    // subnormal to the smallest normal and from the largest finite value to infinity alike.
    assign is_nan = a_i[30:0] > 31'h7f80_0000;
    assign sum = a_i + 32'(rnd_bits_i);
    assign sto_d = {rnd_mode_i == csd_fp_pkg::RndStochastic,
                    is_nan ? csd_fp_pkg::BF16_CANONICAL_NAN : sum[31:16]};

    // Result and mode travel with the operation, so each operation is rounded by its own mode.
    csd_delay #(
      .Width(DstWidth + 1),
      .Depth(Latency)
    ) u_d_stochastic (
      .clk_i (clk_i),
      .rst_ni(rst_ni),
      .data_i(sto_d),
      .data_o(sto_q)
    );

    assign result_o = sto_q[DstWidth] ? sto_q[DstWidth-1:0] : nearest;

    // The low half of the sum only produces the carry.
    logic unused_sum;
    assign unused_sum = ^sum[15:0];
  end else begin : g_nearest
    assign result_o = nearest;

    logic unused_rnd;
    assign unused_rnd = ^{rnd_mode_i, rnd_bits_i};

`ifndef SYNTHESIS
    // A narrowing cast other than fp32 -> bf16 has no stochastic rounding (the contract defines
    // none): it rounds to nearest even, and asking for anything else is a caller's error.
    if (!csd_fp_pkg::fmt_cast_exact(SrcFmt, DstFmt)) begin : g_check_mode
      a_nearest_only: assert property (@(posedge clk_i) disable iff (!rst_ni)
                                       valid_i |-> rnd_mode_i == csd_fp_pkg::RndNearestEven)
        else $error("csd_fp_cast: rounding mode %0d for a cast that has only nearest even",
                    rnd_mode_i);
    end
`endif
  end

endmodule
