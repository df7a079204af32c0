// Options that several commands share, written once: the device options of every command that
// runs the kernel, and the optimizer's hyper-parameters.
#ifndef CSDKIT_CLI_OPTIONS_H_
#define CSDKIT_CLI_OPTIONS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "csdkit/platform/optimizer.h"
#include "csdkit/system/device_set.h"

namespace csdkit::cli {

/// An unsigned option: digits only (no sign: "-1" is refused instead of wrapping to 2^64 - 1),
/// a value in [lo, hi]. The message names what was expected and what was found.
CLI::Validator Count(uint64_t lo, uint64_t hi);
/// A floating-point option that must be finite and inside (lo, hi] (lo_open) or [lo, hi]:
/// NaN and infinities are refused, never read as a default.
CLI::Validator FiniteIn(double lo, double hi, bool lo_open);

/// The JSON every --json prints: indented by 2, UTF-8. A string that is not valid UTF-8 (a
/// path of other bytes) is printed with U+FFFD for each invalid byte instead of failing the
/// command after it has done its work.
std::string JsonText(const nlohmann::json& j);

/// An output directory given as `option` (--dump, --dump-launches): a new one (created here,
/// its parent must exist) or an existing empty one — a command writes only what it creates, so
/// a directory with files in it is refused before anything runs.
void PrepareNewDir(const std::string& option, const std::string& dir);

/// --backend, --platform, --xclbin, --device, --device-mem, --no-link-model, --ds-config,
/// --memory and --trace (rtl): what the device set needs. --backend null only where
/// allow_null is set before Add.
struct DeviceOptions {
  std::string backend;
  std::string platform, xclbin;
  unsigned device = 0;
  uint64_t device_mem = uint64_t{4} << 30;
  bool link_model = true;
  std::string ds_config;  // a DeepSpeed config file with an "aio" block
  std::string memory;     // rtl: AXI memory timing
  std::string trace;      // rtl: FST waveform file
  /// Whether --backend accepts null (planning devices: commands that step a store only).
  bool allow_null = false;

  /// Defaults of the command: its backend and its rtl memory timing.
  DeviceOptions(std::string backend_default, std::string memory_default)
      : backend(std::move(backend_default)), memory(std::move(memory_default)) {}
  void Add(CLI::App* c);
  /// The device set's spec for `count` devices (the first is --device); with
  /// `emulation_xclbin`, emulated devices without --xclbin load and check the emulated
  /// SmartSSD's generated xclbin (DeviceSpec::emulation_xclbin).
  DeviceSpec Spec(unsigned count, bool emulation_xclbin = false) const;
};

/// --optimizer, the hyper-parameters (PyTorch's names), --grad, --out, --ftz, --loss-scale and
/// --seed. A hyper-parameter not given keeps the optimizer's default.
struct HyperOptions {
  std::string optimizer = "adamw", grad, out;
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, wd = 0, momentum = 0, dampening = 0,
         lr_decay = 0, acc0 = 0;
  bool nesterov = false, ftz = false;
  double loss_scale = 1.0;
  uint64_t seed = 1;
  std::string state = "fp32";

  HyperOptions(std::string grad_default, std::string out_default, std::string seed_help)
      : grad(std::move(grad_default)), out(std::move(out_default)), seed_help_(std::move(seed_help)) {}
  void Add(CLI::App* c);
  /// The optimizer's defaults with the given hyper-parameters applied.
  OptimizerConfig Config() const;
  /// grad, out, ftz and loss scale (sparse and clip are the command's).
  GradSpec Grad() const;

 private:
  std::string seed_help_;
  CLI::App* app_ = nullptr;
  bool Given(const char* opt) const;
};

}  // namespace csdkit::cli

#endif  // CSDKIT_CLI_OPTIONS_H_
