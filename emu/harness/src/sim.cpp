#include "csdkit/emu/harness/sim.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>

namespace csdkit {
namespace emu {

namespace {

uint64_t ParseCycles(const char* what, const char* text) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 0);
  if (text[0] == '\0' || *end != '\0' || errno != 0) {
    throw SimError(std::string(what) + ": expected a cycle number, found '" + text + "'");
  }
  return v;
}

}  // namespace

void SimOptions::ApplyEnvironment() {
  if (const char* p = std::getenv("CSDKIT_TRACE"); p != nullptr && *p != '\0') trace_path = p;
  if (const char* p = std::getenv("CSDKIT_TRACE_FROM"); p != nullptr && *p != '\0') {
    trace_from = ParseCycles("CSDKIT_TRACE_FROM", p);
  }
  if (const char* p = std::getenv("CSDKIT_TRACE_TO"); p != nullptr && *p != '\0') {
    trace_to = ParseCycles("CSDKIT_TRACE_TO", p);
  }
}

bool SimOptions::ParseFlag(int argc, char** argv, int* i) {
  const std::string arg = argv[*i];
  if (arg != "--trace" && arg != "--trace-from" && arg != "--trace-to") return false;
  if (*i + 1 >= argc) throw SimError(arg + " needs a value");
  const char* value = argv[++*i];
  if (arg == "--trace") {
    trace_path = value;
  } else if (arg == "--trace-from") {
    trace_from = ParseCycles("--trace-from", value);
  } else {
    trace_to = ParseCycles("--trace-to", value);
  }
  return true;
}

const char* SimOptions::FlagsHelp() {
  return "  --trace FILE.fst  write an FST waveform (or CSDKIT_TRACE=FILE.fst)\n"
         "  --trace-from N    first traced cycle (or CSDKIT_TRACE_FROM)\n"
         "  --trace-to N      first cycle not traced (or CSDKIT_TRACE_TO)\n";
}

Sim::Sim(Dut* dut, const SimOptions& options) : dut_(dut), options_(options) {
  if (dut_ == nullptr) throw SimError("Sim: no model");
  if (options_.reset_cycles < 2) {
    throw SimError("Sim: reset_cycles must be at least 2 (kernels register ap_rst_n), got " +
                   std::to_string(options_.reset_cycles));
  }
  if (!options_.trace_path.empty() && !dut_->CanTrace()) {
    throw SimError("Sim: a trace was requested (" + options_.trace_path +
                   ") but the model was Verilated without --trace-fst");
  }
  dut_->SetClock(false);
  dut_->SetReset(true);
  dut_->Eval(0);
}

Sim::~Sim() {
  try {
    Finish();
  } catch (...) {
    // A destructor must not throw; Finish() only closes files.
  }
}

void Sim::Finish() {
  if (finished_) return;
  finished_ = true;
  if (trace_open_) {
    dut_->TraceClose();
    trace_open_ = false;
  }
  dut_->Final();
}

void Sim::Attach(Component* c) {
  if (std::find(components_.begin(), components_.end(), c) == components_.end()) {
    components_.push_back(c);
  }
}

void Sim::Detach(Component* c) {
  components_.erase(std::remove(components_.begin(), components_.end(), c), components_.end());
}

void Sim::HalfCycleTrace(uint64_t time) {
  if (options_.trace_path.empty() || trace_done_) return;
  const bool in_window = cycle_ >= options_.trace_from && cycle_ < options_.trace_to;
  if (in_window && !trace_open_) {
    dut_->TraceOpen(options_.trace_path);
    trace_open_ = true;
  }
  if (!in_window && trace_open_) {
    dut_->TraceClose();
    trace_open_ = false;
    trace_done_ = true;
  }
  if (trace_open_) dut_->TraceDump(time);
}

void Sim::Reset() {
  in_reset_ = true;
  dut_->SetReset(true);
  Step(options_.reset_cycles);
  dut_->SetReset(false);
  in_reset_ = false;
}

void Sim::Step(uint64_t cycles) {
  for (uint64_t n = 0; n < cycles; ++n) {
    if (cycle_ >= options_.timeout_cycles) {
      throw SimError("simulation timeout: cycle " + std::to_string(cycle_) +
                     " reached the limit of " + std::to_string(options_.timeout_cycles) +
                     " cycles (SimOptions::timeout_cycles)");
    }
    for (Component* c : components_) {
      if (in_reset_) {
        c->Reset();
      } else {
        c->Drive(cycle_);
      }
    }
    dut_->SetClock(false);
    dut_->Eval(2 * cycle_);
    HalfCycleTrace(2 * cycle_);
    if (!in_reset_) {
      for (Component* c : components_) c->Sample(cycle_);
    }
    dut_->SetClock(true);
    dut_->Eval(2 * cycle_ + 1);
    HalfCycleTrace(2 * cycle_ + 1);
    ++cycle_;
  }
}

uint64_t Sim::RunUntil(const std::function<bool()>& done, uint64_t max_cycles,
                       const std::string& what) {
  const uint64_t start = cycle_;
  while (!done()) {
    if (cycle_ - start >= max_cycles) {
      throw SimError("timeout: " + what + " did not happen within " +
                     std::to_string(max_cycles) + " cycles (cycles " + std::to_string(start) +
                     " to " + std::to_string(cycle_) + ")");
    }
    Step();
  }
  return cycle_ - start;
}

}  // namespace emu
}  // namespace csdkit
