// Bench of csd_fp_sign under both policies (FtzDaz = 0 and 1, two Verilated models), one
// operand per cycle: the hand-picked values, then biased random operands, checked against the
// contract's definition by classification (NaN -> canonical NaN, zero or a subnormal under DAZ
// -> +0, otherwise copysign(1, a)).
#include <cinttypes>
#include <cstdio>
#include <string>

#include "Vcsd_fp_sign_ftz.h"
#include "Vcsd_fp_sign_ftz_csd_fp_sign.h"
#include "Vcsd_fp_sign_ieee.h"
#include "Vcsd_fp_sign_ieee_csd_fp_sign.h"
#include "csdkit/hls/fp32.h"
#include "tb_oracle.h"
#include "tb_unary.h"

namespace {

using namespace csd_tb;

constexpr uint64_t kDefaultRandomOps = 2000000;

template <class Model>
bool RunPolicy(const Options& o, bool ftz, unsigned latency) {
  UnarySpec spec;
  spec.name = std::string("csd_fp_sign/") + (ftz ? "ftz" : "ieee");
  spec.latency = latency;
  spec.directed = SpecialOperands();
  spec.random_ops = o.n != 0 ? o.n : kDefaultRandomOps;
  Gen g(o.seed);
  const csdkit::hls::Fp32 f(ftz);
  NoCoverage cov;
  return RunUnary<Model>(
      spec, o, [&]() { return g.Operand(); }, [ftz](uint32_t a) { return RefSign(ftz, a); },
      [&f](uint32_t a) { return AsU(f.Sign(AsF(a))); }, cov);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  if (!HostIsIeee()) return 1;
  std::printf("tb_csd_fp_sign: seed=0x%" PRIx64 "\n", o.seed);
  bool ok = RunPolicy<Vcsd_fp_sign_ieee>(o, false, Vcsd_fp_sign_ieee_csd_fp_sign::Latency);
  ok = RunPolicy<Vcsd_fp_sign_ftz>(o, true, Vcsd_fp_sign_ftz_csd_fp_sign::Latency) && ok;
  std::printf("%s tb_csd_fp_sign\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
