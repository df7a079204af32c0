// Tensors handed over from Python by data pointer (zero-copy): a torch.Tensor or a numpy array,
// checked before its address is used — CPU, dense, contiguous, the expected dtype and element
// count, writable when the kit writes into it. Every refusal raises ValueError naming the
// tensor, what was expected and what was found.
#ifndef CSDKIT_PYTHON_TENSOR_ARG_H_
#define CSDKIT_PYTHON_TENSOR_ARG_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>

#include "csdkit/platform/optimizer.h"

namespace csdkit::py_binding {

namespace py = pybind11;

/// What the kit may read or write at a tensor's address.
struct TensorArg {
  void* data = nullptr;
  DType dtype = DType::kFp32;
  uint64_t numel = 0;
};

/// Checks `obj` (torch.Tensor or numpy.ndarray; `what` names it in messages, e.g. "grad of
/// 'fc1.weight'") and returns its address. `dtype`: the required dtype (empty: fp32, fp16 or
/// bf16 accepted); `numel`: the required element count (empty: any). Throws
/// std::invalid_argument (ValueError in Python).
TensorArg ReadTensor(py::handle obj, const std::string& what, std::optional<DType> dtype,
                     std::optional<uint64_t> numel, bool writable);

/// As ReadTensor for a uint8 tensor or array of exactly `numel` elements (a q8 moment's codes).
uint8_t* ReadBytes(py::handle obj, const std::string& what, uint64_t numel, bool writable);

/// "fp32" -> "float32"-style names as the user wrote them (torch.float32, float16, ...).
std::string DTypeUserName(DType t);

}  // namespace csdkit::py_binding

#endif  // CSDKIT_PYTHON_TENSOR_ARG_H_
