// Bench of csd_fp_mul (binary32 multiply) under both policies: two Verilated models (FtzDaz = 0
// and FtzDaz = 1), each fed one operation per cycle: the cross product of the hand-picked
// values, then biased random pairs (exact ties in the normal and the subnormal range, 25/26-bit
// products, products around 2^-126 and the overflow threshold, subnormal operands), checked
// against the host oracle as they emerge Latency cycles later (tb_binary.h).
#include <cinttypes>
#include <cstdio>

#include "Vcsd_fp_mul_ftz.h"
#include "Vcsd_fp_mul_ftz_csd_fp_mul.h"
#include "Vcsd_fp_mul_ieee.h"
#include "Vcsd_fp_mul_ieee_csd_fp_mul.h"
#include "tb_binary.h"

namespace {

constexpr uint64_t kDefaultRandomOps = 8000000;

template <class Model>
void Drive(Model& m, const csd_tb::Op& op) {
  m.a_i = op.a;
  m.b_i = op.b;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace csd_tb;
  const Options o = ParseOptions(argc, argv);
  if (!HostIsIeee()) return 1;
  const uint64_t n = o.n != 0 ? o.n : kDefaultRandomOps;
  std::printf("tb_csd_fp_mul: seed=0x%" PRIx64 " random_ops=%" PRIu64 "\n", o.seed, n);
  bool ok = RunBinaryPolicy<Vcsd_fp_mul_ieee>("csd_fp_mul", Unit::kMul, false,
                                           Vcsd_fp_mul_ieee_csd_fp_mul::Latency, o, n,
                                           Drive<Vcsd_fp_mul_ieee>);
  ok = RunBinaryPolicy<Vcsd_fp_mul_ftz>("csd_fp_mul", Unit::kMul, true,
                                        Vcsd_fp_mul_ftz_csd_fp_mul::Latency, o, n,
                                        Drive<Vcsd_fp_mul_ftz>) &&
       ok;
  std::printf("%s tb_csd_fp_mul\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
