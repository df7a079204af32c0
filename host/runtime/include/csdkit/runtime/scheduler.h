// The SmartUpdate scheduler and the baseline, over one store and N devices.
//
// SmartUpdate (mode kSmart): each device updates its own shard, subgroup by subgroup, with two
// workers so that subgroup i+1 loads while subgroup i computes and writes back. Per subgroup:
// P2P reads of theta/m/v (committed slot) into device memory, the gradient over the shared
// link, a device-side CRC check of the loaded state, the kernel, the low-precision weights back
// to the host FIRST, device-side CRCs of the new state, then the deferred P2P write-backs into
// the other slot (waited for only when the worker's buffers are needed again). Device buffers
// are allocated once, at the subgroup size, and reused.
//
// Baseline (mode kBaseline, ZeRO-Infinity style): the same subgroups, states NVMe -> host over
// the shared link, the same kernel run by the host model on host threads (thread t takes
// entries t, t + threads, ... of a work list that interleaves the devices: subgroup 0 of every
// device, then subgroup 1, ...), states back to NVMe; the shards stay in their device
// directories, and the interleaved order reads them all at once, as a RAID0 stripe does. In virtual time the host update is booked at the link
// profile's host rate, not at its wall time here.
//
// Planning (a planning store, Store::Plan, on null devices): the same workers issue the same
// transfers and launches, which the null devices count and book; nothing is read, computed or
// written, and the commit stays in memory. The step's bytes and virtual seconds are those of
// the same step on emulated devices.
//
// Both modes compute bit-identical state (the same kernel, through the same launch type, on the
// same subgroups) and commit it
// atomically (Store::Commit). A gradient with any non-finite value (loss-scale overflow) skips
// the step: nothing is read, written or committed.
#ifndef CSDKIT_RUNTIME_SCHEDULER_H_
#define CSDKIT_RUNTIME_SCHEDULER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/device.h"
#include "csdkit/platform/optimizer.h"
#include "csdkit/platform/update_launch.h"
#include "csdkit/platform/worker_pool.h"
#include "csdkit/runtime/gradients.h"
#include "csdkit/runtime/store.h"

namespace csdkit {

enum class UpdateMode { kSmart, kBaseline };
const char* UpdateModeName(UpdateMode m);
UpdateMode ParseUpdateMode(const std::string& s);

/// What a step does; anything but kAll is for benchmarks (bench/step_bench.cpp) and neither
/// changes the store nor commits.
enum class StepPhases {
  kAll,          // the step
  kIoOnly,       // only the transfers (state reads and write-backs, gradient, weights)
  kComputeOnly,  // only the kernel launches (which checksum the state as it streams), no transfers
};

/// A step refused by the divergence guard: a launch wrote NaN or infinity into the weights or
/// the optimizer state (StepOptions::allow_nonfinite). Nothing was committed.
class DivergenceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct StepOptions {
  UpdateMode mode = UpdateMode::kSmart;
  StepPhases phases = StepPhases::kAll;
  double clip_coef = 1.0;    // folded into the unscale factor with the loss scale
  /// This step's loss scale (gradients arrive multiplied by it); empty: the store's.
  std::optional<double> loss_scale;
  /// The trainer found a non-finite gradient (e.g. GradScaler's found_inf): the step is
  /// skipped, nothing read, written or committed.
  bool found_inf = false;
  /// Stores without a low-precision copy (out fp32): read the updated fp32 weights back to the
  /// host (over the shared link, counted) into weights32().
  bool fp32_weights_out = false;
  /// The divergence guard: a launch that writes NaN or infinity into theta, m or v (the
  /// kernel's non-finite count lane) fails the step with DivergenceError and nothing is
  /// committed. true commits such a step anyway (StepReport::nonfinite_values counts them).
  bool allow_nonfinite = false;
  /// This step's hyper-parameters per param group (LR schedulers change them every step);
  /// empty: those the last committed step used. The optimizer must be the store's.
  std::vector<OptimizerConfig> group_hyper;
  /// SmartUpdate: two workers per device, so that subgroup i+1 loads while subgroup i computes
  /// and writes back (the paper's transfer handler). False: one worker per device that waits
  /// for each subgroup's write-backs before the next load (SmartUpdate without the handler, for
  /// plans and comparisons). The state computed is the same either way.
  bool overlap = true;
  unsigned host_threads = 0; // baseline compute threads (0: all hardware threads)
  /// Bind the baseline's threads one per CPU of the process's affinity mask (when it has
  /// enough CPUs). The threads are created at the first baseline step and reused.
  bool pin_host_threads = true;
  /// Golden vectors of this step's launches, in the format `csdkit kernel --replay` reads
  /// (docs/kernel-interface.md): each launch's inputs as the kernel received them and its
  /// outputs as it wrote them (before tensors without a gradient are restored), in
  /// `<dump_dir>/device-<d>-subgroup-<s>/`. `dump_dir` must exist; empty: no dump. Only with
  /// StepPhases::kAll. The smart mode reads the device buffers back for it (not counted in
  /// StepReport::bytes); the baseline copies its host buffers.
  std::string dump_dir;
  /// The (device, subgroup) launches to dump; empty: every launch of the step.
  std::vector<std::pair<unsigned, uint32_t>> dump_only;
  /// Called after each subgroup with (done, total); may be empty.
  std::function<void(uint64_t, uint64_t)> progress;
  /// Called as each subgroup's new weights reach the host (weights16(), or weights32() with
  /// fp32_weights_out: elements [begin, begin + n) of the store's element space), by the
  /// worker that produced them, before the step commits; disjoint ranges, from several threads
  /// at once. A trainer hands them on while the devices go on (Scheduler::CopyWeightsRange) and
  /// takes them back if the step fails. May be empty; what it throws fails the step.
  std::function<void(uint64_t begin, uint64_t n)> weights_ready;
  /// SmartUpdate with a dense gradient set: called by the worker about to send a subgroup's
  /// gradient (elements [begin, begin + n) of the store's element space) to its device, before
  /// it reads them; it returns once they are final (a trainer still in backward fills them as
  /// they come) or throws to abandon the step (nothing is committed). May be empty. The
  /// baseline refuses it.
  std::function<void(uint64_t begin, uint64_t n)> gradient_wait;
  /// SmartUpdate: called by a worker before it writes a subgroup's new state into the store's
  /// other slot (the first write of the step's files: until then the step has read the store
  /// and computed, nothing more), and once more before the commit; what it throws fails the
  /// step with nothing written or committed. A speculative step (Session::StartSpeculative)
  /// waits here for the trainer's word, so that an abandoned one leaves every byte of the
  /// store as it was (the other slot keeps the state a rollback needs). May be empty.
  std::function<void()> before_write;
  /// SmartUpdate: each device takes its subgroups from the last to the first (backward
  /// produces the gradients of a model's last tensors first). The state computed is the same.
  bool reverse_subgroups = false;
};

struct StepReport {
  int64_t step = 0;  // the step that was committed (or would have been)
  UpdateMode mode = UpdateMode::kSmart;
  bool skipped = false;
  std::string skip_reason;
  double seconds = 0;        // wall time of the step, commit included
  /// When the step's work began and when it ended (after the commit), in seconds of
  /// std::chrono::steady_clock: on Linux CLOCK_MONOTONIC, the clock of Python's
  /// time.monotonic(), so that a trainer can place the step against its own timeline (a step
  /// started during backward). finished_at - started_at = seconds.
  double started_at = 0;
  double finished_at = 0;
  double io_seconds = 0;     // time workers waited for storage (summed over workers)
  double compute_seconds = 0;  // kernel time (summed over workers)
  double virtual_seconds = 0;  // link model estimate for SmartSSD hardware (0 if no model);
                               // deterministic: the same issued work gives the same value
  uint64_t subgroups = 0;
  LinkBytes bytes;
  uint64_t nonfinite_values = 0;  // NaN/inf written to the state (committed only if allowed)
  uint64_t dumped_launches = 0;  // golden directories written (StepOptions::dump_dir)
  unsigned host_threads = 0;     // baseline: host threads that ran the update
  unsigned pinned_threads = 0;   // baseline: of those, bound to a CPU
  std::string warning;  // committed, but Store::durability_warning() said why it may not last
  nlohmann::json ToJson() const;
};

/// Runs optimizer steps on a store with its devices (the device set).
class Scheduler {
 public:
  /// `devices.device(k)` serves shard k; a link model of the group (if any) gives each step's
  /// virtual time. Both must outlive the scheduler. Throws std::invalid_argument when the
  /// group's size is not the store's device count.
  Scheduler(Store& store, DeviceGroup& devices);
  ~Scheduler();

  /// Runs one optimizer step with `grads` (from GradientSet::Synthetic(store, store.step()+1,
  /// ...) or a trainer). Throws StoreError / std::runtime_error; on any error nothing is
  /// committed.
  StepReport Step(const GradientSet& grads, const StepOptions& o);

  /// The low-precision weights (store's out dtype, P elements) produced by the last step; empty
  /// when the store has no low-precision copy.
  const AlignedBuffer& weights16() const { return weights16_; }
  /// The fp32 weights (P elements) read back by the last step with fp32_weights_out.
  const AlignedBuffer& weights32() const { return weights32_; }
  /// Copies the last step's weights (the low-precision copy, or the fp32 weights) of a model
  /// store into the trainer's tensors: dst[t] receives tensor t's elements (layout order) in
  /// the store's out dtype (fp32 when it has no copy). Throws std::invalid_argument for a store
  /// without a layout, a list of the wrong length or a null pointer, std::logic_error before
  /// any step produced weights. Tensors the last step left unchanged (no gradient) are not
  /// written: the trainer's copy is already theirs.
  void CopyWeightsOut(const std::vector<void*>& dst) const;
  /// CopyWeightsOut's checks of `dst` alone (a model store, one non-null destination per
  /// tensor), for a caller about to hand weights on during a step. With `allow_missing`, a
  /// null destination is accepted: that tensor is not written (a trainer that takes its
  /// weights straight from weights16()/weights32(), e.g. with one host-to-GPU copy).
  void CheckWeightsOut(const std::vector<void*>& dst, bool allow_missing = false) const;
  /// Part of CopyWeightsOut during a step (StepOptions::weights_ready): elements [begin,
  /// begin + n) of this step's weights into the parts of the tensors of `dst` they cover, but
  /// those in `frozen` (the step's tensors without a gradient: GradientSet::frozen()). When
  /// `saved` is given, what dst held there is first copied to saved + (element offset × element
  /// bytes), so that a failed step can put it back. Checked destinations (CheckWeightsOut;
  /// null ones are skipped); safe from several threads for disjoint ranges. Returns the bytes
  /// written into `dst` (as many again were saved when `saved` is given).
  uint64_t CopyWeightsRange(const std::vector<void*>& dst, uint64_t begin, uint64_t n,
                            const std::vector<std::pair<uint64_t, uint64_t>>& frozen,
                            uint8_t* saved) const;
  /// Undoes CopyWeightsRange(dst, begin, n, frozen, saved): the same parts of the tensors get
  /// back what `saved` kept of them.
  void PutBackWeightsRange(const std::vector<void*>& dst, uint64_t begin, uint64_t n,
                           const std::vector<std::pair<uint64_t, uint64_t>>& frozen,
                           const uint8_t* saved) const;
  /// Forgets the last step's weights (after the store's state was replaced by an import):
  /// CopyWeightsOut refuses until the next step.
  void InvalidateWeightsOut() { have_weights_ = false; }

 private:
  struct DevBufs;
  /// The launches of one subgroup when its tensors' step counts differ (see Step): per
  /// distinct new count, the subgroup-relative element ranges of the tensors stepped to it.
  struct StepClass {
    int64_t step = 0;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
  };
  /// Empty when every tensor with a gradient is at this step's number (one launch, as always);
  /// else the subgroup's classes in ascending step order (none: no tensor of it has a gradient).
  std::vector<StepClass> ClassesIn(uint64_t shard_base, const Subgroup& sg) const;
  /// The kernel scalars of group `g` at step count `step` (precomputed by Step).
  const KernelLaunch& LaunchFor(unsigned g, int64_t step) const;
  void SmartWorker(unsigned d, unsigned w, const GradientSet& g,
                   const std::vector<KernelLaunch>& k,
                   Store::Checksums* crcs, StepReport* rep, std::mutex* rep_mu,
                   const StepOptions& o);
  void BaselineWorker(const std::vector<Subgroup>* work, unsigned t, unsigned nt,
                      const GradientSet& g, const std::vector<KernelLaunch>& k,
                      Store::Checksums* crcs,
                      StepReport* rep, std::mutex* rep_mu, const StepOptions& o);
  void Progress(const StepOptions& o);
  bool Dumps(const StepOptions& o, unsigned d, const Subgroup& sg) const;
  /// Writes one launch's golden directory (inputs `in`, outputs `out`, host buffers).
  /// `step`/`launch`: the launch's step count and scalars; `part` >= 0 names the launch of a
  /// subgroup that takes several (directory suffix "-launch-<part>").
  void DumpLaunch(const StepOptions& o, unsigned d, const Subgroup& sg, uint32_t nnz,
                  const UpdateLaunch<AlignedBuffer>& in, const UpdateLaunch<AlignedBuffer>& out,
                  int64_t step, const KernelLaunch& launch, int part);

  Store& store_;
  DeviceGroup& devices_;
  std::vector<std::unique_ptr<DevBufs>> bufs_;  // [device * 2 + worker]
  std::vector<std::unique_ptr<std::mutex>> kernel_mu_;
  AlignedBuffer weights16_;
  AlignedBuffer weights32_;
  bool have_weights_ = false;
  std::vector<std::pair<uint64_t, uint64_t>> last_frozen_;  // tensors the last step left alone
  std::atomic<bool> abort_{false};
  std::atomic<uint64_t> done_{0};
  uint64_t total_ = 0;
  std::mutex progress_mu_;
  // This step's number and launch parameters (DumpLaunch takes each launch's scalars).
  int64_t step_ = 0;
  GradSpec step_grad_;
  std::vector<OptimizerConfig> step_hyper_;
  // Per-tensor step counts this step commits (model stores): the store's, + 1 where the tensor
  // has a gradient. Uniform: every tensor with a gradient reaches step_ (one launch per
  // subgroup); else tensor_begin_ (layout offsets) and the scalars per (group, count).
  std::vector<int64_t> next_counts_;
  std::vector<bool> stepped_;
  std::vector<uint64_t> tensor_begin_;
  bool uniform_counts_ = true;
  std::map<std::pair<unsigned, int64_t>, KernelLaunch> class_launch_;
  std::atomic<uint64_t> dumped_{0}, dump_read_bytes_{0};
  std::atomic<uint64_t> nonfinite_{0};  // non-finite values written (StepOptions::allow_nonfinite)
  std::unique_ptr<WorkerPool> host_pool_;  // the baseline's host threads, kept between steps
};

}  // namespace csdkit

#endif  // CSDKIT_RUNTIME_SCHEDULER_H_
