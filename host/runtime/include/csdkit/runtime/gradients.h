// The gradient of one step as the scheduler consumes it: dense (one array of the whole model in
// the store's grad dtype) or Top-K compressed (one stream per device and subgroup, in the kit's
// block format).
#ifndef CSDKIT_RUNTIME_GRADIENTS_H_
#define CSDKIT_RUNTIME_GRADIENTS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/sparse_codec.h"
#include "csdkit/runtime/store.h"

namespace csdkit {

/// What one tensor's gradient pass found: whether every value is finite, and (when asked) the
/// sum of its squares in double, added in element order from 0.
struct TensorGradient {
  bool finite = true;
  double sumsq = 0.0;
};

/// Copies tensor gradient `src` (n elements of `dt`) to `dst` and checks it in the same pass
/// (64 KiB at a time, checked while in cache): the one pass both Gather and the trainer's
/// gradient arena (a tensor copied in as soon as backward has finished it) make over a gradient.
TensorGradient CopyTensorGradient(void* dst, const void* src, uint64_t n, DType dt,
                                  bool want_sumsq);

/// The kit's global L2 norm of a gradient from its tensors' passes: sqrt of the per-tensor sums
/// of squares added in layout order (double); inf when any tensor has a non-finite value. The
/// same value whichever way the tensors were handed over (Gather, or an arena filled tensor by
/// tensor during backward), so that the clip coefficient is the same to the last bit.
double GradientNorm(const std::vector<TensorGradient>& per_tensor);

/// One step's gradient for the whole model, as the trainer hands it over: dense (in the store's
/// grad dtype) or, with Top-K, one compressed stream per (device, subgroup).
class GradientSet {
 public:
  /// Deterministic synthetic gradients for `step` (SyntheticGradientBits), compressed per
  /// subgroup when topk > 0. `poison` >= 0 puts a +inf at that global element (tests).
  static GradientSet Synthetic(const Store& store, int64_t step, double topk,
                               int64_t poison = -1);
  /// A gradient with sizes and no values, for planning on null devices (see Store::Plan): dense
  /// (topk = 0) it is an address reservation of the model's size in the store's grad dtype
  /// with no memory behind it (AlignedBuffer::Reserve: reading it faults, a null device never
  /// does); Top-K it has, per (device, subgroup), the entry count the reference compressor
  /// keeps (TopKCount(n, topk)) and no stream buffers. It counts as finite (AllFinite is true
  /// without a pass) and its TransferBytes equals that of Synthetic(store, step, topk).
  /// Throws std::invalid_argument for topk outside [0, 1].
  static GradientSet Planned(const Store& store, double topk);
  /// True for a set from Planned: it holds sizes, not values.
  bool planned() const { return planned_; }
  /// The dense gradient of a model store from the trainer's memory: `grads[t]` points at tensor
  /// t's elements (layout order, the store's grad dtype, contiguous), or is null when tensor t
  /// has no gradient this step (PyTorch's `grad is None`: the step leaves its weights and state
  /// unchanged). They are gathered once (from 16 MiB on by up to 8 threads, each taking whole
  /// tensors: the same bytes and sums as one thread)
  /// into the transfer buffer — the only copy — and, when `l2norm` is given, the L2 norm of the
  /// gradient as given (double accumulation; inf if any value is not finite) is computed in the
  /// same pass, for clipping without a second pass. Throws std::invalid_argument for a store
  /// without a layout, a list of the wrong length or a null pointer.
  /// The gather pass also notes whether every gathered value is finite (AllFinite then needs no
  /// pass of its own). `reuse`: a buffer from an earlier set (TakeBuffer), reused when it has
  /// the model's size — no allocation, and only the gaps (group padding, tensors without a
  /// gradient) are zeroed.
  static GradientSet Gather(const Store& store, const std::vector<const void*>& grads,
                            double* l2norm = nullptr, AlignedBuffer reuse = AlignedBuffer());
  /// The dense gradient of a model store already in `arena`: the model's elements in the
  /// store's order and grad dtype (tensor t at layout offset t, group padding zero), written by
  /// the trainer tensor by tensor (CopyTensorGradient into the arena's slices as backward
  /// finishes each). `has_grad[t]` false: tensor t has no gradient this step (its slice must be
  /// zero, as Gather leaves it). `all_finite`: every gradient tensor's pass found only finite
  /// values (AllFinite then needs no pass; false: AllFinite looks for the value to name).
  /// Takes the buffer over (TakeBuffer gives it back), so that no byte is copied.
  static GradientSet FromArena(const Store& store, AlignedBuffer arena,
                               const std::vector<bool>& has_grad, bool all_finite);
  /// Gives the dense buffer back for the next Gather (the set is empty afterwards).
  AlignedBuffer TakeBuffer() && { return std::move(dense_); }
  /// The same from one flat buffer holding the tensors back to back in layout order.
  static GradientSet FromFlat(const Store& store, const void* flat, double* l2norm = nullptr);
  /// Top-K gradients from the trainer: `streams[d][j]` is subgroup j of device d in the kit's
  /// block format (its n the subgroup's size, values in the store's grad dtype), taken over by
  /// the set. Every stream is validated before any step uses it (sorted, unique, in range, the
  /// right length: the kernel's own checks); throws std::invalid_argument naming the device,
  /// the subgroup and the error.
  /// `frozen`: flattened element ranges [begin, end) of tensors without a gradient this step
  /// (sorted, disjoint, within the model): their weights and state stay as they are, whatever
  /// their streams hold, as with Gather's null gradients.
  static GradientSet FromStreams(const Store& store,
                                 std::vector<std::vector<SparseGrad>> streams,
                                 std::vector<std::pair<uint64_t, uint64_t>> frozen = {});
  /// Compresses a dense gradient set per (device, subgroup) with the reference Top-K
  /// compressor at `ratio` (a non-finite value is always kept). Tensors without a gradient
  /// stay without one.
  GradientSet TopK(const Store& store, double ratio) const;

  DType dtype() const { return dtype_; }
  bool sparse() const { return sparse_; }
  /// Dense gradient of the whole model (empty when sparse).
  const AlignedBuffer& dense() const { return dense_; }
  const SparseGrad& sparse_for(unsigned device, uint32_t subgroup) const {
    return streams_.at(device).at(subgroup);
  }
  /// False if any value is NaN or infinite; *where names the first one.
  bool AllFinite(std::string* where) const;
  /// Flattened ranges [begin, end) of the tensors without a gradient this step, ascending.
  const std::vector<std::pair<uint64_t, uint64_t>>& frozen() const { return frozen_; }
  /// Bytes that cross the shared link for this gradient (dense array or all streams).
  uint64_t TransferBytes() const;

 private:
  DType dtype_ = DType::kFp32;
  bool sparse_ = false;
  uint64_t params_ = 0;
  AlignedBuffer dense_;
  std::vector<std::vector<SparseGrad>> streams_;
  std::vector<std::pair<uint64_t, uint64_t>> frozen_;
  int known_finite_ = -1;  // -1: not known; 0/1: what the gather pass saw
  bool planned_ = false;
};

}  // namespace csdkit

#endif  // CSDKIT_RUNTIME_GRADIENTS_H_
