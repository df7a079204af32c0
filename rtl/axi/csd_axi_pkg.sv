// csd_axi_pkg: the AXI4 and AXI4-Lite bundle types of the csdkit kernels, as packed structs in
// the manner of pulp-platform/axi (one request struct from manager to subordinate, one response
// struct back), plus the constants of the memory interface of the SmartSSD: 64-bit byte
// addresses, 512-bit (64-byte) data beats, INCR bursts that never cross a 4 KiB page.
//
// Besides the full bundle (axi_req_t / axi_resp_t) there are the read half and the write half
// as their own types: a read master drives only AR and R-ready, a write master only AW, W and
// B-ready, and a kernel top joins the halves of a bundle that is both read and written (a
// buffer updated in place) with axi_req_join. The AXI4-Lite types have exactly the signals of
// the Vitis `s_axi_control` port (no AxPROT).

`default_nettype none

package csd_axi_pkg;

  // ---- Memory interface constants ----------------------------------------------------------

  /// Byte address width of the m_axi ports.
  localparam int unsigned ADDR_WIDTH = 64;
  /// Data width of the m_axi ports: one 512-bit kernel word per beat.
  localparam int unsigned DATA_WIDTH = 512;
  /// Write strobe width: one bit per data byte.
  localparam int unsigned STRB_WIDTH = DATA_WIDTH / 8;
  /// Transaction ID width. The kernels use a single ID per bundle (all bursts of a bundle
  /// complete in order); widen here if a master ever needs out-of-order completion.
  localparam int unsigned ID_WIDTH = 1;
  /// Bytes per beat, and its log2 (the AxSIZE of every burst).
  localparam int unsigned BEAT_BYTES = DATA_WIDTH / 8;
  localparam int unsigned BEAT_SHIFT = 6;
  /// AXI4 limit of an INCR burst, in beats.
  localparam int unsigned AXI_MAX_BURST = 256;
  /// Bursts must not cross a 4 KiB page (AXI4 A3.4.1): log2 of the page size ...
  localparam int unsigned PAGE_SHIFT = 12;
  /// ... and the beats in one page. With 64-byte beats this is 64, so the page rule is the
  /// binding one and the 256-beat limit can never be reached by a legal burst.
  localparam int unsigned PAGE_BEATS = 1 << (PAGE_SHIFT - BEAT_SHIFT);
  /// Width of a burst length in beats (1 .. PAGE_BEATS).
  localparam int unsigned BEATS_WIDTH = $clog2(PAGE_BEATS + 1);

  // ---- Channel field types -----------------------------------------------------------------

  typedef logic [ADDR_WIDTH-1:0] addr_t;
  typedef logic [DATA_WIDTH-1:0] data_t;
  typedef logic [STRB_WIDTH-1:0] strb_t;
  typedef logic [ID_WIDTH-1:0]   id_t;
  typedef logic [7:0]            len_t;     // beats - 1
  typedef logic [2:0]            size_t;    // log2(bytes per beat)
  typedef logic [1:0]            burst_t;
  typedef logic [3:0]            cache_t;
  typedef logic [2:0]            prot_t;
  typedef logic [3:0]            qos_t;
  typedef logic [3:0]            region_t;
  typedef logic [1:0]            resp_t;
  typedef logic [BEATS_WIDTH-1:0] beats_t;  // a burst's length in beats, 1 .. PAGE_BEATS

  /// AxBURST encodings.
  localparam burst_t BURST_FIXED = 2'b00;
  localparam burst_t BURST_INCR  = 2'b01;
  /// xRESP encodings; bit 1 set means the access failed.
  localparam resp_t RESP_OKAY   = 2'b00;
  localparam resp_t RESP_EXOKAY = 2'b01;
  localparam resp_t RESP_SLVERR = 2'b10;
  localparam resp_t RESP_DECERR = 2'b11;
  /// AxSIZE of a full-width beat.
  localparam size_t SIZE_BEAT = size_t'(BEAT_SHIFT);
  /// AxCACHE of every burst: normal non-cacheable bufferable memory, as Vitis HLS emits.
  localparam cache_t CACHE_MODIFIABLE_BUFFERABLE = 4'b0011;

  // ---- AXI4 channels -------------------------------------------------------------------------

  /// AW or AR channel payload.
  typedef struct packed {
    id_t     id;
    addr_t   addr;
    len_t    len;
    size_t   size;
    burst_t  burst;
    logic    lock;
    cache_t  cache;
    prot_t   prot;
    qos_t    qos;
    region_t region;
  } ax_chan_t;
  typedef ax_chan_t aw_chan_t;
  typedef ax_chan_t ar_chan_t;

  /// W channel payload.
  typedef struct packed {
    data_t data;
    strb_t strb;
    logic  last;
  } w_chan_t;

  /// B channel payload.
  typedef struct packed {
    id_t   id;
    resp_t resp;
  } b_chan_t;

  /// R channel payload.
  typedef struct packed {
    id_t   id;
    data_t data;
    resp_t resp;
    logic  last;
  } r_chan_t;

  // ---- AXI4 bundles --------------------------------------------------------------------------

  /// Read half, manager to subordinate.
  typedef struct packed {
    ar_chan_t ar;
    logic     ar_valid;
    logic     r_ready;
  } axi_rd_req_t;

  /// Read half, subordinate to manager.
  typedef struct packed {
    logic    ar_ready;
    r_chan_t r;
    logic    r_valid;
  } axi_rd_resp_t;

  /// Write half, manager to subordinate.
  typedef struct packed {
    aw_chan_t aw;
    logic     aw_valid;
    w_chan_t  w;
    logic     w_valid;
    logic     b_ready;
  } axi_wr_req_t;

  /// Write half, subordinate to manager.
  typedef struct packed {
    logic    aw_ready;
    logic    w_ready;
    b_chan_t b;
    logic    b_valid;
  } axi_wr_resp_t;

  /// Full bundle, manager to subordinate (pulp-platform/axi field names).
  typedef struct packed {
    aw_chan_t aw;
    logic     aw_valid;
    w_chan_t  w;
    logic     w_valid;
    logic     b_ready;
    ar_chan_t ar;
    logic     ar_valid;
    logic     r_ready;
  } axi_req_t;

  /// Full bundle, subordinate to manager.
  typedef struct packed {
    logic    aw_ready;
    logic    ar_ready;
    logic    w_ready;
    logic    b_valid;
    b_chan_t b;
    logic    r_valid;
    r_chan_t r;
  } axi_resp_t;

  /// A read half that never reads (for a bundle that is only written).
  localparam axi_rd_req_t AXI_RD_REQ_IDLE = '{ar: '0, ar_valid: 1'b0, r_ready: 1'b1};
  /// A write half that never writes (for a bundle that is only read).
  localparam axi_wr_req_t AXI_WR_REQ_IDLE = '{aw: '0, aw_valid: 1'b0, w: '0, w_valid: 1'b0,
                                              b_ready: 1'b1};

  /// Joins a read half and a write half into one bundle request.
  function automatic axi_req_t axi_req_join(axi_rd_req_t rd, axi_wr_req_t wr);
    axi_req_t req;
    req.aw       = wr.aw;
    req.aw_valid = wr.aw_valid;
    req.w        = wr.w;
    req.w_valid  = wr.w_valid;
    req.b_ready  = wr.b_ready;
    req.ar       = rd.ar;
    req.ar_valid = rd.ar_valid;
    req.r_ready  = rd.r_ready;
    return req;
  endfunction

  /// The read half of a bundle response.
  function automatic axi_rd_resp_t axi_resp_rd(axi_resp_t resp);
    axi_rd_resp_t rd;
    rd.ar_ready = resp.ar_ready;
    rd.r        = resp.r;
    rd.r_valid  = resp.r_valid;
    return rd;
  endfunction

  /// The write half of a bundle response.
  function automatic axi_wr_resp_t axi_resp_wr(axi_resp_t resp);
    axi_wr_resp_t wr;
    wr.aw_ready = resp.aw_ready;
    wr.w_ready  = resp.w_ready;
    wr.b        = resp.b;
    wr.b_valid  = resp.b_valid;
    return wr;
  endfunction

  // ---- Burst arithmetic (both masters) -------------------------------------------------------

  /// Beats of the next burst of a command: up to the end of the 4 KiB page, at most max_beats
  /// (1 .. PAGE_BEATS), at most words_left (0 when nothing is left). page_beat is the beat of
  /// the burst's first address within its page: addr[PAGE_SHIFT-1:BEAT_SHIFT].
  function automatic beats_t burst_beats(logic [PAGE_SHIFT-BEAT_SHIFT-1:0] page_beat,
                                         logic [31:0] words_left, beats_t max_beats);
    beats_t page_left, cap;
    page_left = beats_t'(PAGE_BEATS) - beats_t'(page_beat);
    cap       = (page_left < max_beats) ? page_left : max_beats;
    return (words_left < 32'(cap)) ? beats_t'(words_left) : cap;
  endfunction

  /// The byte address after a burst of `beats` full-width beats from addr.
  function automatic addr_t burst_next_addr(addr_t addr, beats_t beats);
    return addr + {{(ADDR_WIDTH - BEATS_WIDTH - BEAT_SHIFT){1'b0}}, beats, {BEAT_SHIFT{1'b0}}};
  endfunction

  // ---- AXI4-Lite (the s_axi_control port) --------------------------------------------------

  /// Byte address width of the control port (the register file ends below 0x200; Vitis HLS
  /// sizes C_S_AXI_CONTROL_ADDR_WIDTH the same way, from the end of the register file).
  localparam int unsigned LITE_ADDR_WIDTH = 9;
  /// Data width of the control port.
  localparam int unsigned LITE_DATA_WIDTH = 32;

  typedef logic [LITE_ADDR_WIDTH-1:0]   lite_addr_t;
  typedef logic [LITE_DATA_WIDTH-1:0]   lite_data_t;
  typedef logic [LITE_DATA_WIDTH/8-1:0] lite_strb_t;

  /// AXI4-Lite W channel payload.
  typedef struct packed {
    lite_data_t data;
    lite_strb_t strb;
  } axil_w_chan_t;

  /// AXI4-Lite R channel payload.
  typedef struct packed {
    lite_data_t data;
    resp_t      resp;
  } axil_r_chan_t;

  /// AXI4-Lite bundle, manager to subordinate.
  typedef struct packed {
    lite_addr_t   aw_addr;
    logic         aw_valid;
    axil_w_chan_t w;
    logic         w_valid;
    logic         b_ready;
    lite_addr_t   ar_addr;
    logic         ar_valid;
    logic         r_ready;
  } axil_req_t;

  /// AXI4-Lite bundle, subordinate to manager.
  typedef struct packed {
    logic         aw_ready;
    logic         w_ready;
    resp_t        b_resp;
    logic         b_valid;
    logic         ar_ready;
    axil_r_chan_t r;
    logic         r_valid;
  } axil_resp_t;

endpackage
