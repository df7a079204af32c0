// binary32 arithmetic under the numeric contract, with a run-time IEEE or FTZ/DAZ policy.
//
// Every operation here is one IEEE-754 binary32 operation rounded to nearest even (the host's
// SSE/AVX instruction; in Vitis HLS the Floating-Point Operator), followed by the contract's
// normalisation:
//   * NaN results are replaced by the canonical quiet NaN 0x7fc00000, so no result depends on
//     which operand's payload the hardware happened to propagate;
//   * under the FTZ/DAZ policy (ftz = true) a subnormal operand is read as zero of the same sign
//     before the operation, and a subnormal result is replaced by zero of the same sign after
//     the IEEE-rounded result is formed ("flush after rounding": a result that rounds up to
//     2^-126 is kept). Under the IEEE policy subnormals are kept (gradual underflow).
// There is no fused multiply-add: a*b+c is always Mul then Add, two roundings. The host model
// must be compiled with -ffp-contract=off and without -ffast-math; CheckFpEnvironment() in the
// host runtime verifies MXCSR (round-to-nearest, FTZ and DAZ clear) at start-up.
#ifndef CSDKIT_HLS_FP32_H_
#define CSDKIT_HLS_FP32_H_

#include <cmath>
#include <cstdint>

#include "csdkit/hls/bits.h"

namespace csdkit {
namespace hls {

/// Replaces any NaN by the canonical quiet NaN; every other value, zeros and infinities
/// included, passes unchanged.
/// (Integer compare: no floating-point comparison, so nothing to trap or to branch on.)
inline float Canon(float x) {
  const uint32_t u = F2U(x);
  return U2F((u & ~kSignMask) > kExpMask ? kCanonicalNan : u);
}

/// Under ftz, replaces a subnormal by zero of the same sign; otherwise returns x unchanged.
/// Written as mask arithmetic (clear the mantissa of a zero-exponent value) so it is one
/// compare and one and-not in both the hardware and the vectorised host model.
inline float Flush(bool ftz, float x) {
  const uint32_t u = F2U(x);
  const uint32_t clear = ((u & kExpMask) == 0u && ftz) ? kManMask : 0u;
  return U2F(u & ~clear);
}

/// The binary32 operations of the contract. `ftz` selects the FTZ/DAZ policy; it is a run-time
/// value so that one datapath (and one HLS kernel) serves both policies.
///
/// kCanonEach = true (the `Fp32` alias) canonicalises every NaN result, as the contract states
/// each operation. kCanonEach = false (`Fp32Lazy`) leaves NaN payloads to the host instruction;
/// it is for datapaths that canonicalise their outputs instead. The two give identical bits at
/// such outputs, because no operation here lets a NaN payload influence anything but another
/// NaN: +, -, *, /, sqrt return NaN for any NaN operand, Sign tests NaN-ness by magnitude, the
/// policy flush leaves NaNs alone and selects only route values. (tests/kernel_test.cpp checks
/// the equivalence with NaN payloads injected.)
template <bool kCanonEach>
class Fp32T {
 public:
  explicit Fp32T(bool ftz) : daz_mask_(ftz ? kManMask : 0u) {}

  bool ftz() const { return daz_mask_ != 0u; }

  /// a + b, rounded to nearest even; canonical NaN; policy applied to operands and result.
  float Add(float a, float b) const { return Out(In(a) + In(b)); }
  /// a - b, rounded to nearest even; canonical NaN; policy applied to operands and result.
  float Sub(float a, float b) const { return Out(In(a) - In(b)); }
  /// a * b, rounded to nearest even; canonical NaN; policy applied to operands and result.
  float Mul(float a, float b) const { return Out(In(a) * In(b)); }
  /// a / b, rounded to nearest even (x/0 = signed inf, 0/0 = NaN); canonical NaN; policy.
  float Div(float a, float b) const { return Out(In(a) / In(b)); }
  /// sqrt(a), correctly rounded; sqrt(-0) = -0, sqrt(negative) = canonical NaN; policy.
  float Sqrt(float a) const { return Out(std::sqrt(In(a))); }
  /// The sign of a as a value: +1, -1, +0 for either zero, canonical NaN for NaN. Exact, so the
  /// policy has nothing to flush (subnormals are non-zero under IEEE, zero under DAZ).
  float Sign(float a) const {
    const uint32_t u = F2U(In(a));
    const uint32_t mag = u & ~kSignMask;
    const uint32_t one = (u & kSignMask) | 0x3f800000u;  // +-1.0
    return U2F(mag > kExpMask ? kCanonicalNan : (mag == 0u ? 0u : one));
  }

 private:
  // Policy applied to an operand / a result: the mantissa of a zero-exponent value is cleared
  // under FTZ/DAZ (daz_mask_ = mantissa mask) and kept under IEEE (daz_mask_ = 0).
  float In(float x) const {
    const uint32_t u = F2U(x);
    return U2F(u & ~((u & kExpMask) == 0u ? daz_mask_ : 0u));
  }
  float Out(float x) const { return In(kCanonEach ? Canon(x) : x); }

  uint32_t daz_mask_;
};

using Fp32 = Fp32T<true>;
using Fp32Lazy = Fp32T<false>;

}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_FP32_H_
