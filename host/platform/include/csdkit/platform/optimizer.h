// Optimizer hyper-parameters as a trainer states them, and their translation into one kernel
// launch's mode word and scalar operands (computed in double, rounded once to binary32).
#ifndef CSDKIT_PLATFORM_OPTIMIZER_H_
#define CSDKIT_PLATFORM_OPTIMIZER_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "csdkit/hls/mode.h"

namespace csdkit {

using hls::DType;
using hls::Optimizer;

/// Hyper-parameters, named as PyTorch names them. Fields an optimizer does not have are
/// ignored by it. Defaults(opt) gives PyTorch's defaults (Lion: the paper's).
struct OptimizerConfig {
  Optimizer opt = Optimizer::kAdamW;
  double lr = 1e-3;
  double beta1 = 0.9;     // Adam/AdamW/Lion
  double beta2 = 0.999;   // Adam/AdamW/Lion
  double eps = 1e-8;      // Adam/AdamW/Adagrad
  double weight_decay = 0.0;
  double momentum = 0.0;   // SGD
  double dampening = 0.0;  // SGD
  bool nesterov = false;   // SGD
  double lr_decay = 0.0;   // Adagrad
  double initial_accumulator_value = 0.0;  // Adagrad (state initialisation, not a kernel operand)

  static OptimizerConfig Defaults(Optimizer opt);
};

/// Everything one launch of csd_update needs besides buffers and sizes.
struct KernelLaunch {
  uint32_t mode = 0;
  hls::Scalars scalars{};
};

/// Gradient handling of one step.
struct GradSpec {
  DType grad = DType::kFp32;
  DType out = DType::kFp32;  // kFp32 = no low-precision copy
  bool sparse = false;
  bool ftz = false;
  double loss_scale = 1.0;  // gradients arrive multiplied by this
  double clip_coef = 1.0;   // global-norm clip coefficient (<= 1), folded into unscale
  /// How the store holds the state (docs/state-formats.md): fp32, q8 or q8-bf16.
  hls::StateFmt state = hls::StateFmt::kFp32;
};

/// Builds the launch for step `step` (1-based, as PyTorch counts). Throws std::invalid_argument
/// with what was expected and what was found for out-of-range hyper-parameters.
KernelLaunch MakeLaunch(const OptimizerConfig& cfg, const GradSpec& gs, int64_t step);

/// Throws std::invalid_argument if a hyper-parameter is outside what the optimizer accepts.
void ValidateConfig(const OptimizerConfig& cfg);

const char* OptimizerName(Optimizer o);
/// Every optimizer's name, in mode-word order: adamw, adam, sgd, adagrad, lion.
std::vector<std::string> OptimizerNames();
const char* DTypeName(DType t);       // "fp32", "fp16", "bf16"
const char* OutDTypeName(DType t);    // "none", "fp16", "bf16"
/// Parses a name; throws std::invalid_argument listing the accepted names.
Optimizer ParseOptimizer(const std::string& s);
DType ParseGradDType(const std::string& s);
DType ParseOutDType(const std::string& s);
unsigned DTypeBytes(DType t);
const char* StateFmtName(hls::StateFmt f);  // "fp32", "q8", "q8-bf16"
/// Parses a state format name; throws std::invalid_argument listing the accepted names.
hls::StateFmt ParseStateFmt(const std::string& s);

/// The hyper-parameters by PyTorch's names (lr, beta1, ..., initial_accumulator_value), as the
/// store's manifest and the golden vectors record them.
nlohmann::json HyperToJson(const OptimizerConfig& h);

/// Rounds a double to the nearest binary32 and returns its bits.
uint32_t F32Bits(double x);

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_OPTIMIZER_H_
