// The store's configuration as the manifest records it, and the state an optimizer keeps.
#include "csdkit/hls/mode.h"
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

}  // namespace store_internal

using store_internal::Fail;
using store_internal::Get;
using store_internal::HyperFromJson;

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
          {"seed", seed}};
}

StoreConfig StoreConfig::FromJson(const nlohmann::json& j) {
  const std::string w = "manifest";
  StoreConfig c;
  c.params = Get<uint64_t>(j, "params", w);
  c.devices = Get<unsigned>(j, "devices", w);
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
  c.subgroup_elems = Get<uint32_t>(j, "subgroup_elems", w);
  c.seed = Get<uint64_t>(j, "seed", w);
  return c;
}

}  // namespace csdkit
