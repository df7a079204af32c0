// The OpenCL backend on the platform at hand (PoCL in CI): the kernel built from csd_update.cpp
// as C++ for OpenCL must equal the host model bit for bit on every byte of every buffer, and the
// SmartUpdate scheduler on OpenCL devices must equal the baseline. Skipped (visibly) when no
// OpenCL platform is installed.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>

#include "csdkit/opencl_device.h"
#include "csdkit/problem.h"
#include "csdkit/store.h"
#include "csdkit/update.h"
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

// Runs one problem on the device: copies every input buffer in, launches, copies every buffer
// back (whole, padded buffers, so a stray write anywhere shows).
UpdateBuffers RunOnDevice(Device& dev, const Problem& p) {
  const UpdateBuffers& in = p.buf;
  UpdateBuffersDev db;
  DeviceBufferPtr* dst[8] = {&db.theta, &db.m, &db.v, &db.grad, &db.sp_idx, &db.sp_blk,
                             &db.out16, &db.status};
  const AlignedBuffer* src[8] = {&in.theta, &in.m, &in.v, &in.grad, &in.sp_idx, &in.sp_blk,
                                 &in.out16, &in.status};
  for (int i = 0; i < 8; ++i) {
    *dst[i] = dev.Alloc(src[i]->size());
    dev.HostToDevice(src[i]->data(), **dst[i], 0, src[i]->size());
  }
  dev.LaunchUpdate(db, p.spec.n, p.nnz, p.launch);
  UpdateBuffers out = in.Clone();
  AlignedBuffer* back[8] = {&out.theta, &out.m, &out.v, &out.grad, &out.sp_idx, &out.sp_blk,
                            &out.out16, &out.status};
  for (int i = 0; i < 8; ++i) dev.DeviceToHost(**dst[i], 0, back[i]->data(), back[i]->size());
  return out;
}

TEST_F(OpenCl, KernelEqualsModelBitForBit) {
  OpenClOptions o;
  OpenClDevice dev(o);
  std::printf("device: %s\n", dev.Describe().c_str());
  int cases = 0;
  for (const Variant& var : AllVariants()) {
    for (DType g : {DType::kFp32, DType::kFp16, DType::kBf16}) {
      for (DType out : {DType::kFp32, DType::kFp16, DType::kBf16}) {
        for (bool sparse : {false, true}) {
          for (bool ftz : {false, true}) {
            for (uint32_t n : {1u, 17u, 4097u, 70001u}) {
              ProblemSpec spec;
              spec.hyper = var.cfg;
              spec.step = var.step;
              spec.grad.grad = g;
              spec.grad.out = out;
              spec.grad.ftz = ftz;
              spec.n = n;
              spec.topk = sparse ? 0.05 : 0.0;
              spec.seed = 77 + n + cases;
              Problem p = Problem::Generate(spec);
              InjectSpecials(p, 0.05, spec.seed);
              std::memset(p.buf.out16.data(), 0xab, p.buf.out16.size());
              const UpdateBuffers got = RunOnDevice(dev, p);
              UpdateBuffers exp = p.buf.Clone();
              RunUpdate(exp, p.spec.n, p.nnz, p.launch);
              const std::string ctx = std::string(var.name) + " grad=" + DTypeName(g) +
                                      " out=" + OutDTypeName(out) + (sparse ? " sparse" : " dense") +
                                      (ftz ? " ftz" : " ieee") + " n=" + std::to_string(n);
              for (const auto& [nm, a, b, eb] :
                   {std::tuple{"theta", &exp.theta, &got.theta, 4u},
                    std::tuple{"m", &exp.m, &got.m, 4u}, std::tuple{"v", &exp.v, &got.v, 4u},
                    std::tuple{"out16", &exp.out16, &got.out16, 2u},
                    std::tuple{"status", &exp.status, &got.status, 4u}}) {
                const std::string r = CompareBuffers(nm, *a, *b, eb, ctx);
                ASSERT_TRUE(r.empty()) << r;
              }
              ++cases;
            }
          }
        }
      }
    }
  }
  std::printf("%d launches bit-exact with the model\n", cases);
}

TEST_F(OpenCl, SmartUpdateOnOpenClEqualsBaseline) {
  namespace fs = std::filesystem;
  const std::string root = std::string(CSDKIT_TEST_DIR);
  fs::remove_all(root);
  fs::create_directories(root);
  for (double topk : {0.0, 0.02}) {
    StoreConfig c;
    c.params = 300007;
    c.devices = 3;
    c.hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
    c.grad = DType::kFp16;
    c.out = DType::kBf16;
    c.loss_scale = 128;
    c.subgroup_elems = 65536;
    Store a = Store::Create(root + "/a" + std::to_string(topk > 0), c);
    Store b = Store::Create(root + "/b" + std::to_string(topk > 0), c);
    std::vector<std::unique_ptr<OpenClDevice>> devs;
    std::vector<Device*> raw;
    for (unsigned d = 0; d < c.devices; ++d) {
      OpenClOptions o;
      o.index = d;
      o.capacity = uint64_t{256} << 20;
      devs.push_back(std::make_unique<OpenClDevice>(o));
      raw.push_back(devs.back().get());
    }
    std::vector<std::unique_ptr<OpenClDevice>> devs_b;
    std::vector<Device*> raw_b;
    for (unsigned d = 0; d < c.devices; ++d) {
      OpenClOptions o;
      o.index = d;
      devs_b.push_back(std::make_unique<OpenClDevice>(o));
      raw_b.push_back(devs_b.back().get());
    }
    Runtime ra(a, raw), rb(b, raw_b);
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
    EXPECT_TRUE(ra.weights16().SameBytes(rb.weights16()));
    a.Verify();
  }
}

TEST_F(OpenCl, CapacityAndForeignBuffersRefused) {
  OpenClOptions o;
  o.capacity = 1u << 20;
  OpenClDevice dev(o);
  EXPECT_THROW(dev.Alloc(2u << 20), CapacityError);
  OpenClDevice other(OpenClOptions{});
  DeviceBufferPtr b = other.Alloc(4096);
  char x[16] = {};
  EXPECT_THROW(dev.HostToDevice(x, *b, 0, 16), std::invalid_argument);
  EXPECT_THROW(other.HostToDevice(x, *b, 4090, 16), std::out_of_range);
}

}  // namespace
}  // namespace csdkit::testing
