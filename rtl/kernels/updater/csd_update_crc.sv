// csd_update_crc: zlib's CRC-32 (hls/include/csdkit/hls/crc.h) of a stream of memory words, one
// word of Lanes x 32 bits per cycle, for the status word's integrity lanes (mode.h).
//
// The CRC is the reflected polynomial 0xEDB88320, register initialised to 0xFFFFFFFF, the final
// value complemented; 32-bit lane j of a word (bits [32 j +: 32]) is one little-endian word of
// the array, lane 0 first, exactly as Crc32Beat advances the register.
//
// Why a flat XOR network: one step of the register over a 32-bit word w is
// step(r, w) = F (r ^ w), with F the 32 x 32 GF(2) matrix of 32 shift-and-conditional-xor bit
// steps (Crc32WordBitwise). Chaining the Lanes words of a beat gives
//   r' = F^Lanes r  ^  XOR_l F^(Lanes - l) w[l],
// so every bit of r' is the parity of (r & mask) ^ (word & mask): one XOR tree of at most
// 32 + 32 Lanes inputs per bit, the masks computed at elaboration from the polynomial
// (crc_pow_cols below). No lane-by-lane chain, no ROM.
//
// The last word of an array of n elements holds only n mod Lanes of them (when that is not 0).
// Its lanes past n are fed as zeros, which advances the register over (Lanes - n_last) extra zero
// words: r_full = F^(Lanes - n_last) r_true. F is invertible (the polynomial has its x^0 term),
// so the true register is recovered once, at the end, by F^-(Lanes - n_last), a second matrix
// chosen by n_last (crc_o applies it; data is never corrected mid-stream because the partial
// word is always the last one). This keeps the per-beat network the same for every beat.
//
// Timing: the per-beat network is 32 parity trees of <= 544 inputs (depth ~ log6 544 = 4 LUT
// levels at Lanes = 16) fed from registers and feeding the register; crc_o's correction is a
// 32-input parity per bit of a register, read only by the status word.

`default_nettype none

module csd_update_crc #(
  /// binary32 lanes per memory word (1..16).
  parameter int unsigned Lanes = 16,
  /// Bits per memory word (derived).
  localparam int unsigned WordBits = Lanes * 32,
  /// Bits of a lane count 0..Lanes (derived).
  localparam int unsigned CntBits = $clog2(Lanes + 1)
) (
  /// Clock.
  input  wire logic                clk_i,
  /// Synchronous reset, active low: the register holds no stream (crc_o reads 0).
  input  wire logic                rst_ni,
  /// Start a new stream: the register becomes 0xFFFFFFFF (takes precedence over valid_i).
  input  wire logic                clear_i,
  /// A word of the stream.
  input  wire logic                valid_i,
  /// The word; its lanes at or past `lanes_i` must already be zero (mask_lanes below).
  input  wire logic [WordBits-1:0] data_i,
  /// Lanes of the LAST word of the stream that belong to it (1..Lanes); static per stream.
  input  wire logic [CntBits-1:0]  last_lanes_i,
  /// The CRC of the words streamed since clear_i (zlib's crc32() of their bytes; the CRC of no
  /// words is 0 only through the caller: it reports 0 for n = 0).
  output logic [31:0]              crc_o
);

  localparam logic [31:0] POLY = 32'hedb8_8320;

  /// One bit step of the reflected CRC register.
  function automatic logic [31:0] bit_step(logic [31:0] c);
    return (c >> 1) ^ (POLY & {32{c[0]}});
  endfunction

  /// The inverse of bit_step: POLY has bit 31 set and (c >> 1) has not, so bit 31 of the result
  /// tells whether the polynomial was added.
  function automatic logic [31:0] bit_unstep(logic [31:0] c);
    return {c[30:0] ^ (POLY[30:0] & {31{c[31]}}), c[31]};
  endfunction

  /// Columns of F^k for k = 0..Lanes: cols[k][j] = F^k e_j (F = 32 bit steps).
  typedef logic [Lanes:0][31:0][31:0] mats_t;

  function automatic mats_t crc_pow_cols(bit inverse);
    mats_t m;
    for (int unsigned j = 0; j < 32; j++) m[0][j] = 32'd1 << j;
    for (int unsigned k = 1; k <= Lanes; k++) begin
      for (int unsigned j = 0; j < 32; j++) begin
        logic [31:0] c;
        c = m[k-1][j];
        for (int unsigned b = 0; b < 32; b++) c = inverse ? bit_unstep(c) : bit_step(c);
        m[k][j] = c;
      end
    end
    return m;
  endfunction

  /// Row masks of F^k (bit j of rows[k][i] = bit i of column j): output bit i is the parity of
  /// (input & rows[k][i]).
  function automatic mats_t crc_pow_rows(bit inverse);
    mats_t c, r;
    c = crc_pow_cols(inverse);
    for (int unsigned k = 0; k <= Lanes; k++) begin
      for (int unsigned i = 0; i < 32; i++) begin
        for (int unsigned j = 0; j < 32; j++) r[k][i][j] = c[k][j][i];
      end
    end
    return r;
  endfunction

  localparam mats_t FWD = crc_pow_rows(1'b0);
  localparam mats_t INV = crc_pow_rows(1'b1);

  // ---- Per-beat network: r' = F^Lanes r ^ XOR_l F^(Lanes - l) w[l] ------------------------------
  // The data mask of output bit i is lane l's row i of F^(Lanes - l), lanes side by side.
  logic [31:0] reg_q, reg_d, next;

  for (genvar i = 0; i < 32; i++) begin : g_bit
    logic [WordBits-1:0] dmask;
    for (genvar l = 0; l < Lanes; l++) begin : g_lane
      assign dmask[32 * l +: 32] = FWD[Lanes - l][i];
    end
    assign next[i] = ^(reg_q & FWD[Lanes][i]) ^ ^(data_i & dmask);
  end

  assign reg_d = clear_i ? 32'hffff_ffff : valid_i ? next : reg_q;

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      reg_q <= 32'hffff_ffff;
    end else begin
      reg_q <= reg_d;
    end
  end

  // ---- Result: undo the zero lanes of the last word, complement ---------------------------------
  logic [CntBits-1:0] pad;  // zero words the last beat added: Lanes - last_lanes_i (0..Lanes-1)
  logic [31:0]        fixed;
  assign pad = CntBits'(Lanes) - last_lanes_i;
  always_comb begin
    fixed = '0;
    for (int unsigned k = 0; k < Lanes; k++) begin
      if (32'(pad) == k) begin
        for (int unsigned i = 0; i < 32; i++) fixed[i] = ^(reg_q & INV[k][i]);
      end
    end
  end
  assign crc_o = ~fixed;

endmodule
