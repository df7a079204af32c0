// The planner: one training iteration of storage-offloaded training in virtual time, at any
// scale, with the optimizer step planned by the shipped scheduler on null devices.
//
// An iteration is four phases, one after the other (no overlap between them is assumed):
//   fwd_bwd     forward and backward on the GPU (a GPU profile: given, or from the table)
//   grad_out    the gradients GPU -> host over the GPU's own PCIe link (dense, or the Top-K
//               stream the GPU compressed)
//   step        the optimizer step: Scheduler::Step on a planning store (Store::Plan) and null
//               devices (emu/.../null_device.h), i.e. the transfers and launches the kit issues,
//               booked on the link model (emu/.../link_model.h); its virtual seconds
//   weights_in  the low-precision weights host -> GPU for the next forward pass
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
  std::string notes;          // where the figures come from
  nlohmann::json ToJson() const;
};
/// The kit's SmartSSD profile (emu::LinkProfile::SmartSsd), 32 baseline threads, a Gen5 x16 GPU
/// link.
SystemProfile KitSystem();
/// The profile calibrated on the Smart-Infinity paper's system (docs/planner.md derives it).
SystemProfile PaperSystem();
/// PCIe x16 payload bandwidth of a generation (3, 4, 5): 8/16/32 GT/s, 128b/130b, at 80%
/// (what a DMA engine sustains after packet overheads).
double PcieX16(unsigned gen);

enum class PlanMode { kBaseline, kSmart, kHandler, kTopK };
const char* PlanModeName(PlanMode m);
/// "baseline", "smart", "handler", "topk"; std::invalid_argument otherwise.
PlanMode ParsePlanMode(const std::string& s);

struct PlanModel {
  uint64_t params = 0;
  std::string name;          // for reports
  double fwd_bwd = 0;        // seconds per iteration on the GPU
  std::string fwd_bwd_from;  // how fwd_bwd was obtained
  uint64_t device_mem = uint64_t{4} << 30;
  uint32_t subgroup = 0;     // elements; 0: as `csdkit init` picks
  nlohmann::json ToJson() const;
};

struct PlanPoint {
  PlanMode mode = PlanMode::kBaseline;
  unsigned devices = 0;
  double topk = 0;
  double fwd_bwd = 0, grad_out = 0, step = 0, weights_in = 0;
  double iteration() const { return fwd_bwd + grad_out + step + weights_in; }
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
/// precision as in the paper). Deterministic. Throws std::invalid_argument for a bad input.
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
/// another profile to see how the figures move).
std::vector<PaperRow> PaperCalibration(const SystemProfile& sys);

}  // namespace csdkit::planner

#endif  // CSDKIT_PLANNER_PLANNER_H_
