// The device-memory sizing policy: how many elements a subgroup may have so that the buffers of
// two workers fit a device's memory.
#ifndef CSDKIT_RUNTIME_SIZING_H_
#define CSDKIT_RUNTIME_SIZING_H_

#include <cstdint>

#include "csdkit/platform/optimizer.h"

namespace csdkit {

/// The subgroup size that fits `device_mem` with two workers' buffers for this configuration,
/// rounded down to a multiple of 65536 elements; at most `shard` rounded up. Throws
/// std::invalid_argument if not even 65536 elements fit.
uint32_t SubgroupForMemory(uint64_t device_mem, const OptimizerConfig& hyper, DType grad,
                           DType out, uint64_t shard_elems);

/// The subgroup size `csdkit init` and the planner take when none is given: the size that fits
/// (SubgroupForMemory), capped at 4 Mi elements so that a shard has several subgroups whose
/// loads and compute overlap.
uint32_t DefaultSubgroup(uint64_t device_mem, const OptimizerConfig& hyper, DType grad,
                         DType out, uint64_t shard_elems);
/// A subgroup size for a store in format `state`: `subgroup` itself, rounded down to a multiple
/// of 262144 elements for the q8 formats when it is at least that (each subgroup's absmax
/// values then fill whole 4096-byte regions: docs/runtime.md).
uint32_t SubgroupForState(uint32_t subgroup, hls::StateFmt state);

}  // namespace csdkit

#endif  // CSDKIT_RUNTIME_SIZING_H_
