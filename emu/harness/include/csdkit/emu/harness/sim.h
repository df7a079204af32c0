// The simulation owner of a Verilated kernel: clock, synchronous reset, cycle counter, cycle
// timeout, optional FST trace over a window of cycles, and the components (memory slaves,
// AXI4-Lite master, bench drivers) that talk to the model every cycle.
//
// One cycle (Sim::Step):
//   1. every component drives its inputs of the model from its own state   (Component::Drive)
//   2. clock low, eval: the model's combinational outputs settle
//   3. every component samples the model's outputs and the handshakes      (Component::Sample)
//      that will happen at this edge, and updates its own state
//   4. clock high, eval: the model's registers take the edge
// Components decide their outputs from their state only (never from a model output of the same
// cycle), so the order of components does not matter and every handshake is seen exactly once.
//
// Reset (Sim::Reset): ap_rst_n low for reset_cycles cycles, during which components are held in
// their reset state and do not sample (a model's outputs are meaningless until its registered
// reset has taken effect), then released.
//
// Errors — a protocol violation seen by a component, a timeout — are thrown as SimError with
// the cycle number in the message.
#ifndef CSDKIT_EMU_HARNESS_SIM_H_
#define CSDKIT_EMU_HARNESS_SIM_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace csdkit {
namespace emu {

/// A failed simulation: protocol violation, timeout, bad harness use. what() says what, where
/// (cycle, address) and which rule.
class SimError : public std::runtime_error {
 public:
  explicit SimError(const std::string& what) : std::runtime_error(what) {}
};

/// What Sim needs from a model: clock, reset, evaluation and tracing. VerilatedDut<Top>
/// (verilated_dut.h) implements it for a Verilated top with Vitis port names.
class Dut {
 public:
  virtual ~Dut() = default;
  virtual void SetClock(bool high) = 0;
  /// Drives the reset input; asserted = true means in reset (ap_rst_n = 0).
  virtual void SetReset(bool asserted) = 0;
  /// Evaluates the model at simulation time `time` (half cycles).
  virtual void Eval(uint64_t time) = 0;
  /// Whether the model was Verilated with FST tracing.
  virtual bool CanTrace() const = 0;
  virtual void TraceOpen(const std::string& path) = 0;
  virtual void TraceDump(uint64_t time) = 0;
  virtual void TraceClose() = 0;
  /// Runs final blocks (at the end of the simulation).
  virtual void Final() = 0;
};

/// Something that drives and observes the model every cycle (see the cycle description above).
class Component {
 public:
  virtual ~Component() = default;
  /// Before the edge of `cycle`: set this component's inputs of the model.
  virtual void Drive(uint64_t cycle) = 0;
  /// After the model settled, before the edge: observe handshakes, update state.
  virtual void Sample(uint64_t cycle) = 0;
  /// Back to the initial state with idle outputs (called every cycle while reset is asserted).
  virtual void Reset() = 0;
};

/// Options of a simulation; the trace fields can also come from the environment.
struct SimOptions {
  /// Cycles with reset asserted (at least 2: ap_rst_n is registered inside a kernel).
  unsigned reset_cycles = 16;
  /// The simulation fails when its cycle counter reaches this.
  uint64_t timeout_cycles = 200'000'000;
  /// FST file to write; empty: no trace.
  std::string trace_path;
  /// Trace window [trace_from, trace_to) in cycles.
  uint64_t trace_from = 0;
  uint64_t trace_to = std::numeric_limits<uint64_t>::max();

  /// Takes trace_path / trace_from / trace_to from CSDKIT_TRACE=FILE.fst, CSDKIT_TRACE_FROM and
  /// CSDKIT_TRACE_TO when they are set (the environment wins over earlier settings).
  void ApplyEnvironment();
  /// Consumes `--trace FILE`, `--trace-from N` or `--trace-to N` at argv[*i] (advancing *i past
  /// the value); returns false if argv[*i] is none of them. Throws SimError on a missing value.
  bool ParseFlag(int argc, char** argv, int* i);
  /// One line describing the trace flags and variables, for a bench's usage text.
  static const char* FlagsHelp();
};

class Sim {
 public:
  /// `dut` must outlive the Sim.
  Sim(Dut* dut, const SimOptions& options);
  ~Sim();
  Sim(const Sim&) = delete;
  Sim& operator=(const Sim&) = delete;

  /// Components register themselves (their constructors call this) and unregister on
  /// destruction. They are driven in registration order.
  void Attach(Component* c);
  void Detach(Component* c);

  /// Asserts reset for options().reset_cycles cycles, then releases it.
  void Reset();
  /// Runs `cycles` clock cycles.
  void Step(uint64_t cycles = 1);
  /// Steps until done() is true (checked before each cycle); returns the cycles stepped. Throws
  /// SimError naming `what` when max_cycles pass first.
  uint64_t RunUntil(const std::function<bool()>& done, uint64_t max_cycles,
                    const std::string& what);

  /// Cycles completed since construction (reset cycles included).
  uint64_t cycle() const { return cycle_; }
  bool in_reset() const { return in_reset_; }
  const SimOptions& options() const { return options_; }
  /// Whether the FST trace is currently being written.
  bool tracing() const { return trace_open_; }

  /// Closes the trace and runs the model's final blocks (the destructor does it too).
  void Finish();

 private:
  void HalfCycleTrace(uint64_t time);

  Dut* dut_;
  SimOptions options_;
  std::vector<Component*> components_;
  uint64_t cycle_ = 0;
  bool in_reset_ = false;
  bool trace_open_ = false;
  bool trace_done_ = false;
  bool finished_ = false;
};

}  // namespace emu
}  // namespace csdkit

#endif  // CSDKIT_EMU_HARNESS_SIM_H_
