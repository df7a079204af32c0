// `csdkit bench kernel`: host-model elements/s against the machine's memory-bandwidth bound.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <unistd.h>
#include <vector>

#include "bench.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/platform/problem.h"

namespace csdkit::bench {

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
void Parallel(unsigned threads, F&& f) {
  std::vector<std::thread> ts;
  for (unsigned t = 1; t < threads; ++t) ts.emplace_back(f, t);
  f(0u);
  for (auto& t : ts) t.join();
}

struct Config {
  Optimizer opt;
  DType grad, out;
  double topk;
};

// Bytes the kernel moves per element: state read + written, gradient read, copy written.
double BytesPerElement(const Problem& p) {
  hls::Mode md{};
  hls::DecodeMode(p.launch.mode, &md);
  double b = 8.0;  // theta read + write
  if (hls::UsesM(md)) b += 8.0;
  if (hls::UsesV(md)) b += 8.0;
  if (md.out != DType::kFp32) b += 2.0;
  if (md.sparse) {
    b += (static_cast<double>(p.nnz) * (2 + DTypeBytes(md.grad)) +
          (hls::NumBlocks(p.spec.n) + 1.0) * 4) / p.spec.n;
  } else {
    b += DTypeBytes(md.grad);
  }
  return b;
}

}  // namespace

double StreamTriad(uint64_t n, unsigned threads, unsigned reps) {
  AlignedBuffer a(n * 8), b(n * 8), c(n * 8);
  double* pa = a.as<double>();
  double* pb = b.as<double>();
  double* pc = c.as<double>();
  const uint64_t chunk = (n + threads - 1) / threads;
  Parallel(threads, [&](unsigned t) {
    const uint64_t lo = std::min(n, t * chunk), hi = std::min(n, lo + chunk);
    for (uint64_t i = lo; i < hi; ++i) {
      pa[i] = 1.0;
      pb[i] = 2.0;
      pc[i] = 0.5;
    }
  });
  double best = 1e30;
  for (unsigned r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    Parallel(threads, [&](unsigned t) {
      const uint64_t lo = std::min(n, t * chunk), hi = std::min(n, lo + chunk);
      const double s = 3.0;
      for (uint64_t i = lo; i < hi; ++i) pa[i] = pb[i] + s * pc[i];
    });
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return 24.0 * static_cast<double>(n) / best;
}

nlohmann::json KernelBench(const KernelBenchOptions& o) {
  using nlohmann::json;
  json out;
  out["benchmark"] = "kernel";
  out["backend"] = "model";
  out["n"] = o.n;
  out["reps"] = o.reps;
  out["hardware_threads"] = std::thread::hardware_concurrency();

  // The bound: STREAM triad with each array at least 4x the last-level cache (STREAM's own
  // rule; this machine reports a large shared L3), capped at 1/8 of physical memory per array.
  json triad = json::object();
  std::vector<double> triad_bw(o.max_threads + 1, 0.0);
  const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE) > 0 ? sysconf(_SC_LEVEL3_CACHE_SIZE)
                                                       : sysconf(_SC_LEVEL2_CACHE_SIZE);
  const uint64_t phys = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                        static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t triad_n = std::max<uint64_t>(
      1u << 24, std::min<uint64_t>(4ull * std::max(llc, 0L) / 8, phys / 8 / 8));
  out["llc_bytes"] = llc;
  out["stream_array_bytes"] = triad_n * 8;
  for (unsigned t = 1; t <= o.max_threads; ++t) {
    triad_bw[t] = StreamTriad(triad_n, t, o.reps + 2);
    triad[std::to_string(t)] = triad_bw[t] / 1e9;
  }
  out["stream_triad_gbs"] = triad;

  std::vector<Config> configs;
  const Optimizer opts[] = {Optimizer::kAdamW, Optimizer::kAdam, Optimizer::kSgd,
                            Optimizer::kAdagrad, Optimizer::kLion};
  if (o.quick) {
    configs.push_back({Optimizer::kAdamW, DType::kFp16, DType::kFp16, 0.0});
  } else {
    for (Optimizer op : opts) {
      configs.push_back({op, DType::kFp32, DType::kFp32, 0.0});
      configs.push_back({op, DType::kFp16, DType::kFp16, 0.0});
      configs.push_back({op, DType::kBf16, DType::kBf16, 0.0});
    }
    configs.push_back({Optimizer::kAdamW, DType::kFp16, DType::kFp16, 0.01});
  }

  json results = json::array();
  json target;
  for (const Config& cfg : configs) {
    for (unsigned t = 1; t <= o.max_threads; ++t) {
      // t independent subgroups of n / t elements, one per thread, as the runtime runs them.
      std::vector<std::unique_ptr<Problem>> ps;
      for (unsigned i = 0; i < t; ++i) {
        ProblemSpec spec;
        spec.hyper = OptimizerConfig::Defaults(cfg.opt);
        spec.grad.grad = cfg.grad;
        spec.grad.out = cfg.out;
        spec.n = o.n / t;
        spec.topk = cfg.topk;
        spec.seed = 1000 + i;
        ps.push_back(std::make_unique<Problem>(Problem::Generate(spec)));
      }
      double best = 1e30;
      for (unsigned r = 0; r < o.reps; ++r) {
        const auto t0 = Clock::now();
        Parallel(t, [&](unsigned i) { ps[i]->Run(); });
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
      }
      uint64_t elems = 0;
      for (auto& p : ps) elems += p->spec.n;
      const double eps = static_cast<double>(elems) / best;
      const double bpe = BytesPerElement(*ps[0]);
      uint64_t working_set = 0;
      for (auto& p : ps) {
        working_set += p->buf.theta.size() + p->buf.m.size() + p->buf.v.size() +
                       p->buf.grad.size() + p->buf.out16.size();
      }
      const double bw = eps * bpe;
      json r{{"optimizer", OptimizerName(cfg.opt)},
             {"grad", DTypeName(cfg.grad)},
             {"out", OutDTypeName(cfg.out)},
             {"topk", cfg.topk},
             {"threads", t},
             {"elements", elems},
             {"seconds", best},
             {"elements_per_second", eps},
             {"bytes_per_element", bpe},
             {"bandwidth_gbs", bw / 1e9},
             {"buffer_bytes", working_set},
             {"fraction_of_triad", bw / triad_bw[t]}};
      if (o.progress) {
        std::fprintf(stderr, "  %-8s %s/%s topk=%g threads=%u: %.1f M el/s, %.1f%% of triad\n",
                     OptimizerName(cfg.opt), DTypeName(cfg.grad), OutDTypeName(cfg.out), cfg.topk,
                     t, eps / 1e6, 100.0 * bw / triad_bw[t]);
      }
      if (cfg.opt == Optimizer::kAdamW && cfg.grad == DType::kFp16 && cfg.out == DType::kFp16 &&
          cfg.topk == 0.0 && t == o.max_threads) {
        target = {{"config", "adamw grad=fp16 out=fp16 dense, " + std::to_string(t) + " threads"},
                  {"fraction_of_triad", bw / triad_bw[t]},
                  {"goal", 0.5},
                  {"met", bw / triad_bw[t] >= 0.5}};
      }
      results.push_back(r);
    }
  }
  out["results"] = results;
  out["target"] = target;
  return out;
}

}  // namespace csdkit::bench
