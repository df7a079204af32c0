// `csdkit bench step`: step time of SmartUpdate and the baseline on emulated SmartSSDs, and how
// close SmartUpdate's overlap of transfers and device work gets to max(I/O, compute).
#ifndef CSDKIT_BENCH_STEP_BENCH_H_
#define CSDKIT_BENCH_STEP_BENCH_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "csdkit/hls/mode.h"
#include "csdkit/system/device_set.h"

namespace csdkit::bench {

struct StepBenchOptions {
  std::string dir = "csdkit-bench-step";  // work directory (on a filesystem with O_DIRECT)
  unsigned devices = 4;
  uint64_t params = 1u << 25;
  uint32_t subgroup = 1u << 21;
  unsigned reps = 3;
  double topk = 0.0;
  bool keep = false;
  /// The state formats to step, each on a store of its own, one after the other.
  std::vector<hls::StateFmt> states = {hls::StateFmt::kFp32};
  DeviceSpec device_spec;  // backend, memory, link model; its count is `devices`
};

nlohmann::json StepBench(const StepBenchOptions& o);

}  // namespace csdkit::bench

#endif  // CSDKIT_BENCH_STEP_BENCH_H_
