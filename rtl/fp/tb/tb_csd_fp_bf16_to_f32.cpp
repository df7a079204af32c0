// Bench of csd_fp_bf16_to_f32: all 2^16 bfloat16 operands, one per cycle, checked against the
// contract's definition (the bits shifted left by 16; csdkit's Bf16ToF32 against the same).
#include <cinttypes>
#include <cstdio>

#include "Vcsd_fp_bf16_to_f32.h"
#include "Vcsd_fp_bf16_to_f32_csd_fp_bf16_to_f32.h"
#include "csdkit/hls/fp16.h"
#include "tb_oracle.h"
#include "tb_unary.h"

int main(int argc, char** argv) {
  using namespace csd_tb;
  const Options o = ParseOptions(argc, argv);
  if (!HostIsIeee()) return 1;
  std::printf("tb_csd_fp_bf16_to_f32: seed=0x%" PRIx64 " (all 2^16 operands)\n", o.seed);
  UnarySpec spec;
  spec.name = "csd_fp_bf16_to_f32";
  spec.latency = Vcsd_fp_bf16_to_f32_csd_fp_bf16_to_f32::Latency;
  spec.in_digits = 4;
  spec.directed = All16();
  NoCoverage cov;
  const bool ok = RunUnary<Vcsd_fp_bf16_to_f32>(
      spec, o, []() { return 0u; },
      [](uint32_t a) { return RefBf16ToF32(static_cast<uint16_t>(a)); },
      [](uint32_t a) { return csdkit::hls::Bf16ToF32(static_cast<uint16_t>(a)); }, cov);
  std::printf("%s tb_csd_fp_bf16_to_f32\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
