// Bench of csd_fp_add (binary32 add/sub) under both policies: two Verilated models (FtzDaz = 0
// and FtzDaz = 1), each fed one operation per cycle, add or sub at random: the cross product of
// the hand-picked values, then biased random pairs (cancellations, exact ties made of odd
// numbers of half-ulps, sums around 2^-126 and the overflow threshold, far-apart exponents),
// checked against the host oracle as they emerge Latency cycles later (tb_binary.h).
#include <cinttypes>
#include <cstdio>

#include "Vcsd_fp_add_ftz.h"
#include "Vcsd_fp_add_ftz_csd_fp_add.h"
#include "Vcsd_fp_add_ieee.h"
#include "Vcsd_fp_add_ieee_csd_fp_add.h"
#include "tb_binary.h"

namespace {

constexpr uint64_t kDefaultRandomOps = 8000000;

template <class Model>
void Drive(Model& m, const csd_tb::Op& op) {
  m.a_i = op.a;
  m.b_i = op.b;
    m.sub_i = op.sub & 1u;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace csd_tb;
  const Options o = ParseOptions(argc, argv);
  if (!HostIsIeee()) return 1;
  const uint64_t n = o.n != 0 ? o.n : kDefaultRandomOps;
  std::printf("tb_csd_fp_add: seed=0x%" PRIx64 " random_ops=%" PRIu64 "\n", o.seed, n);
  bool ok = RunBinaryPolicy<Vcsd_fp_add_ieee>("csd_fp_add", Unit::kAddSub, false,
                                           Vcsd_fp_add_ieee_csd_fp_add::Latency, o, n,
                                           Drive<Vcsd_fp_add_ieee>);
  ok = RunBinaryPolicy<Vcsd_fp_add_ftz>("csd_fp_add", Unit::kAddSub, true,
                                        Vcsd_fp_add_ftz_csd_fp_add::Latency, o, n,
                                        Drive<Vcsd_fp_add_ftz>) &&
       ok;
  std::printf("%s tb_csd_fp_add\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
