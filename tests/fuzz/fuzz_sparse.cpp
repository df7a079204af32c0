// fuzz_sparse: the block-sparse stream validator, CheckSparse (host/platform/src/sparse_codec.cpp
// over hls::ValidateSparse, the code the kernel runs), and the kernel's merge decoder behind it.
//
// The input is a SparseGrad in the layout of sparse_input.h (n, dtype, nnz, then the block
// table, indices and values). For each input the harness
//   1. asks CheckSparse, and an independent oracle written here from the format's definition
//      (hls/include/csdkit/hls/sparse.h), whether the stream is valid: they must agree both
//      ways — a stream the kernel accepts but the format forbids is a finding, and so is a
//      valid stream it refuses;
//   2. for a valid stream, decodes it the way csd_update does (hls::MergeDecode, tile by tile
//      over each block, the next-entry counter carried across tiles and blocks) with a value
//      array that marks each entry with its own number, and checks that every entry comes out
//      exactly once, in stream order, at the position its block and offset name — so the
//      decoded indices are sorted, unique and below n.
// CheckSparse never throws; there is no expected exception. Findings: a crash, a sanitizer
// report, any exception, or a broken property above (printed, then abort()).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "csdkit/hls/sparse.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/sparse_codec.h"
#include "fuzz_util.h"
#include "sparse_input.h"

namespace {

using csdkit::AlignedBuffer;
using csdkit::SparseGrad;
namespace hls = csdkit::hls;

constexpr const char* kTarget = "fuzz_sparse";
// csd_update's tile (hls/kernels/csd_update.cpp, kTile): the kernel decodes this many elements
// per call and looks up the block end once per tile.
constexpr uint32_t kTile = 1024;
static_assert(hls::kBlockElems % kTile == 0, "a tile never straddles two blocks");

std::string Describe(const SparseGrad& s) {
  return "n = " + std::to_string(s.n) + ", nnz = " + std::to_string(s.nnz) + ", dtype " +
         csdkit::DTypeName(s.dtype);
}

/// The format's definition, checked directly: buffers large enough, nnz <= n, blk[0] = 0,
/// blk non-decreasing up to blk[nb] = nnz, each block's offsets strictly ascending and below
/// the block's size. "" when valid, else the first rule broken.
std::string Oracle(const SparseGrad& s) {
  const uint32_t nb = hls::NumBlocks(s.n);
  if (s.blk.size() < (uint64_t{nb} + 1) * 4 || s.idx.size() < uint64_t{s.nnz} * 2 ||
      s.val.size() < uint64_t{s.nnz} * csdkit::DTypeBytes(s.dtype)) {
    return "buffer too small";
  }
  if (s.nnz > s.n) return "nnz > n";
  const uint32_t* blk = s.blk.as<uint32_t>();
  const uint16_t* idx = s.idx.as<uint16_t>();
  if (blk[0] != 0) return "blk[0] != 0";
  for (uint32_t b = 0; b < nb; ++b) {
    if (blk[b + 1] < blk[b]) return "blk decreases at " + std::to_string(b + 1);
  }
  if (blk[nb] != s.nnz) return "blk[nb] != nnz";
  for (uint32_t b = 0; b < nb; ++b) {
    const uint32_t size = s.n - b * hls::kBlockElems < hls::kBlockElems ? s.n - b * hls::kBlockElems
                                                                        : hls::kBlockElems;
    for (uint32_t k = blk[b]; k < blk[b + 1]; ++k) {
      if (idx[k] >= size) return "entry " + std::to_string(k) + " past its block";
      if (k > blk[b] && idx[k] <= idx[k - 1]) {
        return "entry " + std::to_string(k) + " not above its predecessor";
      }
    }
  }
  return "";
}

/// Decodes a valid stream as the kernel does and checks where every entry lands.
void CheckDecode(const SparseGrad& s) {
  // Entry k's value is the fp32 bit pattern k + 1 (never 0), so a decoded lane names its entry.
  AlignedBuffer marks(size_t{s.nnz} * 4);
  for (uint32_t k = 0; k < s.nnz; ++k) marks.as<uint32_t>()[k] = k + 1;
  const uint32_t* blk = s.blk.as<uint32_t>();
  const uint16_t* idx = s.idx.as<uint16_t>();
  std::vector<uint32_t> decoded;  // element index of each entry taken, in decode order
  decoded.reserve(s.nnz);
  uint32_t g[kTile];
  uint32_t k = 0;
  for (uint32_t base = 0; base < s.n; base += kTile) {
    const uint32_t len = s.n - base < kTile ? s.n - base : kTile;
    const uint32_t b = base >> hls::kBlockBits;
    const uint32_t blk_end = hls::BlkAt(s.blk.words(), b + 1);
    hls::MergeDecode(s.idx.words(), marks.words(), hls::DType::kFp32,
                     base & (hls::kBlockElems - 1u), len, blk_end, &k, g);
    for (uint32_t i = 0; i < len; ++i) {
      if (g[i] == 0) continue;
      const uint32_t e = g[i] - 1;  // the entry decoded at element base + i
      const uint32_t at = base + i;
      if (e != decoded.size()) {
        csdkit::fuzz::Violation(kTarget, Describe(s) + ": element " + std::to_string(at) +
                                             " took entry " + std::to_string(e) + ", expected " +
                                             "entry " + std::to_string(decoded.size()) +
                                             " (each entry once, in stream order)");
      }
      const uint32_t want = (b << hls::kBlockBits) + idx[e];
      if (e < blk[b] || e >= blk[b + 1] || at != want) {
        csdkit::fuzz::Violation(
            kTarget, Describe(s) + ": entry " + std::to_string(e) + " (block table says block " +
                         std::to_string(b) + " holds entries " + std::to_string(blk[b]) + ".." +
                         std::to_string(blk[b + 1]) + ", offset " + std::to_string(idx[e]) +
                         ") decoded at element " + std::to_string(at) + ", expected " +
                         std::to_string(want));
      }
      decoded.push_back(at);
    }
  }
  if (k != s.nnz || decoded.size() != s.nnz) {
    csdkit::fuzz::Violation(kTarget, Describe(s) + ": the decoder consumed " + std::to_string(k) +
                                         " entries and placed " + std::to_string(decoded.size()) +
                                         ", expected nnz");
  }
  for (size_t j = 0; j < decoded.size(); ++j) {
    if (decoded[j] >= s.n || (j > 0 && decoded[j] <= decoded[j - 1])) {
      csdkit::fuzz::Violation(kTarget, Describe(s) + ": decoded index " + std::to_string(j) +
                                           " is " + std::to_string(decoded[j]) +
                                           ", expected ascending and below n");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const SparseGrad s = csdkit::fuzz::FromInput(data, size);
    const std::string verdict = csdkit::CheckSparse(s);
    const std::string oracle = Oracle(s);
    if (verdict.empty() != oracle.empty()) {
      csdkit::fuzz::Violation(kTarget,
                              Describe(s) + ": CheckSparse says " +
                                  (verdict.empty() ? std::string("valid") : "'" + verdict + "'") +
                                  ", the format's definition says " +
                                  (oracle.empty() ? std::string("valid") : "'" + oracle + "'"));
    }
    if (verdict.empty()) {
      CheckDecode(s);
      csdkit::fuzz::Accepted(kTarget, Describe(s));
    } else if (csdkit::fuzz::Verbose()) {
      std::fprintf(stderr, "%s: refused: %s\n", kTarget, verdict.c_str());
    }
  } catch (const std::exception& e) {
    csdkit::fuzz::Finding(kTarget, e);
  } catch (...) {
    csdkit::fuzz::FindingUnknown(kTarget);
  }
  return 0;
}
