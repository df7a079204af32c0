// Bench of csd_fp_sqrt under both policies (FtzDaz = 0 and 1, two Verilated models), one
// operand per cycle, checked against SQRTSS with the contract's NaN and FTZ/DAZ rules.
// Quick: the hand-picked values, then biased random operands (exact squares and their
// neighbours, subnormals, negatives, NaNs). --exhaustive: one shard of all 2^32 operands,
// both policies. Quick mode also runs an IEEE model with BitsPerStage = 3.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>

#include "Vcsd_fp_sqrt_ftz.h"
#include "Vcsd_fp_sqrt_ftz_csd_fp_sqrt.h"
#include "Vcsd_fp_sqrt_ieee.h"
#include "Vcsd_fp_sqrt_ieee_csd_fp_sqrt.h"
#include "Vcsd_fp_sqrt_ieee_r3.h"
#include "Vcsd_fp_sqrt_ieee_r3_csd_fp_sqrt.h"
#include "csdkit/hls/fp32.h"
#include "tb_oracle.h"
#include "tb_unary.h"

namespace {

using namespace csd_tb;

constexpr uint64_t kDefaultRandomOps = 4000000;

/// Cases the random stimulus must reach (IEEE results).
struct SqrtCoverage {
  uint64_t exact = 0, inexact = 0, subnormal = 0, negative = 0, nan = 0;
  void Add(uint32_t a, uint32_t r) {
    const float fa = AsF(a), fr = AsF(r);
    if (std::isnan(fa)) {
      ++nan;
    } else if (fa < 0.0f) {
      ++negative;
    } else if (std::isfinite(fa) && fa != 0.0f) {
      if (std::fpclassify(fa) == FP_SUBNORMAL) ++subnormal;
      if (static_cast<double>(fr) * fr == fa) {
        ++exact;
      } else {
        ++inexact;
      }
    }
  }
  bool Report(const std::string& name) const {
    std::printf("COVERAGE %s: exact=%" PRIu64 " inexact=%" PRIu64 " subnormal=%" PRIu64
                " negative=%" PRIu64 " nan=%" PRIu64 "\n",
                name.c_str(), exact, inexact, subnormal, negative, nan);
    return exact > 0 && inexact > 0 && subnormal > 0 && negative > 0 && nan > 0;
  }
};

template <class Model>
bool RunPolicy(const Options& o, bool ftz, unsigned latency, const char* unit = "csd_fp_sqrt",
               uint64_t divisor = 1) {
  UnarySpec spec;
  spec.name = std::string(unit) + (ftz ? "/ftz" : "/ieee");
  spec.latency = latency;
  spec.directed = SpecialOperands();
  spec.random_ops = (o.n != 0 ? o.n : kDefaultRandomOps) / divisor;
  Gen g(o.seed);
  const csdkit::hls::Fp32 f(ftz);
  SqrtCoverage cov;
  return RunUnary<Model>(
      spec, o, [&]() { return g.SqrtOperand(); }, [ftz](uint32_t a) { return RefSqrt(ftz, a); },
      [&f](uint32_t a) { return AsU(f.Sqrt(AsF(a))); }, cov);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  if (!HostIsIeee()) return 1;
  std::printf("tb_csd_fp_sqrt: seed=0x%" PRIx64 "\n", o.seed);
  bool ok = RunPolicy<Vcsd_fp_sqrt_ieee>(o, false, Vcsd_fp_sqrt_ieee_csd_fp_sqrt::Latency);
  ok = RunPolicy<Vcsd_fp_sqrt_ftz>(o, true, Vcsd_fp_sqrt_ftz_csd_fp_sqrt::Latency) && ok;
  if (!o.exhaustive) {  // a non-default digit pipeline, a quarter of the random operands
    ok = RunPolicy<Vcsd_fp_sqrt_ieee_r3>(o, false, Vcsd_fp_sqrt_ieee_r3_csd_fp_sqrt::Latency,
                                         "csd_fp_sqrt[BitsPerStage=3]", 4) &&
         ok;
  }
  std::printf("%s tb_csd_fp_sqrt\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
