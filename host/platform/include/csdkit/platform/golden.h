// Golden-vector directories read back (`csdkit kernel --replay`): the format DumpProblem writes,
// or a hand-written directory in the same format (docs/kernel-interface.md, "Golden vectors"),
// checked field by field and file by file before any buffer is allocated; and the comparison of
// a launch's outputs with the dumped ones, element by element.
#ifndef CSDKIT_PLATFORM_GOLDEN_H_
#define CSDKIT_PLATFORM_GOLDEN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "csdkit/platform/problem.h"

namespace csdkit {

/// One buffer file of a golden directory, as problem.json lists it, checked against the launch.
struct GoldenFile {
  std::string name;   // the kernel argument it holds: theta, m, v, grad, sp_idx, sp_blk, ...
  std::string dtype;  // "fp32", "fp16", "bf16", "u16", "u32"
  uint64_t count = 0;
  uint64_t bytes = 0;  // count times the element size: the file's size, checked
  std::string path;    // <dir>/<file>
  bool has_crc = false;
  uint32_t crc = 0;  // the "crc32" problem.json gives, when it gives one
};

/// A golden directory's problem.json, checked: the launch (n, nnz, the mode word and every
/// scalar's bit pattern) in `problem` (no buffers yet), and the input and output files the
/// launch implies (InputArrays / OutputArrays order), each present with the size it implies.
/// Only problem.json has been read; no buffer has been allocated.
struct GoldenIndex {
  std::string dir;
  Problem problem;
  std::vector<GoldenFile> inputs, outputs;
  /// Host memory LoadGolden allocates: the inputs and the expected outputs, padded to words.
  uint64_t HostBytes() const;
};

/// Reads and checks `dir`/problem.json and the size of every file it names. Throws
/// std::invalid_argument naming the file, the field, what was expected and what was found: a
/// missing directory or problem.json, invalid JSON, a field missing, of the wrong type or out of
/// range, a mode word the kernel rejects, a buffer list that disagrees with the mode, n or nnz,
/// or a buffer file that is missing, not a regular file, short or too long.
GoldenIndex ReadGoldenIndex(const std::string& dir);

/// A golden problem in memory: the launch with its inputs in `problem.buf` (every buffer a
/// launch takes, at least one word; buffers it does not read zero, out16 and status zero as in
/// the dumped launch), and the dumped outputs in `expected` (buffers not dumped stay empty).
struct GoldenProblem {
  Problem problem;
  UpdateBuffers expected;
  std::vector<GoldenFile> inputs, outputs;
  /// One line per file whose content's CRC-32 differs from the one problem.json gives (the file
  /// was edited after the dump). Not an error: the comparison decides.
  std::vector<std::string> notes;
};

/// Reads the files of a checked index (each one's size checked again as it is read). Throws
/// std::invalid_argument naming the file when it cannot be read whole.
GoldenProblem LoadGolden(GoldenIndex ix);

/// The comparison of one output buffer with its dumped content.
struct BufferCompare {
  const GoldenFile* file = nullptr;
  uint64_t differing = 0;             // elements whose bits differ
  uint64_t first = 0;                 // the first of them (for status: the lane)
  uint32_t expected = 0, actual = 0;  // its bits, dumped and produced
};

/// Compares every dumped output with the same buffer of `got` (a launch of g.problem), byte for
/// byte over the dumped elements, in the order of g.outputs.
std::vector<BufferCompare> CompareOutputs(const GoldenProblem& g, const UpdateBuffers& got);

/// The inputs of element i (< n) of a problem, as (name, bits in hex): theta, m and v when the
/// launch reads them, and grad: the dense element, or the value of the sparse entry that holds
/// element i ("none" when no entry does; "?" when the block table cannot say).
std::vector<std::pair<std::string, std::string>> ElementInputs(const Problem& p, uint64_t i);

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_GOLDEN_H_
