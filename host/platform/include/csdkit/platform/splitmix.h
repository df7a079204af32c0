// splitmix64 (Steele, Lea, Flood 2014): small, fast, and the same sequence on every platform and
// library version — the generator behind every seeded array of the kit (generated problems,
// synthetic weights and gradients, test data).
#ifndef CSDKIT_PLATFORM_SPLITMIX_H_
#define CSDKIT_PLATFORM_SPLITMIX_H_

#include <cstdint>

namespace csdkit {

struct SplitMix64 {
  uint64_t state;

  /// The next 64 random bits.
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi): 24 random bits, computed in double, rounded once to binary32.
  float Uniform(double lo, double hi) {
    const double u = static_cast<double>(Next() >> 40) * 0x1p-24;
    return static_cast<float>(lo + u * (hi - lo));
  }
};

/// A stateless hash of x: the first output of a generator seeded with x (counter-based data).
inline uint64_t SplitMixHash(uint64_t x) { return SplitMix64{x}.Next(); }

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_SPLITMIX_H_
