// The OpenCL backend on the platform at hand (PoCL in CI): the kernel built from csd_update.cpp
// as C++ for OpenCL must equal the host model bit for bit on every byte of every buffer (the
// status word's integrity lanes included, on overflowing outputs too), and the
// SmartUpdate scheduler on OpenCL devices must equal the baseline. Skipped (visibly) when no
// OpenCL platform is installed.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "csdkit/platform/opencl_device.h"
#include "csdkit/platform/problem.h"
#include "csdkit/platform/selftest.h"
#include "csdkit/runtime/store.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/system/device_set.h"
#include "test_util.h"

namespace csdkit::testing {
namespace {

class OpenCl : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!OpenClAvailable(&why)) GTEST_SKIP() << "no OpenCL: " << why;
  }
};

// `count` OpenCL devices of the first platform, with `mem` bytes each (0: what they report).
DeviceSpec OpenClDevices(unsigned count, uint64_t mem) {
  DeviceSpec spec;
  spec.backend = Backend::kOpenCl;
  spec.count = count;
  spec.device_mem = mem;
  return spec;
}

TEST_F(OpenCl, KernelEqualsModelBitForBit) {
  DeviceSet devices(OpenClDevices(1, 0));
  Device& dev = devices[0];
  std::printf("device: %s\n", dev.Describe().c_str());
  SelfTestOptions so;
  so.sizes = {1, 15, 17, 4097, 65537, 140001};
  so.on_case = [](const std::string& what, const std::string& diff) {
    if (!diff.empty()) ADD_FAILURE() << what << ": " << diff;
  };
  const SelfTestReport r = SelfTest(dev, so);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.launches, 10 * 3 * 3 * 2 * 2 * 6);
  std::printf("%d launches bit-exact with the model\n", r.launches);
}

// Outputs that overflow binary32 from finite inputs and hyper-parameters (test_util.h's
// OverflowProblem): the OpenCL kernel's non-finite count and first position, its CRC lanes and
// every buffer equal the host model's, on every optimizer variant and gradient dtype.
TEST_F(OpenCl, IntegrityLanesEqualModelOnOverflow) {
  DeviceSet devices(OpenClDevices(1, 0));
  Device& dev = devices[0];
  int launches = 0, with_nonfinite = 0;
  for (const Variant& var : AllVariants()) {
    for (DType g : {DType::kFp32, DType::kFp16, DType::kBf16}) {
      for (uint32_t n : {1000u, 20001u}) {
        for (Overflow how : {Overflow::kHugeUnscale, Overflow::kHugeLr}) {
          std::vector<uint32_t> hot = {n - 1, 500, 37};
          if (n > 8200) hot.push_back(8200);
          const uint64_t seed = 0x0c10u + n + static_cast<uint64_t>(g) * 7u;
          const Problem p = OverflowProblem(var, g, DType::kBf16, n, how, hot, seed);
          UpdateBuffers exp = p.buf.Clone();
          ASSERT_EQ(RunUpdate(exp, p.spec.n, p.nnz, p.launch), 0u);
          const UpdateBuffers got = RunOnDevice(dev, p);
          std::ostringstream ctx;
          ctx << "variant=" << var.name << " grad=" << DTypeName(g) << " n=" << n
              << (how == Overflow::kHugeUnscale ? " unscale=3e38" : " lr=3e38") << " seed=0x"
              << std::hex << seed;
          for (const auto& [nm, a, b, eb] :
               {std::tuple{"status", &exp.status, &got.status, 4u},
                std::tuple{"theta", &exp.theta, &got.theta, 4u},
                std::tuple{"m", &exp.m, &got.m, 4u}, std::tuple{"v", &exp.v, &got.v, 4u},
                std::tuple{"out16", &exp.out16, &got.out16, 2u}}) {
            const std::string d = DiffBuffers(nm, *a, *b, eb, ctx.str());
            EXPECT_EQ(d, "");
          }
          const uint32_t nf = got.status.as<uint32_t>()[hls::kStatusNonFinite];
          if (how == Overflow::kHugeUnscale) {
            EXPECT_GE(nf, hot.size()) << ctx.str();
            EXPECT_EQ(got.status.as<uint32_t>()[hls::kStatusNonFinitePos], 37u) << ctx.str();
          }
          ++launches;
          with_nonfinite += nf != 0u ? 1 : 0;
        }
      }
    }
  }
  std::printf("%d overflow launches (%d with non-finite outputs) equal to the model\n", launches,
              with_nonfinite);
}

TEST_F(OpenCl, SmartUpdateOnOpenClEqualsBaseline) {
  namespace fs = std::filesystem;
  const std::string root = std::string(CSDKIT_TEST_DIR);
  fs::remove_all(root);
  fs::create_directories(root);
  struct Case {
    Optimizer opt;
    unsigned devices;
    uint64_t params;
    double topk;
    DType grad, out;
  };
  const Case cases[] = {{Optimizer::kAdamW, 3, 300007, 0.0, DType::kFp16, DType::kBf16},
                        {Optimizer::kAdamW, 3, 300007, 0.02, DType::kFp16, DType::kBf16},
                        {Optimizer::kSgd, 1, 131072, 0.0, DType::kFp32, DType::kFp32},
                        {Optimizer::kAdagrad, 8, 1000003, 0.01, DType::kBf16, DType::kFp16},
                        {Optimizer::kLion, 2, 200001, 0.0, DType::kFp16, DType::kFp16}};
  int i = 0;
  for (const Case& cs : cases) {
    const double topk = cs.topk;
    StoreConfig c;
    c.params = cs.params;
    c.devices = cs.devices;
    c.hyper = OptimizerConfig::Defaults(cs.opt);
    c.grad = cs.grad;
    c.out = cs.out;
    c.loss_scale = 128;
    c.subgroup_elems = 65536;
    Store a = Store::Create(root + "/a" + std::to_string(i), c);
    Store b = Store::Create(root + "/b" + std::to_string(i), c);
    ++i;
    DeviceSet devs(OpenClDevices(c.devices, uint64_t{256} << 20));
    DeviceSet devs_b(OpenClDevices(c.devices, 0));
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
          ASSERT_EQ(a.checksum(d, v, j), b.checksum(d, v, j)) << "topk " << topk;
    if (c.out != DType::kFp32) {
      EXPECT_TRUE(ra.weights16().SameBytes(rb.weights16()));
    }
    a.Verify();
  }
}

TEST_F(OpenCl, CapacityAndForeignBuffersRefused) {
  DeviceSet small(OpenClDevices(1, 1u << 20)), big(OpenClDevices(1, 0));
  Device& dev = small[0];
  Device& other = big[0];
  EXPECT_THROW(dev.Alloc(2u << 20), CapacityError);
  DeviceBufferPtr b = other.Alloc(4096);
  char x[16] = {};
  EXPECT_THROW(dev.HostToDevice(x, *b, 0, 16), std::invalid_argument);
  EXPECT_THROW(other.HostToDevice(x, *b, 4090, 16), std::out_of_range);
}

}  // namespace
}  // namespace csdkit::testing
