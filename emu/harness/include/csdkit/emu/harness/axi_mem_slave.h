// AxiMemSlave: an AXI4 memory subordinate on one m_axi bundle of a Verilated kernel, backed by
// the host memory of a MemoryMap. One per bundle; several can share one map.
//
// What it models: INCR bursts of full-width beats, WSTRB, several outstanding bursts per
// direction (in-order completion), a seeded random latency per burst (AR accepted -> first R
// beat; last W beat -> B) and seeded random gaps on every channel: AWREADY, WREADY, ARREADY low,
// RVALID and BVALID late (once raised, a valid stays up until its handshake, as AXI requires).
// W beats may arrive before their AW; they wait in a buffer.
//
// What it enforces — a violation throws SimError naming the bundle, the cycle, the address,
// the length and the rule:
//   - AxBURST INCR, AxSIZE = the full data width;
//   - the address aligned to the beat;
//   - at most 256 beats per burst;
//   - no burst crosses a 4 KiB boundary;
//   - the whole burst inside one mapped region;
//   - WLAST exactly on the last beat of each burst;
//   - AxVALID / WVALID not dropped, and their payload not changed, before the handshake.
// Intentional error responses: AddErrorRange() makes bursts touching a range answer SLVERR
// (reads return zeros, writes are dropped).
//
// Binding, generic over the top's port names:
//   AxiMemSlave gmem0(&sim, "gmem0", CSDKIT_AXI_PORTS(dut.top(), m_axi_gmem0), &mem, opts);
// CSDKIT_AXI_READ_PORTS / CSDKIT_AXI_WRITE_PORTS bind only one half, for a bundle whose top has
// only read or only write channels. The ID ports are part of the binding (ARID/RID, AWID/BID).
#ifndef CSDKIT_EMU_HARNESS_AXI_MEM_SLAVE_H_
#define CSDKIT_EMU_HARNESS_AXI_MEM_SLAVE_H_

#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "csdkit/emu/harness/memory_map.h"
#include "csdkit/emu/harness/signal.h"
#include "csdkit/emu/harness/sim.h"

namespace csdkit {
namespace emu {

/// The ports of one AXI4 bundle. Unbound halves (all of ar_*/r_* or all of aw_*/w_*/b_*) are
/// simply not served.
struct AxiPorts {
  // Read address and data.
  Sig ar_valid, ar_ready, ar_addr, ar_len, ar_size, ar_burst, ar_id;
  Sig r_valid, r_ready, r_last, r_resp, r_id;
  WideSig r_data;
  // Write address, data and response.
  Sig aw_valid, aw_ready, aw_addr, aw_len, aw_size, aw_burst, aw_id;
  Sig w_valid, w_ready, w_strb, w_last;
  WideSig w_data;
  Sig b_valid, b_ready, b_resp, b_id;

  bool has_read() const { return ar_valid.bound(); }
  bool has_write() const { return aw_valid.bound(); }
};

// Port binding by name: `top` is a pointer to the Verilated top, `bundle` the port prefix
// (m_axi_gmem0), so CSDKIT_AXI_PORTS(t, m_axi_gmem0) binds t->m_axi_gmem0_ARVALID and so on.
#define CSDKIT_AXI_BIND_READ_(p, top, bundle)                       \
  do {                                                              \
    (p).ar_valid = ::csdkit::emu::Sig((top)->bundle##_ARVALID);     \
    (p).ar_ready = ::csdkit::emu::Sig((top)->bundle##_ARREADY);     \
    (p).ar_addr = ::csdkit::emu::Sig((top)->bundle##_ARADDR);       \
    (p).ar_len = ::csdkit::emu::Sig((top)->bundle##_ARLEN);         \
    (p).ar_size = ::csdkit::emu::Sig((top)->bundle##_ARSIZE);       \
    (p).ar_burst = ::csdkit::emu::Sig((top)->bundle##_ARBURST);     \
    (p).ar_id = ::csdkit::emu::Sig((top)->bundle##_ARID);           \
    (p).r_valid = ::csdkit::emu::Sig((top)->bundle##_RVALID);       \
    (p).r_ready = ::csdkit::emu::Sig((top)->bundle##_RREADY);       \
    (p).r_last = ::csdkit::emu::Sig((top)->bundle##_RLAST);         \
    (p).r_resp = ::csdkit::emu::Sig((top)->bundle##_RRESP);         \
    (p).r_id = ::csdkit::emu::Sig((top)->bundle##_RID);             \
    (p).r_data = ::csdkit::emu::WideSig((top)->bundle##_RDATA);     \
  } while (0)
#define CSDKIT_AXI_BIND_WRITE_(p, top, bundle)                      \
  do {                                                              \
    (p).aw_valid = ::csdkit::emu::Sig((top)->bundle##_AWVALID);     \
    (p).aw_ready = ::csdkit::emu::Sig((top)->bundle##_AWREADY);     \
    (p).aw_addr = ::csdkit::emu::Sig((top)->bundle##_AWADDR);       \
    (p).aw_len = ::csdkit::emu::Sig((top)->bundle##_AWLEN);         \
    (p).aw_size = ::csdkit::emu::Sig((top)->bundle##_AWSIZE);       \
    (p).aw_burst = ::csdkit::emu::Sig((top)->bundle##_AWBURST);     \
    (p).aw_id = ::csdkit::emu::Sig((top)->bundle##_AWID);           \
    (p).w_valid = ::csdkit::emu::Sig((top)->bundle##_WVALID);       \
    (p).w_ready = ::csdkit::emu::Sig((top)->bundle##_WREADY);       \
    (p).w_strb = ::csdkit::emu::Sig((top)->bundle##_WSTRB);         \
    (p).w_last = ::csdkit::emu::Sig((top)->bundle##_WLAST);         \
    (p).w_data = ::csdkit::emu::WideSig((top)->bundle##_WDATA);     \
    (p).b_valid = ::csdkit::emu::Sig((top)->bundle##_BVALID);       \
    (p).b_ready = ::csdkit::emu::Sig((top)->bundle##_BREADY);       \
    (p).b_resp = ::csdkit::emu::Sig((top)->bundle##_BRESP);         \
    (p).b_id = ::csdkit::emu::Sig((top)->bundle##_BID);             \
  } while (0)

/// Both halves of bundle `bundle` of `top`.
#define CSDKIT_AXI_PORTS(top, bundle)          \
  ([&]() {                                     \
    ::csdkit::emu::AxiPorts p_;                \
    CSDKIT_AXI_BIND_READ_(p_, top, bundle);    \
    CSDKIT_AXI_BIND_WRITE_(p_, top, bundle);   \
    return p_;                                 \
  }())
/// Only the read half (a top without write channels on this bundle).
#define CSDKIT_AXI_READ_PORTS(top, bundle)     \
  ([&]() {                                     \
    ::csdkit::emu::AxiPorts p_;                \
    CSDKIT_AXI_BIND_READ_(p_, top, bundle);    \
    return p_;                                 \
  }())
/// Only the write half (a top without read channels on this bundle).
#define CSDKIT_AXI_WRITE_PORTS(top, bundle)    \
  ([&]() {                                     \
    ::csdkit::emu::AxiPorts p_;                \
    CSDKIT_AXI_BIND_WRITE_(p_, top, bundle);   \
    return p_;                                 \
  }())

/// Timing behaviour of a slave. Gaps are probabilities per cycle.
struct AxiSlaveOptions {
  uint64_t seed = 1;
  double ar_gap = 0.0;   // ARREADY held low
  double r_gap = 0.0;    // a ready R beat not yet presented
  double aw_gap = 0.0;   // AWREADY held low
  double w_gap = 0.0;    // WREADY held low
  double b_gap = 0.0;    // a ready B not yet presented
  unsigned rd_latency_min = 1, rd_latency_max = 1;  // AR accepted -> first R beat may go
  unsigned wr_latency_min = 1, wr_latency_max = 1;  // last W beat -> B may go
  unsigned max_rd_bursts = 32;   // read bursts accepted and not finished
  unsigned max_wr_bursts = 32;   // write bursts accepted whose B is not yet taken
  unsigned w_buffer_beats = 512; // W beats buffered ahead of their AW

  /// No gaps, latency 1: the fastest memory the protocol allows.
  static AxiSlaveOptions Ideal();
  /// DDR-like: 40-100 cycles of latency per burst, no gaps.
  static AxiSlaveOptions Ddr(uint64_t seed);
  /// Back-pressure: gap probability `gap` on every channel, latency 1-30.
  static AxiSlaveOptions Stress(uint64_t seed, double gap);
  /// Sets all five gap probabilities.
  AxiSlaveOptions& Gaps(double gap);
};

/// Traffic seen by a slave since construction or ClearCounters().
struct AxiCounters {
  uint64_t rd_bursts = 0, rd_beats = 0, rd_bytes = 0;
  uint64_t wr_bursts = 0, wr_beats = 0, wr_bytes = 0;  // wr_bytes: bytes whose strobe was set
  uint64_t rd_error_resps = 0, wr_error_resps = 0;     // bursts answered with an error
  unsigned rd_max_outstanding = 0, wr_max_outstanding = 0;
  unsigned rd_max_beats = 0, wr_max_beats = 0;         // longest burst
  uint64_t first_cycle = std::numeric_limits<uint64_t>::max();  // first AR/AW accepted
  uint64_t last_cycle = 0;                                       // last R beat or B taken
  std::string ToString() const;
};

class AxiMemSlave : public Component {
 public:
  /// SLVERR, the response of AddErrorRange.
  static constexpr uint8_t kRespSlvErr = 2;

  /// Registers with `sim`; `mem` must outlive the slave. Throws SimError for a data width the
  /// slave cannot serve (not a power of two, or wider than the 64-bit strobe port allows).
  AxiMemSlave(Sim* sim, std::string name, const AxiPorts& ports, const MemoryMap* mem,
              const AxiSlaveOptions& options = AxiSlaveOptions());
  ~AxiMemSlave() override;
  AxiMemSlave(const AxiMemSlave&) = delete;
  AxiMemSlave& operator=(const AxiMemSlave&) = delete;

  /// Bursts touching [base, base + size) are answered with `resp` (2 SLVERR, 3 DECERR).
  void AddErrorRange(uint64_t base, uint64_t size, uint8_t resp = kRespSlvErr);
  void ClearErrorRanges() { error_ranges_.clear(); }
  /// New timing options (the random stream restarts from the new seed).
  void SetOptions(const AxiSlaveOptions& options);

  const AxiCounters& counters() const { return counters_; }
  void ClearCounters() { counters_ = AxiCounters(); }
  /// No burst in progress in either direction and no early W beat waiting.
  bool Idle() const;
  const std::string& name() const { return name_; }
  unsigned beat_bytes() const { return beat_bytes_; }

  void Drive(uint64_t cycle) override;
  void Sample(uint64_t cycle) override;
  void Reset() override;

 private:
  static constexpr unsigned kMaxBeatBytes = 64;
  using Beat = std::array<uint8_t, kMaxBeatBytes>;

  struct Burst {
    uint64_t addr;
    unsigned beats;
    uint64_t id;
    uint64_t ready_cycle;  // R: first beat may go; B: response may go
    unsigned done;         // beats transferred
    uint8_t resp;
  };
  struct WBeat {
    Beat data;
    uint64_t strb;
    bool last;
  };
  struct Request {        // an AR/AW as seen on the ports, for the stability rule
    uint64_t addr, len, size, burst, id;
    bool operator==(const Request& o) const {
      return addr == o.addr && len == o.len && size == o.size && burst == o.burst && id == o.id;
    }
  };

  bool Gap(double p);
  unsigned Latency(unsigned lo, unsigned hi);
  Request ReadRequest(bool write) const;
  /// Checks the burst rules; returns the response for the burst (OKAY or an error range's).
  uint8_t CheckBurst(const char* chan, uint64_t cycle, const Request& rq);
  [[noreturn]] void Fail(const char* chan, uint64_t cycle, const std::string& rule) const;
  void MatchWrites(uint64_t cycle);
  void DriveIdle();

  Sim* sim_;
  std::string name_;
  AxiPorts ports_;
  const MemoryMap* mem_;
  AxiSlaveOptions options_;
  std::mt19937_64 rng_;
  unsigned beat_bytes_ = 0;
  unsigned size_log2_ = 0;
  struct ErrorRange {
    uint64_t base, size;
    uint8_t resp;
  };
  std::vector<ErrorRange> error_ranges_;
  AxiCounters counters_;

  // Read side.
  std::deque<Burst> rd_bursts_;  // accepted, not finished; front is being returned
  bool ar_ready_ = false;
  bool r_presented_ = false;
  Beat r_beat_{};
  bool ar_pending_ = false;      // ARVALID seen without ARREADY
  Request ar_pending_rq_{};

  // Write side.
  std::deque<Burst> aw_bursts_;  // accepted, W beats not all received
  std::deque<WBeat> w_buffer_;   // W beats not yet matched with an AW
  std::deque<Burst> b_queue_;    // all W beats in, B not yet taken
  bool aw_ready_ = false;
  bool w_ready_ = false;
  bool b_presented_ = false;
  bool aw_pending_ = false;
  Request aw_pending_rq_{};
  bool w_pending_ = false;       // WVALID seen without WREADY
  WBeat w_pending_beat_{};
};

}  // namespace emu
}  // namespace csdkit

#endif  // CSDKIT_EMU_HARNESS_AXI_MEM_SLAVE_H_
