// csd_valid_pipe: the valid bit of a fully pipelined unit, delayed by the unit's latency.
//
// For units that do not stall and whose datapath registers are not reset (the fp units of
// rtl/fp): this shift register is their only control state. It is reset synchronously, so a
// unit comes out of reset with no result in flight whatever its datapath registers hold.

`default_nettype none

module csd_valid_pipe #(
  /// Delay in cycles (the unit's latency), at least 1.
  parameter int unsigned Depth = 1
) (
  /// Clock.
  input  wire logic clk_i,
  /// Synchronous reset, active low: clears every stage.
  input  wire logic rst_ni,
  /// Valid bit entering the unit with its operands.
  input  wire logic valid_i,
  /// valid_i delayed by Depth cycles: the result at the unit's output belongs to an operation.
  output logic      valid_o
);
  logic [Depth-1:0] valid_d, valid_q;

  if (Depth > 1) begin : g_shift
    assign valid_d = {valid_q[Depth-2:0], valid_i};
  end else begin : g_single
    assign valid_d = valid_i;
  end

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      valid_q <= '0;
    end else begin
      valid_q <= valid_d;
    end
  end

  assign valid_o = valid_q[Depth-1];

endmodule
