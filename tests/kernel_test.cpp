// The kernel top (tiles, words, merge decoder, unified datapath) against the plain reference
// loop (textbook rules, scatter decode): bit for bit on every byte of every buffer, the status
// word's integrity lanes included, over every optimizer variant x gradient dtype x output dtype x
// dense/sparse x IEEE/FTZ, sizes that are and are not multiples of the lane count, the tile and
// the sparse block, with special values. Then the integrity lanes on their own: against zlib
// and a plain count on both host datapaths, on outputs that overflow, on unused state, on
// launches that fail.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "csdkit/hls/sparse.h"
#include "csdkit/hls/word.h"
#include "csdkit/platform/problem.h"
#include "csdkit/platform/update_launch.h"
#include "crc_fast.h"
#include "reference.h"
#include "test_util.h"

namespace csdkit::testing {
namespace {

constexpr uint32_t kSizes[] = {1,    15,   16,   17,    31,    32,    33,    1023,
                               1024, 1025, 4097, 65535, 65536, 65537, 140001};

using Param = std::tuple<int, DType, DType, bool, bool>;  // variant, grad, out, sparse, ftz

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [vi, g, o, sp, ftz] = info.param;
  return std::string(AllVariants()[vi].name) + "_" + DTypeName(g) + "_" + OutDTypeName(o) +
         (sp ? "_sparse" : "_dense") + (ftz ? "_ftz" : "_ieee");
}

class KernelVsReference : public ::testing::TestWithParam<Param> {};

TEST_P(KernelVsReference, BitExactOnEveryBuffer) {
  const auto& [vi, g, o, sp, ftz] = GetParam();
  const Variant var = AllVariants()[vi];
  int case_no = 0;
  for (uint32_t n : kSizes) {
    for (int specials = 0; specials < 2; ++specials) {
      const uint64_t seed = 0x5eed0000u + static_cast<uint64_t>(vi) * 7919u + n + specials;
      ProblemSpec spec;
      spec.hyper = var.cfg;
      spec.step = var.step;
      spec.grad.grad = g;
      spec.grad.out = o;
      spec.grad.ftz = ftz;
      spec.grad.loss_scale = g == DType::kFp16 ? 1024.0 : 1.0;
      spec.grad.clip_coef = 0.75;
      spec.n = n;
      spec.topk = sp ? 0.1 : 0.0;
      spec.seed = seed;
      Problem p = Problem::Generate(spec);
      if (specials) InjectSpecials(p, 0.05, seed);
      // A canary in the low-precision output: the kernel writes zeros up to the word boundary
      // and nothing after it.
      std::memset(p.buf.out16.data(), 0xab, p.buf.out16.size());

      const UpdateBuffers in = p.buf.Clone();
      UpdateBuffers exp = p.buf.Clone();
      ReferenceUpdate(p, exp);
      if (o != DType::kFp32) {
        const uint64_t end = hls::WordsFor(n, 2) * hls::kHalfLanes;
        for (uint64_t i = n; i < end; ++i) exp.out16.as<uint16_t>()[i] = 0;
      }
      const uint32_t err = p.Run();
      ASSERT_EQ(err, 0u) << "kernel reported error 0x" << std::hex << err;

      std::ostringstream ctx;
      ctx << "variant=" << var.name << " grad=" << DTypeName(g) << " out=" << OutDTypeName(o)
          << (sp ? " sparse" : " dense") << (ftz ? " ftz" : " ieee") << " n=" << n
          << " seed=0x" << std::hex << seed << (specials ? " specials" : "");
      const std::pair<const char*, std::pair<const AlignedBuffer*, const AlignedBuffer*>> bufs[] = {
          {"theta", {&exp.theta, &p.buf.theta}}, {"m", {&exp.m, &p.buf.m}},
          {"v", {&exp.v, &p.buf.v}},             {"status", {&exp.status, &p.buf.status}}};
      for (const auto& [nm, pr] : bufs) {
        const std::string r = CompareBuffers(nm, *pr.first, *pr.second, 4, ctx.str());
        if (!r.empty()) {
          // Show the inputs of the first mismatching element.
          uint64_t i = 0;
          while (i * 4 < pr.first->size() &&
                 std::memcmp(pr.first->data() + i * 4, pr.second->data() + i * 4, 4) == 0) ++i;
          ADD_FAILURE() << r << "\n  " << DescribeInputs(p, in, i);
        }
      }
      const std::string r16 = CompareBuffers("out16", exp.out16, p.buf.out16, 2, ctx.str());
      if (!r16.empty()) ADD_FAILURE() << r16;
      // Inputs the kernel only reads must be untouched.
      EXPECT_TRUE(in.grad.SameBytes(p.buf.grad)) << ctx.str();
      EXPECT_TRUE(in.sp_idx.SameBytes(p.buf.sp_idx)) << ctx.str();
      EXPECT_TRUE(in.sp_blk.SameBytes(p.buf.sp_blk)) << ctx.str();
      if (HasFailure()) return;
      ++case_no;
    }
  }
  EXPECT_EQ(case_no, static_cast<int>(2 * std::size(kSizes)));
}

INSTANTIATE_TEST_SUITE_P(
    AllConfigs, KernelVsReference,
    ::testing::Combine(::testing::Range(0, static_cast<int>(AllVariants().size())),
                       ::testing::Values(DType::kFp32, DType::kFp16, DType::kBf16),
                       ::testing::Values(DType::kFp32, DType::kFp16, DType::kBf16),
                       ::testing::Bool(), ::testing::Bool()),
    Name);

// ---------------------------------------------------------------------------------------------
// The status word's integrity lanes (mode.h): CRCs, non-finite count and position, AXI report.

constexpr HostDatapath kDatapaths[] = {HostDatapath::kSpecialised, HostDatapath::kGeneral};

const char* DatapathName(HostDatapath dp) {
  return dp == HostDatapath::kGeneral ? "general" : "specialised";
}

// A copy of `in` run on one of the host model's datapaths.
UpdateBuffers RunOn(const Problem& p, const UpdateBuffers& in, HostDatapath dp) {
  UpdateBuffers b = in.Clone();
  b.SetScalars(p.spec.n, p.nnz, p.launch);
  InvokeUpdate(WordsOf(b), dp);
  return b;
}

std::string Hex32(uint32_t x) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", x);
  return b;
}

// Lanes 4..12 of a launch that ran (in: buffers before, out: after), each recomputed here from
// the buffers: zlib's crc32 over exactly n elements, and a plain count of all-ones exponents.
// Returns "" or every differing lane with its expected and actual value in hex.
std::string CheckIntegrityLanes(const Problem& p, const UpdateBuffers& in,
                                const UpdateBuffers& out) {
  hls::Mode md{};
  hls::DecodeMode(p.launch.mode, &md);
  const uint32_t n = p.spec.n;
  const bool um = hls::UsesM(md), uv = hls::UsesV(md);
  uint64_t count = 0;
  uint32_t first = hls::kStatusNoPosition;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t vals[3] = {out.theta.as<uint32_t>()[i], um ? out.m.as<uint32_t>()[i] : 0u,
                              uv ? out.v.as<uint32_t>()[i] : 0u};
    for (uint32_t x : vals) {
      if ((x & 0x7f800000u) == 0x7f800000u) {
        ++count;
        if (first == hls::kStatusNoPosition) first = i;
      }
    }
  }
  const std::pair<unsigned, uint32_t> exp[] = {
      {hls::kStatusCrcThetaIn, ReferenceCrc(in.theta, n)},
      {hls::kStatusCrcMIn, um ? ReferenceCrc(in.m, n) : 0u},
      {hls::kStatusCrcVIn, uv ? ReferenceCrc(in.v, n) : 0u},
      {hls::kStatusCrcThetaOut, ReferenceCrc(out.theta, n)},
      {hls::kStatusCrcMOut, um ? ReferenceCrc(out.m, n) : 0u},
      {hls::kStatusCrcVOut, uv ? ReferenceCrc(out.v, n) : 0u},
      {hls::kStatusNonFinite, static_cast<uint32_t>(count)},
      {hls::kStatusNonFinitePos, first},
      {hls::kStatusAxiError, 0u}};
  static const char* const kNames[] = {"crc theta in", "crc m in", "crc v in",
                                       "crc theta out", "crc m out", "crc v out",
                                       "non-finite count", "non-finite position", "axi error"};
  std::string r;
  const uint32_t* st = out.status.as<uint32_t>();
  for (const auto& [lane, e] : exp) {
    if (st[lane] != e) {
      r += std::string(r.empty() ? "" : "; ") + "lane " + std::to_string(lane) + " (" +
           kNames[lane - hls::kStatusCrcThetaIn] + "): EXP=" + Hex32(e) + " GOT=" + Hex32(st[lane]);
    }
  }
  return r;
}

// The CRC lanes equal zlib's crc32 of the arrays as read and as written, and the non-finite
// lanes a plain count over the arrays written, on every configuration, on the general datapath
// and on the specialised one with each CRC implementation the processor has (VPCLMULQDQ: folded
// in its loops; the others: around them in chunks), at sizes around a word, a tile (1024), a
// block of the specialised loops and its chunk (8192), with special values (NaN payloads,
// infinities, ...) in the state and the gradient.
class KernelIntegrity : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { crc_was_ = hls::host::ActiveCrcImpl(); }
  void TearDown() override { hls::host::SetCrcImpl(crc_was_); }
  hls::host::CrcImpl crc_was_ = hls::host::CrcImpl::kTable;
};

TEST_P(KernelIntegrity, LanesEqualZlibAndAPlainCount) {
  const auto& [vi, g, o, sp, ftz] = GetParam();
  const Variant var = AllVariants()[vi];
  for (uint32_t n : {1u, 15u, 17u, 31u, 32u, 33u, 100u, 1023u, 8191u, 8193u, 16400u}) {
    for (int specials = 0; specials < 2; ++specials) {
      const uint64_t seed = 0xc4c00000u + static_cast<uint64_t>(vi) * 131u + n + specials;
      ProblemSpec spec;
      spec.hyper = var.cfg;
      spec.step = var.step;
      spec.grad.grad = g;
      spec.grad.out = o;
      spec.grad.ftz = ftz;
      spec.grad.loss_scale = g == DType::kFp16 ? 1024.0 : 1.0;
      spec.n = n;
      spec.topk = sp ? 0.1 : 0.0;
      spec.seed = seed;
      Problem p = Problem::Generate(spec);
      if (specials) InjectSpecials(p, 0.05, seed);
      const std::pair<HostDatapath, hls::host::CrcImpl> runs[] = {
          {HostDatapath::kSpecialised, hls::host::CrcImpl::kVpclmul},
          {HostDatapath::kSpecialised, hls::host::CrcImpl::kPclmul},
          {HostDatapath::kSpecialised, hls::host::CrcImpl::kTable},
          {HostDatapath::kGeneral, hls::host::CrcImpl::kTable}};
      for (const auto& [dp, impl] : runs) {
        if (!hls::host::SetCrcImpl(impl)) continue;  // not on this processor
        const UpdateBuffers out = RunOn(p, p.buf, dp);
        ASSERT_EQ(out.status.as<uint32_t>()[hls::kStatusError], 0u);
        const std::string r = CheckIntegrityLanes(p, p.buf, out);
        ASSERT_EQ(r, "") << DatapathName(dp) << " crc=" << hls::host::CrcImplName(impl)
                         << " variant=" << var.name
                         << " grad=" << DTypeName(g) << " out=" << OutDTypeName(o)
                         << (sp ? " sparse" : " dense") << (ftz ? " ftz" : " ieee") << " n=" << n
                         << " seed=0x" << std::hex << seed << (specials ? " specials" : "");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllConfigs, KernelIntegrity,
    ::testing::Combine(::testing::Range(0, static_cast<int>(AllVariants().size())),
                       ::testing::Values(DType::kFp32, DType::kFp16, DType::kBf16),
                       ::testing::Values(DType::kFp32, DType::kFp16, DType::kBf16),
                       ::testing::Bool(), ::testing::Bool()),
    Name);

// Outputs that overflow binary32 from finite inputs and hyper-parameters (a huge unscale factor
// times a gradient of 2, or a huge lr): the non-finite count and the first position are right,
// on both datapaths, on every optimizer variant and gradient dtype, and the whole status word
// equals the reference's.
TEST(KernelIntegrity, OverflowCountsNonFiniteOutputsAndTheFirstPosition) {
  int cases = 0;  // those with a known first position
  for (const Variant& var : AllVariants()) {
    for (DType g : {DType::kFp32, DType::kFp16, DType::kBf16}) {
      for (uint32_t n : {1000u, 20001u}) {
        for (Overflow how : {Overflow::kHugeUnscale, Overflow::kHugeLr}) {
          std::vector<uint32_t> hot = {n - 1, 500, 37};
          if (n > 8200) hot.push_back(8200);
          const uint64_t seed = 0x0f10u + n + static_cast<uint64_t>(g) * 7u;
          Problem p = OverflowProblem(var, g, DType::kFp16, n, how, hot, seed);
          UpdateBuffers ref = p.buf.Clone();
          ReferenceUpdate(p, ref);
          std::ostringstream ctx;
          ctx << "variant=" << var.name << " grad=" << DTypeName(g) << " n=" << n
              << (how == Overflow::kHugeUnscale ? " unscale=3e38" : " lr=3e38") << " seed=0x"
              << std::hex << seed;
          for (HostDatapath dp : kDatapaths) {
            const UpdateBuffers out = RunOn(p, p.buf, dp);
            const std::string c = std::string(DatapathName(dp)) + " " + ctx.str();
            ASSERT_EQ(CheckIntegrityLanes(p, p.buf, out), "") << c;
            ASSERT_EQ(DiffBuffers("status", ref.status, out.status, 4, c), "");
            const uint32_t* st = out.status.as<uint32_t>();
            if (how == Overflow::kHugeUnscale) {
              // The unscaled gradient is +inf exactly at the hot elements, and every rule
              // carries it into theta', m' or v' there (Lion into m' only); elsewhere the
              // gradient is 0 and the state ordinary, so nothing else overflows.
              EXPECT_GE(st[hls::kStatusNonFinite], hot.size()) << c;
              EXPECT_LE(st[hls::kStatusNonFinite], 3 * hot.size()) << c;
              EXPECT_EQ(st[hls::kStatusNonFinitePos], 37u) << c;
            }
            if (var.cfg.opt == Optimizer::kSgd) {
              // SGD's theta' = theta - lr * u overflows exactly at the hot elements either way.
              EXPECT_EQ(st[hls::kStatusNonFinitePos], 37u) << c;
            }
          }
          // (Adam, Adagrad and Lion normalise or take the sign of the update, so a huge lr
          // overflows theta' only where the state makes the update large: no fixed position.)
          if (how == Overflow::kHugeUnscale || var.cfg.opt == Optimizer::kSgd) ++cases;
        }
      }
    }
  }
  int sgd = 0;
  for (const Variant& var : AllVariants()) sgd += var.cfg.opt == Optimizer::kSgd ? 1 : 0;
  EXPECT_EQ(cases, (static_cast<int>(AllVariants().size()) + sgd) * 3 * 2);
}

// The unused state of an optimizer is neither read nor written: poison it and check.
TEST(Kernel, UnusedStateUntouched) {
  for (const Variant& var : AllVariants()) {
    ProblemSpec spec;
    spec.hyper = var.cfg;
    spec.step = var.step;
    spec.n = 1000;
    Problem p = Problem::Generate(spec);
    hls::Mode md{};
    ASSERT_TRUE(hls::DecodeMode(p.launch.mode, &md));
    if (!hls::UsesM(md)) std::memset(p.buf.m.data(), 0xcd, p.buf.m.size());
    if (!hls::UsesV(md)) std::memset(p.buf.v.data(), 0xcd, p.buf.v.size());
    const UpdateBuffers in = p.buf.Clone();
    for (HostDatapath dp : kDatapaths) {
      const UpdateBuffers out = RunOn(p, in, dp);
      ASSERT_EQ(out.status.as<uint32_t>()[hls::kStatusError], 0u);
      if (!hls::UsesM(md)) {
        EXPECT_TRUE(in.m.SameBytes(out.m)) << var.name << " " << DatapathName(dp);
      }
      if (!hls::UsesV(md)) {
        EXPECT_TRUE(in.v.SameBytes(out.v)) << var.name << " " << DatapathName(dp);
      }
      // No low-precision copy requested: out16 untouched.
      EXPECT_TRUE(in.out16.SameBytes(out.out16)) << var.name << " " << DatapathName(dp);
      // The lanes of state the optimizer does not have are 0 (the poison would give a CRC).
      const uint32_t* st = out.status.as<uint32_t>();
      for (unsigned lane : {hls::kStatusCrcMIn, hls::kStatusCrcMOut}) {
        if (!hls::UsesM(md)) {
          EXPECT_EQ(st[lane], 0u) << var.name << " " << DatapathName(dp) << " lane " << lane
                                  << " GOT=" << Hex32(st[lane]);
        }
      }
      for (unsigned lane : {hls::kStatusCrcVIn, hls::kStatusCrcVOut}) {
        if (!hls::UsesV(md)) {
          EXPECT_EQ(st[lane], 0u) << var.name << " " << DatapathName(dp) << " lane " << lane
                                  << " GOT=" << Hex32(st[lane]);
        }
      }
      EXPECT_EQ(CheckIntegrityLanes(p, in, out), "") << var.name << " " << DatapathName(dp);
    }
  }
}

// A launch with a bad mode word, or a dense launch claiming sparse entries, writes only status.
TEST(Kernel, BadModeWritesNothing) {
  ProblemSpec spec;
  spec.n = 777;
  Problem p = Problem::Generate(spec);
  const uint32_t bad_modes[] = {
      7u,                                        // unknown optimizer
      3u << hls::kModeGradShift,                 // unknown grad dtype
      3u << hls::kModeOutShift,                  // unknown out dtype
      1u << 20,                                  // unknown bit
      hls::kModeL2,                              // L2 on AdamW (decoupled decay only)
      hls::kModeMomentum,                        // SGD flag on AdamW
      static_cast<uint32_t>(Optimizer::kSgd) | hls::kModeNesterov,  // Nesterov without momentum
  };
  for (HostDatapath dp : kDatapaths) {
    for (uint32_t mode : bad_modes) {
      UpdateBuffers b = p.buf.Clone();
      KernelLaunch k = p.launch;
      k.mode = mode;
      b.SetScalars(p.spec.n, 0, k);
      EXPECT_EQ(InvokeUpdate(WordsOf(b), dp), hls::kErrBadMode)
          << DatapathName(dp) << " mode=0x" << std::hex << mode;
      EXPECT_TRUE(b.theta.SameBytes(p.buf.theta) && b.m.SameBytes(p.buf.m) &&
                  b.v.SameBytes(p.buf.v) && b.out16.SameBytes(p.buf.out16))
          << DatapathName(dp) << " mode=0x" << std::hex << mode;
      EXPECT_EQ(b.status.as<uint32_t>()[hls::kStatusMagic], hls::kStatusMagicValue);
      EXPECT_EQ(b.status.as<uint32_t>()[hls::kStatusElems], 0u);
      // Nothing was read or written: every integrity lane reports 0 (the position: none).
      EXPECT_EQ(CheckNothingWrittenLanes(b.status), "")
          << DatapathName(dp) << " mode=0x" << std::hex << mode;
    }
    UpdateBuffers b = p.buf.Clone();
    b.SetScalars(p.spec.n, 5, p.launch);
    EXPECT_EQ(InvokeUpdate(WordsOf(b), dp), hls::kErrCount) << DatapathName(dp);
    EXPECT_TRUE(b.theta.SameBytes(p.buf.theta)) << DatapathName(dp);
    EXPECT_EQ(CheckNothingWrittenLanes(b.status), "") << DatapathName(dp) << " kErrCount";
  }
}

// n = 0 is a valid, empty launch: only the status word is written.
TEST(Kernel, EmptyLaunch) {
  ProblemSpec spec;
  spec.n = 64;
  Problem p = Problem::Generate(spec);
  for (HostDatapath dp : kDatapaths) {
    UpdateBuffers b = p.buf.Clone();
    b.SetScalars(0, 0, p.launch);
    EXPECT_EQ(InvokeUpdate(WordsOf(b), dp), 0u);
    EXPECT_TRUE(b.theta.SameBytes(p.buf.theta));
    EXPECT_EQ(b.status.as<uint32_t>()[hls::kStatusElems], 0u);
    EXPECT_EQ(b.status.as<uint32_t>()[hls::kStatusMagic], hls::kStatusMagicValue);
    // No element: the CRC of no bytes (0), no non-finite value.
    EXPECT_EQ(CheckNothingWrittenLanes(b.status), "") << DatapathName(dp);
  }
}

}  // namespace
}  // namespace csdkit::testing
