// `csdkit bench kernel`: host-model elements/s against the machine's memory-bandwidth bound.
#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/problem.h"
#include "csdkit/platform/update_launch.h"
#include "csdkit/platform/worker_pool.h"
#include "datapath.h"

namespace csdkit::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Worker threads created once per thread count and pinned one per CPU (WorkerPool), so that a
// timed region holds no thread creation; the caller only waits.
void Parallel(unsigned threads, const std::function<void(unsigned)>& f) {
  static std::map<unsigned, std::unique_ptr<WorkerPool>> pools;
  std::unique_ptr<WorkerPool>& p = pools[threads];
  if (!p) p = std::make_unique<WorkerPool>(threads, true);
  p->Run(f);
}

// Each thread's seconds in one Parallel run, and their spread (the threads of a run wait for
// the slowest: a run's time is the largest).
struct ThreadTimes {
  std::vector<double> s;
  // Runs f on `threads` threads; returns the run's seconds.
  double Run(unsigned threads, const std::function<void(unsigned)>& f) {
    s.assign(threads, 0.0);
    const auto t0 = Clock::now();
    Parallel(threads, [&](unsigned i) {
      const auto a = Clock::now();
      f(i);
      s[i] = std::chrono::duration<double>(Clock::now() - a).count();
    });
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
  std::vector<double> Sorted() const {
    std::vector<double> v = s;
    std::sort(v.begin(), v.end());
    return v;
  }
  // The slowest thread's seconds over the median one's (the upper middle one of an even count).
  double Spread() const {
    const std::vector<double> v = Sorted();
    return v.empty() ? 1.0 : v.back() / v[v.size() / 2];
  }
  nlohmann::json Json() const {
    const std::vector<double> v = Sorted();
    if (v.empty()) return nlohmann::json::object();
    return {{"min", v.front()}, {"median", v[v.size() / 2]}, {"max", v.back()}};
  }
};

// Runs `items` pieces of work on `threads` threads and returns the run's seconds: fixed, item i
// on thread i (items == threads); dealt, each item handed to whichever thread is free next.
template <typename F>
double RunItems(ThreadTimes& tt, unsigned threads, bool dealt, size_t items, F&& f) {
  if (!dealt) return tt.Run(threads, [&](unsigned i) { f(i); });
  std::atomic<size_t> next{0};
  return tt.Run(threads, [&](unsigned) {
    for (size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < items;) f(k);
  });
}

// Elements [at, at + len) of one problem, a piece of its launch.
struct Piece {
  size_t problem;
  uint32_t at, len;
};

// Elements [at, at + len) of the dense problem's launch on the specialised datapath, as the host
// model runs a whole dense launch (csd_update's HostSpan / HostSpanQ8): the span's integrity
// lanes advanced (and dropped here), its copy streamed as the whole problem's pass is.
void RunPiece(Problem& p, uint32_t at, uint32_t len) {
  UpdateBuffers& b = p.buf;
  const uint32_t n = p.spec.n;
  hls::Mode md{};
  hls::DecodeMode(p.launch.mode, &md);
  const hls::RuleCtl ctl = hls::MakeRuleCtl(md, p.launch.scalars);
  const void* const grad = b.grad.data() + size_t{at} * DTypeBytes(md.grad);
  uint16_t* const out = md.out != DType::kFp32 ? b.out16.as<uint16_t>() + at : nullptr;
  if (hls::IsQ8(md.state)) {
    const bool bf16 = md.state == hls::StateFmt::kQ8Bf16;
    hls::host::Q8Span s;
    s.theta = bf16 ? static_cast<void*>(b.theta.as<uint16_t>() + at)
                   : static_cast<void*>(b.theta.as<uint32_t>() + at);
    if (hls::UsesM(md)) {
      s.m = b.m.data() + at;
      s.m_absmax = b.m_absmax.as<uint32_t>() + at / hls::kQ8Block;
    }
    if (hls::UsesV(md)) {
      s.v = b.v.data() + at;
      s.v_absmax = b.v_absmax.as<uint32_t>() + at / hls::kQ8Block;
    }
    s.grad = grad;
    s.grad_type = md.grad;
    s.out = out;
    s.len = len;
    s.stream_len = n;
    s.seed = p.spec.seed;  // the launch's random key (Problem::Generate: SetRandomKey)
    s.step = static_cast<uint64_t>(p.spec.step);
    s.index = p.spec.index + at;
    hls::host::Q8Integrity ig{};
    ig.first = 0xffffffffu;
    ig.origin = at;
    hls::host::UpdateQ8(md, ctl, s, &ig);
  } else {
    hls::host::SpanIntegrity ig{};
    ig.first = 0xffffffffu;
    ig.origin = at;
    hls::host::Span s;
    s.theta = b.theta.as<uint32_t>() + at;
    s.m = hls::UsesM(md) ? b.m.as<uint32_t>() + at : nullptr;
    s.v = hls::UsesV(md) ? b.v.as<uint32_t>() + at : nullptr;
    s.grad = grad;
    s.grad_type = md.grad;
    s.out = out;
    s.len = len;
    s.stream_len = n;
    s.integrity = &ig;
    hls::host::Update(md, ctl, s);
  }
}

struct Config {
  Optimizer opt;
  DType grad, out;
  double topk;
};

// Bytes the kernel moves per element: state read + written, gradient read, copy written. In
// the q8 formats a moment is 1 byte of code per element and 4 bytes of absmax per block, theta
// 2 bytes in q8-bf16.
double BytesPerElement(const Problem& p) {
  hls::Mode md{};
  hls::DecodeMode(p.launch.mode, &md);
  const double moment = hls::IsQ8(md.state) ? 2.0 + 8.0 / hls::kQ8Block : 8.0;
  double b = md.state == hls::StateFmt::kQ8Bf16 ? 4.0 : 8.0;  // theta read + write
  if (hls::UsesM(md)) b += moment;
  if (hls::UsesV(md)) b += moment;
  if (md.out != DType::kFp32) b += 2.0;
  if (md.sparse) {
    b += (static_cast<double>(p.nnz) * (2 + DTypeBytes(md.grad)) +
          (hls::NumBlocks(p.spec.n) + 1.0) * 4) / p.spec.n;
  } else {
    b += DTypeBytes(md.grad);
  }
  return b;
}

// PyTorch's CPU AdamW on n fp32 elements with `threads` threads (bench/torch_adamw.py under
// `python`, by default Debian's /usr/bin/python3 with python3-torch); {"error": ...} when it
// cannot run.
nlohmann::json TorchAdamW(const std::string& python, uint64_t n, unsigned threads, unsigned reps) {
  const std::string cmd = "'" + python + "' '" + CSDKIT_BENCH_DIR +
                          "/torch_adamw.py' --n " + std::to_string(n) + " --threads " +
                          std::to_string(threads) + " --reps " + std::to_string(reps) +
                          " 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return {{"error", "cannot start " + python}};
  std::string text;
  char buf[4096];
  for (size_t k; (k = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, k);
  const int rc = ::pclose(f);
  try {
    if (rc == 0) return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
  }
  return {{"error", "bench/torch_adamw.py exited with status " + std::to_string(rc) + ": " +
                        text.substr(0, 400)}};
}

// The memory bound of one dense configuration's own access pattern: the same arrays streamed
// the same way as the kernel streams them (theta, m and v read and written in place, the
// gradient read, the copy written with streaming stores where the kernel streams it, every line
// read prefetched in software 512 elements ahead as the kernel does), with no arithmetic beyond
// what keeps every load live. The state is stored back unchanged and the copy is overwritten by
// every update anyway, so the problem's data is left as it was.
//
// How fast a loop moves those bytes depends on its shape as well as on the memory, and not the
// same way on every processor: on one AVX-512 Xeon the interleaved shape below (each stream
// stored right after it is loaded) ran at half the speed of the blocked one on huge pages and
// was the faster of the two on 4 KiB pages; on another the two were within 5% either way. So
// the bound is the fastest of three shapes, each timed in every round: interleaved with 256-bit
// vectors, blocked (a block's loads, then its stores) with 256-bit vectors, and blocked with
// 512-bit vectors where the processor has AVX-512. It is measured, not derived: an update that
// finds a faster way shows a fraction above 1.
struct PatternArgs {
  uint32_t* th;
  uint32_t* mm;  // null when the optimizer keeps no m
  uint32_t* vv;  // null when it keeps no v
  const uint8_t* g;
  uint16_t* o;
  uint32_t n;
  DType grad, out;
  bool stream;  // the copy with streaming stores, as the kernel writes it on long passes
};

PatternArgs MakePatternArgs(UpdateBuffers& b, uint32_t n, bool m_used, bool v_used, DType grad,
                            DType out) {
  return {b.theta.as<uint32_t>(), m_used ? b.m.as<uint32_t>() : nullptr,
          v_used ? b.v.as<uint32_t>() : nullptr, b.grad.data(), b.out16.as<uint16_t>(), n,
          grad, out, n >= hls::host::kStreamCopyMin};
}

__attribute__((always_inline)) inline void PrefetchAt(const void* base, size_t off) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(base) + off),
               _MM_HINT_T0);
}

// Every line of elements [i, i + elems) of each stream read, 512 elements ahead as the kernel
// prefetches (inlined and unrolled into each shape's loop: as a call, or with a run-time
// count, it measurably slowed the blocked shapes).
template <uint32_t kElems>
__attribute__((always_inline)) inline void PrefetchAhead(const PatternArgs& a, uint32_t i) {
  const size_t gbytes = a.grad == DType::kFp32 ? 4 : 2;
  const size_t at = size_t{i} + 512;
  _Pragma("GCC unroll 8") for (size_t l = 0; l < size_t{kElems} * 4; l += 64) {
    PrefetchAt(a.th, at * 4 + l);
    if (a.mm != nullptr) PrefetchAt(a.mm, at * 4 + l);
    if (a.vv != nullptr) PrefetchAt(a.vv, at * 4 + l);
    if (l < kElems * gbytes) PrefetchAt(a.g, at * gbytes + l);
  }
}

// The last n % block elements, one by one.
void PatternTail(const PatternArgs& a, uint32_t i) {
  for (; i < a.n; ++i) {
    volatile uint32_t* const t = a.th + i;
    *t = *t;
    if (a.mm != nullptr) *(static_cast<volatile uint32_t*>(a.mm + i)) = a.mm[i];
    if (a.vv != nullptr) *(static_cast<volatile uint32_t*>(a.vv + i)) = a.vv[i];
    if (a.out != DType::kFp32) a.o[i] = static_cast<uint16_t>(a.th[i] >> 16);
  }
  if (a.stream) _mm_sfence();
}

// 256-bit helpers: 8 gradient values widened, 8 copy values narrowed.
__attribute__((target("avx2,f16c"))) inline __m256 Grad8(const PatternArgs& a, uint32_t i) {
  if (a.grad == DType::kFp32) return _mm256_loadu_ps(reinterpret_cast<const float*>(a.g) + i);
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.g + 2 * size_t{i}));
  return a.grad == DType::kFp16
             ? _mm256_cvtph_ps(h)
             : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

__attribute__((target("avx2,f16c"))) inline void Copy8(const PatternArgs& a, uint32_t i,
                                                        __m256 x) {
  if (a.out == DType::kFp32) {
    asm volatile("" : : "x"(x));  // the gradient's load stays live with no copy to write
    return;
  }
  __m128i h;
  if (a.out == DType::kFp16) {
    h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
  } else {
    const __m256i hi = _mm256_srli_epi32(_mm256_castps_si256(x), 16);
    h = _mm_packus_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
  }
  __m128i* const q = reinterpret_cast<__m128i*>(a.o + i);
  if (a.stream) {
    _mm_stream_si128(q, h);
  } else {
    _mm_storeu_si128(q, h);
  }
}

// Interleaved, 256-bit: each stream's 8 values stored right after they are loaded. Each value
// stored back goes through an empty asm: the compiler would otherwise see a store of what was
// just loaded and drop both, and the pass would move no state at all.
__attribute__((target("avx2,f16c"))) void PatternInterleaved(const PatternArgs& a) {
  uint32_t i = 0;
  for (; i + 8 <= a.n; i += 8) {
    if (i % 16 == 0) PrefetchAhead<16>(a, i);  // one line of each binary32 stream
    const __m256 gv = Grad8(a, i);
    __m256 t = _mm256_loadu_ps(reinterpret_cast<const float*>(a.th + i));
    asm("" : "+x"(t));
    _mm256_storeu_ps(reinterpret_cast<float*>(a.th + i), t);
    if (a.mm != nullptr) {
      __m256i* const p = reinterpret_cast<__m256i*>(a.mm + i);
      __m256i x = _mm256_loadu_si256(p);
      asm("" : "+x"(x));
      _mm256_storeu_si256(p, x);
    }
    if (a.vv != nullptr) {
      __m256i* const p = reinterpret_cast<__m256i*>(a.vv + i);
      __m256i x = _mm256_loadu_si256(p);
      asm("" : "+x"(x));
      _mm256_storeu_si256(p, x);
    }
    Copy8(a, i, _mm256_add_ps(t, gv));
  }
  PatternTail(a, i);
}

// Blocked, 256-bit: 32 elements per block, all of a block's loads, then all of its stores.
__attribute__((target("avx2,f16c"))) void PatternBlocked256(const PatternArgs& a) {
  uint32_t i = 0;
  for (; i + 32 <= a.n; i += 32) {
    PrefetchAhead<32>(a, i);
    __m256 gv[4], t[4];
    __m256i x[4] = {}, y[4] = {};
    for (uint32_t u = 0; u < 4; ++u) {
      gv[u] = Grad8(a, i + 8 * u);
      t[u] = _mm256_loadu_ps(reinterpret_cast<const float*>(a.th + i + 8 * u));
      if (a.mm != nullptr) x[u] = _mm256_loadu_si256(reinterpret_cast<__m256i*>(a.mm + i + 8 * u));
      if (a.vv != nullptr) y[u] = _mm256_loadu_si256(reinterpret_cast<__m256i*>(a.vv + i + 8 * u));
    }
    for (uint32_t u = 0; u < 4; ++u) asm("" : "+x"(t[u]), "+x"(x[u]), "+x"(y[u]));
    for (uint32_t u = 0; u < 4; ++u) {
      _mm256_storeu_ps(reinterpret_cast<float*>(a.th + i + 8 * u), t[u]);
      if (a.mm != nullptr) _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.mm + i + 8 * u), x[u]);
      if (a.vv != nullptr) _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.vv + i + 8 * u), y[u]);
      Copy8(a, i + 8 * u, _mm256_add_ps(t[u], gv[u]));
    }
  }
  PatternTail(a, i);
}

// Blocked, 512-bit (AVX-512 F/BW): 64 elements per block, as the kernel's AVX-512 loops. (The
// zero-masking forms with every lane selected compile to the plain instructions; with the plain
// intrinsics g++ 12 warns, wrongly, that their undefined pass-through operand may be used
// uninitialised.)
constexpr __mmask16 kAll16 = 0xffff;
__attribute__((target("avx512f,avx512bw"))) void PatternBlocked512(const PatternArgs& a) {
  uint32_t i = 0;
  for (; i + 64 <= a.n; i += 64) {
    PrefetchAhead<64>(a, i);
    __m512 gv[4], t[4];
    __m512i x[4] = {}, y[4] = {};
    for (uint32_t u = 0; u < 4; ++u) {
      const uint32_t k = i + 16 * u;
      if (a.grad == DType::kFp32) {
        gv[u] = _mm512_loadu_ps(reinterpret_cast<const float*>(a.g) + k);
      } else {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.g + 2 * size_t{k}));
        gv[u] = a.grad == DType::kFp16
                    ? _mm512_maskz_cvtph_ps(kAll16, h)
                    : _mm512_castsi512_ps(_mm512_maskz_slli_epi32(
                          kAll16, _mm512_maskz_cvtepu16_epi32(kAll16, h), 16));
      }
      t[u] = _mm512_loadu_ps(a.th + k);
      if (a.mm != nullptr) x[u] = _mm512_loadu_si512(a.mm + k);
      if (a.vv != nullptr) y[u] = _mm512_loadu_si512(a.vv + k);
    }
    for (uint32_t u = 0; u < 4; ++u) asm("" : "+v"(t[u]), "+v"(x[u]), "+v"(y[u]));
    for (uint32_t u = 0; u < 4; ++u) {
      const uint32_t k = i + 16 * u;
      _mm512_storeu_ps(a.th + k, t[u]);
      if (a.mm != nullptr) _mm512_storeu_si512(a.mm + k, x[u]);
      if (a.vv != nullptr) _mm512_storeu_si512(a.vv + k, y[u]);
      const __m512 s = _mm512_add_ps(t[u], gv[u]);
      if (a.out == DType::kFp32) {
        asm volatile("" : : "v"(s));
        continue;
      }
      const __m256i h =
          a.out == DType::kFp16
              ? _mm512_maskz_cvtps_ph(kAll16, s, _MM_FROUND_TO_NEAREST_INT)
              : _mm512_maskz_cvtepi32_epi16(
                    kAll16, _mm512_maskz_srli_epi32(kAll16, _mm512_castps_si512(s), 16));
      __m256i* const q = reinterpret_cast<__m256i*>(a.o + k);
      if (a.stream) {
        _mm256_stream_si256(q, h);
      } else {
        _mm256_storeu_si256(q, h);
      }
    }
  }
  PatternTail(a, i);
}

// The q8 formats' pattern bound: the same idea as PatternArgs' shapes over the bytes a q8 launch
// moves: theta (binary32 or bf16 halves) and each moment's codes (1 byte per element) read and
// stored back in place, each moment's absmax (4 bytes per block of 256) likewise once per block,
// the gradient read, the copy written (streaming stores where the kernel streams it), every
// line read prefetched 512 elements ahead. Blocked: a block's loads, then its stores, 32
// elements per block with 256-bit vectors and 64 with 512-bit ones (AVX-512 F/BW).
struct Q8PatternArgs {
  uint8_t* th;
  uint8_t* mc;   // m's codes; null when the optimizer keeps no m
  uint8_t* vc;   // v's codes; null when it keeps no v
  uint32_t* ma;  // m's absmax values (when mc)
  uint32_t* va;  // v's (when vc)
  const uint8_t* g;
  uint16_t* o;  // the copy; null when there is none
  uint32_t n;   // a multiple of 256
  bool stream;
};

// The block's lines of each stream, 512 elements ahead (kTb, kGb: bytes per element of theta
// and of the gradient).
template <uint32_t kElems, unsigned kTb, unsigned kGb>
__attribute__((always_inline)) inline void PrefetchQ8(const Q8PatternArgs& a, uint32_t i) {
  const size_t at = size_t{i} + 512;
  _Pragma("GCC unroll 8") for (size_t l = 0; l < size_t{kElems} * 4; l += 64) {
    if (l < kElems * kTb) PrefetchAt(a.th, at * kTb + l);
    if (l < kElems * kGb) PrefetchAt(a.g, at * kGb + l);
    if (l < kElems && a.mc != nullptr) PrefetchAt(a.mc, at + l);
    if (l < kElems && a.vc != nullptr) PrefetchAt(a.vc, at + l);
  }
}

// One block's absmax values loaded and stored back, at the start of each q8 block.
__attribute__((always_inline)) inline void AbsmaxQ8(const Q8PatternArgs& a, uint32_t i) {
  if (i % hls::kQ8Block != 0u) return;
  const uint32_t b = i / hls::kQ8Block;
  if (a.mc != nullptr) *static_cast<volatile uint32_t*>(a.ma + b) = a.ma[b];
  if (a.vc != nullptr) *static_cast<volatile uint32_t*>(a.va + b) = a.va[b];
}

template <unsigned kTb, unsigned kGb, bool kCopy>
__attribute__((target("avx2,f16c"))) void PatternQ8Blocked256(const Q8PatternArgs& a) {
  constexpr unsigned kT = kTb, kG = kGb;  // 256-bit vectors of theta and gradient per block
  for (uint32_t i = 0; i < a.n; i += 32) {
    if (i % 64 == 0) PrefetchQ8<64, kTb, kGb>(a, i);
    __m256i t[kT], g[kG], x = {}, y = {};
    for (unsigned u = 0; u < kT; ++u) {
      t[u] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.th + size_t{i} * kTb) + u);
    }
    for (unsigned u = 0; u < kG; ++u) {
      g[u] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.g + size_t{i} * kGb) + u);
    }
    if (a.mc != nullptr) x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.mc + i));
    if (a.vc != nullptr) y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.vc + i));
    for (unsigned u = 0; u < kT; ++u) asm("" : "+x"(t[u]));
    asm("" : "+x"(x), "+x"(y));
    for (unsigned u = 0; u < kG; ++u) asm volatile("" : : "x"(g[u]));
    for (unsigned u = 0; u < kT; ++u) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.th + size_t{i} * kTb) + u, t[u]);
    }
    if (a.mc != nullptr) _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.mc + i), x);
    if (a.vc != nullptr) _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.vc + i), y);
    AbsmaxQ8(a, i);
    if constexpr (kCopy) {
      __m256i h[2];
      if constexpr (kTb == 2) {
        h[0] = t[0];
        h[1] = t[1];
      } else {
        for (unsigned u = 0; u < 2; ++u) {
          h[u] = _mm256_permute4x64_epi64(
              _mm256_packus_epi32(_mm256_srli_epi32(t[2 * u], 16),
                                  _mm256_srli_epi32(t[2 * u + 1], 16)),
              0xd8);
        }
      }
      __m256i* const q = reinterpret_cast<__m256i*>(a.o + i);
      for (unsigned u = 0; u < 2; ++u) {
        if (a.stream) {
          _mm256_stream_si256(q + u, h[u]);
        } else {
          _mm256_storeu_si256(q + u, h[u]);
        }
      }
    }
  }
  if (a.stream) _mm_sfence();
}

template <unsigned kTb, unsigned kGb, bool kCopy>
__attribute__((target("avx512f,avx512bw"))) void PatternQ8Blocked512(const Q8PatternArgs& a) {
  constexpr unsigned kT = kTb, kG = kGb;  // 512-bit vectors of theta and gradient per block
  for (uint32_t i = 0; i < a.n; i += 64) {
    PrefetchQ8<64, kTb, kGb>(a, i);
    __m512i t[kT], g[kG], x = _mm512_setzero_si512(), y = _mm512_setzero_si512();
    for (unsigned u = 0; u < kT; ++u) t[u] = _mm512_loadu_si512(a.th + size_t{i} * kTb + 64 * u);
    for (unsigned u = 0; u < kG; ++u) g[u] = _mm512_loadu_si512(a.g + size_t{i} * kGb + 64 * u);
    if (a.mc != nullptr) x = _mm512_loadu_si512(a.mc + i);
    if (a.vc != nullptr) y = _mm512_loadu_si512(a.vc + i);
    for (unsigned u = 0; u < kT; ++u) asm("" : "+v"(t[u]));
    asm("" : "+v"(x), "+v"(y));
    for (unsigned u = 0; u < kG; ++u) asm volatile("" : : "v"(g[u]));
    for (unsigned u = 0; u < kT; ++u) _mm512_storeu_si512(a.th + size_t{i} * kTb + 64 * u, t[u]);
    if (a.mc != nullptr) _mm512_storeu_si512(a.mc + i, x);
    if (a.vc != nullptr) _mm512_storeu_si512(a.vc + i, y);
    AbsmaxQ8(a, i);
    if constexpr (kCopy) {
      if constexpr (kTb == 2) {
        for (unsigned u = 0; u < 2; ++u) {
          if (a.stream) {
            _mm512_stream_si512(reinterpret_cast<__m512i*>(a.o + i) + u, t[u]);
          } else {
            _mm512_storeu_si512(a.o + i + 32 * u, t[u]);
          }
        }
      } else {
        for (unsigned u = 0; u < 4; ++u) {
          const __m256i h = _mm512_maskz_cvtepi32_epi16(
              kAll16, _mm512_maskz_srli_epi32(kAll16, t[u], 16));
          __m256i* const q = reinterpret_cast<__m256i*>(a.o + i + 16 * u);
          if (a.stream) {
            _mm256_stream_si256(q, h);
          } else {
            _mm256_storeu_si256(q, h);
          }
        }
      }
    }
  }
  if (a.stream) _mm_sfence();
}

using Q8Pass = void (*)(const Q8PatternArgs&);

template <bool k512, unsigned kTb, unsigned kGb>
Q8Pass PickQ8Copy(bool copy) {
  if (k512) {
    return copy ? &PatternQ8Blocked512<kTb, kGb, true> : &PatternQ8Blocked512<kTb, kGb, false>;
  }
  return copy ? &PatternQ8Blocked256<kTb, kGb, true> : &PatternQ8Blocked256<kTb, kGb, false>;
}

template <bool k512>
Q8Pass PickQ8(unsigned tb, unsigned gb, bool copy) {
  if (tb == 4) return gb == 4 ? PickQ8Copy<k512, 4, 4>(copy) : PickQ8Copy<k512, 4, 2>(copy);
  return gb == 4 ? PickQ8Copy<k512, 2, 4>(copy) : PickQ8Copy<k512, 2, 2>(copy);
}

// The problem's buffers moved to memory of the given page kind (same bytes).
void Repage(UpdateBuffers& b, AlignedBuffer::Pages pages) {
  b.ForEachBuffer([pages](const hls::ArgInfo&, AlignedBuffer& a) {
    if (a.size() == 0) return;
    AlignedBuffer c(a.size(), pages);
    std::memcpy(c.data(), a.data(), a.size());
    a = std::move(c);
  });
}

}  // namespace

double StreamTriad(uint64_t n, unsigned threads, unsigned reps, AlignedBuffer::Pages pages) {
  AlignedBuffer a(n * 8, pages), b(n * 8, pages), c(n * 8, pages);
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

double StreamTriadNt(uint64_t n, unsigned threads, unsigned reps, AlignedBuffer::Pages pages) {
  AlignedBuffer a(n * 8, pages), b(n * 8, pages), c(n * 8, pages);
  double* pa = a.as<double>();
  const double* pb = b.as<double>();
  const double* pc = c.as<double>();
  const uint64_t chunk = (n + threads - 1) / threads / 4 * 4;
  Parallel(threads, [&](unsigned t) {
    const uint64_t lo = std::min(n, t * chunk), hi = t + 1 == threads ? n : std::min(n, lo + chunk);
    std::fill(pa + lo, pa + hi, 1.0);
    std::fill(b.as<double>() + lo, b.as<double>() + hi, 2.0);
    std::fill(c.as<double>() + lo, c.as<double>() + hi, 0.5);
  });
  double best = 1e30;
  for (unsigned r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    Parallel(threads, [&](unsigned t) {
      const uint64_t lo = std::min(n, t * chunk), hi = t + 1 == threads ? n : std::min(n, lo + chunk);
      const __m256d s = _mm256_set1_pd(3.0);
      uint64_t i = lo;
      for (; i + 4 <= hi; i += 4) {
        const __m256d x = _mm256_add_pd(_mm256_load_pd(pb + i), _mm256_mul_pd(s, _mm256_load_pd(pc + i)));
        _mm256_stream_pd(pa + i, x);
      }
      for (; i < hi; ++i) pa[i] = pb[i] + 3.0 * pc[i];
    });
    _mm_sfence();
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
  out["pages"] = o.pages == AlignedBuffer::Pages::kHuge ? "thp" : "4k";
  out["splits"] = o.splits;
  out["piece_elements"] = o.piece;

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
  // The bound is the better of the triad with ordinary stores (each store line is read first:
  // 32 bytes move per 24 counted) and with non-temporal stores (24 bytes move).
  json triad_nt = json::object();
  for (unsigned t = o.min_threads; t <= o.max_threads; ++t) {
    const double plain = StreamTriad(triad_n, t, o.reps + 2, o.pages);
    const double nt = StreamTriadNt(triad_n, t, o.reps + 2, o.pages);
    triad[std::to_string(t)] = plain / 1e9;
    triad_nt[std::to_string(t)] = nt / 1e9;
    triad_bw[t] = std::max(plain, nt);
  }
  out["stream_triad_gbs"] = triad;
  out["stream_triad_nt_gbs"] = triad_nt;

  std::vector<Config> configs;
  const Optimizer opts[] = {Optimizer::kAdamW, Optimizer::kAdam, Optimizer::kSgd,
                            Optimizer::kAdagrad, Optimizer::kLion};
  if (o.quick) {
    configs.push_back({Optimizer::kAdamW, DType::kFp16, DType::kFp16, 0.0});
  } else {
    for (Optimizer op : opts) {
      if (!o.optimizer.empty() && ParseOptimizer(o.optimizer) != op) continue;
      configs.push_back({op, DType::kFp32, DType::kFp32, 0.0});
      configs.push_back({op, DType::kFp16, DType::kFp16, 0.0});
      configs.push_back({op, DType::kBf16, DType::kBf16, 0.0});
    }
    if (o.optimizer.empty() || ParseOptimizer(o.optimizer) == Optimizer::kAdamW) {
      // fp32 gradients with an fp16 copy (30 bytes per element): the same bytes as a CPU Adam
      // that keeps fp32 parameters and writes a half-precision copy for the GPU.
      configs.push_back({Optimizer::kAdamW, DType::kFp32, DType::kFp16, 0.0});
      configs.push_back({Optimizer::kAdamW, DType::kFp16, DType::kFp16, 0.01});
    }
  }

  json results = json::array();
  json target;
  for (const std::string& state_name : o.states) {
    const hls::StateFmt state = ParseStateFmt(state_name);
    const bool q8 = hls::IsQ8(state);
    for (Config cfg : configs) {
      // q8-bf16 keeps no fp16 copy of its bf16 weights: the configuration's copy is bf16.
      if (state == hls::StateFmt::kQ8Bf16 && cfg.out == DType::kFp16) cfg.out = DType::kBf16;
      for (unsigned t = o.min_threads; t <= o.max_threads; ++t) {
        // t independent subgroups of n / t elements, one per thread, as the runtime runs them
        // (q8: whole blocks).
        std::vector<std::unique_ptr<Problem>> ps;
        for (unsigned i = 0; i < t; ++i) {
          ProblemSpec spec;
          spec.hyper = OptimizerConfig::Defaults(cfg.opt);
          spec.grad.grad = cfg.grad;
          spec.grad.out = cfg.out;
          spec.grad.state = state;
          spec.n = q8 ? o.n / t / hls::kQ8Block * hls::kQ8Block : o.n / t;
          spec.topk = cfg.topk;
          spec.seed = 1000 + i;
          ps.push_back(std::make_unique<Problem>(Problem::Generate(spec)));
          if (o.pages != AlignedBuffer::Pages::kHuge) Repage(ps.back()->buf, o.pages);
        }
        for (auto& p : ps) p->buf.SetScalars(p->spec.n, p->nnz, p->launch);
        // Each split of the work between the threads: fixed, problem i on thread i (as the
        // runtime's baseline deals its subgroups), and pieces, the dense problems cut into pieces
        // of o.piece elements handed to whichever thread is free (the datapath itself, its spans
        // run as the kernel runs a launch: RunPiece).
        hls::Mode md{};
        hls::DecodeMode(ps[0]->launch.mode, &md);
        std::vector<Piece> pieces;
        for (size_t i = 0; i < ps.size(); ++i) {
          for (uint32_t at = 0; at < ps[i]->spec.n; at += o.piece) {
            pieces.push_back({i, at, std::min(o.piece, ps[i]->spec.n - at)});
          }
        }
        for (const std::string& split : o.splits) {
          const bool dealt = split == "pieces";
          if (dealt && md.sparse) continue;  // (a sparse launch's tiles follow its entries)
          const size_t items = dealt ? pieces.size() : ps.size();
          // The datapaths side by side, interleaved rep by rep so that the machine's noise falls
          // on each alike: the specialised one on each instruction set, and the general one (the
          // HLS/RTL/OpenCL datapath; fixed split only). The headline figure is the specialised
          // datapath as csd_update runs it (the widest instruction set).
          struct Path {
            std::string name;
            HostDatapath dp;
            hls::host::Isa isa;
            double best = 1e30;
            ThreadTimes best_threads = {};  // of the best run
          };
          std::vector<Path> paths;
          if (hls::host::HasAvx512()) {
            paths.push_back(
                {"specialised_avx512", HostDatapath::kSpecialised, hls::host::Isa::kAvx512});
          }
          paths.push_back({"specialised_avx2", HostDatapath::kSpecialised, hls::host::Isa::kAvx2});
          if (o.general && !dealt) {
            paths.push_back({"general", HostDatapath::kGeneral, hls::host::Isa::kAvx2});
          }
          // The configuration's pattern bound (PatternPass), dense configurations only, timed in
          // the same rounds and split the same way.
          const bool bound = !md.sparse;
          struct Shape {
            const char* name;
            void (*pass)(const PatternArgs&);
          };
          std::vector<Shape> shapes = {{"interleaved_256", &PatternInterleaved},
                                       {"blocked_256", &PatternBlocked256}};
          if (hls::host::HasAvx512()) shapes.push_back({"blocked_512", &PatternBlocked512});
          std::vector<PatternArgs> pargs;
          for (auto& p : ps) {
            pargs.push_back(MakePatternArgs(p->buf, p->spec.n, hls::UsesM(md), hls::UsesV(md),
                                            md.grad, md.out));
          }
          if (dealt) {  // each piece's part of its problem's arrays, streamed as the problem is
            std::vector<PatternArgs> whole = std::move(pargs);
            pargs.clear();
            const size_t gb = DTypeBytes(md.grad);
            for (const Piece& pc : pieces) {
              PatternArgs a = whole[pc.problem];
              a.th += pc.at;
              if (a.mm != nullptr) a.mm += pc.at;
              if (a.vv != nullptr) a.vv += pc.at;
              a.g += pc.at * gb;
              a.o += pc.at;
              a.n = pc.len;
              pargs.push_back(a);
            }
          }
          // The q8 formats: their own pattern (Q8PatternArgs) in place of the fp32 shapes.
          std::vector<Q8PatternArgs> qargs;
          std::vector<std::pair<const char*, Q8Pass>> qshapes;
          if (q8) {
            shapes.clear();
            const unsigned tb = state == hls::StateFmt::kQ8Bf16 ? 2 : 4;
            const unsigned gb = md.grad == DType::kFp32 ? 4 : 2;
            const bool copy = md.out != DType::kFp32;
            qshapes.emplace_back("q8_blocked_256", PickQ8<false>(tb, gb, copy));
            if (hls::host::HasAvx512()) {
              qshapes.emplace_back("q8_blocked_512", PickQ8<true>(tb, gb, copy));
            }
            for (auto& p : ps) {
              const bool um = hls::UsesM(md), uv = hls::UsesV(md);
              qargs.push_back({p->buf.theta.data(), um ? p->buf.m.data() : nullptr,
                               uv ? p->buf.v.data() : nullptr, p->buf.m_absmax.as<uint32_t>(),
                               p->buf.v_absmax.as<uint32_t>(), p->buf.grad.data(),
                               copy ? p->buf.out16.as<uint16_t>() : nullptr, p->spec.n,
                               p->spec.n >= hls::host::kStreamCopyMin});
            }
            if (dealt) {
              std::vector<Q8PatternArgs> whole = std::move(qargs);
              qargs.clear();
              for (const Piece& pc : pieces) {
                Q8PatternArgs a = whole[pc.problem];
                a.th += size_t{pc.at} * tb;
                if (a.mc != nullptr) a.mc += pc.at;
                if (a.vc != nullptr) a.vc += pc.at;
                a.ma += pc.at / hls::kQ8Block;
                a.va += pc.at / hls::kQ8Block;
                a.g += size_t{pc.at} * gb;
                if (a.o != nullptr) a.o += pc.at;
                a.n = pc.len;
                qargs.push_back(a);
              }
            }
          }
          double bound_best = 1e30;
          const char* bound_shape = "";
          ThreadTimes bound_threads;
          for (unsigned r = 0; r < o.reps; ++r) {
            for (Path& path : paths) {
              hls::host::SetIsa(path.isa);
              ThreadTimes tt;
              const double sec = RunItems(tt, t, dealt, items, [&](size_t i) {
                if (!dealt) {
                  InvokeUpdate(WordsOf(ps[i]->buf), path.dp);
                } else {
                  RunPiece(*ps[pieces[i].problem], pieces[i].at, pieces[i].len);
                }
              });
              if (sec < path.best) {
                path.best = sec;
                path.best_threads = std::move(tt);
              }
            }
            for (const Shape& sh : shapes) {
              if (!bound) break;
              ThreadTimes tt;
              const double sec =
                  RunItems(tt, t, dealt, items, [&](size_t i) { sh.pass(pargs[i]); });
              if (sec < bound_best) {
                bound_best = sec;
                bound_shape = sh.name;
                bound_threads = std::move(tt);
              }
            }
            for (const auto& [name, pass] : qshapes) {
              if (!bound) break;
              ThreadTimes tt;
              const double sec =
                  RunItems(tt, t, dealt, items, [&](size_t i) { pass(qargs[i]); });
              if (sec < bound_best) {
                bound_best = sec;
                bound_shape = name;
                bound_threads = std::move(tt);
              }
            }
          }
          hls::host::SetIsa(hls::host::HasAvx512() ? hls::host::Isa::kAvx512
                                                    : hls::host::Isa::kAvx2);
          const double best = paths[0].best;
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
          json r{{"state", state_name},
                 {"optimizer", OptimizerName(cfg.opt)},
                 {"grad", DTypeName(cfg.grad)},
                 {"out", OutDTypeName(cfg.out)},
                 {"topk", cfg.topk},
                 {"threads", t},
                 {"split", split},
                 {"elements", elems},
                 {"seconds", best},
                 {"elements_per_second", eps},
                 {"bytes_per_element", bpe},
                 {"bandwidth_gbs", bw / 1e9},
                 {"buffer_bytes", working_set},
                 {"fraction_of_triad", bw / triad_bw[t]},
                 {"thread_seconds", paths[0].best_threads.Json()}};
          json dps = json::object();
          for (const Path& path : paths) {
            dps[path.name] = {{"seconds", path.best},
                              {"thread_seconds", path.best_threads.Json()},
                              {"elements_per_second", static_cast<double>(elems) / path.best},
                              {"relative_to_headline", best / path.best}};
          }
          if (bound) {
            r["pattern_bound"] = {{"seconds", bound_best},
                                  {"shape", bound_shape},
                                  {"elements_per_second", static_cast<double>(elems) / bound_best},
                                  {"thread_seconds", bound_threads.Json()},
                                  {"bandwidth_gbs",
                                   static_cast<double>(elems) * bpe / bound_best / 1e9}};
            r["fraction_of_pattern_bound"] = bound_best / best;
          }
          if (dealt) {
            r["piece_elements"] = o.piece;
            r["pieces"] = pieces.size();
          }
          r["datapath"] = paths[0].name;
          r["datapaths"] = dps;
          if (o.torch && !dealt && !q8 && cfg.opt == Optimizer::kAdamW &&
              cfg.grad == DType::kFp32 && cfg.out == DType::kFp32 && cfg.topk == 0.0) {
            // The same update by PyTorch (fp32 parameter, gradient and moments), same n and
            // threads.
            json tj = TorchAdamW(o.python, elems, t, o.reps);
            if (tj.contains("results")) {
              for (json& x : tj["results"]) {
                x["csdkit_relative"] = eps / x["elements_per_second"].get<double>();
              }
            }
            r["torch_adamw"] = tj;
            if (o.progress && tj.contains("results")) {
              for (const json& x : tj["results"]) {
                std::fprintf(stderr, "    torch %s AdamW %u threads: %.1f M el/s (csdkit %.2fx)\n",
                             x["implementation"].get<std::string>().c_str(), t,
                             x["elements_per_second"].get<double>() / 1e6,
                             x["csdkit_relative"].get<double>());
              }
            }
          }
          if (o.progress) {
            std::string others;
            for (size_t i = 1; i < paths.size(); ++i) {
              char b[96];
              std::snprintf(b, sizeof b, ", %s %.1f", paths[i].name.c_str(),
                            static_cast<double>(elems) / paths[i].best / 1e6);
              others += b;
            }
            char pb[160] = "";
            if (bound) {
              std::snprintf(pb, sizeof pb, ", %.1f%% of its pattern bound",
                            100.0 * bound_best / best);
            }
            if (t > 1 && bound) {
              const size_t at = std::strlen(pb);
              std::snprintf(pb + at, sizeof pb - at, " (threads' max / median %.2f, bound's %.2f)",
                            paths[0].best_threads.Spread(), bound_threads.Spread());
            }
            std::fprintf(stderr,
                         "  %-7s %-8s %s/%s topk=%g threads=%u %s: %.1f M el/s (%s), %.1f%% "
                         "of triad%s%s\n",
                         state_name.c_str(), OptimizerName(cfg.opt), DTypeName(cfg.grad),
                         OutDTypeName(cfg.out), cfg.topk, t, split.c_str(), eps / 1e6,
                         paths[0].name.c_str(), 100.0 * bw / triad_bw[t], pb, others.c_str());
          }
          if (!dealt && !q8 && cfg.opt == Optimizer::kAdamW && cfg.grad == DType::kFp16 &&
              cfg.out == DType::kFp16 && cfg.topk == 0.0 && t == o.max_threads) {
            target = {{"config",
                       "adamw grad=fp16 out=fp16 dense, " + std::to_string(t) + " threads"},
                      {"fraction_of_triad", bw / triad_bw[t]},
                      {"goal", 0.8},
                      {"met", bw / triad_bw[t] >= 0.8}};
          }
          results.push_back(r);
        }
      }
    }
  }
  out["results"] = results;
  out["target"] = target;
  return out;
}

}  // namespace csdkit::bench
