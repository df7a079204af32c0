// Bit-level views of binary32 values.
//
// The kernels pass every floating-point scalar as its 32-bit pattern and move fp16/bf16 data as
// 16-bit integers, so the only float<->bits operation anywhere is the exact reinterpretation
// below. It is used by synthesizable code (Vitis HLS accepts the union form) and by the host model
// (which uses __builtin_bit_cast where the compiler has it, so g++ can vectorise through it).
#ifndef CSDKIT_HLS_BITS_H_
#define CSDKIT_HLS_BITS_H_

#include <cstdint>

namespace csdkit {
namespace hls {

/// The one NaN that any csdkit operation produces (quiet, positive, zero payload).
constexpr uint32_t kCanonicalNan = 0x7fc00000u;
constexpr uint32_t kSignMask = 0x80000000u;
constexpr uint32_t kExpMask = 0x7f800000u;
constexpr uint32_t kManMask = 0x007fffffu;

/// Whether a binary32 pattern is an infinity or a NaN (exponent field all ones).
inline bool IsNonFinite(uint32_t u) { return (u & kExpMask) == kExpMask; }

#if defined(__has_builtin)
#if __has_builtin(__builtin_bit_cast) && !defined(__SYNTHESIS__)
#define CSDKIT_HAVE_BIT_CAST 1
#endif
#endif

/// Reinterprets a binary32 value as its bit pattern. Exact; no rounding, NaN payload kept.
inline uint32_t F2U(float f) {
#ifdef CSDKIT_HAVE_BIT_CAST
  return __builtin_bit_cast(uint32_t, f);
#else
  union {
    float f;
    uint32_t u;
  } c;
  c.f = f;
  return c.u;
#endif
}

/// Reinterprets a bit pattern as a binary32 value. Exact; no rounding, NaN payload kept.
inline float U2F(uint32_t u) {
#ifdef CSDKIT_HAVE_BIT_CAST
  return __builtin_bit_cast(float, u);
#else
  union {
    uint32_t u;
    float f;
  } c;
  c.u = u;
  return c.f;
#endif
}

}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_BITS_H_
