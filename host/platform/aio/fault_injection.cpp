#include "csdkit/aio/fault_injection.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace csdkit::aio {

FaultInjectingKernelAio::FaultInjectingKernelAio(std::shared_ptr<KernelAio> real)
    : real_(std::move(real)) {
  if (!real_) throw std::invalid_argument("aio: FaultInjectingKernelAio needs a real KernelAio");
}

FaultInjectingKernelAio::~FaultInjectingKernelAio() = default;

void FaultInjectingKernelAio::FailRequest(uint64_t first, int error_number, uint64_t period) {
  if (error_number <= 0) {
    throw std::invalid_argument("aio: FailRequest needs a positive errno (e.g. EIO), found " +
                                std::to_string(error_number));
  }
  std::lock_guard<std::mutex> lock(mu_);
  rules_.push_back({Action::kFailRequest, first, period, error_number});
}

void FaultInjectingKernelAio::ShortenRequest(uint64_t first, uint64_t bytes, uint64_t period) {
  std::lock_guard<std::mutex> lock(mu_);
  rules_.push_back({Action::kShortenRequest, first, period, static_cast<int64_t>(bytes)});
}

void FaultInjectingKernelAio::PartialSubmit(uint64_t first_call, long accept, uint64_t period) {
  if (accept < 1) {
    throw std::invalid_argument(
        "aio: PartialSubmit must accept at least 1 iocb (io_submit "
        "never returns 0 for a non-empty batch), found " +
        std::to_string(accept));
  }
  std::lock_guard<std::mutex> lock(mu_);
  rules_.push_back({Action::kPartialSubmit, first_call, period, accept});
}

void FaultInjectingKernelAio::FailSubmit(uint64_t first_call, int error_number, uint64_t period) {
  if (error_number <= 0) {
    throw std::invalid_argument("aio: FailSubmit needs a positive errno (e.g. EAGAIN), found " +
                                std::to_string(error_number));
  }
  std::lock_guard<std::mutex> lock(mu_);
  rules_.push_back({Action::kFailSubmit, first_call, period, error_number});
}

void FaultInjectingKernelAio::ClearRules() {
  std::lock_guard<std::mutex> lock(mu_);
  rules_.clear();
}

FaultStats FaultInjectingKernelAio::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

const FaultInjectingKernelAio::Rule* FaultInjectingKernelAio::Match(bool request_rule,
                                                                    uint64_t index) const {
  // When several rules fire at the same index, failures win over shortened transfers and
  // partial submits: a test that injects an error must see it.
  const Rule* found = nullptr;
  for (const Rule& r : rules_) {
    const bool is_request_rule =
        r.action == Action::kFailRequest || r.action == Action::kShortenRequest;
    if (is_request_rule != request_rule || index < r.first) continue;
    if (index != r.first && (r.period == 0 || (index - r.first) % r.period != 0)) continue;
    const bool is_failure = r.action == Action::kFailRequest || r.action == Action::kFailSubmit;
    if (is_failure) return &r;
    if (found == nullptr) found = &r;
  }
  return found;
}

int FaultInjectingKernelAio::Setup(int max_events, io_context_t* ctx) {
  return real_->Setup(max_events, ctx);
}

int FaultInjectingKernelAio::Submit(io_context_t ctx, long nr, iocb** iocbs) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t call = stats_.submit_calls++;
  if (const Rule* r = Match(false, call)) {
    if (r->action == Action::kFailSubmit) {
      ++stats_.failed_submits;
      return -static_cast<int>(r->value);
    }
    if (nr > r->value) {
      nr = static_cast<long>(r->value);
      ++stats_.partial_submits;
    }
  }

  // Walk the iocbs in order. Requests for the kernel collect in `run` and go down together;
  // an injected failure first flushes the run (so the order of acceptance is kept) and then
  // becomes a synthetic completion.
  long accepted = 0;
  std::vector<iocb*> run;
  auto flush = [&]() -> int {
    if (run.empty()) return 0;
    const int rc = real_->Submit(ctx, static_cast<long>(run.size()), run.data());
    const long taken = std::max(rc, 0);
    // Shadows the kernel did not take are dropped; the engine resubmits the originals.
    for (size_t i = static_cast<size_t>(taken); i < run.size(); ++i) shadows_.erase(run[i]);
    accepted += taken;
    stats_.requests += static_cast<uint64_t>(taken);
    const bool all = taken == static_cast<long>(run.size());
    run.clear();
    if (all) return 0;
    return rc < 0 ? rc : 1;  // 1: stopped short
  };

  for (long i = 0; i < nr; ++i) {
    iocb* cb = iocbs[i];
    const uint64_t index = stats_.requests + run.size();
    const Rule* r = Match(true, index);
    if (r != nullptr && r->action == Action::kFailRequest) {
      const int rc = flush();
      if (rc != 0) return accepted > 0 ? static_cast<int>(accepted) : rc;
      io_event ev = {};
      ev.data = cb->data;
      ev.obj = cb;
      ev.res = static_cast<unsigned long>(-r->value);
      synthetic_[ctx].push_back(ev);
      ++stats_.requests;
      ++stats_.failed_requests;
      ++accepted;
      continue;
    }
    if (r != nullptr && r->action == Action::kShortenRequest &&
        static_cast<uint64_t>(r->value) < cb->u.c.nbytes &&
        (cb->aio_lio_opcode == IO_CMD_PREAD || cb->aio_lio_opcode == IO_CMD_PWRITE)) {
      auto copy = std::make_unique<iocb>(*cb);
      copy->u.c.nbytes = static_cast<unsigned long>(r->value);
      iocb* shadow = copy.get();
      shadows_[shadow] = Shadow{ctx, cb, std::move(copy)};
      ++stats_.short_requests;
      run.push_back(shadow);
      continue;
    }
    run.push_back(cb);
  }
  const int rc = flush();
  if (rc < 0 && accepted == 0) return rc;
  return static_cast<int>(accepted);
}

int FaultInjectingKernelAio::GetEvents(io_context_t ctx, long min_nr, long nr, io_event* events,
                                       timespec* timeout) {
  long have = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = synthetic_.find(ctx);
    if (it != synthetic_.end()) {
      while (have < nr && !it->second.empty()) {
        events[have++] = it->second.front();
        it->second.pop_front();
      }
    }
  }
  // The kernel's own completions: wait only for what the synthetic ones did not cover.
  int rc = 0;
  if (have < nr) {
    timespec zero = {0, 0};
    const long still_needed = std::max(min_nr - have, 0L);
    rc = real_->GetEvents(ctx, still_needed, nr - have, events + have,
                          still_needed == 0 ? &zero : timeout);
  }
  if (rc < 0) return have > 0 ? static_cast<int>(have) : rc;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (long i = have; i < have + rc; ++i) {
      auto s = shadows_.find(events[i].obj);
      if (s == shadows_.end()) continue;
      events[i].obj = s->second.original;
      events[i].data = s->second.original->data;
      shadows_.erase(s);
    }
  }
  return static_cast<int>(have + rc);
}

int FaultInjectingKernelAio::Destroy(io_context_t ctx) {
  const int rc = real_->Destroy(ctx);
  std::lock_guard<std::mutex> lock(mu_);
  synthetic_.erase(ctx);
  for (auto it = shadows_.begin(); it != shadows_.end();) {
    it = it->second.ctx == ctx ? shadows_.erase(it) : std::next(it);
  }
  return rc;
}

}  // namespace csdkit::aio
