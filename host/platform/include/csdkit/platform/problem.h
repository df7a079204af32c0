// A self-contained updater problem: generated (seeded) state and gradient buffers laid out as
// the kernel reads them, the launch, and helpers to run it, checksum it and dump it as golden
// vectors. Used by `csdkit kernel`, the tests and the benchmarks.
#ifndef CSDKIT_PLATFORM_PROBLEM_H_
#define CSDKIT_PLATFORM_PROBLEM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/optimizer.h"
#include "csdkit/platform/sparse_codec.h"
#include "csdkit/platform/update_launch.h"

namespace csdkit {

struct ProblemSpec {
  OptimizerConfig hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
  GradSpec grad;          // grad dtype, out dtype, ftz, loss scale, clip; `sparse` set from topk
  uint32_t n = 1u << 20;  // elements
  double topk = 0.0;      // 0: dense gradient; else Top-K ratio in (0, 1]
  uint64_t seed = 1;
  int64_t step = 1;
};

/// One launch over host arrays: theta, m, v (fp32 state, in place), grad (dense gradient in the
/// grad dtype, or the sparse values), sp_idx, sp_blk, out16 (low-precision weights), status.
using UpdateBuffers = UpdateLaunch<AlignedBuffer>;

struct Problem {
  ProblemSpec spec;
  KernelLaunch launch;
  uint32_t nnz = 0;
  AlignedBuffer dense_grad;  // the generated dense gradient (grad dtype), before compression
  UpdateBuffers buf;  // buffers and scalars of the launch

  /// Generates state and gradient from the seed: theta in [-0.1, 0.1), m in [-1e-3, 1e-3),
  /// v in [0, 1e-4) (Adagrad: plus initial_accumulator_value), gradients in [-1, 1) times
  /// the loss scale, rounded to the grad dtype. Throws std::invalid_argument on a bad spec.
  static Problem Generate(const ProblemSpec& spec);

  /// Runs the host model (csd_update) on buf. Returns the status error bits (0 = success).
  uint32_t Run();
};

/// Sets b's scalars from (n, nnz, k) and runs csd_update on it; returns the error bits.
uint32_t RunUpdate(UpdateBuffers& b, uint32_t n, uint32_t nnz, const KernelLaunch& k);

/// One named array of a problem, for checksums and dumps.
struct ArrayView {
  std::string name;
  std::string dtype;  // "fp32", "fp16", "bf16", "u16", "u32"
  uint64_t count;
  const AlignedBuffer* buf;
  uint64_t bytes() const;
};

/// The arrays a launch reads (inputs) and writes (outputs), by the launch's mode.
std::vector<ArrayView> InputArrays(const Problem& p, const UpdateBuffers& b);
std::vector<ArrayView> OutputArrays(const Problem& p, const UpdateBuffers& b);

/// CRC-32 (zlib) of the array's `bytes()` first bytes.
uint32_t Crc32(const ArrayView& a);

/// Writes golden vectors: `<name>.in.bin` for inputs, `<name>.out.bin` for outputs (raw little
/// endian, unpadded), and `problem.json` describing sizes, dtypes, CRCs, the mode word and
/// every scalar as a number and a hex bit pattern. Throws std::runtime_error on I/O failure.
void DumpProblem(const std::string& dir, const Problem& p, const UpdateBuffers& inputs,
                 const UpdateBuffers& outputs);

/// Verifies the FP environment the model's bit-exactness relies on (MXCSR: round to nearest,
/// FTZ and DAZ off). Throws std::runtime_error describing the bad setting.
void CheckFpEnvironment();

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_PROBLEM_H_
