// The planner: one training iteration of storage-offloaded training in virtual time, at any
// scale, with the optimizer step planned by the shipped scheduler on null devices.
//
// An iteration is made of these phases:
//   fwd_bwd       forward and backward on the GPU (a GPU profile: given, or from the table),
//                 split into forward and backward at a stated ratio (backward = 2x forward by
//                 default, the usual FLOP ratio)
//   grad_out      the gradients GPU -> host over the GPU's own PCIe link (dense, or the Top-K
//                 stream the GPU compressed)
//   grad_fill     the trainer's host path in: the gradient copied into the runtime's transfer
//                 arena with its finiteness check and norm sum (HostPath: a measured rate and a
//                 cost per tensor)
//   step          the optimizer step: Scheduler::Step on a planning store (Store::Plan) and null
//                 devices (emu/.../null_device.h), i.e. the transfers and launches the kit issues,
//                 booked on the link model (emu/.../link_model.h); its virtual seconds
//   weights_back  the trainer's host path out: the new weights copied into the parameters (or
//                 their staging buffers)
//   weights_in    the low-precision weights host -> GPU for the next forward pass
// The serial iteration is their sum (PlanPoint::iteration(): each phase waits for the one
// before). The overlapped iterations (Overlap, OverlappedIteration) are a closed-form pipeline
// model on top of the same phases, not a schedule the kit executes: kWeights and kGrads are what
// the trainer runtime does today (CUDA and CPU parameters), kStep is issue 26's design (subgroups
// launched while backward runs), which the runtime does not implement.
// Modes: the baseline (ZeRO-Infinity style: state NVMe -> host -> CPU update -> NVMe over
// plain NVMe SSDs striped like RAID0 behind the same uplink), SmartUpdate without the transfer
// handler (one worker per device, write-backs waited for), SmartUpdate with it (the shipped
// default: two workers per device, deferred write-backs) and the latter with Top-K gradients.
#ifndef CSDKIT_PLANNER_PLANNER_H_
#define CSDKIT_PLANNER_PLANNER_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "csdkit/emu/link_model.h"
#include "csdkit/hls/mode.h"
#include "csdkit/platform/device.h"

namespace csdkit::planner {

/// A model's parameter count from a GPT-2-shaped transformer: per layer 12·h² + 13·h
/// (attention, projection, MLP, two layer norms), token and position embeddings (V + S)·h, the
/// final layer norm 2·h (the output layer is tied to the token embedding).
uint64_t Gpt2Params(uint64_t layers, uint64_t hidden, uint64_t vocab = 50257,
                    uint64_t seq = 1024);

/// Forward + backward seconds of one iteration on a GPU, measured for a model size.
struct GpuProfile {
  std::string gpu;
  uint64_t params = 0;
  unsigned batch = 0;
  double fwd_bwd = 0;  // seconds
  std::string source;  // where the figure comes from
};
/// The shipped table (docs/planner.md says where each row comes from).
const std::vector<GpuProfile>& GpuProfiles();
/// Forward + backward seconds for `params` on `gpu` at `batch`: the table's row of that GPU and
/// batch with the nearest parameter count, scaled linearly by params / row.params (compute
/// grows with the parameter count at a fixed batch and sequence). Throws
/// std::invalid_argument naming the GPUs and batches the table has.
double FwdBwdSeconds(const std::string& gpu, unsigned batch, uint64_t params,
                     std::string* how = nullptr);

/// The trainer's host work per step around the optimizer step, which the scheduler does not
/// see: the gradient copied into the runtime's transfer arena (with the finiteness check and
/// the norm's sum of squares in the same pass, as the binding and the overlap_backward filler
/// do it), the new weights copied into the parameters (or their pinned staging buffers), and a
/// fixed cost per tensor in each of the two (argument handling, hooks, one copy call). Zero
/// rates mean no host path (the phases take no time).
struct HostPath {
  std::string name;          // "gpu", "dev", "none", or "... (modified)"
  double grad_fill = 0;      // bytes of gradient (the GPU's dtype, or the Top-K stream) per second
  double weights_back = 0;   // bytes of low-precision weights per second
  double per_tensor = 0;     // seconds per tensor of the gradient's way in
  double per_tensor_back = 0;  // seconds per tensor of the weights' way back
  std::string source;        // where the figures come from
  /// Seconds of the gradient fill for `bytes` in `tensors` tensors (0 without a host path).
  double FillSeconds(uint64_t bytes, uint64_t tensors) const;
  /// Seconds of the weights' copy back for `bytes` in `tensors` tensors.
  double BackSeconds(uint64_t bytes, uint64_t tensors) const;
  nlohmann::json ToJson() const;
};
/// The GPU machine's host (docs/trainer.md, "On a GPU": the 354M bf16 model on 8 emulated
/// devices, CUDA parameters through the gradient arena): no host bytes (each gradient goes
/// device-to-host straight into the arena, each weight host-to-device straight from the
/// runtime's buffer: the GPU link's phases), per tensor the hooks' time in backward (18.7 ms
/// for 341 tensors on the H200 host) and the parameters' device-to-device write after the
/// commit (2.8 ms).
HostPath GpuMachineHostPath();
/// This project's development machine (AMD EPYC, 2 cores shared), measured with
/// bench/optim_step.py at 51 and 903 tensors (docs/planner.md gives the commands and figures).
HostPath DevMachineHostPath();
/// No host path: the plan of the optimizer step and the GPU link only.
HostPath NoHostPath();
/// "gpu", "dev" or "none"; std::invalid_argument otherwise.
HostPath HostPathByName(const std::string& name);

/// The hardware of a plan.
struct SystemProfile {
  std::string name;
  /// The SmartSSDs: SSD -> FPGA and FPGA -> SSD (P2P), the FPGA kernel, the shared uplink.
  emu::LinkProfile csd;
  /// The baseline's plain NVMe SSDs: host reads (ssd_read) and writes (ssd_write) of each SSD,
  /// the same uplink, the host's update rate per thread (host_update).
  emu::LinkProfile raid;
  double gpu_link = 0;        // host <-> GPU, bytes per second, each direction
  unsigned host_threads = 0;  // the baseline's CPU update threads
  HostPath host;              // the trainer's host path (grad_fill, weights_back)
  std::string notes;          // where the figures come from
  nlohmann::json ToJson() const;
};
/// The kit's SmartSSD profile (emu::LinkProfile::SmartSsd), 32 baseline threads, a Gen5 x16 GPU
/// link, the GPU machine's host path.
SystemProfile KitSystem();
/// The profile calibrated on the Smart-Infinity paper's system (docs/planner.md derives it).
/// No host path: the paper's host work is inside the figures the A5000's forward + backward is
/// derived from (a host path on top would count it twice).
SystemProfile PaperSystem();
/// PCIe x16 payload bandwidth of a generation (3, 4, 5): 8/16/32 GT/s, 128b/130b, at 80%
/// (what a DMA engine sustains after packet overheads).
double PcieX16(unsigned gen);

enum class PlanMode { kBaseline, kSmart, kHandler, kTopK };
const char* PlanModeName(PlanMode m);
/// "baseline", "smart", "handler", "topk"; std::invalid_argument otherwise.
PlanMode ParsePlanMode(const std::string& s);

/// How much of an iteration runs at the same time as something else (docs/planner.md, "The
/// overlap model"). Each level includes the ones before it.
enum class Overlap {
  kNone,     // every phase waits for the one before (the serial iteration)
  kWeights,  // the weights' copy back runs during the step, subgroup by subgroup (the runtime
             // today for CUDA parameters: their gradients are staged at step())
  kGrads,    // and the gradient path (GPU -> host, arena fill) during backward, bucket by bucket
             // (the runtime today for CPU parameters with overlap_backward)
  kStep,     // and subgroups launched as their gradients are in, during backward, with the
             // weights' way back to the GPU during the devices' remaining work (issue 26's
             // design; not implemented by the runtime)
};
const char* OverlapName(Overlap o);
/// "none", "weights", "grads", "step"; std::invalid_argument otherwise.
Overlap ParseOverlap(const std::string& s);

/// Where each device's gradients come from during backward, for Overlap::kStep.
enum class ShardOrder {
  kContiguous,   // the kit's layout: device k owns the k-th contiguous shard of the flattened
                 // model, so backward (last layer first) completes the devices' gradients one
                 // device after another, device N-1 first
  kInterleaved,  // a what-if: each device's subgroups spread over the whole model, so every
                 // device receives gradients from the start of backward
};
const char* ShardOrderName(ShardOrder o);
/// "contiguous" or "interleaved"; std::invalid_argument otherwise.
ShardOrder ParseShardOrder(const std::string& s);

/// A model's tensor count when only its parameter count is known: a GPT-2 shape of L layers with
/// hidden 64·L (GPT-2 small's aspect: 768 = 64·12), 12 tensors per layer and 4 more, for L the
/// nearest whole number to cbrt(params / (12·64²)), at least 1. An estimate; the per-tensor cost
/// it multiplies is small against the bytes for models of 1e8 parameters and more.
uint64_t EstimateTensors(uint64_t params);

struct PlanModel {
  uint64_t params = 0;
  std::string name;          // for reports
  double fwd_bwd = 0;        // seconds per iteration on the GPU
  std::string fwd_bwd_from;  // how fwd_bwd was obtained
  uint64_t device_mem = uint64_t{4} << 30;
  uint32_t subgroup = 0;     // elements; 0: as `csdkit init` picks
  /// The store's state format (docs/state-formats.md): fp32, q8 or q8-bf16 (a q8 store's
  /// parameter count is rounded up to whole blocks of 256; q8-bf16's copy is bf16).
  hls::StateFmt state = hls::StateFmt::kFp32;
  /// Backward over forward seconds (fwd_bwd = forward · (1 + bwd_ratio)): 2 is the FLOP ratio
  /// of a transformer without activation checkpointing, about 3 with it.
  double bwd_ratio = 2.0;
  /// Gradient bytes handed over together during backward (a bucket, as DDP's 25 MiB); the last
  /// bucket's copy is the gradient path's tail after backward.
  uint64_t grad_bucket = uint64_t{25} << 20;
  ShardOrder shard_order = ShardOrder::kContiguous;
  uint64_t tensors = 0;      // parameter tensors; 0: EstimateTensors(params)
  std::string tensors_from;  // how tensors was obtained (for reports)
  nlohmann::json ToJson() const;
};

/// The phases of one iteration and the shares the overlap model needs, in seconds and
/// fractions. OverlappedIteration is a pure function of them.
struct IterationParts {
  double fwd_bwd = 0;       // forward + backward as given
  double forward = 0, backward = 0;  // its split (forward + backward = fwd_bwd up to rounding)
  double grad_out = 0, grad_fill = 0, step = 0, weights_back = 0, weights_in = 0;
  double grad_share = 1;    // the last gradient bucket's share of the gradient path, in (0, 1]
  double step_unit = 1;     // the last unit of step work's share of the step (1 / the subgroups
                            // each device, or each baseline thread, processes in turn), (0, 1]
  double step_start = 1;    // the fraction of the gradient (in backward order) that must be in
                            // before the step's last chain of work can start, [step_unit, 1]
};
/// The iteration's seconds at an overlap level (docs/planner.md, "The overlap model"):
///   none     fwd_bwd + grad_out + grad_fill + step + weights_back + weights_in
///   weights  fwd_bwd + C + pipe(S, W, u) + I
///   grads    F + pipe(B, C, g) + pipe(S, W, u) + I
///   step     E = max(r(1) + u·S, r(x0) + S);  E + max(u·(W + I), W + I - (1 - u)·S)
/// with C = grad_out + grad_fill, W = weights_back, I = weights_in, S = step, g = grad_share,
/// u = step_unit, x0 = step_start, pipe(P, Q, s) = max(P + s·Q, s·P + Q) (a consumer of Q
/// seconds of work behind a producer of P, in chunks of share s) and r(x) = F + max(x'·B + g·C,
/// g·B + x'·C), x' = max(x, g): when the fraction x of the gradient is on the host.
/// Each level is at most the one before; kStep is at least max(F + B + u·S, F + S).
double OverlappedIteration(const IterationParts& p, Overlap level);

struct PlanPoint {
  PlanMode mode = PlanMode::kBaseline;
  unsigned devices = 0;
  double topk = 0;
  double fwd_bwd = 0, grad_out = 0, step = 0, weights_in = 0;
  double forward = 0, backward = 0;         // fwd_bwd split at the model's bwd_ratio
  double grad_fill = 0, weights_back = 0;   // the host path (SystemProfile::host)
  uint64_t tensors = 0;                     // the per-tensor costs' count
  IterationParts parts;                     // the above with the overlap model's shares
  /// The serial iteration: every phase after the one before (Overlap::kNone).
  double iteration() const {
    return fwd_bwd + grad_out + grad_fill + step + weights_back + weights_in;
  }
  /// The iteration at an overlap level (kNone: iteration()).
  double Iteration(Overlap level) const;
  LinkBytes bytes;           // the step's bytes per link (the scheduler's counters)
  uint64_t gpu_link_bytes = 0;  // gradients out + weights in
  uint64_t subgroups = 0;
  uint32_t subgroup_elems = 0;
  double plan_wall_seconds = 0;  // how long planning took here
  /// Busy fraction of the step for each resource kind (its work at its bandwidth over the
  /// step's virtual seconds; per-device resources averaged over the devices): "uplink_down",
  /// "uplink_up", "ssd", "kernel" (SmartUpdate), "host_update" (baseline, per thread).
  std::vector<std::pair<std::string, double>> busy;
  /// The busiest resource, which bounds the step; "workers" when none is 70% busy (the step is
  /// then bound by the workers' chains of dependent operations, not by a bandwidth).
  std::string bottleneck;
  nlohmann::json ToJson() const;
};

/// Plans one iteration of `model` on `devices` devices of `sys` in `mode` (`topk`: the Top-K
/// ratio of kTopK, in (0, 1]). AdamW with fp16 gradients and an fp16 weight copy (mixed
/// precision as in the paper); the host path of sys.host. Deterministic. Throws
/// std::invalid_argument for a bad input.
PlanPoint PlanIteration(const PlanModel& model, const SystemProfile& sys, PlanMode mode,
                        unsigned devices, double topk);

/// One published figure of the Smart-Infinity paper beside the plan for the same setup.
struct PaperRow {
  std::string what;     // the figure, in words
  double paper_lo = 0, paper_hi = 0;  // published value (a range where the paper gives one)
  double plan = 0;      // the planner's value
  std::string setup;    // model, GPU, devices, mode
  bool within() const;  // plan within 15% of the nearest published value
  double deviation() const;  // (plan - nearest published) / nearest published
  nlohmann::json ToJson() const;
};
/// The calibration table of docs/planner.md, computed on `sys` (PaperSystem() for the table;
/// another profile to see how the figures move) with its host path set to none and serial
/// iterations: the paper's published iterations, whose host work the fit of the A5000's
/// forward + backward already holds.
std::vector<PaperRow> PaperCalibration(const SystemProfile& sys);

}  // namespace csdkit::planner

#endif  // CSDKIT_PLANNER_PLANNER_H_
