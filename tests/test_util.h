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

/// Checks the status word of a launch that wrote nothing (an error): every integrity lane 0
/// (the six CRCs, the non-finite count, the AXI error report, the reserved lanes 13 and 14) and
/// the non-finite position kStatusNoPosition. Returns "" or each lane that differs, with
/// expected and actual in hex.
std::string CheckNothingWrittenLanes(const AlignedBuffer& status);

/// Describes the inputs of element i (theta, m, v, gradient bits) in hex.
std::string DescribeInputs(const Problem& p, const UpdateBuffers& in, uint64_t i);

}  // namespace csdkit::testing

#endif  // CSDKIT_TESTS_TEST_UTIL_H_
