#include "session.h"

#include <algorithm>
#include <utility>

#include "csdkit/runtime/gradients.h"
#include "csdkit/runtime/sizing.h"

namespace csdkit::py_binding {

std::unique_ptr<Session> Session::Create(const std::string& dir, const ParamLayout& layout,
                                         StoreConfig cfg,
                                         const std::vector<OptimizerConfig>& groups,
                                         const void* weights, DType weight_dtype, DeviceSpec spec) {
  if (cfg.devices == 0) throw std::invalid_argument("devices: expected at least 1, found 0");
  if (cfg.subgroup_elems == 0) {
    const uint64_t shard = (layout.total() + cfg.devices - 1) / cfg.devices;
    const uint32_t fit = SubgroupForMemory(spec.device_mem, cfg.hyper, cfg.grad, cfg.out, shard);
    cfg.subgroup_elems = std::min<uint32_t>(fit, 1u << 20);
  }
  std::unique_ptr<Session> s(new Session());
  s->store_ = std::make_unique<Store>(
      Store::CreateForModel(dir, cfg, layout, groups, weights, weight_dtype));
  spec.count = cfg.devices;
  s->Start(spec);
  return s;
}

std::unique_ptr<Session> Session::Open(const std::string& dir, const ParamLayout& layout,
                                       DeviceSpec spec) {
  std::unique_ptr<Session> s(new Session());
  s->store_ = std::make_unique<Store>(Store::Open(dir, layout));
  spec.count = s->store_->config().devices;
  s->Start(spec);
  return s;
}

void Session::Start(const DeviceSpec& spec_in) {
  DeviceSpec spec = spec_in;
  if (spec.xclbin.empty() && spec.backend != Backend::kOpenCl) spec.emulation_xclbin = true;
  devices_ = std::make_unique<DeviceSet>(spec);
  scheduler_ = std::make_unique<Scheduler>(*store_, *devices_);
}

Session::~Session() {
  // The scheduler holds references to the store and the devices: it goes first.
  scheduler_.reset();
  devices_.reset();
  store_.reset();
}

StepReport Session::Step(const std::vector<const void*>& grads, const StepOptions& o_in,
                         double max_norm, double* l2norm, const std::vector<void*>* weights_out) {
  double norm = 0;
  const bool want_norm = l2norm != nullptr || max_norm > 0;
  GradientSet g =
      GradientSet::Gather(*store_, grads, want_norm ? &norm : nullptr, std::move(gather_buf_));
  if (l2norm != nullptr) *l2norm = norm;
  StepOptions o = o_in;
  if (max_norm > 0) {
    // The gathered norm is of the gradient as given, i.e. times the loss scale. A non-finite
    // norm gives clip 0 here, but such a gradient skips the step anyway.
    const double ls = o.loss_scale ? *o.loss_scale : store_->config().loss_scale;
    o.clip_coef = std::min(1.0, max_norm / (norm / ls + 1e-6));
  }
  StepReport rep;
  try {
    rep = scheduler_->Step(g, o);
  } catch (...) {
    gather_buf_ = std::move(g).TakeBuffer();
    throw;
  }
  gather_buf_ = std::move(g).TakeBuffer();  // the next step gathers into it again
  if (!rep.skipped && weights_out != nullptr) scheduler_->CopyWeightsOut(*weights_out);
  return rep;
}

StepReport Session::StepSparse(std::vector<std::vector<SparseGrad>> streams,
                               std::vector<std::pair<uint64_t, uint64_t>> frozen,
                               const StepOptions& o, const std::vector<void*>* weights_out) {
  const GradientSet g = GradientSet::FromStreams(*store_, std::move(streams), std::move(frozen));
  const StepReport rep = scheduler_->Step(g, o);
  if (!rep.skipped && weights_out != nullptr) scheduler_->CopyWeightsOut(*weights_out);
  return rep;
}

void Session::Export(const std::string& var, const std::vector<float*>& dst) const {
  ExportState(*store_, var, dst);
}

void Session::Import(const StateImport& in) {
  ImportState(*store_, in);
  scheduler_->InvalidateWeightsOut();
}

}  // namespace csdkit::py_binding
