// A KernelAio that sits between the engine and the real kernel and makes chosen requests fail,
// come back short, or be only partly accepted by io_submit. Everything not chosen goes to the
// real kernel unchanged, so data still lands on disk and a test can check it afterwards.
//
// Requests are numbered 0, 1, 2, ... in the order iocbs are accepted by Submit, over the whole
// life of the object and across all contexts (a resubmitted remainder is a new request).
// Submit calls are numbered the same way. A rule fires at `first`, and, if `period` is not 0,
// again at first + period, first + 2 * period, ... When rules coincide, a failure (FailRequest,
// FailSubmit) takes precedence over a shortened transfer or a partial submit.
#ifndef CSDKIT_AIO_FAULT_INJECTION_H_
#define CSDKIT_AIO_FAULT_INJECTION_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "csdkit/aio/io_context.h"

namespace csdkit::aio {

struct FaultStats {
  uint64_t requests = 0;         // iocbs accepted by Submit
  uint64_t submit_calls = 0;     // Submit calls
  uint64_t failed_requests = 0;  // completed with an injected -errno, never reached the kernel
  uint64_t short_requests = 0;   // passed to the kernel shortened
  uint64_t partial_submits = 0;  // Submit calls that accepted fewer than asked
  uint64_t failed_submits = 0;   // Submit calls that returned an injected -errno
};

class FaultInjectingKernelAio : public KernelAio {
 public:
  explicit FaultInjectingKernelAio(std::shared_ptr<KernelAio> real = LibaioKernel());
  ~FaultInjectingKernelAio() override;

  /// The request completes with io_event.res = -error_number (EIO, ENOSPC, EINVAL, ...)
  /// without reaching the kernel.
  void FailRequest(uint64_t first, int error_number, uint64_t period = 0);
  /// The kernel is asked for only `bytes` of the request (when the request is longer), so the
  /// completion reports a short transfer; `bytes` should keep the file's alignment.
  void ShortenRequest(uint64_t first, uint64_t bytes, uint64_t period = 0);
  /// The Submit call accepts only the first `accept` (>= 1) iocbs and returns `accept`.
  void PartialSubmit(uint64_t first_call, long accept, uint64_t period = 0);
  /// The Submit call accepts nothing and returns -error_number (EAGAIN, EBADF, ...).
  void FailSubmit(uint64_t first_call, int error_number, uint64_t period = 0);
  /// Forgets all rules (the counters keep running).
  void ClearRules();

  FaultStats stats() const;

  int Setup(int max_events, io_context_t* ctx) override;
  int Submit(io_context_t ctx, long nr, iocb** iocbs) override;
  int GetEvents(io_context_t ctx, long min_nr, long nr, io_event* events,
                timespec* timeout) override;
  int Destroy(io_context_t ctx) override;

 private:
  enum class Action { kFailRequest, kShortenRequest, kPartialSubmit, kFailSubmit };
  struct Rule {
    Action action;
    uint64_t first;
    uint64_t period;
    int64_t value;  // errno, byte count or accepted iocbs
  };
  struct Shadow {
    io_context_t ctx;
    iocb* original;
    std::unique_ptr<iocb> copy;
  };

  // The request (or submit-call) rule that fires at `index`, or nullptr. Callers hold mu_.
  const Rule* Match(bool request_rule, uint64_t index) const;

  std::shared_ptr<KernelAio> real_;
  mutable std::mutex mu_;
  std::vector<Rule> rules_;
  FaultStats stats_;
  // Completions of injected failures, per context, delivered before the kernel's own.
  std::map<io_context_t, std::deque<io_event>> synthetic_;
  // Shortened requests: the kernel sees the copy; completions are mapped back to the original.
  std::map<iocb*, Shadow> shadows_;
};

}  // namespace csdkit::aio

#endif  // CSDKIT_AIO_FAULT_INJECTION_H_
