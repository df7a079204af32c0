// The planner (host/planner): a planned iteration's step is the emulated step of the same store
// exactly, in every mode; an iteration is its four phases; plans are deterministic; the
// model-shape and GPU-profile arithmetic; refusals. The calibration table's rows are checked
// against the paper in planner_calibration (below), which states its bound.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "test_dir.h"
#include "csdkit/planner/planner.h"
#include "csdkit/runtime/gradients.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/store.h"
#include "csdkit/system/device_set.h"

namespace csdkit {
namespace {

using planner::PlanMode;
using testing::TestDir;

planner::PlanModel SmallModel() {
  planner::PlanModel m;
  m.params = 3 * 3 * 65536 + 777;  // 3 devices: three full subgroups each and a short last one
  m.name = "small";
  m.fwd_bwd = 0.25;
  m.device_mem = uint64_t{1} << 30;
  m.subgroup = 65536;
  return m;
}

// (1) The plan's step is the step the kit executes: the same configuration on emulated devices
// (a real store, synthetic gradients, the host-model kernel) reports the same bytes on every
// link and the same virtual seconds, bit for bit, in all four modes.
TEST(Planner, PlannedStepEqualsTheEmulatedStepExactly) {
  const planner::SystemProfile sys = planner::KitSystem();
  const planner::PlanModel m = SmallModel();
  int run = 0;
  for (PlanMode mode : {PlanMode::kBaseline, PlanMode::kSmart, PlanMode::kHandler,
                        PlanMode::kTopK}) {
    const double topk = mode == PlanMode::kTopK ? 0.05 : 0.0;
    const std::string ctx = planner::PlanModeName(mode);
    const planner::PlanPoint p = planner::PlanIteration(m, sys, mode, 3, topk);

    StoreConfig c;
    c.params = m.params;
    c.devices = 3;
    c.hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
    c.grad = DType::kFp16;
    c.out = DType::kFp16;
    c.loss_scale = 1024.0;
    c.subgroup_elems = m.subgroup;
    Store real = Store::Create(TestDir("plan_equal/" + std::to_string(run++)), c);
    DeviceSpec spec;
    spec.backend = Backend::kModel;
    spec.count = 3;
    spec.device_mem = m.device_mem;
    spec.links = mode == PlanMode::kBaseline ? sys.raid : sys.csd;
    DeviceSet set(spec);
    Scheduler sched(real, set);
    StepOptions o;
    o.mode = mode == PlanMode::kBaseline ? UpdateMode::kBaseline : UpdateMode::kSmart;
    o.overlap = mode != PlanMode::kSmart;
    o.host_threads = sys.host_threads;
    o.pin_host_threads = false;
    const StepReport r = sched.Step(GradientSet::Synthetic(real, 1, topk), o);
    ASSERT_FALSE(r.skipped) << ctx;
    EXPECT_EQ(p.step, r.virtual_seconds)
        << ctx << ": EXP=" << std::hexfloat << r.virtual_seconds << " GOT=" << p.step;
    for (unsigned l = 0; l < kNumLinks; ++l) {
      EXPECT_EQ(p.bytes[static_cast<Link>(l)], r.bytes[static_cast<Link>(l)])
          << ctx << ": link " << LinkName(static_cast<Link>(l));
    }
    EXPECT_EQ(p.subgroups, r.subgroups) << ctx;
  }
}

// (2) An iteration is its phases; the GPU link carries the gradient (or its Top-K stream) and
// the fp16 weights; the shared link of SmartUpdate carries about 4 bytes per parameter, the
// baseline's 24 (docs/runtime.md).
TEST(Planner, IterationIsItsPhases) {
  const planner::SystemProfile sys = planner::KitSystem();
  planner::PlanModel m = SmallModel();
  m.subgroup = 0;
  m.params = 1000000000;
  for (PlanMode mode : {PlanMode::kBaseline, PlanMode::kSmart, PlanMode::kHandler,
                        PlanMode::kTopK}) {
    const std::string ctx = planner::PlanModeName(mode);
    const planner::PlanPoint p =
        planner::PlanIteration(m, sys, mode, 4, mode == PlanMode::kTopK ? 0.01 : 0.0);
    EXPECT_EQ(p.iteration(), p.fwd_bwd + p.grad_out + p.step + p.weights_in) << ctx;
    EXPECT_EQ(p.fwd_bwd, m.fwd_bwd) << ctx;
    EXPECT_EQ(p.weights_in, 2.0 * m.params / sys.gpu_link) << ctx;
    if (mode == PlanMode::kTopK) {
      EXPECT_LT(p.grad_out, 0.05 * 2.0 * m.params / sys.gpu_link) << ctx;
    } else {
      EXPECT_EQ(p.grad_out, 2.0 * m.params / sys.gpu_link) << ctx;
      EXPECT_EQ(p.gpu_link_bytes, 4 * m.params) << ctx;
    }
    const double shared = static_cast<double>(p.bytes.Shared()) / m.params;
    if (mode == PlanMode::kBaseline) {
      EXPECT_NEAR(shared, 24.0, 0.01) << ctx;
    } else if (mode != PlanMode::kTopK) {
      EXPECT_NEAR(shared, 4.0, 0.01) << ctx;
    } else {
      EXPECT_LT(shared, 2.2) << ctx;
    }
    EXPECT_GT(p.step, 0.0) << ctx;
    EXPECT_FALSE(p.bottleneck.empty()) << ctx;
  }
}

// (3) The same plan twice is the same plan, to the bit (a plan does not depend on thread
// timing); so is the calibration table.
TEST(Planner, Deterministic) {
  const planner::SystemProfile sys = planner::PaperSystem();
  planner::PlanModel m = SmallModel();
  m.params = 6000000000;
  m.subgroup = 0;
  for (PlanMode mode : {PlanMode::kBaseline, PlanMode::kSmart, PlanMode::kHandler,
                        PlanMode::kTopK}) {
    const double topk = mode == PlanMode::kTopK ? 0.01 : 0.0;
    const std::string a = planner::PlanIteration(m, sys, mode, 10, topk).ToJson().dump();
    for (int i = 0; i < 3; ++i) {
      nlohmann::json b = planner::PlanIteration(m, sys, mode, 10, topk).ToJson();
      nlohmann::json aj = nlohmann::json::parse(a);
      aj.erase("plan_wall_seconds");
      b.erase("plan_wall_seconds");
      EXPECT_EQ(aj.dump(), b.dump()) << planner::PlanModeName(mode);
    }
  }
  const auto r1 = planner::PaperCalibration(sys), r2 = planner::PaperCalibration(sys);
  ASSERT_EQ(r1.size(), r2.size());
  for (size_t i = 0; i < r1.size(); ++i) EXPECT_EQ(r1[i].plan, r2[i].plan) << r1[i].what;
}

// (3b) The calibration table of docs/planner.md as documented: every row within 15% of the
// paper's figure, except SmartUpdate without the transfer handler, which the kit plans as a
// strictly serial schedule (docs/planner.md says why that row may reach 20%); the Top-K row on
// the A5000 inside the paper's range.
TEST(Planner, CalibrationHoldsTheDocumentedBounds) {
  const auto rows = planner::PaperCalibration(planner::PaperSystem());
  ASSERT_EQ(rows.size(), 8u);
  for (const auto& r : rows) {
    const bool serial = r.what == "SmartUpdate over the baseline";
    EXPECT_LE(std::fabs(r.deviation()), serial ? 0.20 : 0.15)
        << r.what << " (" << r.setup << "): paper " << r.paper_lo << "-" << r.paper_hi
        << ", plan " << r.plan;
    if (r.setup.find("A5000") != std::string::npos &&
        r.setup.find("Top-K") != std::string::npos) {
      EXPECT_EQ(r.deviation(), 0.0) << r.setup << ": plan " << r.plan;
    }
  }
}

// (4) Model shapes and GPU profiles: GPT-2 small and medium have their published parameter
// counts; a table row is returned as measured, others scale with the parameter count.
TEST(Planner, ShapesAndProfiles) {
  EXPECT_EQ(planner::Gpt2Params(12, 768), 124439808u);
  EXPECT_EQ(planner::Gpt2Params(24, 1024), 354823168u);
  EXPECT_EQ(planner::FwdBwdSeconds("h100", 16, 4240000000ull), 1.34);
  EXPECT_EQ(planner::FwdBwdSeconds("h100", 4, 1560000000ull), 0.28);
  EXPECT_DOUBLE_EQ(planner::FwdBwdSeconds("h100", 16, 13300000000ull), 1.89 * 2);
  try {
    planner::FwdBwdSeconds("a5000", 4, 1000000000);
    FAIL() << "an unknown GPU was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("h100 batch 4"), std::string::npos) << e.what();
  }
}

// (5) Refusals name what was expected and found.
TEST(Planner, Refusals) {
  const planner::SystemProfile sys = planner::KitSystem();
  const planner::PlanModel m = SmallModel();
  auto refused = [&](const char* want, auto&& f) {
    try {
      f();
      ADD_FAILURE() << "accepted: " << want;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused("devices: expected 1 to 256, found 0",
          [&] { planner::PlanIteration(m, sys, PlanMode::kHandler, 0, 0.0); });
  refused("topk: expected a ratio in (0, 1] for mode topk",
          [&] { planner::PlanIteration(m, sys, PlanMode::kTopK, 2, 0.0); });
  refused("and 0 otherwise, found 0.100000 for mode smart",
          [&] { planner::PlanIteration(m, sys, PlanMode::kSmart, 2, 0.1); });
  planner::PlanModel bad = m;
  bad.fwd_bwd = std::nan("");
  refused("forward+backward seconds: expected a finite value >= 0",
          [&] { planner::PlanIteration(bad, sys, PlanMode::kSmart, 2, 0.0); });
  bad = m;
  bad.subgroup = 1u << 30;
  refused("subgroup: expected at most",
          [&] { planner::PlanIteration(bad, sys, PlanMode::kSmart, 2, 0.0); });
  refused("mode: expected baseline, smart, handler or topk, found 'fast'",
          [&] { planner::ParsePlanMode("fast"); });
  refused("PCIe generation: expected 3, 4 or 5, found 6", [&] { planner::PcieX16(6); });
  refused("GPT-2 shape: expected layers", [&] { planner::Gpt2Params(0, 768); });
}

}  // namespace
}  // namespace csdkit
