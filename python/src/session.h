// A trainer's session with the kit: the device set, the store of its model and the scheduler,
// created together and destroyed in reverse order (the scheduler refers to both). No Python
// here: module.cpp converts arguments and releases the GIL around these calls.
#ifndef CSDKIT_PYTHON_SESSION_H_
#define CSDKIT_PYTHON_SESSION_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/sparse_codec.h"
#include "csdkit/runtime/gradients.h"
#include "csdkit/runtime/layout.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/state_io.h"
#include "csdkit/runtime/store.h"
#include "csdkit/system/device_set.h"

namespace csdkit::py_binding {

class Session {
 public:
  /// Creates the store of a model in `dir` (Store::CreateForModel: `weights` are the tensors
  /// back to back in layout order, `weight_dtype` elements) and opens cfg.devices devices of
  /// `spec` (its count is taken from cfg; emulated devices keep their xclbin in `dir`). When
  /// cfg.subgroup_elems is 0 it is chosen here: the largest that fits spec.device_mem
  /// (SubgroupForMemory), capped at 1 Mi elements so that loads and compute overlap.
  static std::unique_ptr<Session> Create(const std::string& dir, const ParamLayout& layout,
                                         StoreConfig cfg,
                                         const std::vector<OptimizerConfig>& groups,
                                         const void* weights, DType weight_dtype, DeviceSpec spec);
  /// Opens the store of this model in `dir` (StoreError for another model's store) and as many
  /// devices of `spec` as the store has.
  static std::unique_ptr<Session> Open(const std::string& dir, const ParamLayout& layout,
                                       DeviceSpec spec);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Store& store() const { return *store_; }
  const DeviceSet& devices() const { return *devices_; }

  /// One optimizer step: gathers `grads` (one pointer per tensor in the store's grad dtype,
  /// null = no gradient: the tensor and its state are left unchanged), computing their L2 norm
  /// into *l2norm when given, runs the step and, when `weights_out` is given, copies the new
  /// weights into them as each subgroup's reach the host (StepWithWeightsOut: put back if the
  /// step fails; o.fp32_weights_out must be set for a store without a low-precision copy). `max_norm` > 0 clips by the global
  /// norm as torch.nn.utils.clip_grad_norm_ does, from the norm of the same gathering pass:
  /// clip_coef = min(1, max_norm / (norm / loss_scale + 1e-6)) replaces o.clip_coef.
  StepReport Step(const std::vector<const void*>& grads, const StepOptions& o, double max_norm,
                  double* l2norm, const std::vector<void*>* weights_out);
  // -- The gradient arena (GradientSet::FromArena): the transfer buffer, filled tensor by tensor
  // while backward runs. A filler thread copies each queued tensor into its slice, checking it
  // as it copies (CopyTensorGradient); StepArena then steps from the arena with no pass over the
  // gradient. The caller keeps a queued tensor alive and unchanged until the next StepArena (or
  // refills it: the latest fill of a tensor counts).

  /// The arena's first byte (the model's elements in the store's order and grad dtype, group
  /// padding zero) and its size; allocated at the first call, zero-filled.
  void* GradArena();
  uint64_t GradArenaBytes() const;
  /// Queues tensor t's gradient (`src`: its elements, contiguous, the store's grad dtype) for
  /// the filler thread. Throws std::invalid_argument for t out of range.
  void QueueFill(size_t t, const void* src);
  /// Copies tensor t's gradient into the arena now, in this thread (after the queued fills of t).
  void Fill(size_t t, const void* src);
  /// An external fill: the caller writes tensor t's slice of the arena itself (a CUDA
  /// device-to-host copy straight into it) between BeginFill(t) and EndFill(t, r), where r is
  /// what its own pass over the gradient found (finiteness and sum of squares, e.g. computed on
  /// the GPU). BeginFill does what a fill does before it changes the slice (a speculation that
  /// may have sent it is abandoned first); EndFill with r counts the fill as Fill's would, with
  /// std::nullopt (the copy failed) the tensor is left without one. Between the two, StepArena,
  /// Step and StartSpeculative refuse to run (std::logic_error naming the tensor).
  void BeginFill(size_t t);
  void EndFill(size_t t, std::optional<TensorGradient> r);
  /// Called with each range of elements [begin, begin + n) of the store's element space whose
  /// new weights were handed out (into weights_out, or, for null entries, only this call): a
  /// trainer that takes its weights from weights16()/weights32() starts its own copies here.
  /// From the worker threads (and the thread of StepArena), before the step commits; what it
  /// throws fails the step. Empty: none.
  void SetWeightsHook(std::function<void(uint64_t, uint64_t)> hook) {
    weights_hook_ = std::move(hook);
  }
  /// The runtime's buffer of the last step's weights (the store's out dtype, or fp32 weights
  /// with StepOptions::fp32_weights_out), P elements in store order; it is written during
  /// every step. Null before it exists (fp32 weights: before the first step that asks for them).
  const uint8_t* WeightsBuffer() const;
  /// The bytes this session moved on the host for the last step (since the step before it):
  /// gradients copied into the arena by the kit (fills, the gather), gradients written into it
  /// by the caller (external fills), new weights copied into the trainer's tensors and the
  /// copies of what they held (kept for the put-back of a failed step).
  struct HostBytes {
    uint64_t gradients_copied = 0, gradients_received = 0, weights_written = 0,
             weights_saved = 0;
  };
  const HostBytes& last_host_bytes() const { return last_host_bytes_; }
  /// Waits for the queued fills; true when tensor t was filled since the last StepArena.
  std::vector<bool> WaitFills();
  /// One optimizer step from the arena: `has_grad[t]` says which tensors have a gradient this
  /// step; each of them must have been filled since the last StepArena (std::invalid_argument
  /// naming the first that was not). Slices of tensors without a gradient are zeroed first
  /// (only those a fill wrote). The finiteness and the norm (GradientNorm) come from the fills'
  /// passes: `max_norm` and `l2norm` as in Step, bit for bit the same values. Afterwards every
  /// tensor needs a fill again.
  StepReport StepArena(const std::vector<bool>& has_grad, const StepOptions& o, double max_norm,
                       double* l2norm, const std::vector<void*>* weights_out);

  // -- The update started during backward (a speculation) --------------------------------------
  /// Starts the next step from the arena before backward has finished filling it: the
  /// scheduler's step (SmartUpdate) with `o`, taking `has_grad` as the tensors that will have
  /// a gradient (a trainer passes the last step's), the gradient as finite and `o.clip_coef` as
  /// the clip coefficient. Each device takes its subgroups last first and sends a subgroup's
  /// gradient once every tensor it covers (that has a gradient) has been filled; nothing is
  /// written into the store (each of a device's two workers holds its computed subgroup),
  /// committed or written into `weights_out` until StepArena confirms it. StepArena then
  /// checks what the step was started with against what the trainer's step turns out to be --
  /// the same tensors with gradients, no tensor filled twice or filled unexpectedly, every
  /// gradient finite, the same clip coefficient (from the fills' norm and max_norm), loss
  /// scale, hyper-parameters, mode and weights_out -- and either lets it commit (the weights of
  /// the subgroups done so far are copied out then, the rest as they come) or abandons it and
  /// steps from the arena as without one. Either way the result is StepArena's without a
  /// speculation, bit for bit: the inputs are the same, and an abandoned step committed
  /// nothing. A fill that would change a slice the speculation may have sent (a tensor filled
  /// again, or one expected without a gradient) abandons it first and waits for it to stop.
  /// Every other call but QueueFill, Fill, WaitFills and StepArena abandons it too. Fills made
  /// before it started (earlier backward passes of gradient accumulation) no longer count:
  /// each tensor with a gradient is to be filled again.
  void StartSpeculative(const std::vector<bool>& has_grad, const StepOptions& o,
                        const std::vector<void*>* weights_out);
  /// What the last StepArena did with a speculation: empty (none was running), "committed", or
  /// "abandoned: <why>" (the step then ran from the arena).
  const std::string& last_speculation() const { return last_speculation_; }

  /// One optimizer step with Top-K gradients: `streams[d][j]` is subgroup j of device d
  /// (Store::Subgroups(d) order) in the kit's block format, values in the store's grad dtype.
  /// GradientSet::FromStreams validates every stream with the kernel's checks before anything
  /// moves (std::invalid_argument naming the device and the subgroup); the step and the weights
  /// out are then as in Step. No clipping by norm here: the kit sees only the kept entries (the
  /// caller folds its own clip coefficient into o.clip_coef).
  /// `frozen`: element ranges of tensors without a gradient (GradientSet::FromStreams).
  StepReport StepSparse(std::vector<std::vector<SparseGrad>> streams,
                        std::vector<std::pair<uint64_t, uint64_t>> frozen, const StepOptions& o,
                        const std::vector<void*>* weights_out);
  /// Reads state variable `var` of the committed step into per-tensor fp32 arrays (ExportState).
  void Export(const std::string& var, const std::vector<float*>& dst);
  /// Reads a q8 moment of the committed step as stored (ExportStateQ8).
  void ExportQ8(const std::string& var, const std::vector<uint8_t*>& codes,
                const std::vector<float*>& absmax);
  /// Replaces the state and commits it at in.step (ImportState); the last step's weights are
  /// forgotten.
  void Import(const StateImport& in);
  /// Store::RollBack: commits again the state the last commit replaced (one step back).
  void RollBack() {
    Abandon("the store was rolled back");
    store_->RollBack();
  }

 private:
  Session() = default;
  void Start(const DeviceSpec& spec);
  /// What Step and StepArena share: the clip coefficient from `norm` and `max_norm`, the
  /// scheduler's step on `g` (whose buffer, the arena, comes back to gather_buf_ whatever
  /// happens), the weights out.
  /// The step's clip coefficient: o.clip_coef, or with max_norm > 0 torch's
  /// clip_grad_norm_ coefficient from `norm` (of the gradient times the loss scale).
  double ClipCoef(const StepOptions& o, double norm, double max_norm) const;
  StepReport StepDense(GradientSet g, double norm, const StepOptions& o, double max_norm,
                       const std::vector<void*>* weights_out);

  /// The scheduler's step on `g`; with `weights_out`, each subgroup's new weights are copied
  /// into those tensors as the workers bring them to the host (StepOptions::weights_ready),
  /// overlapped with the devices' remaining work, and put back if the step then fails: the
  /// tensors change only with a step that commits. Tensors without a gradient are not written.
  StepReport StepWithWeightsOut(const GradientSet& g, StepOptions o,
                                const std::vector<void*>* weights_out);

  std::unique_ptr<Store> store_;
  std::unique_ptr<DeviceSet> devices_;
  std::unique_ptr<Scheduler> scheduler_;
  AlignedBuffer gather_buf_;  // the transfer buffer, kept from step to step (the arena)
  AlignedBuffer saved_weights_;  // what a step's weights out replaced (StepWithWeightsOut)

  // The filler thread and what the fills found (index: tensor).
  struct FillJob {
    size_t t;
    const void* src;
  };
  void FillerLoop();
  /// What a fill of t does before it changes the slice: a speculation that may have sent it
  /// (or takes t as without a gradient) is abandoned and waited for.
  void BeforeSliceChanges(size_t t);
  void DoFill(size_t t, const void* src);
  struct ByteCountScope;
  void CheckTensorIndex(size_t t) const;
  std::mutex fill_mu_;
  std::condition_variable fill_cv_, fill_done_cv_;
  std::deque<FillJob> fill_queue_;
  unsigned fills_running_ = 0;
  bool filler_stop_ = false;
  std::thread filler_;
  std::vector<std::optional<TensorGradient>> filled_;  // since the last StepArena
  std::vector<bool> filling_;  // an external fill begun and not ended
  /// std::logic_error when an external fill is under way (fill_mu_ not held).
  void CheckNoExternalFill(const char* what);
  /// Closes the step's byte count (last_host_bytes_) and starts the next.
  void CloseHostBytes();
  /// CopyWeightsRange with the byte count, the range noted in `handed` (under `mu`) for a
  /// put-back, then the weights hook.
  void HandWeights(const std::vector<void*>& out, uint64_t begin, uint64_t n,
                   const std::vector<std::pair<uint64_t, uint64_t>>& frozen, std::mutex& mu,
                   std::vector<std::pair<uint64_t, uint64_t>>& handed);
  std::function<void(uint64_t, uint64_t)> weights_hook_;
  std::atomic<uint64_t> grad_copied_{0}, grad_received_{0}, weights_written_{0},
      weights_saved_{0};
  HostBytes last_host_bytes_;
  std::vector<bool> slice_dirty_;  // a fill wrote the slice since it was last zeroed
  std::exception_ptr fill_error_;
  uint8_t* arena_ = nullptr;  // gather_buf_'s bytes, also while a speculation holds the buffer

  // The speculation (StartSpeculative). Its flags and lists are guarded by fill_mu_; spec_cv_
  // wakes its waits (a fill done, confirmed, abandoned, finished).
  struct Speculation {
    std::vector<bool> has_grad;
    StepOptions o;                        // as started (without the callbacks)
    std::vector<void*> out;               // weights_out as started
    bool has_out = false;
    std::unique_ptr<GradientSet> grads;   // holds the arena while the step runs
    std::thread thread;
    StepReport rep;
    std::exception_ptr err;
    std::string invalid;                  // why it cannot commit; empty: nothing against it yet
    bool confirmed = false, abandoned = false, finished = false;
    std::vector<std::pair<uint64_t, uint64_t>> pending;  // weights ready before confirmation
    std::vector<std::pair<uint64_t, uint64_t>> handed;   // ranges written into out
  };
  /// Blocks a worker until the tensors covering elements [begin, begin + n) are filled (those
  /// the speculation expects a gradient for); throws SpeculationAbandoned when it is abandoned.
  void WaitSlices(Speculation& s, uint64_t begin, uint64_t n);
  /// Abandons a running speculation (why: recorded in last_speculation_ when not empty), waits
  /// for its thread and takes the arena back. Nothing was committed or written out.
  void Abandon(const std::string& why);
  /// Why the trainer's step (StepArena's arguments) is not the one the speculation started;
  /// empty when it is.
  std::string Mismatch(const Speculation& s, const std::vector<bool>& has_grad, bool finite,
                       const StepOptions& o, double clip_coef,
                       const std::vector<void*>* weights_out) const;
  std::unique_ptr<Speculation> spec_;
  std::condition_variable spec_cv_;
  std::string last_speculation_;
};

}  // namespace csdkit::py_binding

#endif  // CSDKIT_PYTHON_SESSION_H_
