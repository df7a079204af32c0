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

#if !defined(__SYNTHESIS__) && !defined(CSDKIT_FP16_INTEGER_ONLY) && defined(__F16C__)
#include <immintrin.h>
#endif

namespace csdkit {
namespace hls {

/// binary32 -> binary16 in integer code (the synthesizable implementation), exactly the F16C
/// instruction VCVTPS2PH with rounding mode 0.
/// Rounding: to nearest, ties to even, including into the subnormal range (results down to
/// 2^-24 are kept as subnormal halves; below half of that they round to signed zero).
/// Overflow: |x| >= 65520 (the first value that rounds past 65504) gives signed infinity.
/// NaN: keeps the sign and the top 10 payload bits (mantissa >> 13) and sets the quiet bit.
/// binary32 subnormal inputs are far below the half range and round to signed zero.
inline uint16_t F32ToF16Int(uint32_t u) {
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;

  // NaN: quiet it, keep the top payload bits.
  const uint32_t nan_h = 0x7e00u | ((a >> 13) & 0x03ffu);

  // Normal half range [2^-14, 65520): rebias the exponent (127 -> 15, i.e. subtract 112 << 23)
  // and round the 13 dropped mantissa bits to nearest even by adding 0xfff plus the lowest
  // kept bit. A carry out of the mantissa moves into the exponent, which is the correctly
  // rounded result (65504 is the largest reachable below the overflow threshold).
  const uint32_t t = a - 0x38000000u;
  const uint32_t norm_h = (t + 0x0fffu + ((t >> 13) & 1u)) >> 13;

  // Subnormal half range (0, 2^-14): the result counts units of 2^-24. With the implicit bit
  // restored, value = mant * 2^(e - 150), so units = mant >> (126 - e), rounded to nearest even
  // with the same add-and-shift as above. Shifts of 25 or more always give zero (mant < 2^24
  // is then at most a quarter unit); clamping to 25 keeps the shift defined. A round-up to 0x400
  // yields the smallest normal half, correctly encoded.
  // sub_h is computed for every input and selected only below 2^-14 (e <= 112). Elsewhere
  // sh_raw is 0 (e = 126) or wraps around (e > 126); both clamp to 25 (with 0, sh - 1 would
  // shift by 2^32 - 1: undefined in C++, reported by UBSan, though the value is never used).
  const uint32_t e = a >> 23;
  const uint32_t mant = (a & kManMask) | 0x00800000u;
  const uint32_t sh_raw = 126u - e;  // e <= 112 on the path that uses it, so 14..126
  const uint32_t sh = sh_raw - 1u > 24u ? 25u : sh_raw;
  const uint32_t sub_h = (mant + ((1u << (sh - 1u)) - 1u) + ((mant >> sh) & 1u)) >> sh;

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

/// binary16 -> binary32 in integer code (the synthesizable implementation), exactly the F16C
/// instruction VCVTPH2PS. Exact for every non-NaN input
/// (subnormal halves become normal binary32 values). NaN: sign and payload kept, quiet bit set.
inline uint32_t F16ToF32Int(uint16_t hv) {
  const uint32_t h = hv;
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x03ffu;

  // Normal, infinity and NaN: mantissa in place, exponent rebiased (15 -> 127); an exponent of
  // 31 becomes 255. NaNs get the quiet bit.
  const uint32_t norm = ((e + 112u) << 23) | (m << 13);
  const uint32_t special = kExpMask | (m << 13) | (m != 0u ? 0x00400000u : 0u);

  // Subnormal half m * 2^-24 (m != 0): shift m left until its leading one reaches bit 10,
  // by a branch-free binary search over the shift (5, 2, 1, 1: any of 1..10), then encode
  // exponent 1 - s as for a normal half. The implicit bit (bit 10, at bit 23 after the << 13)
  // is added into the exponent field, which is why the bias term is 111, not 112.
  uint32_t x = m, s = 0;
  const uint32_t s5 = x < 0x20u ? 5u : 0u;
  x <<= s5;
  s += s5;
  const uint32_t s2 = x < 0x80u ? 2u : 0u;
  x <<= s2;
  s += s2;
  const uint32_t s1a = x < 0x100u ? 1u : 0u;
  x <<= s1a;
  s += s1a;
  const uint32_t s1b = x < 0x200u ? 1u : 0u;
  x <<= s1b;
  s += s1b;
  x <<= 1;  // leading one from bit 9 to bit 10
  s += 1;
  const uint32_t sub = ((112u - s) << 23) + (x << 13);

  uint32_t r;
  if (e == 0x1fu) {
    r = special;
  } else if (e == 0u) {
    r = m == 0u ? 0u : sub;
  } else {
    r = norm;
  }
  return sign | r;
}

// The conversions the kernels call. In HLS, and in any build without F16C, they are the integer
// code above. In an x86 host build with F16C they are the F16C instruction itself (through
// _Float16, so g++ can vectorise it): the contract defines fp16 conversion as exactly that
// instruction, and tests/fp16_test.cpp proves the integer code equal to it on every one of the
// 2^16 / 2^32 inputs, and these dispatching functions equal to the integer code, so both builds
// compute one function. Define CSDKIT_FP16_INTEGER_ONLY to force the integer code everywhere.
#if !defined(__SYNTHESIS__) && !defined(CSDKIT_FP16_INTEGER_ONLY) && defined(__F16C__) && \
    defined(__FLT16_MAX__) && defined(CSDKIT_HAVE_BIT_CAST)
#define CSDKIT_FP16_F16C 1
#endif

/// binary32 -> binary16 per the contract (see F32ToF16Int).
inline uint16_t F32ToF16(uint32_t u) {
#ifdef CSDKIT_FP16_F16C
  return __builtin_bit_cast(uint16_t, static_cast<_Float16>(U2F(u)));
#else
  return F32ToF16Int(u);
#endif
}

/// binary16 -> binary32 per the contract (see F16ToF32Int).
inline uint32_t F16ToF32(uint16_t h) {
#ifdef CSDKIT_FP16_F16C
  return F2U(static_cast<float>(__builtin_bit_cast(_Float16, h)));
#else
  return F16ToF32Int(h);
#endif
}

/// F32ToF16 on `n` values (n a multiple of 8), element for element; vectorised with F16C where
/// F32ToF16 uses it (rounding fixed to nearest even by the immediate, not by MXCSR).
inline void F32ToF16Array(const uint32_t* in, uint16_t* out, unsigned n) {
#ifdef CSDKIT_FP16_F16C
  for (unsigned i = 0; i < n; i += 8) {
    const __m256 v = _mm256_loadu_ps(reinterpret_cast<const float*>(in + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#else
F32_TO_F16_ARRAY:
  for (unsigned i = 0; i < n; ++i) {
#pragma HLS UNROLL
    out[i] = F32ToF16(in[i]);
  }
#endif
}

/// True when F32ToF16/F16ToF32 use the F16C instruction rather than the integer code.
constexpr bool kFp16UsesF16c =
#ifdef CSDKIT_FP16_F16C
    true;
#else
    false;
#endif

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
