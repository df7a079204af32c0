#include "csdkit/emu/harness/ap_ctrl.h"

#include <cinttypes>
#include <cstdio>

namespace csdkit {
namespace emu {

namespace {

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
  return buf;
}

}  // namespace

ApCtrl::ApCtrl(Sim* sim, AxiLiteMaster* axil, const hls::ArgInfo* args, size_t num_args,
               Sig interrupt)
    : sim_(sim), axil_(axil), args_(args), num_args_(num_args), interrupt_(interrupt) {
  if (sim_ == nullptr || axil_ == nullptr || args_ == nullptr) {
    throw SimError("ApCtrl: no Sim, AXI4-Lite master or argument table");
  }
}

const hls::ArgInfo& ApCtrl::Arg(const std::string& name) const {
  for (size_t i = 0; i < num_args_; ++i) {
    if (name == args_[i].name) return args_[i];
  }
  std::string names;
  for (size_t i = 0; i < num_args_; ++i) names += std::string(i ? ", " : "") + args_[i].name;
  throw SimError("ApCtrl: the kernel has no argument '" + name + "' (arguments: " + names + ")");
}

void ApCtrl::SetArg(const std::string& name, uint64_t value) { SetArg(Arg(name), value); }

void ApCtrl::SetArg(const hls::ArgInfo& a, uint64_t value) {
  const std::string name = a.name;
  if (a.kind == hls::ArgKind::kPtr) {
    axil_->Write(a.offset, static_cast<uint32_t>(value));
    axil_->Write(a.offset + 4, static_cast<uint32_t>(value >> 32));
  } else {
    if (value > 0xffffffffu) {
      throw SimError("ApCtrl::SetArg: " + name + " is a 32-bit scalar, value " + Hex(value) +
                     " does not fit");
    }
    axil_->Write(a.offset, static_cast<uint32_t>(value));
  }
}

uint64_t ApCtrl::GetArg(const std::string& name) {
  const hls::ArgInfo& a = Arg(name);
  uint64_t v = axil_->Read(a.offset);
  if (a.kind == hls::ArgKind::kPtr) v |= uint64_t{axil_->Read(a.offset + 4)} << 32;
  return v;
}

void ApCtrl::SetArgs(const std::vector<std::pair<std::string, uint64_t>>& args) {
  for (const auto& kv : args) SetArg(kv.first, kv.second);
}

uint32_t ApCtrl::ReadCtrl() { return axil_->Read(kCtrl); }

void ApCtrl::EnableInterrupts(bool on_done, bool on_ready) {
  axil_->Write(kIer, (on_done ? kIrqDone : 0u) | (on_ready ? kIrqReady : 0u));
  axil_->Write(kGie, 1);
}

void ApCtrl::DisableInterrupts() {
  axil_->Write(kGie, 0);
  axil_->Write(kIer, 0);
}

void ApCtrl::ToggleIsr(uint32_t bits) { axil_->Write(kIsr, bits); }

void ApCtrl::Start(bool auto_restart) {
  axil_->Write(kCtrl, kApStart | (auto_restart ? kAutoRestart : 0u));
  start_cycle_ = sim_->cycle();
}

uint64_t ApCtrl::WaitDone(Wait how, uint64_t timeout_cycles) {
  const uint64_t deadline = start_cycle_ + timeout_cycles;
  auto check_deadline = [&](const char* what) {
    if (sim_->cycle() >= deadline) {
      throw SimError(std::string("ApCtrl: ") + what + " not seen within " +
                     std::to_string(timeout_cycles) + " cycles of ap_start (cycle " +
                     std::to_string(start_cycle_) + " to " + std::to_string(sim_->cycle()) +
                     "); last CTRL " + Hex(last_ctrl_));
    }
  };
  if (how == Wait::kPoll) {
    for (;;) {
      last_ctrl_ = ReadCtrl();
      if (last_ctrl_ & kApDone) return sim_->cycle() - start_cycle_;
      check_deadline("ap_done");
    }
  }
  if (!interrupt_.bound()) {
    throw SimError("ApCtrl::WaitDone(kInterrupt): no interrupt port was given");
  }
  const uint64_t left = deadline > sim_->cycle() ? deadline - sim_->cycle() : 0;
  sim_->RunUntil([this] { return interrupt_.Get() != 0; }, left, "kernel interrupt");
  const uint64_t cycles = sim_->cycle() - start_cycle_;
  const uint32_t isr = axil_->Read(kIsr);
  if ((isr & kIrqDone) == 0) {
    throw SimError("ApCtrl: interrupt raised but ISR is " + Hex(isr) + " (ap_done bit not set)");
  }
  ToggleIsr(isr);  // acknowledge what was set
  last_ctrl_ = ReadCtrl();
  if ((last_ctrl_ & kApDone) == 0) {
    throw SimError("ApCtrl: ISR reported ap_done but CTRL is " + Hex(last_ctrl_));
  }
  return cycles;
}

uint64_t ApCtrl::Launch(const std::vector<std::pair<std::string, uint64_t>>& args, Wait how,
                        uint64_t timeout_cycles) {
  SetArgs(args);
  Start();
  return WaitDone(how, timeout_cycles);
}

}  // namespace emu
}  // namespace csdkit
