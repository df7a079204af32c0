#include "session.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "csdkit/runtime/gradients.h"
#include "csdkit/runtime/sizing.h"

namespace csdkit::py_binding {

namespace {

/// Thrown into a speculative step's workers (and its commit) when it is abandoned.
class SpeculationAbandoned : public std::runtime_error {
 public:
  SpeculationAbandoned() : std::runtime_error("speculative step abandoned") {}
};

bool SameHyper(const std::vector<OptimizerConfig>& a, const std::vector<OptimizerConfig>& b) {
  if (a.size() != b.size()) return false;
  for (size_t g = 0; g < a.size(); ++g) {
    const OptimizerConfig &x = a[g], &y = b[g];
    if (x.opt != y.opt || x.lr != y.lr || x.beta1 != y.beta1 || x.beta2 != y.beta2 ||
        x.eps != y.eps || x.weight_decay != y.weight_decay || x.momentum != y.momentum ||
        x.dampening != y.dampening || x.nesterov != y.nesterov || x.lr_decay != y.lr_decay ||
        x.initial_accumulator_value != y.initial_accumulator_value) {
      return false;
    }
  }
  return true;
}

}  // namespace

// Closes the step's host byte count however the step ends.
struct Session::ByteCountScope {
  Session* s;
  ~ByteCountScope() { s->CloseHostBytes(); }
};

void Session::CloseHostBytes() {
  last_host_bytes_.gradients_copied = grad_copied_.exchange(0);
  last_host_bytes_.gradients_received = grad_received_.exchange(0);
  last_host_bytes_.weights_written = weights_written_.exchange(0);
  last_host_bytes_.weights_saved = weights_saved_.exchange(0);
}

void Session::HandWeights(const std::vector<void*>& out, uint64_t begin, uint64_t n,
                          const std::vector<std::pair<uint64_t, uint64_t>>& frozen,
                          std::mutex& mu, std::vector<std::pair<uint64_t, uint64_t>>& handed) {
  const uint64_t bytes = scheduler_->CopyWeightsRange(out, begin, n, frozen, saved_weights_.data());
  weights_written_ += bytes;
  weights_saved_ += bytes;
  {
    std::lock_guard<std::mutex> lk(mu);
    handed.emplace_back(begin, n);  // (before the hook: what it throws puts this back too)
  }
  if (weights_hook_) weights_hook_(begin, n);
}

const uint8_t* Session::WeightsBuffer() const {
  const AlignedBuffer& b = store_->config().out != DType::kFp32 ? scheduler_->weights16()
                                                                : scheduler_->weights32();
  return b.size() == 0 ? nullptr : b.data();
}

void Session::CheckNoExternalFill(const char* what) {
  std::lock_guard<std::mutex> lk(fill_mu_);
  for (size_t t = 0; t < filling_.size(); ++t) {
    if (filling_[t]) {
      throw std::logic_error(std::string(what) + ": the external fill of tensor " +
                             std::to_string(t) + " ('" + store_->layout()->tensors()[t].name +
                             "') was begun and not ended (EndFill)");
    }
  }
}

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
  Abandon("");
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
  CheckNoExternalFill("step");
  const ByteCountScope count{this};
  last_speculation_.clear();
  Abandon("a step with gathered gradients came instead");
  {
    const ParamLayout& l = *store_->layout();
    const unsigned eb = DTypeBytes(store_->config().grad);
    for (size_t t = 0; t < grads.size() && t < l.tensors().size(); ++t) {
      if (grads[t] != nullptr) grad_copied_ += l.tensors()[t].numel * eb;
    }
  }
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

double Session::ClipCoef(const StepOptions& o, double norm, double max_norm) const {
  if (max_norm <= 0) return o.clip_coef;
  // The norm is of the gradient as given, i.e. times the loss scale. A non-finite norm gives
  // clip 0 here, but such a gradient skips the step anyway.
  const double ls = o.loss_scale ? *o.loss_scale : store_->config().loss_scale;
  return std::min(1.0, max_norm / (norm / ls + 1e-6));
}

StepReport Session::StepDense(GradientSet g, double norm, const StepOptions& o_in,
                              double max_norm, const std::vector<void*>* weights_out) {
  StepOptions o = o_in;
  o.clip_coef = ClipCoef(o_in, norm, max_norm);
  StepReport rep;
  try {
    rep = StepWithWeightsOut(g, o, weights_out);
  } catch (...) {
    gather_buf_ = std::move(g).TakeBuffer();
    throw;
  }
  gather_buf_ = std::move(g).TakeBuffer();  // the next step fills it again
  if (arena_ != nullptr) arena_ = gather_buf_.data();
  return rep;
}

StepReport Session::StepWithWeightsOut(const GradientSet& g, StepOptions o,
                                       const std::vector<void*>* weights_out) {
  if (weights_out == nullptr) return scheduler_->Step(g, o);
  scheduler_->CheckWeightsOut(*weights_out, true);  // before anything is written
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
    HandWeights(*weights_out, begin, n, frozen, mu, handed);
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
  if (spec_ == nullptr) {  // (a speculation holds the buffer)
    if (gather_buf_.size() < bytes) gather_buf_ = AlignedBuffer(bytes);  // zero-filled
    arena_ = gather_buf_.data();
  }
  if (filled_.empty()) {
    const size_t nt = store_->layout()->tensors().size();
    filled_.assign(nt, std::nullopt);
    slice_dirty_.assign(nt, false);
    filling_.assign(nt, false);
  }
  if (!filler_.joinable()) filler_ = std::thread([this] { FillerLoop(); });
  return arena_;
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

void Session::BeforeSliceChanges(size_t t) {
  const ParamLayout& l = *store_->layout();
  std::unique_lock<std::mutex> lk(fill_mu_);
  if (spec_ != nullptr && !spec_->confirmed) {
    // A slice the speculation may have sent already (a tensor filled again), or one it takes
    // as without a gradient: it cannot commit. It is stopped before the slice changes.
    if (!spec_->abandoned && (filled_[t] || filling_[t] || !spec_->has_grad[t])) {
      spec_->invalid = "tensor " + std::to_string(t) + " ('" + l.tensors()[t].name + "') " +
                       (filled_[t] || filling_[t]
                            ? "was copied again (its gradient changed after backward had "
                              "handed it over)"
                            : "has a gradient; the last step's had none");
      spec_->abandoned = true;
      spec_cv_.notify_all();
    }
    if (spec_->abandoned) spec_cv_.wait(lk, [&] { return spec_ == nullptr || spec_->finished; });
  }
}

void Session::DoFill(size_t t, const void* src) {
  const ParamLayout& l = *store_->layout();
  const DType dt = store_->config().grad;
  BeforeSliceChanges(t);
  const TensorGradient r = CopyTensorGradient(arena_ + l.offset(t) * DTypeBytes(dt), src,
                                              l.tensors()[t].numel, dt, true);
  grad_copied_ += l.tensors()[t].numel * DTypeBytes(dt);
  std::lock_guard<std::mutex> lk(fill_mu_);
  filled_[t] = r;
  slice_dirty_[t] = true;
  spec_cv_.notify_all();
}

void Session::BeginFill(size_t t) {
  CheckTensorIndex(t);
  GradArena();
  WaitFills();  // a queued fill of t must not land after this one
  BeforeSliceChanges(t);
  std::lock_guard<std::mutex> lk(fill_mu_);
  if (filling_[t]) {
    throw std::logic_error("BeginFill: the external fill of tensor " + std::to_string(t) + " ('" +
                           store_->layout()->tensors()[t].name + "') was already begun");
  }
  filling_[t] = true;
  filled_[t] = std::nullopt;  // not ready until EndFill
  slice_dirty_[t] = true;
}

void Session::EndFill(size_t t, std::optional<TensorGradient> r) {
  CheckTensorIndex(t);
  const ParamLayout& l = *store_->layout();
  std::lock_guard<std::mutex> lk(fill_mu_);
  if (filling_.empty() || !filling_[t]) {
    throw std::logic_error("EndFill: no external fill of tensor " + std::to_string(t) + " ('" +
                           l.tensors()[t].name + "') was begun");
  }
  filling_[t] = false;
  if (r) {
    filled_[t] = r;
    grad_received_ += l.tensors()[t].numel * DTypeBytes(store_->config().grad);
  }
  spec_cv_.notify_all();
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
  CheckNoExternalFill("step_arena");
  const ByteCountScope count{this};
  const ParamLayout& l = *store_->layout();
  if (has_grad.size() != l.tensors().size()) {
    Abandon("");
    throw std::invalid_argument("has_grad: expected one flag per layout entry (" +
                                std::to_string(l.tensors().size()) + "), found " +
                                std::to_string(has_grad.size()));
  }
  std::vector<TensorGradient> per_tensor;
  bool finite = true;
  for (size_t t = 0; t < has_grad.size(); ++t) {
    if (!has_grad[t]) continue;
    if (!filled_[t]) {
      Abandon("");
      throw std::invalid_argument("gradient arena: tensor " + std::to_string(t) + " ('" +
                                  l.tensors()[t].name + "') has a gradient this step but was "
                                  "not copied into the arena since the last step");
    }
    per_tensor.push_back(*filled_[t]);
    finite &= filled_[t]->finite;
  }
  const double norm = GradientNorm(per_tensor);
  if (l2norm != nullptr) *l2norm = norm;
  last_speculation_.clear();
  if (spec_ != nullptr) {
    // StepDense's clip coefficient, to compare with the one the speculation runs with.
    const double coef = ClipCoef(o_in, norm, max_norm);
    std::string why;
    {
      std::lock_guard<std::mutex> lk(fill_mu_);
      why = Mismatch(*spec_, has_grad, finite, o_in, coef, weights_out);
    }
    if (!why.empty()) {
      Abandon(why);
    } else {
      // Confirmed: the subgroups' weights so far go out now, the rest as the workers bring
      // them; the step commits as soon as it is done.
      Speculation& s = *spec_;
      std::vector<std::pair<uint64_t, uint64_t>> pending;
      {
        std::lock_guard<std::mutex> lk(fill_mu_);
        s.confirmed = true;
        pending.swap(s.pending);
      }
      spec_cv_.notify_all();
      for (const auto& [begin, n] : pending) {
        HandWeights(s.out, begin, n, s.grads->frozen(), fill_mu_, s.handed);
      }
      s.thread.join();
      gather_buf_ = std::move(*s.grads).TakeBuffer();
      filled_.assign(filled_.size(), std::nullopt);  // every tensor needs a fill again
      std::unique_ptr<Speculation> done;
      {
        std::lock_guard<std::mutex> lk(fill_mu_);
        done = std::move(spec_);
      }
      if (done->err) {
        // Failed after it was confirmed (an I/O or integrity error, the divergence guard, the
        // commit): as StepWithWeightsOut, the tensors get back what they held.
        for (const auto& [begin, n] : done->handed) {
          scheduler_->PutBackWeightsRange(done->out, begin, n, done->grads->frozen(),
                                          saved_weights_.data());
        }
        last_speculation_ = "failed";
        std::rethrow_exception(done->err);
      }
      last_speculation_ = "committed";
      return done->rep;
    }
  }
  const unsigned eb = DTypeBytes(store_->config().grad);
  for (size_t t = 0; t < has_grad.size(); ++t) {
    if (!has_grad[t] && slice_dirty_[t]) {  // what a fill wrote there: zero again, as Gather
      std::memset(gather_buf_.data() + l.offset(t) * eb, 0, l.tensors()[t].numel * eb);
      slice_dirty_[t] = false;
    }
  }
  // Every tensor needs a fill again for the next step, whatever happens to this one.
  filled_.assign(filled_.size(), std::nullopt);
  return StepDense(GradientSet::FromArena(*store_, std::move(gather_buf_), has_grad, finite), norm,
                   o_in, max_norm, weights_out);
}

std::string Session::Mismatch(const Speculation& s, const std::vector<bool>& has_grad,
                              bool finite, const StepOptions& o, double clip_coef,
                              const std::vector<void*>* weights_out) const {
  if (!s.invalid.empty()) return s.invalid;
  if (has_grad != s.has_grad) return "the tensors with a gradient are not the last step's";
  if (o.found_inf) return "found_inf: the trainer found a non-finite gradient";
  if (!finite) return "a non-finite gradient";
  if (clip_coef != s.o.clip_coef) {
    return "clip coefficient " + std::to_string(clip_coef) + ", not " +
           std::to_string(s.o.clip_coef);
  }
  if (o.loss_scale != s.o.loss_scale) return "another loss scale";
  if (!SameHyper(o.group_hyper, s.o.group_hyper)) return "other hyper-parameters";
  if (o.mode != s.o.mode || o.allow_nonfinite != s.o.allow_nonfinite ||
      o.fp32_weights_out != s.o.fp32_weights_out) {
    return "other step options";
  }
  if (weights_out == nullptr ? s.has_out : (!s.has_out || *weights_out != s.out)) {
    return "other weights_out tensors";
  }
  return "";
}

void Session::StartSpeculative(const std::vector<bool>& has_grad, const StepOptions& o_in,
                               const std::vector<void*>* weights_out) {
  Abandon("another speculation was started");
  GradArena();
  WaitFills();  // the slices below are not being written
  CheckNoExternalFill("start_speculative");
  const ParamLayout& l = *store_->layout();
  if (has_grad.size() != l.tensors().size()) {
    throw std::invalid_argument("has_grad: expected one flag per layout entry (" +
                                std::to_string(l.tensors().size()) + "), found " +
                                std::to_string(has_grad.size()));
  }
  if (o_in.mode != UpdateMode::kSmart) {
    throw std::invalid_argument("speculative step: expected the smart mode, found " +
                                std::string(UpdateModeName(o_in.mode)));
  }
  auto sp = std::make_unique<Speculation>();
  sp->has_grad = has_grad;
  sp->o = o_in;
  if (weights_out != nullptr) {
    scheduler_->CheckWeightsOut(*weights_out, true);
    const StoreConfig& c = store_->config();
    const uint64_t bytes = c.params * (c.out != DType::kFp32 ? 2 : 4);
    if (saved_weights_.size() < bytes) saved_weights_ = AlignedBuffer(bytes);
    sp->out = *weights_out;
    sp->has_out = true;
  }
  // Fills of earlier backward passes of this step (gradient accumulation) are superseded: the
  // speculation waits for this pass's (or step()'s) copy of each tensor. (After the checks: a
  // refused start leaves them counted.)
  filled_.assign(filled_.size(), std::nullopt);
  // Tensors expected without a gradient: their slices as StepArena leaves them (zero).
  const unsigned eb = DTypeBytes(store_->config().grad);
  for (size_t t = 0; t < has_grad.size(); ++t) {
    if (!has_grad[t] && slice_dirty_[t]) {
      std::memset(arena_ + l.offset(t) * eb, 0, l.tensors()[t].numel * eb);
      slice_dirty_[t] = false;
    }
  }
  sp->grads = std::make_unique<GradientSet>(
      GradientSet::FromArena(*store_, std::move(gather_buf_), has_grad, true));
  Speculation* s = sp.get();
  StepOptions o = o_in;
  o.reverse_subgroups = true;
  o.gradient_wait = [this, s](uint64_t begin, uint64_t n) { WaitSlices(*s, begin, n); };
  // Nothing is written into the store before the confirmation: each worker holds its computed
  // subgroup (one per worker, two per device) until then.
  o.before_write = [this, s] {
    std::unique_lock<std::mutex> lk(fill_mu_);
    spec_cv_.wait(lk, [&] { return s->confirmed || s->abandoned; });
    if (!s->confirmed) throw SpeculationAbandoned();
  };
  if (s->has_out) {
    o.weights_ready = [this, s](uint64_t begin, uint64_t n) {
      {
        std::lock_guard<std::mutex> lk(fill_mu_);
        if (!s->confirmed) {  // the trainer's tensors may still be in use by backward
          s->pending.emplace_back(begin, n);
          return;
        }
      }
      HandWeights(s->out, begin, n, s->grads->frozen(), fill_mu_, s->handed);
    };
  }
  {
    std::lock_guard<std::mutex> lk(fill_mu_);
    spec_ = std::move(sp);
  }
  s->thread = std::thread([this, s, o] {
    StepReport rep;
    std::exception_ptr err;
    try {
      rep = scheduler_->Step(*s->grads, o);
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard<std::mutex> lk(fill_mu_);
    s->rep = rep;
    s->err = err;
    s->finished = true;
    spec_cv_.notify_all();
  });
}

void Session::WaitSlices(Speculation& s, uint64_t begin, uint64_t n) {
  const ParamLayout& l = *store_->layout();
  const size_t nt = l.tensors().size();
  // The first tensor ending after `begin` (offsets ascend in layout order).
  size_t lo = 0, hi = nt;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (l.offset(mid) + l.tensors()[mid].numel <= begin) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  std::unique_lock<std::mutex> lk(fill_mu_);
  spec_cv_.wait(lk, [&] {
    if (s.abandoned) return true;
    for (size_t t = lo; t < nt && l.offset(t) < begin + n; ++t) {
      if (s.has_grad[t] && !filled_[t]) return false;
    }
    return true;
  });
  if (s.abandoned) throw SpeculationAbandoned();
}

void Session::Abandon(const std::string& why) {
  if (spec_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lk(fill_mu_);
    spec_->abandoned = true;
  }
  spec_cv_.notify_all();
  spec_->thread.join();  // nothing committed (its commit waits for a confirmation)
  gather_buf_ = std::move(*spec_->grads).TakeBuffer();
  std::string reason = spec_->invalid.empty() ? why : spec_->invalid;
  {
    std::lock_guard<std::mutex> lk(fill_mu_);
    spec_.reset();
  }
  spec_cv_.notify_all();
  if (!reason.empty()) last_speculation_ = "abandoned: " + reason;
}

StepReport Session::StepSparse(std::vector<std::vector<SparseGrad>> streams,
                               std::vector<std::pair<uint64_t, uint64_t>> frozen,
                               const StepOptions& o, const std::vector<void*>* weights_out) {
  const ByteCountScope count{this};
  last_speculation_.clear();
  Abandon("a step with Top-K gradients came instead");
  const GradientSet g = GradientSet::FromStreams(*store_, std::move(streams), std::move(frozen));
  return StepWithWeightsOut(g, o, weights_out);
}

void Session::Export(const std::string& var, const std::vector<float*>& dst) {
  Abandon("the state was read");
  ExportState(*store_, var, dst);
}

void Session::ExportQ8(const std::string& var, const std::vector<uint8_t*>& codes,
                       const std::vector<float*>& absmax) {
  Abandon("the state was read");
  ExportStateQ8(*store_, var, codes, absmax);
}

void Session::Import(const StateImport& in) {
  Abandon("the state was replaced");
  ImportState(*store_, in);
  scheduler_->InvalidateWeightsOut();
}

}  // namespace csdkit::py_binding
