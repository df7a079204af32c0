#include "csdkit/planner/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "csdkit/hls/mode.h"
#include "csdkit/platform/update_launch.h"
#include "csdkit/runtime/gradients.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/sizing.h"
#include "csdkit/runtime/store.h"
#include "csdkit/system/device_set.h"

namespace csdkit::planner {

uint64_t Gpt2Params(uint64_t layers, uint64_t hidden, uint64_t vocab, uint64_t seq) {
  if (layers == 0 || hidden == 0 || vocab == 0 || seq == 0 || layers > 100000 ||
      hidden > (uint64_t{1} << 20) || vocab > (uint64_t{1} << 24) || seq > (uint64_t{1} << 24)) {
    throw std::invalid_argument("GPT-2 shape: expected layers in [1, 100000], hidden in [1, 2^20]"
                                ", vocab and sequence in [1, 2^24], found layers " +
                                std::to_string(layers) + ", hidden " + std::to_string(hidden) +
                                ", vocab " + std::to_string(vocab) + ", sequence " +
                                std::to_string(seq));
  }
  return layers * (12 * hidden * hidden + 13 * hidden) + (vocab + seq) * hidden + 2 * hidden;
}

const std::vector<GpuProfile>& GpuProfiles() {
  // Forward + backward per iteration, GPT-2-shaped models, bf16, activation checkpointing,
  // sequence 1024, measured on an H100 (the figures issue 13 ships).
  static const std::vector<GpuProfile> t = {
      {"h100", 1560000000ull, 4, 0.28, "H100 bf16, activation checkpointing, seq 1024"},
      {"h100", 1560000000ull, 16, 0.70, "H100 bf16, activation checkpointing, seq 1024"},
      {"h100", 2650000000ull, 4, 0.26, "H100 bf16, activation checkpointing, seq 1024"},
      {"h100", 2650000000ull, 16, 0.92, "H100 bf16, activation checkpointing, seq 1024"},
      {"h100", 4240000000ull, 4, 0.36, "H100 bf16, activation checkpointing, seq 1024"},
      {"h100", 4240000000ull, 16, 1.34, "H100 bf16, activation checkpointing, seq 1024"},
      {"h100", 6650000000ull, 4, 0.49, "H100 bf16, activation checkpointing, seq 1024"},
      {"h100", 6650000000ull, 16, 1.89, "H100 bf16, activation checkpointing, seq 1024"},
  };
  return t;
}

double FwdBwdSeconds(const std::string& gpu, unsigned batch, uint64_t params, std::string* how) {
  const GpuProfile* best = nullptr;
  std::string have;
  for (const GpuProfile& p : GpuProfiles()) {
    const std::string k = p.gpu + " batch " + std::to_string(p.batch);
    if (have.find(k) == std::string::npos) have += (have.empty() ? "" : ", ") + k;
    if (p.gpu != gpu || p.batch != batch) continue;
    const double dp = std::fabs(std::log(static_cast<double>(p.params) / params));
    if (best == nullptr ||
        dp < std::fabs(std::log(static_cast<double>(best->params) / params))) {
      best = &p;
    }
  }
  if (best == nullptr) {
    throw std::invalid_argument("--gpu/--batch: expected one of the profile table's (" + have +
                                "), found " + gpu + " batch " + std::to_string(batch));
  }
  const double s = best->fwd_bwd * static_cast<double>(params) / best->params;
  if (how != nullptr) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s batch %u: %.3f s measured at %.2fB params, scaled to %.2fB",
                  best->gpu.c_str(), best->batch, best->fwd_bwd, best->params / 1e9,
                  params / 1e9);
    *how = buf;
  }
  return s;
}

double PcieX16(unsigned gen) {
  if (gen < 3 || gen > 5) {
    throw std::invalid_argument("PCIe generation: expected 3, 4 or 5, found " +
                                std::to_string(gen));
  }
  const double gts = gen == 3 ? 8e9 : gen == 4 ? 16e9 : 32e9;
  return gts * 16 / 8 * 128.0 / 130.0 * 0.8;
}

nlohmann::json SystemProfile::ToJson() const {
  return {{"name", name},       {"csd", csd.ToJson()},
          {"raid", raid.ToJson()}, {"gpu_link_gbs", gpu_link / 1e9},
          {"host_threads", host_threads}, {"notes", notes}};
}

SystemProfile KitSystem() {
  SystemProfile s;
  s.name = "kit";
  s.csd = emu::LinkProfile::SmartSsd();
  s.raid = s.csd;  // the SmartSSDs' own SSDs, used as plain NVMe drives
  s.gpu_link = PcieX16(5);
  s.host_threads = 32;
  s.notes = "the kit's SmartSSD link profile (emu::LinkProfile::SmartSsd); the baseline on the "
            "same SSDs used as plain NVMe with 32 host update threads; the GPU on PCIe Gen5 x16 "
            "(an H100's link)";
  return s;
}

SystemProfile PaperSystem() {
  SystemProfile s;
  s.name = "paper";
  // docs/planner.md, "The paper's system", says where each figure comes from.
  s.csd.ssd_read = 3.0e9;           // the kit's SmartSSD P2P figures (LinkProfile::SmartSsd)
  s.csd.ssd_write = 1.6e9;
  s.csd.ssd_shared_channel = true;  // flash: reads and writes share the SSD's channels
  s.csd.uplink = 4.0e9;             // fitted: the baseline saturates at about 4 SSDs, 2.25x
  s.csd.kernel_ddr = 1.5e9;         // fitted: the paper's SmartUpdate speedups
  s.csd.host_update = 4.0e9;        // the kit's assumption per host thread
  s.raid = s.csd;                   // the baseline on the same SSDs, as plain NVMe drives
  s.gpu_link = PcieX16(4);          // A5000 and A100 are PCIe Gen4 x16 cards
  s.host_threads = 24;
  s.notes = "calibrated on the Smart-Infinity paper's system (10 SmartSSDs behind an H3 Falcon "
            "4109 chassis): SSD rates as the kit's SmartSSD profile, reads and writes on one "
            "channel, uplink 4 GB/s per direction and kernel 1.5 GB/s fitted to the paper's "
            "figures; docs/planner.md";
  return s;
}

const char* PlanModeName(PlanMode m) {
  switch (m) {
    case PlanMode::kBaseline: return "baseline";
    case PlanMode::kSmart: return "smart";
    case PlanMode::kHandler: return "handler";
    case PlanMode::kTopK: return "topk";
  }
  return "?";
}

PlanMode ParsePlanMode(const std::string& s) {
  if (s == "baseline") return PlanMode::kBaseline;
  if (s == "smart") return PlanMode::kSmart;
  if (s == "handler") return PlanMode::kHandler;
  if (s == "topk") return PlanMode::kTopK;
  throw std::invalid_argument("mode: expected baseline, smart, handler or topk, found '" + s +
                              "'");
}

nlohmann::json PlanModel::ToJson() const {
  return {{"params", params}, {"name", name}, {"fwd_bwd_s", fwd_bwd},
          {"fwd_bwd_from", fwd_bwd_from}, {"device_mem", device_mem}, {"subgroup", subgroup}};
}

namespace {
nlohmann::json BusyJson(const std::vector<std::pair<std::string, double>>& busy) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : busy) j[k] = v;
  return j;
}
}  // namespace

nlohmann::json PlanPoint::ToJson() const {
  const auto busy_json = [this] { return BusyJson(busy); };
  return {{"mode", PlanModeName(mode)},
          {"devices", devices},
          {"topk", topk},
          {"seconds",
           {{"fwd_bwd", fwd_bwd},
            {"grad_out", grad_out},
            {"step", step},
            {"weights_in", weights_in},
            {"iteration", iteration()}}},
          {"step_bytes", bytes.ToJson()},
          {"shared_link_bytes", bytes.Shared()},
          {"gpu_link_bytes", gpu_link_bytes},
          {"subgroups", subgroups},
          {"subgroup_elems", subgroup_elems},
          {"busy", busy_json()},
          {"bottleneck", bottleneck},
          {"plan_wall_seconds", plan_wall_seconds}};
}

PlanPoint PlanIteration(const PlanModel& model, const SystemProfile& sys, PlanMode mode,
                        unsigned devices, double topk) {
  if (devices < 1 || devices > 256) {
    throw std::invalid_argument("devices: expected 1 to 256, found " + std::to_string(devices));
  }
  if (model.params < devices) {
    throw std::invalid_argument("params: expected at least one per device, found " +
                                std::to_string(model.params) + " for " +
                                std::to_string(devices) + " devices");
  }
  if (!(model.fwd_bwd >= 0) || !std::isfinite(model.fwd_bwd)) {
    throw std::invalid_argument("forward+backward seconds: expected a finite value >= 0, found " +
                                std::to_string(model.fwd_bwd));
  }
  if (!(sys.gpu_link > 0) || !std::isfinite(sys.gpu_link)) {
    throw std::invalid_argument("GPU link: expected a positive bandwidth, found " +
                                std::to_string(sys.gpu_link));
  }
  if (mode == PlanMode::kTopK ? !(topk > 0 && topk <= 1) : topk != 0) {
    throw std::invalid_argument("topk: expected a ratio in (0, 1] for mode topk and 0 otherwise, "
                                "found " + std::to_string(topk) + " for mode " +
                                PlanModeName(mode));
  }
  const auto t0 = std::chrono::steady_clock::now();
  StoreConfig c;
  c.params = model.params;
  c.devices = devices;
  c.hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
  c.grad = DType::kFp16;
  c.out = DType::kFp16;
  c.loss_scale = 1024.0;
  const uint64_t shard = (c.params + devices - 1) / devices;
  const uint32_t fit = SubgroupForMemory(model.device_mem, c.hyper, c.grad, c.out, shard);
  if (model.subgroup != 0 && model.subgroup > fit) {
    throw std::invalid_argument("subgroup: expected at most " + std::to_string(fit) +
                                " elements (two workers' buffers in " +
                                std::to_string(model.device_mem) + " bytes), found " +
                                std::to_string(model.subgroup));
  }
  c.subgroup_elems = model.subgroup != 0
                         ? model.subgroup
                         : DefaultSubgroup(model.device_mem, c.hyper, c.grad, c.out, shard);
  Store store = Store::Plan(c);
  DeviceSpec spec;
  spec.backend = Backend::kNull;
  spec.count = devices;
  spec.device_mem = model.device_mem;
  spec.links = mode == PlanMode::kBaseline ? sys.raid : sys.csd;
  DeviceSet set(spec);
  Scheduler sched(store, set);
  const GradientSet g = GradientSet::Planned(store, mode == PlanMode::kTopK ? topk : 0.0);
  StepOptions o;
  o.mode = mode == PlanMode::kBaseline ? UpdateMode::kBaseline : UpdateMode::kSmart;
  o.overlap = mode != PlanMode::kSmart;
  o.host_threads = sys.host_threads;
  o.pin_host_threads = false;
  const StepReport r = sched.Step(g, o);

  PlanPoint p;
  p.mode = mode;
  p.devices = devices;
  p.topk = topk;
  p.fwd_bwd = model.fwd_bwd;
  // The GPU sends what the host hands to the devices: the dense gradient, or the Top-K stream.
  const uint64_t grad_bytes =
      mode == PlanMode::kTopK ? g.TransferBytes() : c.params * DTypeBytes(c.grad);
  const uint64_t weight_bytes = c.params * DTypeBytes(c.out);
  p.grad_out = static_cast<double>(grad_bytes) / sys.gpu_link;
  p.weights_in = static_cast<double>(weight_bytes) / sys.gpu_link;
  p.gpu_link_bytes = grad_bytes + weight_bytes;
  p.step = r.virtual_seconds;
  p.bytes = r.bytes;
  p.subgroups = r.subgroups;
  p.subgroup_elems = c.subgroup_elems;
  // What each resource was busy with, from the step's counters and launches.
  const emu::LinkProfile& lp = spec.links;
  const double step_s = r.virtual_seconds;
  if (step_s > 0) {
    const double down = static_cast<double>(r.bytes[Link::kHostToDevice] +
                                            r.bytes[Link::kHostToNvme]);
    const double up = static_cast<double>(r.bytes[Link::kDeviceToHost] +
                                          r.bytes[Link::kNvmeToHost]);
    const double rd = static_cast<double>(r.bytes[Link::kSsdToFpga] + r.bytes[Link::kNvmeToHost]);
    const double wr = static_cast<double>(r.bytes[Link::kFpgaToSsd] + r.bytes[Link::kHostToNvme]);
    const double ssd = lp.ssd_shared_channel ? rd / lp.ssd_read + wr / lp.ssd_write
                                             : std::max(rd / lp.ssd_read, wr / lp.ssd_write);
    hls::Mode km{};
    km.opt = Optimizer::kAdamW;
    km.grad = c.grad;
    km.out = c.out;
    km.sparse = g.sparse();
    const uint32_t kmode = hls::EncodeMode(km);
    double kernel_bytes = 0;
    for (unsigned d = 0; d < devices; ++d) {
      for (const Subgroup& sg : store.Subgroups(d)) {
        const uint32_t nnz = g.sparse() ? g.sparse_for(d, sg.index).nnz : 0;
        kernel_bytes += static_cast<double>(
            LaunchMemoryTraffic(kmode, sg.n, nnz));
      }
    }
    p.busy.push_back({"uplink_down", down / lp.uplink / step_s});
    p.busy.push_back({"uplink_up", up / lp.uplink / step_s});
    p.busy.push_back({"ssd", ssd / devices / step_s});
    if (mode == PlanMode::kBaseline) {
      p.busy.push_back({"host_update", kernel_bytes / lp.host_update / sys.host_threads / step_s});
    } else {
      p.busy.push_back({"kernel", kernel_bytes / lp.kernel_ddr / devices / step_s});
    }
    double most = -1;
    for (const auto& [k, v] : p.busy) {
      if (v > most) {
        most = v;
        p.bottleneck = k;
      }
    }
    // No resource near saturation: the step is bound by the workers' own chains of dependent
    // operations (each worker waits for its loads before it computes, and so on).
    if (most < 0.7) p.bottleneck = "workers";
  }
  p.plan_wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

double PaperRow::deviation() const {
  const double ref = plan < paper_lo ? paper_lo : plan > paper_hi ? paper_hi : plan;
  return (plan - ref) / ref;
}

bool PaperRow::within() const { return std::fabs(deviation()) <= 0.15; }

nlohmann::json PaperRow::ToJson() const {
  return {{"what", what},       {"paper_lo", paper_lo}, {"paper_hi", paper_hi},
          {"plan", plan},       {"setup", setup},       {"deviation", deviation()},
          {"within_15pct", within()}};
}

}  // namespace csdkit::planner
