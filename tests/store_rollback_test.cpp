// Store::RollBack (store.h, ROLLBACK): each commit records the state it replaced; RollBack
// commits it again, so a store one step ahead of its peers returns to their step: its state is
// then bit for bit the state before that step (also after reopening), the next step from it
// equals the step taken the first time, a second RollBack and one on a new store are refused,
// and a reader cannot roll back.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "csdkit/hls/bits.h"
#include "csdkit/platform/splitmix.h"
#include "csdkit/runtime/gradients.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/state_io.h"
#include "csdkit/runtime/store.h"
#include "csdkit/system/device_set.h"
#include "test_dir.h"

namespace csdkit {
namespace {

using testing::TestDir;

ParamLayout Layout() {
  return ParamLayout({{"a", 70001, 0}, {"b", 333, 0}, {"c", 90000, 1}});
}

StoreConfig Config() {
  StoreConfig c;
  c.devices = 2;
  c.hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
  c.grad = DType::kFp32;
  c.out = DType::kFp32;
  c.subgroup_elems = 65536;
  return c;
}

std::vector<std::vector<float>> Tensors(const ParamLayout& l, uint64_t seed) {
  std::vector<std::vector<float>> t;
  SplitMix64 r{seed};
  for (const TensorSpec& s : l.tensors()) {
    t.emplace_back(s.numel);
    for (float& x : t.back()) x = r.Uniform(-1, 1);
  }
  return t;
}

std::vector<float> Packed(const std::vector<std::vector<float>>& t) {
  std::vector<float> p;
  for (const auto& x : t) p.insert(p.end(), x.begin(), x.end());
  return p;
}

// Every state variable of the committed step, as bits, tensor after tensor.
std::vector<uint32_t> State(const Store& s) {
  std::vector<uint32_t> out;
  for (const std::string& var : s.vars()) {
    std::vector<std::vector<float>> t;
    std::vector<float*> dst;
    for (const TensorSpec& x : s.layout()->tensors()) t.emplace_back(x.numel);
    for (auto& x : t) dst.push_back(x.data());
    ExportState(s, var, dst);
    for (const auto& x : t)
      for (float f : x) out.push_back(hls::F2U(f));
  }
  return out;
}

void OneStep(Store& s, uint64_t seed, double lr) {
  const auto g = Tensors(*s.layout(), seed);
  std::vector<const void*> p;
  for (const auto& x : g) p.push_back(x.data());
  DeviceSpec spec;
  spec.count = s.config().devices;
  DeviceSet dev(spec);
  Scheduler sch(s, dev);
  StepOptions o;
  std::vector<OptimizerConfig> h = s.group_hyper();
  h[0].lr = lr;
  o.group_hyper = h;
  sch.Step(GradientSet::Gather(s, p), o);
}

TEST(StoreRollBack, ReturnsToTheStepBeforeAndContinuesTheSame) {
  const ParamLayout l = Layout();
  const StoreConfig c = Config();
  const std::string dir = TestDir("rollback");
  std::vector<uint32_t> at1, at2;
  {
    Store s = Store::CreateForModel(dir, c, l, {c.hyper, c.hyper}, Packed(Tensors(l, 1)).data(),
                                    DType::kFp32);
    EXPECT_FALSE(s.can_roll_back());
    EXPECT_THROW(s.RollBack(), StoreError);
    OneStep(s, 2, 1e-3);
    at1 = State(s);
    OneStep(s, 3, 2e-3);
    at2 = State(s);
    EXPECT_TRUE(s.can_roll_back());
    EXPECT_EQ(s.previous_step(), 1);
  }
  {
    Store r = Store::Open(dir, StoreAccess::kRead);
    EXPECT_TRUE(r.can_roll_back());
    EXPECT_THROW(r.RollBack(), std::logic_error);
  }
  {
    Store s = Store::Open(dir, l);
    ASSERT_TRUE(s.can_roll_back());
    s.RollBack();
    EXPECT_EQ(s.step(), 1);
    EXPECT_DOUBLE_EQ(s.group_hyper()[0].lr, 1e-3);  // the hyper-parameters step 1 used
    EXPECT_TRUE(State(s) == at1);
    EXPECT_FALSE(s.can_roll_back());
    EXPECT_THROW(s.RollBack(), StoreError);  // one step back only
  }
  {
    Store s = Store::Open(dir, l);
    EXPECT_EQ(s.step(), 1);
    EXPECT_FALSE(s.can_roll_back());
    s.Verify();
    EXPECT_TRUE(State(s) == at1);
    OneStep(s, 3, 2e-3);  // step 2 again: the same state
    EXPECT_EQ(s.step(), 2);
    EXPECT_TRUE(State(s) == at2);
    EXPECT_EQ(s.previous_step(), 1);
  }
}

TEST(StoreRollBack, RefusesAnEarlierStateALaterStepBeganToOverwrite) {
  // A step after the last commit writes into the slot of the earlier state; killed before its
  // own commit, it leaves that state partly new. The rollback reads the slot, names the first
  // bad subgroup and changes nothing.
  const ParamLayout l = Layout();
  const StoreConfig c = Config();
  const std::string dir = TestDir("rollback_overwritten");
  Store s = Store::CreateForModel(dir, c, l, {c.hyper, c.hyper}, Packed(Tensors(l, 1)).data(),
                                  DType::kFp32);
  OneStep(s, 2, 1e-3);
  OneStep(s, 3, 2e-3);
  const std::vector<uint32_t> at2 = State(s);
  ASSERT_EQ(s.previous_step(), 1);
  {
    // One word of device 1's m in the other slot (subgroup 0), as a write of step 3 would.
    const std::string f = s.FilePath(1, 1, 1 - s.slot());
    FILE* fp = std::fopen(f.c_str(), "r+b");
    ASSERT_NE(fp, nullptr) << f;
    const uint32_t junk = 0x3f800000u;
    ASSERT_EQ(std::fseek(fp, 40, SEEK_SET), 0);
    ASSERT_EQ(std::fwrite(&junk, 4, 1, fp), 1u);
    std::fclose(fp);
  }
  try {
    s.RollBack();
    ADD_FAILURE() << "rolled back onto an overwritten slot";
  } catch (const StoreError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cannot roll back to step 1: "), std::string::npos) << m;
    EXPECT_NE(m.find(s.FilePath(1, 1, 1 - s.slot()) + " subgroup 0"), std::string::npos) << m;
    EXPECT_NE(m.find("(a step after 2 began overwriting it)"), std::string::npos) << m;
  }
  EXPECT_EQ(s.step(), 2);
  EXPECT_TRUE(s.can_roll_back());
  EXPECT_TRUE(State(s) == at2);
  s.Verify();  // the committed state is untouched
}

}  // namespace
}  // namespace csdkit
