// The host model's specialised datapath (hls/host/datapath.h: one loop per optimizer, L2,
// policy, gradient and copy dtype, run by csd_update) against the one runtime-selected datapath
// of the HLS, RTL and OpenCL builds (csd_update_general): bit for bit on every byte of every
// buffer, on every configuration, with special values (NaN payloads, infinities, signed zeros,
// subnormals, huge values) at a high rate, on each instruction set the processor runs, the
// status word's integrity lanes included, computed both ways the specialised datapath has:
// folded into its loops (VPCLMULQDQ) and around them in chunks (any other CRC implementation).
// Then the steps of its q8 formats (datapath_q8.h) against the state_q8.h functions they
// replace, on inputs chosen at the edges: every code under special absmax values, every
// threshold of both maps and its neighbours, tiny, huge and non-finite blocks, counters whose
// low word wraps. (The q8 launches as a whole: state_q8_kernel_test.)
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cstring>
#include <iterator>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "csdkit/hls/state_q8.h"
#include "csdkit/hls/word.h"
#include "csdkit/platform/problem.h"
#include "csdkit/platform/splitmix.h"
#include "csdkit/platform/update_launch.h"
#include "crc_fast.h"
#include "datapath.h"
#include "datapath_q8.h"
#include "test_util.h"

namespace csdkit::testing {
namespace {

namespace hh = hls::host;

// Sizes below, at and past a word, a tile (1024) and a sparse block (65536), and one long
// enough for the streaming stores of the low-precision copy (spans of 2^20 elements and more).
constexpr uint32_t kSizes[] = {1, 17, 1024, 1057, 65536 + 97, (1u << 20) + 97};

std::vector<hh::Isa> Isas() {
  std::vector<hh::Isa> r{hh::Isa::kAvx2};
  if (hh::HasAvx512()) r.push_back(hh::Isa::kAvx512);
  return r;
}

// The CRC implementations to run the specialised datapath with: the default (VPCLMULQDQ where
// present: the lanes folded into the loops) and one that computes them around the loops.
std::vector<hh::CrcImpl> CrcImpls() {
  std::vector<hh::CrcImpl> r{hh::ActiveCrcImpl()};
  r.push_back(hh::HasCrcImpl(hh::CrcImpl::kPclmul) && r[0] != hh::CrcImpl::kPclmul
                  ? hh::CrcImpl::kPclmul
                  : hh::CrcImpl::kTable);
  return r;
}

using Param = std::tuple<int, DType, DType, bool, bool>;  // variant, grad, out, sparse, ftz

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [vi, g, o, sp, ftz] = info.param;
  return std::string(AllVariants()[vi].name) + "_" + DTypeName(g) + "_" + OutDTypeName(o) +
         (sp ? "_sparse" : "_dense") + (ftz ? "_ftz" : "_ieee");
}

class SpecialisedDatapath : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { crc_was_ = hh::ActiveCrcImpl(); }
  void TearDown() override {
    hh::SetIsa(hh::HasAvx512() ? hh::Isa::kAvx512 : hh::Isa::kAvx2);
    hh::SetCrcImpl(crc_was_);
  }
  hh::CrcImpl crc_was_ = hh::CrcImpl::kTable;
};

TEST_P(SpecialisedDatapath, EqualsTheGeneralOneBitForBit) {
  const auto& [vi, g, o, sp, ftz] = GetParam();
  const Variant var = AllVariants()[vi];
  int cases = 0, expected = 0;
  // Every size with the default CRC implementation, and every size but the longest with the
  // other one (it changes only where the CRCs are computed).
  const std::vector<hh::CrcImpl> impls = CrcImpls();
  std::vector<std::pair<uint32_t, hh::CrcImpl>> runs;
  for (uint32_t n : kSizes) {
    for (hh::CrcImpl impl : impls) {
      if (impl == impls[0] || n <= (1u << 20)) runs.emplace_back(n, impl);
    }
  }
  for (hh::Isa isa : Isas()) {
    ASSERT_TRUE(hh::SetIsa(isa));
    for (const auto& [n, impl] : runs) {
      ASSERT_TRUE(hh::SetCrcImpl(impl));
      expected += 2;
      for (double special : {0.0, 0.3}) {
        const uint64_t seed = 0xd47a0000u + static_cast<uint64_t>(vi) * 104729u + n +
                              (special > 0 ? 1 : 0);
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
        if (special > 0) InjectSpecials(p, special, seed);
        std::memset(p.buf.out16.data(), 0xab, p.buf.out16.size());  // canary past the copy
        const UpdateBuffers in = p.buf.Clone();
        UpdateBuffers general = p.buf.Clone(), fast = p.buf.Clone();
        general.SetScalars(n, p.nnz, p.launch);
        fast.SetScalars(n, p.nnz, p.launch);
        ASSERT_EQ(InvokeUpdate(WordsOf(general), HostDatapath::kGeneral), 0u);
        ASSERT_EQ(InvokeUpdate(WordsOf(fast), HostDatapath::kSpecialised), 0u);
        std::ostringstream ctx;
        ctx << "isa=" << hh::IsaName(isa) << " crc=" << hh::CrcImplName(impl)
            << (hh::FusedIntegrity() ? " (fused)" : " (chunked)") << " variant=" << var.name
            << " grad=" << DTypeName(g)
            << " out=" << OutDTypeName(o) << (sp ? " sparse" : " dense")
            << (ftz ? " ftz" : " ieee") << " n=" << n << " seed=0x" << std::hex << seed
            << " specials=" << special;
        const std::pair<const char*, std::pair<const AlignedBuffer*, const AlignedBuffer*>> bufs[] = {
            {"theta", {&general.theta, &fast.theta}}, {"m", {&general.m, &fast.m}},
            {"v", {&general.v, &fast.v}},             {"status", {&general.status, &fast.status}}};
        for (const auto& [nm, pr] : bufs) {
          const std::string r = CompareBuffers(nm, *pr.first, *pr.second, 4, ctx.str());
          if (!r.empty()) {
            uint64_t i = 0;
            while (i * 4 < pr.first->size() &&
                   std::memcmp(pr.first->data() + i * 4, pr.second->data() + i * 4, 4) == 0) {
              ++i;
            }
            ADD_FAILURE() << r << "\n  " << DescribeInputs(p, in, i);
          }
        }
        const std::string r16 = CompareBuffers("out16", general.out16, fast.out16, 2, ctx.str());
        if (!r16.empty()) ADD_FAILURE() << r16;
        if (HasFailure()) return;
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, expected);
}

INSTANTIATE_TEST_SUITE_P(
    AllConfigs, SpecialisedDatapath,
    ::testing::Combine(::testing::Range(0, static_cast<int>(AllVariants().size())),
                       ::testing::Values(DType::kFp32, DType::kFp16, DType::kBf16),
                       ::testing::Values(DType::kFp32, DType::kFp16, DType::kBf16),
                       ::testing::Bool(), ::testing::Bool()),
    Name);

// The instruction set is the widest the processor has unless chosen; one it lacks is refused.
TEST(SpecialisedDatapathIsa, WidestByDefaultAndRefusesWhatTheProcessorLacks) {
  EXPECT_EQ(hh::ActiveIsa(), hh::HasAvx512() ? hh::Isa::kAvx512 : hh::Isa::kAvx2);
  EXPECT_EQ(hh::SetIsa(hh::Isa::kAvx512), hh::HasAvx512());
  EXPECT_TRUE(hh::SetIsa(hh::Isa::kAvx2));
  EXPECT_EQ(hh::ActiveIsa(), hh::Isa::kAvx2);
  hh::SetIsa(hh::HasAvx512() ? hh::Isa::kAvx512 : hh::Isa::kAvx2);
  std::printf("specialised datapath: %s (AVX-512 %s)\n", hh::IsaName(hh::ActiveIsa()),
              hh::HasAvx512() ? "present: both instruction sets tested" : "absent: AVX2 only");
}

// The FTZ loops set MXCSR's DAZ bit around themselves (datapath_isa.cpp): after an FTZ launch
// the caller's MXCSR, but for the sticky exception flags, is as it was, DAZ off or on.
TEST(SpecialisedDatapathFtz, RestoresTheCallersMxcsr) {
  ASSERT_TRUE(hh::DazHonoured())
      << "this processor ignores MXCSR's DAZ bit (as valgrind does): the kernel runs FTZ "
         "launches on the general datapath, and the specialised one's FTZ loops give other bits";
  constexpr unsigned int kFlags = 0x3fu, kDaz = 0x40u;
  const unsigned int csr0 = _mm_getcsr();
  for (const unsigned int caller : {csr0 & ~kDaz, csr0 | kDaz}) {
    ProblemSpec spec;
    spec.hyper = AllVariants()[0].cfg;
    spec.step = AllVariants()[0].step;
    spec.grad.ftz = true;
    spec.n = 4096 + 3;
    spec.seed = 0x3c5;
    Problem p = Problem::Generate(spec);
    p.buf.SetScalars(spec.n, p.nnz, p.launch);
    _mm_setcsr(caller);
    const uint32_t err = InvokeUpdate(WordsOf(p.buf), HostDatapath::kSpecialised);
    const unsigned int after = _mm_getcsr();
    _mm_setcsr(csr0);
    ASSERT_EQ(err, 0u);
    EXPECT_EQ(after & ~kFlags, caller & ~kFlags)
        << std::hex << "MXCSR before 0x" << caller << ", after 0x" << after;
  }
}

// ---------------------------------------------------------------------------------------------
// The q8 steps.

using hls::F2U;
using hls::U2F;
constexpr uint32_t kBlock = hls::kQ8Block;

// Binary32 patterns at the edges: zeros, the smallest and largest subnormals and normals, one,
// infinities, NaNs with and without payload, each signed.
const uint32_t kEdges[] = {0x00000000u, 0x00000001u, 0x007fffffu, 0x00800000u, 0x3f000000u,
                           0x3f800000u, 0x7f7fffffu, 0x7f800000u, 0x7fc00000u, 0x7f800001u,
                           0x7fffffffu, 0x3dcccccdu, 0x1e3ce508u, 0x5f000000u};

// The q8 steps' builds: each instruction set, and the 512-bit one with and without its VBMI
// dequantization.
struct Q8Build {
  hh::Isa isa;
  bool vbmi;
};
std::string Q8BuildName(const Q8Build& b) {
  return std::string(hh::IsaName(b.isa)) + (b.vbmi ? "_vbmi" : "");
}
void PrintTo(const Q8Build& b, std::ostream* os) { *os << Q8BuildName(b); }

class SpecialisedQ8Steps : public ::testing::TestWithParam<Q8Build> {
 protected:
  void SetUp() override {
    if (!hh::SetIsa(GetParam().isa) || !hh::SetVbmi(GetParam().vbmi)) {
      GTEST_SKIP() << "the processor lacks " << Q8BuildName(GetParam());
    }
  }
  void TearDown() override {
    hh::SetIsa(hh::HasAvx512() ? hh::Isa::kAvx512 : hh::Isa::kAvx2);
    hh::SetVbmi(hh::HasVbmi());
  }
};

// Every code of both maps, each block under one absmax of kEdges (both signs), under both
// policies.
TEST_P(SpecialisedQ8Steps, DequantEveryCodeUnderEdgeAbsmax) {
  std::vector<uint32_t> absmax;
  for (uint32_t e : kEdges) {
    absmax.push_back(e);
    absmax.push_back(e | hls::kSignMask);
  }
  const uint32_t blocks = static_cast<uint32_t>(absmax.size());
  std::vector<uint8_t> codes(size_t{blocks} * kBlock);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 7 + i / kBlock);
  std::vector<uint32_t> got(codes.size());
  for (bool ftz : {false, true}) {
    const hls::Fp32 f(ftz);
    for (bool is_signed : {true, false}) {
      hh::DequantQ8Blocks(codes.data(), absmax.data(), blocks, is_signed, ftz, got.data());
      for (size_t i = 0; i < codes.size(); ++i) {
        const uint32_t want = F2U(hls::DequantQ8(codes[i], U2F(absmax[i / kBlock]), is_signed, f));
        ASSERT_EQ(got[i], want) << std::hex << "build=" << Q8BuildName(GetParam())
                                << " ftz=" << ftz << " signed=" << is_signed << " code=0x"
                                << unsigned{codes[i]} << " absmax=0x" << absmax[i / kBlock]
                                << " GOT=0x" << got[i] << " EXP=0x" << want;
      }
    }
  }
}

// Blocks whose values are every threshold of the map and its two neighbours (absmax 1.0, so
// that q is the value itself), every map value, values scaled by other absmax values, tiny,
// zero, huge (1 / absmax subnormal) and non-finite blocks, and mixed subnormals; both policies.
TEST_P(SpecialisedQ8Steps, QuantizeThresholdsAndEdgeBlocks) {
  SplitMix64 rng{0x9a5eed};
  for (bool is_signed : {true, false}) {
    const uint32_t* thr = is_signed ? hls::kQ8SignedThr : hls::kQ8UnsignedThr;
    const uint32_t nthr = is_signed ? 127u : 255u;
    std::vector<uint32_t> vals;
    for (uint32_t t = 0; t < nthr; ++t) {
      for (uint32_t d : {thr[t] - 1u, thr[t], thr[t] + 1u}) vals.push_back(d);
    }
    for (uint32_t c = 0; c < 256u; ++c) {
      vals.push_back(is_signed ? hls::kQ8SignedMag[c & 0x7fu] : hls::kQ8Unsigned[c]);
    }
    std::vector<uint32_t> x;
    // Absmax exactly 1.0: element 0 of each block is +-1.0, the rest the values above.
    for (size_t i = 0; i < vals.size(); ++i) {
      if (x.size() % kBlock == 0) x.push_back(0x3f800000u | (rng.Next() & 1u) << 31);
      const uint32_t sign = is_signed ? static_cast<uint32_t>(rng.Next() & 1u) << 31 : 0u;
      x.push_back(vals[i] | sign);
    }
    while (x.size() % kBlock != 0) x.push_back(0u);
    // Random magnitudes over many binades under random absmax values, with subnormals mixed in.
    for (int b = 0; b < 24; ++b) {
      const uint32_t scale = static_cast<uint32_t>(rng.Next() % 200u) + 30u;  // exponent
      for (uint32_t i = 0; i < kBlock; ++i) {
        uint32_t u = static_cast<uint32_t>(rng.Next());
        u = (u & 0x807fffffu) | ((scale - static_cast<uint32_t>(rng.Next() % 30u)) << 23);
        if (rng.Next() % 16u == 0u) u &= 0x807fffffu;  // a subnormal (or zero)
        x.push_back(is_signed ? u : u & 0x7fffffffu);
      }
    }
    // Edge blocks: all zero (signs mixed), all subnormal, one huge value, a non-finite value
    // first, last, and in the middle of an otherwise ordinary block.
    const size_t edge0 = x.size();
    for (uint32_t i = 0; i < kBlock; ++i) x.push_back((i & 1u) << 31);
    for (uint32_t i = 0; i < kBlock; ++i) x.push_back((i * 977u & 0x7fffffu) | (i & 2u) << 30);
    for (uint32_t i = 0; i < kBlock; ++i) x.push_back(i == 17 ? 0x7f7fffffu : 0x3e000000u + i);
    for (uint32_t e : {0x7f800000u, 0x7fc00000u, 0xff800001u}) {
      for (uint32_t at : {0u, kBlock - 1, 100u}) {
        for (uint32_t i = 0; i < kBlock; ++i) x.push_back(i == at ? e : 0x3c000000u + i * 31u);
      }
    }
    for (size_t i = edge0; i < x.size(); ++i) {
      if (!is_signed && (x[i] & hls::kExpMask) != hls::kExpMask) x[i] &= 0x7fffffffu;
    }
    const uint32_t blocks = static_cast<uint32_t>(x.size() / kBlock);
    for (bool ftz : {false, true}) {
      const hls::Fp32 f(ftz);
      std::vector<uint8_t> codes(x.size());
      std::vector<uint32_t> amax(blocks);
      const uint32_t bad =
          hh::QuantizeQ8Blocks(x.data(), blocks, is_signed, ftz, codes.data(), amax.data());
      uint32_t want_bad = 0;
      for (uint32_t b = 0; b < blocks; ++b) {
        float xf[kBlock];
        std::memcpy(xf, &x[size_t{b} * kBlock], sizeof xf);
        uint8_t want[kBlock];
        float want_amax;
        hls::QuantizeBlockQ8(xf, kBlock, is_signed, f, want, &want_amax);
        want_bad += hls::IsNonFinite(F2U(want_amax)) ? 1u : 0u;
        ASSERT_EQ(amax[b], F2U(want_amax)) << std::hex << "build=" << Q8BuildName(GetParam())
                                           << " ftz=" << ftz << " signed=" << is_signed
                                           << " block " << std::dec << b;
        for (uint32_t i = 0; i < kBlock; ++i) {
          ASSERT_EQ(codes[size_t{b} * kBlock + i], want[i])
              << std::hex << "build=" << Q8BuildName(GetParam()) << " ftz=" << ftz
              << " signed=" << is_signed << " x=0x" << x[size_t{b} * kBlock + i] << " absmax=0x"
              << amax[b] << " GOT=0x" << unsigned{codes[size_t{b} * kBlock + i]} << " EXP=0x"
              << unsigned{want[i]};
        }
      }
      EXPECT_EQ(bad, want_bad);
    }
  }
}

// Every 1021st binary32 pattern of [0, 1.0] as q itself (blocks whose absmax is 1.0), both
// maps, against the threshold search: the index look-ups partition [0, 1.0] into buckets by
// exponent and top mantissa bits (the narrowest spans 2^16 patterns), and a wrong bucket shows
// over its whole range of q. (Run with a stride of 1 once, outside the suite: all
// 2,130,739,200 values of both maps agreed. The stride keeps the sanitizer build's run short.)
TEST_P(SpecialisedQ8Steps, QuantizeIndexAcrossTheUnitInterval) {
  constexpr uint32_t kStride = 1021, kPer = kBlock - 1;
  const uint32_t values = 0x3f800000u / kStride + 1, blocks = (values + kPer - 1) / kPer;
  std::vector<uint32_t> x(size_t{blocks} * kBlock, 0u);
  for (uint32_t v = 0; v < values; ++v) {
    const size_t b = v / kPer;
    x[b * kBlock] = 0x3f800000u;
    x[b * kBlock + 1 + v % kPer] = v * kStride;
  }
  std::vector<uint8_t> codes(x.size());
  std::vector<uint32_t> amax(blocks);
  for (bool is_signed : {true, false}) {
    const uint32_t* thr = is_signed ? hls::kQ8SignedThr : hls::kQ8UnsignedThr;
    const uint32_t nthr = is_signed ? 127u : 255u;
    hh::QuantizeQ8Blocks(x.data(), blocks, is_signed, false, codes.data(), amax.data());
    for (uint32_t v = 0; v < values; ++v) {
      const size_t at = size_t{v / kPer} * kBlock + 1 + v % kPer;
      const uint32_t q = x[at];
      uint32_t want = hls::Q8Index(q, thr, nthr);
      if (want == 0u && q != 0u) want = 1u;
      ASSERT_EQ(codes[at], want) << std::hex << "build=" << Q8BuildName(GetParam())
                                 << " signed=" << is_signed << " q=0x" << q << " GOT=0x"
                                 << unsigned{codes[at]} << " EXP=0x" << want;
    }
  }
}

// Theta with edge values among random ones, rounded with the bits of element indices whose
// counter's low word wraps (and of a 64-bit index near its top), seeds and steps above 32 bits;
// 19 x 128 elements, so that both widths leave sets of counters after their last whole batch.
TEST_P(SpecialisedQ8Steps, StochasticRoundingAcrossCounterWraps) {
  SplitMix64 rng{0xb16f};
  constexpr uint32_t kLen = 2432;
  std::vector<uint32_t> theta(kLen);
  for (uint32_t i = 0; i < kLen; ++i) {
    theta[i] = i % 5 == 0 ? kEdges[(i / 5) % std::size(kEdges)] | (i & 8u) << 28
                          : static_cast<uint32_t>(rng.Next());
    if ((theta[i] & ~hls::kSignMask) > hls::kExpMask) theta[i] = hls::kCanonicalNan;
  }
  for (uint64_t index : {uint64_t{0}, (uint64_t{1} << 35) - 1024, ~uint64_t{0} - 4095}) {
    const uint64_t seed = 0x123456789abcdefull ^ index, step = 0x1'0000'0007ull;
    std::vector<uint16_t> got(kLen);
    const uint64_t nf = hh::RoundBf16Span(theta.data(), kLen, seed, step, index, got.data());
    uint64_t want_nf = 0;
    for (uint32_t i = 0; i < kLen; ++i) {
      const uint16_t want = hls::RoundBf16Stochastic(U2F(theta[i]),
                                                     hls::Random16(seed, step, index + i));
      want_nf += (want & 0x7f80u) == 0x7f80u ? 1u : 0u;
      ASSERT_EQ(got[i], want) << std::hex << "build=" << Q8BuildName(GetParam()) << " index=0x"
                              << index << " +" << std::dec << i << std::hex << " theta=0x"
                              << theta[i] << " GOT=0x" << got[i] << " EXP=0x" << want;
    }
    EXPECT_EQ(nf, want_nf);
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, SpecialisedQ8Steps,
                         ::testing::Values(Q8Build{hh::Isa::kAvx2, false},
                                           Q8Build{hh::Isa::kAvx512, false},
                                           Q8Build{hh::Isa::kAvx512, true}),
                         [](const ::testing::TestParamInfo<Q8Build>& i) {
                           return Q8BuildName(i.param);
                         });

}  // namespace
}  // namespace csdkit::testing
