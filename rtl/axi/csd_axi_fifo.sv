// csd_axi_fifo: first-word-fall-through FIFO with a synchronous-read memory, for the data
// and bookkeeping queues of the AXI masters.
//
// The memory is read only into the output register (read enable = "load"), so a deep, wide
// instance maps onto block RAM with its output register; the output register is one more
// entry, so the FIFO holds up to Depth + 1 words. A word written into an empty FIFO appears at
// the output two cycles later; after that one word per cycle can be pushed and popped.
//
// in_ready_o depends only on the FIFO's state, never on in_valid_i; out_valid_o is a register.
// Only the pointers, the count and the output valid bit are reset, not the memory or data.

`default_nettype none

module csd_axi_fifo #(
  /// Bits per entry.
  parameter int unsigned Width = 8,
  /// Entries of the memory (any value >= 1); the FIFO holds Depth + 1 words.
  parameter int unsigned Depth = 4
) (
  /// Clock.
  input  wire logic             clk_i,
  /// Synchronous reset, active low.
  input  wire logic             rst_ni,
  /// Write side: a word is pushed when in_valid_i && in_ready_o.
  input  wire logic             in_valid_i,
  /// Write side: the memory has room (registered).
  output logic                  in_ready_o,
  /// Write side: the word.
  input  wire logic [Width-1:0] in_data_i,
  /// Read side: out_data_o holds the oldest word (registered).
  output logic                  out_valid_o,
  /// Read side: the oldest word is popped when out_valid_o && out_ready_i.
  input  wire logic             out_ready_i,
  /// Read side: the oldest word (registered).
  output logic [Width-1:0]      out_data_o
);

  localparam int unsigned PtrW = (Depth > 1) ? $clog2(Depth) : 1;
  localparam int unsigned CntW = $clog2(Depth + 1);
  localparam logic [PtrW-1:0] LAST_PTR = PtrW'(Depth - 1);
  localparam logic [CntW-1:0] FULL_CNT = CntW'(Depth);

  if (Depth < 1) begin : g_bad_depth
    $error("csd_axi_fifo: Depth must be at least 1");
  end

  logic [Width-1:0] mem_q [Depth];
  logic [PtrW-1:0]  wptr_d, wptr_q, rptr_d, rptr_q;
  logic [CntW-1:0]  cnt_d, cnt_q;          // words in the memory (not the output register)
  logic             out_valid_d, out_valid_q;
  logic [Width-1:0] out_data_d, out_data_q;
  logic             push, pop, load;

  // A push needs room in the memory; the output register is refilled from the memory whenever
  // it is empty or being popped, so a waiting word moves forward at once.
  assign in_ready_o = (cnt_q != FULL_CNT);
  assign push       = in_valid_i && in_ready_o;
  assign pop        = out_valid_q && out_ready_i;
  assign load       = (cnt_q != '0) && (!out_valid_q || out_ready_i);

  assign wptr_d      = !push ? wptr_q : (wptr_q == LAST_PTR) ? '0 : wptr_q + PtrW'(1);
  assign rptr_d      = !load ? rptr_q : (rptr_q == LAST_PTR) ? '0 : rptr_q + PtrW'(1);
  assign cnt_d       = cnt_q + CntW'(push) - CntW'(load);
  assign out_valid_d = load || (out_valid_q && !pop);
  // Synchronous read: the memory output goes straight into the output register.
  assign out_data_d  = load ? mem_q[rptr_q] : out_data_q;

  assign out_valid_o = out_valid_q;
  assign out_data_o  = out_data_q;

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      wptr_q      <= '0;
      rptr_q      <= '0;
      cnt_q       <= '0;
      out_valid_q <= 1'b0;
    end else begin
      wptr_q      <= wptr_d;
      rptr_q      <= rptr_d;
      cnt_q       <= cnt_d;
      out_valid_q <= out_valid_d;
    end
  end

  // Datapath: not reset.
  always_ff @(posedge clk_i) begin
    out_data_q <= out_data_d;
  end

  // The RAM write port (the usual inference template: one write per cycle at wptr_q).
  always_ff @(posedge clk_i) begin
    if (push) begin
      mem_q[wptr_q] <= in_data_i;
    end
  end

endmodule
