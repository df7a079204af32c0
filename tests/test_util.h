// Helpers shared by the kernel-level tests: problem variants, special-value injection and
// byte-exact buffer comparison that reports mismatches in hex.
#ifndef CSDKIT_TESTS_TEST_UTIL_H_
#define CSDKIT_TESTS_TEST_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "csdkit/hls/mode.h"
#include "csdkit/platform/problem.h"
#include "csdkit/platform/selftest.h"

namespace csdkit::testing {

using ::csdkit::AllVariants;
using ::csdkit::Variant;

/// Overwrites about `fraction` of the elements of theta, m, v and of the gradient values with
/// special values (NaN payloads, infinities, signed zeros, subnormals, huge, tiny normals),
/// deterministically from `seed`.
void InjectSpecials(Problem& p, double fraction, uint64_t seed);

/// Byte-for-byte comparison with hex report (DiffBuffers of the self-test).
using ::csdkit::DiffBuffers;
inline std::string CompareBuffers(const char* name, const AlignedBuffer& exp,
                                  const AlignedBuffer& act, unsigned elem_bytes,
                                  const std::string& context) {
  return DiffBuffers(name, exp, act, elem_bytes, context);
}

/// How OverflowProblem makes finite inputs overflow binary32.
enum class Overflow {
  kHugeUnscale,  // unscale = 3e38: the unscaled gradient 2 * 3e38 overflows
  kHugeLr,       // lr = 3e38: lr times the update overflows (SGD: exactly at the hot elements)
};

/// A dense launch of n elements (ordinary generated state, IEEE policy) whose gradient is zero
/// except at the elements `hot`, which hold 2.0 in the gradient dtype: every input and every
/// hyper-parameter is finite, and the products `how` names overflow. With kHugeUnscale the
/// non-finite outputs are exactly at the hot elements (the unscaled gradient is +inf there and
/// 0 elsewhere).
Problem OverflowProblem(const Variant& var, DType grad, DType out, uint32_t n, Overflow how,
                        const std::vector<uint32_t>& hot, uint64_t seed);

/// q8 / q8-bf16 state: turns `p`, an AdamW problem with a dense fp32 gradient and whole blocks of
/// 256, into a launch aimed at the quantizer's non-zero rule (docs/state-formats.md: a value that
/// is non-zero as read and whose nearest map index is 0 takes index 1). unscale = 1, beta1 =
/// beta2 = 0 and omb1 = omb2 = 1 make the new moments the gradient itself: m' = g and v' = g * g
/// exactly (0 * m is a zero for the finite m of a generated state, and x + 0 = x). Block b of the
/// gradient is, by b mod 8: five ordinary blocks (largest magnitude 2^0, 2^-9, 2^21, 2^-50, 2^55)
/// holding, beside the largest value, values of both signs so small against it that m's index
/// is 0 (|g| / max < TM[0]), values whose index is 0 for v only (TM[0] < |g| / max < TU[0]^1/2),
/// values within 2^-10 of TM[0] · max, exact +0 and -0, subnormals and ordinary values; a tiny
/// block (subnormals and zeros only: absmax below 2^-126); a block of largest magnitude 2^-100
/// (v underflows: a tiny v block of an ordinary m block); one of 2^90 (v overflows: a non-finite
/// v block; m's q underflows to a subnormal or zero). Deterministic from `seed`. Throws
/// std::invalid_argument when `p` is not such a problem.
void MakeNonZeroRuleProblem(Problem& p, uint64_t seed);

/// What the quantizer meets in a launch of MakeNonZeroRuleProblem, counted from its gradient by
/// the contract's steps under the launch's policy: values non-zero as read whose index before
/// the rule is 0 (m positive, m negative, v), zeros in blocks that are neither tiny nor
/// non-finite (m, v), and tiny blocks (m, v).
struct NonZeroRuleCoverage {
  uint64_t m_pos = 0, m_neg = 0, v = 0, m_zero = 0, v_zero = 0, m_tiny = 0, v_tiny = 0;
  /// "" when every count reaches `min` (the tiny blocks: 1), else what is missing.
  std::string Missing(uint64_t min) const;
};
NonZeroRuleCoverage CountNonZeroRule(const Problem& p);

/// Checks the status word of a launch that wrote nothing (an error): every integrity lane 0
/// (the six CRCs, the non-finite count, the AXI error report, the reserved lanes 13 and 14) and
/// the non-finite position kStatusNoPosition. Returns "" or each lane that differs, with
/// expected and actual in hex.
std::string CheckNothingWrittenLanes(const AlignedBuffer& status);

/// Describes the inputs of element i (theta, m, v, gradient bits) in hex.
std::string DescribeInputs(const Problem& p, const UpdateBuffers& in, uint64_t i);

}  // namespace csdkit::testing

#endif  // CSDKIT_TESTS_TEST_UTIL_H_
