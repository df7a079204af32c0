// csd_fp_cast_tb: csd_fp_cast with its formats given as numbers, the top of the cast models that
// tb_csd_fp_cast.cpp drives (one Verilated model per format pair, chosen with -G).
//
// Only because Verilator 5.006 reads a -G value as a plain number and refuses it for an
// enum-typed parameter (ENUMVALUE): this top takes SrcFmt and DstFmt as int unsigned and casts
// them to csd_fp_pkg::fmt_e. Ports and behaviour are the unit's own. The bench takes the
// latency from csd_fp_pkg::CVT_LATENCY, which defines the unit's Latency (public through
// tb_public.vlt as <prefix>_csd_fp_pkg::CVT_LATENCY): Verilator names the class of a
// parameterised submodule after its parameter values (csd_fp_cast__Sz1_Dz2_Qz3), so the
// unit's own localparam has no fixed C++ name here.

`default_nettype none

module csd_fp_cast_tb #(
  /// Format of the operand, the value of a csd_fp_pkg::fmt_e (0 fp32, 1 fp16, 2 bf16).
  parameter int unsigned SrcFmt = 0,
  /// Format of the result, the value of a csd_fp_pkg::fmt_e.
  parameter int unsigned DstFmt = 2,
  /// csd_fp_cast's QuietNan.
  parameter bit QuietNan = 1'b1,
  /// Operand width.
  localparam int unsigned SrcWidth = csd_fp_pkg::fmt_width(csd_fp_pkg::fmt_e'(SrcFmt)),
  /// Result width.
  localparam int unsigned DstWidth = csd_fp_pkg::fmt_width(csd_fp_pkg::fmt_e'(DstFmt))
) (
  /// Clock.
  input  wire logic                            clk_i,
  /// Synchronous reset, active low.
  input  wire logic                            rst_ni,
  /// Operand, mode and random bits are valid.
  input  wire logic                            valid_i,
  /// Operand.
  input  wire logic [SrcWidth-1:0]             a_i,
  /// Rounding mode (csd_fp_pkg::rnd_e).
  input  wire csd_fp_pkg::rnd_e                rnd_mode_i,
  /// Random bits of a stochastic rounding.
  input  wire logic [csd_fp_pkg::RND_BITS-1:0] rnd_bits_i,
  /// Result valid.
  output logic                                 valid_o,
  /// Result.
  output logic [DstWidth-1:0]                  result_o
);
  csd_fp_cast #(
    .SrcFmt  (csd_fp_pkg::fmt_e'(SrcFmt)),
    .DstFmt  (csd_fp_pkg::fmt_e'(DstFmt)),
    .QuietNan(QuietNan)
  ) u_cast (
    .clk_i     (clk_i),
    .rst_ni    (rst_ni),
    .valid_i   (valid_i),
    .a_i       (a_i),
    .rnd_mode_i(rnd_mode_i),
    .rnd_bits_i(rnd_bits_i),
    .valid_o   (valid_o),
    .result_o  (result_o)
  );

endmodule
