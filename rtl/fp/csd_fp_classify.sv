// csd_fp_classify: the shared unpack-and-classify stage of every unit in rtl/fp/.
//
// Splits each operand into sign, unbiased exponent and significand, classifies it (zero,
// subnormal, normal, infinity, quiet or signalling NaN) and normalises subnormals, so that the
// operations behind it only ever see a significand in [2^23, 2^24) and a wide signed exponent.
// With FtzDaz set, a subnormal operand is read as zero of the same sign (DAZ).
//
// Latency: csd_fp_pkg::CLASSIFY_LATENCY (1) cycle; one operand set per cycle. Datapath only:
// the instantiating unit carries the valid bit, so there is no reset.

`default_nettype none

module csd_fp_classify #(
  /// Format of the operands.
  parameter csd_fp_pkg::fmt_e SrcFmt = csd_fp_pkg::FmtFp32,
  /// 1: read subnormal operands as zero of the same sign (DAZ); 0: IEEE.
  parameter bit FtzDaz = 1'b0,
  /// Number of operands classified in parallel.
  parameter int unsigned NumOperands = 1,
  /// Width of one operand (derived from SrcFmt).
  localparam int unsigned Width = csd_fp_pkg::fmt_width(SrcFmt)
) (
  /// Clock.
  input  wire logic                                  clk_i,
  /// Operands, one format word each.
  input  wire logic [NumOperands-1:0][Width-1:0]     operands_i,
  /// Unpacked operands, CLASSIFY_LATENCY cycles after operands_i.
  output csd_fp_pkg::fp_unpacked_t [NumOperands-1:0] unpacked_o
);
  localparam int unsigned ExpBits = csd_fp_pkg::fmt_exp_bits(SrcFmt);
  localparam int unsigned ManBits = csd_fp_pkg::fmt_man_bits(SrcFmt);
  localparam int unsigned Bias = csd_fp_pkg::fmt_bias(SrcFmt);

  csd_fp_pkg::fp_unpacked_t [NumOperands-1:0] unpacked_d, unpacked_q;

  for (genvar i = 0; i < NumOperands; i++) begin : g_operand
    logic                             sign;
    logic [ExpBits-1:0]               exp_field;
    logic [csd_fp_pkg::FRAC_BITS-1:0] frac;  // fraction left-aligned to binary32 width
    logic [5:0]                       lz;
    logic [csd_fp_pkg::SIG_BITS-1:0]  sub_sig;
    csd_fp_pkg::fp_unpacked_t         op_d;

    assign sign = operands_i[i][Width-1];
    assign exp_field = operands_i[i][Width-2 -: ExpBits];
    if (ManBits < csd_fp_pkg::FRAC_BITS) begin : g_pad
      assign frac = {operands_i[i][ManBits-1:0], {(csd_fp_pkg::FRAC_BITS - ManBits){1'b0}}};
    end else begin : g_nopad
      assign frac = operands_i[i][ManBits-1:0];
    end

    // A subnormal f * 2^(1-bias-M) with its leading one lz places below the top of the
    // fraction equals 1.xxx * 2^(-bias-lz): shift the leading one into the hidden-bit position.
    // The padding ones bound lz to 23 (reached only for a zero fraction, which is not used).
    assign lz = csd_fp_pkg::lzc32({frac, 9'h1ff});
    assign sub_sig = {frac, 1'b0} << lz;

    always_comb begin
      op_d.sign = sign;
      op_d.exp = csd_fp_pkg::uexp_t'(int'(exp_field) - int'(Bias));
      op_d.sig = {1'b1, frac};
      if (exp_field == '1) begin
        // Infinity, or a NaN: quiet when the top fraction bit is set.
        if (frac == '0) begin
          op_d.cls = csd_fp_pkg::ClassInf;
        end else if (frac[csd_fp_pkg::FRAC_BITS-1]) begin
          op_d.cls = csd_fp_pkg::ClassQnan;
        end else begin
          op_d.cls = csd_fp_pkg::ClassSnan;
        end
      end else if (exp_field != '0) begin
        op_d.cls = csd_fp_pkg::ClassNormal;
      end else if (frac == '0 || FtzDaz) begin
        // Zero, or a subnormal read as zero (DAZ): sign kept, value fields cleared.
        op_d.cls = csd_fp_pkg::ClassZero;
        op_d.exp = '0;
        op_d.sig = '0;
      end else begin
        op_d.cls = csd_fp_pkg::ClassSubnormal;
        op_d.exp = csd_fp_pkg::uexp_t'(-int'(Bias) - int'(lz));
        op_d.sig = sub_sig;
      end
    end

    assign unpacked_d[i] = op_d;
  end

  always_ff @(posedge clk_i) begin
    unpacked_q <= unpacked_d;
  end

  assign unpacked_o = unpacked_q;

endmodule
