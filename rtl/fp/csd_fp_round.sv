// csd_fp_round: the shared round-and-pack stage of every unit in rtl/fp/.
//
// Takes an unrounded result (csd_fp_pkg::fp_round_in_t) and produces the format word:
//   * finite values are rounded to nearest, ties to even, at the format's precision; values
//     below the normal range are first shifted into the subnormal position (gradual underflow,
//     the shifted-out bits kept as sticky), so the result is rounded once, at its final place;
//   * a value whose rounded magnitude reaches 2^(emax+1) becomes infinity (the exponent check
//     before rounding catches the rest; the rounding carry of the largest finite value runs
//     into the infinity encoding by itself);
//   * with FtzDaz set, a result that is subnormal AFTER rounding is replaced by zero of the
//     same sign ("flush after rounding": a value just below 2^-126 that rounds up to 2^-126
//     is kept);
//   * zero, infinity and NaN results are packed as the operation decided them (NaN: its sign
//     and the top payload bits; the operation supplies the canonical NaN or a kept payload).
//
// Latency: csd_fp_pkg::ROUND_LATENCY (2) cycles; one result per cycle. Datapath only: the
// instantiating unit carries the valid bit, so there is no reset.

`default_nettype none

module csd_fp_round #(
  /// Format of the result.
  parameter csd_fp_pkg::fmt_e DstFmt = csd_fp_pkg::FmtFp32,
  /// 1: flush subnormal results (after rounding) to zero of the same sign; 0: IEEE.
  parameter bit FtzDaz = 1'b0,
  /// Width of the result word (derived from DstFmt).
  localparam int unsigned Width = csd_fp_pkg::fmt_width(DstFmt)
) (
  /// Clock.
  input  wire logic                      clk_i,
  /// Unrounded result; for ResFinite, in_i.sig must be normalised (top bit set).
  input  wire csd_fp_pkg::fp_round_in_t  in_i,
  /// The result word, ROUND_LATENCY cycles after in_i.
  output logic [Width-1:0]               result_o
);
  localparam int unsigned ExpBits = csd_fp_pkg::fmt_exp_bits(DstFmt);
  localparam int unsigned ManBits = csd_fp_pkg::fmt_man_bits(DstFmt);
  localparam int unsigned Bias = csd_fp_pkg::fmt_bias(DstFmt);
  localparam int unsigned RSigBits = csd_fp_pkg::RSIG_BITS;
  localparam int unsigned BExpBits = csd_fp_pkg::UEXP_BITS + 1;  // biased exponent, signed

  // ---- Stage 1: biased exponent, overflow, subnormal shift; specials encoded ------------------
  logic signed [BExpBits-1:0] biased;
  logic                       tiny, overflow;
  logic [5:0]                 denorm_shift;
  logic [RSigBits-1:0]        sig_shifted;
  logic [31:0]                shift_out;

  // Biased exponent of the leading bit. Below 1 the value is subnormal (or underflows) in the
  // destination format: shift right by 1 - biased so the leading bit lands at the place of
  // 2^(1-bias) and encode exponent field 0; the hidden bit then reads 0 and a rounding carry
  // into it produces the smallest normal, correctly encoded. Shifts of 32 or more keep only
  // the sticky bit (the value is below a quarter of the smallest subnormal).
  assign biased = BExpBits'(in_i.exp) + BExpBits'(Bias);
  assign tiny = biased < BExpBits'(1);
  assign overflow = biased >= BExpBits'((1 << ExpBits) - 1);
  always_comb begin
    if (!tiny) begin
      denorm_shift = 6'd0;
    end else if (biased < BExpBits'(-30)) begin
      denorm_shift = 6'd32;
    end else begin
      denorm_shift = 6'(BExpBits'(1) - biased);
    end
  end
  assign shift_out = csd_fp_pkg::shift_right_sticky32(32'(in_i.sig), denorm_shift);
  assign sig_shifted = shift_out[RSigBits-1:0];

  // What stage 2 rounds: the truncated encoding {exponent field, fraction}, plus the guard bit
  // (the first dropped bit) and the sticky bit (OR of all the others). Special results get
  // their final encoding here with guard = 0, so rounding and flushing leave them alone.
  logic                         sign_d, sign_q;
  logic [ExpBits+ManBits-1:0]   trunc_d, trunc_q;
  logic                         guard_d, guard_q;
  logic                         sticky_d, sticky_q;

  always_comb begin
    sign_d = in_i.sign;
    guard_d = 1'b0;
    sticky_d = 1'b0;
    unique case (in_i.kind)
      csd_fp_pkg::ResZero: begin
        trunc_d = '0;
      end
      csd_fp_pkg::ResInf: begin
        trunc_d = {{ExpBits{1'b1}}, {ManBits{1'b0}}};
      end
      csd_fp_pkg::ResNan: begin
        trunc_d = {{ExpBits{1'b1}}, in_i.payload[csd_fp_pkg::FRAC_BITS-1 -: ManBits]};
      end
      default: begin  // ResFinite
        if (overflow) begin
          trunc_d = {{ExpBits{1'b1}}, {ManBits{1'b0}}};
        end else begin
          trunc_d = {tiny ? {ExpBits{1'b0}} : biased[ExpBits-1:0],
                     sig_shifted[RSigBits-2 -: ManBits]};
          guard_d = sig_shifted[RSigBits-2-ManBits];
          sticky_d = |sig_shifted[RSigBits-3-ManBits:0];
        end
      end
    endcase
  end

  // The hidden bit is implied by the exponent field (set for a normal value, cleared by the
  // subnormal shift), so it is not carried.
  logic unused_hidden;
  assign unused_hidden = sig_shifted[RSigBits-1] ^ ^shift_out[31:RSigBits];

  always_ff @(posedge clk_i) begin
    sign_q <= sign_d;
    trunc_q <= trunc_d;
    guard_q <= guard_d;
    sticky_q <= sticky_d;
  end

  // ---- Stage 2: round to nearest even, flush, pack --------------------------------------------
  logic                       round_up;
  logic [ExpBits+ManBits-1:0] rounded, flushed;
  logic [Width-1:0]           result_d, result_q;

  // Round up when more than half an ulp was dropped, or exactly half and the kept part is odd.
  // The increment of the packed {exponent, fraction} carries from the fraction into the
  // exponent: into the next binade, from the largest subnormal to the smallest normal, and from
  // the largest finite value to infinity, each correctly encoded.
  assign round_up = guard_q & (sticky_q | trunc_q[0]);
  assign rounded = trunc_q + (ExpBits + ManBits)'(round_up);

  // FTZ: a rounded result with exponent field 0 is subnormal (or zero): keep only the sign.
  if (FtzDaz) begin : g_ftz
    assign flushed = (rounded[ExpBits+ManBits-1 -: ExpBits] == '0) ? '0 : rounded;
  end else begin : g_ieee
    assign flushed = rounded;
  end

  assign result_d = {sign_q, flushed};

  always_ff @(posedge clk_i) begin
    result_q <= result_d;
  end

  assign result_o = result_q;

endmodule
