// ApCtrl: launches a kernel through its ap_ctrl_hs control registers the way XRT does on a card:
// write the arguments (by name, through the kernel's argument table), write ap_start, then poll
// CTRL for ap_done or wait for the interrupt line and acknowledge it in ISR.
//
//   ApCtrl ctl(&sim, &axil, csdkit::hls::kUpdateArgs, Sig(dut->interrupt));
//   ctl.SetArg("theta", theta_addr);  ... ctl.SetArg("n", n);
//   ctl.Start();
//   uint64_t cycles = ctl.WaitDone(ApCtrl::Wait::kInterrupt);
#ifndef CSDKIT_EMU_HARNESS_AP_CTRL_H_
#define CSDKIT_EMU_HARNESS_AP_CTRL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "csdkit/emu/harness/axil_master.h"
#include "csdkit/emu/harness/signal.h"
#include "csdkit/emu/harness/sim.h"
#include "csdkit/hls/update_args.h"

namespace csdkit {
namespace emu {

class ApCtrl {
 public:
  /// Control register offsets and bits (ap_ctrl_hs; the same in every kernel).
  static constexpr uint32_t kCtrl = hls::kRegCtrl, kGie = hls::kRegGie, kIer = hls::kRegIer,
                            kIsr = hls::kRegIsr;
  static constexpr uint32_t kApStart = 1u << 0, kApDone = 1u << 1, kApIdle = 1u << 2,
                            kApReady = 1u << 3, kAutoRestart = 1u << 7, kInterrupt = 1u << 9;
  /// IER / ISR bits.
  static constexpr uint32_t kIrqDone = 1u << 0, kIrqReady = 1u << 1;

  enum class Wait {
    kPoll,       // read CTRL until ap_done (clear on read: the read that sees it consumes it)
    kInterrupt,  // wait for the line (call EnableInterrupts() before Start()), then check
                 // and acknowledge ISR and read CTRL
  };

  /// `args`/`num_args`: the kernel's argument table (must outlive this object). `interrupt`:
  /// the top's interrupt port (needed for Wait::kInterrupt only).
  ApCtrl(Sim* sim, AxiLiteMaster* axil, const hls::ArgInfo* args, size_t num_args,
         Sig interrupt = Sig());
  template <size_t N>
  ApCtrl(Sim* sim, AxiLiteMaster* axil, const hls::ArgInfo (&args)[N], Sig interrupt = Sig())
      : ApCtrl(sim, axil, args, N, interrupt) {}

  /// The table entry of argument `name`; throws SimError listing the valid names if unknown.
  const hls::ArgInfo& Arg(const std::string& name) const;
  /// Writes an argument: a pointer as low then high word, a scalar as one word (throws
  /// SimError if the value does not fit 32 bits).
  void SetArg(const std::string& name, uint64_t value);
  /// Writes the argument of a table entry (an entry of the table given at construction).
  void SetArg(const hls::ArgInfo& arg, uint64_t value);
  /// Reads an argument back.
  uint64_t GetArg(const std::string& name);
  /// Sets several arguments in the order given.
  void SetArgs(const std::vector<std::pair<std::string, uint64_t>>& args);

  /// Reads CTRL (this clears ap_done and ap_ready if set).
  uint32_t ReadCtrl();
  /// Writes GIE and IER.
  void EnableInterrupts(bool on_done = true, bool on_ready = false);
  void DisableInterrupts();
  /// Writes ISR: toggles the bits given.
  void ToggleIsr(uint32_t bits);

  /// Writes ap_start (with auto_restart if asked); remembers the cycle for WaitDone.
  void Start(bool auto_restart = false);
  /// Waits for the end of the launch started last; returns the cycles from the end of Start()
  /// to the observation of ap_done. Throws SimError after `timeout_cycles`.
  uint64_t WaitDone(Wait how = Wait::kPoll, uint64_t timeout_cycles = 10'000'000);
  /// SetArgs, Start, WaitDone: one launch, as on a card.
  uint64_t Launch(const std::vector<std::pair<std::string, uint64_t>>& args,
                  Wait how = Wait::kPoll, uint64_t timeout_cycles = 10'000'000);

  /// The CTRL value of the read that saw ap_done.
  uint32_t last_ctrl() const { return last_ctrl_; }

 private:
  Sim* sim_;
  AxiLiteMaster* axil_;
  const hls::ArgInfo* args_;
  size_t num_args_;
  Sig interrupt_;
  uint64_t start_cycle_ = 0;
  uint32_t last_ctrl_ = 0;
};

}  // namespace emu
}  // namespace csdkit

#endif  // CSDKIT_EMU_HARNESS_AP_CTRL_H_
