// csd_delay: a fixed delay line for datapath values, data_o = data_i Depth cycles ago.
//
// For pipelines that never stall (the updater's lanes: back-pressure is handled by credits in
// front of them), where aligning an operand with a later operation is a plain delay. Depth 0
// is a wire; Depth 1..3 a shift register; longer delays are a circular buffer with one write
// and one registered read per cycle (an SRL / LUTRAM / BRAM in the FPGA; in simulation one copy
// per cycle instead of Depth). Datapath only: the contents are not reset; the pointer, a
// control counter, is.

`default_nettype none

module csd_delay #(
  /// Bits per value.
  parameter int unsigned Width = 32,
  /// Delay in cycles (0: combinational pass-through).
  parameter int unsigned Depth = 1
) (
  /// Clock.
  input  wire logic             clk_i,
  /// Synchronous reset, active low (clears the pointer only).
  input  wire logic             rst_ni,
  /// Value entering the line.
  input  wire logic [Width-1:0] data_i,
  /// data_i of Depth cycles earlier.
  output logic      [Width-1:0] data_o
);
  if (Depth == 0) begin : g_wire
    assign data_o = data_i;

    logic unused_clk;
    assign unused_clk = ^{clk_i, rst_ni};
  end else if (Depth <= 3) begin : g_shift
    logic [Depth-1:0][Width-1:0] stage_q;

    if (Depth > 1) begin : g_chain
      always_ff @(posedge clk_i) begin
        stage_q <= {stage_q[Depth-2:0], data_i};
      end
    end else begin : g_one
      always_ff @(posedge clk_i) begin
        stage_q <= data_i;
      end
    end
    assign data_o = stage_q[Depth-1];

    logic unused_rst;
    assign unused_rst = rst_ni;
  end else begin : g_ring
    // Entry written at cycle t is read (registered) at cycle t + Depth - 1 and appears at the
    // output at t + Depth. Entries live 2^AddrBits >= Depth cycles, so none is overwritten
    // before it is read.
    localparam int unsigned AddrBits = $clog2(Depth);
    localparam int unsigned Entries = 1 << AddrBits;

    logic [Width-1:0]    mem_q [Entries];
    logic [AddrBits-1:0] wr_ptr_q, wr_ptr_d, rd_ptr;
    logic [Width-1:0]    data_q;

    assign wr_ptr_d = wr_ptr_q + AddrBits'(1);
    assign rd_ptr = wr_ptr_q - AddrBits'(Depth - 1);

    always_ff @(posedge clk_i) begin
      if (!rst_ni) begin
        wr_ptr_q <= '0;
      end else begin
        wr_ptr_q <= wr_ptr_d;
      end
    end

    always_ff @(posedge clk_i) begin
      mem_q[wr_ptr_q] <= data_i;
      data_q <= mem_q[rd_ptr];
    end

    assign data_o = data_q;
  end

endmodule
