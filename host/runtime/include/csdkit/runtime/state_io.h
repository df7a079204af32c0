// A model store's state in and out, tensor by tensor: what checkpoints in a trainer's own format
// (PyTorch's optimizer state_dict, the C API's state export/import) are made of.
//
// Export reads one state variable of the committed slot, subgroup by subgroup, checks each
// subgroup's CRC against the manifest and scatters its elements into one fp32 array per tensor.
// Import writes a whole new state — theta, m and/or v — into the other slot and commits it
// with the step number it brings (the store's commit protocol: a crash leaves the old state or
// the new one, never a mix). Both take the store's variable names: "theta", "m", "v" (Adam's
// exp_avg and exp_avg_sq, SGD's momentum buffer in m, Adagrad's sum in v, Lion's exp_avg in m).
#ifndef CSDKIT_RUNTIME_STATE_IO_H_
#define CSDKIT_RUNTIME_STATE_IO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "csdkit/aio/aio_config.h"
#include "csdkit/hls/mode.h"
#include "csdkit/platform/optimizer.h"
#include "csdkit/runtime/store.h"

namespace csdkit {

/// The index of `var` in store.vars(); std::invalid_argument naming the optimizer and the
/// variables it keeps when it keeps no such variable.
unsigned StateVariableIndex(const Store& store, const std::string& var);

/// Reads variable `var` of the committed slot of a model's store into `dst`: one pointer per
/// tensor of the layout, each receiving the tensor's numel binary32 values (nullptr: skipped).
/// StoreError naming the file and subgroup on a CRC mismatch (nothing is returned as valid:
/// `dst` may be partly written); std::invalid_argument for a store without a layout, a wrong
/// pointer count or an unknown variable.
void ExportState(const Store& store, const std::string& var, const std::vector<float*>& dst,
                 const aio::AioConfig& aio = aio::AioConfig());

/// The number of blocks of 256 a tensor of `numel` elements occupies in a q8 store (its codes
/// are 256 times that many bytes: the last block's padding codes included).
uint64_t Q8TensorBlocks(uint64_t numel);

/// Reads moment `var` ("m" or "v") of a q8 store's committed slot as stored: per tensor of the
/// layout, `codes[t]` receives the codes of the tensor's Q8TensorBlocks(numel) whole blocks
/// (256 bytes each: the tensor's elements, then the padding up to its next block) and
/// `absmax[t]` their binary32 absmax values (nullptr: skipped). Each subgroup's CRC is
/// checked as by ExportState. std::invalid_argument for an fp32 store, a variable that is not
/// a moment of the optimizer, or a wrong pointer count.
void ExportStateQ8(const Store& store, const std::string& var, const std::vector<uint8_t*>& codes,
                   const std::vector<float*>& absmax,
                   const aio::AioConfig& aio = aio::AioConfig());

/// A new state for a model's store; one entry per tensor of the layout in each list.
struct StateImport {
  int64_t step = 0;  ///< the step the store is at after the import (>= 0)
  /// theta: the fp32 master weights, as `theta_dtype` values (fp16/bf16 widened exactly);
  /// nullptr = keep the store's committed weights of that tensor.
  DType theta_dtype = DType::kFp32;
  std::vector<const void*> theta;
  /// m and v: binary32 values; an empty list or a nullptr entry = the variable's initial value
  /// (0; Adagrad's sum: its group's initial_accumulator_value). A list for a variable the
  /// optimizer does not keep is refused.
  std::vector<const float*> m, v;
  /// q8 stores only: a moment as stored, per tensor (ExportStateQ8's arrays): codes of the
  /// tensor's whole blocks and their absmax values, written as given instead of quantizing
  /// m / v. A tensor needs both or neither (nullptr entries: m / v as above). Where m / v is
  /// given too it must be these codes dequantized, bit for bit. Each absmax must be +0 or a
  /// normal, finite, positive binary32 (what quantizing a block can give).
  std::vector<const uint8_t*> m_codes, v_codes;
  std::vector<const float*> m_absmax, v_absmax;
  /// The hyper-parameters recorded with the imported step, per group (empty = unchanged).
  std::vector<OptimizerConfig> group_hyper;
  /// Each tensor's step count (torch.optim's per-parameter `step`; Store::tensor_steps), in
  /// [0, step]; empty = every tensor at `step`.
  std::vector<int64_t> tensor_steps;
};

/// Writes `in` into the slot that is not committed and commits it as step in.step. Checks every
/// argument before the first write (std::invalid_argument, nothing written); a non-finite value
/// in theta, m or v is refused naming the tensor and element, and so is a negative v (Adam's
/// second moment and Adagrad's sum are sums of squares). Reads the committed theta (CRC-checked)
/// where tensors keep theirs. The store must be open for writing.
void ImportState(Store& store, const StateImport& in,
                 const aio::AioConfig& aio = aio::AioConfig());

}  // namespace csdkit

#endif  // CSDKIT_RUNTIME_STATE_IO_H_
