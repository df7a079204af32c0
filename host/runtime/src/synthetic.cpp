#include "csdkit/runtime/synthetic.h"

#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/platform/splitmix.h"

namespace csdkit {

float InitialWeight(uint64_t seed, uint64_t i) {
  const uint64_t r = SplitMixHash(seed * 0x2545f4914f6cdd1dull ^ SplitMixHash(i));
  return static_cast<float>(-0.05 + static_cast<double>(r >> 40) * 0x1p-24 * 0.1);
}

uint32_t SyntheticGradientBits(uint64_t seed, int64_t step, uint64_t i, DType t, double scale) {
  const uint64_t r = SplitMixHash(SplitMixHash(seed ^ 0x6a09e667f3bcc909ull) ^ SplitMixHash(static_cast<uint64_t>(step)) ^
                         (i * 0x9e3779b97f4a7c15ull));
  const float g = static_cast<float>((-1.0 + static_cast<double>(r >> 40) * 0x1p-23) * scale);
  const uint32_t b = hls::F2U(g);
  if (t == DType::kFp32) return b;
  return t == DType::kFp16 ? hls::F32ToF16(b) : hls::F32ToBf16(b);
}

}  // namespace csdkit
