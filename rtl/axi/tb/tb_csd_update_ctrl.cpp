// tb_csd_update_ctrl: directed bench of csd_axil_ctrl with the register map of csd_update
// (csd_update_ctrl_tb_top, generated csd_update_args_pkg). The bench plays the core: on ap_start
// it drops ap_idle, runs a number of cycles, then raises ap_done and ap_ready for one cycle.
// Everything runs twice: with an ideal AXI4-Lite master and with random gaps on it.
//
// Checked: reset values; every argument of kUpdateArgs set by name, read back, and present in
// its field of args_t (so the generated offsets, word mask and struct agree with the table);
// byte strobes; reserved words and addresses past the register file read 0 and ignore writes;
// ap_start (set by writing 1, held until ap_ready, not cleared by writing 0), ap_done and
// ap_ready (clear on read), ap_idle; auto_restart; GIE, IER, ISR (toggle on write) and the
// interrupt line; the harness's launch by polling and by interrupt.
#include <cinttypes>
#include <cstdio>
#include <random>
#include <string>

#include "Vcsd_update_ctrl_tb_top.h"
#include "csdkit/emu/harness/ap_ctrl.h"
#include "csdkit/emu/harness/axil_master.h"
#include "csdkit/emu/harness/bench.h"
#include "csdkit/emu/harness/sim.h"
#include "csdkit/emu/harness/verilated_dut.h"
#include "csdkit/hls/update_args.h"

namespace ce = csdkit::emu;
namespace hk = csdkit::hls;

namespace {

using Top = Vcsd_update_ctrl_tb_top;

/// The core side of ap_ctrl_hs: start when ap_start && idle, busy `latency` cycles, then
/// ap_done and ap_ready together for one cycle.
class FakeCore : public ce::Component {
 public:
  FakeCore(ce::Sim* sim, Top* top) : sim_(sim), top_(top) { sim_->Attach(this); }
  ~FakeCore() override { sim_->Detach(this); }

  void set_latency(unsigned cycles) { latency_ = cycles; }
  uint64_t starts() const { return starts_; }
  bool busy() const { return state_ != kIdle; }

  void Reset() override {
    state_ = kIdle;
    top_->ap_done_i = 0;
    top_->ap_ready_i = 0;
    top_->ap_idle_i = 1;
  }
  void Drive(uint64_t) override {
    top_->ap_idle_i = state_ == kIdle;
    top_->ap_done_i = state_ == kDone;
    top_->ap_ready_i = state_ == kDone;
  }
  void Sample(uint64_t) override {
    switch (state_) {
      case kIdle:
        if (top_->ap_start_o) {
          ++starts_;
          left_ = latency_;
          state_ = left_ == 0 ? kDone : kBusy;
        }
        break;
      case kBusy:
        if (--left_ == 0) state_ = kDone;
        break;
      case kDone:
        state_ = kIdle;
        break;
    }
  }

 private:
  enum State { kIdle, kBusy, kDone };
  ce::Sim* sim_;
  Top* top_;
  State state_ = kIdle;
  unsigned latency_ = 50, left_ = 0;
  uint64_t starts_ = 0;
};

/// Field `index` of args_o (args_t: table order, the first argument in the top bits).
uint64_t ArgField(Top* top, unsigned index) {
  unsigned total = 0;
  for (const hk::ArgInfo& a : hk::kUpdateArgs) total += a.bytes * 8;
  unsigned hi = total;  // one past the field's top bit
  for (unsigned i = 0; i < index; ++i) hi -= hk::kUpdateArgs[i].bytes * 8;
  const unsigned width = hk::kUpdateArgs[index].bytes * 8, lo = hi - width;
  uint64_t v = 0;
  for (unsigned b = 0; b < width; ++b) {
    const unsigned bit = lo + b;
    v |= uint64_t{(top->args_o[bit / 32] >> (bit % 32)) & 1u} << b;
  }
  return v;
}

class CtrlBench {
 public:
  explicit CtrlBench(const ce::BenchArgs& args)
      : rng_(args.seed),
        dut_(args.seed),
        sim_(&dut_, args.sim),
        core_(&sim_, dut_.top()),
        axil_(&sim_, CSDKIT_AXIL_PORTS(dut_.top(), s_axi_control)),
        irq_(ce::InterruptSig(dut_.top())),
        ctl_(&sim_, &axil_, hk::kUpdateArgs, irq_),
        chk_("tb_csd_update_ctrl", args.seed) {}

  int Run() {
    for (double gap : {0.0, 0.4}) {
      ce::AxiLiteOptions o;
      o.seed = rng_();
      o.gap = gap;
      axil_.SetOptions(o);
      pass_ = ce::Format("gap %.1f", gap);
      sim_.Reset();
      ResetValues();
      Arguments();
      StartDone();
      Interrupts();
      AutoRestart();
      Launches();
    }
    return chk_.Finish();
  }

 private:
  std::string Ctx(const char* what) const { return pass_ + ": " + what; }

  void ResetValues() {
    chk_.Eq(axil_.Read(ApCtrlReg::kCtrl), ce::ApCtrl::kApIdle, Ctx("CTRL after reset"));
    chk_.Eq(axil_.Read(ApCtrlReg::kGie), 0, Ctx("GIE after reset"));
    chk_.Eq(axil_.Read(ApCtrlReg::kIer), 0, Ctx("IER after reset"));
    chk_.Eq(axil_.Read(ApCtrlReg::kIsr), 0, Ctx("ISR after reset"));
    chk_.Eq(irq_.Get(), 0, Ctx("interrupt after reset"));
    chk_.Eq(dut_->ap_start_o, 0, Ctx("ap_start after reset"));
  }

  void Arguments() {
    uint64_t values[hk::kNumUpdateArgs];
    for (unsigned i = 0; i < hk::kNumUpdateArgs; ++i) {
      const hk::ArgInfo& a = hk::kUpdateArgs[i];
      values[i] = a.kind == hk::ArgKind::kPtr ? rng_() : (rng_() & 0xffffffffu);
      ctl_.SetArg(a.name, values[i]);
    }
    // Reserved words and addresses past the end: writes ignored, reads 0, OKAY.
    for (const hk::ArgInfo& a : hk::kUpdateArgs) {
      const uint32_t reserved = a.offset + (a.kind == hk::ArgKind::kPtr ? 8 : 4);
      chk_.Eq(axil_.Write(reserved, 0xffffffffu), 0, Ctx("BRESP of a reserved word"));
    }
    for (uint32_t off = hk::kUpdateRegsEnd; off < 0x100; off += 4) {
      chk_.Eq(axil_.Write(off, 0xa5a5a5a5u), 0, Ctx("BRESP past the register file"));
    }
    for (unsigned i = 0; i < hk::kNumUpdateArgs; ++i) {
      const hk::ArgInfo& a = hk::kUpdateArgs[i];
      chk_.Eq(ctl_.GetArg(a.name), values[i], Ctx("read back of ") + a.name);
      chk_.Eq(ArgField(dut_.top(), i), values[i], Ctx("args_t field ") + a.name);
      const uint32_t reserved = a.offset + (a.kind == hk::ArgKind::kPtr ? 8 : 4);
      uint8_t resp = 0xff;
      chk_.Eq(axil_.Read(reserved, &resp), 0, Ctx("reserved word after ") + a.name);
      chk_.Eq(resp, 0, Ctx("RRESP of a reserved word"));
    }
    for (uint32_t off = hk::kUpdateRegsEnd; off < 0x100; off += 4) {
      uint8_t resp = 0xff;
      chk_.Eq(axil_.Read(off, &resp), 0, Ctx(ce::Format("read of 0x%02x", off).c_str()));
      chk_.Eq(resp, 0, Ctx("RRESP past the register file"));
    }
    // Byte strobes: only the enabled bytes change.
    const hk::ArgInfo& n = ctl_.Arg("n");
    axil_.Write(n.offset, 0x11223344u);
    axil_.Write(n.offset, 0xaabbccddu, 0x1);
    chk_.Eq(axil_.Read(n.offset), 0x112233ddu, Ctx("WSTRB 0001"));
    axil_.Write(n.offset, 0xaabbccddu, 0x6);
    chk_.Eq(axil_.Read(n.offset), 0x11bbccddu, Ctx("WSTRB 0110"));
    axil_.Write(n.offset, 0x00000000u, 0x8);
    chk_.Eq(axil_.Read(n.offset), 0x00bbccddu, Ctx("WSTRB 1000"));
    const hk::ArgInfo& theta = ctl_.Arg("theta");
    axil_.Write(theta.offset + 4, 0x12345678u, 0xc);
    chk_.Eq(ctl_.GetArg("theta") >> 48, 0x1234u, Ctx("pointer high word, WSTRB 1100"));
    // Control registers ignore a write without WSTRB[0].
    axil_.Write(ApCtrlReg::kGie, 1, 0xe);
    chk_.Eq(axil_.Read(ApCtrlReg::kGie), 0, Ctx("GIE written without WSTRB[0]"));
    axil_.Write(ApCtrlReg::kCtrl, 1, 0xe);
    sim_.Step(5);
    chk_.Eq(core_.starts(), starts_, Ctx("CTRL written without WSTRB[0] starts nothing"));
  }

  void StartDone() {
    core_.set_latency(60);
    ctl_.Start();
    ++starts_;
    sim_.Step(3);
    uint32_t c = ctl_.ReadCtrl();
    chk_.Eq(c & 0x28f, ce::ApCtrl::kApStart, Ctx("CTRL while running"));
    // Writing 0 does not clear ap_start (it is cleared by the core's ap_ready only).
    axil_.Write(ApCtrlReg::kCtrl, 0);
    chk_.Eq(dut_->ap_start_o, 1, Ctx("ap_start after writing 0 while running"));
    sim_.RunUntil([&] { return !core_.busy(); }, 1000, "fake core done");
    sim_.Step(3);
    chk_.Eq(dut_->ap_start_o, 0, Ctx("ap_start after ap_ready"));
    // ap_done stays until read, however long that takes.
    sim_.Step(200);
    c = ctl_.ReadCtrl();
    chk_.Eq(c, ce::ApCtrl::kApDone | ce::ApCtrl::kApIdle | ce::ApCtrl::kApReady,
            Ctx("CTRL at the first read after done"));
    c = ctl_.ReadCtrl();
    chk_.Eq(c, ce::ApCtrl::kApIdle, Ctx("CTRL at the second read (ap_done, ap_ready cleared)"));
    chk_.Eq(core_.starts(), starts_, Ctx("starts"));
  }

  void Interrupts() {
    core_.set_latency(30);
    // Done interrupt.
    ctl_.EnableInterrupts(true, false);
    ctl_.Start();
    ++starts_;
    sim_.RunUntil([&] { return irq_.Get() != 0; }, 1000, "done interrupt");
    chk_.Eq(axil_.Read(ApCtrlReg::kIsr), ce::ApCtrl::kIrqDone, Ctx("ISR after done"));
    chk_.Eq(axil_.Read(ApCtrlReg::kIsr), ce::ApCtrl::kIrqDone, Ctx("ISR is not clear on read"));
    chk_.Eq(ctl_.ReadCtrl() & ce::ApCtrl::kInterrupt, ce::ApCtrl::kInterrupt,
            Ctx("CTRL bit 9 mirrors the interrupt"));
    // GIE masks the line, not the status.
    axil_.Write(ApCtrlReg::kGie, 0);
    sim_.Step(2);
    chk_.Eq(irq_.Get(), 0, Ctx("interrupt with GIE=0"));
    chk_.Eq(axil_.Read(ApCtrlReg::kIsr), ce::ApCtrl::kIrqDone, Ctx("ISR kept with GIE=0"));
    axil_.Write(ApCtrlReg::kGie, 1);
    sim_.Step(2);
    chk_.Eq(irq_.Get(), 1, Ctx("interrupt with GIE=1 again"));
    // Toggle on write: 1 clears a set bit, 1 again sets it, 0 changes nothing.
    ctl_.ToggleIsr(ce::ApCtrl::kIrqDone);
    sim_.Step(2);
    chk_.Eq(axil_.Read(ApCtrlReg::kIsr), 0, Ctx("ISR after toggling bit 0"));
    chk_.Eq(irq_.Get(), 0, Ctx("interrupt after the acknowledge"));
    ctl_.ToggleIsr(ce::ApCtrl::kIrqDone | ce::ApCtrl::kIrqReady);
    sim_.Step(2);
    chk_.Eq(axil_.Read(ApCtrlReg::kIsr), 3, Ctx("ISR after toggling bits 0 and 1 from 0"));
    chk_.Eq(irq_.Get(), 1, Ctx("interrupt after a toggle sets ISR"));
    ctl_.ToggleIsr(0);
    chk_.Eq(axil_.Read(ApCtrlReg::kIsr), 3, Ctx("ISR after writing 0"));
    ctl_.ToggleIsr(3);
    sim_.Step(2);
    chk_.Eq(axil_.Read(ApCtrlReg::kIsr), 0, Ctx("ISR after toggling both back"));
    chk_.Eq(irq_.Get(), 0, Ctx("interrupt low again"));
    ctl_.ReadCtrl();  // clear ap_done
    // Ready interrupt only.
    ctl_.EnableInterrupts(false, true);
    chk_.Eq(axil_.Read(ApCtrlReg::kIer), ce::ApCtrl::kIrqReady, Ctx("IER"));
    ctl_.Start();
    ++starts_;
    sim_.RunUntil([&] { return irq_.Get() != 0; }, 1000, "ready interrupt");
    chk_.Eq(axil_.Read(ApCtrlReg::kIsr), ce::ApCtrl::kIrqReady, Ctx("ISR after ap_ready"));
    ctl_.ToggleIsr(ce::ApCtrl::kIrqReady);
    ctl_.ReadCtrl();
    // Disabled: no status, no line.
    ctl_.DisableInterrupts();
    ctl_.Start();
    ++starts_;
    sim_.RunUntil([&] { return !core_.busy() && dut_->ap_start_o == 0; }, 1000, "run");
    sim_.Step(3);
    chk_.Eq(axil_.Read(ApCtrlReg::kIsr), 0, Ctx("ISR with IER=0"));
    chk_.Eq(irq_.Get(), 0, Ctx("interrupt with IER=0"));
    chk_.Eq(ctl_.ReadCtrl() & ce::ApCtrl::kApDone, ce::ApCtrl::kApDone, Ctx("ap_done, IER=0"));
    chk_.Eq(core_.starts(), starts_, Ctx("starts"));
  }

  void AutoRestart() {
    core_.set_latency(20);
    const uint64_t before = core_.starts();
    ctl_.Start(true);
    sim_.Step(400);
    const uint32_t c = ctl_.ReadCtrl();
    chk_.True((c & ce::ApCtrl::kAutoRestart) && (c & ce::ApCtrl::kApStart),
              Ctx(ce::Format("auto_restart and ap_start stay set (CTRL 0x%x)", c).c_str()));
    chk_.True((c & ce::ApCtrl::kApReady) == 0, Ctx("ap_ready is not reported in auto-restart"));
    chk_.True(core_.starts() - before >= 10,
              Ctx(ce::Format("auto-restart: %" PRIu64 " runs in 400 cycles",
                             core_.starts() - before).c_str()));
    // Turning auto_restart off lets the current run finish and stops there.
    axil_.Write(ApCtrlReg::kCtrl, 0);
    sim_.RunUntil([&] { return !core_.busy() && dut_->ap_start_o == 0; }, 1000, "last run");
    const uint64_t runs = core_.starts();
    sim_.Step(100);
    chk_.Eq(core_.starts(), runs, Ctx("no run after auto_restart is cleared"));
    const uint32_t c2 = ctl_.ReadCtrl();
    chk_.Eq(c2 & (ce::ApCtrl::kApStart | ce::ApCtrl::kAutoRestart | ce::ApCtrl::kApIdle),
            ce::ApCtrl::kApIdle, Ctx("CTRL after auto-restart stopped"));
    ctl_.ReadCtrl();
    starts_ = core_.starts();
  }

  void Launches() {
    // Cycles are counted from the B of the ap_start write, which (with gaps) can come a few
    // cycles after the core has started.
    core_.set_latency(123);
    const uint64_t poll = ctl_.Launch({{"n", 7}, {"mode", 1}}, ce::ApCtrl::Wait::kPoll);
    chk_.True(poll >= 110 && poll < 123 + 60,
              Ctx(ce::Format("poll launch took %" PRIu64 " cycles for a 123-cycle core", poll)
                      .c_str()));
    ctl_.EnableInterrupts(true, false);
    ctl_.Start();
    const uint64_t irq = ctl_.WaitDone(ce::ApCtrl::Wait::kInterrupt);
    chk_.True(irq >= 110 && irq < 123 + 10,
              Ctx(ce::Format("interrupt launch took %" PRIu64 " cycles", irq).c_str()));
    chk_.Eq(axil_.Read(ApCtrlReg::kIsr), 0, Ctx("ISR acknowledged by WaitDone"));
    ctl_.DisableInterrupts();
    starts_ = core_.starts();
  }

  struct ApCtrlReg {
    static constexpr uint32_t kCtrl = hk::kRegCtrl, kGie = hk::kRegGie, kIer = hk::kRegIer,
                              kIsr = hk::kRegIsr;
  };

  std::mt19937_64 rng_;
  ce::VerilatedDut<Top> dut_;
  ce::Sim sim_;
  FakeCore core_;
  ce::AxiLiteMaster axil_;
  ce::Sig irq_;
  ce::ApCtrl ctl_;
  ce::Checker chk_;
  std::string pass_;
  uint64_t starts_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const ce::BenchArgs args = ce::ParseBenchArgs(argc, argv);
  try {
    CtrlBench bench(args);
    return bench.Run();
  } catch (const ce::SimError& e) {
    std::printf("tb_csd_update_ctrl: FAIL (seed 0x%" PRIx64 "): %s\n", args.seed, e.what());
    return 1;
  }
}
