// tb_csd_axi_copy_top: the copy test kernel launched through the harness as on a card (arguments
// by name, ap_start, poll or interrupt), against AXI memory slaves with ideal, DDR-like and
// back-pressured timing.
//
// Per launch: src and dst are mapped as exactly-sized regions (so one byte read or written past
// a buffer is a slave error), dst starts with random bytes, and afterwards
//   - dst equals src byte for byte;
//   - gmem0 read n*64 bytes and wrote none, gmem1 wrote n*64 bytes and read none;
//   - the bursts are the fewest the 4 KiB rule allows (one per page touched, as bursts may be
//     64 beats), none longer than 64 beats, at most 8 in flight per direction;
//   - both slaves are idle (every burst completed).
// The slaves themselves fail the run on a 4 KiB crossing, a misaligned or unmapped burst, a bad
// WLAST or an unstable request.
//
// Sizes: 1, 2, 63, 64, 65, 255, 256, 257, 1000 at page offsets 0, 1, 63 words and a random one,
// under ideal, DDR-like and three back-pressure timings (seeds from the bench seed), plus random
// sizes and placements, a zero-word launch and a reset between launches. Then throughput with
// ideal memory (must reach 0.9 beats per cycle) and DDR-like latency (printed).
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "Vcsd_axi_copy_top.h"
#include "csd_axi_copy_args.h"
#include "csdkit/emu/harness/ap_ctrl.h"
#include "csdkit/emu/harness/axi_mem_slave.h"
#include "csdkit/emu/harness/axil_master.h"
#include "csdkit/emu/harness/bench.h"
#include "csdkit/emu/harness/memory_map.h"
#include "csdkit/emu/harness/sim.h"
#include "csdkit/emu/harness/verilated_dut.h"

namespace ce = csdkit::emu;

namespace {

constexpr uint64_t kWord = 64;
constexpr uint64_t kPage = 4096;
constexpr uint64_t kSrcBase = 0x0000'0012'3400'0000ull;  // above 4 GiB: the high word matters
constexpr uint64_t kDstBase = 0x0000'0034'5600'0000ull;
constexpr unsigned kMaxOutstanding = 8;  // the copy top's default
constexpr unsigned kMaxBurst = 64;

/// Host buffer, 4 KiB aligned.
struct Buffer {
  explicit Buffer(size_t bytes)
      : size(bytes),
        p(static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096))) {}
  ~Buffer() { std::free(p); }
  size_t size;
  uint8_t* p;
};

/// Bursts the 4 KiB rule forces for `words` words at `addr` with 64-beat bursts.
uint64_t PagesTouched(uint64_t addr, uint64_t words) {
  if (words == 0) return 0;
  return (addr + words * kWord - 1) / kPage - addr / kPage + 1;
}

/// Words of the throughput runs (the buffers are sized for them).
uint64_t ThroughputWords(const ce::BenchArgs& args) { return args.full ? 32768 : 8192; }

class CopyBench {
 public:
  explicit CopyBench(const ce::BenchArgs& args)
      : args_(args),
        rng_(args.seed),
        dut_(args.seed),
        sim_(&dut_, args.sim),
        gmem0_(&sim_, "gmem0", CSDKIT_AXI_PORTS(dut_.top(), m_axi_gmem0), &mem_),
        gmem1_(&sim_, "gmem1", CSDKIT_AXI_PORTS(dut_.top(), m_axi_gmem1), &mem_),
        axil_(&sim_, CSDKIT_AXIL_PORTS(dut_.top(), s_axi_control)),
        ctl_(&sim_, &axil_, csdkit::axi_tb::kCopyArgs, ce::InterruptSig(dut_.top())),
        chk_("tb_csd_axi_copy_top", args.seed),
        src_(ThroughputWords(args) * kWord + kPage),
        dst_(ThroughputWords(args) * kWord + kPage) {}

  int Run() {
    sim_.Reset();
    Directed();
    Random(args_.full ? 5000 : 500);
    ZeroAndReset();
    Throughput();
    return chk_.Finish();
  }

 private:
  /// Timing of both slaves and of the control port for one launch.
  struct Timing {
    const char* name;
    ce::AxiSlaveOptions slave;
    double axil_gap;
  };

  Timing MakeTiming(unsigned k) {
    const uint64_t s = rng_();
    switch (k % 5) {
      case 0: return {"ideal", ce::AxiSlaveOptions::Ideal(), 0.0};
      case 1: return {"ddr", ce::AxiSlaveOptions::Ddr(s), 0.0};
      case 2: return {"stress0.2", ce::AxiSlaveOptions::Stress(s, 0.2), 0.2};
      case 3: return {"stress0.5", ce::AxiSlaveOptions::Stress(s, 0.5), 0.3};
      default: {
        // Lopsided: a slow read side against a fast write side.
        ce::AxiSlaveOptions o = ce::AxiSlaveOptions::Stress(s, 0.0);
        o.r_gap = 0.6;
        o.ar_gap = 0.3;
        return {"slow-read", o, 0.1};
      }
    }
  }

  /// One launch of `words` words from kSrcBase + src_off to kDstBase + dst_off; checks all.
  void Launch(uint64_t words, uint64_t src_off, uint64_t dst_off, const Timing& t,
              ce::ApCtrl::Wait how, const char* what) {
    const std::string ctx = ce::Format("%s n=%" PRIu64 " src+0x%" PRIx64 " dst+0x%" PRIx64
                                       " %s %s", what, words, src_off, dst_off, t.name,
                                       how == ce::ApCtrl::Wait::kPoll ? "poll" : "irq");
    const uint64_t bytes = words * kWord;
    const uint64_t src = kSrcBase + src_off, dst = kDstBase + dst_off;
    if (src_off + bytes > src_.size || dst_off + bytes > dst_.size) {
      chk_.True(false, ctx + ": bench error, buffer too small");
      return;
    }
    for (uint64_t i = 0; i < bytes; ++i) src_.p[src_off + i] = static_cast<uint8_t>(rng_());
    for (uint64_t i = 0; i < bytes; ++i) dst_.p[dst_off + i] = static_cast<uint8_t>(rng_());
    mem_.Clear();
    if (words != 0) {
      mem_.Map(src, bytes, src_.p + src_off, "src");
      mem_.Map(dst, bytes, dst_.p + dst_off, "dst");
    }
    ce::AxiSlaveOptions o0 = t.slave, o1 = t.slave;
    o1.seed = o0.seed ^ 0x5a5a5a5a5a5aull;
    gmem0_.SetOptions(o0);
    gmem1_.SetOptions(o1);
    ce::AxiLiteOptions lo;
    lo.seed = o0.seed + 1;
    lo.gap = t.axil_gap;
    axil_.SetOptions(lo);
    gmem0_.ClearCounters();
    gmem1_.ClearCounters();

    if (how == ce::ApCtrl::Wait::kInterrupt) {
      ctl_.EnableInterrupts(true, false);
    } else {
      ctl_.DisableInterrupts();
    }
    ctl_.SetArgs({{"src", src}, {"dst", dst}, {"n_words", words}});
    ctl_.Start();
    const uint64_t cycles = ctl_.WaitDone(how, 1'000'000 + words * 40);
    last_launch_cycles_ = cycles;

    // Data, byte for byte: the first few differing bytes in full, then the count of words.
    uint64_t bad_words = 0;
    unsigned reported = 0;
    for (uint64_t w = 0; w < words; ++w) {
      const uint8_t* got = dst_.p + dst_off + w * kWord;
      const uint8_t* exp = src_.p + src_off + w * kWord;
      if (std::memcmp(got, exp, kWord) == 0) continue;
      ++bad_words;
      for (unsigned b = 0; b < kWord && reported < 4; ++b) {
        if (got[b] != exp[b]) {
          chk_.Eq(got[b], exp[b],
                  ce::Format("%s: dst word %" PRIu64 " byte %u", ctx.c_str(), w, b));
          ++reported;
        }
      }
    }
    chk_.Eq(bad_words, 0, ctx + ": words differing from src");

    // Traffic.
    const ce::AxiCounters& c0 = gmem0_.counters();
    const ce::AxiCounters& c1 = gmem1_.counters();
    chk_.Eq(c0.rd_bytes, bytes, ctx + ": gmem0 bytes read");
    chk_.Eq(c1.wr_bytes, bytes, ctx + ": gmem1 bytes written");
    chk_.Eq(c0.wr_beats, 0, ctx + ": gmem0 beats written");
    chk_.Eq(c1.rd_beats, 0, ctx + ": gmem1 beats read");
    chk_.Eq(c0.rd_bursts, PagesTouched(src, words), ctx + ": gmem0 read bursts");
    chk_.Eq(c1.wr_bursts, PagesTouched(dst, words), ctx + ": gmem1 write bursts");
    chk_.True(c0.rd_max_beats <= kMaxBurst && c1.wr_max_beats <= kMaxBurst,
              ctx + ": a burst longer than 64 beats");
    chk_.True(c0.rd_max_outstanding <= kMaxOutstanding &&
                  c1.wr_max_outstanding <= kMaxOutstanding,
              ce::Format("%s: %u read / %u write bursts in flight, limit %u", ctx.c_str(),
                         c0.rd_max_outstanding, c1.wr_max_outstanding, kMaxOutstanding));
    chk_.True(gmem0_.Idle() && gmem1_.Idle(), ctx + ": a slave still has a burst in progress");
    if (how == ce::ApCtrl::Wait::kPoll) {
      chk_.Eq(ctl_.last_ctrl() & (ce::ApCtrl::kApDone | ce::ApCtrl::kApStart),
              ce::ApCtrl::kApDone, ctx + ": CTRL at done (ap_done set, ap_start clear)");
    }
    ++launches_;
  }

  void Directed() {
    const uint64_t sizes[] = {1, 2, 63, 64, 65, 255, 256, 257, 1000};
    unsigned k = 0;
    for (uint64_t n : sizes) {
      const uint64_t random_off = (rng_() % 64) * kWord;
      const uint64_t offs[] = {0, kWord, 63 * kWord, random_off};
      for (uint64_t so : offs) {
        // dst at a different page offset than src, so the two split differently.
        const uint64_t dof = ((so / kWord + 17 * (k + 1)) % 64) * kWord;
        Launch(n, so, dof, MakeTiming(k), (k % 2) ? ce::ApCtrl::Wait::kInterrupt
                                                  : ce::ApCtrl::Wait::kPoll,
               "directed");
        ++k;
      }
    }
    // Every size under every timing, at the worst offset (a 1-beat first burst).
    for (uint64_t n : {65ull, 257ull}) {
      for (unsigned t = 0; t < 5; ++t) {
        Launch(n, 63 * kWord, 62 * kWord, MakeTiming(t), ce::ApCtrl::Wait::kPoll, "timing");
      }
    }
  }

  void Random(unsigned launches) {
    for (unsigned i = 0; i < launches; ++i) {
      const uint64_t n = 1 + rng_() % 2000;
      const uint64_t so = (rng_() % 64) * kWord, dof = (rng_() % 64) * kWord;
      Launch(n, so, dof, MakeTiming(static_cast<unsigned>(rng_())),
             (rng_() & 1) ? ce::ApCtrl::Wait::kInterrupt : ce::ApCtrl::Wait::kPoll, "random");
    }
  }

  void ZeroAndReset() {
    Launch(0, 0, 0, MakeTiming(0), ce::ApCtrl::Wait::kPoll, "zero");
    Launch(0, 0, 0, MakeTiming(2), ce::ApCtrl::Wait::kInterrupt, "zero");
    // Reset between launches: the kernel must come back idle and work again.
    sim_.Reset();
    chk_.Eq(ctl_.ReadCtrl(), ce::ApCtrl::kApIdle, "after reset: CTRL");
    Launch(300, 5 * kWord, 9 * kWord, MakeTiming(2), ce::ApCtrl::Wait::kPoll, "after reset");
  }

  /// Copies `n` words with timing `opt` and prints the rates: read (gmem0 first AR to last R),
  /// write (gmem1 first AW to last B), copy (first AR to last B), and launch (ap_start write to
  /// ap_done seen by polling). Returns the copy rate in beats per cycle.
  double Rate(uint64_t n, const char* name, const ce::AxiSlaveOptions& opt) {
    Launch(n, 0, 0, Timing{name, opt, 0.0}, ce::ApCtrl::Wait::kPoll, "throughput");
    const ce::AxiCounters& c0 = gmem0_.counters();
    const ce::AxiCounters& c1 = gmem1_.counters();
    const double words = static_cast<double>(n);
    const double rd = words / static_cast<double>(c0.last_cycle - c0.first_cycle + 1);
    const double wr = words / static_cast<double>(c1.last_cycle - c1.first_cycle + 1);
    const double copy = words / static_cast<double>(c1.last_cycle - c0.first_cycle + 1);
    std::printf("  %-34s %6" PRIu64 " words: read %.3f  write %.3f  copy %.3f  launch %.3f "
                "(%" PRIu64 " cycles)\n",
                name, n, rd, wr, copy, words / static_cast<double>(last_launch_cycles_),
                last_launch_cycles_);
    return copy;
  }

  void Throughput() {
    const uint64_t n = ThroughputWords(args_);
    std::printf("throughput in beats (64 B) per cycle, gmem0 -> gmem1:\n");
    const double ideal = Rate(n, "ideal (latency 1, no gaps)", ce::AxiSlaveOptions::Ideal());
    // Cycle counts are deterministic: this is a property of the design, not a timing test.
    chk_.True(ideal >= 0.9,
              ce::Format("ideal-memory copy throughput %.3f beats/cycle is below 0.9", ideal));
    Rate(n, "DDR-like (latency 40-100)", ce::AxiSlaveOptions::Ddr(args_.seed));
    Rate(n, "back-pressure (gaps 0.2, lat 1-30)", ce::AxiSlaveOptions::Stress(args_.seed, 0.2));
    // One updater tile per array is 1024 elements = 64 words; a subgroup is many tiles.
    for (uint64_t m : {64ull, 1024ull}) {
      Rate(m, "ideal (latency 1, no gaps)", ce::AxiSlaveOptions::Ideal());
      Rate(m, "DDR-like (latency 40-100)", ce::AxiSlaveOptions::Ddr(args_.seed));
    }
    mem_.Clear();
    std::printf("%u launches, %" PRIu64 " cycles simulated\n", launches_, sim_.cycle());
  }

  ce::BenchArgs args_;
  std::mt19937_64 rng_;
  ce::VerilatedDut<Vcsd_axi_copy_top> dut_;
  ce::Sim sim_;
  ce::MemoryMap mem_;
  ce::AxiMemSlave gmem0_, gmem1_;
  ce::AxiLiteMaster axil_;
  ce::ApCtrl ctl_;
  ce::Checker chk_;
  Buffer src_, dst_;
  uint64_t last_launch_cycles_ = 0;
  unsigned launches_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const ce::BenchArgs args = ce::ParseBenchArgs(argc, argv);
  try {
    CopyBench bench(args);
    return bench.Run();
  } catch (const ce::SimError& e) {
    std::printf("tb_csd_axi_copy_top: FAIL (seed 0x%" PRIx64 "): %s\n", args.seed, e.what());
    return 1;
  }
}
