#include "csdkit/planner/planner.h"

#include "csdkit/hls/state_q8.h"

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

double HostPath::FillSeconds(uint64_t bytes, uint64_t tensors) const {
  return (grad_fill > 0 ? static_cast<double>(bytes) / grad_fill : 0.0) +
         per_tensor * static_cast<double>(tensors);
}

double HostPath::BackSeconds(uint64_t bytes, uint64_t tensors) const {
  return (weights_back > 0 ? static_cast<double>(bytes) / weights_back : 0.0) +
         per_tensor_back * static_cast<double>(tensors);
}

nlohmann::json HostPath::ToJson() const {
  return {{"name", name},
          {"grad_fill_gbs", grad_fill / 1e9},
          {"weights_back_gbs", weights_back / 1e9},
          {"per_tensor_us", per_tensor * 1e6},
          {"per_tensor_back_us", per_tensor_back * 1e6},
          {"source", source}};
}

namespace {
// The development machine (AMD EPYC, 2 shared cores), bench/optim_step.py --reps 20 at
// --params 4000000 (4,208,128 parameters in 51 tensors) and the same with --d-model 64
// (4,011,072 in 903 tensors), bf16, medians; each figure is the fit t = tensors · c +
// bytes / rate through the two points (docs/planner.md, "The host path").
//   the kit's gather of a skipped step (copy into the transfer buffer, finiteness check, norm
//   sum): 2.50 ms for 8,416,256 bytes, 10.97 ms for 8,022,144 bytes: 10.05 us per tensor,
//   4.23 GB/s (fp32: 10.18 us, 4.79 GB/s)
//   the weights' copy back, as the benchmark's torch estimate of the same copies (the kit's own
//   copy runs inside the runtime's step, where the benchmark cannot separate it): 1.97 ms and
//   9.22 ms: 8.59 us per tensor, 5.51 GB/s (fp32: 8.55 us, 5.29 GB/s)
constexpr double kDevPerTensor = 10e-6;
constexpr double kDevGradFill = 4.23e9;
constexpr double kDevWeightsBack = 5.51e9;
}  // namespace

HostPath GpuMachineHostPath() {
  HostPath h;
  h.name = "gpu";
  // docs/trainer.md, "On a GPU": the 354M bf16 GPT (353,921,024 parameters in 341 tensors) on
  // 8 emulated devices, CUDA parameters through the gradient arena (H200 host, 16 Xeon cores,
  // medians of iterations 1..7). No bytes cross host memory but the GPU link's own: each
  // gradient is copied device-to-host straight into the arena (grad_out), each weight
  // host-to-device straight from the runtime's buffer (weights_in). What is left per tensor:
  // the optimizer's hooks in backward (bucketing, the copies' and norms' launches, the arena's
  // bookkeeping), 18.7 ms for 341 tensors; and after the commit the parameters' write from the
  // GPU buffer, 2.8 ms.
  const double tensors = 341;
  h.per_tensor = 0.0187 / tensors;
  h.per_tensor_back = 0.0028 / tensors;
  h.source = "GPU machine (docs/trainer.md, the 354M bf16 run on 8 emulated devices, CUDA "
             "parameters through the gradient arena): no host copies; per tensor the hooks' "
             "18.7 ms in backward and the parameters' 2.8 ms write after the commit, over 341 "
             "tensors (H200 host)";
  return h;
}

HostPath DevMachineHostPath() {
  HostPath h;
  h.name = "dev";
  h.per_tensor = kDevPerTensor;
  h.per_tensor_back = kDevPerTensor;
  h.grad_fill = kDevGradFill;
  h.weights_back = kDevWeightsBack;
  h.source = "development machine (AMD EPYC, 2 shared cores): bench/optim_step.py --params "
             "4000000 --reps 20, at 51 and 903 tensors (--d-model 64), bf16; gradient fill from "
             "the kit's gather, weights back from the benchmark's torch estimate of the same "
             "copies";
  return h;
}

HostPath NoHostPath() {
  HostPath h;
  h.name = "none";
  h.source = "no host path: the optimizer step and the GPU link only";
  return h;
}

HostPath HostPathByName(const std::string& name) {
  if (name == "gpu") return GpuMachineHostPath();
  if (name == "dev") return DevMachineHostPath();
  if (name == "none") return NoHostPath();
  throw std::invalid_argument("host path: expected gpu, dev or none, found '" + name + "'");
}

nlohmann::json SystemProfile::ToJson() const {
  return {{"name", name},       {"csd", csd.ToJson()},
          {"raid", raid.ToJson()}, {"gpu_link_gbs", gpu_link / 1e9},
          {"host_threads", host_threads}, {"host_path", host.ToJson()}, {"notes", notes}};
}

SystemProfile KitSystem() {
  SystemProfile s;
  s.name = "kit";
  s.csd = emu::LinkProfile::SmartSsd();
  s.raid = s.csd;  // the SmartSSDs' own SSDs, used as plain NVMe drives
  s.gpu_link = PcieX16(5);
  s.host_threads = 32;
  s.host = GpuMachineHostPath();
  s.notes = "the kit's SmartSSD link profile (emu::LinkProfile::SmartSsd); the baseline on the "
            "same SSDs used as plain NVMe with 32 host update threads; the GPU on PCIe Gen5 x16 "
            "(an H100's link); the trainer's host path as measured on the GPU machine";
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
  // The A5000's forward + backward is derived from the paper's iterations, which hold its
  // host work; a host path on top would count it twice.
  s.host = NoHostPath();
  s.notes = "calibrated on the Smart-Infinity paper's system (10 SmartSSDs behind an H3 Falcon "
            "4109 chassis): SSD rates as the kit's SmartSSD profile, reads and writes on one "
            "channel, uplink 4 GB/s per direction and kernel 1.5 GB/s fitted to the paper's "
            "figures; no host path (inside the fitted figures); docs/planner.md";
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

const char* OverlapName(Overlap o) {
  switch (o) {
    case Overlap::kNone: return "none";
    case Overlap::kWeights: return "weights";
    case Overlap::kGrads: return "grads";
    case Overlap::kStep: return "step";
  }
  return "?";
}

Overlap ParseOverlap(const std::string& s) {
  if (s == "none") return Overlap::kNone;
  if (s == "weights") return Overlap::kWeights;
  if (s == "grads") return Overlap::kGrads;
  if (s == "step") return Overlap::kStep;
  throw std::invalid_argument("overlap: expected none, weights, grads or step, found '" + s +
                              "'");
}

const char* ShardOrderName(ShardOrder o) {
  return o == ShardOrder::kContiguous ? "contiguous" : "interleaved";
}

ShardOrder ParseShardOrder(const std::string& s) {
  if (s == "contiguous") return ShardOrder::kContiguous;
  if (s == "interleaved") return ShardOrder::kInterleaved;
  throw std::invalid_argument("shard order: expected contiguous or interleaved, found '" + s +
                              "'");
}

uint64_t EstimateTensors(uint64_t params) {
  const double layers = std::cbrt(static_cast<double>(params) / (12.0 * 64 * 64));
  return 12 * std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(layers))) + 4;
}

nlohmann::json PlanModel::ToJson() const {
  return {{"params", params},
          {"name", name},
          {"fwd_bwd_s", fwd_bwd},
          {"fwd_bwd_from", fwd_bwd_from},
          {"device_mem", device_mem},
          {"subgroup", subgroup},
          {"state", StateFmtName(state)},
          {"bwd_ratio", bwd_ratio},
          {"grad_bucket", grad_bucket},
          {"shard_order", ShardOrderName(shard_order)},
          {"tensors", tensors},
          {"tensors_from", tensors_from}};
}

namespace {
// A consumer of q seconds of work behind a producer of p seconds, both in chunks of share s of
// the whole, each chunk consumed once it is produced: when the consumer is done, counted from
// the producer's start. The consumer keeps up (q <= p): p and the last chunk, p + s·q; it does
// not: the first chunk, then all of its own work, s·p + q.
double Pipe(double p, double q, double s) { return std::max(p + s * q, s * p + q); }
}  // namespace

double OverlappedIteration(const IterationParts& p, Overlap level) {
  const double c = p.grad_out + p.grad_fill;
  const double f = p.forward, b = p.backward, st = p.step;
  const double w = p.weights_back, in = p.weights_in;
  const double g = p.grad_share, u = p.step_unit;
  switch (level) {
    case Overlap::kNone:
      return p.fwd_bwd + p.grad_out + p.grad_fill + p.step + p.weights_back + p.weights_in;
    case Overlap::kWeights:
      return p.fwd_bwd + c + Pipe(st, w, u) + in;
    case Overlap::kGrads:
      return f + Pipe(b, c, g) + Pipe(st, w, u) + in;
    case Overlap::kStep: {
      // r(x): when the first fraction x of the gradient (backward order) is on the host.
      const auto r = [&](double x) {
        const double xx = std::max(x, g);
        return f + std::max(xx * b + g * c, g * b + xx * c);
      };
      // The step ends when its last unit has run after the whole gradient is in, or when the
      // last chain of work (u of it per unit, 1 / u units) that could start only once x0 of the
      // gradient was in has run through.
      const double end = std::max(r(1.0) + u * st, r(p.step_start) + st);
      // The weights' way back (host copy, then the GPU link) behind the step's output.
      return end + std::max(u * (w + in), w + in - (1 - u) * st);
    }
  }
  return 0;
}

double PlanPoint::Iteration(Overlap level) const {
  return level == Overlap::kNone ? iteration() : OverlappedIteration(parts, level);
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
          // No key named "step" may come before seconds.step in the dump (tests/cli.cmake
          // reads the first one): the levels are iteration_<level>.
          {"seconds",
           {{"fwd_bwd", fwd_bwd},
            {"forward", forward},
            {"backward", backward},
            {"grad_out", grad_out},
            {"grad_fill", grad_fill},
            {"step", step},
            {"weights_back", weights_back},
            {"weights_in", weights_in},
            {"iteration", iteration()},
            {"iteration_weights", Iteration(Overlap::kWeights)},
            {"iteration_grads", Iteration(Overlap::kGrads)},
            {"iteration_step", Iteration(Overlap::kStep)}}},
          {"tensors", tensors},
          {"shares",
           {{"grad_bucket", parts.grad_share},
            {"step_unit", parts.step_unit},
            {"step_start", parts.step_start}}},
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
  if (!(model.bwd_ratio > 0) || !std::isfinite(model.bwd_ratio)) {
    throw std::invalid_argument("backward/forward ratio: expected a finite value > 0, found " +
                                std::to_string(model.bwd_ratio));
  }
  if (model.grad_bucket == 0) {
    throw std::invalid_argument("gradient bucket: expected at least 1 byte, found 0");
  }
  for (const auto& [what, v] : {std::pair<const char*, double>{"gradient fill", sys.host.grad_fill},
                                {"weights back", sys.host.weights_back},
                                {"per-tensor cost", sys.host.per_tensor},
                                {"per-tensor cost back", sys.host.per_tensor_back}}) {
    if (!(v >= 0) || !std::isfinite(v)) {
      throw std::invalid_argument(std::string("host path ") + what +
                                  ": expected a finite value >= 0 (0: none), found " +
                                  std::to_string(v));
    }
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
  c.state = model.state;
  c.params = hls::IsQ8(c.state) ? (model.params + hls::kQ8Block - 1) / hls::kQ8Block * hls::kQ8Block
                                : model.params;
  c.devices = devices;
  c.hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
  c.grad = DType::kFp16;
  c.out = c.state == hls::StateFmt::kQ8Bf16 ? DType::kBf16 : DType::kFp16;
  c.loss_scale = 1024.0;
  const uint64_t shard = (c.params + devices - 1) / devices;
  const uint32_t fit = SubgroupForMemory(model.device_mem, c.hyper, c.grad, c.out, shard);
  if (model.subgroup != 0 && model.subgroup > fit) {
    throw std::invalid_argument("subgroup: expected at most " + std::to_string(fit) +
                                " elements (two workers' buffers in " +
                                std::to_string(model.device_mem) + " bytes), found " +
                                std::to_string(model.subgroup));
  }
  c.subgroup_elems =
      model.subgroup != 0
          ? model.subgroup
          : SubgroupForState(DefaultSubgroup(model.device_mem, c.hyper, c.grad, c.out, shard),
                             c.state);  // (as `csdkit init --state`)
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
  // The host path: the bytes the GPU sent into the arena, the weights out of it, one fixed cost
  // per tensor each way.
  p.tensors = model.tensors != 0 ? model.tensors : EstimateTensors(model.params);
  p.grad_fill = sys.host.FillSeconds(grad_bytes, p.tensors);
  p.weights_back = sys.host.BackSeconds(weight_bytes, p.tensors);
  // The overlap model's inputs (docs/planner.md, "The overlap model").
  IterationParts& ip = p.parts;
  ip.fwd_bwd = p.fwd_bwd;
  ip.forward = p.fwd_bwd / (1 + model.bwd_ratio);
  ip.backward = p.fwd_bwd - ip.forward;
  ip.grad_out = p.grad_out;
  ip.grad_fill = p.grad_fill;
  ip.step = p.step;
  ip.weights_back = p.weights_back;
  ip.weights_in = p.weights_in;
  ip.grad_share = std::min(1.0, static_cast<double>(model.grad_bucket) /
                                    static_cast<double>(std::max<uint64_t>(1, grad_bytes)));
  // The last unit of step work: SmartUpdate's devices each run their subgroups one after
  // another; the baseline's threads take subgroups t, t + T, ...: rounds of T.
  const uint64_t in_turn =
      mode == PlanMode::kBaseline
          ? (r.subgroups + std::max(1u, sys.host_threads) - 1) / std::max(1u, sys.host_threads)
          : (r.subgroups + devices - 1) / devices;
  ip.step_unit = 1.0 / static_cast<double>(std::max<uint64_t>(1, in_turn));
  // Contiguous shards: the device whose shard backward completes last (device 0) can start
  // once (N - 1)/N of the gradient and its own first unit are in. The same for the baseline,
  // whose subgroups live on the same shards' SSDs.
  ip.step_start = model.shard_order == ShardOrder::kContiguous
                      ? 1 - (1 - ip.step_unit) / devices
                      : ip.step_unit;
  p.forward = ip.forward;
  p.backward = ip.backward;
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
    km.state = c.state;
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
