// Bench of csd_fp_div (binary32 divide) under both policies: two Verilated models (FtzDaz = 0
// and FtzDaz = 1), each fed one operation per cycle: the cross product of the hand-picked
// values, then biased random pairs (exact and near-exact quotients, ties in the subnormal range,
// quotients around 2^-126 and the overflow threshold, near-equal significands, subnormal
// operands), checked against the host oracle as they emerge Latency cycles later
// (tb_binary.h). A third model, IEEE with BitsPerStage = 3, checks a non-default digit pipeline.
#include <cinttypes>
#include <cstdio>

#include "Vcsd_fp_div_ftz.h"
#include "Vcsd_fp_div_ftz_csd_fp_div.h"
#include "Vcsd_fp_div_ieee.h"
#include "Vcsd_fp_div_ieee_csd_fp_div.h"
#include "Vcsd_fp_div_ieee_r3.h"
#include "Vcsd_fp_div_ieee_r3_csd_fp_div.h"
#include "tb_binary.h"

namespace {

constexpr uint64_t kDefaultRandomOps = 4000000;
// The BitsPerStage = 3 model gets a quarter of the random operations.
constexpr uint64_t kR3Divisor = 4;

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
  std::printf("tb_csd_fp_div: seed=0x%" PRIx64 " random_ops=%" PRIu64 "\n", o.seed, n);
  bool ok = RunBinaryPolicy<Vcsd_fp_div_ieee>("csd_fp_div", Unit::kDiv, false,
                                           Vcsd_fp_div_ieee_csd_fp_div::Latency, o, n,
                                           Drive<Vcsd_fp_div_ieee>);
  ok = RunBinaryPolicy<Vcsd_fp_div_ftz>("csd_fp_div", Unit::kDiv, true,
                                        Vcsd_fp_div_ftz_csd_fp_div::Latency, o, n,
                                        Drive<Vcsd_fp_div_ftz>) &&
       ok;
  ok = RunBinaryPolicy<Vcsd_fp_div_ieee_r3>("csd_fp_div[BitsPerStage=3]", Unit::kDiv, false,
                                            Vcsd_fp_div_ieee_r3_csd_fp_div::Latency, o,
                                            n / kR3Divisor, Drive<Vcsd_fp_div_ieee_r3>) &&
       ok;
  std::printf("%s tb_csd_fp_div\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
