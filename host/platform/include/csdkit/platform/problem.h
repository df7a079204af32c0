// A self-contained updater problem: generated (seeded) state and gradient buffers laid out as
// the kernel reads them, the launch, and helpers to run it, checksum it and dump it as golden
// vectors. Used by `csdkit kernel`, the tests and the benchmarks.
#ifndef CSDKIT_PLATFORM_PROBLEM_H_
#define CSDKIT_PLATFORM_PROBLEM_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/optimizer.h"
#include "csdkit/platform/sparse_codec.h"
#include "csdkit/platform/update_launch.h"

namespace csdkit {

/// What a generated problem's state and gradient hold (`csdkit kernel --data`).
///   kRandom   ordinary values only (the ranges of Problem::Generate).
///   kSpecial  the same ordinary values, with about one element in three of theta, m, v and the
///             gradient (dense elements or sparse values) replaced by a special bit pattern:
///             quiet and signalling NaNs with varied payloads and both signs, infinities,
///             zeros, subnormals, values either side of the smallest normal, the largest
///             finite values, values around 1, and arbitrary bits; binary32 arrays also get
///             values around the fp16 overflow thresholds (65504, 65520) and the bf16 one,
///             and values in the fp16 subnormal range. fp16/bf16 gradients get the patterns
///             of their own format. v then holds arbitrary bits (negative values, NaN, inf):
///             not a valid second moment, on purpose, since the kernel must define its
///             result for any input.
enum class ProblemData { kRandom, kSpecial };
const char* ProblemDataName(ProblemData d);  // "random", "special"
/// Parses a name; throws std::invalid_argument listing the accepted names.
ProblemData ParseProblemData(const std::string& s);

struct ProblemSpec {
  OptimizerConfig hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
  GradSpec grad;          // grad dtype, out dtype, ftz, loss scale, clip; `sparse` set from topk
  uint32_t n = 1u << 20;  // elements
  double topk = 0.0;      // 0: dense gradient; else Top-K ratio in (0, 1]
  uint64_t seed = 1;
  int64_t step = 1;
  ProblemData data = ProblemData::kRandom;
  /// q8-bf16: the store index of element 0 (a multiple of 256), for the random bits; the key is
  /// the seed and the counter's step is `step`.
  uint64_t index = 0;
};

/// One launch over host arrays: theta, m, v (the state in the format of grad.state, in place),
/// grad (dense gradient in the grad dtype, or the sparse values), sp_idx, sp_blk, out16
/// (low-precision weights), status, m_absmax, v_absmax (q8 formats).
using UpdateBuffers = UpdateLaunch<AlignedBuffer>;

struct Problem {
  ProblemSpec spec;
  KernelLaunch launch;
  uint32_t nnz = 0;
  AlignedBuffer dense_grad;  // the generated dense gradient (grad dtype), before compression
  UpdateBuffers buf;  // buffers and scalars of the launch

  /// Generates state and gradient from the seed: theta in [-0.1, 0.1), m in [-1e-3, 1e-3),
  /// v in [0, 1e-4) (Adagrad: plus initial_accumulator_value), gradients in [-1, 1) times
  /// the loss scale, rounded to the grad dtype. A q8 state (grad.state) holds those values
  /// quantized as the contract writes them (IEEE policy; theta to bf16 by nearest even); its
  /// special data puts the special binary32 patterns into about one absmax in three instead
  /// (a NaN value would make its whole block NaN), arbitrary bytes into one code in three, and
  /// bf16 patterns into a bf16 theta. With ProblemData::kSpecial the same values are
  /// drawn, then a second generator (seeded from the seed) replaces about a third of the
  /// elements by special bit patterns; a sparse problem keeps the entries Top-K chose from the
  /// ordinary gradient (`dense_grad` stays that gradient) and gets the patterns in its values.
  /// Throws std::invalid_argument on a bad spec.
  static Problem Generate(const ProblemSpec& spec);

  /// Runs the host model (csd_update) on buf. Returns the status error bits (0 = success).
  uint32_t Run();
};

/// Sets b's scalars from (n, nnz, k) and runs csd_update on it; returns the error bits.
uint32_t RunUpdate(UpdateBuffers& b, uint32_t n, uint32_t nnz, const KernelLaunch& k);

/// One named array of a problem, for checksums and dumps.
struct ArrayView {
  std::string name;
  std::string dtype;  // "fp32", "fp16", "bf16", "u8", "u16", "u32"
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
/// every scalar as a number and a hex bit pattern. A generated problem is described by its seed,
/// data kind and Top-K ratio; a launch captured elsewhere (`csdkit step --dump-launches`) passes
/// `source` instead, written as the "source" field. Throws std::runtime_error on I/O failure.
void DumpProblem(const std::string& dir, const Problem& p, const UpdateBuffers& inputs,
                 const UpdateBuffers& outputs, const nlohmann::json& source = nullptr);

/// Verifies the FP environment the model's bit-exactness relies on (MXCSR: round to nearest,
/// FTZ and DAZ off). Throws std::runtime_error describing the bad setting.
void CheckFpEnvironment();

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_PROBLEM_H_
