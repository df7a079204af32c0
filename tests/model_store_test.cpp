// Stores created for a trainer's model: the parameter layout (groups on block boundaries, refused
// when malformed), theta taken from the trainer's weights (fp16/bf16 widened exactly), the layout
// fingerprint guarding Open, subgroups that never span two param groups, per-step per-group
// hyper-parameters equal to running the kernel on each group's range with that group's scalars,
// SmartUpdate = baseline on such stores, and the hyper-parameters each committed step used.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "test_dir.h"
#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/problem.h"
#include "csdkit/platform/sparse_codec.h"
#include "csdkit/platform/splitmix.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/store.h"
#include "csdkit/runtime/synthetic.h"
#include "csdkit/system/device_set.h"

namespace csdkit {
namespace {

namespace fs = std::filesystem;

using testing::TestDir;

// Two groups: three tensors (the second group starts at the next 65536 boundary).
ParamLayout TwoGroups() {
  return ParamLayout({{"embed.weight", 70001, 0}, {"ln.weight", 333, 0}, {"head.weight", 90000, 1}});
}

std::vector<uint16_t> Fp16Weights(uint64_t count, uint64_t seed) {
  std::vector<uint16_t> w(count);
  SplitMix64 r{seed};
  for (auto& x : w) x = hls::F32ToF16(hls::F2U(r.Uniform(-0.5, 0.5)));
  return w;
}

// The committed theta of the whole flattened range, read from the shard files.
std::vector<uint32_t> ReadTheta(const Store& s) {
  std::vector<uint32_t> out;
  for (const Shard& sh : s.shards()) {
    std::ifstream f(s.FilePath(sh.device, 0, s.slot()), std::ios::binary);
    std::vector<uint32_t> v(sh.size());
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(4 * sh.size()));
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

StoreConfig AdamW(unsigned devices) {
  StoreConfig c;
  c.devices = devices;
  c.hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
  c.grad = DType::kFp16;
  c.out = DType::kFp16;
  c.loss_scale = 64;
  c.subgroup_elems = 65536;
  c.seed = 3;
  return c;
}

TEST(ParamLayout, GroupsStartOnBlockBoundaries) {
  const ParamLayout l = TwoGroups();
  EXPECT_EQ(l.offset(0), 0u);
  EXPECT_EQ(l.offset(1), 70001u);
  EXPECT_EQ(l.offset(2), 131072u);
  EXPECT_EQ(l.groups(), 2u);
  EXPECT_EQ(l.group_end(0), 70334u);
  EXPECT_EQ(l.total(), 131072u + 90000u);
  EXPECT_EQ(l.GroupOf(70333), 0u);
  EXPECT_EQ(l.GroupOf(70334), 0u);  // the padding after a group belongs to it
  EXPECT_EQ(l.GroupOf(131072), 1u);
  EXPECT_EQ(ParamLayout::FromJson(l.ToJson()).Fingerprint(), l.Fingerprint());
  EXPECT_NE(ParamLayout({{"embed.weight", 70001, 0}, {"ln.weight", 334, 0},
                         {"head.weight", 90000, 1}}).Fingerprint(), l.Fingerprint());
}

TEST(ParamLayout, MalformedLayoutsAreRefused) {
  auto refused = [](std::vector<TensorSpec> t, const char* what) {
    try {
      ParamLayout l(std::move(t));
      ADD_FAILURE() << "accepted a layout with " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("expected"), std::string::npos) << e.what();
    }
  };
  refused({}, "no tensors");
  refused({{"", 5, 0}}, "an empty name");
  refused({{"a", 5, 0}, {"a", 5, 0}}, "a duplicate name");
  refused({{"a", 0, 0}}, "an empty tensor");
  refused({{"a", 5, 1}}, "a first group that is not 0");
  refused({{"a", 5, 0}, {"b", 5, 1}, {"c", 5, 0}}, "a group split in two");
  refused({{"a", 5, 0}, {"b", 5, 2}}, "a skipped group number");
}

TEST(ModelStore, ThetaIsTheTrainersWeightsWidenedExactly) {
  const ParamLayout l = TwoGroups();
  const uint64_t packed = 70001 + 333 + 90000;
  const std::vector<uint16_t> w = Fp16Weights(packed, 11);
  const StoreConfig c = AdamW(2);
  Store s = Store::CreateForModel(TestDir("model_widen"), c, l, {c.hyper, c.hyper}, w.data(),
                                  DType::kFp16);
  // 4 blocks cannot give 3 devices whole-block shards: refused before anything is created.
  EXPECT_THROW(Store::CreateForModel(TestDir("model_widen3"), AdamW(3), l, {c.hyper, c.hyper},
                                     w.data(), DType::kFp16),
               std::invalid_argument);
  EXPECT_FALSE(fs::exists(std::string(CSDKIT_TEST_DIR) + "/model_widen3"));
  EXPECT_EQ(s.config().params, l.total());
  for (const Shard& sh : s.shards()) {
    if (sh.device + 1 < s.shards().size()) {
      EXPECT_EQ(sh.size() % hls::kBlockElems, 0u);
    }
  }
  const std::vector<uint32_t> th = ReadTheta(s);
  uint64_t k = 0;
  for (size_t t = 0; t < l.tensors().size(); ++t) {
    for (uint64_t i = 0; i < l.tensors()[t].numel; ++i, ++k) {
      const uint64_t at = l.offset(t) + i;
      ASSERT_EQ(th[at], hls::F16ToF32(w[k])) << "tensor " << l.tensors()[t].name << " element "
                                              << i;
    }
  }
  for (uint64_t at = l.group_end(0); at < l.group_begin(1); ++at) ASSERT_EQ(th[at], 0u) << at;
  s.Verify();
  // Every subgroup lies in one group.
  for (const Subgroup& g : s.AllSubgroups()) {
    const uint64_t b = s.shards()[g.device].begin + g.begin;
    EXPECT_EQ(l.GroupOf(b), g.group);
    EXPECT_EQ(l.GroupOf(b + g.n - 1), g.group) << "subgroup " << g.index << " of device "
                                               << g.device << " spans two groups";
  }
}

// Per-tensor step counts (Store::tensor_steps) live in the manifest as [tensor, count] pairs for
// the tensors behind the committed step (the previous state's too: a rollback returns them, see
// tests/python/test_per_param_steps.py); a manifest's pairs are checked even under a valid CRC.
TEST(ModelStore, TensorStepCountsAreCommittedRolledBackAndChecked) {
  const ParamLayout l = TwoGroups();
  const std::vector<uint16_t> w = Fp16Weights(70001 + 333 + 90000, 5);
  const StoreConfig c = AdamW(2);
  const std::string dir = TestDir("model_tensor_steps");
  Store s = Store::CreateForModel(dir, c, l, {c.hyper, c.hyper}, w.data(), DType::kFp16);
  EXPECT_EQ(s.tensor_steps(), std::vector<int64_t>({0, 0, 0}));
  s.Commit(s.EmptyChecksums());  // no counts given: every tensor at the new step
  EXPECT_EQ(s.tensor_steps(), std::vector<int64_t>({1, 1, 1}));
  const std::vector<int64_t> behind{2, 1, 2};
  s.Commit(s.EmptyChecksums(), nullptr, std::nullopt, &behind);
  EXPECT_EQ(s.tensor_steps(), behind);
  const std::vector<int64_t> ahead{3, 1, 4};
  EXPECT_THROW(s.Commit(s.EmptyChecksums(), nullptr, std::nullopt, &ahead),
               std::invalid_argument);
  const std::vector<int64_t> short_list{3};
  EXPECT_THROW(s.Commit(s.EmptyChecksums(), nullptr, std::nullopt, &short_list),
               std::invalid_argument);
  EXPECT_EQ(s.step(), 2);
  nlohmann::json good;
  std::ifstream(dir + "/manifest.json") >> good;
  EXPECT_EQ(good["tensor_steps"], nlohmann::json::parse("[[1, 1]]"));
  EXPECT_EQ(Store::FromManifest(good, "m").tensor_steps(), behind);
  using J = nlohmann::json;
  const std::vector<std::pair<std::function<void(J&)>, std::string>> edits = {
      {[](J& j) { j["tensor_steps"] = 3; }, "tensor_steps: expected an array"},
      {[](J& j) { j["tensor_steps"] = J::parse("[[0,1],[1,1],[2,1],[0,1]]"); }, "at most 3"},
      {[](J& j) { j["tensor_steps"] = J::parse("[[1]]"); }, "expected a [tensor, count] pair"},
      {[](J& j) { j["tensor_steps"] = J::parse("[[3, 1]]"); }, "field 'tensor': expected an integer in [0, 2]"},
      {[](J& j) { j["tensor_steps"] = J::parse("[[1, 1], [0, 1]]"); }, "field 'tensor': expected an integer in [2, 2]"},
      {[](J& j) { j["tensor_steps"] = J::parse("[[0, 3]]"); }, "field 'count': expected an integer in [0, 2]"},
      {[](J& j) { j["tensor_steps"] = J::parse("[[0, -1]]"); }, "field 'count'"},
      {[](J& j) { j["tensor_steps"] = J::parse("[[0, 1.5]]"); }, "field 'count'"},
      {[](J& j) { j["previous"]["tensor_steps"] = J::parse("[[0, 2]]"); }, "previous tensor_steps[0]: field 'count': expected an integer in [0, 1]"},
  };
  for (const auto& [edit, expected] : edits) {
    J j = good;
    edit(j);
    j["manifest_crc"] = Store::ManifestCrc(j);
    try {
      Store::FromManifest(j, "m");
      ADD_FAILURE() << "accepted " << j.dump() << "; expected '" << expected << "'";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

TEST(ModelStore, OpenRefusesAnotherModel) {
  const ParamLayout l = TwoGroups();
  const std::vector<uint16_t> w = Fp16Weights(70001 + 333 + 90000, 1);
  const StoreConfig c = AdamW(2);
  const std::string dir = TestDir("model_open");
  { Store::CreateForModel(dir, c, l, {c.hyper, c.hyper}, w.data(), DType::kFp16); }
  EXPECT_EQ(Store::Open(dir, l).layout()->Fingerprint(), l.Fingerprint());
  const ParamLayout other({{"embed.weight", 70001, 0}, {"ln.weight", 333, 0},
                           {"head.weight", 90001, 1}});
  try {
    Store::Open(dir, other);
    ADD_FAILURE() << "opened a store of another model";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
  const std::string plain = TestDir("model_plain");
  Store::Create(plain, [] {
    StoreConfig p = AdamW(1);
    p.params = 1000;
    return p;
  }());
  try {
    Store::Open(plain, l);
    ADD_FAILURE() << "opened a store without a layout as a model's";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("without a parameter layout"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Store::CreateForModel(TestDir("model_bad_groups"), c, l, {c.hyper}, w.data(),
                                     DType::kFp16),
               std::invalid_argument);
}

TEST(ModelStore, PerGroupHyperParametersEqualTheKernelPerGroup) {
  const ParamLayout l = TwoGroups();
  const uint64_t packed = 70001 + 333 + 90000;
  const std::vector<uint16_t> w = Fp16Weights(packed, 5);
  StoreConfig c = AdamW(2);
  OptimizerConfig g0 = c.hyper, g1 = c.hyper;
  g0.lr = 3e-3;
  g0.weight_decay = 0.1;
  g1.lr = 5e-4;
  g1.weight_decay = 0.0;
  Store smart = Store::CreateForModel(TestDir("model_smart"), c, l, {g0, g1}, w.data(),
                                      DType::kFp16);
  Store base = Store::CreateForModel(TestDir("model_base"), c, l, {g0, g1}, w.data(),
                                     DType::kFp16);
  // The expected result: the kernel on each group's whole range with that group's scalars.
  const std::vector<uint32_t> th0 = ReadTheta(smart);
  DeviceSpec spec;
  spec.count = 2;
  DeviceSet da(spec), db(spec);
  Scheduler sa(smart, da), sb(base, db);
  for (int t = 1; t <= 3; ++t) {
    // A scheduler-like change of lr every step.
    OptimizerConfig h0 = g0, h1 = g1;
    h0.lr = g0.lr * (1.0 - 0.1 * t);
    h1.lr = g1.lr * (1.0 - 0.2 * t);
    StepOptions o;
    o.group_hyper = {h0, h1};
    o.loss_scale = 32.0;
    const GradientSet g = GradientSet::Synthetic(smart, t, t == 2 ? 0.05 : 0.0);
    ASSERT_FALSE(sa.Step(g, o).skipped);
    o.mode = UpdateMode::kBaseline;
    ASSERT_FALSE(sb.Step(GradientSet::Synthetic(base, t, t == 2 ? 0.05 : 0.0), o).skipped);
    ASSERT_EQ(smart.group_hyper()[0].lr, h0.lr);
    {  // what the manifest on storage records (the store is open: read the file)
      std::ifstream mf(smart.dir() + "/manifest.json");
      ASSERT_EQ(nlohmann::json::parse(mf).at("group_hyper").at(1).at("lr").get<double>(), h1.lr);
    }
    if (t == 1) {
      // Step 1 against the kernel run per group on host arrays.
      const std::vector<uint32_t> th1 = ReadTheta(smart);
      for (unsigned grp = 0; grp < 2; ++grp) {
        const uint64_t b = l.group_begin(grp), e = l.group_end(grp);
        const uint32_t n = static_cast<uint32_t>(e - b);
        UpdateBuffers buf;
        buf.theta = AlignedBuffer(4ull * n + 64);
        buf.m = AlignedBuffer(4ull * n + 64);
        buf.v = AlignedBuffer(4ull * n + 64);
        buf.grad = AlignedBuffer(2ull * n + 64);
        buf.out16 = AlignedBuffer(2ull * n + 64);
        buf.status = AlignedBuffer(64);
        std::memcpy(buf.theta.data(), th0.data() + b, 4ull * n);
        for (uint32_t i = 0; i < n; ++i) {
          buf.grad.as<uint16_t>()[i] = static_cast<uint16_t>(
              SyntheticGradientBits(c.seed, 1, b + i, DType::kFp16, c.loss_scale));
        }
        GradSpec gs;
        gs.grad = DType::kFp16;
        gs.out = DType::kFp16;
        gs.loss_scale = 32.0;
        ASSERT_EQ(RunUpdate(buf, n, 0, MakeLaunch(grp == 0 ? h0 : h1, gs, 1)), 0u);
        for (uint32_t i = 0; i < n; ++i) {
          ASSERT_EQ(th1[b + i], buf.theta.as<uint32_t>()[i])
              << "group " << grp << " element " << i << " theta0=0x" << std::hex << th0[b + i];
        }
      }
    }
  }
  for (unsigned d = 0; d < 2; ++d)
    for (unsigned v = 0; v < smart.vars().size(); ++v)
      for (uint32_t j = 0; j < smart.Subgroups(d).size(); ++j)
        ASSERT_EQ(smart.checksum(d, v, j), base.checksum(d, v, j)) << d << " " << v << " " << j;
  EXPECT_TRUE(sa.weights16().SameBytes(sb.weights16()));
  // Hyper-parameters for the wrong number of groups, or another optimizer, are refused.
  StepOptions bad;
  bad.group_hyper = {g0};
  EXPECT_THROW(sa.Step(GradientSet::Synthetic(smart, 4, 0.0), bad), std::invalid_argument);
  bad.group_hyper = {g0, OptimizerConfig::Defaults(Optimizer::kLion)};
  EXPECT_THROW(sa.Step(GradientSet::Synthetic(smart, 4, 0.0), bad), std::invalid_argument);
  EXPECT_EQ(smart.step(), 3);
}

TEST(ModelStore, TrainerGradientsInWeightsOut) {
  const ParamLayout l = TwoGroups();
  const uint64_t packed = 70001 + 333 + 90000;
  std::vector<float> w(packed);
  SplitMix64 r{9};
  for (float& x : w) x = r.Uniform(-1, 1);
  StoreConfig c = AdamW(2);
  c.grad = DType::kFp32;
  c.out = DType::kFp32;
  c.loss_scale = 1.0;
  Store a = Store::CreateForModel(TestDir("model_grads_a"), c, l, {c.hyper, c.hyper}, w.data(),
                                  DType::kFp32);
  Store b = Store::CreateForModel(TestDir("model_grads_b"), c, l, {c.hyper, c.hyper}, w.data(),
                                  DType::kFp32);
  // The trainer's gradients: per-tensor buffers, and the same values back to back.
  std::vector<std::vector<float>> per(l.tensors().size());
  std::vector<float> flat;
  // The kit's norm (GradientNorm): per-tensor sums of squares (double, element order), added
  // in layout order.
  double sum = 0;
  for (size_t t = 0; t < per.size(); ++t) {
    per[t].resize(l.tensors()[t].numel);
    double st = 0;
    for (float& x : per[t]) {
      x = r.Uniform(-2, 2);
      st += static_cast<double>(x) * x;
    }
    sum += st;
    flat.insert(flat.end(), per[t].begin(), per[t].end());
  }
  std::vector<const void*> ptrs;
  for (const auto& v : per) ptrs.push_back(v.data());
  double na = 0, nb = 0;
  const GradientSet ga = GradientSet::Gather(a, ptrs, &na);
  const GradientSet gb = GradientSet::FromFlat(b, flat.data(), &nb);
  EXPECT_EQ(na, std::sqrt(sum));
  EXPECT_EQ(nb, na);
  EXPECT_TRUE(ga.dense().SameBytes(gb.dense()));
  for (uint64_t i = l.group_end(0); i < l.group_begin(1); ++i) {
    ASSERT_EQ(ga.dense().as<uint32_t>()[i], 0u) << "padding element " << i;
  }
  DeviceSpec spec;
  spec.count = 2;
  DeviceSet da(spec), db(spec);
  Scheduler sa(a, da), sb(b, db);
  // found_inf skips the step: nothing moves, nothing is committed.
  StepOptions skip;
  skip.found_inf = true;
  const StepReport rs = sa.Step(ga, skip);
  EXPECT_TRUE(rs.skipped);
  EXPECT_EQ(a.step(), 0);
  EXPECT_EQ(da.bytes().Shared(), 0u);
  // Clipping with the gathered norm, fp32 weights back over the shared link.
  StepOptions o;
  o.clip_coef = std::min(1.0, 1.0 / (na + 1e-6));
  o.fp32_weights_out = true;
  const StepReport ra = sa.Step(ga, o);
  EXPECT_EQ(ra.bytes[Link::kDeviceToHost], 4 * a.config().params + 64ull * a.AllSubgroups().size());
  o.mode = UpdateMode::kBaseline;
  sb.Step(gb, o);
  ASSERT_EQ(a.step(), 1);
  EXPECT_TRUE(sa.weights32().SameBytes(sb.weights32()));
  std::vector<std::vector<float>> out(per.size());
  std::vector<void*> dst;
  for (size_t t = 0; t < per.size(); ++t) {
    out[t].assign(l.tensors()[t].numel, -7.0f);
    dst.push_back(out[t].data());
  }
  sa.CopyWeightsOut(dst);
  const std::vector<uint32_t> th = ReadTheta(a);
  for (size_t t = 0; t < per.size(); ++t) {
    for (uint64_t i = 0; i < l.tensors()[t].numel; ++i) {
      uint32_t got;
      std::memcpy(&got, &out[t][i], 4);
      ASSERT_EQ(got, th[l.offset(t) + i]) << l.tensors()[t].name << " element " << i;
    }
  }
  EXPECT_THROW(sa.CopyWeightsOut({dst[0]}), std::invalid_argument);
  EXPECT_THROW(GradientSet::Gather(a, {ptrs[0], ptrs[2]}), std::invalid_argument);
  // A reused transfer buffer (TakeBuffer) full of another step's values: the gaps — group
  // padding and a tensor without gradient — are zero again, the rest is this step's, and the
  // gather's own finiteness verdict and norm match a fresh buffer's.
  AlignedBuffer dirty(a.config().params * 4);
  std::memset(dirty.data(), 0x7f, dirty.size());  // 0x7f7f7f7f: finite, huge
  const std::vector<const void*> some{ptrs[0], nullptr, ptrs[2]};
  double nf = 0, nr = 0;
  const GradientSet fresh = GradientSet::Gather(a, some, &nf);
  GradientSet reused = GradientSet::Gather(a, some, &nr, std::move(dirty));
  EXPECT_TRUE(fresh.dense().SameBytes(reused.dense()));
  EXPECT_EQ(nf, nr);
  std::string where;
  EXPECT_TRUE(reused.AllFinite(&where));
  AlignedBuffer back = std::move(reused).TakeBuffer();
  EXPECT_GE(back.size(), a.config().params * 4);
  per[2][17] = std::numeric_limits<float>::infinity();
  double ninf = 0;
  const GradientSet bad = GradientSet::Gather(a, ptrs, &ninf, std::move(back));
  EXPECT_FALSE(bad.AllFinite(&where));
  EXPECT_NE(where.find("element " + std::to_string(l.offset(2) + 17)), std::string::npos) << where;
  EXPECT_TRUE(std::isinf(ninf));
}

// From 16 MiB on the gather copies whole tensors on several threads: the transfer buffer, the
// finiteness verdict and the norm are those of one pass per tensor in layout order, bit for bit
// (per-tensor CopyTensorGradient into a buffer of its own, GradientNorm over the results), with
// tensors without a gradient, group padding, a reused dirty buffer and a non-finite value.
TEST(ModelStore, GatherOnSeveralThreadsEqualsOneTensorAtATime) {
  std::vector<TensorSpec> specs;
  for (unsigned t = 0; t < 41; ++t) {  // 41 tensors of 3 sizes in two groups: 6.6 M elements
    specs.push_back({"t" + std::to_string(t), t % 3 == 0 ? 400009u : (t % 3 == 1 ? 65536u : 4099u),
                     t < 30 ? 0u : 1u});
  }
  const ParamLayout l(specs);
  StoreConfig c = AdamW(1);
  c.grad = DType::kFp32;
  c.out = DType::kFp32;
  c.loss_scale = 1.0;
  c.subgroup_elems = 1u << 20;
  std::vector<float> w(l.total(), 0.0f);
  Store a = Store::CreateForModel(TestDir("model_gather_threads"), c, l, {c.hyper, c.hyper},
                                  w.data(), DType::kFp32);
  SplitMix64 r{11};
  std::vector<std::vector<float>> per(specs.size());
  std::vector<const void*> ptrs;
  uint64_t bytes = 0;
  for (size_t t = 0; t < per.size(); ++t) {
    per[t].resize(specs[t].numel);
    for (float& x : per[t]) x = r.Uniform(-3, 3);
    const bool none = t % 7 == 5;
    ptrs.push_back(none ? nullptr : per[t].data());
    if (!none) bytes += specs[t].numel * 4;
  }
  ASSERT_GE(bytes, 16ull << 20);  // the threaded gather's threshold
  // The reference: one tensor at a time, into a zeroed buffer.
  AlignedBuffer want(a.config().params * 4);
  std::vector<TensorGradient> one;
  for (size_t t = 0; t < ptrs.size(); ++t) {
    if (ptrs[t] == nullptr) continue;
    one.push_back(CopyTensorGradient(want.data() + l.offset(t) * 4, ptrs[t], specs[t].numel,
                                     DType::kFp32, true));
  }
  double norm = 0;
  AlignedBuffer dirty(a.config().params * 4);
  std::memset(dirty.data(), 0x3f, dirty.size());
  GradientSet g = GradientSet::Gather(a, ptrs, &norm, std::move(dirty));
  EXPECT_TRUE(g.dense().SameBytes(want));
  EXPECT_EQ(norm, GradientNorm(one));
  std::string where;
  EXPECT_TRUE(g.AllFinite(&where));
  AlignedBuffer back = std::move(g).TakeBuffer();
  per[34][65535] = std::numeric_limits<float>::quiet_NaN();  // a group-1 tensor's last element
  double bad_norm = 0;
  const GradientSet bad = GradientSet::Gather(a, ptrs, &bad_norm, std::move(back));
  EXPECT_FALSE(bad.AllFinite(&where));
  EXPECT_NE(where.find("element " + std::to_string(l.offset(34) + 65535)), std::string::npos)
      << where;
  EXPECT_TRUE(std::isinf(bad_norm));
}

// The committed bytes of variable v for flattened elements [b, e).
std::string StateBytes(const Store& s, unsigned v, uint64_t b, uint64_t e) {
  std::string out;
  for (const Shard& sh : s.shards()) {
    const uint64_t lo = std::max(b, sh.begin), hi = std::min(e, sh.end);
    if (lo >= hi) continue;
    std::ifstream f(s.FilePath(sh.device, v, s.slot()), std::ios::binary);
    f.seekg(static_cast<std::streamoff>(4 * (lo - sh.begin)));
    std::string x(4 * (hi - lo), '\0');
    f.read(x.data(), static_cast<std::streamsize>(x.size()));
    out += x;
  }
  return out;
}

TEST(ModelStore, TensorsWithoutGradientKeepWeightsAndState) {
  // ln.weight (333 elements, sharing words with embed.weight) has no gradient in steps 2 and 3,
  // head.weight none in step 3: they must keep theta, m and v byte for byte, in SmartUpdate and
  // in the baseline, while their neighbours are updated.
  const ParamLayout l = TwoGroups();
  const uint64_t packed = 70001 + 333 + 90000;
  const std::vector<uint16_t> w = Fp16Weights(packed, 21);
  const StoreConfig c = AdamW(2);
  Store a = Store::CreateForModel(TestDir("model_none_a"), c, l, {c.hyper, c.hyper}, w.data(),
                                  DType::kFp16);
  Store b = Store::CreateForModel(TestDir("model_none_b"), c, l, {c.hyper, c.hyper}, w.data(),
                                  DType::kFp16);
  DeviceSpec spec;
  spec.count = 2;
  DeviceSet da(spec), db(spec);
  Scheduler sa(a, da), sb(b, db);
  std::vector<std::vector<uint16_t>> per(3);
  for (size_t t = 0; t < 3; ++t) per[t] = Fp16Weights(l.tensors()[t].numel, 100 + t);
  auto ranges = [&](size_t t) { return std::pair{l.offset(t), l.offset(t) + l.tensors()[t].numel}; };
  for (int step = 1; step <= 3; ++step) {
    std::vector<const void*> ptrs = {per[0].data(), per[1].data(), per[2].data()};
    if (step >= 2) ptrs[1] = nullptr;
    if (step == 3) ptrs[2] = nullptr;
    std::vector<std::string> before[3];
    for (size_t t = 0; t < 3; ++t)
      for (unsigned v = 0; v < a.vars().size(); ++v)
        before[t].push_back(StateBytes(a, v, ranges(t).first, ranges(t).second));
    StepOptions o;
    ASSERT_FALSE(sa.Step(GradientSet::Gather(a, ptrs), o).skipped);
    o.mode = UpdateMode::kBaseline;
    ASSERT_FALSE(sb.Step(GradientSet::Gather(b, ptrs), o).skipped);
    for (size_t t = 0; t < 3; ++t) {
      for (unsigned v = 0; v < a.vars().size(); ++v) {
        const std::string now = StateBytes(a, v, ranges(t).first, ranges(t).second);
        if (ptrs[t] == nullptr) {
          EXPECT_EQ(now, before[t][v]) << "step " << step << ": " << l.tensors()[t].name << " "
                                       << a.vars()[v] << " changed without a gradient";
        } else {
          EXPECT_NE(now, before[t][v]) << "step " << step << ": " << l.tensors()[t].name << " "
                                       << a.vars()[v] << " was not updated";
        }
      }
    }
    for (unsigned d = 0; d < 2; ++d)
      for (unsigned v = 0; v < a.vars().size(); ++v)
        for (uint32_t j = 0; j < a.Subgroups(d).size(); ++j)
          ASSERT_EQ(a.checksum(d, v, j), b.checksum(d, v, j)) << "step " << step;
  }
  a.Verify();
}

TEST(ModelStore, TopKStreamsFromTheTrainer) {
  // The trainer's own Top-K streams per (device, subgroup) equal compressing the gathered dense
  // gradient; a malformed stream is refused before anything moves.
  const ParamLayout l = TwoGroups();
  const uint64_t packed = 70001 + 333 + 90000;
  const std::vector<uint16_t> w = Fp16Weights(packed, 31);
  const StoreConfig c = AdamW(2);
  Store a = Store::CreateForModel(TestDir("model_topk_a"), c, l, {c.hyper, c.hyper}, w.data(),
                                  DType::kFp16);
  Store b = Store::CreateForModel(TestDir("model_topk_b"), c, l, {c.hyper, c.hyper}, w.data(),
                                  DType::kFp16);
  const std::vector<uint16_t> grad = Fp16Weights(packed, 32);
  const GradientSet dense = GradientSet::FromFlat(a, grad.data());
  const GradientSet ka = dense.TopK(a, 0.01);
  std::vector<std::vector<SparseGrad>> streams(2);
  for (unsigned d = 0; d < 2; ++d) {
    for (const Subgroup& sg : b.Subgroups(d)) {
      streams[d].push_back(CompressTopK(
          dense.dense().data() + (b.shards()[d].begin + sg.begin) * 2, DType::kFp16, sg.n, 0.01));
    }
  }
  // A stream with its first two indices swapped is refused, naming device and subgroup.
  std::vector<std::vector<SparseGrad>> bad(2);
  for (unsigned d = 0; d < 2; ++d)
    for (const SparseGrad& x : streams[d]) {
      SparseGrad y{x.n, x.nnz, x.dtype, x.blk.Clone(), x.idx.Clone(), x.val.Clone()};
      bad[d].push_back(std::move(y));
    }
  std::swap(bad[1][0].idx.as<uint16_t>()[0], bad[1][0].idx.as<uint16_t>()[1]);
  try {
    GradientSet::FromStreams(b, std::move(bad));
    ADD_FAILURE() << "accepted an unsorted stream";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("device 1 subgroup 0"), std::string::npos) << e.what();
  }
  // Frozen ranges (tensors without a gradient) must be non-empty, ascending, disjoint and
  // within the model.
  const uint64_t params = b.config().params;
  for (const auto& frozen : std::vector<std::vector<std::pair<uint64_t, uint64_t>>>{
           {{10, 10}}, {{0, params + 1}}, {{0, 10}, {5, 20}}, {{30, 40}, {0, 10}}}) {
    std::vector<std::vector<SparseGrad>> copy(2);
    for (unsigned d = 0; d < 2; ++d)
      for (const SparseGrad& x : streams[d]) {
        copy[d].push_back(SparseGrad{x.n, x.nnz, x.dtype, x.blk.Clone(), x.idx.Clone(),
                                     x.val.Clone()});
      }
    try {
      GradientSet::FromStreams(b, std::move(copy), frozen);
      ADD_FAILURE() << "accepted frozen range [" << frozen.back().first << ", "
                    << frozen.back().second << ")";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("frozen range"), std::string::npos) << e.what();
    }
  }
  const GradientSet kb = GradientSet::FromStreams(b, std::move(streams));
  DeviceSpec spec;
  spec.count = 2;
  DeviceSet da(spec), db(spec);
  Scheduler sa(a, da), sb(b, db);
  StepOptions o;
  const StepReport ra = sa.Step(ka, o);
  const StepReport rb = sb.Step(kb, o);
  EXPECT_EQ(ra.bytes[Link::kHostToDevice], ka.TransferBytes());
  EXPECT_LT(ra.bytes[Link::kHostToDevice], 2 * packed / 10);
  for (unsigned d = 0; d < 2; ++d)
    for (unsigned v = 0; v < a.vars().size(); ++v)
      for (uint32_t j = 0; j < a.Subgroups(d).size(); ++j)
        ASSERT_EQ(a.checksum(d, v, j), b.checksum(d, v, j));
  EXPECT_TRUE(sa.weights16().SameBytes(sb.weights16()));
}

}  // namespace
}  // namespace csdkit
