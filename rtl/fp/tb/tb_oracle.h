// The oracle of the rtl/fp benches: the host's own binary32 instructions (SSE, round to nearest
// even, MXCSR checked) and F16C conversions, followed by the numeric contract's documented
// normalisations, written independently of both the RTL and csdkit's C++ model:
//   IEEE policy:    r = a op b; NaN -> 0x7fc00000.
//   FTZ/DAZ policy: subnormal operands -> zero of the same sign; r = a op b; NaN -> 0x7fc00000;
//                   a subnormal r -> zero of the same sign (flush after IEEE rounding).
// bf16 has no exact host instruction (AVX512-BF16 flushes subnormals), so fp32 -> bf16 is
// computed here by picking the nearer of the two neighbouring bf16 values in double precision.
//
// The benches also compare csdkit's C++ model (hls/include/csdkit/hls/fp32.h, fp16.h) with this
// oracle on every vector, so a disagreement between the model and the host is reported too.
#ifndef CSDKIT_RTL_FP_TB_TB_ORACLE_H_
#define CSDKIT_RTL_FP_TB_TB_ORACLE_H_

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace csd_tb {

constexpr uint32_t kCanonicalNan = 0x7fc00000u;

inline float AsF(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint32_t AsU(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// Refuses to run unless MXCSR selects round to nearest with FTZ and DAZ off: the oracle is the
/// host's arithmetic and must be IEEE. Returns false (after printing why) otherwise.
inline bool HostIsIeee() {
  const unsigned csr = _mm_getcsr();
  const bool ok = ((csr >> 13) & 3u) == 0u && (csr & (1u << 15)) == 0u && (csr & (1u << 6)) == 0u;
  if (!ok) {
    std::printf("MXCSR=0x%08x: expected round-to-nearest with FTZ and DAZ off\n", csr);
  }
  return ok;
}

/// Zero of the same sign for a subnormal, x otherwise (by classification, not bit masks).
inline float RefFlush(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

enum class BinOp { kAdd, kSub, kMul, kDiv };

inline const char* BinOpName(BinOp op) {
  switch (op) {
    case BinOp::kAdd:
      return "add";
    case BinOp::kSub:
      return "sub";
    case BinOp::kMul:
      return "mul";
    case BinOp::kDiv:
      return "div";
  }
  return "?";
}

/// The contract's result of a op b under the given policy, from one SSE scalar instruction.
inline uint32_t RefBinary(BinOp op, bool ftz, uint32_t a_bits, uint32_t b_bits) {
  float a = AsF(a_bits), b = AsF(b_bits);
  if (ftz) {
    a = RefFlush(a);
    b = RefFlush(b);
  }
  const __m128 va = _mm_set_ss(a), vb = _mm_set_ss(b);
  __m128 vr;
  switch (op) {
    case BinOp::kAdd:
      vr = _mm_add_ss(va, vb);
      break;
    case BinOp::kSub:
      vr = _mm_sub_ss(va, vb);
      break;
    case BinOp::kMul:
      vr = _mm_mul_ss(va, vb);
      break;
    default:
      vr = _mm_div_ss(va, vb);
      break;
  }
  float r = _mm_cvtss_f32(vr);
  if (std::isnan(r)) return kCanonicalNan;
  if (ftz) r = RefFlush(r);
  return AsU(r);
}

/// The contract's sqrt(a) under the given policy (SQRTSS).
inline uint32_t RefSqrt(bool ftz, uint32_t a_bits) {
  float a = AsF(a_bits);
  if (ftz) a = RefFlush(a);
  float r = _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(a)));
  if (std::isnan(r)) return kCanonicalNan;
  if (ftz) r = RefFlush(r);
  return AsU(r);
}

/// sign(a): canonical NaN for NaN, +0 for a zero (or a subnormal read as zero under DAZ),
/// otherwise +-1 by the sign.
inline uint32_t RefSign(bool ftz, uint32_t a_bits) {
  const float a = AsF(a_bits);
  if (std::isnan(a)) return kCanonicalNan;
  if (a == 0.0f || (ftz && std::fpclassify(a) == FP_SUBNORMAL)) return 0u;
  return AsU(std::copysign(1.0f, a));
}

/// fp32 -> fp16 by the F16C instruction VCVTPS2PH, rounding to nearest even.
inline uint16_t RefF32ToF16(uint32_t a_bits) {
  return static_cast<uint16_t>(_cvtss_sh(AsF(a_bits), _MM_FROUND_TO_NEAREST_INT));
}

/// fp16 -> fp32 by the F16C instruction VCVTPH2PS.
inline uint32_t RefF16ToF32(uint16_t h) { return AsU(_cvtsh_ss(h)); }

/// fp32 -> bf16: NaN keeps its sign and top 7 payload bits, quiet bit set; otherwise the nearer
/// of the two bf16 neighbours (ties to the even one), the one above the largest finite bf16
/// being infinity at 2^128 as IEEE's rounding rule has it. Distances are exact in double.
inline uint16_t RefF32ToBf16(uint32_t a_bits) {
  const float a = AsF(a_bits);
  if (std::isnan(a)) return static_cast<uint16_t>((a_bits >> 16) | 0x0040u);
  const uint32_t sign = a_bits & 0x80000000u;
  const uint32_t mag = a_bits & 0x7fffffffu;
  const uint32_t lo = mag & 0xffff0000u;
  if (lo == mag) return static_cast<uint16_t>((sign | mag) >> 16);  // exact, inf included
  const uint32_t hi = lo + 0x10000u;
  const double x = static_cast<double>(AsF(mag));
  const double dlo = x - static_cast<double>(AsF(lo));
  const double vhi = hi == 0x7f800000u ? std::ldexp(1.0, 128) : static_cast<double>(AsF(hi));
  const double dhi = vhi - x;
  uint32_t pick;
  if (dlo < dhi) {
    pick = lo;
  } else if (dhi < dlo) {
    pick = hi;
  } else {
    pick = ((lo >> 16) & 1u) == 0u ? lo : hi;
  }
  return static_cast<uint16_t>((sign | pick) >> 16);
}

/// bf16 -> fp32: exact, the bits moved to the top half (the value, NaN payloads included).
inline uint32_t RefBf16ToF32(uint16_t b) { return static_cast<uint32_t>(b) << 16; }

}  // namespace csd_tb

#endif  // CSDKIT_RTL_FP_TB_TB_ORACLE_H_
