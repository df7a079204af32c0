// Stores in the compressed state formats (docs/state-formats.md): `q8` and `q8-bf16` stores
// step with SmartUpdate and with the baseline to the same bytes in every file, the committed
// checksums verify, the bytes moved per step on each link are the formulas of
// docs/runtime.md (6.03 / 4.03 bytes per parameter each way for AdamW), and the updated
// weights follow the binary32 store's closely (bounds fixed below, before measuring). An
// optimizer without moments (plain SGD) keeps binary32 theta only: its q8 store equals the
// fp32 one bit for bit. Corruption of an absmax file is found by the step and by verify. A
// model's store places its tensors on blocks; frozen tensors, per-tensor step counts and
// export / import work on whole blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/runtime/gradients.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/state_io.h"
#include "csdkit/runtime/store.h"
#include "csdkit/system/device_set.h"
#include "test_dir.h"

namespace csdkit {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;

struct System {
  DeviceSet devices;
  std::unique_ptr<Scheduler> rt;
  explicit System(Store& s) : devices([&] {
    DeviceSpec d;
    d.count = s.config().devices;
    d.device_mem = uint64_t{1} << 30;
    return d;
  }()) {
    rt = std::make_unique<Scheduler>(s, devices);
  }
};

struct Case {
  const char* name;
  Optimizer opt;
  double momentum;  // SGD
};
const Case kCases[] = {{"adamw", Optimizer::kAdamW, 0}, {"adam", Optimizer::kAdam, 0},
                       {"sgd_momentum", Optimizer::kSgd, 0.9}, {"sgd_plain", Optimizer::kSgd, 0},
                       {"adagrad", Optimizer::kAdagrad, 0}, {"lion", Optimizer::kLion, 0}};

StoreConfig Config(const Case& k, hls::StateFmt st, uint64_t params, DType grad) {
  StoreConfig c;
  c.params = params;
  c.devices = 2;
  c.hyper = OptimizerConfig::Defaults(k.opt);
  c.hyper.lr = k.opt == Optimizer::kSgd ? 0.01 : 1e-3;
  if (k.opt == Optimizer::kSgd) c.hyper.momentum = k.momentum;
  if (k.opt == Optimizer::kAdagrad) c.hyper.initial_accumulator_value = 0.1;
  if (k.opt == Optimizer::kAdamW) c.hyper.weight_decay = 0.01;
  c.grad = grad;
  c.out = st == hls::StateFmt::kQ8Bf16 ? DType::kBf16 : DType::kFp16;
  c.loss_scale = grad == DType::kFp16 ? 256.0 : 1.0;
  c.subgroup_elems = 262144;  // absmax regions of exactly 4096 bytes
  c.seed = 11;
  c.state = st;
  return c;
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// theta of the committed slot as binary32 values (bf16 widened).
std::vector<float> Theta(const Store& s) {
  std::vector<float> r;
  for (const Shard& sh : s.shards()) {
    const std::vector<uint8_t> b = ReadFile(s.FilePath(sh.device, 0, s.slot()));
    for (uint64_t i = 0; i < sh.size(); ++i) {
      uint32_t u = 0;
      if (s.arrays()[0].elem_bytes == 2) {
        u = static_cast<uint32_t>(b[2 * i] | (b[2 * i + 1] << 8)) << 16;
      } else {
        std::memcpy(&u, &b[4 * i], 4);
      }
      r.push_back(hls::U2F(u));
    }
  }
  return r;
}

void Steps(Store& s, UpdateMode mode, int steps, double topk, StepReport* last = nullptr) {
  System sys(s);
  for (int i = 0; i < steps; ++i) {
    StepOptions o;
    o.mode = mode;
    o.host_threads = 2;
    const StepReport r = sys.rt->Step(GradientSet::Synthetic(s, s.step() + 1, topk), o);
    ASSERT_FALSE(r.skipped) << r.skip_reason;
    if (last) *last = r;
  }
}

using Param = std::tuple<int, hls::StateFmt, double>;  // case, state, topk

class Q8Store : public ::testing::TestWithParam<Param> {};

TEST_P(Q8Store, SmartEqualsBaselineBytesAreTheFormulasWeightsFollowFp32) {
  const auto [ci, st, topk] = GetParam();
  const Case& k = kCases[ci];
  // Top-K gradients on one optimizer with each moment kind (for time).
  if (topk > 0 && k.opt != Optimizer::kAdamW && k.opt != Optimizer::kAdagrad) {
    GTEST_SKIP() << "Top-K runs on adamw and adagrad";
  }
  const uint64_t params = 4 * 262144;  // two subgroups per device, every region exact
  const std::string root = TestDir(std::string("q8_store_") + k.name + "_" + StateFmtName(st) +
                                    (topk > 0 ? "_topk" : "_dense"));
  fs::create_directories(root);
  const StoreConfig cfg = Config(k, st, params, DType::kBf16);
  Store smart = Store::Create(root + "/smart", cfg);
  Store base = Store::Create(root + "/base", cfg);
  StoreConfig c32 = cfg;
  c32.state = hls::StateFmt::kFp32;
  Store f32 = Store::Create(root + "/fp32", c32);
  const std::vector<float> theta0 = Theta(f32);

  StepReport rs, rb;
  Steps(smart, UpdateMode::kSmart, 3, topk, &rs);
  Steps(base, UpdateMode::kBaseline, 3, topk, &rb);
  Steps(f32, UpdateMode::kSmart, 3, topk);
  if (HasFatalFailure()) return;

  // Every array's committed file, byte for byte, and the manifest's checksums.
  ASSERT_EQ(smart.slot(), base.slot());
  for (unsigned d = 0; d < 2; ++d) {
    for (unsigned a = 0; a < smart.arrays().size(); ++a) {
      EXPECT_TRUE(ReadFile(smart.FilePath(d, a, smart.slot())) ==
                  ReadFile(base.FilePath(d, a, base.slot())))
          << "device " << d << " array " << smart.arrays()[a].name;
    }
    for (unsigned v = 0; v < smart.vars().size(); ++v) {
      for (const Subgroup& g : smart.Subgroups(d)) {
        EXPECT_EQ(smart.checksum(d, v, g.index), base.checksum(d, v, g.index));
      }
    }
  }
  EXPECT_NO_THROW(smart.Verify());
  EXPECT_NO_THROW(base.Verify());

  // Bytes per step: the state once in and once out over each device's private path (smart) or
  // over the shared link (baseline): params x (theta + per moment 1 + 4/256) bytes.
  const bool has_m = k.opt == Optimizer::kAdamW || k.opt == Optimizer::kAdam ||
                     k.opt == Optimizer::kLion || (k.opt == Optimizer::kSgd && k.momentum != 0);
  const bool has_v =
      k.opt == Optimizer::kAdamW || k.opt == Optimizer::kAdam || k.opt == Optimizer::kAdagrad;
  const double per = (st == hls::StateFmt::kQ8Bf16 ? 2.0 : 4.0) +
                     (has_m ? 1.0 + 4.0 / 256 : 0.0) + (has_v ? 1.0 + 4.0 / 256 : 0.0);
  const uint64_t want = static_cast<uint64_t>(per * static_cast<double>(params));
  EXPECT_EQ(rs.bytes[Link::kSsdToFpga], want);
  EXPECT_EQ(rs.bytes[Link::kFpgaToSsd], want);
  EXPECT_EQ(rb.bytes[Link::kNvmeToHost], want);
  EXPECT_EQ(rb.bytes[Link::kHostToNvme], want);

  // The weights after 3 steps against the binary32 store's (bounds fixed before measuring):
  // the mean difference at most a quarter of the mean movement of the binary32 weights, plus
  // for bf16 weights the mean bf16 spacing at the weights (stochastic rounding moves a value
  // by less than one spacing). Plain SGD keeps no moment: bit-identical weights in q8.
  const std::vector<float> tq = Theta(smart), tf = Theta(f32);
  ASSERT_EQ(tq.size(), tf.size());
  double diff = 0, move = 0, ulp = 0;
  for (size_t i = 0; i < tq.size(); ++i) {
    diff += std::fabs(static_cast<double>(tq[i]) - tf[i]);
    move += std::fabs(static_cast<double>(tf[i]) - theta0[i]);
    ulp += std::ldexp(1.0, std::ilogb(tf[i] == 0 ? 1e-30f : tf[i]) - 7);
  }
  diff /= tq.size();
  move /= tq.size();
  ulp /= tq.size();
  const double bound = 0.25 * move + (st == hls::StateFmt::kQ8Bf16 ? ulp : 0.0);
  std::printf("%s %s: mean |theta - theta_fp32| %.3g, mean movement %.3g, bound %.3g\n", k.name,
              StateFmtName(st), diff, move, bound);
  if (!has_m && !has_v && st == hls::StateFmt::kQ8) {
    EXPECT_EQ(diff, 0.0);
  } else {
    EXPECT_LE(diff, bound);
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto [ci, st, topk] = info.param;
  std::string s = std::string(kCases[ci].name) + "_" + StateFmtName(st) +
                  (topk > 0 ? "_topk" : "_dense");
  for (char& c : s) c = c == '-' ? '_' : c;
  return s;
}

INSTANTIATE_TEST_SUITE_P(AllOptimizers, Q8Store,
                         ::testing::Combine(::testing::Range(0, 6),
                                            ::testing::Values(hls::StateFmt::kQ8,
                                                              hls::StateFmt::kQ8Bf16),
                                            ::testing::Values(0.0, 0.05)),
                         Name);

// One byte of an absmax file changed: the next step refuses (the kernel's CRC of what it read
// differs from the manifest) naming the variable's two files, and verify names them too.
TEST(Q8StoreCorruption, AnAbsmaxByteIsFound) {
  const std::string dir = TestDir("q8_store_corrupt");
  Store s = Store::Create(dir, Config(kCases[0], hls::StateFmt::kQ8, 2 * 262144, DType::kFp16));
  Steps(s, UpdateMode::kSmart, 1, 0.0);
  const std::string path = s.FilePath(1, 4, s.slot());  // v.absmax of device 1
  ASSERT_NE(path.find("v.absmax"), std::string::npos);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5);
    f.put('\x42');
  }
  try {
    s.Verify();
    ADD_FAILURE() << "verify found nothing";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("v.absmax"), std::string::npos) << e.what();
  }
  System sys(s);
  try {
    sys.rt->Step(GradientSet::Synthetic(s, 2, 0.0), StepOptions());
    ADD_FAILURE() << "the step committed";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("v.absmax"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.step(), 1);
}

// A store for a model in q8 / q8-bf16: every tensor starts on a block of 256 (the store's own
// layout; same fingerprint as the caller's), a step where one tensor has no gradient leaves its
// blocks byte for byte, tensors at different step counts (several launches per subgroup) step
// in SmartUpdate as in the baseline, and the state exported (dequantized) and imported
// (quantized) into a fresh store gives the same files byte for byte.
TEST(Q8ModelStore, AlignedTensorsFrozenBlocksCountsAndExportImport) {
  for (hls::StateFmt st : {hls::StateFmt::kQ8, hls::StateFmt::kQ8Bf16}) {
    const std::string root = TestDir(std::string("q8_model_") + StateFmtName(st));
    fs::create_directories(root);
    const ParamLayout layout({{"a", 70000, 0}, {"b", 1000, 0}, {"c", 300, 1}, {"d", 200000, 1}});
    std::vector<float> w(layout.tensors()[0].numel + 1000 + 300 + 200000);
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
    StoreConfig c = Config(kCases[0], st, 0, DType::kBf16);
    c.subgroup_elems = 131072;
    std::vector<OptimizerConfig> groups = {c.hyper, c.hyper};
    groups[1].lr = 3e-4;
    Store smart = Store::CreateForModel(root + "/smart", c, layout, groups, w.data(), DType::kFp32);
    Store base = Store::CreateForModel(root + "/base", c, layout, groups, w.data(), DType::kFp32);
    ASSERT_NE(smart.layout(), nullptr);
    EXPECT_EQ(smart.layout()->Fingerprint(), layout.Fingerprint());
    for (size_t t = 0; t < 4; ++t) EXPECT_EQ(smart.layout()->offset(t) % 256, 0u) << t;
    EXPECT_EQ(smart.config().params % 256, 0u);
    // Gradients: all tensors, then 'b' without one (its blocks kept), then all again (b behind
    // by one step: two launches where b shares a subgroup with a).
    auto grads = [&](const Store& s, int k, bool with_b, std::vector<std::vector<uint16_t>>* keep) {
      keep->clear();
      std::vector<const void*> p;
      for (size_t t = 0; t < 4; ++t) {
        keep->emplace_back(layout.tensors()[t].numel);
        for (size_t i = 0; i < keep->back().size(); ++i) {
          const float g = 0.001f * static_cast<float>((i * 7 + k + t) % 23) - 0.01f;
          keep->back()[i] = hls::F32ToBf16(hls::F2U(g));
        }
        p.push_back(t == 1 && !with_b ? nullptr : keep->back().data());
      }
      return GradientSet::Gather(s, p);
    };
    std::vector<std::vector<uint8_t>> b_before;
    for (int k = 0; k < 3; ++k) {
      for (Store* s : {&smart, &base}) {
        System sys(*s);
        std::vector<std::vector<uint16_t>> keep;
        StepOptions o;
        o.mode = s == &smart ? UpdateMode::kSmart : UpdateMode::kBaseline;
        const StepReport r = sys.rt->Step(grads(*s, k, k != 1, &keep), o);
        ASSERT_FALSE(r.skipped) << r.skip_reason;
      }
    }
    EXPECT_EQ(smart.tensor_steps()[1], 2);
    for (unsigned d = 0; d < smart.config().devices; ++d) {
      for (unsigned a = 0; a < smart.arrays().size(); ++a) {
        EXPECT_TRUE(ReadFile(smart.FilePath(d, a, smart.slot())) ==
                    ReadFile(base.FilePath(d, a, base.slot())))
            << StateFmtName(st) << " device " << d << " array " << smart.arrays()[a].name;
      }
    }
    EXPECT_NO_THROW(smart.Verify());

    // Export (dequantized, binary32) and import into a fresh store at the same step.
    std::vector<std::vector<float>> th(4), m(4), v(4);
    std::vector<float*> pth, pm, pv;
    for (size_t t = 0; t < 4; ++t) {
      th[t].resize(layout.tensors()[t].numel);
      m[t].resize(th[t].size());
      v[t].resize(th[t].size());
      pth.push_back(th[t].data());
      pm.push_back(m[t].data());
      pv.push_back(v[t].data());
    }
    ExportState(smart, "theta", pth);
    ExportState(smart, "m", pm);
    ExportState(smart, "v", pv);
    Store fresh = Store::CreateForModel(root + "/fresh", c, layout, groups, w.data(), DType::kFp32);
    StateImport in;
    in.step = smart.step();
    for (size_t t = 0; t < 4; ++t) {
      in.theta.push_back(th[t].data());
      in.m.push_back(m[t].data());
      in.v.push_back(v[t].data());
    }
    in.tensor_steps = smart.tensor_steps();
    ImportState(fresh, in);
    for (unsigned d = 0; d < smart.config().devices; ++d) {
      for (unsigned a = 0; a < smart.arrays().size(); ++a) {
        EXPECT_TRUE(ReadFile(smart.FilePath(d, a, smart.slot())) ==
                    ReadFile(fresh.FilePath(d, a, fresh.slot())))
            << StateFmtName(st) << " import: device " << d << " array " << smart.arrays()[a].name;
      }
    }
  }
}

// What the formats refuse, by name: params not whole blocks, an fp16 copy of bf16 weights.
TEST(Q8StoreRefuses, PartialBlocksAndFp16Copy) {
  const std::string dir = TestDir("q8_store_refused");
  StoreConfig c = Config(kCases[0], hls::StateFmt::kQ8, 262144 + 100, DType::kFp16);
  try {
    Store::Create(dir, c);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 256"), std::string::npos) << e.what();
  }
  c = Config(kCases[0], hls::StateFmt::kQ8Bf16, 262144, DType::kFp16);
  c.out = DType::kFp16;
  EXPECT_THROW(Store::Create(dir, c), std::invalid_argument);
  EXPECT_FALSE(fs::exists(dir + "/manifest.json"));
}

}  // namespace
}  // namespace csdkit
