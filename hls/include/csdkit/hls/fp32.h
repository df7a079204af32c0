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
inline float Canon(float x) { return x != x ? U2F(kCanonicalNan) : x; }

/// Under ftz, replaces a subnormal by zero of the same sign; otherwise returns x unchanged.
inline float Flush(bool ftz, float x) {
  const uint32_t u = F2U(x);
  const bool sub = (u & kExpMask) == 0u;
  return (ftz && sub) ? U2F(u & kSignMask) : x;
}

/// The binary32 operations of the contract. `ftz` selects the FTZ/DAZ policy; it is a run-time
/// value so that one datapath (and one HLS kernel) serves both policies.
class Fp32 {
 public:
  explicit Fp32(bool ftz) : ftz_(ftz) {}

  bool ftz() const { return ftz_; }

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
    const float x = In(a);
    const float s = x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
    return x != x ? U2F(kCanonicalNan) : s;
  }

 private:
  float In(float x) const { return Flush(ftz_, x); }
  float Out(float x) const { return Flush(ftz_, Canon(x)); }

  bool ftz_;
};

}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_FP32_H_
