// The store's configuration as the manifest records it, and the state an optimizer keeps.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "csdkit/hls/mode.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/update_launch.h"
#include "csdkit/runtime/store.h"
#include "store_internal.h"

namespace csdkit {

namespace store_internal {

void HyperFromJson(const nlohmann::json& h, const std::string& hw, OptimizerConfig* c) {
  c->lr = Get<double>(h, "lr", hw);
  c->beta1 = Get<double>(h, "beta1", hw);
  c->beta2 = Get<double>(h, "beta2", hw);
  c->eps = Get<double>(h, "eps", hw);
  c->weight_decay = Get<double>(h, "weight_decay", hw);
  c->momentum = Get<double>(h, "momentum", hw);
  c->dampening = Get<double>(h, "dampening", hw);
  c->nesterov = Get<bool>(h, "nesterov", hw);
  c->lr_decay = Get<double>(h, "lr_decay", hw);
  c->initial_accumulator_value = Get<double>(h, "initial_accumulator_value", hw);
}

std::vector<Shard> MakeShards(uint64_t params, unsigned devices, uint64_t align) {
  std::vector<Shard> s;
  const uint64_t per = ((params + devices - 1) / devices + align - 1) / align * align;
  for (unsigned k = 0; k < devices; ++k) {
    const uint64_t b = std::min<uint64_t>(params, per * k);
    const uint64_t e = std::min<uint64_t>(params, per * (k + 1));
    s.push_back({k, b, e});
  }
  return s;
}

uint64_t ShardAlign(const StoreConfig& c, bool whole_blocks) {
  return whole_blocks ? hls::kBlockElems : hls::IsQ8(c.state) ? hls::kQ8Block : 1;
}

void CheckStoreConfig(const StoreConfig& c, bool whole_blocks) {
  ValidateConfig(c.hyper);
  if (c.devices < 1 || c.devices > kMaxStoreDevices) {
    throw std::invalid_argument("devices: expected 1.." + std::to_string(kMaxStoreDevices) +
                                ", found " + std::to_string(c.devices));
  }
  if (c.params < c.devices || c.params > kMaxStoreParams) {
    throw std::invalid_argument("params: expected at least one parameter per device (" +
                                std::to_string(c.devices) + ") and at most 2^40, found " +
                                std::to_string(c.params));
  }
  if (c.subgroup_elems == 0 || c.subgroup_elems % hls::kBlockElems != 0) {
    throw std::invalid_argument("subgroup size: expected a positive multiple of 65536, found " +
                                std::to_string(c.subgroup_elems));
  }
  // The kernel scales gradients by 1 / loss_scale in binary32: both must be finite there.
  const float ls = static_cast<float>(c.loss_scale);
  if (!(c.loss_scale > 0.0) || !std::isfinite(c.loss_scale) || !std::isfinite(ls) ||
      !std::isfinite(1.0f / ls)) {
    std::ostringstream os;
    os << "loss scale: expected a value > 0 whose value and reciprocal are finite as binary32, "
          "found " << std::setprecision(9) << c.loss_scale;
    throw std::invalid_argument(os.str());
  }
  if (c.state == hls::StateFmt::kQ8Bf16 && c.out == DType::kFp16) {
    throw std::invalid_argument(
        "low-precision copy: expected bf16 or none for a q8-bf16 store (its weights are bf16, so "
        "the copy is the weights themselves), found fp16");
  }
  if (hls::IsQ8(c.state) && c.params % hls::kQ8Block != 0) {
    throw std::invalid_argument(
        "params: expected a multiple of 256 for a " + std::string(StateFmtName(c.state)) +
        " store (its moments are quantized in blocks of 256), found " + std::to_string(c.params) +
        "; round it up to " + std::to_string((c.params + 255) / 256 * 256));
  }
  for (const Shard& sh : MakeShards(c.params, c.devices, ShardAlign(c, whole_blocks))) {
    if (sh.size() == 0) {
      throw std::invalid_argument(
          "devices: expected every device to hold part of the model (shards of whole 65536-"
          "element blocks), found " + std::to_string(c.devices) + " devices for " +
          std::to_string(c.params) + " parameters; use at most " + std::to_string(sh.device) +
          " devices");
    }
  }
}

}  // namespace store_internal

using store_internal::CheckStoreConfig;
using store_internal::Fail;
using store_internal::Get;
using store_internal::GetUint;
using store_internal::HyperFromJson;
using store_internal::kMaxStoreDevices;
using store_internal::kMaxStoreParams;

std::vector<StateArray> StateArrays(const std::vector<std::string>& vars, hls::StateFmt f) {
  std::vector<StateArray> r;
  const bool q8 = hls::IsQ8(f);
  for (unsigned v = 0; v < vars.size(); ++v) {
    const std::string& n = vars[v];
    if (n == "theta") {
      r.push_back({n, v, false, f == hls::StateFmt::kQ8Bf16 ? 2u : 4u, update_arg::theta});
    } else if (!q8) {
      r.push_back({n, v, false, 4u, n == "m" ? update_arg::m : update_arg::v});
    } else {
      r.push_back({n, v, false, 1u, n == "m" ? update_arg::m : update_arg::v});
      r.push_back({n + ".absmax", v, true, 4u, n == "m" ? update_arg::m_absmax : update_arg::v_absmax});
    }
  }
  return r;
}

std::vector<std::string> StateVariables(const OptimizerConfig& h) {
  std::vector<std::string> v{"theta"};
  hls::Mode md{};
  md.opt = h.opt;
  md.momentum = h.opt == Optimizer::kSgd && h.momentum != 0.0;
  if (hls::UsesM(md)) v.push_back("m");
  if (hls::UsesV(md)) v.push_back("v");
  return v;
}

nlohmann::json StoreConfig::ToJson() const {
  return {{"params", params},
          {"devices", devices},
          {"optimizer", OptimizerName(hyper.opt)},
          {"hyper", HyperToJson(hyper)},
          {"grad", DTypeName(grad)},
          {"out", OutDTypeName(out)},
          {"ftz", ftz},
          {"loss_scale", loss_scale},
          {"subgroup_elems", subgroup_elems},
          {"seed", seed},
          {"state", StateFmtName(state)}};
}

StoreConfig StoreConfig::FromJson(const nlohmann::json& j) {
  const std::string w = "manifest";
  StoreConfig c;
  c.params = GetUint(j, "params", w, 1, kMaxStoreParams);
  c.devices = static_cast<unsigned>(GetUint(j, "devices", w, 1, kMaxStoreDevices));
  try {
    c.hyper.opt = ParseOptimizer(Get<std::string>(j, "optimizer", w));
    c.grad = ParseGradDType(Get<std::string>(j, "grad", w));
    c.out = ParseOutDType(Get<std::string>(j, "out", w));
  } catch (const std::invalid_argument& e) {
    Fail(w + ": " + e.what());
  }
  const nlohmann::json h = Get<nlohmann::json>(j, "hyper", w);
  const std::string hw = w + " hyper";
  HyperFromJson(h, hw, &c.hyper);
  c.ftz = Get<bool>(j, "ftz", w);
  c.loss_scale = Get<double>(j, "loss_scale", w);
  c.subgroup_elems = static_cast<uint32_t>(GetUint(j, "subgroup_elems", w, 1, UINT32_MAX));
  c.seed = GetUint(j, "seed", w, 0, UINT64_MAX);
  // Manifests written before the compressed formats have no "state": binary32.
  if (j.contains("state")) {
    try {
      c.state = ParseStateFmt(Get<std::string>(j, "state", w));
    } catch (const std::invalid_argument& e) {
      Fail(w + ": " + e.what());
    }
  }
  return c;
}


}  // namespace csdkit
