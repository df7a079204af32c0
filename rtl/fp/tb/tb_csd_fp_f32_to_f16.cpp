// Bench of csd_fp_f32_to_f16, one operand per cycle, checked against the F16C instruction
// VCVTPS2PH with rounding mode 0 (and csdkit's F32ToF16 against the same).
// Quick: the hand-picked values, then biased random operands (the half normal and subnormal
// ranges, exact ties at the rounding position of each range and their neighbours, the overflow
// threshold 65520, NaN payloads). --exhaustive: one shard of all 2^32 operands.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>

#include "Vcsd_fp_f32_to_f16.h"
#include "Vcsd_fp_f32_to_f16_csd_fp_f32_to_f16.h"
#include "csdkit/hls/fp16.h"
#include "tb_oracle.h"
#include "tb_unary.h"

namespace {

using namespace csd_tb;

constexpr uint64_t kDefaultRandomOps = 8000000;

/// Cases the random stimulus must reach.
struct F16Coverage {
  uint64_t tie = 0, sub_tie = 0, sub_half = 0, overflow = 0, nan = 0;
  void Add(uint32_t a, uint32_t r) {
    const float fa = AsF(a);
    if (std::isnan(fa)) {
      ++nan;
      return;
    }
    const uint16_t h = static_cast<uint16_t>(r);
    const uint16_t mag = h & 0x7fffu;
    if (mag == 0x7c00u) {
      if (std::isfinite(fa)) ++overflow;
      return;
    }
    if (mag != 0u && mag < 0x0400u) ++sub_half;
    // Halfway between the result and one of its neighbours (magnitudes, exact in double)?
    const double x = std::fabs(static_cast<double>(fa));
    const double v = _cvtsh_ss(mag);
    auto half = [](uint32_t m) { return static_cast<double>(_cvtsh_ss(static_cast<uint16_t>(m))); };
    const double up = (v + half(mag + 1u)) / 2;
    const double down = mag == 0u ? -1.0 : (v + half(mag - 1u)) / 2;
    if (x == up || x == down) {
      ++tie;
      if (mag <= 0x0400u) ++sub_tie;
    }
  }
  bool Report(const std::string& name) const {
    std::printf("COVERAGE %s: tie=%" PRIu64 " sub_tie=%" PRIu64 " sub_half=%" PRIu64
                " overflow=%" PRIu64 " nan=%" PRIu64 "\n",
                name.c_str(), tie, sub_tie, sub_half, overflow, nan);
    return tie > 0 && sub_tie > 0 && sub_half > 0 && overflow > 0 && nan > 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  if (!HostIsIeee()) return 1;
  std::printf("tb_csd_fp_f32_to_f16: seed=0x%" PRIx64 "\n", o.seed);
  UnarySpec spec;
  spec.name = "csd_fp_f32_to_f16";
  spec.latency = Vcsd_fp_f32_to_f16_csd_fp_f32_to_f16::Latency;
  spec.out_digits = 4;
  spec.directed = SpecialOperands();
  spec.random_ops = o.n != 0 ? o.n : kDefaultRandomOps;
  Gen g(o.seed);
  F16Coverage cov;
  const bool ok = RunUnary<Vcsd_fp_f32_to_f16>(
      spec, o, [&]() { return g.F16Operand(); }, [](uint32_t a) { return RefF32ToF16(a); },
      [](uint32_t a) { return csdkit::hls::F32ToF16(a); }, cov);
  std::printf("%s tb_csd_fp_f32_to_f16\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
