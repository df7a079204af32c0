// `csdkit p2p-bench`: SSD -> device and device -> SSD bandwidth of one device's peer-to-peer
// path, swept over block sizes and queue depths (the emulated device: its NVMe directory and
// device memory through the libaio engine).
#ifndef CSDKIT_BENCH_P2P_BENCH_H_
#define CSDKIT_BENCH_P2P_BENCH_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "csdkit/system/device_set.h"

namespace csdkit::bench {

struct P2pBenchOptions {
  std::string dir = "csdkit-p2p";  // the device's NVMe namespace (a directory with O_DIRECT)
  /// The device (count 1; its number is `first`). Emulated devices get room for `bytes`; the
  /// storage engine is set per measurement.
  DeviceSpec device;
  uint64_t bytes = uint64_t{512} << 20;  // per measurement
  std::vector<uint64_t> block_sizes = {128u << 10, 1u << 20, 4u << 20};
  std::vector<uint32_t> queue_depths = {4, 16, 64};
  unsigned reps = 2;
};

/// Runs the sweep in a new file of a unique name in `dir` (created exclusively; `dir` and its
/// missing parents are created if absent). Every option is checked, and the free space of `dir`
/// against `bytes`, before anything is created; the file and the directories it made are removed
/// when it returns or fails. Throws std::invalid_argument naming the option on bad input.
nlohmann::json P2pBench(const P2pBenchOptions& o);

}  // namespace csdkit::bench

#endif  // CSDKIT_BENCH_P2P_BENCH_H_
