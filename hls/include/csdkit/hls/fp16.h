// fp16 (IEEE binary16) and bf16 (bfloat16) <-> binary32 conversions in integer-only code.
//
// Synthesizable: no `half`, no float arithmetic, no loops; every path is computed and the result
// selected, so the same code pipelines in HLS and vectorises in the host model. Semantics are the
// numeric contract's (docs/numeric-contract.md) and are checked exhaustively against the F16C
// instructions (fp16) and an independent reference (bf16) by tests/fp16_test.cpp.
#ifndef CSDKIT_HLS_FP16_H_
#define CSDKIT_HLS_FP16_H_

#include <cstdint>

#include "csdkit/hls/bits.h"

namespace csdkit {
namespace hls {

/// binary32 -> binary16, as the F16C instruction VCVTPS2PH with rounding mode 0.
/// Rounding: to nearest, ties to even, including into the subnormal range (results down to
/// 2^-24 are kept as subnormal halves; below half of that they round to signed zero).
/// Overflow: |x| >= 65520 (the first value that rounds past 65504) gives signed infinity.
/// NaN: keeps the sign and the top 10 payload bits (mantissa >> 13) and sets the quiet bit.
/// binary32 subnormal inputs are far below the half range and round to signed zero.
inline uint16_t F32ToF16(uint32_t u) {
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;

  // NaN: quiet it, keep the top payload bits.
  const uint32_t nan_h = 0x7e00u | ((a >> 13) & 0x03ffu);

  // Normal half range [2^-14, 65520): rebias the exponent (127 -> 15, i.e. subtract 112 << 23)
  // and round the 13 dropped mantissa bits to nearest even. A carry out of the mantissa moves
  // into the exponent, which is the correctly rounded result (65504 is the largest reachable).
  const uint32_t t = a - 0x38000000u;
  const uint32_t norm_h = (t + 0x0fffu + ((t >> 13) & 1u)) >> 13;

  // Subnormal half range (0, 2^-14): the result counts units of 2^-24. With the implicit bit
  // restored, value = mant * 2^(e - 150), so units = mant >> (126 - e) before rounding. Shifts
  // of 25 or more always give zero (mant < 2^24, at most half a unit); clamp to 31 to keep the
  // shift defined. A round-up to 0x400 yields the smallest normal half, correctly encoded.
  const uint32_t e = a >> 23;
  const uint32_t mant = (a & kManMask) | 0x00800000u;
  const uint32_t sh_raw = 126u - e;  // e <= 112 here, so 14..126
  const uint32_t sh = sh_raw > 31u ? 31u : sh_raw;
  const uint32_t q = mant >> sh;
  const uint32_t rem = mant & ((1u << sh) - 1u);
  const uint32_t half = 1u << (sh - 1u);
  const uint32_t up = (rem > half ? 1u : 0u) | (rem == half ? (q & 1u) : 0u);
  const uint32_t sub_h = q + up;

  uint32_t h;
  if (a > kExpMask) {
    h = nan_h;
  } else if (a >= 0x477ff000u) {  // 65520.0f and above, including infinity
    h = 0x7c00u;
  } else if (a >= 0x38800000u) {  // 2^-14
    h = norm_h;
  } else {
    h = sub_h;
  }
  return static_cast<uint16_t>(sign | h);
}

/// binary16 -> binary32, as the F16C instruction VCVTPH2PS. Exact for every non-NaN input
/// (subnormal halves become normal binary32 values). NaN: sign and payload kept, quiet bit set.
inline uint32_t F16ToF32(uint16_t hv) {
  const uint32_t h = hv;
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x03ffu;

  // Subnormal half m * 2^-24: p = index of the leading one (0..9), computed by comparisons so it
  // stays integer-only and branch-free; the value is 2^(p-24) * (1 + fraction).
  const uint32_t p = (m >= 2u) + (m >= 4u) + (m >= 8u) + (m >= 16u) + (m >= 32u) + (m >= 64u) +
                     (m >= 128u) + (m >= 256u) + (m >= 512u);
  const uint32_t sub_u = ((p + 103u) << 23) | ((m << (23u - p)) & kManMask);

  uint32_t r;
  if (e == 0x1fu) {
    r = kExpMask | (m << 13) | (m != 0u ? 0x00400000u : 0u);
  } else if (e == 0u) {
    r = m == 0u ? 0u : sub_u;
  } else {
    r = ((e + 112u) << 23) | (m << 13);
  }
  return sign | r;
}

/// binary32 -> bfloat16. Rounding: to nearest, ties to even, on the dropped 16 bits, which is
/// also correct through the subnormal range (binary32 subnormals stay bf16 subnormals) and rounds
/// the largest finite values to infinity as IEEE requires. NaN: keeps the sign and the top 7
/// payload bits and sets the quiet bit (the same policy as fp16).
inline uint16_t F32ToBf16(uint32_t u) {
  const bool is_nan = (u & 0x7fffffffu) > kExpMask;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>(is_nan ? quiet : rounded);
}

/// bfloat16 -> binary32. Exact for every input, NaN payloads included.
inline uint32_t Bf16ToF32(uint16_t b) { return static_cast<uint32_t>(b) << 16; }

}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_FP16_H_
