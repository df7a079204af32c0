#include "options.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "csdkit/platform/json_file.h"

namespace csdkit::cli {

std::string JsonText(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

CLI::Validator Count(uint64_t lo, uint64_t hi) {
  const std::string desc = "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        const std::string want =
            "expected a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) {
          return want + ", found '" + s + "'";
        }
        errno = 0;
        const unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
        if (errno == ERANGE || v < lo || v > hi) return want + ", found " + s;
        return std::string();
      },
      desc);
}

CLI::Validator FiniteIn(double lo, double hi, bool lo_open) {
  std::ostringstream d;
  d << "FLOAT in " << (lo_open ? "(" : "[") << lo << ", " << hi << "]";
  const std::string desc = d.str();
  return CLI::Validator(
      [lo, hi, lo_open, desc](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) ||
            (lo_open ? v <= lo : v < lo) || v > hi) {
          return "expected a finite " + desc.substr(6) + ", found '" + s + "'";
        }
        return std::string();
      },
      desc);
}

void DeviceOptions::Add(CLI::App* c) {
  std::vector<std::string> backends{"model", "rtl", "opencl"};
  if (allow_null) backends.push_back("null");
  c->add_option("--backend", backend,
                std::string("devices: model (emulated SmartSSDs, host-model kernel), rtl "
                            "(emulated, Verilated RTL), opencl (OpenCL devices: PoCL, or Xilinx "
                            "cards with --xclbin)") +
                    (allow_null ? ", null (planning: no data moved or computed, bytes counted "
                                  "and time booked on the link model; the store is only read)"
                                : ""))
      ->check(CLI::IsMember(backends))
      ->capture_default_str();
  c->add_option("--platform", platform, "opencl: substring of the OpenCL platform name");
  c->add_option("--xclbin", xclbin,
                "the csd_update xclbin: required on a Xilinx card; emulated devices: an "
                "emulated-SmartSSD xclbin");
  c->add_option("--device", device,
                "number of the first device (opencl: device index within the platform)")
      ->capture_default_str();
  c->add_option("--device-mem", device_mem, "device memory per device in bytes")
      ->check(Count(uint64_t{1} << 20, uint64_t{1} << 50))
      ->capture_default_str();
  c->add_flag("!--no-link-model", link_model,
              "do not estimate SmartSSD hardware time with the link model");
  c->add_option("--ds-config", ds_config,
                "DeepSpeed JSON config whose \"aio\" block configures the storage engine");
  c->add_option("--memory", memory, "rtl: AXI memory timing ideal|ddr|stress")
      ->check(CLI::IsMember({"ideal", "ddr", "stress"}))
      ->capture_default_str();
  c->add_option("--trace", trace, "rtl: write an FST waveform of the (last) launch to this file");
}

DeviceSpec DeviceOptions::Spec(unsigned count, bool emulation_xclbin) const {
  DeviceSpec s;
  s.backend = ParseBackend(backend);
  s.count = count;
  s.first = device;
  s.device_mem = device_mem;
  s.platform = platform;
  s.xclbin = xclbin;
  s.emulation_xclbin = emulation_xclbin;
  s.link_model = link_model;
  if (!ds_config.empty()) {
    nlohmann::json j;
    try {
      j = ReadJsonFile(ds_config, uint64_t{1} << 20);  // a regular file, bounded nesting
    } catch (const JsonFileError& e) {
      throw std::invalid_argument(std::string("--ds-config (a DeepSpeed JSON config): ") +
                                  e.what());
    }
    try {
      s.aio = aio::AioConfig::FromDeepSpeedConfig(j);
    } catch (const std::exception& e) {
      throw std::invalid_argument("--ds-config '" + ds_config + "': " + e.what());
    }
  }
  s.rtl.memory = emu::ParseRtlMemory(memory);
  if (!trace.empty()) {
    if (backend != "rtl") {
      throw std::invalid_argument("--trace: expected --backend rtl (only the RTL writes a "
                                  "waveform), found --backend " + backend);
    }
    const std::filesystem::path dir = std::filesystem::path(trace).parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
      throw std::invalid_argument("--trace '" + trace + "': expected a file in an existing "
                                  "directory, found no directory '" + dir.string() + "'");
    }
  }
  s.rtl.trace = trace;
  return s;
}

void HyperOptions::Add(CLI::App* c) {
  app_ = c;
  c->add_option("--optimizer", optimizer, "adamw|adam|sgd|adagrad|lion")
      ->check(CLI::IsMember(OptimizerNames()))
      ->capture_default_str();
  c->add_option("--grad", grad, "gradient dtype fp32|fp16|bf16")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
      ->capture_default_str();
  c->add_option("--out", out, "low-precision weight copy none|fp16|bf16")
      ->check(CLI::IsMember({"none", "fp16", "bf16"}))
      ->capture_default_str();
  c->add_option("--lr", lr, "learning rate");
  c->add_option("--beta1", beta1, "beta1");
  c->add_option("--beta2", beta2, "beta2");
  c->add_option("--eps", eps, "epsilon");
  c->add_option("--weight-decay", wd, "weight decay");
  c->add_option("--momentum", momentum, "SGD momentum");
  c->add_option("--dampening", dampening, "SGD dampening");
  c->add_flag("--nesterov", nesterov, "SGD Nesterov momentum");
  c->add_option("--lr-decay", lr_decay, "Adagrad lr decay");
  c->add_option("--initial-accumulator", acc0, "Adagrad initial accumulator value");
  c->add_flag("--ftz", ftz, "FTZ/DAZ policy instead of IEEE");
  c->add_option("--state", state,
                "state format fp32|q8|q8-bf16 (docs/state-formats.md; q8-bf16's copy: "
                "bf16 unless --out none)")
      ->check(CLI::IsMember({"fp32", "q8", "q8-bf16"}))
      ->capture_default_str();
  c->add_option("--loss-scale", loss_scale, "gradients arrive multiplied by this")
      ->capture_default_str();
  c->add_option("--seed", seed, seed_help_)->check(Count(0, UINT64_MAX))->capture_default_str();
}

bool HyperOptions::Given(const char* opt) const {
  return app_ != nullptr && app_->count(opt) > 0;
}

OptimizerConfig HyperOptions::Config() const {
  OptimizerConfig c = OptimizerConfig::Defaults(ParseOptimizer(optimizer));
  auto set = [&](const char* opt, double v, double& dst) {
    if (Given(opt)) dst = v;
  };
  set("--lr", lr, c.lr);
  set("--beta1", beta1, c.beta1);
  set("--beta2", beta2, c.beta2);
  set("--eps", eps, c.eps);
  set("--weight-decay", wd, c.weight_decay);
  set("--momentum", momentum, c.momentum);
  set("--dampening", dampening, c.dampening);
  set("--lr-decay", lr_decay, c.lr_decay);
  set("--initial-accumulator", acc0, c.initial_accumulator_value);
  c.nesterov = nesterov;
  return c;
}

GradSpec HyperOptions::Grad() const {
  GradSpec g;
  g.grad = ParseGradDType(grad);
  g.out = ParseOutDType(out);
  g.ftz = ftz;
  g.state = ParseStateFmt(state);
  // bf16 weights have a bf16 copy (themselves): the fp16 default gives way unless asked for.
  if (g.state == hls::StateFmt::kQ8Bf16 && g.out == DType::kFp16 && !Given("--out")) {
    g.out = DType::kBf16;
  }
  g.loss_scale = loss_scale;
  // The CLI's gradients are synthetic: uniform in [-1, 1) times the loss scale. Above the
  // dtype's largest finite value most of them overflow, and every step would be skipped.
  const double max_grad = g.grad == DType::kFp16 ? 65504.0 : 3.4028234663852886e38;
  if (!(loss_scale > 0.0) || !(loss_scale <= max_grad)) {
    std::ostringstream os;
    os << "--loss-scale: expected a value in (0, " << max_grad << "] for --grad " << grad
       << " (synthetic gradients are uniform in [-1, 1) times the loss scale; a larger scale "
          "overflows them on every step), found " << loss_scale;
    throw std::invalid_argument(os.str());
  }
  return g;
}

void PrepareNewDir(const std::string& option, const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) {
    if (!std::filesystem::is_empty(dir, ec) || ec) {
      throw std::invalid_argument(option + ": expected a new or empty directory, found '" + dir +
                                  "' with files in it");
    }
    return;
  }
  if (std::filesystem::exists(std::filesystem::symlink_status(dir, ec))) {
    throw std::invalid_argument(option + ": expected a new or empty directory, found '" + dir +
                                "', which is not a directory");
  }
  if (::mkdir(dir.c_str(), 0755) != 0) {
    throw std::invalid_argument(option + ": expected to create '" + dir + "', found " +
                                std::strerror(errno) + " (its parent must exist)");
  }
}

}  // namespace csdkit::cli
