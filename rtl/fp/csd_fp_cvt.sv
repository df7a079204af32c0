// csd_fp_cvt: the datapath of the format conversions (fp32 <-> fp16, fp32 <-> bf16), built
// from the shared classify and round stages. The conversion units csd_fp_<src>_to_<dst> wrap
// it with their valid pipeline.
//
// Exact integer functions of the numeric contract, independent of the FTZ/DAZ policy:
//   * narrowing (fp32 -> fp16/bf16): round to nearest even at the destination precision,
//     subnormal destination values produced (gradual underflow), overflow to +-inf (fp16:
//     |x| >= 65520), zeros and infinities keep their sign: exactly VCVTPS2PH for fp16;
//   * widening (fp16/bf16 -> fp32): exact (subnormal halves become normal binary32 values);
//   * NaN: the sign and the top payload bits are kept; QuietNan sets the quiet bit (F16C and
//     the contract's fp32 -> bf16), otherwise the payload is moved unchanged (bf16 -> fp32,
//     which the contract defines as the bits shifted left by 16).
//
// Latency: CLASSIFY_LATENCY + ROUND_LATENCY cycles; one conversion per cycle; no reset.

`default_nettype none

module csd_fp_cvt #(
  /// Format of the operand.
  parameter csd_fp_pkg::fmt_e SrcFmt = csd_fp_pkg::FmtFp32,
  /// Format of the result.
  parameter csd_fp_pkg::fmt_e DstFmt = csd_fp_pkg::FmtFp16,
  /// 1: NaN results get the quiet bit; 0: NaN payloads are moved unchanged.
  parameter bit QuietNan = 1'b1,
  /// Operand width (derived from SrcFmt).
  localparam int unsigned SrcWidth = csd_fp_pkg::fmt_width(SrcFmt),
  /// Result width (derived from DstFmt).
  localparam int unsigned DstWidth = csd_fp_pkg::fmt_width(DstFmt)
) (
  /// Clock.
  input  wire logic                clk_i,
  /// Operand.
  input  wire logic [SrcWidth-1:0] a_i,
  /// Converted value, CLASSIFY_LATENCY + ROUND_LATENCY cycles after a_i.
  output logic [DstWidth-1:0]      result_o
);
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

  csd_fp_round #(
    .DstFmt(DstFmt),
    .FtzDaz(1'b0)
  ) u_round (
    .clk_i   (clk_i),
    .in_i    (round_in),
    .result_o(result_o)
  );

endmodule
