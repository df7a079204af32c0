// Helpers shared by the kernel-level tests: problem variants, special-value injection and
// byte-exact buffer comparison that reports mismatches in hex.
#ifndef CSDKIT_TESTS_TEST_UTIL_H_
#define CSDKIT_TESTS_TEST_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "csdkit/hls/mode.h"
#include "csdkit/problem.h"

namespace csdkit::testing {

/// A named optimizer configuration, covering every flag of the datapath between them.
struct Variant {
  const char* name;
  OptimizerConfig cfg;
  int64_t step;
};

inline std::vector<Variant> AllVariants() {
  std::vector<Variant> v;
  auto d = [](Optimizer o) { return OptimizerConfig::Defaults(o); };
  OptimizerConfig c = d(Optimizer::kAdamW);
  v.push_back({"adamw", c, 1});
  c.weight_decay = 0.1;
  v.push_back({"adamw_wd_t7", c, 7});
  c = d(Optimizer::kAdam);
  v.push_back({"adam", c, 2});
  c.weight_decay = 0.01;
  v.push_back({"adam_l2", c, 3});
  c = d(Optimizer::kSgd);
  v.push_back({"sgd_mom_first", c, 1});
  c.dampening = 0.1;
  c.weight_decay = 1e-3;
  v.push_back({"sgd_mom_damp_l2", c, 5});
  c.dampening = 0.0;
  c.nesterov = true;
  v.push_back({"sgd_nesterov", c, 2});
  c = d(Optimizer::kSgd);
  c.momentum = 0.0;
  v.push_back({"sgd_plain", c, 1});
  c = d(Optimizer::kAdagrad);
  c.lr_decay = 0.01;
  c.weight_decay = 0.01;
  c.initial_accumulator_value = 0.1;
  v.push_back({"adagrad", c, 4});
  c = d(Optimizer::kLion);
  c.weight_decay = 0.1;
  v.push_back({"lion", c, 1});
  return v;
}

/// Overwrites about `fraction` of the elements of theta, m, v and of the gradient values with
/// special values (NaN payloads, infinities, signed zeros, subnormals, huge, tiny normals),
/// deterministically from `seed`.
void InjectSpecials(Problem& p, double fraction, uint64_t seed);

/// Compares two buffers byte for byte over their full (padded) size. On mismatch, returns a
/// report naming the array, the first mismatching elements (index, expected, actual in hex)
/// and appends `context`; returns "" when equal.
std::string CompareBuffers(const char* name, const AlignedBuffer& exp, const AlignedBuffer& act,
                           unsigned elem_bytes, const std::string& context);

/// Describes the inputs of element i (theta, m, v, gradient bits) in hex.
std::string DescribeInputs(const Problem& p, const UpdateBuffers& in, uint64_t i);

}  // namespace csdkit::testing

#endif  // CSDKIT_TESTS_TEST_UTIL_H_
