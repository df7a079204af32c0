// Benchmarks behind `csdkit bench ...`. Each returns its figures as JSON; none asserts on time.
#ifndef CSDKIT_BENCH_BENCH_H_
#define CSDKIT_BENCH_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "csdkit/platform/aligned_buffer.h"

namespace csdkit::bench {

struct KernelBenchOptions {
  uint32_t n = 1u << 26;  // elements per configuration (split across threads)
  unsigned min_threads = 1;  // thread counts min_threads .. max_threads are timed
  unsigned max_threads = 2;
  std::string optimizer;  // empty: every optimizer; else only this one (e.g. "adamw")
  unsigned reps = 3;      // best of
  bool quick = false;     // only AdamW fp16/fp16 (for smoke runs)
  bool progress = false;  // progress lines on stderr
  bool general = true;    // also time the general datapath (csd_update_general)
  bool torch = true;      // also time PyTorch's CPU AdamW (fp32 configurations)
  // The state formats to time, each configuration in each: "fp32", "q8", "q8-bf16" (q8-bf16 has
  // no fp16 copy: its configurations with one get a bf16 copy instead).
  std::vector<std::string> states = {"fp32"};
  std::string python = "/usr/bin/python3";  // the interpreter with torch for that
  // The page size behind every timed array (the problems' buffers and the triad's): huge pages
  // (the runtime's own buffers) or 4 KiB pages (what a tool that allocates with malloc gets),
  // so that the figures can be compared with another program's under the same conditions.
  AlignedBuffer::Pages pages = AlignedBuffer::Pages::kHuge;
  // How each thread count's work is split between the threads, each split timed: "fixed" (one
  // problem of n / threads elements per thread, as the runtime's baseline deals its subgroups)
  // and "pieces" (dense configurations: those problems cut into pieces of `piece` elements,
  // each handed to whichever thread is free next).
  std::vector<std::string> splits = {"fixed"};
  uint32_t piece = 65536;  // a positive multiple of 256 (q8: whole blocks)
};

/// STREAM triad a[i] = b[i] + s * c[i] over `n` doubles per array with `threads` threads; best of
/// `reps`, in bytes per second counted as STREAM counts them (24 bytes per element).
double StreamTriad(uint64_t n, unsigned threads, unsigned reps,
                   AlignedBuffer::Pages pages = AlignedBuffer::Pages::kHuge);
/// The same triad with non-temporal (streaming) stores: no read of the stored lines.
double StreamTriadNt(uint64_t n, unsigned threads, unsigned reps,
                     AlignedBuffer::Pages pages = AlignedBuffer::Pages::kHuge);

/// Host-model throughput per optimizer, dtype configuration and thread count, with the
/// STREAM-triad bound measured in the same run.
nlohmann::json KernelBench(const KernelBenchOptions& o);

}  // namespace csdkit::bench

#endif  // CSDKIT_BENCH_BENCH_H_
