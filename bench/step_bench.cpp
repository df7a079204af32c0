#include "step_bench.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/store.h"
#include "csdkit/runtime/work_dir.h"
#include "csdkit/system/device_set.h"

namespace csdkit::bench {

nlohmann::json StepBench(const StepBenchOptions& o) {
  // The work directory must be absent or empty: the benchmark removes afterwards (and on any
  // failure) only what it created — its stores, and the directories it made.
  WorkDir work = WorkDir::Prepare("--dir", o.dir);
  DeviceSpec spec = o.device_spec;
  spec.count = o.devices;
  nlohmann::json formats = nlohmann::json::array();
  for (size_t fi = 0; fi < o.states.size(); ++fi) {
    const hls::StateFmt fmt = o.states[fi];
    StoreConfig c;
    c.params = o.params;
    c.devices = o.devices;
    c.hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
    c.grad = DType::kFp16;
    c.out = fmt == hls::StateFmt::kQ8Bf16 ? DType::kBf16 : DType::kFp16;
    c.subgroup_elems = o.subgroup;
    c.state = fmt;
    const std::string dir = o.dir + "/store-" + StateFmtName(fmt);
    work.Own(dir);  // Create removes what it made if it fails; a step failure too
    Store store = Store::Create(dir, c);
    DeviceSet devices(spec);
    Scheduler rt(store, devices);

    // Best of `reps` for each variant; the gradient is prepared outside the timed step.
    auto time_it = [&](UpdateMode mode, StepPhases phases, StepReport* last) {
      double best = 1e30;
      for (unsigned r = 0; r < o.reps; ++r) {
        const GradientSet g = GradientSet::Synthetic(store, store.step() + 1, o.topk);
        StepOptions so;
        so.mode = mode;
        so.phases = phases;
        const auto t0 = std::chrono::steady_clock::now();
        const StepReport rep = rt.Step(g, so);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                                  .count());
        if (last) *last = rep;
      }
      return best;
    };
    StepReport smart_rep, base_rep;
    const double io = time_it(UpdateMode::kSmart, StepPhases::kIoOnly, nullptr);
    const double compute = time_it(UpdateMode::kSmart, StepPhases::kComputeOnly, nullptr);
    const double smart = time_it(UpdateMode::kSmart, StepPhases::kAll, &smart_rep);
    const double base = time_it(UpdateMode::kBaseline, StepPhases::kAll, &base_rep);
    const double bound = std::max(io, compute);
    nlohmann::json f;
    f["state"] = StateFmtName(fmt);
    f["state_bytes_per_param"] = store.Describe()["state_bytes_per_param"];
    f["subgroups_per_device"] = store.Subgroups(0).size();
    f["smart"] = {{"step_seconds", smart},
                  {"io_only_seconds", io},
                  {"compute_only_seconds", compute},
                  {"sum_seconds", io + compute},
                  {"max_seconds", bound},
                  {"step_over_max", smart / bound},
                  {"target_step_over_max", 1.15},
                  {"met", smart <= 1.15 * bound},
                  {"virtual_seconds", smart_rep.virtual_seconds},
                  {"bytes", smart_rep.bytes.ToJson()}};
    f["baseline"] = {{"step_seconds", base},
                     {"io_wait_seconds", base_rep.io_seconds},
                     {"compute_seconds", base_rep.compute_seconds},
                     {"virtual_seconds", base_rep.virtual_seconds},
                     {"bytes", base_rep.bytes.ToJson()}};
    formats.push_back(f);
  }
  nlohmann::json j;
  j["benchmark"] = "step";
  j["backend"] = BackendName(spec.backend);
  j["devices"] = o.devices;
  j["params"] = o.params;
  j["subgroup"] = o.subgroup;
  j["reps"] = o.reps;
  j["topk"] = o.topk;
  // The first format's figures at the top (the shape of earlier reports), every format's
  // in "formats" (measured in this one run: compare them with each other).
  for (auto it = formats[0].begin(); it != formats[0].end(); ++it) j[it.key()] = it.value();
  j["formats"] = formats;
  if (o.keep) work.Keep();
  return j;  // `work`, declared before the stores, removes them after they are closed
}

}  // namespace csdkit::bench
