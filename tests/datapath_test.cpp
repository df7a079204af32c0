// The host model's specialised datapath (hls/host/datapath.h: one loop per optimizer, L2,
// policy, gradient and copy dtype, run by csd_update) against the one runtime-selected datapath
// of the HLS, RTL and OpenCL builds (csd_update_general): bit for bit on every byte of every
// buffer, on every configuration, with special values (NaN payloads, infinities, signed zeros,
// subnormals, huge values) at a high rate, on each instruction set the processor runs, the
// status word's integrity lanes included, computed both ways the specialised datapath has:
// folded into its loops (VPCLMULQDQ) and around them in chunks (any other CRC implementation).
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "csdkit/hls/word.h"
#include "csdkit/platform/problem.h"
#include "csdkit/platform/update_launch.h"
#include "crc_fast.h"
#include "datapath.h"
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

}  // namespace
}  // namespace csdkit::testing
