// csd_q8_absmax: the stored absmax of each q8 block written, from its elements arriving Lanes per
// beat (one beat per clock; 256 / Lanes beats per block, the last marked by last_i).
//
// docs/state-formats.md, "Quantization", steps 1-3, and QuantizeBlockQ8 (state_q8.h):
//   * a block with a NaN or an infinity stores the canonical NaN 0x7fc00000 (nonfinite_o);
//   * else a = max |x_i|, an exact comparison: the magnitudes' bit patterns (bits & 0x7fffffff)
//     compared as unsigned integers, |-0| = +0;
//   * a < 2^-126 (zero, or subnormal) stores +0 (tiny_o), else a is stored.
// The contract reads the x_i under the launch's policy (DAZ: a subnormal x_i counts as zero),
// but the policy cannot change these outputs: a block whose largest magnitude is subnormal is
// tiny under both policies, and a normal largest magnitude is the same under both. So the unit
// has no FtzDaz parameter (the bench checks it against QuantizeBlockQ8 under both policies).
// The elements' codes then need nonfinite_o, tiny_o and, for the others, r = 1 / a
// (csd_q8_scale).
//
// Datapath: each lane's magnitude with the non-finite flag as bit 31 ({nonfinite, |x|}), so one
// unsigned max tree gives both the largest magnitude and, in bit 31, whether any element was
// non-finite. The tree has log2(Lanes) levels, registered every two levels; the beat maxima
// are folded into a running maximum (the first beat of a block starts it), and the block's
// result is packed and registered after its last beat.
//
// Pipeline: magnitude and flag | ceil(log2(Lanes) / 2) tree stages | running maximum | pack.

`default_nettype none

module csd_q8_absmax #(
  /// Elements per beat: a power of two, 1..256 (a block of 256 is 256 / Lanes beats).
  parameter int unsigned Lanes = 16
) (
  /// Clock.
  input  wire logic                        clk_i,
  /// Synchronous reset, active low (clears the valid pipelines and the block state).
  input  wire logic                        rst_ni,
  /// A beat of elements is on x_i.
  input  wire logic                        valid_i,
  /// This beat is the last of its block (normally the 256 / Lanes-th; fewer make a partial
  /// block, as a test may want).
  input  wire logic                        last_i,
  /// The beat's elements, binary32; x_i[l] is element l of the beat.
  input  wire logic [Lanes-1:0][31:0]      x_i,
  /// The outputs below belong to the block whose last beat came Latency cycles earlier.
  output logic                             valid_o,
  /// The absmax to store: the canonical NaN, +0 (tiny block) or max |x_i|.
  output logic      [31:0]                 absmax_o,
  /// The block holds a NaN or an infinity (codes all 0x00).
  output logic                             nonfinite_o,
  /// The block is finite and its absmax is below 2^-126 (sign-only codes).
  output logic                             tiny_o
);
  /// Levels of the max tree.
  localparam int unsigned Levels = $clog2(Lanes);
  /// Registered stages of the tree: one after every second level and after the last.
  localparam int unsigned TreeStages = (Levels + 1) / 2;
  /// Cycles from the valid_i of a block's last beat to valid_o: magnitude 1, tree,
  /// running maximum 1, pack 1 (5 with 16 lanes).
  localparam int unsigned Latency = 1 + TreeStages + 2;

  if (Lanes < 1 || Lanes > 256 || (Lanes & (Lanes - 1)) != 0) begin : g_bad_lanes
    $error("csd_q8_absmax: Lanes must be a power of two, 1..256");
  end

  // ---- Control: beat valid and last through magnitude and tree, block done after it ---------
  logic beat_valid, beat_last, done_valid;

  // Everything before the running maximum and the pack stage: Latency - 2 stages.
  csd_valid_pipe #(
    .Depth(Latency - 2)
  ) u_beat_valid (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(valid_i),
    .valid_o(beat_valid)
  );

  csd_delay #(
    .Width(1),
    .Depth(Latency - 2)
  ) u_beat_last (
    .clk_i (clk_i),
    .rst_ni(rst_ni),
    .data_i(last_i),
    .data_o(beat_last)
  );

  // The block's last beat, through the running maximum and the pack stage.
  csd_valid_pipe #(
    .Depth(2)
  ) u_done_valid (
    .clk_i  (clk_i),
    .rst_ni (rst_ni),
    .valid_i(beat_valid & beat_last),
    .valid_o(done_valid)
  );
  assign valid_o = done_valid;

  // ---- Stage 1: per lane {non-finite, |x|} ---------------------------------------------------
  logic [Lanes-1:0][31:0] mag;

  for (genvar i = 0; i < Lanes; i++) begin : g_lane
    logic [31:0] mag_d, mag_q;

    assign mag_d = {x_i[i][30:23] == 8'hff, x_i[i][30:0]};

    always_ff @(posedge clk_i) begin
      mag_q <= mag_d;
    end
    assign mag[i] = mag_q;
  end

  // ---- The max tree: registered after every second level and after the last ----------------
  // Level l halves the values of level l - 1 (level 0 reads the lanes); bit 31, the non-finite
  // flag, makes a non-finite lane win, so the root's bit 31 is the OR of the flags.
  for (genvar l = 0; l < Levels; l++) begin : g_level
    localparam int unsigned Nodes = Lanes >> (l + 1);
    logic [31:0] in [2*Nodes];
    logic [31:0] out [Nodes];

    for (genvar i = 0; i < 2 * Nodes; i++) begin : g_in
      if (l == 0) begin : g_lanes
        assign in[i] = mag[i];
      end else begin : g_prev
        assign in[i] = g_level[l-1].out[i];
      end
    end

    for (genvar i = 0; i < Nodes; i++) begin : g_node
      logic [31:0] max_d;

      assign max_d = in[2*i] >= in[2*i+1] ? in[2*i] : in[2*i+1];
      if (l % 2 == 1 || l == Levels - 1) begin : g_reg
        logic [31:0] max_q;

        always_ff @(posedge clk_i) begin
          max_q <= max_d;
        end
        assign out[i] = max_q;
      end else begin : g_wire
        assign out[i] = max_d;
      end
    end
  end

  logic [31:0] beat_max;

  if (Levels == 0) begin : g_no_tree
    assign beat_max = mag[0];
  end else begin : g_root
    assign beat_max = g_level[Levels-1].out[0];
  end

  // ---- Running maximum over the beats of a block ---------------------------------------------
  logic [31:0] acc_d, acc_q;
  logic        first_d, first_q;  // the next beat starts a block

  always_comb begin
    acc_d = acc_q;
    first_d = first_q;
    if (beat_valid) begin
      acc_d = first_q || beat_max > acc_q ? beat_max : acc_q;
      first_d = beat_last;
    end
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      first_q <= 1'b1;
    end else begin
      first_q <= first_d;
    end
  end

  always_ff @(posedge clk_i) begin
    acc_q <= acc_d;
  end

  // ---- Pack: the canonical NaN, +0 for a tiny block, else the maximum ------------------------
  logic [31:0] absmax_d, absmax_q;
  logic        nonfinite_d, nonfinite_q, tiny_d, tiny_q;

  assign nonfinite_d = acc_q[31];
  assign tiny_d = !acc_q[31] && acc_q[30:23] == 8'h00;  // below 2^-126
  assign absmax_d = nonfinite_d ? csd_fp_pkg::CANONICAL_NAN : tiny_d ? 32'd0 : acc_q;

  always_ff @(posedge clk_i) begin
    absmax_q <= absmax_d;
    nonfinite_q <= nonfinite_d;
    tiny_q <= tiny_d;
  end

  assign absmax_o = absmax_q;
  assign nonfinite_o = nonfinite_q;
  assign tiny_o = tiny_q;

endmodule
