// The C API (host/capi, libcsdkit.so): every call's error paths return the documented status
// with a message naming the argument (per thread and per store); 3 steps through the C API equal
// the same steps through the C++ API bit for bit (committed CRCs, weights out, exported state);
// found_inf and non-finite gradients skip a step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_dir.h"
#include "csdkit/csdkit.h"
#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/fp32.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/splitmix.h"
#include "csdkit/runtime/gradients.h"
#include "csdkit/platform/sparse_codec.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/store.h"
#include "csdkit/system/device_set.h"

namespace csdkit {
namespace {

namespace fs = std::filesystem;

using testing::TestDir;

// The model of model_store_test: two groups, the second on the next 65536 boundary.
struct Model {
  const char* names[3] = {"embed.weight", "ln.weight", "head.weight"};
  uint64_t numels[3] = {70001, 333, 90000};
  unsigned groups[3] = {0, 0, 1};
  csdkit_layout layout{3, names, numels, groups};
  uint64_t packed() const { return numels[0] + numels[1] + numels[2]; }
  ParamLayout Cxx() const {
    return ParamLayout(
        {{names[0], numels[0], 0}, {names[1], numels[1], 0}, {names[2], numels[2], 1}});
  }
};

std::vector<uint16_t> Halves(uint64_t count, uint64_t seed, double range) {
  std::vector<uint16_t> w(count);
  SplitMix64 r{seed};
  for (auto& x : w) x = hls::F32ToF16(hls::F2U(static_cast<float>(r.Uniform(-range, range))));
  return w;
}

// Per-tensor views of a packed buffer.
template <typename T, typename P>
std::vector<P> Split(T* packed, const Model& m) {
  std::vector<P> p;
  uint64_t at = 0;
  for (uint64_t n : m.numels) {
    p.push_back(packed + at);
    at += n;
  }
  return p;
}

std::vector<uint32_t> ReadVar(const Store& s, unsigned var) {
  std::vector<uint32_t> out;
  for (const Shard& sh : s.shards()) {
    std::ifstream f(s.FilePath(sh.device, var, s.slot()), std::ios::binary);
    std::vector<uint32_t> v(sh.size());
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(4 * sh.size()));
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

csdkit_device_spec Devices(unsigned count) {
  csdkit_device_spec d;
  EXPECT_EQ(csdkit_device_spec_init(&d), CSDKIT_OK);
  d.count = count;
  return d;
}

csdkit_store_config Config() {
  csdkit_store_config c;
  EXPECT_EQ(csdkit_store_config_init(&c), CSDKIT_OK);
  c.loss_scale = 64;
  c.subgroup_elems = 65536;
  return c;
}

std::vector<csdkit_hyper> Hyper(csdkit_optimizer o = CSDKIT_ADAMW) {
  std::vector<csdkit_hyper> h(2);
  EXPECT_EQ(csdkit_hyper_init(&h[0], o), CSDKIT_OK);
  EXPECT_EQ(csdkit_hyper_init(&h[1], o), CSDKIT_OK);
  h[0].lr = 3e-3;
  h[0].weight_decay = 0.1;
  h[1].lr = 5e-4;
  h[1].weight_decay = 0.0;
  return h;
}

// The C++ API's store of what Create() makes through the C API (Config(), Hyper()), in `dir`;
// *group_hyper receives its per-group hyper-parameters.
Store CxxTwin(const std::string& dir, const Model& m, const std::vector<uint16_t>& w,
              std::vector<OptimizerConfig>* group_hyper = nullptr) {
  StoreConfig c;
  c.devices = 2;
  c.hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
  c.grad = DType::kFp16;
  c.out = DType::kFp16;
  c.loss_scale = 64;
  c.subgroup_elems = 65536;
  const std::vector<csdkit_hyper> h = Hyper();
  std::vector<OptimizerConfig> gh(2, c.hyper);
  for (unsigned k = 0; k < 2; ++k) {
    gh[k].lr = h[k].lr;
    gh[k].weight_decay = h[k].weight_decay;
  }
  if (group_hyper != nullptr) *group_hyper = gh;
  return Store::CreateForModel(dir, c, m.Cxx(), gh, w.data(), DType::kFp16);
}

// A failed call: the status, and a message naming `what` both per thread and (if given) per
// store.
#define EXPECT_FAILS(call, status, what, store)                                           \
  do {                                                                                    \
    EXPECT_EQ((call), (status)) << #call;                                                 \
    EXPECT_NE(std::string(csdkit_last_error()).find(what), std::string::npos)             \
        << #call << ": message '" << csdkit_last_error() << "' does not name " << (what); \
    if ((store) != nullptr) {                                                             \
      EXPECT_STREQ(csdkit_store_last_error(store), csdkit_last_error());                  \
    }                                                                                     \
  } while (0)

csdkit_store* Create(const std::string& dir, const Model& m, const std::vector<uint16_t>& w,
                     csdkit_optimizer o = CSDKIT_ADAMW, unsigned devices = 2) {
  const csdkit_device_spec d = Devices(devices);
  const csdkit_store_config c = Config();
  const std::vector<csdkit_hyper> h = Hyper(o);
  csdkit_store* s = nullptr;
  EXPECT_EQ(
      csdkit_store_create(dir.c_str(), &d, &c, &m.layout, h.data(), 2, w.data(), CSDKIT_FP16, &s),
      CSDKIT_OK)
      << csdkit_last_error();
  return s;
}

TEST(CApi, VersionAndStatusNames) {
  EXPECT_EQ(csdkit_version(), CSDKIT_VERSION);
  EXPECT_EQ(CSDKIT_VERSION,
            CSDKIT_VERSION_MAJOR * 10000 + CSDKIT_VERSION_MINOR * 100 + CSDKIT_VERSION_PATCH);
  EXPECT_STREQ(csdkit_status_name(CSDKIT_CAPACITY), "CSDKIT_CAPACITY");
  EXPECT_STREQ(csdkit_status_name(static_cast<csdkit_status>(99)), "unknown status");
  EXPECT_STREQ(csdkit_store_last_error(nullptr), "");
  EXPECT_EQ(csdkit_store_close(nullptr), CSDKIT_OK);
}

TEST(CApi, InitFunctionsRefuseNullAndBadEnums) {
  EXPECT_FAILS(csdkit_device_spec_init(nullptr), CSDKIT_INVALID_ARGUMENT, "spec", nullptr);
  EXPECT_FAILS(csdkit_store_config_init(nullptr), CSDKIT_INVALID_ARGUMENT, "config", nullptr);
  EXPECT_FAILS(csdkit_step_options_init(nullptr), CSDKIT_INVALID_ARGUMENT, "options", nullptr);
  EXPECT_FAILS(csdkit_hyper_init(nullptr, CSDKIT_SGD), CSDKIT_INVALID_ARGUMENT, "hyper", nullptr);
  csdkit_hyper h;
  EXPECT_FAILS(csdkit_hyper_init(&h, static_cast<csdkit_optimizer>(5)), CSDKIT_INVALID_ARGUMENT,
               "optimizer", nullptr);
  // Defaults: the C++ ones.
  ASSERT_EQ(csdkit_hyper_init(&h, CSDKIT_LION), CSDKIT_OK);
  EXPECT_STREQ(csdkit_last_error(), "");  // a successful call clears the message
  EXPECT_EQ(h.lr, OptimizerConfig::Defaults(Optimizer::kLion).lr);
  csdkit_device_spec d;
  ASSERT_EQ(csdkit_device_spec_init(&d), CSDKIT_OK);
  EXPECT_EQ(d.device_mem, DeviceSpec().device_mem);
  EXPECT_EQ(d.count, 1u);
}

TEST(CApi, CreateRefusesBadArguments) {
  const Model m;
  const std::vector<uint16_t> w = Halves(m.packed(), 1, 0.5);
  const csdkit_device_spec d = Devices(2);
  const csdkit_store_config c = Config();
  const std::vector<csdkit_hyper> h = Hyper();
  const std::string dir = TestDir("create_refusals");
  const char* p = dir.c_str();
  csdkit_store* s = reinterpret_cast<csdkit_store*>(&s);  // must be set to NULL on failure
  const auto I = CSDKIT_INVALID_ARGUMENT;
  EXPECT_FAILS(
      csdkit_store_create(p, &d, &c, &m.layout, h.data(), 2, w.data(), CSDKIT_FP16, nullptr), I,
      "out", nullptr);
  EXPECT_FAILS(
      csdkit_store_create(nullptr, &d, &c, &m.layout, h.data(), 2, w.data(), CSDKIT_FP16, &s), I,
      "dir", nullptr);
  EXPECT_EQ(s, nullptr);
  EXPECT_FAILS(
      csdkit_store_create(p, nullptr, &c, &m.layout, h.data(), 2, w.data(), CSDKIT_FP16, &s), I,
      "devices", nullptr);
  EXPECT_FAILS(
      csdkit_store_create(p, &d, nullptr, &m.layout, h.data(), 2, w.data(), CSDKIT_FP16, &s), I,
      "config", nullptr);
  EXPECT_FAILS(csdkit_store_create(p, &d, &c, nullptr, h.data(), 2, w.data(), CSDKIT_FP16, &s), I,
               "layout", nullptr);
  EXPECT_FAILS(csdkit_store_create(p, &d, &c, &m.layout, nullptr, 2, w.data(), CSDKIT_FP16, &s), I,
               "group_hyper", nullptr);
  EXPECT_FAILS(csdkit_store_create(p, &d, &c, &m.layout, h.data(), 1, w.data(), CSDKIT_FP16, &s), I,
               "n_groups", nullptr);
  EXPECT_FAILS(csdkit_store_create(p, &d, &c, &m.layout, h.data(), 2, nullptr, CSDKIT_FP16, &s), I,
               "weights", nullptr);
  EXPECT_FAILS(csdkit_store_create(p, &d, &c, &m.layout, h.data(), 2, w.data(),
                                   static_cast<csdkit_dtype>(3), &s),
               I, "weight_dtype", nullptr);
  csdkit_layout bad = m.layout;
  bad.names = nullptr;
  EXPECT_FAILS(csdkit_store_create(p, &d, &c, &bad, h.data(), 2, w.data(), CSDKIT_FP16, &s), I,
               "layout->names", nullptr);
  bad = m.layout;
  bad.n_tensors = 0;
  EXPECT_FAILS(csdkit_store_create(p, &d, &c, &bad, h.data(), 2, w.data(), CSDKIT_FP16, &s), I,
               "layout->n_tensors", nullptr);
  const char* dup[3] = {"a", "a", "b"};
  bad = m.layout;
  bad.names = dup;
  EXPECT_FAILS(csdkit_store_create(p, &d, &c, &bad, h.data(), 2, w.data(), CSDKIT_FP16, &s), I,
               "unique names", nullptr);
  csdkit_store_config bc = c;
  bc.out = static_cast<csdkit_dtype>(-1);
  EXPECT_FAILS(csdkit_store_create(p, &d, &bc, &m.layout, h.data(), 2, w.data(), CSDKIT_FP16, &s),
               I, "config->out", nullptr);
  bc = c;
  bc.loss_scale = -1;
  EXPECT_FAILS(csdkit_store_create(p, &d, &bc, &m.layout, h.data(), 2, w.data(), CSDKIT_FP16, &s),
               I, "loss_scale", nullptr);
  bc = c;
  bc.subgroup_elems = 1000;
  EXPECT_FAILS(csdkit_store_create(p, &d, &bc, &m.layout, h.data(), 2, w.data(), CSDKIT_FP16, &s),
               I, "subgroup", nullptr);
  csdkit_device_spec bd = d;
  bd.count = 0;
  EXPECT_FAILS(csdkit_store_create(p, &bd, &c, &m.layout, h.data(), 2, w.data(), CSDKIT_FP16, &s),
               I, "devices->count", nullptr);
  bd = d;
  bd.backend = static_cast<csdkit_backend>(7);
  EXPECT_FAILS(csdkit_store_create(p, &bd, &c, &m.layout, h.data(), 2, w.data(), CSDKIT_FP16, &s),
               I, "devices->backend", nullptr);
  bd = d;
  bd.count = 3;  // 4 blocks cannot give 3 devices whole-block shards
  EXPECT_FAILS(csdkit_store_create(p, &bd, &c, &m.layout, h.data(), 2, w.data(), CSDKIT_FP16, &s),
               I, "devices", nullptr);
  std::vector<csdkit_hyper> bh = h;
  bh[1].optimizer = CSDKIT_LION;
  EXPECT_FAILS(csdkit_store_create(p, &d, &c, &m.layout, bh.data(), 2, w.data(), CSDKIT_FP16, &s),
               I, "optimizer", nullptr);
  bh = h;
  bh[0].beta1 = 1.5;
  EXPECT_FAILS(csdkit_store_create(p, &d, &c, &m.layout, bh.data(), 2, w.data(), CSDKIT_FP16, &s),
               I, "beta1", nullptr);
  // A device that cannot be opened: a runtime error.
  bd = d;
  bd.backend = CSDKIT_BACKEND_OPENCL;
  bd.platform = "no such OpenCL platform";
  EXPECT_FAILS(csdkit_store_create(p, &bd, &c, &m.layout, h.data(), 2, w.data(), CSDKIT_FP16, &s),
               CSDKIT_RUNTIME, "no such OpenCL platform", nullptr);
  EXPECT_EQ(s, nullptr);
  EXPECT_FALSE(fs::exists(dir)) << "a refused create left " << dir;
  // A store where one exists already.
  csdkit_store* first = Create(dir, m, w);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(csdkit_store_close(first), CSDKIT_OK);
  EXPECT_FAILS(csdkit_store_create(p, &d, &c, &m.layout, h.data(), 2, w.data(), CSDKIT_FP16, &s),
               CSDKIT_STORE_ERROR, "existing store", nullptr);
  EXPECT_EQ(s, nullptr);
}

TEST(CApi, OpenRefusesMissingForeignAndOpenStores) {
  const Model m;
  const std::vector<uint16_t> w = Halves(m.packed(), 2, 0.5);
  const std::string dir = TestDir("open_refusals");
  csdkit_store* a = Create(dir, m, w);
  ASSERT_NE(a, nullptr);
  const csdkit_device_spec d = Devices(2);
  csdkit_store* b = nullptr;
  // Two opens: the creating handle holds the store.
  EXPECT_FAILS(csdkit_store_open(dir.c_str(), &d, &m.layout, &b), CSDKIT_STORE_ERROR,
               "one writer per store", nullptr);
  EXPECT_EQ(b, nullptr);
  ASSERT_EQ(csdkit_store_close(a), CSDKIT_OK);
  ASSERT_EQ(csdkit_store_open(dir.c_str(), &d, &m.layout, &a), CSDKIT_OK) << csdkit_last_error();
  EXPECT_FAILS(csdkit_store_open(dir.c_str(), &d, &m.layout, &b), CSDKIT_STORE_ERROR,
               "one writer per store", nullptr);
  ASSERT_EQ(csdkit_store_close(a), CSDKIT_OK);
  // Another model: one element more in the head.
  Model other;
  other.numels[2] = 90001;
  EXPECT_FAILS(csdkit_store_open(dir.c_str(), &d, &other.layout, &b), CSDKIT_STORE_ERROR,
               "another model", nullptr);
  EXPECT_FAILS(csdkit_store_open((dir + "-missing").c_str(), &d, &m.layout, &b), CSDKIT_STORE_ERROR,
               "-missing", nullptr);
  const csdkit_device_spec d3 = Devices(3);
  EXPECT_FAILS(csdkit_store_open(dir.c_str(), &d3, &m.layout, &b), CSDKIT_INVALID_ARGUMENT,
               "devices->count", nullptr);
  EXPECT_FAILS(csdkit_store_open(nullptr, &d, &m.layout, &b), CSDKIT_INVALID_ARGUMENT, "dir",
               nullptr);
  EXPECT_FAILS(csdkit_store_open(dir.c_str(), nullptr, &m.layout, &b), CSDKIT_INVALID_ARGUMENT,
               "devices", nullptr);
  EXPECT_FAILS(csdkit_store_open(dir.c_str(), &d, nullptr, &b), CSDKIT_INVALID_ARGUMENT, "layout",
               nullptr);
  EXPECT_FAILS(csdkit_store_open(dir.c_str(), &d, &m.layout, nullptr), CSDKIT_INVALID_ARGUMENT,
               "out", nullptr);
  EXPECT_EQ(b, nullptr);
  // The refusals left the store usable.
  ASSERT_EQ(csdkit_store_open(dir.c_str(), &d, &m.layout, &b), CSDKIT_OK) << csdkit_last_error();
  csdkit_store_info info;
  ASSERT_EQ(csdkit_store_info_get(b, &info), CSDKIT_OK);
  EXPECT_EQ(info.devices, 2u);
  EXPECT_EQ(info.n_tensors, 3u);
  EXPECT_EQ(info.n_groups, 2u);
  EXPECT_EQ(info.params, m.Cxx().total());
  EXPECT_EQ(info.optimizer, CSDKIT_ADAMW);
  EXPECT_EQ(info.grad, CSDKIT_FP16);
  EXPECT_EQ(info.out, CSDKIT_FP16);
  EXPECT_EQ(info.step, 0);
  EXPECT_EQ(csdkit_store_close(b), CSDKIT_OK);
}

TEST(CApi, CallsOnAStoreRefuseBadArguments) {
  const Model m;
  const std::vector<uint16_t> w = Halves(m.packed(), 3, 0.5);
  std::vector<uint16_t> g = Halves(m.packed(), 4, 8.0);
  std::vector<const void*> gp = Split<const uint16_t, const void*>(g.data(), m);
  std::vector<uint16_t> out(m.packed());
  std::vector<void*> op = Split<uint16_t, void*>(out.data(), m);
  std::vector<float> th(m.packed());
  std::vector<float*> tp = Split<float, float*>(th.data(), m);
  csdkit_store* s = Create(TestDir("call_refusals"), m, w);
  ASSERT_NE(s, nullptr);
  const auto I = CSDKIT_INVALID_ARGUMENT;
  int64_t step = -1;
  csdkit_store_info info;
  // A NULL handle.
  EXPECT_FAILS(csdkit_step(nullptr, gp.data(), 3, nullptr, nullptr, nullptr), I, "store", nullptr);
  EXPECT_FAILS(csdkit_weights_out(nullptr, op.data(), 3), I, "store", nullptr);
  EXPECT_FAILS(csdkit_state_export(nullptr, CSDKIT_STATE_THETA, tp.data(), 3), I, "store", nullptr);
  EXPECT_FAILS(csdkit_store_step(nullptr, &step), I, "store", nullptr);
  EXPECT_FAILS(csdkit_store_info_get(nullptr, &info), I, "store", nullptr);
  // NULL pointers, wrong counts.
  EXPECT_FAILS(csdkit_store_step(s, nullptr), I, "step", s);
  EXPECT_FAILS(csdkit_store_info_get(s, nullptr), I, "info", s);
  EXPECT_FAILS(csdkit_step(s, nullptr, 3, nullptr, nullptr, nullptr), I, "grads", s);
  EXPECT_FAILS(csdkit_step(s, gp.data(), 2, nullptr, nullptr, nullptr), I, "n_tensors", s);
  std::vector<const void*> gnull = gp;
  gnull[1] = nullptr;
  EXPECT_FAILS(csdkit_step(s, gnull.data(), 3, nullptr, nullptr, nullptr), I, "grads[1]", s);
  EXPECT_FAILS(csdkit_weights_out(s, nullptr, 3), I, "dst", s);
  EXPECT_FAILS(csdkit_weights_out(s, op.data(), 4), I, "n_tensors", s);
  EXPECT_FAILS(csdkit_state_export(s, CSDKIT_STATE_THETA, nullptr, 3), I, "dst", s);
  EXPECT_FAILS(csdkit_state_export(s, CSDKIT_STATE_THETA, tp.data(), 1), I, "n_tensors", s);
  EXPECT_FAILS(csdkit_state_export(s, static_cast<csdkit_state_var>(3), tp.data(), 3), I, "var", s);
  // Options out of range.
  csdkit_step_options o;
  const auto bad_option = [&](auto change, const char* what) {
    ASSERT_EQ(csdkit_step_options_init(&o), CSDKIT_OK);
    change();
    EXPECT_FAILS(csdkit_step(s, gp.data(), 3, &o, nullptr, nullptr), I, what, s);
  };
  bad_option([&] { o.mode = static_cast<csdkit_mode>(2); }, "options->mode");
  bad_option([&] { o.loss_scale = -2; }, "options->loss_scale");
  bad_option([&] { o.clip_coef = 0; }, "options->clip_coef");
  bad_option([&] { o.max_norm = NAN; }, "options->max_norm");
  bad_option([&] { o.max_norm = 1, o.clip_coef = 0.5; }, "at most one");
  std::vector<csdkit_hyper> h = Hyper();
  bad_option([&] { o.group_hyper = h.data(), o.n_group_hyper = 1; }, "options->n_group_hyper");
  bad_option([&] { o.group_hyper = h.data(); }, "options->n_group_hyper");
  bad_option([&] { o.n_group_hyper = 2; }, "options->group_hyper");
  h[1].optimizer = CSDKIT_SGD;
  bad_option([&] { o.group_hyper = h.data(), o.n_group_hyper = 2; }, "optimizer");
  // Weights before any step.
  EXPECT_FAILS(csdkit_weights_out(s, op.data(), 3), CSDKIT_BAD_STATE, "weights", s);
  // Nothing was committed; a good call clears the store's message.
  ASSERT_EQ(csdkit_store_step(s, &step), CSDKIT_OK);
  EXPECT_EQ(step, 0);
  EXPECT_STREQ(csdkit_store_last_error(s), "");
  ASSERT_EQ(csdkit_step(s, gp.data(), 3, nullptr, nullptr, nullptr), CSDKIT_OK)
      << csdkit_last_error();
  ASSERT_EQ(csdkit_weights_out(s, op.data(), 3), CSDKIT_OK);
  EXPECT_EQ(csdkit_store_close(s), CSDKIT_OK);

  // A variable the optimizer does not keep: SGD without momentum has theta only.
  csdkit_store* sgd = nullptr;
  {
    const csdkit_device_spec d = Devices(2);
    const csdkit_store_config c = Config();
    std::vector<csdkit_hyper> hs = Hyper(CSDKIT_SGD);
    hs[0].momentum = hs[1].momentum = 0;
    ASSERT_EQ(csdkit_store_create(TestDir("call_refusals_sgd").c_str(), &d, &c, &m.layout,
                                  hs.data(), 2, w.data(), CSDKIT_FP16, &sgd),
              CSDKIT_OK)
        << csdkit_last_error();
  }
  EXPECT_FAILS(csdkit_state_export(sgd, CSDKIT_STATE_M, tp.data(), 3), I, "keeps no 'm'", sgd);
  EXPECT_EQ(csdkit_state_export(sgd, CSDKIT_STATE_THETA, tp.data(), 3), CSDKIT_OK);
  EXPECT_EQ(csdkit_store_close(sgd), CSDKIT_OK);
}

TEST(CApi, DeviceMemoryTooSmallIsACapacityError) {
  const Model m;
  const std::vector<uint16_t> w = Halves(m.packed(), 5, 0.5);
  const std::vector<uint16_t> g = Halves(m.packed(), 6, 8.0);
  const std::vector<const void*> gp = Split<const uint16_t, const void*>(g.data(), m);
  const std::string dir = TestDir("capacity");
  ASSERT_EQ(csdkit_store_close(Create(dir, m, w)), CSDKIT_OK);
  csdkit_device_spec d = Devices(2);
  d.device_mem = 1 << 20;  // two workers' buffers for 65536-element subgroups need more
  csdkit_store* s = nullptr;
  ASSERT_EQ(csdkit_store_open(dir.c_str(), &d, &m.layout, &s), CSDKIT_OK) << csdkit_last_error();
  EXPECT_FAILS(csdkit_step(s, gp.data(), 3, nullptr, nullptr, nullptr), CSDKIT_CAPACITY, "", s);
  EXPECT_NE(std::string(csdkit_store_last_error(s)), "");
  int64_t step = -1;
  ASSERT_EQ(csdkit_store_step(s, &step), CSDKIT_OK);
  EXPECT_EQ(step, 0);
  EXPECT_EQ(csdkit_store_close(s), CSDKIT_OK);
}

TEST(CApi, ThreeStepsEqualTheCxxApiBitForBit) {
  const Model m;
  const ParamLayout l = m.Cxx();
  const std::vector<uint16_t> w = Halves(m.packed(), 7, 0.5);
  const std::string cdir = TestDir("equal_c"), xdir = TestDir("equal_cxx");
  csdkit_store* cs = Create(cdir, m, w);
  ASSERT_NE(cs, nullptr);

  const std::vector<csdkit_hyper> h = Hyper();
  std::vector<OptimizerConfig> gh;
  Store xs = CxxTwin(xdir, m, w, &gh);
  DeviceSpec spec;
  spec.count = 2;
  DeviceSet xd(spec);
  Scheduler xsched(xs, xd);

  std::vector<uint16_t> cout(m.packed()), xout(m.packed());
  for (int t = 1; t <= 3; ++t) {
    const std::vector<uint16_t> g = Halves(m.packed(), 100 + t, 8.0);
    const std::vector<const void*> gp = Split<const uint16_t, const void*>(g.data(), m);
    // Per-group learning rates that change every step; step 2 clips to a global norm, step 3
    // runs the baseline in the C API and SmartUpdate in C++ (bit-identical by contract).
    std::vector<csdkit_hyper> now = h;
    now[0].lr *= 1.0 - 0.1 * t;
    now[1].lr *= 1.0 - 0.2 * t;
    csdkit_step_options o;
    ASSERT_EQ(csdkit_step_options_init(&o), CSDKIT_OK);
    o.group_hyper = now.data();
    o.n_group_hyper = 2;
    o.loss_scale = 32;
    if (t == 2) o.max_norm = 0.5;
    if (t == 3) o.mode = CSDKIT_MODE_BASELINE;
    double cnorm = -1;
    csdkit_step_report r;
    ASSERT_EQ(csdkit_step(cs, gp.data(), 3, &o, &cnorm, &r), CSDKIT_OK) << csdkit_last_error();
    EXPECT_EQ(r.step, t);
    EXPECT_EQ(r.skipped, 0);
    EXPECT_STREQ(r.skip_reason, "");
    EXPECT_GT(r.subgroups, 0u);

    StepOptions xo;
    xo.group_hyper = gh;
    xo.group_hyper[0].lr = now[0].lr;
    xo.group_hyper[1].lr = now[1].lr;
    xo.loss_scale = 32.0;
    double xnorm = 0;
    const GradientSet xg =
        GradientSet::Gather(xs, std::vector<const void*>(gp.begin(), gp.end()), &xnorm);
    EXPECT_EQ(cnorm, xnorm);
    if (t == 2) {
      xo.clip_coef = std::min(1.0, 0.5 / (xnorm / 32.0 + 1e-6));
      EXPECT_LT(xo.clip_coef, 1.0) << "the test should clip";
    }
    const StepReport xr = xsched.Step(xg, xo);
    ASSERT_FALSE(xr.skipped);
    if (t != 3) {
      EXPECT_EQ(r.shared_link_bytes, xr.bytes.Shared());
      for (unsigned k = 0; k < CSDKIT_NUM_LINKS; ++k) EXPECT_EQ(r.link_bytes[k], xr.bytes.bytes[k]);
    }
    ASSERT_EQ(csdkit_weights_out(cs, Split<uint16_t, void*>(cout.data(), m).data(), 3), CSDKIT_OK);
    xsched.CopyWeightsOut(Split<uint16_t, void*>(xout.data(), m));
    ASSERT_EQ(cout, xout) << "weights out of step " << t;
  }

  // The exported state is the committed state, tensor by tensor.
  std::vector<float> e(m.packed());
  for (unsigned v = 0; v < 3; ++v) {
    ASSERT_EQ(csdkit_state_export(cs, static_cast<csdkit_state_var>(v),
                                  Split<float, float*>(e.data(), m).data(), 3),
              CSDKIT_OK)
        << csdkit_last_error();
    const std::vector<uint32_t> x = ReadVar(xs, v);
    uint64_t k = 0;
    for (size_t t = 0; t < 3; ++t) {
      for (uint64_t i = 0; i < m.numels[t]; ++i, ++k) {
        uint32_t got;
        std::memcpy(&got, &e[k], 4);
        ASSERT_EQ(got, x[l.offset(t) + i])
            << xs.vars()[v] << " " << m.names[t] << "[" << i << "] GOT=0x" << std::hex << got
            << " EXP=0x" << x[l.offset(t) + i];
      }
    }
  }
  int64_t step = 0;
  ASSERT_EQ(csdkit_store_step(cs, &step), CSDKIT_OK);
  EXPECT_EQ(step, 3);
  ASSERT_EQ(csdkit_store_close(cs), CSDKIT_OK);
  // The committed CRCs and hyper-parameters are the C++ run's.
  const Store back = Store::Open(cdir, l);
  EXPECT_EQ(back.step(), 3);
  for (unsigned d = 0; d < 2; ++d) {
    for (unsigned v = 0; v < back.vars().size(); ++v) {
      for (uint32_t j = 0; j < back.Subgroups(d).size(); ++j) {
        ASSERT_EQ(back.checksum(d, v, j), xs.checksum(d, v, j)) << d << " " << v << " " << j;
      }
    }
  }
  for (unsigned k = 0; k < 2; ++k) EXPECT_EQ(back.group_hyper()[k].lr, xs.group_hyper()[k].lr);
}

TEST(CApi, FoundInfSkipsAndTheDivergenceGuardRefuses) {
  const Model m;
  const std::vector<uint16_t> w = Halves(m.packed(), 8, 0.5);
  std::vector<uint16_t> g = Halves(m.packed(), 9, 8.0);
  const std::vector<const void*> gp = Split<const uint16_t, const void*>(g.data(), m);
  csdkit_store* s = Create(TestDir("skips"), m, w);
  ASSERT_NE(s, nullptr);
  csdkit_step_options o;
  ASSERT_EQ(csdkit_step_options_init(&o), CSDKIT_OK);
  o.found_inf = 1;
  csdkit_step_report r;
  ASSERT_EQ(csdkit_step(s, gp.data(), 3, &o, nullptr, &r), CSDKIT_OK) << csdkit_last_error();
  EXPECT_EQ(r.skipped, 1);
  EXPECT_EQ(r.step, 1);
  EXPECT_NE(std::string(r.skip_reason).find("found_inf"), std::string::npos) << r.skip_reason;
  EXPECT_EQ(r.shared_link_bytes, 0u);
  int64_t step = -1;
  ASSERT_EQ(csdkit_store_step(s, &step), CSDKIT_OK);
  EXPECT_EQ(step, 0);
  // An infinity in the head's gradient (a loss-scale overflow): skipped, norm +inf.
  g[m.numels[0] + m.numels[1] + 17] = 0x7c00;
  double norm = 0;
  ASSERT_EQ(csdkit_step(s, gp.data(), 3, nullptr, &norm, &r), CSDKIT_OK) << csdkit_last_error();
  EXPECT_EQ(r.skipped, 1);
  EXPECT_TRUE(std::isinf(norm));
  EXPECT_NE(std::string(r.skip_reason).find("overflow"), std::string::npos) << r.skip_reason;
  ASSERT_EQ(csdkit_store_step(s, &step), CSDKIT_OK);
  EXPECT_EQ(step, 0);
  // Finite again: step 1 commits.
  g[m.numels[0] + m.numels[1] + 17] = 0x3c00;
  ASSERT_EQ(csdkit_step(s, gp.data(), 3, nullptr, nullptr, &r), CSDKIT_OK) << csdkit_last_error();
  EXPECT_EQ(r.skipped, 0);
  EXPECT_GT(r.shared_link_bytes, 0u);
  ASSERT_EQ(csdkit_store_step(s, &step), CSDKIT_OK);
  EXPECT_EQ(step, 1);
  // Finite gradients times a finite clip coefficient whose squares overflow v: the divergence
  // guard refuses the step (CSDKIT_DIVERGED, nothing committed) unless allow_nonfinite is set.
  ASSERT_EQ(csdkit_step_options_init(&o), CSDKIT_OK);
  EXPECT_EQ(o.allow_nonfinite, 0);
  o.loss_scale = 1.0;
  o.clip_coef = 1e30;
  EXPECT_FAILS(csdkit_step(s, gp.data(), 3, &o, nullptr, &r), CSDKIT_DIVERGED,
               "non-finite value", s);
  EXPECT_NE(std::string(csdkit_last_error()).find("store keeps step 1"), std::string::npos)
      << csdkit_last_error();
  EXPECT_STREQ(csdkit_status_name(CSDKIT_DIVERGED), "CSDKIT_DIVERGED");
  ASSERT_EQ(csdkit_store_step(s, &step), CSDKIT_OK);
  EXPECT_EQ(step, 1);
  o.allow_nonfinite = 1;
  ASSERT_EQ(csdkit_step(s, gp.data(), 3, &o, nullptr, &r), CSDKIT_OK) << csdkit_last_error();
  EXPECT_EQ(r.step, 2);
  EXPECT_GT(r.nonfinite_values, 0u);
  ASSERT_EQ(csdkit_store_step(s, &step), CSDKIT_OK);
  EXPECT_EQ(step, 2);
  EXPECT_EQ(csdkit_store_close(s), CSDKIT_OK);
}

// A checkpoint through the C API: the state of one store exported and imported into another at
// its step; both then take the same step to the same bytes. Refusals write nothing.
TEST(CApi, StateExportImportMovesACheckpoint) {
  const Model m;
  const std::vector<uint16_t> w = Halves(m.packed(), 21, 0.5);
  const csdkit_device_spec d = Devices(2);
  const csdkit_store_config c = Config();
  const std::vector<csdkit_hyper> h = Hyper();
  csdkit_store *a = nullptr, *b = nullptr;
  ASSERT_EQ(csdkit_store_create(TestDir("ckpt_a").c_str(), &d, &c, &m.layout, h.data(), 2,
                                w.data(), CSDKIT_FP16, &a), CSDKIT_OK) << csdkit_last_error();
  ASSERT_EQ(csdkit_store_create(TestDir("ckpt_b").c_str(), &d, &c, &m.layout, h.data(), 2,
                                Halves(m.packed(), 22, 0.5).data(), CSDKIT_FP16, &b), CSDKIT_OK)
      << csdkit_last_error();
  std::vector<std::vector<uint16_t>> g;
  for (int t = 0; t < 3; ++t) g.push_back(Halves(m.packed(), 30 + t, 4.0));
  for (int t = 0; t < 2; ++t) {
    const auto gp = Split<const uint16_t, const void*>(g[t].data(), m);
    ASSERT_EQ(csdkit_step(a, gp.data(), 3, nullptr, nullptr, nullptr), CSDKIT_OK)
        << csdkit_last_error();
  }
  // Export a's theta, m, v; import into b at a's step.
  std::vector<std::vector<float>> st(3, std::vector<float>(m.packed()));
  std::vector<std::vector<float*>> sp;
  for (int v = 0; v < 3; ++v) {
    sp.push_back(Split<float, float*>(st[v].data(), m));
    ASSERT_EQ(csdkit_state_export(a, static_cast<csdkit_state_var>(v), sp[v].data(), 3), CSDKIT_OK)
        << csdkit_last_error();
  }
  std::vector<const void*> theta(sp[0].begin(), sp[0].end());
  std::vector<const float*> mm(sp[1].begin(), sp[1].end()), vv(sp[2].begin(), sp[2].end());
  const auto I = CSDKIT_INVALID_ARGUMENT;
  EXPECT_FAILS(csdkit_state_import(b, -1, theta.data(), CSDKIT_FP32, mm.data(), vv.data(), 3), I,
               "step", b);
  EXPECT_FAILS(csdkit_state_import(b, 2, nullptr, CSDKIT_FP32, mm.data(), vv.data(), 3), I,
               "theta", b);
  EXPECT_FAILS(csdkit_state_import(b, 2, theta.data(), CSDKIT_FP32, mm.data(), vv.data(), 2), I,
               "n_tensors", b);
  st[2][5] = -1.0f;
  EXPECT_FAILS(csdkit_state_import(b, 2, theta.data(), CSDKIT_FP32, mm.data(), vv.data(), 3), I,
               "v of tensor 'embed.weight'", b);
  st[2][5] = 0.0f;
  ASSERT_EQ(csdkit_state_export(a, CSDKIT_STATE_V, sp[2].data(), 3), CSDKIT_OK);
  int64_t step = -1;
  ASSERT_EQ(csdkit_store_step(b, &step), CSDKIT_OK);
  EXPECT_EQ(step, 0);  // the refusals committed nothing
  ASSERT_EQ(csdkit_state_import(b, 2, theta.data(), CSDKIT_FP32, mm.data(), vv.data(), 3),
            CSDKIT_OK) << csdkit_last_error();
  ASSERT_EQ(csdkit_store_step(b, &step), CSDKIT_OK);
  EXPECT_EQ(step, 2);
  std::vector<int64_t> counts(3, -1);
  EXPECT_FAILS(csdkit_tensor_steps(b, counts.data(), 2), I, "n_tensors", b);
  EXPECT_FAILS(csdkit_tensor_steps(b, nullptr, 3), I, "steps", b);
  ASSERT_EQ(csdkit_tensor_steps(b, counts.data(), 3), CSDKIT_OK) << csdkit_last_error();
  EXPECT_EQ(counts, std::vector<int64_t>(3, 2));  // the import's step for every tensor
  std::vector<uint16_t> out(m.packed());
  auto op = Split<uint16_t, void*>(out.data(), m);
  EXPECT_FAILS(csdkit_weights_out(b, op.data(), 3), CSDKIT_BAD_STATE, "no step", b);
  const auto gp = Split<const uint16_t, const void*>(g[2].data(), m);
  ASSERT_EQ(csdkit_step(a, gp.data(), 3, nullptr, nullptr, nullptr), CSDKIT_OK);
  ASSERT_EQ(csdkit_step(b, gp.data(), 3, nullptr, nullptr, nullptr), CSDKIT_OK);
  ASSERT_EQ(csdkit_store_close(a), CSDKIT_OK);
  ASSERT_EQ(csdkit_store_close(b), CSDKIT_OK);
  const Store sa = Store::Open(std::string(CSDKIT_TEST_DIR) + "/ckpt_a", m.Cxx(), StoreAccess::kRead);
  const Store sb = Store::Open(std::string(CSDKIT_TEST_DIR) + "/ckpt_b", m.Cxx(), StoreAccess::kRead);
  EXPECT_EQ(sb.step(), 3);
  for (unsigned v = 0; v < 3; ++v) {
    EXPECT_TRUE(ReadVar(sa, v) == ReadVar(sb, v)) << "variable " << v << " after step 3";
  }
}

// A q8 store through the C API: created with config.state, described by csdkit_store_info_get;
// its moments as stored (csdkit_state_export_q8) dequantize to what csdkit_state_export gives;
// imported as stored into another store (csdkit_state_import_q8) they give the same checksums
// and the same codes, and both stores then take the same step to the same bytes. Refusals name
// the argument and commit nothing.
TEST(CApi, Q8StoreMovesItsCodesBitForBit) {
  const Model m;
  const csdkit_device_spec d = Devices(2);
  csdkit_store_config c = Config();
  EXPECT_EQ(c.state, CSDKIT_STATE_FP32);
  EXPECT_EQ(c.seed, 1u);
  const std::vector<csdkit_hyper> h = Hyper();
  const auto I = CSDKIT_INVALID_ARGUMENT;
  csdkit_store *a = nullptr, *b = nullptr, *f = nullptr;
  c.state = static_cast<csdkit_state_format>(3);
  EXPECT_FAILS(csdkit_store_create(TestDir("q8_bad").c_str(), &d, &c, &m.layout, h.data(), 2,
                                   Halves(m.packed(), 1, 0.5).data(), CSDKIT_FP16, &a),
               I, "config->state", static_cast<csdkit_store*>(nullptr));
  c.state = CSDKIT_STATE_Q8_BF16;
  c.out = CSDKIT_BF16;
  c.grad = CSDKIT_BF16;
  c.seed = 987654321;
  ASSERT_EQ(csdkit_store_create(TestDir("q8_a").c_str(), &d, &c, &m.layout, h.data(), 2,
                                Halves(m.packed(), 21, 0.5).data(), CSDKIT_FP16, &a), CSDKIT_OK)
      << csdkit_last_error();
  ASSERT_EQ(csdkit_store_create(TestDir("q8_b").c_str(), &d, &c, &m.layout, h.data(), 2,
                                Halves(m.packed(), 22, 0.5).data(), CSDKIT_FP16, &b), CSDKIT_OK)
      << csdkit_last_error();
  csdkit_store_info info;
  ASSERT_EQ(csdkit_store_info_get(a, &info), CSDKIT_OK);
  EXPECT_EQ(info.state, CSDKIT_STATE_Q8_BF16);
  // bf16 gradients (the Halves bits read as bf16: any finite pattern will do).
  std::vector<std::vector<uint16_t>> g;
  for (int t = 0; t < 3; ++t) {
    g.push_back(Halves(m.packed(), 40 + t, 4.0));
    for (uint16_t& x : g.back()) x = hls::F32ToBf16(hls::F16ToF32(x));
  }
  for (int t = 0; t < 2; ++t) {
    const auto gp = Split<const uint16_t, const void*>(g[t].data(), m);
    ASSERT_EQ(csdkit_step(a, gp.data(), 3, nullptr, nullptr, nullptr), CSDKIT_OK)
        << csdkit_last_error();
  }
  // The moments as stored, and dequantized.
  std::vector<std::vector<std::vector<uint8_t>>> codes(3);
  std::vector<std::vector<std::vector<float>>> amax(3);
  std::vector<std::vector<float>> deq(3, std::vector<float>(m.packed()));
  for (int v = 1; v <= 2; ++v) {
    std::vector<uint8_t*> cp;
    std::vector<float*> ap;
    for (uint64_t n : m.numels) {
      const uint64_t nb = (n + 255) / 256;
      codes[v].emplace_back(nb * 256, 0xee);
      amax[v].emplace_back(nb, -1.0f);
      cp.push_back(codes[v].back().data());
      ap.push_back(amax[v].back().data());
    }
    const auto var = static_cast<csdkit_state_var>(v);
    ASSERT_EQ(csdkit_state_export_q8(a, var, cp.data(), ap.data(), 3), CSDKIT_OK)
        << csdkit_last_error();
    auto dp = Split<float, float*>(deq[v].data(), m);
    ASSERT_EQ(csdkit_state_export(a, var, dp.data(), 3), CSDKIT_OK) << csdkit_last_error();
    const hls::Fp32 ieee(false);
    uint64_t nonzero = 0;
    for (size_t t = 0; t < 3; ++t) {
      for (uint64_t i = 0; i < m.numels[t]; ++i) {
        const float x = hls::DequantQ8(codes[v][t][i], amax[v][t][i / 256], v == 1, ieee);
        ASSERT_EQ(hls::F2U(x), hls::F2U(dp[t][i])) << "var " << v << " tensor " << t << " element " << i;
        nonzero += x != 0.0f;
      }
      // The padding after a tensor's last element dequantizes to 0.
      for (uint64_t i = m.numels[t]; i < codes[v][t].size(); ++i) {
        ASSERT_EQ(hls::DequantQ8(codes[v][t][i], amax[v][t][i / 256], v == 1, ieee), 0.0f)
            << "var " << v << " tensor " << t << " padding element " << i;
      }
    }
    EXPECT_GT(nonzero, m.packed() / 2) << "var " << v;
  }
  std::vector<float> theta(m.packed());
  auto tp = Split<float, float*>(theta.data(), m);
  ASSERT_EQ(csdkit_state_export(a, CSDKIT_STATE_THETA, tp.data(), 3), CSDKIT_OK);
  std::vector<const void*> th(tp.begin(), tp.end());
  std::vector<const uint8_t*> mc, vc;
  std::vector<const float*> ma, va;
  for (size_t t = 0; t < 3; ++t) {
    mc.push_back(codes[1][t].data());
    ma.push_back(amax[1][t].data());
    vc.push_back(codes[2][t].data());
    va.push_back(amax[2][t].data());
  }
  // Refusals, nothing committed.
  EXPECT_FAILS(csdkit_state_import_q8(b, 2, th.data(), CSDKIT_FP32, mc.data(), nullptr, vc.data(),
                                      va.data(), 3), I, "m_codes / m_absmax", b);
  amax[2][2][7] = -0.5f;
  EXPECT_FAILS(csdkit_state_import_q8(b, 2, th.data(), CSDKIT_FP32, mc.data(), ma.data(),
                                      vc.data(), va.data(), 3), I,
               "v_absmax of tensor 'head.weight': expected +0 or a normal finite positive value, "
               "found block 7", b);
  amax[2][2][7] = hls::U2F(0x00400000u);  // subnormal
  EXPECT_FAILS(csdkit_state_import_q8(b, 2, th.data(), CSDKIT_FP32, mc.data(), ma.data(),
                                      vc.data(), va.data(), 3), I, "block 7", b);
  std::vector<float> absmax7(1);
  std::vector<float*> ap7 = {absmax7.data(), absmax7.data(), absmax7.data()};
  std::vector<uint8_t> c7(1);
  std::vector<uint8_t*> cp7 = {c7.data(), c7.data(), c7.data()};
  EXPECT_FAILS(csdkit_state_export_q8(a, CSDKIT_STATE_THETA, cp7.data(), ap7.data(), 3), I,
               "expected a moment", a);
  int64_t step = -1;
  ASSERT_EQ(csdkit_store_step(b, &step), CSDKIT_OK);
  EXPECT_EQ(step, 0);
  {  // v's absmax values as exported again (the refusals above changed one)
    std::vector<uint8_t*> cp;
    std::vector<float*> ap;
    for (size_t t = 0; t < 3; ++t) {
      cp.push_back(codes[2][t].data());
      ap.push_back(amax[2][t].data());
    }
    ASSERT_EQ(csdkit_state_export_q8(a, CSDKIT_STATE_V, cp.data(), ap.data(), 3), CSDKIT_OK);
  }
  ASSERT_EQ(csdkit_state_import_q8(b, 2, th.data(), CSDKIT_FP32, mc.data(), ma.data(), vc.data(),
                                   va.data(), 3), CSDKIT_OK) << csdkit_last_error();
  // An fp32 store takes no codes.
  csdkit_store_config cf = Config();
  ASSERT_EQ(csdkit_store_create(TestDir("q8_f").c_str(), &d, &cf, &m.layout, h.data(), 2,
                                Halves(m.packed(), 23, 0.5).data(), CSDKIT_FP16, &f), CSDKIT_OK);
  EXPECT_FAILS(csdkit_state_import_q8(f, 2, th.data(), CSDKIT_FP32, mc.data(), ma.data(),
                                      vc.data(), va.data(), 3), I, "expected a q8 or q8-bf16", f);
  {
    std::vector<uint8_t*> cp = {codes[1][0].data(), codes[1][1].data(), codes[1][2].data()};
    std::vector<float*> ap = {amax[1][0].data(), amax[1][1].data(), amax[1][2].data()};
    EXPECT_FAILS(csdkit_state_export_q8(f, CSDKIT_STATE_M, cp.data(), ap.data(), 3), I,
                 "keeps its state as fp32", f);
  }
  ASSERT_EQ(csdkit_store_close(f), CSDKIT_OK);
  // b holds a's state: the same checksums, the same codes out; then the same step.
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(csdkit_store_close(a), CSDKIT_OK);
    ASSERT_EQ(csdkit_store_close(b), CSDKIT_OK);
    {
      const Store sa = Store::Open(std::string(CSDKIT_TEST_DIR) + "/q8_a", m.Cxx(), StoreAccess::kRead);
      const Store sb = Store::Open(std::string(CSDKIT_TEST_DIR) + "/q8_b", m.Cxx(), StoreAccess::kRead);
      ASSERT_EQ(sa.step(), sb.step());
      for (const Shard& sh : sa.shards()) {
        for (unsigned v = 0; v < sa.vars().size(); ++v) {
          for (uint32_t k = 0; k < sa.SubgroupCount(sh.device); ++k) {
            EXPECT_EQ(sa.checksum(sh.device, v, k), sb.checksum(sh.device, v, k))
                << "round " << round << " device " << sh.device << " var " << v << " subgroup "
                << k;
          }
        }
      }
    }
    ASSERT_EQ(csdkit_store_open((std::string(CSDKIT_TEST_DIR) + "/q8_a").c_str(), &d, &m.layout,
                                &a), CSDKIT_OK) << csdkit_last_error();
    ASSERT_EQ(csdkit_store_open((std::string(CSDKIT_TEST_DIR) + "/q8_b").c_str(), &d, &m.layout,
                                &b), CSDKIT_OK) << csdkit_last_error();
    if (round == 0) {
      const auto gp = Split<const uint16_t, const void*>(g[2].data(), m);
      ASSERT_EQ(csdkit_step(a, gp.data(), 3, nullptr, nullptr, nullptr), CSDKIT_OK);
      ASSERT_EQ(csdkit_step(b, gp.data(), 3, nullptr, nullptr, nullptr), CSDKIT_OK);
    }
  }
  ASSERT_EQ(csdkit_store_close(a), CSDKIT_OK);
  ASSERT_EQ(csdkit_store_close(b), CSDKIT_OK);
}

// Top-K through the C API: the subgroups listed in order, the trainer's streams (the reference
// compressor's, per subgroup) stepped with csdkit_step_sparse equal the same streams stepped
// with the C++ API bit for bit; only the streams' bytes cross the shared link; malformed
// streams and counts are refused naming the stream, with nothing committed.
TEST(CApi, SparseStepEqualsTheCxxApiBitForBit) {
  const Model m;
  const ParamLayout l = m.Cxx();
  const std::vector<uint16_t> w = Halves(m.packed(), 31, 0.5);
  csdkit_store* cs = Create(TestDir("sparse_c"), m, w);
  ASSERT_NE(cs, nullptr);
  Store xs = CxxTwin(TestDir("sparse_cxx"), m, w);
  DeviceSpec spec;
  spec.count = 2;
  DeviceSet xd(spec);
  Scheduler xsched(xs, xd);

  size_t count = 0;
  ASSERT_EQ(csdkit_store_subgroups(cs, nullptr, 0, &count), CSDKIT_OK);
  std::vector<csdkit_subgroup> sgs(count);
  EXPECT_FAILS(csdkit_store_subgroups(cs, sgs.data(), count - 1, &count), CSDKIT_INVALID_ARGUMENT,
               "capacity", cs);
  ASSERT_EQ(csdkit_store_subgroups(cs, sgs.data(), count, &count), CSDKIT_OK);
  const std::vector<Subgroup> all = xs.AllSubgroups();
  ASSERT_EQ(count, all.size());
  for (size_t k = 0; k < count; ++k) {
    EXPECT_EQ(sgs[k].device, all[k].device);
    EXPECT_EQ(sgs[k].n, all[k].n);
    EXPECT_EQ(sgs[k].begin, xs.shards()[all[k].device].begin + all[k].begin);
    EXPECT_EQ(sgs[k].group, all[k].group);
  }
  // The dense gradient over the flattened range (padding zero), compressed per subgroup.
  const std::vector<uint16_t> packed = Halves(m.packed(), 77, 8.0);
  std::vector<uint16_t> flat(xs.config().params, 0);
  for (size_t t = 0, at = 0; t < 3; at += m.numels[t], ++t) {
    std::copy(packed.begin() + at, packed.begin() + at + m.numels[t], flat.begin() + l.offset(t));
  }
  std::vector<SparseGrad> enc;
  std::vector<csdkit_sparse_grad> streams;
  std::vector<std::vector<SparseGrad>> xstreams(2);
  uint64_t stream_bytes = 0;
  for (size_t k = 0; k < count; ++k) {
    enc.push_back(CompressTopK(flat.data() + sgs[k].begin, DType::kFp16, sgs[k].n, 0.05));
    stream_bytes += enc.back().StreamBytes();
    xstreams[sgs[k].device].push_back(
        CompressTopK(flat.data() + sgs[k].begin, DType::kFp16, sgs[k].n, 0.05));
  }
  for (const SparseGrad& e : enc) {
    streams.push_back({e.n, e.nnz, e.blk.as<uint32_t>(), e.idx.as<uint16_t>(), e.val.data()});
  }
  // Refusals first: nothing committed.
  const auto I = CSDKIT_INVALID_ARGUMENT;
  EXPECT_FAILS(csdkit_step_sparse(cs, streams.data(), count - 1, nullptr, nullptr), I,
               "n_streams", cs);
  std::vector<csdkit_sparse_grad> bad = streams;
  bad[1].n += 1;
  EXPECT_FAILS(csdkit_step_sparse(cs, bad.data(), count, nullptr, nullptr), I,
               "streams[1] (device 0 subgroup 1): expected n", cs);
  std::vector<uint16_t> idx(enc[0].idx.as<uint16_t>(), enc[0].idx.as<uint16_t>() + enc[0].nnz);
  std::swap(idx[0], idx[1]);  // not ascending
  bad = streams;
  bad[0].idx = idx.data();
  EXPECT_FAILS(csdkit_step_sparse(cs, bad.data(), count, nullptr, nullptr), I,
               "sparse gradient of device 0 subgroup 0", cs);
  csdkit_step_options o;
  ASSERT_EQ(csdkit_step_options_init(&o), CSDKIT_OK);
  o.max_norm = 1.0;
  EXPECT_FAILS(csdkit_step_sparse(cs, streams.data(), count, &o, nullptr), I,
               "options->max_norm", cs);
  int64_t step = -1;
  ASSERT_EQ(csdkit_store_step(cs, &step), CSDKIT_OK);
  EXPECT_EQ(step, 0);

  csdkit_step_report r;
  ASSERT_EQ(csdkit_step_sparse(cs, streams.data(), count, nullptr, &r), CSDKIT_OK)
      << csdkit_last_error();
  EXPECT_EQ(r.step, 1);
  EXPECT_EQ(r.link_bytes[CSDKIT_LINK_HOST_TO_DEVICE], stream_bytes);
  const StepReport xr =
      xsched.Step(GradientSet::FromStreams(xs, std::move(xstreams)), StepOptions());
  EXPECT_EQ(xr.bytes[Link::kHostToDevice], stream_bytes);
  ASSERT_EQ(csdkit_store_close(cs), CSDKIT_OK);
  const Store back = Store::Open(std::string(CSDKIT_TEST_DIR) + "/sparse_c", l, StoreAccess::kRead);
  for (unsigned v = 0; v < 3; ++v) {
    EXPECT_TRUE(ReadVar(back, v) == ReadVar(xs, v)) << "variable " << v;
  }
}

}  // namespace
}  // namespace csdkit
