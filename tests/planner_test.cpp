// The planner (host/planner): a planned iteration's step is the emulated step of the same store
// exactly, in every mode; an iteration is its phases (the host path included, and today's four
// without it); the overlap model's levels are ordered and bounded; plans are deterministic; the
// model-shape and GPU-profile arithmetic; refusals. The calibration table's rows are checked
// against the paper in CalibrationHoldsTheDocumentedBounds (below), which states its bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
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
// the fp16 weights; the host path fills the arena with the bytes the GPU sent and copies the
// weights back, each with its per-tensor cost; the shared link of SmartUpdate carries about 4
// bytes per parameter, the baseline's 24 (docs/runtime.md).
TEST(Planner, IterationIsItsPhases) {
  planner::SystemProfile sys = planner::KitSystem();
  sys.host = planner::DevMachineHostPath();  // (a host path with rates: the bytes count)
  ASSERT_GT(sys.host.grad_fill, 0.0);
  planner::PlanModel m = SmallModel();
  m.subgroup = 0;
  m.params = 1000000000;
  m.tensors = 300;
  for (PlanMode mode : {PlanMode::kBaseline, PlanMode::kSmart, PlanMode::kHandler,
                        PlanMode::kTopK}) {
    const std::string ctx = planner::PlanModeName(mode);
    const planner::PlanPoint p =
        planner::PlanIteration(m, sys, mode, 4, mode == PlanMode::kTopK ? 0.01 : 0.0);
    EXPECT_EQ(p.iteration(),
              p.fwd_bwd + p.grad_out + p.grad_fill + p.step + p.weights_back + p.weights_in)
        << ctx;
    EXPECT_EQ(p.iteration(), p.Iteration(planner::Overlap::kNone)) << ctx;
    EXPECT_EQ(p.fwd_bwd, m.fwd_bwd) << ctx;
    EXPECT_NEAR(p.forward + p.backward, m.fwd_bwd, 1e-15) << ctx;
    EXPECT_NEAR(p.backward, 2 * p.forward, 1e-15) << ctx;  // the default ratio
    EXPECT_EQ(p.tensors, 300u) << ctx;
    // The host path: what the GPU sent (gradient bytes = grad_out · link) at the fill rate,
    // the fp16 weights at the copy-back rate, 300 tensors each way.
    EXPECT_DOUBLE_EQ(p.grad_fill, p.grad_out * sys.gpu_link / sys.host.grad_fill +
                                      300 * sys.host.per_tensor)
        << ctx;
    EXPECT_DOUBLE_EQ(p.weights_back,
                     2.0 * m.params / sys.host.weights_back + 300 * sys.host.per_tensor_back)
        << ctx;
    // The kit's own profile (CUDA parameters through the arena): no host bytes, only the
    // per-tensor costs, each way its own.
    planner::SystemProfile kit = planner::KitSystem();
    ASSERT_EQ(kit.host.grad_fill, 0.0);
    ASSERT_GT(kit.host.per_tensor, kit.host.per_tensor_back);
    const planner::PlanPoint q =
        planner::PlanIteration(m, kit, mode, 4, mode == PlanMode::kTopK ? 0.01 : 0.0);
    EXPECT_DOUBLE_EQ(q.grad_fill, 300 * kit.host.per_tensor) << ctx;
    EXPECT_DOUBLE_EQ(q.weights_back, 300 * kit.host.per_tensor_back) << ctx;
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

// (2b) Without a host path the serial iteration is today's four phases to the bit, and the
// step, the GPU link and the bytes do not depend on the host path at all.
TEST(Planner, ZeroHostPathIsTheFourPhases) {
  planner::SystemProfile with = planner::KitSystem();
  planner::SystemProfile none = with;
  none.host = planner::NoHostPath();
  planner::PlanModel m = SmallModel();
  m.subgroup = 0;
  m.params = 2000000000;
  for (PlanMode mode : {PlanMode::kBaseline, PlanMode::kSmart, PlanMode::kHandler,
                        PlanMode::kTopK}) {
    const std::string ctx = planner::PlanModeName(mode);
    const double topk = mode == PlanMode::kTopK ? 0.01 : 0.0;
    const planner::PlanPoint p = planner::PlanIteration(m, none, mode, 5, topk);
    const planner::PlanPoint q = planner::PlanIteration(m, with, mode, 5, topk);
    EXPECT_EQ(p.grad_fill, 0.0) << ctx;
    EXPECT_EQ(p.weights_back, 0.0) << ctx;
    EXPECT_EQ(p.iteration(), p.fwd_bwd + p.grad_out + p.step + p.weights_in)
        << ctx << ": EXP=" << std::hexfloat << p.fwd_bwd + p.grad_out + p.step + p.weights_in
        << " GOT=" << p.iteration();
    EXPECT_EQ(p.step, q.step) << ctx;
    EXPECT_EQ(p.grad_out, q.grad_out) << ctx;
    EXPECT_EQ(p.weights_in, q.weights_in) << ctx;
    EXPECT_EQ(p.bytes.Shared(), q.bytes.Shared()) << ctx;
    EXPECT_GT(q.iteration(), p.iteration()) << ctx;
  }
}

// (2c) The overlap model (docs/planner.md): on random phases and shares (seed printed), each
// level is never longer than the one before it (none >= weights >= grads >= step), and the
// most overlapped is never shorter than forward + backward with the step's last unit after it,
// nor than forward with the whole step after it. One chunk of everything leaves nothing to
// overlap: every level is the serial iteration.
TEST(Planner, OverlapIsOrderedAndBounded) {
  using planner::Overlap;
  const uint32_t seed = 20260126;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> sec(0.0, 10.0), share(0.0, 1.0);
  auto check = [](const planner::IterationParts& p, const std::string& ctx) {
    const double none = planner::OverlappedIteration(p, Overlap::kNone);
    const double wts = planner::OverlappedIteration(p, Overlap::kWeights);
    const double grads = planner::OverlappedIteration(p, Overlap::kGrads);
    const double step = planner::OverlappedIteration(p, Overlap::kStep);
    // forward + backward is fwd_bwd up to one rounding.
    const double tol = 1e-12 * (1 + none);
    EXPECT_LE(wts, none + tol) << ctx;
    EXPECT_LE(grads, wts + tol) << ctx;
    EXPECT_LE(step, grads + tol) << ctx;
    EXPECT_GE(step, std::max(p.forward + p.backward + p.step_unit * p.step,
                             p.forward + p.step) - tol)
        << ctx;
    EXPECT_GE(step, p.forward + p.backward - tol) << ctx;
  };
  for (int i = 0; i < 2000; ++i) {
    planner::IterationParts p;
    p.forward = sec(rng);
    p.backward = sec(rng) * 3;
    p.fwd_bwd = p.forward + p.backward;
    p.grad_out = sec(rng) / 10;
    p.grad_fill = i % 4 == 0 ? 0.0 : sec(rng) / 5;
    p.step = sec(rng) * 4;
    p.weights_back = i % 4 == 0 ? 0.0 : sec(rng) / 5;
    p.weights_in = sec(rng) / 10;
    p.grad_share = std::max(1e-6, share(rng));
    p.step_unit = std::max(1e-6, share(rng));
    p.step_start = p.step_unit + (1 - p.step_unit) * share(rng);
    char ctx[320];
    std::snprintf(ctx, sizeof ctx,
                  "seed %u case %d: F %a B %a out %a fill %a S %a back %a in %a g %a u %a x0 %a",
                  seed, i, p.forward, p.backward, p.grad_out, p.grad_fill, p.step,
                  p.weights_back, p.weights_in, p.grad_share, p.step_unit, p.step_start);
    check(p, ctx);
    // One chunk of everything: nothing overlaps.
    p.grad_share = p.step_unit = p.step_start = 1;
    const double serial = planner::OverlappedIteration(p, Overlap::kNone);
    for (Overlap l : {Overlap::kWeights, Overlap::kGrads, Overlap::kStep}) {
      EXPECT_NEAR(planner::OverlappedIteration(p, l), serial, 1e-12 * (1 + serial))
          << ctx << ", one chunk, level " << planner::OverlapName(l);
    }
  }
  // Planned points, every mode, both shard orders, with and without a host path: the same
  // order and bounds, and interleaved shards never slower than contiguous ones.
  planner::PlanModel m = SmallModel();
  m.subgroup = 0;
  m.params = 4000000000;
  m.fwd_bwd = 5.72;
  for (const char* host : {"gpu", "none"}) {
    planner::SystemProfile sys = planner::PaperSystem();
    sys.host = planner::HostPathByName(host);
    for (PlanMode mode : {PlanMode::kBaseline, PlanMode::kSmart, PlanMode::kHandler,
                          PlanMode::kTopK}) {
      const double topk = mode == PlanMode::kTopK ? 0.015 : 0.0;
      const std::string ctx = std::string(host) + " " + planner::PlanModeName(mode);
      m.shard_order = planner::ShardOrder::kContiguous;
      const planner::PlanPoint c = planner::PlanIteration(m, sys, mode, 10, topk);
      m.shard_order = planner::ShardOrder::kInterleaved;
      const planner::PlanPoint v = planner::PlanIteration(m, sys, mode, 10, topk);
      check(c.parts, ctx + " contiguous");
      check(v.parts, ctx + " interleaved");
      EXPECT_EQ(c.iteration(), v.iteration()) << ctx;
      EXPECT_LE(v.Iteration(Overlap::kStep), c.Iteration(Overlap::kStep)) << ctx;
      EXPECT_LT(c.Iteration(Overlap::kStep), c.iteration()) << ctx;
      // Contiguous shards: the last device to get its gradients starts after (N - 1)/N.
      EXPECT_GE(c.parts.step_start, 0.9) << ctx;
      EXPECT_EQ(v.parts.step_start, v.parts.step_unit) << ctx;
    }
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
// the A5000 inside the paper's range. The table is of the paper's serial iterations: a host
// path in the profile given does not move it.
TEST(Planner, CalibrationHoldsTheDocumentedBounds) {
  const auto rows = planner::PaperCalibration(planner::PaperSystem());
  ASSERT_EQ(rows.size(), 8u);
  planner::SystemProfile hosted = planner::PaperSystem();
  hosted.host = planner::GpuMachineHostPath();
  const auto same = planner::PaperCalibration(hosted);
  ASSERT_EQ(same.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(same[i].plan, rows[i].plan) << rows[i].what;
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
  // The tensor estimate: a GPT-2 shape of hidden 64·L, 12 tensors per layer and 4.
  EXPECT_EQ(planner::EstimateTensors(1), 16u);
  EXPECT_EQ(planner::EstimateTensors(12 * 64 * 64 * 27), 12u * 3 + 4);
  EXPECT_EQ(planner::EstimateTensors(4000000000ull), 12u * 43 + 4);
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
  bad = m;
  bad.bwd_ratio = 0;
  refused("backward/forward ratio: expected a finite value > 0, found 0",
          [&] { planner::PlanIteration(bad, sys, PlanMode::kSmart, 2, 0.0); });
  bad.bwd_ratio = std::nan("");
  refused("backward/forward ratio: expected a finite value > 0, found nan",
          [&] { planner::PlanIteration(bad, sys, PlanMode::kSmart, 2, 0.0); });
  bad = m;
  bad.grad_bucket = 0;
  refused("gradient bucket: expected at least 1 byte, found 0",
          [&] { planner::PlanIteration(bad, sys, PlanMode::kSmart, 2, 0.0); });
  planner::SystemProfile bad_sys = sys;
  bad_sys.host.grad_fill = -1;
  refused("host path gradient fill: expected a finite value >= 0 (0: none), found -1",
          [&] { planner::PlanIteration(m, bad_sys, PlanMode::kSmart, 2, 0.0); });
  bad_sys = sys;
  bad_sys.host.per_tensor = INFINITY;
  refused("host path per-tensor cost: expected a finite value >= 0 (0: none), found inf",
          [&] { planner::PlanIteration(m, bad_sys, PlanMode::kSmart, 2, 0.0); });
  refused("overlap: expected none, weights, grads or step, found 'full'",
          [&] { planner::ParseOverlap("full"); });
  refused("shard order: expected contiguous or interleaved, found 'striped'",
          [&] { planner::ParseShardOrder("striped"); });
  refused("host path: expected gpu, dev or none, found 'cpu'",
          [&] { planner::HostPathByName("cpu"); });
  refused("GPT-2 shape: expected layers", [&] { planner::Gpt2Params(0, 768); });
}

}  // namespace
}  // namespace csdkit
