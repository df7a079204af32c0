// WorkerPool: every worker runs every job once, the same threads serve every job, the first
// exception comes back after all workers returned, pinned workers run on their CPU, bad sizes
// are refused.
#include "csdkit/platform/worker_pool.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace csdkit {
namespace {

unsigned AllowedCpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return static_cast<unsigned>(CPU_COUNT(&set));
}

TEST(WorkerPool, EveryWorkerRunsEveryJobOnTheSameThreads) {
  WorkerPool pool(4, false);
  ASSERT_EQ(pool.size(), 4u);
  EXPECT_EQ(pool.pinned(), 0u);
  std::vector<std::thread::id> first(4), again(4);
  std::vector<int> runs(4, 0);
  pool.Run([&](unsigned t) {
    first[t] = std::this_thread::get_id();
    ++runs[t];
  });
  for (int job = 0; job < 100; ++job) {
    pool.Run([&](unsigned t) {
      again[t] = std::this_thread::get_id();
      ++runs[t];
    });
    ASSERT_EQ(again, first) << "job " << job;
  }
  for (unsigned t = 0; t < 4; ++t) EXPECT_EQ(runs[t], 101) << "worker " << t;
  EXPECT_EQ(std::set<std::thread::id>(first.begin(), first.end()).size(), 4u);
  EXPECT_EQ(first[0] == std::this_thread::get_id(), false) << "the caller is not a worker";
}

TEST(WorkerPool, TheFirstExceptionComesBackAfterEveryWorkerReturned) {
  WorkerPool pool(3, false);
  std::atomic<int> finished{0};
  try {
    pool.Run([&](unsigned t) {
      if (t == 1) throw std::runtime_error("worker 1 failed");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ++finished;
    });
    FAIL() << "expected the worker's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "worker 1 failed");
  }
  EXPECT_EQ(finished.load(), 2);
  // The pool is usable afterwards and reports no stale error.
  std::atomic<int> ran{0};
  pool.Run([&](unsigned) { ++ran; });
  EXPECT_EQ(ran.load(), 3);
}

TEST(WorkerPool, PinnedWorkersRunOnTheirCpu) {
  const unsigned cpus = AllowedCpuCount();
  ASSERT_GE(cpus, 1u);
  WorkerPool pool(cpus, true);
  EXPECT_EQ(pool.pinned(), cpus);
  std::vector<int> seen(cpus, -2);
  for (int job = 0; job < 20; ++job) {
    pool.Run([&](unsigned t) { seen[t] = sched_getcpu(); });
    for (unsigned t = 0; t < cpus; ++t) {
      ASSERT_EQ(seen[t], pool.cpu_of(t)) << "worker " << t << " job " << job;
    }
  }
  // More workers than CPUs: none is bound.
  WorkerPool wide(cpus + 1, true);
  EXPECT_EQ(wide.pinned(), 0u);
  for (unsigned t = 0; t < wide.size(); ++t) EXPECT_EQ(wide.cpu_of(t), -1);
}

TEST(WorkerPool, RefusesZeroAndTooManyThreads) {
  EXPECT_THROW(WorkerPool(0, false), std::invalid_argument);
  try {
    WorkerPool p(1025, false);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "worker pool: expected 1 to 1024 threads, found 1025");
  }
}

}  // namespace
}  // namespace csdkit
