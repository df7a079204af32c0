// csd_update_crc_join: the CRC-32 of two byte streams one after the other, from the CRCs of
// each (zlib's crc32_combine; Crc32Combine in hls/include/csdkit/hls/crc.h), for the q8
// formats' status lanes: a moment's lane covers its codes followed by its absmax values, which
// stream side by side on two channels and are checksummed apart (csd_update_crc).
//
// With R(r, D) the register after data D from register r: R(r, D) = F^|D| r ^ L(D), L linear,
// F the 32 x 32 GF(2) matrix of one 32-bit word step (csd_update_crc). Then
//   crc(A ++ B) = F^|B| crc(A) ^ crc(B)           (|B| in 32-bit words; the complements cancel)
// and |B| is the number of absmax values, len_i. F^len is applied by square-and-multiply with
// constant matrices: at step k (k = 0 .. LenBits - 1) the value is multiplied by F^(2^k) when
// bit k of len_i is set. The matrices F^(2^k) are computed at elaboration (repeated squaring of
// F, column by column); one step is 32 parity trees of 32 inputs, the row masks of step k
// chosen by the step counter. Several values of the same length are joined side by side.
// LenBits cycles after start_i, done_o rises and crc_o holds the results; both stay until the
// next start_i.

`default_nettype none

module csd_update_crc_join #(
  /// Values joined side by side (all with the same length of B).
  parameter int unsigned Count = 4,
  /// Bits of the length (B's 32-bit words).
  parameter int unsigned LenBits = 24
) (
  /// Clock.
  input  wire logic                   clk_i,
  /// Synchronous reset, active low (the step counter).
  input  wire logic                   rst_ni,
  /// Start: crc_a_i and len_i are sampled.
  input  wire logic                   start_i,
  /// Length of the second streams, in 32-bit words; held from start_i to done_o.
  input  wire logic [LenBits-1:0]     len_i,
  /// CRC-32 of each first stream (zlib's value, complemented register).
  input  wire logic [Count-1:0][31:0] crc_a_i,
  /// CRC-32 of each second stream; read combinationally into crc_o.
  input  wire logic [Count-1:0][31:0] crc_b_i,
  /// The results are on crc_o.
  output logic                        done_o,
  /// CRC-32 of each first stream followed by its second stream.
  output logic      [Count-1:0][31:0] crc_o
);

  localparam logic [31:0] POLY = 32'hedb8_8320;
  localparam int unsigned StepBits = $clog2(LenBits + 1);

  typedef logic [31:0][31:0]        mat_t;   // 32 columns (or rows) of 32 bits
  typedef logic [LenBits-1:0][31:0][31:0] mats_t;

  /// Columns of F (32 bit steps of the reflected register).
  function automatic mat_t word_step_cols();
    mat_t m;
    for (int unsigned j = 0; j < 32; j++) begin
      logic [31:0] c;
      c = 32'd1 << j;
      for (int unsigned b = 0; b < 32; b++) c = (c >> 1) ^ (POLY & {32{c[0]}});
      m[j] = c;
    end
    return m;
  endfunction

  /// Row masks of F^(2^k), k = 0 .. LenBits - 1: output bit i of F^(2^k) x is ^(x & rows[k][i]).
  function automatic mats_t pow2_rows();
    mats_t r;
    mat_t  c, sq;
    c = word_step_cols();
    for (int unsigned k = 0; k < LenBits; k++) begin
      for (int unsigned i = 0; i < 32; i++) begin
        for (int unsigned j = 0; j < 32; j++) r[k][i][j] = c[j][i];
      end
      // Square: column j of C^2 is C applied to column j of C.
      for (int unsigned j = 0; j < 32; j++) begin
        sq[j] = '0;
        for (int unsigned i = 0; i < 32; i++) begin
          if (c[j][i]) sq[j] = sq[j] ^ c[i];
        end
      end
      c = sq;
    end
    return r;
  endfunction

  localparam mats_t POW2 = pow2_rows();

  localparam int unsigned IdxBits = $clog2(LenBits);

  logic [StepBits-1:0]    step_q;
  logic [IdxBits-1:0]     k;
  logic                   busy;
  logic [Count-1:0][31:0] x_q, x_d;
  logic [31:0][31:0]      rows;

  assign busy = 32'(step_q) < LenBits;
  assign k = busy ? IdxBits'(step_q) : '0;
  assign rows = POW2[k];

  always_comb begin
    x_d = x_q;
    if (busy && len_i[k]) begin
      for (int unsigned v = 0; v < Count; v++) begin
        for (int unsigned i = 0; i < 32; i++) x_d[v][i] = ^(x_q[v] & rows[i]);
      end
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      step_q <= StepBits'(LenBits);
    end else if (start_i) begin
      step_q <= '0;
    end else if (busy) begin
      step_q <= step_q + StepBits'(1);
    end
  end

  always_ff @(posedge clk_i) begin
    x_q <= start_i ? crc_a_i : x_d;
  end

  assign done_o = !busy && !start_i;
  for (genvar v = 0; v < Count; v++) begin : g_out
    assign crc_o[v] = x_q[v] ^ crc_b_i[v];
  end

endmodule
