// Tests of the harness itself, without Verilator: a fake "model" (a struct with Verilator-style
// port members, evaluated by nobody) lets the test play the kernel's side of the bus cycle by
// cycle, so the memory slave's data path, counters and every rule it enforces can be checked,
// including the violations no correct master produces. Also: MemoryMap, Sim timeouts, the
// AXI4-Lite master and ApCtrl against a small register-file slave.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "csdkit/emu/harness/ap_ctrl.h"
#include "csdkit/emu/harness/axi_mem_slave.h"
#include "csdkit/emu/harness/axil_master.h"
#include "csdkit/emu/harness/memory_map.h"
#include "csdkit/emu/harness/sim.h"
#include "csdkit/hls/update_args.h"

namespace csdkit {
namespace emu {
namespace {

/// Stands in for VlWide<16>.
struct FakeWide {
  uint32_t w[16];
  uint32_t* data() { return w; }
};

/// Port members named as Verilator names them for bundle `m_axi_g` and `s_axi_control`.
struct FakeTop {
  uint8_t m_axi_g_ARVALID = 0, m_axi_g_ARREADY = 0;
  uint64_t m_axi_g_ARADDR = 0;
  uint8_t m_axi_g_ARLEN = 0, m_axi_g_ARSIZE = 6, m_axi_g_ARBURST = 1, m_axi_g_ARID = 0;
  uint8_t m_axi_g_RVALID = 0, m_axi_g_RREADY = 0, m_axi_g_RLAST = 0, m_axi_g_RRESP = 0,
          m_axi_g_RID = 0;
  FakeWide m_axi_g_RDATA{};
  uint8_t m_axi_g_AWVALID = 0, m_axi_g_AWREADY = 0;
  uint64_t m_axi_g_AWADDR = 0;
  uint8_t m_axi_g_AWLEN = 0, m_axi_g_AWSIZE = 6, m_axi_g_AWBURST = 1, m_axi_g_AWID = 0;
  uint8_t m_axi_g_WVALID = 0, m_axi_g_WREADY = 0, m_axi_g_WLAST = 0;
  uint64_t m_axi_g_WSTRB = ~uint64_t{0};
  FakeWide m_axi_g_WDATA{};
  uint8_t m_axi_g_BVALID = 0, m_axi_g_BREADY = 0, m_axi_g_BRESP = 0, m_axi_g_BID = 0;

  uint8_t s_axi_control_AWVALID = 0, s_axi_control_AWREADY = 0, s_axi_control_AWADDR = 0;
  uint8_t s_axi_control_WVALID = 0, s_axi_control_WREADY = 0, s_axi_control_WSTRB = 0;
  uint32_t s_axi_control_WDATA = 0;
  uint8_t s_axi_control_BVALID = 0, s_axi_control_BREADY = 0, s_axi_control_BRESP = 0;
  uint8_t s_axi_control_ARVALID = 0, s_axi_control_ARREADY = 0, s_axi_control_ARADDR = 0;
  uint8_t s_axi_control_RVALID = 0, s_axi_control_RREADY = 0, s_axi_control_RRESP = 0;
  uint32_t s_axi_control_RDATA = 0;
};

class FakeDut : public Dut {
 public:
  void SetClock(bool) override {}
  void SetReset(bool) override {}
  void Eval(uint64_t) override {}
  bool CanTrace() const override { return false; }
  void TraceOpen(const std::string&) override {}
  void TraceDump(uint64_t) override {}
  void TraceClose() override {}
  void Final() override {}
  FakeTop top;
};

SimOptions Quiet() {
  SimOptions o;
  o.reset_cycles = 2;
  o.timeout_cycles = 100000;
  return o;
}

constexpr uint64_t kBase = 0x1'0000'0000ull;

class SlaveTest : public ::testing::Test {
 protected:
  SlaveTest() : sim_(&dut_, Quiet()), mem_bytes_(4 * 4096) {
    for (size_t i = 0; i < mem_bytes_.size(); ++i) mem_bytes_[i] = static_cast<uint8_t>(i * 7);
    map_.Map(kBase, mem_bytes_.size(), mem_bytes_.data(), "test");
  }

  void MakeSlave(const AxiSlaveOptions& o = AxiSlaveOptions()) {
    slave_ = std::make_unique<AxiMemSlave>(&sim_, "g", CSDKIT_AXI_PORTS(&dut_.top, m_axi_g),
                                           &map_, o);
    sim_.Reset();
  }

  /// Holds `valid` high until a cycle in which `ready` was driven high (the handshake), like a
  /// master would: after Step() the ports hold what was driven during that cycle.
  void Handshake(uint8_t& valid, const uint8_t& ready) {
    valid = 1;
    do {
      sim_.Step();
    } while (ready == 0);
    valid = 0;
  }

  /// Issues an AR and collects the burst's beats (RREADY always high).
  std::vector<std::vector<uint8_t>> Read(uint64_t addr, unsigned beats, uint8_t* resp = nullptr) {
    FakeTop& t = dut_.top;
    t.m_axi_g_ARADDR = addr;
    t.m_axi_g_ARLEN = static_cast<uint8_t>(beats - 1);
    Handshake(t.m_axi_g_ARVALID, t.m_axi_g_ARREADY);
    t.m_axi_g_RREADY = 1;
    std::vector<std::vector<uint8_t>> out;
    for (unsigned n = 0; out.size() < beats && n < 1000; ++n) {
      sim_.Step();
      if (t.m_axi_g_RVALID == 0) continue;
      std::vector<uint8_t> beat(64);
      std::memcpy(beat.data(), t.m_axi_g_RDATA.w, 64);
      EXPECT_EQ(t.m_axi_g_RLAST, out.size() + 1 == beats ? 1 : 0) << "beat " << out.size();
      if (resp != nullptr) *resp = t.m_axi_g_RRESP;
      out.push_back(beat);
    }
    t.m_axi_g_RREADY = 0;
    return out;
  }

  /// Issues an AW and its beats (byte k of beat i = i + k + seed); returns BRESP. WLAST is
  /// inverted on beat `bad_last_at`.
  uint8_t Write(uint64_t addr, unsigned beats, uint64_t strb, uint8_t seed,
                int bad_last_at = -1) {
    FakeTop& t = dut_.top;
    t.m_axi_g_AWADDR = addr;
    t.m_axi_g_AWLEN = static_cast<uint8_t>(beats - 1);
    Handshake(t.m_axi_g_AWVALID, t.m_axi_g_AWREADY);
    for (unsigned i = 0; i < beats; ++i) {
      t.m_axi_g_WSTRB = strb;
      t.m_axi_g_WLAST = (i + 1 == beats) != (static_cast<int>(i) == bad_last_at);
      uint8_t* d = reinterpret_cast<uint8_t*>(t.m_axi_g_WDATA.w);
      for (unsigned k = 0; k < 64; ++k) d[k] = static_cast<uint8_t>(i + k + seed);
      Handshake(t.m_axi_g_WVALID, t.m_axi_g_WREADY);
    }
    t.m_axi_g_BREADY = 1;
    do {
      sim_.Step();
    } while (t.m_axi_g_BVALID == 0);
    t.m_axi_g_BREADY = 0;
    return t.m_axi_g_BRESP;
  }

  /// Runs `f` and returns the SimError message it throws ("" if none).
  template <typename F>
  std::string ErrorOf(F f) {
    try {
      f();
    } catch (const SimError& e) {
      return e.what();
    }
    return "";
  }

  FakeDut dut_;
  Sim sim_;
  std::vector<uint8_t> mem_bytes_;
  MemoryMap map_;
  std::unique_ptr<AxiMemSlave> slave_;
};

TEST_F(SlaveTest, ReadReturnsMemoryAndCounts) {
  MakeSlave();
  const auto beats = Read(kBase + 0x1000 - 3 * 64, 3);
  ASSERT_EQ(beats.size(), 3u);
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(0, std::memcmp(beats[i].data(), &mem_bytes_[0x1000 - 3 * 64 + i * 64], 64));
  }
  const AxiCounters& c = slave_->counters();
  EXPECT_EQ(c.rd_bursts, 1u);
  EXPECT_EQ(c.rd_beats, 3u);
  EXPECT_EQ(c.rd_bytes, 192u);
  EXPECT_EQ(c.rd_max_beats, 3u);
  EXPECT_TRUE(slave_->Idle());
}

TEST_F(SlaveTest, WriteHonoursStrobes) {
  MakeSlave();
  std::vector<uint8_t> before = mem_bytes_;
  const uint64_t strb = 0x00ff00ff00ff00f0ull;
  EXPECT_EQ(Write(kBase + 0x2000, 2, strb, 5), 0);
  for (unsigned i = 0; i < 2; ++i) {
    for (unsigned k = 0; k < 64; ++k) {
      const uint8_t exp =
          ((strb >> k) & 1) ? static_cast<uint8_t>(i + k + 5) : before[0x2000 + i * 64 + k];
      EXPECT_EQ(mem_bytes_[0x2000 + i * 64 + k], exp) << "beat " << i << " byte " << k;
    }
  }
  EXPECT_EQ(slave_->counters().wr_beats, 2u);
  EXPECT_EQ(slave_->counters().wr_bytes, 2u * __builtin_popcountll(strb));
}

TEST_F(SlaveTest, RejectsA4KiBCrossing) {
  MakeSlave();
  const std::string e = ErrorOf([&] { Read(kBase + 0x1000 - 64, 2); });
  EXPECT_NE(e.find("crosses the 4 KiB boundary at 0x100001000"), std::string::npos) << e;
  EXPECT_NE(e.find("addr=0x100000fc0 len=2 beats"), std::string::npos) << e;
}

TEST_F(SlaveTest, RejectsMisalignedUnmappedFixedNarrow) {
  MakeSlave();
  EXPECT_NE(ErrorOf([&] { Read(kBase + 8, 1); }).find("not aligned"), std::string::npos);
  MakeSlave();
  EXPECT_NE(ErrorOf([&] { Read(kBase + 4 * 4096, 1); }).find("not inside one mapped region"),
            std::string::npos);
  MakeSlave();
  dut_.top.m_axi_g_ARBURST = 0;
  EXPECT_NE(ErrorOf([&] { Read(kBase, 1); }).find("is not INCR"), std::string::npos);
  dut_.top.m_axi_g_ARBURST = 1;
  MakeSlave();
  dut_.top.m_axi_g_AWSIZE = 5;
  EXPECT_NE(ErrorOf([&] { Write(kBase, 1, ~0ull, 0); }).find("not the full data width"),
            std::string::npos);
  dut_.top.m_axi_g_AWSIZE = 6;
}

TEST_F(SlaveTest, RejectsBadWlast) {
  MakeSlave();
  const std::string e = ErrorOf([&] { Write(kBase, 4, ~0ull, 0, 1); });
  EXPECT_NE(e.find("WLAST=1 on beat 2 of the 4-beat burst"), std::string::npos) << e;
}

TEST_F(SlaveTest, RejectsDroppedAndChangedRequests) {
  AxiSlaveOptions o;
  o.ar_gap = 1.0;  // never ready
  MakeSlave(o);
  FakeTop& t = dut_.top;
  t.m_axi_g_ARVALID = 1;
  t.m_axi_g_ARADDR = kBase;
  t.m_axi_g_ARLEN = 0;
  sim_.Step(3);
  t.m_axi_g_ARADDR = kBase + 64;
  EXPECT_NE(ErrorOf([&] { sim_.Step(); }).find("AR payload changed"), std::string::npos);
  MakeSlave(o);
  t.m_axi_g_ARVALID = 1;
  sim_.Step(2);
  t.m_axi_g_ARVALID = 0;
  EXPECT_NE(ErrorOf([&] { sim_.Step(); }).find("ARVALID dropped"), std::string::npos);
}

TEST_F(SlaveTest, ErrorRangesAnswerSlverr) {
  MakeSlave();
  slave_->AddErrorRange(kBase + 0x100, 64);
  uint8_t resp = 0;
  const auto beats = Read(kBase + 0xc0, 4, &resp);
  EXPECT_EQ(resp, 2);
  EXPECT_EQ(beats[0], std::vector<uint8_t>(64, 0));
  std::vector<uint8_t> before = mem_bytes_;
  EXPECT_EQ(Write(kBase + 0x100, 1, ~0ull, 9), 2);
  EXPECT_EQ(mem_bytes_, before);
  EXPECT_EQ(slave_->counters().rd_error_resps, 1u);
  EXPECT_EQ(slave_->counters().wr_error_resps, 1u);
}

TEST_F(SlaveTest, LatencyAndEarlyWriteData) {
  AxiSlaveOptions o;
  o.rd_latency_min = o.rd_latency_max = 12;
  MakeSlave(o);
  FakeTop& t = dut_.top;
  t.m_axi_g_ARVALID = 1;
  t.m_axi_g_ARADDR = kBase;
  t.m_axi_g_ARLEN = 0;
  sim_.Step();
  t.m_axi_g_ARVALID = 0;
  const uint64_t waited = sim_.RunUntil([&] { return t.m_axi_g_RVALID != 0; }, 100, "RVALID");
  EXPECT_EQ(waited, 12u);  // first driven 12 cycles after the AR cycle
  t.m_axi_g_RREADY = 1;
  sim_.Step();
  t.m_axi_g_RREADY = 0;
  // W beats before their AW are buffered and matched once the AW arrives.
  t.m_axi_g_WVALID = 1;
  t.m_axi_g_WLAST = 1;
  t.m_axi_g_WSTRB = 1;
  reinterpret_cast<uint8_t*>(t.m_axi_g_WDATA.w)[0] = 0xab;
  sim_.Step();
  t.m_axi_g_WVALID = 0;
  sim_.Step(5);
  EXPECT_NE(mem_bytes_[0x40], 0xab);
  t.m_axi_g_AWVALID = 1;
  t.m_axi_g_AWADDR = kBase + 0x40;
  t.m_axi_g_AWLEN = 0;
  sim_.Step();
  t.m_axi_g_AWVALID = 0;
  EXPECT_EQ(mem_bytes_[0x40], 0xab);
  t.m_axi_g_BREADY = 1;
  sim_.RunUntil([&] { return t.m_axi_g_BVALID != 0; }, 100, "BVALID");
  sim_.Step();
  EXPECT_TRUE(slave_->Idle());
}

TEST(MemoryMapTest, FindAndOverlap) {
  std::vector<uint8_t> a(4096), b(4096);
  MemoryMap m;
  m.Map(0x1000, 4096, a.data(), "a");
  m.Map(0x3000, 4096, b.data(), "b");
  EXPECT_EQ(m.Translate(0x1000, 4096), a.data());
  EXPECT_EQ(m.Translate(0x3010, 16), b.data() + 0x10);
  EXPECT_EQ(m.Find(0x1fc0, 128), nullptr);  // runs past a
  EXPECT_EQ(m.Find(0x2000, 1), nullptr);
  EXPECT_THROW(m.Map(0x1800, 4096, b.data(), "c"), SimError);
  EXPECT_THROW(m.Map(~0ull - 10, 100, b.data(), "wrap"), SimError);
  m.Unmap(0x1000);
  EXPECT_EQ(m.Find(0x1000, 1), nullptr);
}

TEST(SimTest, Timeouts) {
  FakeDut dut;
  SimOptions o = Quiet();
  o.timeout_cycles = 50;
  Sim sim(&dut, o);
  sim.Reset();
  try {
    sim.RunUntil([] { return false; }, 10, "nothing");
    FAIL() << "no timeout";
  } catch (const SimError& e) {
    EXPECT_NE(std::string(e.what()).find("nothing did not happen within 10 cycles"),
              std::string::npos)
        << e.what();
  }
  try {
    sim.Step(100);
    FAIL() << "no global timeout";
  } catch (const SimError& e) {
    EXPECT_NE(std::string(e.what()).find("cycle 50 reached the limit of 50"), std::string::npos)
        << e.what();
  }
}

TEST(SimTest, TraceFlags) {
  SimOptions o;
  char a0[] = "tb", a1[] = "--trace", a2[] = "x.fst", a3[] = "--trace-from", a4[] = "0x10",
       a5[] = "--trace-to", a6[] = "bad";
  char* argv[] = {a0, a1, a2, a3, a4, a5, a6};
  int i = 1;
  EXPECT_TRUE(o.ParseFlag(7, argv, &i));
  EXPECT_EQ(o.trace_path, "x.fst");
  i = 3;
  EXPECT_TRUE(o.ParseFlag(7, argv, &i));
  EXPECT_EQ(o.trace_from, 16u);
  i = 5;
  EXPECT_THROW(o.ParseFlag(7, argv, &i), SimError);
  FakeDut dut;
  SimOptions t;
  t.trace_path = "x.fst";
  EXPECT_THROW({ Sim s(&dut, t); }, SimError);  // the fake model cannot trace
}

/// A tiny AXI4-Lite register file (64 words), answering with a one-cycle delay.
class FakeRegs : public Component {
 public:
  FakeRegs(Sim* sim, FakeTop* t) : sim_(sim), t_(t) { sim_->Attach(this); }
  ~FakeRegs() override { sim_->Detach(this); }
  uint32_t regs[64] = {};
  void Reset() override {}
  void Drive(uint64_t) override {
    t_->s_axi_control_AWREADY = !aw_ && !b_;
    t_->s_axi_control_WREADY = !w_ && !b_;
    t_->s_axi_control_BVALID = b_;
    t_->s_axi_control_ARREADY = !r_;
    t_->s_axi_control_RVALID = r_;
    t_->s_axi_control_RDATA = rdata_;
  }
  void Sample(uint64_t) override {
    if (t_->s_axi_control_AWVALID && t_->s_axi_control_AWREADY) {
      aw_ = true;
      waddr_ = t_->s_axi_control_AWADDR;
    }
    if (t_->s_axi_control_WVALID && t_->s_axi_control_WREADY) {
      w_ = true;
      wdata_ = t_->s_axi_control_WDATA;
    }
    if (b_ && t_->s_axi_control_BREADY) b_ = false;
    if (aw_ && w_) {
      regs[waddr_ / 4] = wdata_;
      aw_ = w_ = false;
      b_ = true;
    }
    if (r_ && t_->s_axi_control_RREADY) r_ = false;
    if (t_->s_axi_control_ARVALID && t_->s_axi_control_ARREADY) {
      rdata_ = regs[t_->s_axi_control_ARADDR / 4];
      r_ = true;
    }
  }

 private:
  Sim* sim_;
  FakeTop* t_;
  bool aw_ = false, w_ = false, b_ = false, r_ = false;
  uint8_t waddr_ = 0;
  uint32_t wdata_ = 0, rdata_ = 0;
};

TEST(ApCtrlTest, ArgumentsByName) {
  FakeDut dut;
  Sim sim(&dut, Quiet());
  FakeRegs regs(&sim, &dut.top);
  AxiLiteOptions lo;
  lo.gap = 0.5;
  AxiLiteMaster axil(&sim, CSDKIT_AXIL_PORTS(&dut.top, s_axi_control), lo);
  ApCtrl ctl(&sim, &axil, hls::kUpdateArgs);
  sim.Reset();
  ctl.SetArg("theta", 0x0123456789abcdefull);
  ctl.SetArg("lr", 0x3f800000u);
  EXPECT_EQ(regs.regs[0x10 / 4], 0x89abcdefu);
  EXPECT_EQ(regs.regs[0x14 / 4], 0x01234567u);
  uint32_t lr_offset = 0;  // (from the table: the register map moves when arguments are added)
  for (const auto& a : hls::kUpdateArgs) {
    if (std::string(a.name) == "lr") lr_offset = a.offset;
  }
  EXPECT_EQ(regs.regs[lr_offset / 4], 0x3f800000u);
  EXPECT_EQ(ctl.GetArg("theta"), 0x0123456789abcdefull);
  EXPECT_THROW(ctl.SetArg("lr", 0x100000000ull), SimError);
  try {
    ctl.SetArg("learning_rate", 1);
    FAIL() << "unknown name accepted";
  } catch (const SimError& e) {
    EXPECT_NE(std::string(e.what()).find("no argument 'learning_rate' (arguments: theta, m, v"),
              std::string::npos)
        << e.what();
  }
  // Polling for ap_done that never comes fails with the cycle count.
  ctl.Start();
  EXPECT_EQ(regs.regs[0], ApCtrl::kApStart);
  EXPECT_THROW(ctl.WaitDone(ApCtrl::Wait::kPoll, 200), SimError);
  EXPECT_THROW(ctl.WaitDone(ApCtrl::Wait::kInterrupt, 200), SimError);  // no interrupt port
}

}  // namespace
}  // namespace emu
}  // namespace csdkit
