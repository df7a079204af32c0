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
// the shared link, the same kernel run by the host model on host threads, states back to NVMe;
// the shards stay in their device directories (striped like RAID0).
//
// Both modes compute bit-identical state (the same kernel on the same subgroups) and commit it
// atomically (Store::Commit). A gradient with any non-finite value (loss-scale overflow) skips
// the step: nothing is read, written or committed.
#ifndef CSDKIT_UPDATE_H_
#define CSDKIT_UPDATE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "csdkit/aligned_buffer.h"
#include "csdkit/device.h"
#include "csdkit/sparse_codec.h"
#include "csdkit/store.h"

namespace csdkit {

enum class UpdateMode { kSmart, kBaseline };
const char* UpdateModeName(UpdateMode m);
UpdateMode ParseUpdateMode(const std::string& s);

/// One step's gradient for the whole model, as the trainer hands it over: dense (in the store's
/// grad dtype) or, with Top-K, one compressed stream per (device, subgroup).
class GradientSet {
 public:
  /// Deterministic synthetic gradients for `step` (SyntheticGradientBits), compressed per
  /// subgroup when topk > 0. `poison` >= 0 puts a +inf at that global element (tests).
  static GradientSet Synthetic(const Store& store, int64_t step, double topk,
                               int64_t poison = -1);

  DType dtype() const { return dtype_; }
  bool sparse() const { return sparse_; }
  /// Dense gradient of the whole model (empty when sparse).
  const AlignedBuffer& dense() const { return dense_; }
  const SparseGrad& sparse_for(unsigned device, uint32_t subgroup) const {
    return streams_.at(device).at(subgroup);
  }
  /// False if any value is NaN or infinite; *where names the first one.
  bool AllFinite(std::string* where) const;
  /// Bytes that cross the shared link for this gradient (dense array or all streams).
  uint64_t TransferBytes() const;

 private:
  DType dtype_ = DType::kFp32;
  bool sparse_ = false;
  uint64_t params_ = 0;
  AlignedBuffer dense_;
  std::vector<std::vector<SparseGrad>> streams_;
};

/// What a step does; anything but kAll is for benchmarks (bench/step_bench.cpp) and neither
/// changes the store nor commits.
enum class StepPhases {
  kAll,          // the step
  kIoOnly,       // only the transfers (state reads and write-backs, gradient, weights)
  kComputeOnly,  // only the device work (CRC checks, kernel, checksums), no transfers
};

struct StepOptions {
  UpdateMode mode = UpdateMode::kSmart;
  StepPhases phases = StepPhases::kAll;
  double clip_coef = 1.0;    // folded into the unscale factor with the store's loss scale
  unsigned host_threads = 0; // baseline compute threads (0: all hardware threads)
  /// Called after each subgroup with (done, total); may be empty.
  std::function<void(uint64_t, uint64_t)> progress;
};

struct StepReport {
  int64_t step = 0;  // the step that was committed (or would have been)
  UpdateMode mode = UpdateMode::kSmart;
  bool skipped = false;
  std::string skip_reason;
  double seconds = 0;        // wall time of the step, commit included
  double io_seconds = 0;     // time workers waited for storage (summed over workers)
  double compute_seconds = 0;  // kernel time (summed over workers)
  double virtual_seconds = 0;  // link model estimate for SmartSSD hardware (0 if no model)
  uint64_t subgroups = 0;
  LinkBytes bytes;
  nlohmann::json ToJson() const;
};

class Runtime {
 public:
  /// `devices[k]` serves shard k. `virtual_time` (optional) returns the link model's horizon
  /// and `reset_virtual_time` resets it; both empty when no link model is used.
  Runtime(Store& store, std::vector<Device*> devices,
          std::function<double()> virtual_time = {},
          std::function<void()> reset_virtual_time = {});
  ~Runtime();

  /// Runs one optimizer step with `grads` (from GradientSet::Synthetic(store, store.step()+1,
  /// ...) or a trainer). Throws StoreError / std::runtime_error; on any error nothing is
  /// committed.
  StepReport Step(const GradientSet& grads, const StepOptions& o);

  /// The low-precision weights (store's out dtype, P elements) produced by the last step; empty
  /// when the store has no low-precision copy.
  const AlignedBuffer& weights16() const { return weights16_; }

 private:
  struct DevBufs;
  void SmartWorker(unsigned d, unsigned w, const GradientSet& g, const KernelLaunch& k,
                   Store::Checksums* crcs, StepReport* rep, std::mutex* rep_mu,
                   const StepOptions& o);
  void BaselineWorker(const std::vector<Subgroup>* work, std::atomic<size_t>* next,
                      const GradientSet& g, const KernelLaunch& k, Store::Checksums* crcs,
                      StepReport* rep, std::mutex* rep_mu, const StepOptions& o);
  void Progress(const StepOptions& o);

  Store& store_;
  std::vector<Device*> devices_;
  std::function<double()> virtual_time_;
  std::function<void()> reset_virtual_time_;
  std::vector<std::unique_ptr<DevBufs>> bufs_;  // [device * 2 + worker]
  std::vector<std::unique_ptr<std::mutex>> kernel_mu_;
  AlignedBuffer weights16_;
  std::atomic<bool> abort_{false};
  std::atomic<uint64_t> done_{0};
  uint64_t total_ = 0;
  std::mutex progress_mu_;
};

}  // namespace csdkit

#endif  // CSDKIT_UPDATE_H_
