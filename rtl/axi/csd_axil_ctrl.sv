// csd_axil_ctrl: the AXI4-Lite control slave of a Vitis ap_ctrl_hs kernel: the control,
// interrupt and argument registers that XRT (or the emulation harness) writes and polls.
//
// Register map (byte offsets; the argument area comes from a generated *_args_pkg):
//
//   0x00 CTRL  bit 0 ap_start      R/W, set by writing 1, cleared when the core raises
//                                  ap_ready (set again instead if auto_restart is on)
//              bit 1 ap_done       R, set when the core raises ap_done, cleared by a read of CTRL
//              bit 2 ap_idle       R, the core's ap_idle (one cycle late; 1 out of reset)
//              bit 3 ap_ready      R, set when the core raises ap_ready while auto_restart is
//                                  off, cleared by a read of CTRL
//              bit 7 auto_restart  R/W
//              bit 9 interrupt     R, the interrupt line
//   0x04 GIE   bit 0 global interrupt enable, R/W
//   0x08 IER   bit 0 ap_done, bit 1 ap_ready interrupt enables, R/W
//   0x0C ISR   bit 0 ap_done, bit 1 ap_ready interrupt status: set by the event when enabled in
//              IER; a write toggles the bits written as 1 (an event in the same cycle wins)
//   0x10 ...   argument words: 32-bit registers, byte-writable (WSTRB); reserved words (a
//              pointer's third word, a scalar's second) read as 0 and ignore writes
//
// Reads of any other address return 0 with OKAY, and writes to them are ignored, as in the
// slave Vitis HLS generates; every response is OKAY. The interrupt line is registered:
// GIE && (ISR != 0), one cycle after the ISR changes.
//
// AW and W are accepted independently (in either order or together); the write takes effect
// once both are held and the previous B has been accepted. One read is served at a time.
//
// Only control state is reset; the argument registers are not (XRT writes every argument
// before each start).

`default_nettype none

module csd_axil_ctrl import csd_axi_pkg::*; #(
  /// 32-bit words of the argument area, from 0x10 to the end of the register file.
  parameter int unsigned ArgWords = 1,
  /// Which argument words are registers (1) and which are reserved (0); bit k is the word at
  /// byte offset 0x10 + 4k.
  parameter logic [ArgWords-1:0] ArgWordMask = '1
) (
  /// Clock.
  input  wire logic                    clk_i,
  /// Synchronous reset, active low.
  input  wire logic                    rst_ni,
  /// AXI4-Lite requests (s_axi_control).
  input  wire axil_req_t               axil_req_i,
  /// AXI4-Lite responses.
  output axil_resp_t                   axil_resp_o,
  /// The argument words; word k (bits 32k+31:32k) is the register at 0x10 + 4k, 0 if reserved.
  output logic [ArgWords*32-1:0]       args_o,
  /// ap_start to the core (level, held until ap_ready).
  output logic                         ap_start_o,
  /// The core finished (one-cycle pulse).
  input  wire logic                    ap_done_i,
  /// The core is idle.
  input  wire logic                    ap_idle_i,
  /// The core has taken its arguments and can accept ap_start again (one-cycle pulse).
  input  wire logic                    ap_ready_i,
  /// Interrupt line to the shell.
  output logic                         interrupt_o
);

  localparam int unsigned ARG_BASE_WORD = 4;     // 0x10 / 4
  localparam int unsigned REG_WORDS = ARG_BASE_WORD + ArgWords;
  /// Bits of a 32-bit word's address within the control port's address space.
  localparam int unsigned WordAddrBits = LITE_ADDR_WIDTH - 2;
  typedef logic [WordAddrBits-1:0] word_addr_t;
  localparam word_addr_t WORD_CTRL = word_addr_t'(0);
  localparam word_addr_t WORD_GIE  = word_addr_t'(1);
  localparam word_addr_t WORD_IER  = word_addr_t'(2);
  localparam word_addr_t WORD_ISR  = word_addr_t'(3);

  if (ArgWords < 1 || REG_WORDS > 2 ** WordAddrBits) begin : g_bad_words
    $error("csd_axil_ctrl: the register file must fit the control port's address space");
  end

  // ---- Write channel: hold AW and W until both are there ------------------------------------

  logic       aw_held_d, aw_held_q, w_held_d, w_held_q, b_valid_d, b_valid_q;
  word_addr_t waddr_d, waddr_q;             // word address of the held AW
  lite_data_t wdata_d, wdata_q;
  lite_strb_t wstrb_d, wstrb_q;
  logic       aw_ready, w_ready, aw_hs, w_hs, b_hs, wr_en;
  lite_data_t wmask;

  // Nothing is accepted while in reset (it would be lost).
  assign aw_ready = rst_ni && !aw_held_q;
  assign w_ready  = rst_ni && !w_held_q;
  assign aw_hs    = axil_req_i.aw_valid && aw_ready;
  assign w_hs     = axil_req_i.w_valid && w_ready;
  assign b_hs     = b_valid_q && axil_req_i.b_ready;
  // The write happens when both halves are held and no B is pending.
  assign wr_en    = aw_held_q && w_held_q && !b_valid_q;

  assign aw_held_d = aw_hs || (aw_held_q && !wr_en);
  assign w_held_d  = w_hs || (w_held_q && !wr_en);
  assign b_valid_d = wr_en || (b_valid_q && !b_hs);
  assign waddr_d   = aw_hs ? axil_req_i.aw_addr[LITE_ADDR_WIDTH-1:2] : waddr_q;
  assign wdata_d   = w_hs ? axil_req_i.w.data : wdata_q;
  assign wstrb_d   = w_hs ? axil_req_i.w.strb : wstrb_q;
  assign wmask     = {{8{wstrb_q[3]}}, {8{wstrb_q[2]}}, {8{wstrb_q[1]}}, {8{wstrb_q[0]}}};

  // ---- Control and interrupt registers ------------------------------------------------------

  logic       start_d, start_q, done_d, done_q, idle_q, ready_d, ready_q, auto_d, auto_q;
  logic       gie_d, gie_q, irq_d, irq_q;
  logic [1:0] ier_d, ier_q, isr_d, isr_q;
  logic       ar_hs, read_ctrl, wr_ctrl, wr_isr;

  assign wr_ctrl   = wr_en && (waddr_q == WORD_CTRL) && wstrb_q[0];
  assign wr_isr    = wr_en && (waddr_q == WORD_ISR) && wstrb_q[0];
  assign read_ctrl = ar_hs && (axil_req_i.ar_addr[LITE_ADDR_WIDTH-1:2] == WORD_CTRL);

  // ap_start: a write of 1 sets it; the core's ap_ready ends the handshake (or restarts).
  assign start_d = (wr_ctrl && wdata_q[0]) ? 1'b1 : ap_ready_i ? auto_q : start_q;
  assign auto_d  = wr_ctrl ? wdata_q[7] : auto_q;
  // ap_done and ap_ready are clear-on-read; an event in the cycle of the read wins.
  assign done_d  = ap_done_i || (done_q && !read_ctrl);
  assign ready_d = (ap_ready_i && !auto_q) || (ready_q && !read_ctrl);
  assign gie_d   = (wr_en && waddr_q == WORD_GIE && wstrb_q[0]) ? wdata_q[0] : gie_q;
  assign ier_d   = (wr_en && waddr_q == WORD_IER && wstrb_q[0]) ? wdata_q[1:0] : ier_q;
  // ISR: toggle on write, an enabled event sets its bit.
  assign isr_d   = (wr_isr ? (isr_q ^ wdata_q[1:0]) : isr_q) |
                   {ier_q[1] && ap_ready_i, ier_q[0] && ap_done_i};
  assign irq_d   = gie_q && (isr_q != '0);

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      aw_held_q <= 1'b0;
      w_held_q  <= 1'b0;
      b_valid_q <= 1'b0;
      start_q   <= 1'b0;
      done_q    <= 1'b0;
      idle_q    <= 1'b1;   // the core is idle coming out of reset
      ready_q   <= 1'b0;
      auto_q    <= 1'b0;
      gie_q     <= 1'b0;
      ier_q     <= '0;
      isr_q     <= '0;
      irq_q     <= 1'b0;
    end else begin
      aw_held_q <= aw_held_d;
      w_held_q  <= w_held_d;
      b_valid_q <= b_valid_d;
      start_q   <= start_d;
      done_q    <= done_d;
      idle_q    <= ap_idle_i;
      ready_q   <= ready_d;
      auto_q    <= auto_d;
      gie_q     <= gie_d;
      ier_q     <= ier_d;
      isr_q     <= isr_d;
      irq_q     <= irq_d;
    end
  end

  // The held write (address, data, strobes) is only used while its held bit is set.
  always_ff @(posedge clk_i) begin
    waddr_q <= waddr_d;
    wdata_q <= wdata_d;
    wstrb_q <= wstrb_d;
  end

  // ---- Argument registers -------------------------------------------------------------------

  logic [31:0] arg_w [ArgWords];            // register k, or 0 for a reserved word

  for (genvar k = 0; k < ArgWords; k++) begin : g_arg
    if (ArgWordMask[k]) begin : g_reg
      logic [31:0] word_d, word_q;
      assign word_d = (wr_en && (waddr_q == word_addr_t'(ARG_BASE_WORD + k))) ?
                      ((wdata_q & wmask) | (word_q & ~wmask)) : word_q;
      always_ff @(posedge clk_i) begin
        word_q <= word_d;
      end
      assign arg_w[k] = word_q;
    end else begin : g_reserved
      assign arg_w[k] = '0;
    end
    assign args_o[32*k +: 32] = arg_w[k];
  end

  // ---- Read channel -------------------------------------------------------------------------

  logic       r_valid_d, r_valid_q, ar_ready;
  lite_data_t rdata_d, rdata_q, rmux;
  word_addr_t raddr;

  assign ar_ready = rst_ni && !r_valid_q;
  assign ar_hs    = axil_req_i.ar_valid && ar_ready;
  assign raddr = axil_req_i.ar_addr[LITE_ADDR_WIDTH-1:2];

  always_comb begin
    rmux = '0;
    unique case (raddr)
      WORD_CTRL: begin
        rmux[0] = start_q;
        rmux[1] = done_q;
        rmux[2] = idle_q;
        rmux[3] = ready_q;
        rmux[7] = auto_q;
        rmux[9] = irq_q;
      end
      WORD_GIE: rmux[0]   = gie_q;
      WORD_IER: rmux[1:0] = ier_q;
      WORD_ISR: rmux[1:0] = isr_q;
      default: begin
        for (int unsigned k = 0; k < ArgWords; k++) begin
          if (raddr == word_addr_t'(ARG_BASE_WORD + k)) rmux = arg_w[k];
        end
      end
    endcase
  end

  assign r_valid_d = ar_hs || (r_valid_q && !axil_req_i.r_ready);
  assign rdata_d   = ar_hs ? rmux : rdata_q;

  always_ff @(posedge clk_i) begin
    if (!rst_ni) begin
      r_valid_q <= 1'b0;
    end else begin
      r_valid_q <= r_valid_d;
    end
  end

  always_ff @(posedge clk_i) begin
    rdata_q <= rdata_d;
  end

  // ---- Outputs ------------------------------------------------------------------------------

  always_comb begin
    axil_resp_o          = '0;
    axil_resp_o.aw_ready = aw_ready;
    axil_resp_o.w_ready  = w_ready;
    axil_resp_o.b_resp   = RESP_OKAY;
    axil_resp_o.b_valid  = b_valid_q;
    axil_resp_o.ar_ready = ar_ready;
    axil_resp_o.r.data   = rdata_q;
    axil_resp_o.r.resp   = RESP_OKAY;
    axil_resp_o.r_valid  = r_valid_q;
  end

  assign ap_start_o  = start_q;
  assign interrupt_o = irq_q;

  // Byte offsets within a word are ignored (32-bit registers only).
  logic unused_addr;
  assign unused_addr = ^{axil_req_i.aw_addr[1:0], axil_req_i.ar_addr[1:0]};

endmodule
