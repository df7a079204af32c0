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

/// Describes the inputs of element i (theta, m, v, gradient bits) in hex.
std::string DescribeInputs(const Problem& p, const UpdateBuffers& in, uint64_t i);

}  // namespace csdkit::testing

#endif  // CSDKIT_TESTS_TEST_UTIL_H_
