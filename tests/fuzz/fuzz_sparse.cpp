// fuzz_sparse: the block-sparse stream validator, CheckSparse (host/platform/src/sparse_codec.cpp
// over hls::ValidateSparse, the code the kernel runs), the kernel's merge decoder behind it, and
// the kernel itself on the same stream.
//
// The input is a SparseGrad in the layout of sparse_input.h (optimizer, n, dtype, nnz, then the
// block table, indices and values). For each input the harness
//   1. asks CheckSparse, and an independent oracle written here from the format's definition
//      (hls/include/csdkit/hls/sparse.h), whether the stream is valid: they must agree both
//      ways — a stream the kernel accepts but the format forbids is a finding, and so is a
//      valid stream it refuses;
//   2. for a valid stream, decodes it the way csd_update does (hls::MergeDecode, tile by tile
//      over each block, the next-entry counter carried across tiles and blocks) with a value
//      array that marks each entry with its own number, and checks that every entry comes out
//      exactly once, in stream order, at the position its block and offset name — so the
//      decoded indices are sorted, unique and below n;
//   3. launches csd_update on the stream through both datapaths of the host model: the
//      specialised one (csd_update, whose sparse tiles are built by scattering each entry to
//      the position its offset names — the decoder that relies most on the validation) and the
//      general one the HLS, RTL and OpenCL builds share (csd_update_general, MergeDecode).
//      Every buffer has exactly the launch's footprint (LaunchFootprint), so ASan reports any
//      access past it. Both launches must give the same status and the same bits in every
//      buffer; they must refuse exactly the streams the format forbids, write nothing but the
//      status word when they do, and consume nnz entries over n elements when they do not.
//      Only for n <= kMaxKernelN (a full block, then four tiles of the next): a launch updates
//      every element, about 0.15 us each under the sanitizers, so 2^18 elements took 200 ms.
// CheckSparse never throws; there is no expected exception. Findings: a crash, a sanitizer
// report, any exception, or a broken property above (printed, then abort()).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "csdkit/hls/mode.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/optimizer.h"
#include "csdkit/platform/sparse_codec.h"
#include "csdkit/platform/update_launch.h"
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
// The largest n launched on the kernel: one whole block, then tiles of a second, so the
// decoders cross a block boundary and end in a partial block.
constexpr uint32_t kMaxKernelN = hls::kBlockElems + 4 * kTile;

std::string Describe(const SparseGrad& s) {
  return "n = " + std::to_string(s.n) + ", nnz = " + std::to_string(s.nnz) + ", dtype " +
         csdkit::DTypeName(s.dtype);
}

/// The format's definition, checked directly on a block table and indices holding the whole
/// stream: nnz <= n, blk[0] = 0, blk non-decreasing up to blk[nb] = nnz, each block's offsets
/// strictly ascending and below the block's size. "" when valid, else the first rule broken.
std::string FormatOracle(const uint32_t* blk, const uint16_t* idx, uint32_t n, uint32_t nnz) {
  const uint32_t nb = hls::NumBlocks(n);
  if (nnz > n) return "nnz > n";
  if (blk[0] != 0) return "blk[0] != 0";
  for (uint32_t b = 0; b < nb; ++b) {
    if (blk[b + 1] < blk[b]) return "blk decreases at " + std::to_string(b + 1);
  }
  if (blk[nb] != nnz) return "blk[nb] != nnz";
  for (uint32_t b = 0; b < nb; ++b) {
    const uint32_t size =
        n - b * hls::kBlockElems < hls::kBlockElems ? n - b * hls::kBlockElems : hls::kBlockElems;
    for (uint32_t k = blk[b]; k < blk[b + 1]; ++k) {
      if (idx[k] >= size) return "entry " + std::to_string(k) + " past its block";
      if (k > blk[b] && idx[k] <= idx[k - 1]) {
        return "entry " + std::to_string(k) + " not above its predecessor";
      }
    }
  }
  return "";
}

/// The same for a SparseGrad, whose buffers must also be large enough for the stream.
std::string Oracle(const SparseGrad& s) {
  const uint32_t nb = hls::NumBlocks(s.n);
  if (s.blk.size() < (uint64_t{nb} + 1) * 4 || s.idx.size() < uint64_t{s.nnz} * 2 ||
      s.val.size() < uint64_t{s.nnz} * csdkit::DTypeBytes(s.dtype)) {
    return "buffer too small";
  }
  if (s.nnz > s.n) return "nnz > n";  // before reading indices nnz does not bound
  return FormatOracle(s.blk.as<uint32_t>(), s.idx.as<uint16_t>(), s.n, s.nnz);
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

// ---- The kernel itself ------------------------------------------------------------------

/// A zero-filled buffer of exactly `bytes` (a whole number of 64-byte words; one word for a
/// buffer the launch does not touch), so that ASan sees any access past a launch's footprint.
class ExactBuffer {
 public:
  explicit ExactBuffer(uint64_t bytes) : size_(bytes == 0 ? hls::kWordBytes : bytes) {
    data_ = static_cast<uint8_t*>(std::aligned_alloc(hls::kWordBytes, size_));
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(data_, 0, size_);
  }
  ~ExactBuffer() { std::free(data_); }
  ExactBuffer(const ExactBuffer&) = delete;
  ExactBuffer& operator=(const ExactBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  hls::Word* words() { return reinterpret_cast<hls::Word*>(data_); }
  /// Copies the first min(size(), bytes) bytes of `src`.
  void Fill(const uint8_t* src, size_t bytes) { std::memcpy(data_, src, std::min(size_, bytes)); }
  bool Same(const ExactBuffer& o) const {
    return size_ == o.size_ && std::memcmp(data_, o.data_, size_) == 0;
  }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

using LaunchBuffers = std::array<std::unique_ptr<ExactBuffer>, csdkit::kNumUpdateBuffers>;

/// The launch's buffers before it runs: theta a fixed pattern, m and v zero (valid state for
/// every optimizer), the stream from `s` (as much of it as `s`'s buffers hold; the rest zero).
LaunchBuffers InitialBuffers(const SparseGrad& s, uint32_t mode) {
  namespace arg = csdkit::update_arg;
  const csdkit::UpdateFootprint fp = csdkit::LaunchFootprint(mode, s.n, s.nnz);
  LaunchBuffers b;
  for (unsigned i = 0; i < b.size(); ++i) b[i] = std::make_unique<ExactBuffer>(fp[i]);
  uint32_t* theta = reinterpret_cast<uint32_t*>(b[arg::theta]->data());
  for (uint32_t i = 0; i < s.n; ++i) {
    const float x = static_cast<float>(static_cast<int>(i % 13) - 6) * 0.125f;
    std::memcpy(&theta[i], &x, 4);
  }
  b[arg::grad]->Fill(s.val.data(), s.val.size());
  b[arg::sp_idx]->Fill(s.idx.data(), s.idx.size());
  b[arg::sp_blk]->Fill(s.blk.data(), s.blk.size());
  return b;
}

/// Runs one launch on a copy of `init`; returns the buffers after it.
LaunchBuffers Launch(const LaunchBuffers& init, const SparseGrad& s, const csdkit::KernelLaunch& kl,
                     csdkit::HostDatapath dp) {
  LaunchBuffers b;
  for (unsigned i = 0; i < b.size(); ++i) {
    b[i] = std::make_unique<ExactBuffer>(init[i]->size());
    b[i]->Fill(init[i]->data(), init[i]->size());
  }
  csdkit::UpdateLaunch<hls::Word*> l;
  l.ForEachBuffer([&](const hls::ArgInfo& a, hls::Word*& w) { w = b[a.index]->words(); });
  l.SetScalars(s.n, s.nnz, kl);
  (void)csdkit::InvokeUpdate(l, dp);
  return b;
}

/// Launches the stream through both datapaths and checks them against each other and against
/// the format's definition (step 3 at the top of this file).
void CheckKernel(const SparseGrad& s, csdkit::Optimizer opt) {
  namespace arg = csdkit::update_arg;
  csdkit::GradSpec gs;
  gs.grad = s.dtype;
  gs.out = s.dtype == hls::DType::kBf16 ? hls::DType::kBf16 : hls::DType::kFp16;
  gs.sparse = true;
  const csdkit::KernelLaunch kl =
      csdkit::MakeLaunch(csdkit::OptimizerConfig::Defaults(opt), gs, /*step=*/1);
  const LaunchBuffers init = InitialBuffers(s, kl.mode);
  const std::string what = Describe(s) + ", optimizer " + csdkit::OptimizerName(opt);
  const std::string oracle =
      FormatOracle(reinterpret_cast<const uint32_t*>(init[arg::sp_blk]->data()),
                   reinterpret_cast<const uint16_t*>(init[arg::sp_idx]->data()), s.n, s.nnz);
  const LaunchBuffers fast = Launch(init, s, kl, csdkit::HostDatapath::kSpecialised);
  const LaunchBuffers general = Launch(init, s, kl, csdkit::HostDatapath::kGeneral);
  for (unsigned i = 0; i < fast.size(); ++i) {
    if (!fast[i]->Same(*general[i])) {
      csdkit::fuzz::Violation(kTarget, what + ": buffer " + hls::kUpdateArgs[i].name +
                                           " differs between csd_update and csd_update_general");
    }
  }
  const uint32_t* status = reinterpret_cast<const uint32_t*>(fast[arg::status]->data());
  const uint32_t err = status[hls::kStatusError];
  if ((err == 0) != oracle.empty()) {
    csdkit::fuzz::Violation(kTarget, what + ": the kernel's error bits are " + std::to_string(err) +
                                         ", the format's definition says " +
                                         (oracle.empty() ? std::string("valid") : oracle));
  }
  if (err != 0) {
    for (unsigned i : {arg::theta, arg::m, arg::v, arg::out16}) {
      if (!fast[i]->Same(*init[i])) {
        csdkit::fuzz::Violation(kTarget, what + ": the kernel refused the stream (error bits " +
                                             std::to_string(err) + ") but wrote " +
                                             hls::kUpdateArgs[i].name);
      }
    }
  } else if (status[hls::kStatusElems] != s.n || status[hls::kStatusNnz] != s.nnz) {
    csdkit::fuzz::Violation(
        kTarget, what + ": the kernel reports " + std::to_string(status[hls::kStatusElems]) +
                     " elements and " + std::to_string(status[hls::kStatusNnz]) +
                     " entries, expected n and nnz");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const csdkit::fuzz::SparseInput in = csdkit::fuzz::FromInput(data, size);
    const SparseGrad& s = in.s;
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
    if (s.n <= kMaxKernelN) CheckKernel(s, in.opt);
  } catch (const std::exception& e) {
    csdkit::fuzz::Finding(kTarget, e);
  } catch (...) {
    csdkit::fuzz::FindingUnknown(kTarget);
  }
  return 0;
}
