// csd_update: the updater kernel's RTL top with the Vitis RTL-kernel interface (ap_ctrl_hs).
//
// Port names are the ones Vitis expects of an RTL kernel: ap_clk, ap_rst_n, the AXI4-Lite control
// slave s_axi_control_* (register map generated from hls/include/csdkit/hls/update_args.h into
// csd_update_args_pkg), one AXI4 master m_axi_gmem<k>_* per bundle of the argument table, and
// interrupt. Inside: the control slave (csd_axil_ctrl), one read master per read channel and one
// write master per write channel of the core (csd_axi_rd_master / csd_axi_wr_master: INCR
// bursts that never cross 4 KiB, several in flight), and csd_update_core, which sequences the
// launch (validation pass, streaming update, status last). A channel's command names a word
// offset within its array; the array's base pointer from the registers is added here.
//
// Bundles (update_args.h): gmem0 theta, gmem1 m, gmem2 v (read and written), gmem3 grad,
// gmem4 sp_idx (read), gmem5 sp_blk (read) and status (written), gmem6 out16 (written). The
// unused half of a bundle is tied idle. AXI error responses are collected in err_q (sticky per
// launch, not yet reported in the status word).
//
// Launch: ap_start (level, from the control slave) starts the core once; the core's done pulse
// is ap_done and ap_ready; ap_idle while no launch runs.

`default_nettype none

module csd_update import csd_axi_pkg::*; #(
  /// The fp policy of this build: 1 FTZ/DAZ, 0 IEEE (launches must set mode bit 8 to match).
  parameter bit FtzDaz = 1'b0,
  /// binary32 lanes of the core (16 = one 512-bit beat per cycle).
  parameter int unsigned Lanes = 16,
  /// Read and write bursts in flight per master.
  parameter int unsigned MaxOutstanding = 8,
  /// Longest burst in beats (1..64: 64 beats of 64 bytes fill a 4 KiB page).
  parameter int unsigned MaxBurstLen = PAGE_BEATS,
  /// Words of each read master's data FIFO.
  parameter int unsigned RdFifoDepth = 512,
  /// Words of each write master's data FIFO.
  parameter int unsigned WrFifoDepth = 2 * PAGE_BEATS
) (
  /// Kernel clock.
  input  wire logic                  ap_clk,
  /// Kernel reset, active low, synchronous (registered once inside).
  input  wire logic                  ap_rst_n,

  // ---- s_axi_control: AXI4-Lite control slave ----
  /// Control AW valid.
  input  wire logic                  s_axi_control_AWVALID,
  /// Control AW ready.
  output logic                       s_axi_control_AWREADY,
  /// Control AW byte address.
  input  wire logic [7:0]            s_axi_control_AWADDR,
  /// Control W valid.
  input  wire logic                  s_axi_control_WVALID,
  /// Control W ready.
  output logic                       s_axi_control_WREADY,
  /// Control W data.
  input  wire logic [31:0]           s_axi_control_WDATA,
  /// Control W byte strobes.
  input  wire logic [3:0]            s_axi_control_WSTRB,
  /// Control AR valid.
  input  wire logic                  s_axi_control_ARVALID,
  /// Control AR ready.
  output logic                       s_axi_control_ARREADY,
  /// Control AR byte address.
  input  wire logic [7:0]            s_axi_control_ARADDR,
  /// Control R valid.
  output logic                       s_axi_control_RVALID,
  /// Control R ready.
  input  wire logic                  s_axi_control_RREADY,
  /// Control R data.
  output logic [31:0]                s_axi_control_RDATA,
  /// Control R response (always OKAY).
  output logic [1:0]                 s_axi_control_RRESP,
  /// Control B valid.
  output logic                       s_axi_control_BVALID,
  /// Control B ready.
  input  wire logic                  s_axi_control_BREADY,
  /// Control B response (always OKAY).
  output logic [1:0]                 s_axi_control_BRESP,
  /// Interrupt (ap_done / ap_ready, as enabled by GIE and IER).
  output logic                       interrupt,

  // ---- m_axi_gmem0: theta: read and written in place ----
  /// gmem0 AW valid.
  output logic                       m_axi_gmem0_AWVALID,
  /// gmem0 AW ready.
  input  wire logic                  m_axi_gmem0_AWREADY,
  /// gmem0 AW address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem0_AWADDR,
  /// gmem0 AW ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem0_AWID,
  /// gmem0 AW length (beats - 1).
  output logic [7:0]                 m_axi_gmem0_AWLEN,
  /// gmem0 AW size.
  output logic [2:0]                 m_axi_gmem0_AWSIZE,
  /// gmem0 AW burst type.
  output logic [1:0]                 m_axi_gmem0_AWBURST,
  /// gmem0 AW lock.
  output logic                       m_axi_gmem0_AWLOCK,
  /// gmem0 AW cache.
  output logic [3:0]                 m_axi_gmem0_AWCACHE,
  /// gmem0 AW protection.
  output logic [2:0]                 m_axi_gmem0_AWPROT,
  /// gmem0 AW QoS.
  output logic [3:0]                 m_axi_gmem0_AWQOS,
  /// gmem0 AW region.
  output logic [3:0]                 m_axi_gmem0_AWREGION,
  /// gmem0 W valid.
  output logic                       m_axi_gmem0_WVALID,
  /// gmem0 W ready.
  input  wire logic                  m_axi_gmem0_WREADY,
  /// gmem0 W data.
  output logic [DATA_WIDTH-1:0]      m_axi_gmem0_WDATA,
  /// gmem0 W strobes.
  output logic [STRB_WIDTH-1:0]      m_axi_gmem0_WSTRB,
  /// gmem0 W last.
  output logic                       m_axi_gmem0_WLAST,
  /// gmem0 B valid.
  input  wire logic                  m_axi_gmem0_BVALID,
  /// gmem0 B ready.
  output logic                       m_axi_gmem0_BREADY,
  /// gmem0 B response.
  input  wire logic [1:0]            m_axi_gmem0_BRESP,
  /// gmem0 B ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem0_BID,
  /// gmem0 AR valid.
  output logic                       m_axi_gmem0_ARVALID,
  /// gmem0 AR ready.
  input  wire logic                  m_axi_gmem0_ARREADY,
  /// gmem0 AR address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem0_ARADDR,
  /// gmem0 AR ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem0_ARID,
  /// gmem0 AR length (beats - 1).
  output logic [7:0]                 m_axi_gmem0_ARLEN,
  /// gmem0 AR size.
  output logic [2:0]                 m_axi_gmem0_ARSIZE,
  /// gmem0 AR burst type.
  output logic [1:0]                 m_axi_gmem0_ARBURST,
  /// gmem0 AR lock.
  output logic                       m_axi_gmem0_ARLOCK,
  /// gmem0 AR cache.
  output logic [3:0]                 m_axi_gmem0_ARCACHE,
  /// gmem0 AR protection.
  output logic [2:0]                 m_axi_gmem0_ARPROT,
  /// gmem0 AR QoS.
  output logic [3:0]                 m_axi_gmem0_ARQOS,
  /// gmem0 AR region.
  output logic [3:0]                 m_axi_gmem0_ARREGION,
  /// gmem0 R valid.
  input  wire logic                  m_axi_gmem0_RVALID,
  /// gmem0 R ready.
  output logic                       m_axi_gmem0_RREADY,
  /// gmem0 R data.
  input  wire logic [DATA_WIDTH-1:0] m_axi_gmem0_RDATA,
  /// gmem0 R last.
  input  wire logic                  m_axi_gmem0_RLAST,
  /// gmem0 R ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem0_RID,
  /// gmem0 R response.
  input  wire logic [1:0]            m_axi_gmem0_RRESP,

  // ---- m_axi_gmem1: m: read and written in place ----
  /// gmem1 AW valid.
  output logic                       m_axi_gmem1_AWVALID,
  /// gmem1 AW ready.
  input  wire logic                  m_axi_gmem1_AWREADY,
  /// gmem1 AW address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem1_AWADDR,
  /// gmem1 AW ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem1_AWID,
  /// gmem1 AW length (beats - 1).
  output logic [7:0]                 m_axi_gmem1_AWLEN,
  /// gmem1 AW size.
  output logic [2:0]                 m_axi_gmem1_AWSIZE,
  /// gmem1 AW burst type.
  output logic [1:0]                 m_axi_gmem1_AWBURST,
  /// gmem1 AW lock.
  output logic                       m_axi_gmem1_AWLOCK,
  /// gmem1 AW cache.
  output logic [3:0]                 m_axi_gmem1_AWCACHE,
  /// gmem1 AW protection.
  output logic [2:0]                 m_axi_gmem1_AWPROT,
  /// gmem1 AW QoS.
  output logic [3:0]                 m_axi_gmem1_AWQOS,
  /// gmem1 AW region.
  output logic [3:0]                 m_axi_gmem1_AWREGION,
  /// gmem1 W valid.
  output logic                       m_axi_gmem1_WVALID,
  /// gmem1 W ready.
  input  wire logic                  m_axi_gmem1_WREADY,
  /// gmem1 W data.
  output logic [DATA_WIDTH-1:0]      m_axi_gmem1_WDATA,
  /// gmem1 W strobes.
  output logic [STRB_WIDTH-1:0]      m_axi_gmem1_WSTRB,
  /// gmem1 W last.
  output logic                       m_axi_gmem1_WLAST,
  /// gmem1 B valid.
  input  wire logic                  m_axi_gmem1_BVALID,
  /// gmem1 B ready.
  output logic                       m_axi_gmem1_BREADY,
  /// gmem1 B response.
  input  wire logic [1:0]            m_axi_gmem1_BRESP,
  /// gmem1 B ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem1_BID,
  /// gmem1 AR valid.
  output logic                       m_axi_gmem1_ARVALID,
  /// gmem1 AR ready.
  input  wire logic                  m_axi_gmem1_ARREADY,
  /// gmem1 AR address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem1_ARADDR,
  /// gmem1 AR ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem1_ARID,
  /// gmem1 AR length (beats - 1).
  output logic [7:0]                 m_axi_gmem1_ARLEN,
  /// gmem1 AR size.
  output logic [2:0]                 m_axi_gmem1_ARSIZE,
  /// gmem1 AR burst type.
  output logic [1:0]                 m_axi_gmem1_ARBURST,
  /// gmem1 AR lock.
  output logic                       m_axi_gmem1_ARLOCK,
  /// gmem1 AR cache.
  output logic [3:0]                 m_axi_gmem1_ARCACHE,
  /// gmem1 AR protection.
  output logic [2:0]                 m_axi_gmem1_ARPROT,
  /// gmem1 AR QoS.
  output logic [3:0]                 m_axi_gmem1_ARQOS,
  /// gmem1 AR region.
  output logic [3:0]                 m_axi_gmem1_ARREGION,
  /// gmem1 R valid.
  input  wire logic                  m_axi_gmem1_RVALID,
  /// gmem1 R ready.
  output logic                       m_axi_gmem1_RREADY,
  /// gmem1 R data.
  input  wire logic [DATA_WIDTH-1:0] m_axi_gmem1_RDATA,
  /// gmem1 R last.
  input  wire logic                  m_axi_gmem1_RLAST,
  /// gmem1 R ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem1_RID,
  /// gmem1 R response.
  input  wire logic [1:0]            m_axi_gmem1_RRESP,

  // ---- m_axi_gmem2: v: read and written in place ----
  /// gmem2 AW valid.
  output logic                       m_axi_gmem2_AWVALID,
  /// gmem2 AW ready.
  input  wire logic                  m_axi_gmem2_AWREADY,
  /// gmem2 AW address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem2_AWADDR,
  /// gmem2 AW ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem2_AWID,
  /// gmem2 AW length (beats - 1).
  output logic [7:0]                 m_axi_gmem2_AWLEN,
  /// gmem2 AW size.
  output logic [2:0]                 m_axi_gmem2_AWSIZE,
  /// gmem2 AW burst type.
  output logic [1:0]                 m_axi_gmem2_AWBURST,
  /// gmem2 AW lock.
  output logic                       m_axi_gmem2_AWLOCK,
  /// gmem2 AW cache.
  output logic [3:0]                 m_axi_gmem2_AWCACHE,
  /// gmem2 AW protection.
  output logic [2:0]                 m_axi_gmem2_AWPROT,
  /// gmem2 AW QoS.
  output logic [3:0]                 m_axi_gmem2_AWQOS,
  /// gmem2 AW region.
  output logic [3:0]                 m_axi_gmem2_AWREGION,
  /// gmem2 W valid.
  output logic                       m_axi_gmem2_WVALID,
  /// gmem2 W ready.
  input  wire logic                  m_axi_gmem2_WREADY,
  /// gmem2 W data.
  output logic [DATA_WIDTH-1:0]      m_axi_gmem2_WDATA,
  /// gmem2 W strobes.
  output logic [STRB_WIDTH-1:0]      m_axi_gmem2_WSTRB,
  /// gmem2 W last.
  output logic                       m_axi_gmem2_WLAST,
  /// gmem2 B valid.
  input  wire logic                  m_axi_gmem2_BVALID,
  /// gmem2 B ready.
  output logic                       m_axi_gmem2_BREADY,
  /// gmem2 B response.
  input  wire logic [1:0]            m_axi_gmem2_BRESP,
  /// gmem2 B ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem2_BID,
  /// gmem2 AR valid.
  output logic                       m_axi_gmem2_ARVALID,
  /// gmem2 AR ready.
  input  wire logic                  m_axi_gmem2_ARREADY,
  /// gmem2 AR address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem2_ARADDR,
  /// gmem2 AR ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem2_ARID,
  /// gmem2 AR length (beats - 1).
  output logic [7:0]                 m_axi_gmem2_ARLEN,
  /// gmem2 AR size.
  output logic [2:0]                 m_axi_gmem2_ARSIZE,
  /// gmem2 AR burst type.
  output logic [1:0]                 m_axi_gmem2_ARBURST,
  /// gmem2 AR lock.
  output logic                       m_axi_gmem2_ARLOCK,
  /// gmem2 AR cache.
  output logic [3:0]                 m_axi_gmem2_ARCACHE,
  /// gmem2 AR protection.
  output logic [2:0]                 m_axi_gmem2_ARPROT,
  /// gmem2 AR QoS.
  output logic [3:0]                 m_axi_gmem2_ARQOS,
  /// gmem2 AR region.
  output logic [3:0]                 m_axi_gmem2_ARREGION,
  /// gmem2 R valid.
  input  wire logic                  m_axi_gmem2_RVALID,
  /// gmem2 R ready.
  output logic                       m_axi_gmem2_RREADY,
  /// gmem2 R data.
  input  wire logic [DATA_WIDTH-1:0] m_axi_gmem2_RDATA,
  /// gmem2 R last.
  input  wire logic                  m_axi_gmem2_RLAST,
  /// gmem2 R ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem2_RID,
  /// gmem2 R response.
  input  wire logic [1:0]            m_axi_gmem2_RRESP,

  // ---- m_axi_gmem3: grad: dense gradient or sparse values (read only) ----
  /// gmem3 AW valid.
  output logic                       m_axi_gmem3_AWVALID,
  /// gmem3 AW ready.
  input  wire logic                  m_axi_gmem3_AWREADY,
  /// gmem3 AW address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem3_AWADDR,
  /// gmem3 AW ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem3_AWID,
  /// gmem3 AW length (beats - 1).
  output logic [7:0]                 m_axi_gmem3_AWLEN,
  /// gmem3 AW size.
  output logic [2:0]                 m_axi_gmem3_AWSIZE,
  /// gmem3 AW burst type.
  output logic [1:0]                 m_axi_gmem3_AWBURST,
  /// gmem3 AW lock.
  output logic                       m_axi_gmem3_AWLOCK,
  /// gmem3 AW cache.
  output logic [3:0]                 m_axi_gmem3_AWCACHE,
  /// gmem3 AW protection.
  output logic [2:0]                 m_axi_gmem3_AWPROT,
  /// gmem3 AW QoS.
  output logic [3:0]                 m_axi_gmem3_AWQOS,
  /// gmem3 AW region.
  output logic [3:0]                 m_axi_gmem3_AWREGION,
  /// gmem3 W valid.
  output logic                       m_axi_gmem3_WVALID,
  /// gmem3 W ready.
  input  wire logic                  m_axi_gmem3_WREADY,
  /// gmem3 W data.
  output logic [DATA_WIDTH-1:0]      m_axi_gmem3_WDATA,
  /// gmem3 W strobes.
  output logic [STRB_WIDTH-1:0]      m_axi_gmem3_WSTRB,
  /// gmem3 W last.
  output logic                       m_axi_gmem3_WLAST,
  /// gmem3 B valid.
  input  wire logic                  m_axi_gmem3_BVALID,
  /// gmem3 B ready.
  output logic                       m_axi_gmem3_BREADY,
  /// gmem3 B response.
  input  wire logic [1:0]            m_axi_gmem3_BRESP,
  /// gmem3 B ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem3_BID,
  /// gmem3 AR valid.
  output logic                       m_axi_gmem3_ARVALID,
  /// gmem3 AR ready.
  input  wire logic                  m_axi_gmem3_ARREADY,
  /// gmem3 AR address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem3_ARADDR,
  /// gmem3 AR ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem3_ARID,
  /// gmem3 AR length (beats - 1).
  output logic [7:0]                 m_axi_gmem3_ARLEN,
  /// gmem3 AR size.
  output logic [2:0]                 m_axi_gmem3_ARSIZE,
  /// gmem3 AR burst type.
  output logic [1:0]                 m_axi_gmem3_ARBURST,
  /// gmem3 AR lock.
  output logic                       m_axi_gmem3_ARLOCK,
  /// gmem3 AR cache.
  output logic [3:0]                 m_axi_gmem3_ARCACHE,
  /// gmem3 AR protection.
  output logic [2:0]                 m_axi_gmem3_ARPROT,
  /// gmem3 AR QoS.
  output logic [3:0]                 m_axi_gmem3_ARQOS,
  /// gmem3 AR region.
  output logic [3:0]                 m_axi_gmem3_ARREGION,
  /// gmem3 R valid.
  input  wire logic                  m_axi_gmem3_RVALID,
  /// gmem3 R ready.
  output logic                       m_axi_gmem3_RREADY,
  /// gmem3 R data.
  input  wire logic [DATA_WIDTH-1:0] m_axi_gmem3_RDATA,
  /// gmem3 R last.
  input  wire logic                  m_axi_gmem3_RLAST,
  /// gmem3 R ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem3_RID,
  /// gmem3 R response.
  input  wire logic [1:0]            m_axi_gmem3_RRESP,

  // ---- m_axi_gmem4: sp_idx: sparse offsets (read only) ----
  /// gmem4 AW valid.
  output logic                       m_axi_gmem4_AWVALID,
  /// gmem4 AW ready.
  input  wire logic                  m_axi_gmem4_AWREADY,
  /// gmem4 AW address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem4_AWADDR,
  /// gmem4 AW ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem4_AWID,
  /// gmem4 AW length (beats - 1).
  output logic [7:0]                 m_axi_gmem4_AWLEN,
  /// gmem4 AW size.
  output logic [2:0]                 m_axi_gmem4_AWSIZE,
  /// gmem4 AW burst type.
  output logic [1:0]                 m_axi_gmem4_AWBURST,
  /// gmem4 AW lock.
  output logic                       m_axi_gmem4_AWLOCK,
  /// gmem4 AW cache.
  output logic [3:0]                 m_axi_gmem4_AWCACHE,
  /// gmem4 AW protection.
  output logic [2:0]                 m_axi_gmem4_AWPROT,
  /// gmem4 AW QoS.
  output logic [3:0]                 m_axi_gmem4_AWQOS,
  /// gmem4 AW region.
  output logic [3:0]                 m_axi_gmem4_AWREGION,
  /// gmem4 W valid.
  output logic                       m_axi_gmem4_WVALID,
  /// gmem4 W ready.
  input  wire logic                  m_axi_gmem4_WREADY,
  /// gmem4 W data.
  output logic [DATA_WIDTH-1:0]      m_axi_gmem4_WDATA,
  /// gmem4 W strobes.
  output logic [STRB_WIDTH-1:0]      m_axi_gmem4_WSTRB,
  /// gmem4 W last.
  output logic                       m_axi_gmem4_WLAST,
  /// gmem4 B valid.
  input  wire logic                  m_axi_gmem4_BVALID,
  /// gmem4 B ready.
  output logic                       m_axi_gmem4_BREADY,
  /// gmem4 B response.
  input  wire logic [1:0]            m_axi_gmem4_BRESP,
  /// gmem4 B ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem4_BID,
  /// gmem4 AR valid.
  output logic                       m_axi_gmem4_ARVALID,
  /// gmem4 AR ready.
  input  wire logic                  m_axi_gmem4_ARREADY,
  /// gmem4 AR address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem4_ARADDR,
  /// gmem4 AR ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem4_ARID,
  /// gmem4 AR length (beats - 1).
  output logic [7:0]                 m_axi_gmem4_ARLEN,
  /// gmem4 AR size.
  output logic [2:0]                 m_axi_gmem4_ARSIZE,
  /// gmem4 AR burst type.
  output logic [1:0]                 m_axi_gmem4_ARBURST,
  /// gmem4 AR lock.
  output logic                       m_axi_gmem4_ARLOCK,
  /// gmem4 AR cache.
  output logic [3:0]                 m_axi_gmem4_ARCACHE,
  /// gmem4 AR protection.
  output logic [2:0]                 m_axi_gmem4_ARPROT,
  /// gmem4 AR QoS.
  output logic [3:0]                 m_axi_gmem4_ARQOS,
  /// gmem4 AR region.
  output logic [3:0]                 m_axi_gmem4_ARREGION,
  /// gmem4 R valid.
  input  wire logic                  m_axi_gmem4_RVALID,
  /// gmem4 R ready.
  output logic                       m_axi_gmem4_RREADY,
  /// gmem4 R data.
  input  wire logic [DATA_WIDTH-1:0] m_axi_gmem4_RDATA,
  /// gmem4 R last.
  input  wire logic                  m_axi_gmem4_RLAST,
  /// gmem4 R ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem4_RID,
  /// gmem4 R response.
  input  wire logic [1:0]            m_axi_gmem4_RRESP,

  // ---- m_axi_gmem5: sp_blk reads and the status write ----
  /// gmem5 AW valid.
  output logic                       m_axi_gmem5_AWVALID,
  /// gmem5 AW ready.
  input  wire logic                  m_axi_gmem5_AWREADY,
  /// gmem5 AW address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem5_AWADDR,
  /// gmem5 AW ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem5_AWID,
  /// gmem5 AW length (beats - 1).
  output logic [7:0]                 m_axi_gmem5_AWLEN,
  /// gmem5 AW size.
  output logic [2:0]                 m_axi_gmem5_AWSIZE,
  /// gmem5 AW burst type.
  output logic [1:0]                 m_axi_gmem5_AWBURST,
  /// gmem5 AW lock.
  output logic                       m_axi_gmem5_AWLOCK,
  /// gmem5 AW cache.
  output logic [3:0]                 m_axi_gmem5_AWCACHE,
  /// gmem5 AW protection.
  output logic [2:0]                 m_axi_gmem5_AWPROT,
  /// gmem5 AW QoS.
  output logic [3:0]                 m_axi_gmem5_AWQOS,
  /// gmem5 AW region.
  output logic [3:0]                 m_axi_gmem5_AWREGION,
  /// gmem5 W valid.
  output logic                       m_axi_gmem5_WVALID,
  /// gmem5 W ready.
  input  wire logic                  m_axi_gmem5_WREADY,
  /// gmem5 W data.
  output logic [DATA_WIDTH-1:0]      m_axi_gmem5_WDATA,
  /// gmem5 W strobes.
  output logic [STRB_WIDTH-1:0]      m_axi_gmem5_WSTRB,
  /// gmem5 W last.
  output logic                       m_axi_gmem5_WLAST,
  /// gmem5 B valid.
  input  wire logic                  m_axi_gmem5_BVALID,
  /// gmem5 B ready.
  output logic                       m_axi_gmem5_BREADY,
  /// gmem5 B response.
  input  wire logic [1:0]            m_axi_gmem5_BRESP,
  /// gmem5 B ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem5_BID,
  /// gmem5 AR valid.
  output logic                       m_axi_gmem5_ARVALID,
  /// gmem5 AR ready.
  input  wire logic                  m_axi_gmem5_ARREADY,
  /// gmem5 AR address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem5_ARADDR,
  /// gmem5 AR ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem5_ARID,
  /// gmem5 AR length (beats - 1).
  output logic [7:0]                 m_axi_gmem5_ARLEN,
  /// gmem5 AR size.
  output logic [2:0]                 m_axi_gmem5_ARSIZE,
  /// gmem5 AR burst type.
  output logic [1:0]                 m_axi_gmem5_ARBURST,
  /// gmem5 AR lock.
  output logic                       m_axi_gmem5_ARLOCK,
  /// gmem5 AR cache.
  output logic [3:0]                 m_axi_gmem5_ARCACHE,
  /// gmem5 AR protection.
  output logic [2:0]                 m_axi_gmem5_ARPROT,
  /// gmem5 AR QoS.
  output logic [3:0]                 m_axi_gmem5_ARQOS,
  /// gmem5 AR region.
  output logic [3:0]                 m_axi_gmem5_ARREGION,
  /// gmem5 R valid.
  input  wire logic                  m_axi_gmem5_RVALID,
  /// gmem5 R ready.
  output logic                       m_axi_gmem5_RREADY,
  /// gmem5 R data.
  input  wire logic [DATA_WIDTH-1:0] m_axi_gmem5_RDATA,
  /// gmem5 R last.
  input  wire logic                  m_axi_gmem5_RLAST,
  /// gmem5 R ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem5_RID,
  /// gmem5 R response.
  input  wire logic [1:0]            m_axi_gmem5_RRESP,

  // ---- m_axi_gmem6: out16: low-precision weights (write only) ----
  /// gmem6 AW valid.
  output logic                       m_axi_gmem6_AWVALID,
  /// gmem6 AW ready.
  input  wire logic                  m_axi_gmem6_AWREADY,
  /// gmem6 AW address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem6_AWADDR,
  /// gmem6 AW ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem6_AWID,
  /// gmem6 AW length (beats - 1).
  output logic [7:0]                 m_axi_gmem6_AWLEN,
  /// gmem6 AW size.
  output logic [2:0]                 m_axi_gmem6_AWSIZE,
  /// gmem6 AW burst type.
  output logic [1:0]                 m_axi_gmem6_AWBURST,
  /// gmem6 AW lock.
  output logic                       m_axi_gmem6_AWLOCK,
  /// gmem6 AW cache.
  output logic [3:0]                 m_axi_gmem6_AWCACHE,
  /// gmem6 AW protection.
  output logic [2:0]                 m_axi_gmem6_AWPROT,
  /// gmem6 AW QoS.
  output logic [3:0]                 m_axi_gmem6_AWQOS,
  /// gmem6 AW region.
  output logic [3:0]                 m_axi_gmem6_AWREGION,
  /// gmem6 W valid.
  output logic                       m_axi_gmem6_WVALID,
  /// gmem6 W ready.
  input  wire logic                  m_axi_gmem6_WREADY,
  /// gmem6 W data.
  output logic [DATA_WIDTH-1:0]      m_axi_gmem6_WDATA,
  /// gmem6 W strobes.
  output logic [STRB_WIDTH-1:0]      m_axi_gmem6_WSTRB,
  /// gmem6 W last.
  output logic                       m_axi_gmem6_WLAST,
  /// gmem6 B valid.
  input  wire logic                  m_axi_gmem6_BVALID,
  /// gmem6 B ready.
  output logic                       m_axi_gmem6_BREADY,
  /// gmem6 B response.
  input  wire logic [1:0]            m_axi_gmem6_BRESP,
  /// gmem6 B ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem6_BID,
  /// gmem6 AR valid.
  output logic                       m_axi_gmem6_ARVALID,
  /// gmem6 AR ready.
  input  wire logic                  m_axi_gmem6_ARREADY,
  /// gmem6 AR address.
  output logic [ADDR_WIDTH-1:0]      m_axi_gmem6_ARADDR,
  /// gmem6 AR ID.
  output logic [ID_WIDTH-1:0]        m_axi_gmem6_ARID,
  /// gmem6 AR length (beats - 1).
  output logic [7:0]                 m_axi_gmem6_ARLEN,
  /// gmem6 AR size.
  output logic [2:0]                 m_axi_gmem6_ARSIZE,
  /// gmem6 AR burst type.
  output logic [1:0]                 m_axi_gmem6_ARBURST,
  /// gmem6 AR lock.
  output logic                       m_axi_gmem6_ARLOCK,
  /// gmem6 AR cache.
  output logic [3:0]                 m_axi_gmem6_ARCACHE,
  /// gmem6 AR protection.
  output logic [2:0]                 m_axi_gmem6_ARPROT,
  /// gmem6 AR QoS.
  output logic [3:0]                 m_axi_gmem6_ARQOS,
  /// gmem6 AR region.
  output logic [3:0]                 m_axi_gmem6_ARREGION,
  /// gmem6 R valid.
  input  wire logic                  m_axi_gmem6_RVALID,
  /// gmem6 R ready.
  output logic                       m_axi_gmem6_RREADY,
  /// gmem6 R data.
  input  wire logic [DATA_WIDTH-1:0] m_axi_gmem6_RDATA,
  /// gmem6 R last.
  input  wire logic                  m_axi_gmem6_RLAST,
  /// gmem6 R ID.
  input  wire logic [ID_WIDTH-1:0]   m_axi_gmem6_RID,
  /// gmem6 R response.
  input  wire logic [1:0]            m_axi_gmem6_RRESP
);

  localparam int unsigned WordBits = Lanes * 32;

  // Pipeline latencies of the fp units, visible to the simulation (`csdkit bench rtl` reports
  // them); the core's lanes are built from these units.
  localparam int unsigned AddLatency /*verilator public*/ = csd_fp_pkg::ADD_LATENCY;
  localparam int unsigned MulLatency /*verilator public*/ = csd_fp_pkg::MUL_LATENCY;
  localparam int unsigned DivLatency /*verilator public*/ =
      csd_fp_pkg::digit_latency(csd_update_pkg::DIGIT_BITS_PER_STAGE);
  localparam int unsigned SqrtLatency /*verilator public*/ =
      csd_fp_pkg::digit_latency(csd_update_pkg::DIGIT_BITS_PER_STAGE);
  localparam int unsigned SignLatency /*verilator public*/ = csd_fp_pkg::SIGN_LATENCY;
  localparam int unsigned CvtLatency /*verilator public*/ = csd_fp_pkg::CVT_LATENCY;
  localparam int unsigned NumRd = csd_update_pkg::NUM_RD;
  localparam int unsigned NumWr = csd_update_pkg::NUM_WR;

  // ---- Reset: ap_rst_n registered once, then synchronous everywhere --------------------------

  logic rst_nq;
  always_ff @(posedge ap_clk) begin
    rst_nq <= ap_rst_n;
  end

  // ---- Control slave ------------------------------------------------------------------------

  localparam int unsigned ArgWords = csd_update_args_pkg::ARG_WORDS;

  axil_req_t                    axil_req;
  axil_resp_t                   axil_resp;
  logic [ArgWords*32-1:0]       arg_words;
  csd_update_args_pkg::args_t   args;
  logic                         ap_start, ap_done, ap_idle, ap_ready;

  assign axil_req.aw_addr  = s_axi_control_AWADDR;
  assign axil_req.aw_valid = s_axi_control_AWVALID;
  assign axil_req.w.data   = s_axi_control_WDATA;
  assign axil_req.w.strb   = s_axi_control_WSTRB;
  assign axil_req.w_valid  = s_axi_control_WVALID;
  assign axil_req.b_ready  = s_axi_control_BREADY;
  assign axil_req.ar_addr  = s_axi_control_ARADDR;
  assign axil_req.ar_valid = s_axi_control_ARVALID;
  assign axil_req.r_ready  = s_axi_control_RREADY;

  assign s_axi_control_AWREADY = axil_resp.aw_ready;
  assign s_axi_control_WREADY  = axil_resp.w_ready;
  assign s_axi_control_BVALID  = axil_resp.b_valid;
  assign s_axi_control_BRESP   = axil_resp.b_resp;
  assign s_axi_control_ARREADY = axil_resp.ar_ready;
  assign s_axi_control_RVALID  = axil_resp.r_valid;
  assign s_axi_control_RDATA   = axil_resp.r.data;
  assign s_axi_control_RRESP   = axil_resp.r.resp;

  csd_axil_ctrl #(
    .ArgWords   (ArgWords),
    .ArgWordMask(csd_update_args_pkg::ARG_WORD_MASK)
  ) u_ctrl (
    .clk_i      (ap_clk),
    .rst_ni     (rst_nq),
    .axil_req_i (axil_req),
    .axil_resp_o(axil_resp),
    .args_o     (arg_words),
    .ap_start_o (ap_start),
    .ap_done_i  (ap_done),
    .ap_idle_i  (ap_idle),
    .ap_ready_i (ap_ready),
    .interrupt_o(interrupt)
  );

  assign args = csd_update_args_pkg::args_from_words(arg_words);

  // ---- Launch sequencing: ap_start starts the core once; its done is ap_done/ap_ready -------

  typedef enum logic [1:0] {
    StIdle,   // waiting for ap_start
    StStart,  // start pulse to the core
    StBusy,   // the core runs
    StDone    // ap_done and ap_ready for one cycle
  } state_e;

  state_e state_d, state_q;
  logic   core_start, core_done, core_idle;

  always_comb begin
    state_d = state_q;
    unique case (state_q)
      StIdle:  if (ap_start && core_idle) state_d = StStart;
      StStart: state_d = StBusy;
      StBusy:  if (core_done) state_d = StDone;
      StDone:  state_d = StIdle;
      default: state_d = StIdle;
    endcase
  end

  assign core_start = (state_q == StStart);
  assign ap_idle    = (state_q == StIdle);
  assign ap_done    = (state_q == StDone);
  assign ap_ready   = (state_q == StDone);

  always_ff @(posedge ap_clk) begin
    if (!rst_nq) begin
      state_q <= StIdle;
    end else begin
      state_q <= state_d;
    end
  end

  // ---- The core -----------------------------------------------------------------------------

  logic [NumRd-1:0]                                rd_cmd_valid, rd_cmd_ready;
  logic [NumRd-1:0][csd_update_pkg::CMD_BITS-1:0]  rd_cmd_offset, rd_cmd_count;
  logic [NumRd-1:0]                                rd_valid, rd_ready;
  logic [NumRd-1:0][WordBits-1:0]                  rd_data;
  logic [NumWr-1:0]                                wr_cmd_valid, wr_cmd_ready;
  logic [NumWr-1:0][csd_update_pkg::CMD_BITS-1:0]  wr_cmd_offset, wr_cmd_count;
  logic [NumWr-1:0]                                wr_valid, wr_ready, wr_done;
  logic [NumWr-1:0][WordBits-1:0]                  wr_data;

  csd_update_core #(
    .Lanes (Lanes),
    .FtzDaz(FtzDaz)
  ) u_core (
    .clk_i          (ap_clk),
    .rst_ni         (rst_nq),
    .start_i        (core_start),
    .done_o         (core_done),
    .idle_o         (core_idle),
    .n_i            (args.n),
    .nnz_i          (args.nnz),
    .mode_i         (args.mode),
    .unscale_i      (args.unscale),
    .lr_i           (args.lr),
    .beta1_i        (args.beta1),
    .omb1_i         (args.omb1),
    .beta2_i        (args.beta2),
    .omb2_i         (args.omb2),
    .eps_i          (args.eps),
    .wd_i           (args.wd),
    .c1_i           (args.c1),
    .c2_i           (args.c2),
    .rd_cmd_valid_o (rd_cmd_valid),
    .rd_cmd_ready_i (rd_cmd_ready),
    .rd_cmd_offset_o(rd_cmd_offset),
    .rd_cmd_count_o (rd_cmd_count),
    .rd_valid_i     (rd_valid),
    .rd_ready_o     (rd_ready),
    .rd_data_i      (rd_data),
    .wr_cmd_valid_o (wr_cmd_valid),
    .wr_cmd_ready_i (wr_cmd_ready),
    .wr_cmd_offset_o(wr_cmd_offset),
    .wr_cmd_count_o (wr_cmd_count),
    .wr_valid_o     (wr_valid),
    .wr_ready_i     (wr_ready),
    .wr_data_o      (wr_data),
    .wr_done_i      (wr_done)
  );

  // ---- Masters: one per channel; base pointer + word offset * 64 ----------------------------

  /// The array base pointer of each channel, from the argument registers.
  logic [NumRd-1:0][ADDR_WIDTH-1:0] rd_base;
  logic [NumWr-1:0][ADDR_WIDTH-1:0] wr_base;

  assign rd_base[csd_update_pkg::RdTheta] = args.theta;
  assign rd_base[csd_update_pkg::RdM] = args.m;
  assign rd_base[csd_update_pkg::RdV] = args.v;
  assign rd_base[csd_update_pkg::RdGrad] = args.grad;
  assign rd_base[csd_update_pkg::RdIdx] = args.sp_idx;
  assign rd_base[csd_update_pkg::RdBlk] = args.sp_blk;
  assign wr_base[csd_update_pkg::WrTheta] = args.theta;
  assign wr_base[csd_update_pkg::WrM] = args.m;
  assign wr_base[csd_update_pkg::WrV] = args.v;
  assign wr_base[csd_update_pkg::WrOut16] = args.out16;
  assign wr_base[csd_update_pkg::WrStatus] = args.status;

  axi_rd_req_t  [NumRd-1:0] rd_req;
  axi_rd_resp_t [NumRd-1:0] rd_resp;
  axi_wr_req_t  [NumWr-1:0] wr_req;
  axi_wr_resp_t [NumWr-1:0] wr_resp;
  logic         [NumRd-1:0] rd_idle, rd_err;
  logic         [NumWr-1:0] wr_idle, wr_err;

  for (genvar c = 0; c < NumRd; c++) begin : gen_rd
    csd_axi_rd_master #(
      .MaxOutstanding(MaxOutstanding),
      .MaxBurstLen   (MaxBurstLen),
      .FifoDepth     (RdFifoDepth)
    ) u_rd (
      .clk_i       (ap_clk),
      .rst_ni      (rst_nq),
      .cmd_valid_i (rd_cmd_valid[c]),
      .cmd_ready_o (rd_cmd_ready[c]),
      .cmd_base_i  (rd_base[c] + {26'b0, rd_cmd_offset[c], 6'b0}),
      .cmd_len_i   (rd_cmd_count[c]),
      .data_valid_o(rd_valid[c]),
      .data_ready_i(rd_ready[c]),
      .data_o      (rd_data[c]),
      .idle_o      (rd_idle[c]),
      .err_o       (rd_err[c]),
      .err_clr_i   (core_start),
      .axi_req_o   (rd_req[c]),
      .axi_resp_i  (rd_resp[c])
    );
  end

  for (genvar c = 0; c < NumWr; c++) begin : gen_wr
    csd_axi_wr_master #(
      .MaxOutstanding(MaxOutstanding),
      .MaxBurstLen   (MaxBurstLen),
      .FifoDepth     (WrFifoDepth)
    ) u_wr (
      .clk_i       (ap_clk),
      .rst_ni      (rst_nq),
      .cmd_valid_i (wr_cmd_valid[c]),
      .cmd_ready_o (wr_cmd_ready[c]),
      .cmd_base_i  (wr_base[c] + {26'b0, wr_cmd_offset[c], 6'b0}),
      .cmd_len_i   (wr_cmd_count[c]),
      .data_valid_i(wr_valid[c]),
      .data_ready_o(wr_ready[c]),
      .data_i      (wr_data[c]),
      .done_o      (wr_done[c]),
      .idle_o      (wr_idle[c]),
      .err_o       (wr_err[c]),
      .err_clr_i   (core_start),
      .axi_req_o   (wr_req[c]),
      .axi_resp_i  (wr_resp[c])
    );
  end

  // AXI errors of the launch, kept for inspection (sticky until the next start).
  logic err_q;
  always_ff @(posedge ap_clk) begin
    if (!rst_nq || core_start) begin
      err_q <= 1'b0;
    end else begin
      err_q <= err_q | (|rd_err) | (|wr_err);
    end
  end
  logic unused_status;
  assign unused_status = err_q ^ (|rd_idle) ^ (|wr_idle);


  // ---- gmem0: theta: read and written in place -------------------------------
  assign m_axi_gmem0_ARVALID  = rd_req[csd_update_pkg::RdTheta].ar_valid;
  assign m_axi_gmem0_ARADDR   = rd_req[csd_update_pkg::RdTheta].ar.addr;
  assign m_axi_gmem0_ARID     = rd_req[csd_update_pkg::RdTheta].ar.id;
  assign m_axi_gmem0_ARLEN    = rd_req[csd_update_pkg::RdTheta].ar.len;
  assign m_axi_gmem0_ARSIZE   = rd_req[csd_update_pkg::RdTheta].ar.size;
  assign m_axi_gmem0_ARBURST  = rd_req[csd_update_pkg::RdTheta].ar.burst;
  assign m_axi_gmem0_ARLOCK   = rd_req[csd_update_pkg::RdTheta].ar.lock;
  assign m_axi_gmem0_ARCACHE  = rd_req[csd_update_pkg::RdTheta].ar.cache;
  assign m_axi_gmem0_ARPROT   = rd_req[csd_update_pkg::RdTheta].ar.prot;
  assign m_axi_gmem0_ARQOS    = rd_req[csd_update_pkg::RdTheta].ar.qos;
  assign m_axi_gmem0_ARREGION = rd_req[csd_update_pkg::RdTheta].ar.region;
  assign m_axi_gmem0_RREADY   = rd_req[csd_update_pkg::RdTheta].r_ready;
  assign rd_resp[csd_update_pkg::RdTheta].ar_ready = m_axi_gmem0_ARREADY;
  assign rd_resp[csd_update_pkg::RdTheta].r_valid = m_axi_gmem0_RVALID;
  assign rd_resp[csd_update_pkg::RdTheta].r.data = m_axi_gmem0_RDATA;
  assign rd_resp[csd_update_pkg::RdTheta].r.last = m_axi_gmem0_RLAST;
  assign rd_resp[csd_update_pkg::RdTheta].r.id = m_axi_gmem0_RID;
  assign rd_resp[csd_update_pkg::RdTheta].r.resp = m_axi_gmem0_RRESP;
  assign m_axi_gmem0_AWVALID  = wr_req[csd_update_pkg::WrTheta].aw_valid;
  assign m_axi_gmem0_AWADDR   = wr_req[csd_update_pkg::WrTheta].aw.addr;
  assign m_axi_gmem0_AWID     = wr_req[csd_update_pkg::WrTheta].aw.id;
  assign m_axi_gmem0_AWLEN    = wr_req[csd_update_pkg::WrTheta].aw.len;
  assign m_axi_gmem0_AWSIZE   = wr_req[csd_update_pkg::WrTheta].aw.size;
  assign m_axi_gmem0_AWBURST  = wr_req[csd_update_pkg::WrTheta].aw.burst;
  assign m_axi_gmem0_AWLOCK   = wr_req[csd_update_pkg::WrTheta].aw.lock;
  assign m_axi_gmem0_AWCACHE  = wr_req[csd_update_pkg::WrTheta].aw.cache;
  assign m_axi_gmem0_AWPROT   = wr_req[csd_update_pkg::WrTheta].aw.prot;
  assign m_axi_gmem0_AWQOS    = wr_req[csd_update_pkg::WrTheta].aw.qos;
  assign m_axi_gmem0_AWREGION = wr_req[csd_update_pkg::WrTheta].aw.region;
  assign m_axi_gmem0_WVALID   = wr_req[csd_update_pkg::WrTheta].w_valid;
  assign m_axi_gmem0_WDATA    = wr_req[csd_update_pkg::WrTheta].w.data;
  assign m_axi_gmem0_WSTRB    = wr_req[csd_update_pkg::WrTheta].w.strb;
  assign m_axi_gmem0_WLAST    = wr_req[csd_update_pkg::WrTheta].w.last;
  assign m_axi_gmem0_BREADY   = wr_req[csd_update_pkg::WrTheta].b_ready;
  assign wr_resp[csd_update_pkg::WrTheta].aw_ready = m_axi_gmem0_AWREADY;
  assign wr_resp[csd_update_pkg::WrTheta].w_ready = m_axi_gmem0_WREADY;
  assign wr_resp[csd_update_pkg::WrTheta].b_valid = m_axi_gmem0_BVALID;
  assign wr_resp[csd_update_pkg::WrTheta].b.resp = m_axi_gmem0_BRESP;
  assign wr_resp[csd_update_pkg::WrTheta].b.id = m_axi_gmem0_BID;

  // ---- gmem1: m: read and written in place -----------------------------------
  assign m_axi_gmem1_ARVALID  = rd_req[csd_update_pkg::RdM].ar_valid;
  assign m_axi_gmem1_ARADDR   = rd_req[csd_update_pkg::RdM].ar.addr;
  assign m_axi_gmem1_ARID     = rd_req[csd_update_pkg::RdM].ar.id;
  assign m_axi_gmem1_ARLEN    = rd_req[csd_update_pkg::RdM].ar.len;
  assign m_axi_gmem1_ARSIZE   = rd_req[csd_update_pkg::RdM].ar.size;
  assign m_axi_gmem1_ARBURST  = rd_req[csd_update_pkg::RdM].ar.burst;
  assign m_axi_gmem1_ARLOCK   = rd_req[csd_update_pkg::RdM].ar.lock;
  assign m_axi_gmem1_ARCACHE  = rd_req[csd_update_pkg::RdM].ar.cache;
  assign m_axi_gmem1_ARPROT   = rd_req[csd_update_pkg::RdM].ar.prot;
  assign m_axi_gmem1_ARQOS    = rd_req[csd_update_pkg::RdM].ar.qos;
  assign m_axi_gmem1_ARREGION = rd_req[csd_update_pkg::RdM].ar.region;
  assign m_axi_gmem1_RREADY   = rd_req[csd_update_pkg::RdM].r_ready;
  assign rd_resp[csd_update_pkg::RdM].ar_ready = m_axi_gmem1_ARREADY;
  assign rd_resp[csd_update_pkg::RdM].r_valid = m_axi_gmem1_RVALID;
  assign rd_resp[csd_update_pkg::RdM].r.data = m_axi_gmem1_RDATA;
  assign rd_resp[csd_update_pkg::RdM].r.last = m_axi_gmem1_RLAST;
  assign rd_resp[csd_update_pkg::RdM].r.id = m_axi_gmem1_RID;
  assign rd_resp[csd_update_pkg::RdM].r.resp = m_axi_gmem1_RRESP;
  assign m_axi_gmem1_AWVALID  = wr_req[csd_update_pkg::WrM].aw_valid;
  assign m_axi_gmem1_AWADDR   = wr_req[csd_update_pkg::WrM].aw.addr;
  assign m_axi_gmem1_AWID     = wr_req[csd_update_pkg::WrM].aw.id;
  assign m_axi_gmem1_AWLEN    = wr_req[csd_update_pkg::WrM].aw.len;
  assign m_axi_gmem1_AWSIZE   = wr_req[csd_update_pkg::WrM].aw.size;
  assign m_axi_gmem1_AWBURST  = wr_req[csd_update_pkg::WrM].aw.burst;
  assign m_axi_gmem1_AWLOCK   = wr_req[csd_update_pkg::WrM].aw.lock;
  assign m_axi_gmem1_AWCACHE  = wr_req[csd_update_pkg::WrM].aw.cache;
  assign m_axi_gmem1_AWPROT   = wr_req[csd_update_pkg::WrM].aw.prot;
  assign m_axi_gmem1_AWQOS    = wr_req[csd_update_pkg::WrM].aw.qos;
  assign m_axi_gmem1_AWREGION = wr_req[csd_update_pkg::WrM].aw.region;
  assign m_axi_gmem1_WVALID   = wr_req[csd_update_pkg::WrM].w_valid;
  assign m_axi_gmem1_WDATA    = wr_req[csd_update_pkg::WrM].w.data;
  assign m_axi_gmem1_WSTRB    = wr_req[csd_update_pkg::WrM].w.strb;
  assign m_axi_gmem1_WLAST    = wr_req[csd_update_pkg::WrM].w.last;
  assign m_axi_gmem1_BREADY   = wr_req[csd_update_pkg::WrM].b_ready;
  assign wr_resp[csd_update_pkg::WrM].aw_ready = m_axi_gmem1_AWREADY;
  assign wr_resp[csd_update_pkg::WrM].w_ready = m_axi_gmem1_WREADY;
  assign wr_resp[csd_update_pkg::WrM].b_valid = m_axi_gmem1_BVALID;
  assign wr_resp[csd_update_pkg::WrM].b.resp = m_axi_gmem1_BRESP;
  assign wr_resp[csd_update_pkg::WrM].b.id = m_axi_gmem1_BID;

  // ---- gmem2: v: read and written in place -----------------------------------
  assign m_axi_gmem2_ARVALID  = rd_req[csd_update_pkg::RdV].ar_valid;
  assign m_axi_gmem2_ARADDR   = rd_req[csd_update_pkg::RdV].ar.addr;
  assign m_axi_gmem2_ARID     = rd_req[csd_update_pkg::RdV].ar.id;
  assign m_axi_gmem2_ARLEN    = rd_req[csd_update_pkg::RdV].ar.len;
  assign m_axi_gmem2_ARSIZE   = rd_req[csd_update_pkg::RdV].ar.size;
  assign m_axi_gmem2_ARBURST  = rd_req[csd_update_pkg::RdV].ar.burst;
  assign m_axi_gmem2_ARLOCK   = rd_req[csd_update_pkg::RdV].ar.lock;
  assign m_axi_gmem2_ARCACHE  = rd_req[csd_update_pkg::RdV].ar.cache;
  assign m_axi_gmem2_ARPROT   = rd_req[csd_update_pkg::RdV].ar.prot;
  assign m_axi_gmem2_ARQOS    = rd_req[csd_update_pkg::RdV].ar.qos;
  assign m_axi_gmem2_ARREGION = rd_req[csd_update_pkg::RdV].ar.region;
  assign m_axi_gmem2_RREADY   = rd_req[csd_update_pkg::RdV].r_ready;
  assign rd_resp[csd_update_pkg::RdV].ar_ready = m_axi_gmem2_ARREADY;
  assign rd_resp[csd_update_pkg::RdV].r_valid = m_axi_gmem2_RVALID;
  assign rd_resp[csd_update_pkg::RdV].r.data = m_axi_gmem2_RDATA;
  assign rd_resp[csd_update_pkg::RdV].r.last = m_axi_gmem2_RLAST;
  assign rd_resp[csd_update_pkg::RdV].r.id = m_axi_gmem2_RID;
  assign rd_resp[csd_update_pkg::RdV].r.resp = m_axi_gmem2_RRESP;
  assign m_axi_gmem2_AWVALID  = wr_req[csd_update_pkg::WrV].aw_valid;
  assign m_axi_gmem2_AWADDR   = wr_req[csd_update_pkg::WrV].aw.addr;
  assign m_axi_gmem2_AWID     = wr_req[csd_update_pkg::WrV].aw.id;
  assign m_axi_gmem2_AWLEN    = wr_req[csd_update_pkg::WrV].aw.len;
  assign m_axi_gmem2_AWSIZE   = wr_req[csd_update_pkg::WrV].aw.size;
  assign m_axi_gmem2_AWBURST  = wr_req[csd_update_pkg::WrV].aw.burst;
  assign m_axi_gmem2_AWLOCK   = wr_req[csd_update_pkg::WrV].aw.lock;
  assign m_axi_gmem2_AWCACHE  = wr_req[csd_update_pkg::WrV].aw.cache;
  assign m_axi_gmem2_AWPROT   = wr_req[csd_update_pkg::WrV].aw.prot;
  assign m_axi_gmem2_AWQOS    = wr_req[csd_update_pkg::WrV].aw.qos;
  assign m_axi_gmem2_AWREGION = wr_req[csd_update_pkg::WrV].aw.region;
  assign m_axi_gmem2_WVALID   = wr_req[csd_update_pkg::WrV].w_valid;
  assign m_axi_gmem2_WDATA    = wr_req[csd_update_pkg::WrV].w.data;
  assign m_axi_gmem2_WSTRB    = wr_req[csd_update_pkg::WrV].w.strb;
  assign m_axi_gmem2_WLAST    = wr_req[csd_update_pkg::WrV].w.last;
  assign m_axi_gmem2_BREADY   = wr_req[csd_update_pkg::WrV].b_ready;
  assign wr_resp[csd_update_pkg::WrV].aw_ready = m_axi_gmem2_AWREADY;
  assign wr_resp[csd_update_pkg::WrV].w_ready = m_axi_gmem2_WREADY;
  assign wr_resp[csd_update_pkg::WrV].b_valid = m_axi_gmem2_BVALID;
  assign wr_resp[csd_update_pkg::WrV].b.resp = m_axi_gmem2_BRESP;
  assign wr_resp[csd_update_pkg::WrV].b.id = m_axi_gmem2_BID;

  // ---- gmem3: grad: dense gradient or sparse values (read only) --------------
  assign m_axi_gmem3_ARVALID  = rd_req[csd_update_pkg::RdGrad].ar_valid;
  assign m_axi_gmem3_ARADDR   = rd_req[csd_update_pkg::RdGrad].ar.addr;
  assign m_axi_gmem3_ARID     = rd_req[csd_update_pkg::RdGrad].ar.id;
  assign m_axi_gmem3_ARLEN    = rd_req[csd_update_pkg::RdGrad].ar.len;
  assign m_axi_gmem3_ARSIZE   = rd_req[csd_update_pkg::RdGrad].ar.size;
  assign m_axi_gmem3_ARBURST  = rd_req[csd_update_pkg::RdGrad].ar.burst;
  assign m_axi_gmem3_ARLOCK   = rd_req[csd_update_pkg::RdGrad].ar.lock;
  assign m_axi_gmem3_ARCACHE  = rd_req[csd_update_pkg::RdGrad].ar.cache;
  assign m_axi_gmem3_ARPROT   = rd_req[csd_update_pkg::RdGrad].ar.prot;
  assign m_axi_gmem3_ARQOS    = rd_req[csd_update_pkg::RdGrad].ar.qos;
  assign m_axi_gmem3_ARREGION = rd_req[csd_update_pkg::RdGrad].ar.region;
  assign m_axi_gmem3_RREADY   = rd_req[csd_update_pkg::RdGrad].r_ready;
  assign rd_resp[csd_update_pkg::RdGrad].ar_ready = m_axi_gmem3_ARREADY;
  assign rd_resp[csd_update_pkg::RdGrad].r_valid = m_axi_gmem3_RVALID;
  assign rd_resp[csd_update_pkg::RdGrad].r.data = m_axi_gmem3_RDATA;
  assign rd_resp[csd_update_pkg::RdGrad].r.last = m_axi_gmem3_RLAST;
  assign rd_resp[csd_update_pkg::RdGrad].r.id = m_axi_gmem3_RID;
  assign rd_resp[csd_update_pkg::RdGrad].r.resp = m_axi_gmem3_RRESP;
  assign m_axi_gmem3_AWVALID  = AXI_WR_REQ_IDLE.aw_valid;
  assign m_axi_gmem3_AWADDR   = AXI_WR_REQ_IDLE.aw.addr;
  assign m_axi_gmem3_AWID     = AXI_WR_REQ_IDLE.aw.id;
  assign m_axi_gmem3_AWLEN    = AXI_WR_REQ_IDLE.aw.len;
  assign m_axi_gmem3_AWSIZE   = AXI_WR_REQ_IDLE.aw.size;
  assign m_axi_gmem3_AWBURST  = AXI_WR_REQ_IDLE.aw.burst;
  assign m_axi_gmem3_AWLOCK   = AXI_WR_REQ_IDLE.aw.lock;
  assign m_axi_gmem3_AWCACHE  = AXI_WR_REQ_IDLE.aw.cache;
  assign m_axi_gmem3_AWPROT   = AXI_WR_REQ_IDLE.aw.prot;
  assign m_axi_gmem3_AWQOS    = AXI_WR_REQ_IDLE.aw.qos;
  assign m_axi_gmem3_AWREGION = AXI_WR_REQ_IDLE.aw.region;
  assign m_axi_gmem3_WVALID   = AXI_WR_REQ_IDLE.w_valid;
  assign m_axi_gmem3_WDATA    = AXI_WR_REQ_IDLE.w.data;
  assign m_axi_gmem3_WSTRB    = AXI_WR_REQ_IDLE.w.strb;
  assign m_axi_gmem3_WLAST    = AXI_WR_REQ_IDLE.w.last;
  assign m_axi_gmem3_BREADY   = AXI_WR_REQ_IDLE.b_ready;

  // ---- gmem4: sp_idx: sparse offsets (read only) -----------------------------
  assign m_axi_gmem4_ARVALID  = rd_req[csd_update_pkg::RdIdx].ar_valid;
  assign m_axi_gmem4_ARADDR   = rd_req[csd_update_pkg::RdIdx].ar.addr;
  assign m_axi_gmem4_ARID     = rd_req[csd_update_pkg::RdIdx].ar.id;
  assign m_axi_gmem4_ARLEN    = rd_req[csd_update_pkg::RdIdx].ar.len;
  assign m_axi_gmem4_ARSIZE   = rd_req[csd_update_pkg::RdIdx].ar.size;
  assign m_axi_gmem4_ARBURST  = rd_req[csd_update_pkg::RdIdx].ar.burst;
  assign m_axi_gmem4_ARLOCK   = rd_req[csd_update_pkg::RdIdx].ar.lock;
  assign m_axi_gmem4_ARCACHE  = rd_req[csd_update_pkg::RdIdx].ar.cache;
  assign m_axi_gmem4_ARPROT   = rd_req[csd_update_pkg::RdIdx].ar.prot;
  assign m_axi_gmem4_ARQOS    = rd_req[csd_update_pkg::RdIdx].ar.qos;
  assign m_axi_gmem4_ARREGION = rd_req[csd_update_pkg::RdIdx].ar.region;
  assign m_axi_gmem4_RREADY   = rd_req[csd_update_pkg::RdIdx].r_ready;
  assign rd_resp[csd_update_pkg::RdIdx].ar_ready = m_axi_gmem4_ARREADY;
  assign rd_resp[csd_update_pkg::RdIdx].r_valid = m_axi_gmem4_RVALID;
  assign rd_resp[csd_update_pkg::RdIdx].r.data = m_axi_gmem4_RDATA;
  assign rd_resp[csd_update_pkg::RdIdx].r.last = m_axi_gmem4_RLAST;
  assign rd_resp[csd_update_pkg::RdIdx].r.id = m_axi_gmem4_RID;
  assign rd_resp[csd_update_pkg::RdIdx].r.resp = m_axi_gmem4_RRESP;
  assign m_axi_gmem4_AWVALID  = AXI_WR_REQ_IDLE.aw_valid;
  assign m_axi_gmem4_AWADDR   = AXI_WR_REQ_IDLE.aw.addr;
  assign m_axi_gmem4_AWID     = AXI_WR_REQ_IDLE.aw.id;
  assign m_axi_gmem4_AWLEN    = AXI_WR_REQ_IDLE.aw.len;
  assign m_axi_gmem4_AWSIZE   = AXI_WR_REQ_IDLE.aw.size;
  assign m_axi_gmem4_AWBURST  = AXI_WR_REQ_IDLE.aw.burst;
  assign m_axi_gmem4_AWLOCK   = AXI_WR_REQ_IDLE.aw.lock;
  assign m_axi_gmem4_AWCACHE  = AXI_WR_REQ_IDLE.aw.cache;
  assign m_axi_gmem4_AWPROT   = AXI_WR_REQ_IDLE.aw.prot;
  assign m_axi_gmem4_AWQOS    = AXI_WR_REQ_IDLE.aw.qos;
  assign m_axi_gmem4_AWREGION = AXI_WR_REQ_IDLE.aw.region;
  assign m_axi_gmem4_WVALID   = AXI_WR_REQ_IDLE.w_valid;
  assign m_axi_gmem4_WDATA    = AXI_WR_REQ_IDLE.w.data;
  assign m_axi_gmem4_WSTRB    = AXI_WR_REQ_IDLE.w.strb;
  assign m_axi_gmem4_WLAST    = AXI_WR_REQ_IDLE.w.last;
  assign m_axi_gmem4_BREADY   = AXI_WR_REQ_IDLE.b_ready;

  // ---- gmem5: sp_blk reads and the status write ------------------------------
  assign m_axi_gmem5_ARVALID  = rd_req[csd_update_pkg::RdBlk].ar_valid;
  assign m_axi_gmem5_ARADDR   = rd_req[csd_update_pkg::RdBlk].ar.addr;
  assign m_axi_gmem5_ARID     = rd_req[csd_update_pkg::RdBlk].ar.id;
  assign m_axi_gmem5_ARLEN    = rd_req[csd_update_pkg::RdBlk].ar.len;
  assign m_axi_gmem5_ARSIZE   = rd_req[csd_update_pkg::RdBlk].ar.size;
  assign m_axi_gmem5_ARBURST  = rd_req[csd_update_pkg::RdBlk].ar.burst;
  assign m_axi_gmem5_ARLOCK   = rd_req[csd_update_pkg::RdBlk].ar.lock;
  assign m_axi_gmem5_ARCACHE  = rd_req[csd_update_pkg::RdBlk].ar.cache;
  assign m_axi_gmem5_ARPROT   = rd_req[csd_update_pkg::RdBlk].ar.prot;
  assign m_axi_gmem5_ARQOS    = rd_req[csd_update_pkg::RdBlk].ar.qos;
  assign m_axi_gmem5_ARREGION = rd_req[csd_update_pkg::RdBlk].ar.region;
  assign m_axi_gmem5_RREADY   = rd_req[csd_update_pkg::RdBlk].r_ready;
  assign rd_resp[csd_update_pkg::RdBlk].ar_ready = m_axi_gmem5_ARREADY;
  assign rd_resp[csd_update_pkg::RdBlk].r_valid = m_axi_gmem5_RVALID;
  assign rd_resp[csd_update_pkg::RdBlk].r.data = m_axi_gmem5_RDATA;
  assign rd_resp[csd_update_pkg::RdBlk].r.last = m_axi_gmem5_RLAST;
  assign rd_resp[csd_update_pkg::RdBlk].r.id = m_axi_gmem5_RID;
  assign rd_resp[csd_update_pkg::RdBlk].r.resp = m_axi_gmem5_RRESP;
  assign m_axi_gmem5_AWVALID  = wr_req[csd_update_pkg::WrStatus].aw_valid;
  assign m_axi_gmem5_AWADDR   = wr_req[csd_update_pkg::WrStatus].aw.addr;
  assign m_axi_gmem5_AWID     = wr_req[csd_update_pkg::WrStatus].aw.id;
  assign m_axi_gmem5_AWLEN    = wr_req[csd_update_pkg::WrStatus].aw.len;
  assign m_axi_gmem5_AWSIZE   = wr_req[csd_update_pkg::WrStatus].aw.size;
  assign m_axi_gmem5_AWBURST  = wr_req[csd_update_pkg::WrStatus].aw.burst;
  assign m_axi_gmem5_AWLOCK   = wr_req[csd_update_pkg::WrStatus].aw.lock;
  assign m_axi_gmem5_AWCACHE  = wr_req[csd_update_pkg::WrStatus].aw.cache;
  assign m_axi_gmem5_AWPROT   = wr_req[csd_update_pkg::WrStatus].aw.prot;
  assign m_axi_gmem5_AWQOS    = wr_req[csd_update_pkg::WrStatus].aw.qos;
  assign m_axi_gmem5_AWREGION = wr_req[csd_update_pkg::WrStatus].aw.region;
  assign m_axi_gmem5_WVALID   = wr_req[csd_update_pkg::WrStatus].w_valid;
  assign m_axi_gmem5_WDATA    = wr_req[csd_update_pkg::WrStatus].w.data;
  assign m_axi_gmem5_WSTRB    = wr_req[csd_update_pkg::WrStatus].w.strb;
  assign m_axi_gmem5_WLAST    = wr_req[csd_update_pkg::WrStatus].w.last;
  assign m_axi_gmem5_BREADY   = wr_req[csd_update_pkg::WrStatus].b_ready;
  assign wr_resp[csd_update_pkg::WrStatus].aw_ready = m_axi_gmem5_AWREADY;
  assign wr_resp[csd_update_pkg::WrStatus].w_ready = m_axi_gmem5_WREADY;
  assign wr_resp[csd_update_pkg::WrStatus].b_valid = m_axi_gmem5_BVALID;
  assign wr_resp[csd_update_pkg::WrStatus].b.resp = m_axi_gmem5_BRESP;
  assign wr_resp[csd_update_pkg::WrStatus].b.id = m_axi_gmem5_BID;

  // ---- gmem6: out16: low-precision weights (write only) ----------------------
  assign m_axi_gmem6_ARVALID  = AXI_RD_REQ_IDLE.ar_valid;
  assign m_axi_gmem6_ARADDR   = AXI_RD_REQ_IDLE.ar.addr;
  assign m_axi_gmem6_ARID     = AXI_RD_REQ_IDLE.ar.id;
  assign m_axi_gmem6_ARLEN    = AXI_RD_REQ_IDLE.ar.len;
  assign m_axi_gmem6_ARSIZE   = AXI_RD_REQ_IDLE.ar.size;
  assign m_axi_gmem6_ARBURST  = AXI_RD_REQ_IDLE.ar.burst;
  assign m_axi_gmem6_ARLOCK   = AXI_RD_REQ_IDLE.ar.lock;
  assign m_axi_gmem6_ARCACHE  = AXI_RD_REQ_IDLE.ar.cache;
  assign m_axi_gmem6_ARPROT   = AXI_RD_REQ_IDLE.ar.prot;
  assign m_axi_gmem6_ARQOS    = AXI_RD_REQ_IDLE.ar.qos;
  assign m_axi_gmem6_ARREGION = AXI_RD_REQ_IDLE.ar.region;
  assign m_axi_gmem6_RREADY   = AXI_RD_REQ_IDLE.r_ready;
  assign m_axi_gmem6_AWVALID  = wr_req[csd_update_pkg::WrOut16].aw_valid;
  assign m_axi_gmem6_AWADDR   = wr_req[csd_update_pkg::WrOut16].aw.addr;
  assign m_axi_gmem6_AWID     = wr_req[csd_update_pkg::WrOut16].aw.id;
  assign m_axi_gmem6_AWLEN    = wr_req[csd_update_pkg::WrOut16].aw.len;
  assign m_axi_gmem6_AWSIZE   = wr_req[csd_update_pkg::WrOut16].aw.size;
  assign m_axi_gmem6_AWBURST  = wr_req[csd_update_pkg::WrOut16].aw.burst;
  assign m_axi_gmem6_AWLOCK   = wr_req[csd_update_pkg::WrOut16].aw.lock;
  assign m_axi_gmem6_AWCACHE  = wr_req[csd_update_pkg::WrOut16].aw.cache;
  assign m_axi_gmem6_AWPROT   = wr_req[csd_update_pkg::WrOut16].aw.prot;
  assign m_axi_gmem6_AWQOS    = wr_req[csd_update_pkg::WrOut16].aw.qos;
  assign m_axi_gmem6_AWREGION = wr_req[csd_update_pkg::WrOut16].aw.region;
  assign m_axi_gmem6_WVALID   = wr_req[csd_update_pkg::WrOut16].w_valid;
  assign m_axi_gmem6_WDATA    = wr_req[csd_update_pkg::WrOut16].w.data;
  assign m_axi_gmem6_WSTRB    = wr_req[csd_update_pkg::WrOut16].w.strb;
  assign m_axi_gmem6_WLAST    = wr_req[csd_update_pkg::WrOut16].w.last;
  assign m_axi_gmem6_BREADY   = wr_req[csd_update_pkg::WrOut16].b_ready;
  assign wr_resp[csd_update_pkg::WrOut16].aw_ready = m_axi_gmem6_AWREADY;
  assign wr_resp[csd_update_pkg::WrOut16].w_ready = m_axi_gmem6_WREADY;
  assign wr_resp[csd_update_pkg::WrOut16].b_valid = m_axi_gmem6_BVALID;
  assign wr_resp[csd_update_pkg::WrOut16].b.resp = m_axi_gmem6_BRESP;
  assign wr_resp[csd_update_pkg::WrOut16].b.id = m_axi_gmem6_BID;

  // Inputs of the idle halves of read-only and write-only bundles.
  logic unused_idle_halves;
  assign unused_idle_halves = ^{m_axi_gmem3_AWREADY,
                                   m_axi_gmem3_WREADY,
                                   m_axi_gmem3_BVALID,
                                   m_axi_gmem3_BRESP,
                                   m_axi_gmem3_BID,
                                   m_axi_gmem4_AWREADY,
                                   m_axi_gmem4_WREADY,
                                   m_axi_gmem4_BVALID,
                                   m_axi_gmem4_BRESP,
                                   m_axi_gmem4_BID,
                                   m_axi_gmem6_ARREADY,
                                   m_axi_gmem6_RVALID,
                                   m_axi_gmem6_RDATA,
                                   m_axi_gmem6_RLAST,
                                   m_axi_gmem6_RID,
                                   m_axi_gmem6_RRESP};

endmodule

