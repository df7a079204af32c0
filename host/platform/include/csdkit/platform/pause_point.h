// Named pause points for tests of concurrent use: with CSDKIT_TEST_PAUSE=<name> in its
// environment, a process stops itself (SIGSTOP) when it reaches the point of that name, and goes
// on when it gets SIGCONT. A test then knows exactly where the process is while it runs a
// second command against the same store or destination — deterministic, not a race won by luck.
// A process stops at most once: at the first point it reaches with that name. Without the
// variable (or with another name) a point costs one getenv.
//
// Points: "reshard-start" (before the destination is claimed), "reshard-claimed" (destination
// created and locked, nothing read yet), "store-commit" (a writer about to commit a step).
#ifndef CSDKIT_PLATFORM_PAUSE_POINT_H_
#define CSDKIT_PLATFORM_PAUSE_POINT_H_

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>

namespace csdkit {

inline void PausePoint(const char* name) {
  static std::atomic<bool> paused{false};
  const char* want = std::getenv("CSDKIT_TEST_PAUSE");
  if (want != nullptr && std::strcmp(want, name) == 0 && !paused.exchange(true)) {
    std::raise(SIGSTOP);
  }
}

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_PAUSE_POINT_H_
