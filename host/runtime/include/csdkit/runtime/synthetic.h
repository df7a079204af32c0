// Deterministic synthetic data for stores and steps without a trainer (`csdkit init`, `step`,
// `run`, the benchmarks and tests): counter-based, so any range of elements can be produced
// independently and in parallel, the same on every platform.
#ifndef CSDKIT_RUNTIME_SYNTHETIC_H_
#define CSDKIT_RUNTIME_SYNTHETIC_H_

#include <cstdint>

#include "csdkit/platform/optimizer.h"

namespace csdkit {

/// The initial weight of global element i: uniform in [-0.05, 0.05) from the seed.
float InitialWeight(uint64_t seed, uint64_t i);
/// The gradient of element i at `step`: uniform in [-1, 1) times `scale`, rounded to dtype `t`,
/// as its bit pattern.
uint32_t SyntheticGradientBits(uint64_t seed, int64_t step, uint64_t i, DType t, double scale);

}  // namespace csdkit

#endif  // CSDKIT_RUNTIME_SYNTHETIC_H_
