#include "csdkit/platform/worker_pool.h"

#include <pthread.h>
#include <sched.h>

#include <stdexcept>
#include <string>

namespace csdkit {

namespace {

// The CPUs this process may run on, in ascending order.
std::vector<int> AllowedCpus() {
  std::vector<int> r;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return r;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) r.push_back(c);
  }
  return r;
}

}  // namespace

WorkerPool::WorkerPool(unsigned threads, bool pin) : pin_(pin) {
  if (threads < 1 || threads > 1024) {
    throw std::invalid_argument("worker pool: expected 1 to 1024 threads, found " +
                                std::to_string(threads));
  }
  cpus_.assign(threads, -1);
  if (pin) {
    const std::vector<int> allowed = AllowedCpus();
    if (allowed.size() >= threads) {
      for (unsigned t = 0; t < threads; ++t) cpus_[t] = allowed[t];
    }
  }
  for (unsigned t = 0; t < threads; ++t) {
    threads_.emplace_back([this, t] { Work(t); });
    if (cpus_[t] >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpus_[t], &set);
      if (pthread_setaffinity_np(threads_.back().native_handle(), sizeof set, &set) == 0) {
        ++pinned_;
      } else {
        cpus_[t] = -1;
      }
    }
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    ++generation_;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::Work(unsigned t) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(unsigned)>* job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      start_cv_.wait(lk, [&] { return generation_ != seen; });
      seen = generation_;
      if (stop_) return;
      job = job_;
    }
    std::exception_ptr e;
    try {
      (*job)(t);
    } catch (...) {
      e = std::current_exception();
    }
    std::lock_guard<std::mutex> lk(mu_);
    if (e && !error_) error_ = e;
    if (--running_ == 0) done_cv_.notify_one();
  }
}

void WorkerPool::Run(const std::function<void(unsigned)>& f) {
  std::lock_guard<std::mutex> one(run_mu_);
  std::exception_ptr e;
  {
    std::unique_lock<std::mutex> lk(mu_);
    job_ = &f;
    error_ = nullptr;
    running_ = size();
    ++generation_;
    start_cv_.notify_all();
    done_cv_.wait(lk, [&] { return running_ == 0; });
    job_ = nullptr;
    e = error_;
    error_ = nullptr;
  }
  if (e) std::rethrow_exception(e);
}

}  // namespace csdkit
