// Google Benchmark micro-benchmarks: the integer fp16/bf16 conversions (against F16C) and the
// per-element optimizer datapath, over arrays that stay in cache.
#include <immintrin.h>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "csdkit/hls/fp16.h"
#include "csdkit/hls/rules.h"

namespace hk = csdkit::hls;

namespace {

constexpr size_t kN = 4096;

std::vector<uint32_t> Inputs() {
  std::vector<uint32_t> v(kN);
  uint32_t x = 12345;
  for (auto& e : v) e = (x = x * 1664525u + 1013904223u);
  return v;
}

void BM_F32ToF16(benchmark::State& st) {
  auto in = Inputs();
  std::vector<uint16_t> out(kN);
  for (auto _ : st) {
    for (size_t i = 0; i < kN; ++i) out[i] = hk::F32ToF16(in[i]);
    benchmark::DoNotOptimize(out.data());
  }
  st.SetItemsProcessed(st.iterations() * kN);
}
BENCHMARK(BM_F32ToF16);

void BM_F32ToF16_F16C(benchmark::State& st) {
  auto in = Inputs();
  std::vector<uint16_t> out(kN);
  for (auto _ : st) {
    for (size_t i = 0; i < kN; i += 8) {
      const __m256 v = _mm256_loadu_ps(reinterpret_cast<const float*>(&in[i]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(&out[i]), _mm256_cvtps_ph(v, 0));
    }
    benchmark::DoNotOptimize(out.data());
  }
  st.SetItemsProcessed(st.iterations() * kN);
}
BENCHMARK(BM_F32ToF16_F16C);

void BM_F16ToF32(benchmark::State& st) {
  auto in = Inputs();
  std::vector<uint32_t> out(kN);
  for (auto _ : st) {
    for (size_t i = 0; i < kN; ++i) out[i] = hk::F16ToF32(static_cast<uint16_t>(in[i]));
    benchmark::DoNotOptimize(out.data());
  }
  st.SetItemsProcessed(st.iterations() * kN);
}
BENCHMARK(BM_F16ToF32);

void BM_F32ToBf16(benchmark::State& st) {
  auto in = Inputs();
  std::vector<uint16_t> out(kN);
  for (auto _ : st) {
    for (size_t i = 0; i < kN; ++i) out[i] = hk::F32ToBf16(in[i]);
    benchmark::DoNotOptimize(out.data());
  }
  st.SetItemsProcessed(st.iterations() * kN);
}
BENCHMARK(BM_F32ToBf16);

void BM_UpdateElement(benchmark::State& st) {
  hk::Mode md{};
  md.opt = static_cast<hk::Optimizer>(st.range(0));
  md.ftz = st.range(1) != 0;
  const hk::Scalars s{0x3f800000u, 0x3a83126fu, 0x3f666666u, 0x3dccccd0u, 0x3f7fbe77u,
                      0x3a83126fu, 0x322bcc77u, 0u,          0x3f7ffeb0u, 0x3f800000u};
  const hk::RuleCtl c = hk::MakeRuleCtl(md, s);
  std::vector<float> th(kN, 0.01f), m(kN, 0.001f), v(kN, 1e-5f), g(kN, 0.5f);
  for (auto _ : st) {
    for (size_t i = 0; i < kN; ++i) {
      const hk::ElemOut o = hk::UpdateElement(c, th[i], m[i], v[i], g[i]);
      th[i] = o.theta;
      m[i] = o.m;
      v[i] = o.v;
    }
    benchmark::DoNotOptimize(th.data());
  }
  st.SetItemsProcessed(st.iterations() * kN);
}
BENCHMARK(BM_UpdateElement)->ArgsProduct({{0, 1, 2, 3, 4}, {0, 1}});

}  // namespace

BENCHMARK_MAIN();
