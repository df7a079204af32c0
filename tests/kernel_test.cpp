// The kernel top (tiles, words, merge decoder, unified datapath) against the plain reference
// loop (textbook rules, scatter decode): bit for bit on every byte of every buffer, over every
// optimizer variant x gradient dtype x output dtype x dense/sparse x IEEE/FTZ, sizes that are and
// are not multiples of the lane count, the tile and the sparse block, with special values.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <tuple>

#include "csdkit/hls/sparse.h"
#include "csdkit/hls/word.h"
#include "csdkit/platform/problem.h"
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
    ASSERT_EQ(p.Run(), 0u);
    if (!hls::UsesM(md)) {
      EXPECT_TRUE(in.m.SameBytes(p.buf.m)) << var.name;
    }
    if (!hls::UsesV(md)) {
      EXPECT_TRUE(in.v.SameBytes(p.buf.v)) << var.name;
    }
    // No low-precision copy requested: out16 untouched.
    EXPECT_TRUE(in.out16.SameBytes(p.buf.out16)) << var.name;
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
  for (uint32_t mode : bad_modes) {
    UpdateBuffers b = p.buf.Clone();
    KernelLaunch k = p.launch;
    k.mode = mode;
    EXPECT_EQ(RunUpdate(b, p.spec.n, 0, k), hls::kErrBadMode) << "mode=0x" << std::hex << mode;
    EXPECT_TRUE(b.theta.SameBytes(p.buf.theta) && b.m.SameBytes(p.buf.m) &&
                b.v.SameBytes(p.buf.v) && b.out16.SameBytes(p.buf.out16))
        << "mode=0x" << std::hex << mode;
    EXPECT_EQ(b.status.as<uint32_t>()[hls::kStatusMagic], hls::kStatusMagicValue);
    EXPECT_EQ(b.status.as<uint32_t>()[hls::kStatusElems], 0u);
  }
  UpdateBuffers b = p.buf.Clone();
  EXPECT_EQ(RunUpdate(b, p.spec.n, 5, p.launch), hls::kErrCount);
  EXPECT_TRUE(b.theta.SameBytes(p.buf.theta));
}

// n = 0 is a valid, empty launch: only the status word is written.
TEST(Kernel, EmptyLaunch) {
  ProblemSpec spec;
  spec.n = 64;
  Problem p = Problem::Generate(spec);
  UpdateBuffers b = p.buf.Clone();
  EXPECT_EQ(RunUpdate(b, 0, 0, p.launch), 0u);
  EXPECT_TRUE(b.theta.SameBytes(p.buf.theta));
  EXPECT_EQ(b.status.as<uint32_t>()[hls::kStatusElems], 0u);
  EXPECT_EQ(b.status.as<uint32_t>()[hls::kStatusMagic], hls::kStatusMagicValue);
}

}  // namespace
}  // namespace csdkit::testing
