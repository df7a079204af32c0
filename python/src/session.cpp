#include "session.h"

#include <algorithm>
#include <cstring>
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
  if (filler_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(fill_mu_);
      filler_stop_ = true;
    }
    fill_cv_.notify_all();
    filler_.join();
  }
  // The scheduler holds references to the store and the devices: it goes first.
  scheduler_.reset();
  devices_.reset();
  store_.reset();
}

StepReport Session::Step(const std::vector<const void*>& grads, const StepOptions& o_in,
                         double max_norm, double* l2norm, const std::vector<void*>* weights_out) {
  if (filler_.joinable()) {
    // The gather writes the whole arena: queued fills finish first, and count no more.
    WaitFills();
    filled_.assign(filled_.size(), std::nullopt);
    slice_dirty_.assign(slice_dirty_.size(), false);
  }
  double norm = 0;
  const bool want_norm = l2norm != nullptr || max_norm > 0;
  GradientSet g =
      GradientSet::Gather(*store_, grads, want_norm ? &norm : nullptr, std::move(gather_buf_));
  if (l2norm != nullptr) *l2norm = norm;
  return StepDense(std::move(g), norm, o_in, max_norm, weights_out);
}

StepReport Session::StepDense(GradientSet g, double norm, const StepOptions& o_in,
                              double max_norm, const std::vector<void*>* weights_out) {
  StepOptions o = o_in;
  if (max_norm > 0) {
    // The norm is of the gradient as given, i.e. times the loss scale. A non-finite norm gives
    // clip 0 here, but such a gradient skips the step anyway.
    const double ls = o.loss_scale ? *o.loss_scale : store_->config().loss_scale;
    o.clip_coef = std::min(1.0, max_norm / (norm / ls + 1e-6));
  }
  StepReport rep;
  try {
    rep = StepWithWeightsOut(g, o, weights_out);
  } catch (...) {
    gather_buf_ = std::move(g).TakeBuffer();
    throw;
  }
  gather_buf_ = std::move(g).TakeBuffer();  // the next step fills it again
  return rep;
}

StepReport Session::StepWithWeightsOut(const GradientSet& g, StepOptions o,
                                       const std::vector<void*>* weights_out) {
  if (weights_out == nullptr) return scheduler_->Step(g, o);
  scheduler_->CheckWeightsOut(*weights_out);  // before anything is written
  const StoreConfig& c = store_->config();
  const uint64_t bytes = c.params * (c.out != DType::kFp32 ? 2 : 4);
  if (saved_weights_.size() < bytes) saved_weights_ = AlignedBuffer(bytes);
  const std::vector<std::pair<uint64_t, uint64_t>>& frozen = g.frozen();
  std::mutex mu;
  std::vector<std::pair<uint64_t, uint64_t>> handed;  // ranges written into weights_out
  // Each subgroup's weights go into the trainer's tensors as soon as they reach the host, on
  // the worker that brought them, while the devices go on with the rest; what the tensors held
  // there is kept, so that a step that fails after that puts it back.
  o.weights_ready = [&](uint64_t begin, uint64_t n) {
    scheduler_->CopyWeightsRange(*weights_out, begin, n, frozen, saved_weights_.data());
    std::lock_guard<std::mutex> lock(mu);
    handed.emplace_back(begin, n);
  };
  try {
    return scheduler_->Step(g, o);
  } catch (...) {
    for (const auto& [begin, n] : handed) {
      scheduler_->PutBackWeightsRange(*weights_out, begin, n, frozen, saved_weights_.data());
    }
    throw;
  }
}

void* Session::GradArena() {
  const StoreConfig& c = store_->config();
  const uint64_t bytes = c.params * DTypeBytes(c.grad);
  std::lock_guard<std::mutex> lk(fill_mu_);
  if (gather_buf_.size() < bytes) gather_buf_ = AlignedBuffer(bytes);  // zero-filled
  if (filled_.empty()) {
    const size_t nt = store_->layout()->tensors().size();
    filled_.assign(nt, std::nullopt);
    slice_dirty_.assign(nt, false);
  }
  if (!filler_.joinable()) filler_ = std::thread([this] { FillerLoop(); });
  return gather_buf_.data();
}

uint64_t Session::GradArenaBytes() const {
  return store_->config().params * DTypeBytes(store_->config().grad);
}

void Session::CheckTensorIndex(size_t t) const {
  const size_t nt = store_->layout()->tensors().size();
  if (t >= nt) {
    throw std::invalid_argument("tensor index: expected a layout entry below " +
                                std::to_string(nt) + ", found " + std::to_string(t));
  }
}

void Session::DoFill(size_t t, const void* src) {
  const ParamLayout& l = *store_->layout();
  const DType dt = store_->config().grad;
  const TensorGradient r = CopyTensorGradient(gather_buf_.data() + l.offset(t) * DTypeBytes(dt),
                                              src, l.tensors()[t].numel, dt, true);
  std::lock_guard<std::mutex> lk(fill_mu_);
  filled_[t] = r;
  slice_dirty_[t] = true;
}

void Session::FillerLoop() {
  std::unique_lock<std::mutex> lk(fill_mu_);
  for (;;) {
    fill_cv_.wait(lk, [&] { return filler_stop_ || !fill_queue_.empty(); });
    if (fill_queue_.empty()) return;  // stopping, nothing left
    const FillJob job = fill_queue_.front();
    fill_queue_.pop_front();
    ++fills_running_;
    lk.unlock();
    try {
      DoFill(job.t, job.src);
    } catch (...) {
      std::lock_guard<std::mutex> g(fill_mu_);
      if (!fill_error_) fill_error_ = std::current_exception();
    }
    lk.lock();
    --fills_running_;
    if (fill_queue_.empty() && fills_running_ == 0) fill_done_cv_.notify_all();
  }
}

void Session::QueueFill(size_t t, const void* src) {
  CheckTensorIndex(t);
  GradArena();  // allocates the arena and starts the filler on first use
  {
    std::lock_guard<std::mutex> lk(fill_mu_);
    fill_queue_.push_back({t, src});
  }
  fill_cv_.notify_one();
}

std::vector<bool> Session::WaitFills() {
  GradArena();
  std::unique_lock<std::mutex> lk(fill_mu_);
  fill_done_cv_.wait(lk, [&] { return fill_queue_.empty() && fills_running_ == 0; });
  if (fill_error_) {
    std::exception_ptr e = fill_error_;
    fill_error_ = nullptr;
    std::rethrow_exception(e);
  }
  std::vector<bool> v(filled_.size());
  for (size_t t = 0; t < v.size(); ++t) v[t] = filled_[t].has_value();
  return v;
}

void Session::Fill(size_t t, const void* src) {
  CheckTensorIndex(t);
  WaitFills();  // a queued fill of t must not land after this one
  DoFill(t, src);
}

StepReport Session::StepArena(const std::vector<bool>& has_grad, const StepOptions& o_in,
                              double max_norm, double* l2norm,
                              const std::vector<void*>* weights_out) {
  WaitFills();
  const ParamLayout& l = *store_->layout();
  if (has_grad.size() != l.tensors().size()) {
    throw std::invalid_argument("has_grad: expected one flag per layout entry (" +
                                std::to_string(l.tensors().size()) + "), found " +
                                std::to_string(has_grad.size()));
  }
  std::vector<TensorGradient> per_tensor;
  bool finite = true;
  const unsigned eb = DTypeBytes(store_->config().grad);
  for (size_t t = 0; t < has_grad.size(); ++t) {
    if (!has_grad[t]) {
      if (slice_dirty_[t]) {  // what a fill wrote there: zero again, as Gather leaves it
        std::memset(gather_buf_.data() + l.offset(t) * eb, 0, l.tensors()[t].numel * eb);
        slice_dirty_[t] = false;
      }
      continue;
    }
    if (!filled_[t]) {
      throw std::invalid_argument("gradient arena: tensor " + std::to_string(t) + " ('" +
                                  l.tensors()[t].name + "') has a gradient this step but was "
                                  "not copied into the arena since the last step");
    }
    per_tensor.push_back(*filled_[t]);
    finite &= filled_[t]->finite;
  }
  // Every tensor needs a fill again for the next step, whatever happens to this one.
  filled_.assign(filled_.size(), std::nullopt);
  const double norm = GradientNorm(per_tensor);
  if (l2norm != nullptr) *l2norm = norm;
  return StepDense(GradientSet::FromArena(*store_, std::move(gather_buf_), has_grad, finite), norm,
                   o_in, max_norm, weights_out);
}

StepReport Session::StepSparse(std::vector<std::vector<SparseGrad>> streams,
                               std::vector<std::pair<uint64_t, uint64_t>> frozen,
                               const StepOptions& o, const std::vector<void*>* weights_out) {
  const GradientSet g = GradientSet::FromStreams(*store_, std::move(streams), std::move(frozen));
  return StepWithWeightsOut(g, o, weights_out);
}

void Session::Export(const std::string& var, const std::vector<float*>& dst) const {
  ExportState(*store_, var, dst);
}

void Session::Import(const StateImport& in) {
  ImportState(*store_, in);
  scheduler_->InvalidateWeightsOut();
}

}  // namespace csdkit::py_binding
