// csd_update_fifo: a synchronous first-word-fall-through FIFO with an occupancy count.
//
// Used as the 2-entry skid buffer behind every read channel (its full flag, a register, is the
// channel's ready, so ready never depends combinationally on valid) and as the output buffer of
// every write channel (its count feeds the pipeline's credit check). A push into a full FIFO or
// a pop from an empty one is a caller bug; the caller's credit / valid logic prevents both, and
// simulation asserts it.

`default_nettype none

module csd_update_fifo #(
  /// Bits per entry.
  parameter int unsigned Width = 32,
  /// Entries; a power of two, at least 2.
  parameter int unsigned Depth = 2,
  /// Width of the occupancy count (derived).
  localparam int unsigned CountBits = $clog2(Depth) + 1
) (
  /// Clock.
  input  wire logic                 clk_i,
  /// Synchronous reset, active low: empties the FIFO (contents are not cleared).
  input  wire logic                 rst_ni,
  /// Write data_i (the FIFO must not be full).
  input  wire logic                 push_i,
  /// Entry to write.
  input  wire logic [Width-1:0]     data_i,
  /// Remove the oldest entry (the FIFO must not be empty).
  input  wire logic                 pop_i,
  /// The FIFO holds at least one entry; data_o is the oldest.
  output logic                      valid_o,
  /// Oldest entry (valid when valid_o).
  output logic      [Width-1:0]     data_o,
  /// The FIFO holds Depth entries (a register).
  output logic                      full_o,
  /// Entries held (a register).
  output logic      [CountBits-1:0] count_o
);
  localparam int unsigned AddrBits = $clog2(Depth);

  logic [Width-1:0]     mem_q [Depth];
  logic [AddrBits-1:0]  wr_ptr_q, wr_ptr_d, rd_ptr_q, rd_ptr_d;
  logic [CountBits-1:0] count_q, count_d;

  assign wr_ptr_d = wr_ptr_q + AddrBits'(push_i);
  assign rd_ptr_d = rd_ptr_q + AddrBits'(pop_i);
  assign count_d = count_q + CountBits'(push_i) - CountBits'(pop_i);

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      wr_ptr_q <= '0;
      rd_ptr_q <= '0;
      count_q <= '0;
    end else begin
      wr_ptr_q <= wr_ptr_d;
      rd_ptr_q <= rd_ptr_d;
      count_q <= count_d;
    end
  end

  always_ff @(posedge clk_i) begin
    if (push_i) mem_q[wr_ptr_q] <= data_i;
  end

  assign valid_o = count_q != '0;
  assign data_o = mem_q[rd_ptr_q];
  assign full_o = count_q == CountBits'(Depth);
  assign count_o = count_q;

`ifndef SYNTHESIS
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      assert (!(push_i && full_o && !pop_i)) else $error("csd_update_fifo: push into full FIFO");
      assert (!(pop_i && !valid_o)) else $error("csd_update_fifo: pop from empty FIFO");
    end
  end
`endif

endmodule
