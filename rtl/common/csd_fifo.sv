// csd_fifo: first-word-fall-through FIFO with valid/ready on both sides, an occupancy count,
// and a choice of how the memory is read.
//
// - OutReg = 0: the memory is read combinationally (registers or LUTRAM). A pushed word is at
//   the output the next cycle; the FIFO holds Depth words. Used for the updater's small skid
//   and output buffers, where count_o feeds a credit check.
// - OutReg = 1: the memory is read only into an output register (read enable = "load"), so a
//   deep, wide instance maps onto block RAM with its output register. The output register is
//   one more entry, so the FIFO holds Depth + 1 words; a word pushed into an empty FIFO is at
//   the output two cycles later, after that one word per cycle can be pushed and popped. Used
//   for the data and bookkeeping queues of the AXI masters.
//
// A word is pushed when in_valid_i && in_ready_o and popped when out_valid_o && out_ready_i.
// in_ready_o is a register (the memory is not full) and never depends on in_valid_i or
// out_ready_i; a caller that cannot wait (a pipeline with credits) must not offer a word while
// in_ready_o is low, and asserts that itself. out_valid_o depends only on the FIFO's state.
// Only the pointers, the counts and the output valid bit are reset, not the memory or data.

`default_nettype none

module csd_fifo #(
  /// Bits per entry.
  parameter int unsigned Width = 32,
  /// Entries of the memory, at least 1 (any value; a power of two needs no wrap logic).
  parameter int unsigned Depth = 2,
  /// 1: the memory is read into an output register (block RAM; holds Depth + 1 words);
  /// 0: the memory is read combinationally (holds Depth words).
  parameter bit          OutReg = 1'b0,
  /// Width of count_o (derived): holds 0 .. Depth + OutReg.
  localparam int unsigned CountBits = $clog2(Depth + (OutReg ? 1 : 0) + 1)
) (
  /// Clock.
  input  wire logic                 clk_i,
  /// Synchronous reset, active low: empties the FIFO (the memory is not cleared).
  input  wire logic                 rst_ni,
  /// Write side: a word is offered.
  input  wire logic                 in_valid_i,
  /// Write side: the memory has room (a register).
  output logic                      in_ready_o,
  /// Write side: the word.
  input  wire logic [Width-1:0]     in_data_i,
  /// Read side: out_data_o holds the oldest word.
  output logic                      out_valid_o,
  /// Read side: the oldest word is popped when out_valid_o is set.
  input  wire logic                 out_ready_i,
  /// Read side: the oldest word (a register when OutReg; with OutReg = 0 it shows an old
  /// entry while out_valid_o is low).
  output logic      [Width-1:0]     out_data_o,
  /// Words held, the output register included.
  output logic      [CountBits-1:0] count_o
);

  localparam int unsigned PtrW = (Depth > 1) ? $clog2(Depth) : 1;
  localparam int unsigned CntW = $clog2(Depth + 1);
  localparam logic [PtrW-1:0] LAST_PTR = PtrW'(Depth - 1);
  localparam logic [CntW-1:0] FULL_CNT = CntW'(Depth);

  if (Depth < 1) begin : g_bad_depth
    $error("csd_fifo: Depth must be at least 1");
  end

  logic [Width-1:0] mem_q [Depth];
  logic [PtrW-1:0]  wptr_d, wptr_q, rptr_d, rptr_q;
  logic [CntW-1:0]  cnt_d, cnt_q;          // words in the memory (not the output register)
  logic             push, load;            // load: the memory's oldest word leaves it

  // A push needs room in the memory.
  assign in_ready_o = (cnt_q != FULL_CNT);
  assign push       = in_valid_i && in_ready_o;

  assign wptr_d = !push ? wptr_q : (wptr_q == LAST_PTR) ? '0 : wptr_q + PtrW'(1);
  assign rptr_d = !load ? rptr_q : (rptr_q == LAST_PTR) ? '0 : rptr_q + PtrW'(1);
  assign cnt_d  = cnt_q + CntW'(push) - CntW'(load);

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      wptr_q <= '0;
      rptr_q <= '0;
      cnt_q  <= '0;
    end else begin
      wptr_q <= wptr_d;
      rptr_q <= rptr_d;
      cnt_q  <= cnt_d;
    end
  end

  // The RAM write port (the usual inference template: one write per cycle at wptr_q).
  always_ff @(posedge clk_i) begin
    if (push) begin
      mem_q[wptr_q] <= in_data_i;
    end
  end

  if (OutReg) begin : g_out_reg
    logic             out_valid_d, out_valid_q;
    logic [Width-1:0] out_data_d, out_data_q;
    logic             pop;

    // The output register is refilled from the memory whenever it is empty or being popped,
    // so a waiting word moves forward at once.
    assign pop         = out_valid_q && out_ready_i;
    assign load        = (cnt_q != '0) && (!out_valid_q || out_ready_i);
    assign out_valid_d = load || (out_valid_q && !pop);
    // Synchronous read: the memory output goes straight into the output register.
    assign out_data_d  = load ? mem_q[rptr_q] : out_data_q;

    always_ff @(posedge clk_i) begin
      if (!rst_ni) begin
        out_valid_q <= 1'b0;
      end else begin
        out_valid_q <= out_valid_d;
      end
    end

    // Datapath: not reset.
    always_ff @(posedge clk_i) begin
      out_data_q <= out_data_d;
    end

    assign out_valid_o = out_valid_q;
    assign out_data_o  = out_data_q;
    assign count_o     = CountBits'(cnt_q) + CountBits'(out_valid_q);
  end else begin : g_comb_read
    // The memory's oldest word is the output; a pop takes it out of the memory.
    assign load        = (cnt_q != '0) && out_ready_i;
    assign out_valid_o = (cnt_q != '0);
    assign out_data_o  = mem_q[rptr_q];
    assign count_o     = CountBits'(cnt_q);
  end

endmodule
