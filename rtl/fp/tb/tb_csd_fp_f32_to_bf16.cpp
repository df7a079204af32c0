// Bench of csd_fp_f32_to_bf16, one operand per cycle, checked against the oracle's nearest-
// neighbour reference (tb_oracle.h; csdkit's F32ToBf16 against the same).
// Quick: the hand-picked values, then biased random operands (exact ties on the dropped 16
// bits and their neighbours, subnormal ties, the largest finite values, NaN payloads).
// --exhaustive: one shard of all 2^32 operands.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>

#include "Vcsd_fp_f32_to_bf16.h"
#include "Vcsd_fp_f32_to_bf16_csd_fp_f32_to_bf16.h"
#include "csdkit/hls/fp16.h"
#include "tb_oracle.h"
#include "tb_unary.h"

namespace {

using namespace csd_tb;

constexpr uint64_t kDefaultRandomOps = 8000000;

/// Cases the random stimulus must reach.
struct Bf16Coverage {
  uint64_t tie = 0, sub_tie = 0, overflow = 0, nan = 0;
  void Add(uint32_t a, uint32_t r) {
    const float fa = AsF(a);
    if (std::isnan(fa)) {
      ++nan;
      return;
    }
    if ((r & 0x7fffu) == 0x7f80u && std::isfinite(fa)) ++overflow;
    if ((a & 0xffffu) == 0x8000u) {
      ++tie;
      if ((a & 0x7f800000u) == 0u) ++sub_tie;
    }
  }
  bool Report(const std::string& name) const {
    std::printf("COVERAGE %s: tie=%" PRIu64 " sub_tie=%" PRIu64 " overflow=%" PRIu64
                " nan=%" PRIu64 "\n",
                name.c_str(), tie, sub_tie, overflow, nan);
    return tie > 0 && sub_tie > 0 && overflow > 0 && nan > 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  if (!HostIsIeee()) return 1;
  std::printf("tb_csd_fp_f32_to_bf16: seed=0x%" PRIx64 "\n", o.seed);
  UnarySpec spec;
  spec.name = "csd_fp_f32_to_bf16";
  spec.latency = Vcsd_fp_f32_to_bf16_csd_fp_f32_to_bf16::Latency;
  spec.out_digits = 4;
  spec.directed = SpecialOperands();
  spec.random_ops = o.n != 0 ? o.n : kDefaultRandomOps;
  Gen g(o.seed);
  Bf16Coverage cov;
  const bool ok = RunUnary<Vcsd_fp_f32_to_bf16>(
      spec, o, [&]() { return g.Bf16Operand(); }, [](uint32_t a) { return RefF32ToBf16(a); },
      [](uint32_t a) { return csdkit::hls::F32ToBf16(a); }, cov);
  std::printf("%s tb_csd_fp_f32_to_bf16\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
