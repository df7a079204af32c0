// VerilatedDut<Top>: the Dut of a Verilated kernel top with Vitis port names (ap_clk,
// ap_rst_n). Header-only, so the harness library itself is not compiled against Verilator: a
// bench includes this after its model's header and links a library holding the Verilated model
// and the Verilator runtime.
//
// The model owns its VerilatedContext. Registers start with random values (randReset(2), with
// --x-initial unique at Verilation), so a bench sees what reset does and does not initialise.
// Tracing works when the model was Verilated with --trace-fst and VM_TRACE_FST=1 is defined for
// the bench; the file is only opened when Sim asks for it.
#ifndef CSDKIT_EMU_HARNESS_VERILATED_DUT_H_
#define CSDKIT_EMU_HARNESS_VERILATED_DUT_H_

#include <verilated.h>

#include <cstdint>
#include <memory>
#include <string>

#include "csdkit/emu/harness/signal.h"
#include "csdkit/emu/harness/sim.h"

#if VM_TRACE_FST
#include <verilated_fst_c.h>
#endif

namespace csdkit {
namespace emu {

namespace internal {
template <typename T>
auto InterruptPort(T* top, int) -> decltype(Sig(top->__SYM__interrupt)) {
  return Sig(top->__SYM__interrupt);
}
template <typename T>
auto InterruptPort(T* top, long) -> decltype(Sig(top->interrupt)) {
  return Sig(top->interrupt);
}
}  // namespace internal

/// The `interrupt` port of a Vitis kernel top. `interrupt` is a common C++ word, so Verilator
/// names the member `__SYM__interrupt`; this binds whichever the model has.
template <typename Top>
Sig InterruptSig(Top* top) {
  return internal::InterruptPort(top, 0);
}

template <typename Top>
class VerilatedDut final : public Dut {
 public:
  /// Builds the model; `seed` seeds Verilator's random initial register values.
  explicit VerilatedDut(uint64_t seed = 1, const char* name = "top")
      : ctx_(std::make_unique<VerilatedContext>()) {
    ctx_->randReset(2);
    ctx_->randSeed(static_cast<int>(seed & 0x7fffffff));
    // An RTL assertion or $error becomes a SimError (with the seed and cycle in the bench's
    // report) instead of an abort.
    ctx_->fatalOnError(false);
#if VM_TRACE_FST
    ctx_->traceEverOn(true);
#endif
    top_ = std::make_unique<Top>(ctx_.get(), name);
  }
  ~VerilatedDut() override {
#if VM_TRACE_FST
    if (trace_) trace_->close();
#endif
  }

  Top* top() { return top_.get(); }
  Top* operator->() { return top_.get(); }
  VerilatedContext* context() { return ctx_.get(); }

  void SetClock(bool high) override { top_->ap_clk = high ? 1 : 0; }
  // Assertions are off while reset is asserted: registers (the kernel's registered ap_rst_n
  // included) start random, so before reset has propagated an assertion can see any state.
  void SetReset(bool asserted) override {
    top_->ap_rst_n = asserted ? 0 : 1;
    ctx_->assertOn(!asserted);
  }
  void Eval(uint64_t time) override {
    ctx_->time(time);
    top_->eval();
    if (ctx_->gotError()) {
      throw SimError("the model reported an error (an assertion or $error, printed above) at "
                     "cycle " + std::to_string(time / 2));
    }
  }
  bool CanTrace() const override { return VM_TRACE_FST != 0; }
  void TraceOpen(const std::string& path) override {
#if VM_TRACE_FST
    if (!trace_) {
      trace_ = std::make_unique<VerilatedFstC>();
      top_->trace(trace_.get(), 99);
    }
    trace_->open(path.c_str());
#else
    throw SimError("model Verilated without --trace-fst: cannot trace to " + path);
#endif
  }
  void TraceDump(uint64_t time) override {
#if VM_TRACE_FST
    if (trace_) trace_->dump(time);
#else
    (void)time;
#endif
  }
  void TraceClose() override {
#if VM_TRACE_FST
    if (trace_) trace_->close();
#endif
  }
  void Final() override { top_->final(); }

 private:
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<Top> top_;
#if VM_TRACE_FST
  std::unique_ptr<VerilatedFstC> trace_;
#endif
};

}  // namespace emu
}  // namespace csdkit

#endif  // CSDKIT_EMU_HARNESS_VERILATED_DUT_H_
