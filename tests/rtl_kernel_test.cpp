// The RTL kernel (csd_update: the generated top around rtl/kernels/updater/csd_update_kernel.sv,
// through the AXI harness) against the host
// model: every byte of every buffer, every optimizer variant x gradient dtype x output dtype x
// dense/sparse x IEEE/FTZ, sizes that are not multiples of the lane count or of a burst, buffers
// spanning many 4 KiB pages, special values, several memory back-pressure seeds; the compressed
// state formats q8 / q8-bf16 (codes and absmax sharing their bundles); malformed sparse streams
// flagged with nothing but the status written; outputs that overflow (the integrity lanes); and
// the runtime on rtl devices.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "csdkit/emu/rtl_kernel.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/selftest.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/store.h"
#include "csdkit/system/device_set.h"
#include "test_util.h"

namespace csdkit::testing {
namespace {

class Rtl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!emu::RtlAvailable()) GTEST_SKIP() << "this build has no Verilated RTL";
  }
};

// One emulated SmartSSD with the RTL kernel (a device set of one).
std::unique_ptr<DeviceSet> RtlDevice(emu::RtlMemory mem, uint64_t seed) {
  DeviceSpec spec;
  spec.backend = Backend::kRtl;
  spec.link_model = false;
  spec.rtl.memory = mem;
  spec.rtl.seed = seed;
  return std::make_unique<DeviceSet>(spec);
}

// Every configuration of the selftest through the whole kernel under a stress memory model
// (random valid/ready gaps, latencies): one memory seed in the quick tests, a second seed
// (other gaps, other data) in the nightly ones (rtl/kernel.cmake).
void EveryConfigurationUnderBackPressure(std::initializer_list<uint64_t> seeds) {
  int launches = 0;
  for (uint64_t seed : seeds) {
    auto dev = RtlDevice(emu::RtlMemory::kStress, seed);
    SelfTestOptions so;
    so.sizes = {1, 15, 17, 1100};  // 1100: not a multiple of 16, 32 or of a 64-beat burst
    so.seed = seed * 1000;
    so.on_case = [&](const std::string& what, const std::string& diff) {
      if (!diff.empty()) ADD_FAILURE() << "memory seed " << seed << ": " << what << ": " << diff;
    };
    const SelfTestReport r = SelfTest((*dev)[0], so);
    launches += r.launches;
    EXPECT_EQ(r.failed, 0);
  }
  std::printf("%d RTL launches bit-exact with the model\n", launches);
}

TEST_F(Rtl, EveryConfigurationBitExactUnderBackPressure) {
  EveryConfigurationUnderBackPressure({1});
}

TEST_F(Rtl, EveryConfigurationBitExactUnderBackPressureSecondSeed) {
  EveryConfigurationUnderBackPressure({2});
}

// The compressed state formats through the whole kernel: each moment's codes and absmax arrays
// share one bundle (gmem1 / gmem2), so their reads and writes interleave under back-pressure.
// Quick: one size of five blocks, FTZ/DAZ only (the bundles and the key do not depend on the
// policy; the core bench runs both), every optimizer variant x dtypes x copy x dense/sparse of
// both formats, half on special data; nightly: both policies, more sizes (one absmax word to
// several, across a sparse block) and another memory seed.
void Q8FormatsUnderBackPressure(uint64_t seed, std::vector<uint32_t> sizes, bool ieee) {
  auto dev = RtlDevice(emu::RtlMemory::kStress, seed);
  SelfTestOptions so;
  so.sizes = std::move(sizes);
  so.ieee = ieee;
  so.seed = seed * 1000 + 8;
  so.states = {hls::StateFmt::kQ8, hls::StateFmt::kQ8Bf16};
  so.on_case = [&](const std::string& what, const std::string& diff) {
    if (!diff.empty()) ADD_FAILURE() << "memory seed " << seed << ": " << what << ": " << diff;
  };
  const SelfTestReport r = SelfTest((*dev)[0], so);
  EXPECT_EQ(r.failed, 0);
  std::printf("%d q8 / q8-bf16 RTL launches bit-exact with the model\n", r.launches);
}

TEST_F(Rtl, Q8FormatsBitExactUnderBackPressure) { Q8FormatsUnderBackPressure(4, {1280}, false); }

TEST_F(Rtl, Q8FormatsBitExactUnderBackPressureMoreSizes) {
  Q8FormatsUnderBackPressure(5, {256, 12544, 70001}, true);
}

// The quantizer's non-zero rule through the whole kernel (test_util.h MakeNonZeroRuleProblem:
// m' = g and v' = g * g over blocks where hundreds of values of both signs are non-zero with
// index 0 before the rule, beside zeros, tiny blocks and a non-finite v block), both formats
// and both policies, under the stress memory model. The core bench runs the same blocks.
TEST_F(Rtl, Q8NonZeroRuleBitExact) {
  auto dev = RtlDevice(emu::RtlMemory::kStress, 6);
  int launches = 0;
  for (hls::StateFmt st : {hls::StateFmt::kQ8, hls::StateFmt::kQ8Bf16}) {
    for (bool ftz : {false, true}) {
      ProblemSpec spec;
      spec.grad.grad = DType::kFp32;
      spec.grad.out = st == hls::StateFmt::kQ8 ? DType::kFp16 : DType::kBf16;
      spec.grad.ftz = ftz;
      spec.grad.state = st;
      spec.n = 8 * hls::kQ8Block;
      spec.seed = 0x2e40u + static_cast<uint64_t>(launches);
      spec.index = 0x1234500u;
      Problem p = Problem::Generate(spec);
      MakeNonZeroRuleProblem(p, spec.seed);
      const NonZeroRuleCoverage cov = CountNonZeroRule(p);
      const std::string ctx = std::string(st == hls::StateFmt::kQ8 ? "q8" : "q8-bf16") +
                              (ftz ? " ftz" : " ieee") + " seed=" + std::to_string(spec.seed);
      EXPECT_EQ(cov.Missing(32), "") << ctx;
      UpdateBuffers exp = p.buf.Clone();
      ASSERT_EQ(RunUpdate(exp, p.spec.n, p.nnz, p.launch), 0u) << ctx;
      const UpdateBuffers got = RunOnDevice((*dev)[0], p);
      for (const auto& [nm, a, b, eb] :
           {std::tuple{"theta", &exp.theta, &got.theta, 4u}, std::tuple{"m", &exp.m, &got.m, 4u},
            std::tuple{"v", &exp.v, &got.v, 4u},
            std::tuple{"m_absmax", &exp.m_absmax, &got.m_absmax, 4u},
            std::tuple{"v_absmax", &exp.v_absmax, &got.v_absmax, 4u},
            std::tuple{"out16", &exp.out16, &got.out16, 2u},
            std::tuple{"status", &exp.status, &got.status, 4u}}) {
        EXPECT_EQ(DiffBuffers(nm, *a, *b, eb, ctx), "");
      }
      ++launches;
    }
  }
  std::printf("%d non-zero rule launches bit-exact with the model\n", launches);
}

TEST_F(Rtl, LargeLaunchesAcrossSparseBlocks) {
  // Sizes that span many 4 KiB pages (bursts must split) and more than one 2^16 sparse block,
  // with special values injected; ideal and DDR-like memory.
  int k = 0;
  for (const Variant& var : AllVariants()) {
    for (bool sparse : {false, true}) {
      ProblemSpec spec;
      spec.hyper = var.cfg;
      spec.step = var.step;
      spec.grad.grad = k % 3 == 0 ? DType::kFp32 : (k % 3 == 1 ? DType::kFp16 : DType::kBf16);
      spec.grad.out = k % 2 ? DType::kBf16 : DType::kFp16;
      spec.grad.ftz = k % 4 == 3;
      spec.n = 70001 + 37 * k;
      spec.topk = sparse ? 0.02 : 0.0;
      spec.seed = 500 + k;
      Problem p = Problem::Generate(spec);
      InjectSpecials(p, 0.03, spec.seed);
      UpdateBuffers exp = p.buf.Clone();
      RunUpdate(exp, p.spec.n, p.nnz, p.launch);
      auto dev = RtlDevice(k % 2 ? emu::RtlMemory::kDdr : emu::RtlMemory::kIdeal, k);
      const UpdateBuffers got = RunOnDevice((*dev)[0], p);
      const std::string ctx = std::string(var.name) + (sparse ? " sparse" : " dense") +
                              " n=" + std::to_string(spec.n);
      for (const auto& [nm, a, b, eb] :
           {std::tuple{"theta", &exp.theta, &got.theta, 4u}, std::tuple{"m", &exp.m, &got.m, 4u},
            std::tuple{"v", &exp.v, &got.v, 4u}, std::tuple{"out16", &exp.out16, &got.out16, 2u},
            std::tuple{"status", &exp.status, &got.status, 4u}}) {
        const std::string d = DiffBuffers(nm, *a, *b, eb);
        EXPECT_TRUE(d.empty()) << ctx << ": " << d;
      }
      ++k;
    }
  }
}

// Outputs that overflow binary32 from finite inputs and hyper-parameters (test_util.h's
// OverflowProblem): the RTL's non-finite count and first position, its CRC lanes and every
// buffer equal the host model's, on every optimizer variant, under DDR-like memory timing.
TEST_F(Rtl, IntegrityLanesEqualModelOnOverflow) {
  auto dev = RtlDevice(emu::RtlMemory::kDdr, 3);
  int launches = 0, with_nonfinite = 0;
  for (const Variant& var : AllVariants()) {
    for (Overflow how : {Overflow::kHugeUnscale, Overflow::kHugeLr}) {
      const uint32_t n = 1037;  // not a multiple of the lane count
      const std::vector<uint32_t> hot = {n - 1, 500, 37};
      const uint64_t seed = 0x71c0u + static_cast<uint64_t>(launches);
      const Problem p = OverflowProblem(var, DType::kFp16, DType::kBf16, n, how, hot, seed);
      UpdateBuffers exp = p.buf.Clone();
      ASSERT_EQ(RunUpdate(exp, p.spec.n, p.nnz, p.launch), 0u);
      const UpdateBuffers got = RunOnDevice((*dev)[0], p);
      const std::string ctx = std::string("variant=") + var.name +
                              (how == Overflow::kHugeUnscale ? " unscale=3e38" : " lr=3e38") +
                              " seed=" + std::to_string(seed);
      for (const auto& [nm, a, b, eb] :
           {std::tuple{"status", &exp.status, &got.status, 4u},
            std::tuple{"theta", &exp.theta, &got.theta, 4u}, std::tuple{"m", &exp.m, &got.m, 4u},
            std::tuple{"v", &exp.v, &got.v, 4u},
            std::tuple{"out16", &exp.out16, &got.out16, 2u}}) {
        EXPECT_EQ(DiffBuffers(nm, *a, *b, eb, ctx), "");
      }
      const uint32_t nf = got.status.as<uint32_t>()[hls::kStatusNonFinite];
      if (how == Overflow::kHugeUnscale) {
        EXPECT_GE(nf, hot.size()) << ctx;
        EXPECT_EQ(got.status.as<uint32_t>()[hls::kStatusNonFinitePos], 37u) << ctx;
      }
      ++launches;
      with_nonfinite += nf != 0u ? 1 : 0;
    }
  }
  std::printf("%d overflow launches (%d with non-finite outputs) equal to the model\n", launches,
              with_nonfinite);
}

TEST_F(Rtl, MalformedSparseStreamsFlaggedNothingWritten) {
  ProblemSpec spec;
  spec.grad.grad = DType::kFp16;
  spec.grad.out = DType::kFp16;
  spec.n = 2 * 65536 + 999;
  spec.topk = 0.01;
  spec.seed = 9;
  const Problem base = Problem::Generate(spec);
  const uint32_t nnz = base.nnz;
  struct Case {
    const char* name;
    std::function<void(Problem&)> apply;
  };
  auto idx = [](Problem& p) { return p.buf.sp_idx.as<uint16_t>(); };
  auto blk = [](Problem& p) { return p.buf.sp_blk.as<uint32_t>(); };
  const Case cases[] = {
      {"unsorted", [&](Problem& p) { std::swap(idx(p)[10], idx(p)[11]); }},
      {"duplicate", [&](Problem& p) { idx(p)[21] = idx(p)[20]; }},
      {"out of range", [&](Problem& p) { idx(p)[nnz - 1] = 1000; }},
      {"count", [&](Problem& p) { p.nnz = nnz - 1; }},
      {"nnz > n",
       [&](Problem& p) {
         // Buffers large enough for the claimed nnz, so the launch reaches the kernel (a device
         // refuses a launch whose buffers are smaller than its arguments say).
         p.nnz = p.spec.n + 1;
         AlignedBuffer g(static_cast<std::size_t>(p.nnz) * 2 + 64), i(g.size());
         std::memcpy(g.data(), p.buf.grad.data(), p.buf.grad.size());
         std::memcpy(i.data(), p.buf.sp_idx.data(), p.buf.sp_idx.size());
         p.buf.grad = std::move(g);
         p.buf.sp_idx = std::move(i);
       }},
      {"blk[0] != 0", [&](Problem& p) { blk(p)[0] = 1; }},
      {"decreasing", [&](Problem& p) { blk(p)[2] = blk(p)[1] - 1; }},
  };
  for (const Case& c : cases) {
    Problem p;
    p.spec = base.spec;
    p.launch = base.launch;
    p.nnz = base.nnz;
    p.buf = base.buf.Clone();
    c.apply(p);
    UpdateBuffers exp = p.buf.Clone();
    RunUpdate(exp, p.spec.n, p.nnz, p.launch);
    ASSERT_NE(exp.status.as<uint32_t>()[hls::kStatusError], 0u) << c.name;
    auto dev = RtlDevice(emu::RtlMemory::kStress, 3);
    const UpdateBuffers got = RunOnDevice((*dev)[0], p);
    for (const auto& [nm, a, b, eb] :
         {std::tuple{"theta", &exp.theta, &got.theta, 4u}, std::tuple{"m", &exp.m, &got.m, 4u},
          std::tuple{"v", &exp.v, &got.v, 4u}, std::tuple{"out16", &exp.out16, &got.out16, 2u},
          std::tuple{"status", &exp.status, &got.status, 4u}}) {
      EXPECT_TRUE(DiffBuffers(nm, *a, *b, eb).empty()) << c.name << ": " << DiffBuffers(nm, *a, *b, eb);
    }
    // Nothing but the status word: the state equals the input.
    EXPECT_TRUE(got.theta.SameBytes(p.buf.theta)) << c.name;
  }
}

// Status lane 12: an AXI error response (injected by the harness's memory slave on one bundle)
// is reported with bit 0 and the bundle's number in bits [15:8]; none without injection.
TEST_F(Rtl, AxiErrorResponseReportedInStatusLane12) {
  constexpr uint32_t kN = 100;  // 7 words, the last one partial
  struct Case {
    const char* what;
    bool inject;
    unsigned bundle;
    uint8_t resp;
  };
  const Case cases[] = {{"no injection", false, 0, 0},
                        {"SLVERR on grad reads (gmem3)", true, 3, 2},
                        {"DECERR on theta (gmem0)", true, 0, 3}};
  for (const Case& c : cases) {
    alignas(4096) static uint32_t theta[112], grad[112], status[16];
    for (uint32_t i = 0; i < 112; ++i) {
      theta[i] = 0x3f800000u + i;  // ~1.0
      grad[i] = 0x3f000000u;       // 0.5
    }
    std::memset(status, 0xa5, sizeof(status));
    const auto addr = [](const void* p) { return reinterpret_cast<uint64_t>(p); };
    std::vector<emu::RtlRegion> regions = {{addr(theta), sizeof(theta), theta, "theta"},
                                           {addr(grad), sizeof(grad), grad, "grad"},
                                           {addr(status), sizeof(status), status, "status"}};
    UpdateLaunch<uint64_t> l;
    l.theta = addr(theta);
    l.grad = addr(grad);
    l.status = addr(status);
    l.n = kN;
    l.mode = static_cast<uint32_t>(hls::Optimizer::kSgd);
    l.unscale = 0x3f800000u;
    l.lr = 0x3f000000u;
    l.c1 = 0x3f800000u;
    l.c2 = 0x3f800000u;
    l.beta2 = l.omb2 = 0x3f800000u;
    emu::RtlOptions o;
    o.memory = emu::RtlMemory::kStress;
    o.seed = 7;
    // (The status bundle gmem5 is not injected: an erroring write is dropped by the slave, and
    // the status write's own response comes after the status word.)
    const uint64_t where = c.bundle == 0 ? addr(theta) : addr(grad);
    if (c.inject) o.error_ranges.push_back({c.bundle, where, sizeof(theta), c.resp});
    emu::RunRtlLaunch(regions, l, o);
    const uint32_t exp12 = c.inject ? (hls::kStatusAxiErrorSeen |
                                       (c.bundle << hls::kStatusAxiErrorBundleShift))
                                    : 0u;
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "seed 7, %s (bundle gmem%u resp 0x%x, n 0x%x, mode 0x%08x): status lane 12 "
                  "GOT=0x%08x EXP=0x%08x; lane 0 GOT=0x%08x EXP=0x00000000; lane 2 GOT=0x%08x "
                  "EXP=0x%08x",
                  c.what, c.bundle, c.resp, kN, l.mode, status[hls::kStatusAxiError], exp12,
                  status[hls::kStatusError], status[hls::kStatusElems], kN);
    EXPECT_EQ(status[hls::kStatusAxiError], exp12) << buf;
    EXPECT_EQ(status[hls::kStatusError], 0u) << buf;
    EXPECT_EQ(status[hls::kStatusElems], kN) << buf;
    EXPECT_EQ(status[hls::kStatusMagic], hls::kStatusMagicValue) << buf;
  }
}

TEST_F(Rtl, SmartUpdateOnRtlDevicesEqualsBaseline) {
  namespace fs = std::filesystem;
  const std::string root = std::string(CSDKIT_TEST_DIR);
  fs::remove_all(root);
  fs::create_directories(root);
  StoreConfig c;
  c.params = 140001;
  c.devices = 2;
  c.hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
  c.grad = DType::kFp16;
  c.out = DType::kFp16;
  c.loss_scale = 64;
  c.subgroup_elems = 65536;
  for (double topk : {0.0, 0.02}) {
    const std::string tag = topk > 0 ? "sparse" : "dense";
    Store a = Store::Create(root + "/rtl_" + tag, c);
    Store b = Store::Create(root + "/base_" + tag, c);
    DeviceSpec rtl;
    rtl.backend = Backend::kRtl;
    rtl.count = c.devices;
    rtl.device_mem = uint64_t{64} << 20;
    rtl.link_model = false;
    rtl.rtl.memory = emu::RtlMemory::kIdeal;
    DeviceSpec model;
    model.count = c.devices;
    model.link_model = false;
    DeviceSet devs(rtl), devs_b(model);
    Scheduler ra(a, devs), rb(b, devs_b);
    for (int t = 1; t <= 2; ++t) {
      StepOptions so;
      ra.Step(GradientSet::Synthetic(a, t, topk), so);
      so.mode = UpdateMode::kBaseline;
      rb.Step(GradientSet::Synthetic(b, t, topk), so);
    }
    for (unsigned d = 0; d < c.devices; ++d)
      for (unsigned v = 0; v < a.vars().size(); ++v)
        for (uint32_t j = 0; j < a.Subgroups(d).size(); ++j)
          ASSERT_EQ(a.checksum(d, v, j), b.checksum(d, v, j)) << tag;
    EXPECT_TRUE(ra.weights16().SameBytes(rb.weights16())) << tag;
  }
}

}  // namespace
}  // namespace csdkit::testing
