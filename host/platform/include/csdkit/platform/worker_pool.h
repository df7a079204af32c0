// A fixed set of worker threads, created once and optionally bound one per CPU, that run one
// job at a time: the host-model threads of the baseline (runtime/scheduler.cpp) and of `csdkit
// bench kernel`, so that no step and no timed region pays for creating threads, and a worker
// keeps its CPU (and that CPU's caches) from one job to the next.
#ifndef CSDKIT_PLATFORM_WORKER_POOL_H_
#define CSDKIT_PLATFORM_WORKER_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace csdkit {

class WorkerPool {
 public:
  /// Starts `threads` workers (1..1024; std::invalid_argument otherwise). With `pin`, worker t
  /// is bound to the t-th CPU of the process's affinity mask, when the mask holds at least
  /// `threads` CPUs (best effort: a worker whose binding is refused runs unbound). The calling
  /// thread is never bound: the pool may live inside a trainer's process.
  WorkerPool(unsigned threads, bool pin);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  unsigned size() const { return static_cast<unsigned>(threads_.size()); }
  bool pin() const { return pin_; }
  /// Workers bound to a CPU.
  unsigned pinned() const { return pinned_; }
  /// The CPU worker t is bound to, or -1.
  int cpu_of(unsigned t) const { return cpus_[t]; }

  /// Calls f(t) on worker t for every t < size() and returns when all have returned. If any
  /// threw, rethrows the first exception after all have returned. One job at a time: calls
  /// from several threads are serialised.
  void Run(const std::function<void(unsigned)>& f);

 private:
  void Work(unsigned t);

  bool pin_;
  unsigned pinned_ = 0;
  std::vector<int> cpus_;
  std::vector<std::thread> threads_;
  std::mutex run_mu_;  // one job at a time
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  uint64_t generation_ = 0;
  unsigned running_ = 0;
  bool stop_ = false;
  const std::function<void(unsigned)>* job_ = nullptr;
  std::exception_ptr error_;
};

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_WORKER_POOL_H_
