// The block-sparse gradient format: the reference Top-K compressor, the merge decoder (round
// trip), the byte budget, and malformed streams — rejected by the host check before dispatch and
// detected by the kernel itself with nothing but the status word written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "csdkit/hls/fp16.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/platform/problem.h"
#include "csdkit/platform/sparse_codec.h"
#include "test_util.h"

namespace csdkit::testing {
namespace {

// Decodes a whole stream with the kernel's merge decoder, block by block.
std::vector<uint32_t> MergeDecodeAll(const SparseGrad& s) {
  std::vector<uint32_t> g(s.n + 64, 0xdeadbeefu);
  uint32_t k = 0;
  for (uint32_t b = 0; b < hls::NumBlocks(s.n); ++b) {
    hls::MergeDecode(s.idx.words(), s.val.words(), s.dtype, 0, hls::BlockSize(s.n, b),
                     hls::BlkAt(s.blk.words(), b + 1), &k, &g[static_cast<size_t>(b) << 16]);
  }
  EXPECT_EQ(k, s.nnz);
  g.resize(s.n);
  return g;
}

uint32_t Widen(const void* dense, DType t, uint32_t i) {
  if (t == DType::kFp32) return static_cast<const uint32_t*>(dense)[i];
  const uint16_t h = static_cast<const uint16_t*>(dense)[i];
  return t == DType::kFp16 ? hls::F16ToF32(h) : hls::Bf16ToF32(h);
}

uint32_t Mag(const void* dense, DType t, uint32_t i) {
  return t == DType::kFp32 ? (static_cast<const uint32_t*>(dense)[i] & 0x7fffffffu)
                           : (static_cast<const uint16_t*>(dense)[i] & 0x7fffu);
}

TEST(Sparse, TopKRoundTripThroughMergeDecoder) {
  for (DType t : {DType::kFp32, DType::kFp16, DType::kBf16}) {
    for (uint32_t n : {1u, 17u, 4097u, 65536u, 65537u, 200003u}) {
      for (double ratio : {0.001, 0.01, 0.3, 1.0}) {
        ProblemSpec spec;
        spec.grad.grad = t;
        spec.n = n;
        spec.seed = n * 31 + static_cast<uint64_t>(ratio * 1000);
        Problem p = Problem::Generate(spec);  // dense gradient in p.dense_grad
        InjectSpecials(p, 0.0, 1);
        const void* dense = p.dense_grad.data();
        // Put a few non-finite values in: Top-K must keep them.
        if (n > 100) {
          if (t == DType::kFp32) {
            p.dense_grad.as<uint32_t>()[n / 3] = 0x7fc00000u;
            p.dense_grad.as<uint32_t>()[n / 2] = 0xff800000u;
          } else {
            p.dense_grad.as<uint16_t>()[n / 3] = t == DType::kFp16 ? 0x7e00 : 0x7fc0;
            p.dense_grad.as<uint16_t>()[n / 2] = t == DType::kFp16 ? 0xfc00 : 0xff80;
          }
        }
        const SparseGrad s = CompressTopK(dense, t, n, ratio);
        const std::string ctx = std::string("dtype=") + DTypeName(t) + " n=" + std::to_string(n) +
                                " ratio=" + std::to_string(ratio);
        ASSERT_EQ(s.nnz, TopKCount(n, ratio)) << ctx;
        ASSERT_EQ(CheckSparse(s), "") << ctx;
        const std::vector<uint32_t> g = MergeDecodeAll(s);
        // Kept elements decode to their own value, bit for bit; dropped ones to +0; every kept
        // magnitude is >= every dropped magnitude.
        uint32_t min_kept = 0xffffffffu, max_dropped = 0, kept = 0;
        std::vector<bool> is_kept(n, false);
        const uint32_t* blk = s.blk.as<uint32_t>();
        const uint16_t* idx = s.idx.as<uint16_t>();
        for (uint32_t b = 0; b < hls::NumBlocks(n); ++b)
          for (uint32_t k = blk[b]; k < blk[b + 1]; ++k) is_kept[(b << 16) + idx[k]] = true;
        for (uint32_t i = 0; i < n; ++i) {
          if (is_kept[i]) {
            ++kept;
            min_kept = std::min(min_kept, Mag(dense, t, i));
            ASSERT_EQ(g[i], Widen(dense, t, i)) << ctx << " i=" << i;
          } else {
            max_dropped = std::max(max_dropped, Mag(dense, t, i));
            ASSERT_EQ(g[i], 0u) << ctx << " i=" << i;
          }
        }
        EXPECT_EQ(kept, s.nnz) << ctx;
        if (kept < n) {
          EXPECT_GE(min_kept, max_dropped) << ctx;
        }
        if (n > 100) {
          EXPECT_TRUE(is_kept[n / 3] && is_kept[n / 2]) << ctx << ": non-finite values dropped";
        }
      }
    }
  }
}

TEST(Sparse, TiesBreakTowardsLowerIndex) {
  std::vector<float> d(10, 1.0f);
  const SparseGrad s = CompressTopK(d.data(), DType::kFp32, 10, 0.3);
  ASSERT_EQ(s.nnz, 3u);
  EXPECT_EQ(s.idx.as<uint16_t>()[0], 0);
  EXPECT_EQ(s.idx.as<uint16_t>()[1], 1);
  EXPECT_EQ(s.idx.as<uint16_t>()[2], 2);
}

TEST(Sparse, BytesPerKeptElement) {
  // 4 bytes per kept fp16/bf16 value (2 index + 2 value) plus 4 bytes per 2^16 elements.
  std::vector<uint16_t> d(1u << 20);
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint16_t>(0x3c00 + (i * 7919) % 1000);
  const SparseGrad s = CompressTopK(d.data(), DType::kFp16, d.size(), 0.01);
  const double per = static_cast<double>(s.StreamBytes()) / s.nnz;
  EXPECT_LT(per, 4.01) << "bytes per kept element " << per;
  EXPECT_EQ(s.StreamBytes(), (16u + 1u) * 4u + s.nnz * 4ull);
}

TEST(Sparse, RatioOutOfRangeIsRefused) {
  for (double r : {0.0, -0.1, 1.5, static_cast<double>(NAN)}) {
    try {
      TopKCount(100, r);
      ADD_FAILURE() << "ratio " << r << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("expected a value in (0, 1]"), std::string::npos);
    }
  }
}

TEST(Sparse, EncodeRefusesUnsortedIndices) {
  const uint32_t idx[] = {3, 9, 9};
  const float val[] = {1, 2, 3};
  EXPECT_THROW(EncodeSparse(100, DType::kFp32, idx, val, 3), std::invalid_argument);
  const uint32_t far[] = {3, 100};
  EXPECT_THROW(EncodeSparse(100, DType::kFp32, far, val, 2), std::invalid_argument);
}

// Every malformed stream: the host check names it; the kernel (launched without the host check)
// flags the same error at the same position and writes nothing but the status word.
struct Corruption {
  const char* name;
  uint32_t expect_err;
  uint32_t expect_pos;  // ~0u: don't check
  std::function<void(Problem&)> apply;
};

TEST(Sparse, MalformedStreamsRejectedAndNothingWritten) {
  ProblemSpec spec;
  spec.grad.grad = DType::kFp16;
  spec.grad.out = DType::kFp16;
  spec.n = 3 * 65536 + 1000;  // four blocks, the last one partial
  spec.topk = 0.01;
  spec.seed = 99;
  const Problem base = [&] { return Problem::Generate(spec); }();
  const uint32_t nnz = base.nnz;
  ASSERT_GT(nnz, 100u);
  auto idx = [](Problem& p) { return p.buf.sp_idx.as<uint16_t>(); };
  auto blk = [](Problem& p) { return p.buf.sp_blk.as<uint32_t>(); };
  const std::vector<Corruption> cases = {
      {"swap two indices (unsorted)", hls::kErrUnsorted, 11,
       [&](Problem& p) { std::swap(idx(p)[10], idx(p)[11]); }},
      {"duplicate index", hls::kErrDuplicate, 21, [&](Problem& p) { idx(p)[21] = idx(p)[20]; }},
      {"index past the last (partial) block", hls::kErrOutOfRange, nnz - 1,
       [&](Problem& p) { idx(p)[nnz - 1] = 1000; }},
      {"index 0xffff in the partial block", hls::kErrOutOfRange, nnz - 1,
       [&](Problem& p) { idx(p)[nnz - 1] = 0xffff; }},
      {"block table total != nnz", hls::kErrCount, 4, [&](Problem& p) { p.nnz = nnz - 1; }},
      {"nnz > n", hls::kErrCount, ~0u, [&](Problem& p) { p.nnz = p.spec.n + 1; }},
      {"block table not starting at 0", hls::kErrBlkTable, 0, [&](Problem& p) { blk(p)[0] = 1; }},
      {"block table decreasing", hls::kErrBlkTable, 2,
       [&](Problem& p) { blk(p)[2] = blk(p)[1] - 1; }},
      {"block table entry past nnz", hls::kErrCount, 1,
       [&](Problem& p) { blk(p)[1] = nnz + 5; }},
      {"last index of a block wraps below its predecessor", hls::kErrUnsorted, ~0u,
       [&](Problem& p) {
         const uint32_t end = blk(p)[1];
         idx(p)[end - 1] = 0;
       }},
  };
  for (const Corruption& c : cases) {
    Problem p;
    p.spec = base.spec;
    p.launch = base.launch;
    p.nnz = base.nnz;
    p.buf = base.buf.Clone();
    c.apply(p);
    // Host check before dispatch.
    SparseGrad s;
    s.n = p.spec.n;
    s.nnz = p.nnz;
    s.dtype = p.spec.grad.grad;
    s.blk = p.buf.sp_blk.Clone();
    s.idx = p.buf.sp_idx.Clone();
    s.val = p.buf.grad.Clone();
    const std::string msg = CheckSparse(s);
    EXPECT_NE(msg, "") << c.name << ": host check accepted a malformed stream";
    EXPECT_NE(msg.find("expected"), std::string::npos) << c.name << ": " << msg;
    EXPECT_NE(msg.find("found"), std::string::npos) << c.name << ": " << msg;
    // Kernel, launched anyway.
    const UpdateBuffers before = p.buf.Clone();
    const uint32_t err = p.Run();
    EXPECT_EQ(err, c.expect_err) << c.name << ": kernel error bits 0x" << std::hex << err;
    const uint32_t pos = p.buf.status.as<uint32_t>()[hls::kStatusErrorPos];
    if (c.expect_pos != ~0u) {
      EXPECT_EQ(pos, c.expect_pos) << c.name;
    }
    EXPECT_EQ(p.buf.status.as<uint32_t>()[hls::kStatusElems], 0u) << c.name;
    EXPECT_EQ(CheckNothingWrittenLanes(p.buf.status), "") << c.name;
    // The general datapath (the HLS, RTL and OpenCL one) reports the same status word.
    UpdateBuffers general = before.Clone();
    general.SetScalars(p.spec.n, p.nnz, p.launch);
    EXPECT_EQ(InvokeUpdate(WordsOf(general), HostDatapath::kGeneral), c.expect_err) << c.name;
    EXPECT_EQ(DiffBuffers("status", p.buf.status, general.status, 4, c.name), "");
    for (const auto& [nm, a, b] :
         {std::tuple{"theta", &before.theta, &p.buf.theta}, std::tuple{"m", &before.m, &p.buf.m},
          std::tuple{"v", &before.v, &p.buf.v}, std::tuple{"out16", &before.out16, &p.buf.out16},
          std::tuple{"grad", &before.grad, &p.buf.grad}}) {
      EXPECT_TRUE(a->SameBytes(*b)) << c.name << ": kernel wrote " << nm << " on a malformed stream";
    }
  }
}

}  // namespace
}  // namespace csdkit::testing
