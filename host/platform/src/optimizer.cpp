#include "csdkit/platform/optimizer.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "csdkit/hls/bits.h"

namespace csdkit {

OptimizerConfig OptimizerConfig::Defaults(Optimizer opt) {
  OptimizerConfig c;
  c.opt = opt;
  switch (opt) {
    case Optimizer::kAdamW:
      c.weight_decay = 1e-2;
      break;
    case Optimizer::kAdam:
      break;
    case Optimizer::kSgd:
      c.lr = 1e-2;
      c.momentum = 0.9;
      break;
    case Optimizer::kAdagrad:
      c.lr = 1e-2;
      c.eps = 1e-10;
      break;
    case Optimizer::kLion:
      c.lr = 1e-4;
      c.beta2 = 0.99;
      break;
  }
  return c;
}

uint32_t F32Bits(double x) { return hls::F2U(static_cast<float>(x)); }

namespace {

[[noreturn]] void Bad(const std::string& what, const std::string& expected, double found) {
  std::ostringstream os;
  os << what << ": expected " << expected << ", found " << found;
  throw std::invalid_argument(os.str());
}

// Finite in double and in binary32 (the kernel's scalars are binary32), inside [lo, hi].
void CheckFiniteRange(const char* name, double x, double lo, double hi, bool hi_open) {
  if (!std::isfinite(x) || !std::isfinite(static_cast<float>(x)) || x < lo ||
      (hi_open ? x >= hi : x > hi)) {
    std::ostringstream exp;
    exp << "a value finite as binary32 in [" << lo << ", " << hi << (hi_open ? ")" : "]");
    Bad(name, exp.str(), x);
  }
}

}  // namespace

void ValidateConfig(const OptimizerConfig& c) {
  const double inf = INFINITY;
  CheckFiniteRange("lr", c.lr, 0.0, inf, true);
  CheckFiniteRange("weight_decay", c.weight_decay, 0.0, inf, true);
  switch (c.opt) {
    case Optimizer::kAdamW:
    case Optimizer::kAdam:
    case Optimizer::kLion:
      CheckFiniteRange("beta1", c.beta1, 0.0, 1.0, true);
      CheckFiniteRange("beta2", c.beta2, 0.0, 1.0, true);
      if (c.opt != Optimizer::kLion) CheckFiniteRange("eps", c.eps, 0.0, inf, true);
      break;
    case Optimizer::kSgd:
      CheckFiniteRange("momentum", c.momentum, 0.0, inf, true);
      CheckFiniteRange("dampening", c.dampening, 0.0, 1.0, false);
      if (c.nesterov && (c.momentum <= 0.0 || c.dampening != 0.0)) {
        throw std::invalid_argument(
            "nesterov: expected momentum > 0 and dampening = 0 (as PyTorch requires), found "
            "momentum " + std::to_string(c.momentum) + " and dampening " +
            std::to_string(c.dampening));
      }
      break;
    case Optimizer::kAdagrad:
      CheckFiniteRange("eps", c.eps, 0.0, inf, true);
      CheckFiniteRange("lr_decay", c.lr_decay, 0.0, inf, true);
      CheckFiniteRange("initial_accumulator_value", c.initial_accumulator_value, 0.0, inf, true);
      break;
  }
}

KernelLaunch MakeLaunch(const OptimizerConfig& c, const GradSpec& gs, int64_t step) {
  ValidateConfig(c);
  if (step < 1) Bad("step", "a step number >= 1 (PyTorch counts from 1)", static_cast<double>(step));
  if (!std::isfinite(gs.loss_scale) || gs.loss_scale <= 0.0)
    Bad("loss_scale", "a finite value > 0", gs.loss_scale);
  if (!std::isfinite(gs.clip_coef) || gs.clip_coef <= 0.0)
    Bad("clip_coef", "a finite value > 0", gs.clip_coef);

  hls::Mode md{};
  md.opt = c.opt;
  md.grad = gs.grad;
  md.out = gs.out;
  md.sparse = gs.sparse;
  md.ftz = gs.ftz;
  md.state = gs.state;
  if (gs.state == hls::StateFmt::kQ8Bf16 && gs.out == DType::kFp16) {
    throw std::invalid_argument(
        "low-precision copy: expected bf16 or none for a q8-bf16 state (its weights are bf16, "
        "so the copy is the weights themselves), found fp16");
  }
  const double t = static_cast<double>(step);
  // Every scalar is computed in double and rounded once to binary32, where it must be finite:
  // a value that is finite in double but overflows binary32 (lr 1e39, loss scale 1e-39, ...)
  // would make the whole state NaN.
  auto scalar = [&](const char* name, const char* formula, double x) {
    const float f = static_cast<float>(x);
    if (!std::isfinite(f)) {
      std::ostringstream os;
      os << "kernel scalar " << name << " = " << formula << " (step " << step
         << "): expected a value finite as binary32 (magnitude <= 3.40282347e+38), found " << x
         << "; the hyper-parameters, loss scale or clip coefficient are out of range";
      throw std::invalid_argument(os.str());
    }
    return hls::F2U(f);
  };
  KernelLaunch k;
  hls::Scalars sc{};
  const uint32_t one = F32Bits(1.0);
  sc.unscale = scalar("unscale", "clip_coef / loss_scale", gs.clip_coef / gs.loss_scale);
  sc.c1 = one;
  sc.c2 = one;
  sc.beta2 = one;
  sc.omb2 = one;
  switch (c.opt) {
    case Optimizer::kAdamW:
    case Optimizer::kAdam: {
      const double bc1 = 1.0 - std::pow(c.beta1, t);
      const double bc2 = 1.0 - std::pow(c.beta2, t);
      sc.lr = scalar("lr", "lr / (1 - beta1^t)", c.lr / bc1);
      sc.beta1 = F32Bits(c.beta1);
      sc.omb1 = F32Bits(1.0 - c.beta1);
      sc.beta2 = F32Bits(c.beta2);
      sc.omb2 = F32Bits(1.0 - c.beta2);
      sc.eps = scalar("eps", "eps", c.eps);
      sc.c2 = scalar("c2", "1 / sqrt(1 - beta2^t)", 1.0 / std::sqrt(bc2));
      if (c.opt == Optimizer::kAdamW) {
        sc.c1 = scalar("c1", "1 - lr * weight_decay", 1.0 - c.lr * c.weight_decay);
      } else {
        sc.wd = scalar("wd", "weight_decay", c.weight_decay);
        md.l2 = c.weight_decay != 0.0;
      }
      break;
    }
    case Optimizer::kSgd:
      sc.lr = scalar("lr", "lr", c.lr);
      sc.beta1 = scalar("momentum", "momentum", c.momentum);
      sc.omb1 = F32Bits(1.0 - c.dampening);
      sc.wd = scalar("wd", "weight_decay", c.weight_decay);
      md.l2 = c.weight_decay != 0.0;
      md.momentum = c.momentum != 0.0;
      md.nesterov = c.nesterov;
      md.first = md.momentum && step == 1;
      break;
    case Optimizer::kAdagrad:
      sc.lr = scalar("lr", "lr / (1 + (t - 1) * lr_decay)", c.lr / (1.0 + (t - 1.0) * c.lr_decay));
      sc.eps = scalar("eps", "eps", c.eps);
      sc.wd = scalar("wd", "weight_decay", c.weight_decay);
      md.l2 = c.weight_decay != 0.0;
      break;
    case Optimizer::kLion:
      sc.lr = scalar("lr", "lr", c.lr);
      sc.beta1 = F32Bits(c.beta1);
      sc.omb1 = F32Bits(1.0 - c.beta1);
      sc.beta2 = F32Bits(c.beta2);
      sc.omb2 = F32Bits(1.0 - c.beta2);
      sc.c1 = scalar("c1", "1 - lr * weight_decay", 1.0 - c.lr * c.weight_decay);
      break;
  }
  k.mode = hls::EncodeMode(md);
  k.scalars = sc;
  return k;
}

const char* OptimizerName(Optimizer o) {
  switch (o) {
    case Optimizer::kAdamW: return "adamw";
    case Optimizer::kAdam: return "adam";
    case Optimizer::kSgd: return "sgd";
    case Optimizer::kAdagrad: return "adagrad";
    case Optimizer::kLion: return "lion";
  }
  return "?";
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFp32: return "fp32";
    case DType::kFp16: return "fp16";
    case DType::kBf16: return "bf16";
  }
  return "?";
}

const char* OutDTypeName(DType t) { return t == DType::kFp32 ? "none" : DTypeName(t); }

unsigned DTypeBytes(DType t) { return t == DType::kFp32 ? 4u : 2u; }

nlohmann::json HyperToJson(const OptimizerConfig& h) {
  return {{"lr", h.lr},
          {"beta1", h.beta1},
          {"beta2", h.beta2},
          {"eps", h.eps},
          {"weight_decay", h.weight_decay},
          {"momentum", h.momentum},
          {"dampening", h.dampening},
          {"nesterov", h.nesterov},
          {"lr_decay", h.lr_decay},
          {"initial_accumulator_value", h.initial_accumulator_value}};
}

std::vector<std::string> OptimizerNames() {
  std::vector<std::string> v;
  for (uint32_t i = 0; i < hls::kNumOptimizers; ++i) v.push_back(OptimizerName(static_cast<Optimizer>(i)));
  return v;
}

Optimizer ParseOptimizer(const std::string& s) {
  std::string names;
  for (uint32_t i = 0; i < hls::kNumOptimizers; ++i) {
    const auto o = static_cast<Optimizer>(i);
    if (s == OptimizerName(o)) return o;
    names += std::string(i ? ", " : "") + OptimizerName(o);
  }
  throw std::invalid_argument("optimizer: expected one of " + names + "; found '" + s + "'");
}

DType ParseGradDType(const std::string& s) {
  if (s == "fp32") return DType::kFp32;
  if (s == "fp16") return DType::kFp16;
  if (s == "bf16") return DType::kBf16;
  throw std::invalid_argument("gradient dtype: expected fp32, fp16 or bf16; found '" + s + "'");
}

DType ParseOutDType(const std::string& s) {
  if (s == "none") return DType::kFp32;
  if (s == "fp16") return DType::kFp16;
  if (s == "bf16") return DType::kBf16;
  throw std::invalid_argument("output dtype: expected none, fp16 or bf16; found '" + s + "'");
}

const char* StateFmtName(hls::StateFmt f) {
  switch (f) {
    case hls::StateFmt::kQ8:
      return "q8";
    case hls::StateFmt::kQ8Bf16:
      return "q8-bf16";
    default:
      return "fp32";
  }
}

hls::StateFmt ParseStateFmt(const std::string& s) {
  if (s == "fp32") return hls::StateFmt::kFp32;
  if (s == "q8") return hls::StateFmt::kQ8;
  if (s == "q8-bf16") return hls::StateFmt::kQ8Bf16;
  throw std::invalid_argument("state format: expected fp32, q8 or q8-bf16; found '" + s + "'");
}

}  // namespace csdkit
