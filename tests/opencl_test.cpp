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

#include "csdkit/platform/checksum.h"
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

// The compressed state formats (q8: 3 copies; q8-bf16: none or bf16) on sizes of one block, 17
// blocks (a partial absmax word) and past a sparse block, half on special data.
TEST_F(OpenCl, CompressedStateKernelEqualsModelBitForBit) {
  DeviceSet devices(OpenClDevices(1, 0));
  Device& dev = devices[0];
  SelfTestOptions so;
  so.sizes = {1, 4097, 65537};
  so.states = {hls::StateFmt::kQ8, hls::StateFmt::kQ8Bf16};
  so.on_case = [](const std::string& what, const std::string& diff) {
    if (!diff.empty()) ADD_FAILURE() << what << ": " << diff;
  };
  const SelfTestReport r = SelfTest(dev, so);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.launches, 10 * 3 * (3 + 2) * 2 * 2 * 3);
  std::printf("%d q8 / q8-bf16 launches bit-exact with the model\n", r.launches);
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

// Stream buffers are device memory the host never maps: their bytes move by
// clEnqueueWriteBuffer / clEnqueueReadBuffer and device copies, bit-exact in every direction
// between the roles, counted on the links as host transfers always were; P2P on them is
// refused. A state buffer written by a device copy then goes to NVMe and back intact (its
// mapping survives the copy).
TEST_F(OpenCl, StreamBuffersMoveByDmaAndRefuseP2P) {
  DeviceSet devices(OpenClDevices(1, 0));
  Device& dev = devices[0];
  constexpr uint64_t kBytes = 3 * 4096 + 100;  // allocated as 16384
  DeviceBufferPtr stream = dev.Alloc(kBytes, BufferRole::kStream);
  DeviceBufferPtr state = dev.Alloc(kBytes, BufferRole::kState);
  DeviceBufferPtr state2 = dev.Alloc(kBytes, BufferRole::kState);
  ASSERT_EQ(stream->size(), 16384u);
  std::vector<uint8_t> got(16384, 0xa5), exp(16384, 0);
  dev.DeviceToHost(*stream, 0, got.data(), got.size());
  EXPECT_EQ(got, exp) << "a new stream buffer reads as zeros";

  uint64_t seed = 0x5eed0001u;
  std::vector<uint8_t> in(16384);
  for (uint8_t& x : in) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<uint8_t>(seed >> 56);
  }
  dev.HostToDevice(in.data() + 37, *stream, 37, 10000);
  std::memcpy(exp.data() + 37, in.data() + 37, 10000);
  dev.DeviceToHost(*stream, 0, got.data(), got.size());
  EXPECT_EQ(got, exp) << "host -> stream -> host, seed 0x5eed0001";
  EXPECT_EQ(dev.Crc32(*stream, 37, 10000), Crc32(exp.data() + 37, 10000));

  // stream -> state, state -> state, state -> stream, and within one stream buffer.
  dev.CopyWithin(*stream, 0, *state, 0, 16384);
  dev.CopyWithin(*state, 4096, *state2, 0, 8192);
  dev.CopyWithin(*state2, 100, *stream, 12000, 4000);
  dev.CopyWithin(*stream, 12000, *stream, 1, 4000);
  std::vector<uint8_t> exp2(16384, 0);
  std::memcpy(exp2.data(), exp.data() + 4096, 8192);
  std::memcpy(exp.data() + 12000, exp2.data() + 100, 4000);
  std::memmove(exp.data() + 1, exp.data() + 12000, 4000);
  dev.DeviceToHost(*stream, 0, got.data(), got.size());
  EXPECT_EQ(got, exp) << "device copies through a stream buffer";
  dev.DeviceToHost(*state2, 0, got.data(), got.size());
  EXPECT_EQ(got, exp2) << "device copies into a state buffer";
  EXPECT_THROW(dev.CopyWithin(*stream, 0, *stream, 100, 200), std::invalid_argument);

  // The state buffer a copy wrote goes to NVMe and back through its mapping.
  const std::string dir = std::string(CSDKIT_TEST_DIR) + "/roles";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  aio::File file = aio::File::Create(dir + "/state.bin");
  dev.P2PWrite(file, 0, *state2, 0, 16384).Wait();
  DeviceBufferPtr back = dev.Alloc(16384, BufferRole::kState);
  dev.P2PRead(file, 0, *back, 0, 16384).Wait();
  dev.DeviceToHost(*back, 0, got.data(), got.size());
  EXPECT_EQ(got, exp2) << "state -> NVMe -> state";

  const LinkBytes before = dev.bytes();
  for (bool read : {true, false}) {
    try {
      if (read) {
        dev.P2PRead(file, 0, *stream, 0, 4096).Wait();
      } else {
        dev.P2PWrite(file, 0, *stream, 0, 4096).Wait();
      }
      ADD_FAILURE() << "P2P " << (read ? "read" : "write") << " on a stream buffer accepted";
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string(read ? "P2P read" : "P2P write") + " on " + dev.Describe()),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("expected a state buffer, found a stream buffer"), std::string::npos)
          << m;
    }
  }
  const LinkBytes b = dev.bytes() - before;
  EXPECT_EQ(b[Link::kSsdToFpga] + b[Link::kFpgaToSsd], 0u);
  // Host transfers are counted as they always were: every byte asked for, once.
  const LinkBytes total = dev.bytes();
  EXPECT_EQ(total[Link::kHostToDevice], 10000u);
  EXPECT_EQ(total[Link::kDeviceToHost], 16384u * 5);
  EXPECT_EQ(total[Link::kSsdToFpga], 16384u);
  EXPECT_EQ(total[Link::kFpgaToSsd], 16384u);
}

TEST_F(OpenCl, CapacityAndForeignBuffersRefused) {
  DeviceSet small(OpenClDevices(1, 1u << 20)), big(OpenClDevices(1, 0));
  Device& dev = small[0];
  Device& other = big[0];
  EXPECT_THROW(dev.Alloc(2u << 20, BufferRole::kState), CapacityError);
  EXPECT_THROW(dev.Alloc(2u << 20, BufferRole::kStream), CapacityError);
  DeviceBufferPtr b = other.Alloc(4096, BufferRole::kStream);
  char x[16] = {};
  EXPECT_THROW(dev.HostToDevice(x, *b, 0, 16), std::invalid_argument);
  EXPECT_THROW(other.HostToDevice(x, *b, 4090, 16), std::out_of_range);
}

}  // namespace
}  // namespace csdkit::testing
