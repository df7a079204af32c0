#include "tensor_arg.h"

#include <pybind11/numpy.h>

#include <stdexcept>

namespace csdkit::py_binding {

namespace {

[[noreturn]] void Refuse(const std::string& what, const std::string& expected,
                         const std::string& found, const std::string& todo = "") {
  throw std::invalid_argument(what + ": expected " + expected + ", found " + found +
                              (todo.empty() ? "" : "; " + todo));
}

std::string Str(py::handle h) { return py::str(h).cast<std::string>(); }

bool IsTorchTensor(py::handle obj) {
  // Duck-typed so that the module needs no torch headers: torch.Tensor (and Parameter) are the
  // objects of module torch with data_ptr(); numpy arrays are recognised by type.
  const std::string mod = Str(py::type::handle_of(obj).attr("__module__"));
  return (mod == "torch" || mod.rfind("torch.", 0) == 0) && py::hasattr(obj, "data_ptr");
}

}  // namespace

std::string DTypeUserName(DType t) {
  switch (t) {
    case DType::kFp32:
      return "float32";
    case DType::kFp16:
      return "float16";
    case DType::kBf16:
      return "bfloat16";
  }
  return "?";
}

namespace {

// A tensor's address, element count and dtype name ("float32", "float16", "bfloat16", "uint8",
// or torch's / numpy's own name of anything else), after the checks every handed-over tensor
// needs: a torch.Tensor or numpy.ndarray, dense, on the CPU, contiguous, writable if asked.
struct Inspected {
  void* data = nullptr;
  uint64_t numel = 0;
  std::string dtype;
};

Inspected Inspect(py::handle obj, const std::string& what, bool writable) {
  Inspected t;
  if (obj.is_none()) Refuse(what, "a tensor", "None");
  if (IsTorchTensor(obj)) {
    const std::string layout = Str(obj.attr("layout"));
    if (layout != "torch.strided") {
      Refuse(what, "a dense (torch.strided) tensor", "layout " + layout,
             "convert it with .to_dense()");
    }
    const std::string device = Str(obj.attr("device").attr("type"));
    if (device != "cpu") {
      Refuse(what, "a CPU tensor (the kit reads and writes host memory)",
             "a tensor on " + Str(obj.attr("device")));
    }
    const std::string dt = Str(obj.attr("dtype"));
    t.dtype = dt.rfind("torch.", 0) == 0 ? dt.substr(6) : dt;
    if (!obj.attr("is_contiguous")().cast<bool>()) {
      Refuse(what, "a contiguous tensor", "strides " + Str(obj.attr("stride")()),
             "call .contiguous() first");
    }
    t.numel = obj.attr("numel")().cast<uint64_t>();
    t.data = reinterpret_cast<void*>(obj.attr("data_ptr")().cast<uintptr_t>());
  } else if (py::isinstance<py::array>(obj)) {
    py::array a = py::reinterpret_borrow<py::array>(obj);
    const py::dtype adt = a.dtype();
    t.dtype = adt.is(py::dtype::of<float>())      ? "float32"
              : adt.kind() == 'f' && adt.itemsize() == 2 ? "float16"
              : adt.is(py::dtype::of<uint8_t>())  ? "uint8"
                                                  : Str(adt);
    if (!(a.flags() & py::array::c_style)) {
      Refuse(what, "a C-contiguous array", "strides " + Str(obj.attr("strides")),
             "use numpy.ascontiguousarray first");
    }
    if (writable && !a.writeable()) Refuse(what, "a writable array", "a read-only one");
    t.numel = static_cast<uint64_t>(a.size());
    t.data = const_cast<void*>(a.data());
  } else {
    Refuse(what, "a torch.Tensor or numpy.ndarray",
           "an object of type " + Str(py::type::handle_of(obj).attr("__name__")));
  }
  return t;
}

void CheckSize(const std::string& what, const Inspected& t, std::optional<uint64_t> numel) {
  if (numel && t.numel != *numel) {
    Refuse(what, std::to_string(*numel) + " elements", std::to_string(t.numel));
  }
  if (t.data == nullptr && t.numel > 0) Refuse(what, "a tensor with storage", "a null address");
}

}  // namespace

TensorArg ReadTensor(py::handle obj, const std::string& what, std::optional<DType> dtype,
                     std::optional<uint64_t> numel, bool writable) {
  const Inspected i = Inspect(obj, what, writable);
  TensorArg t;
  if (i.dtype == "float32") {
    t.dtype = DType::kFp32;
  } else if (i.dtype == "float16") {
    t.dtype = DType::kFp16;
  } else if (i.dtype == "bfloat16") {
    t.dtype = DType::kBf16;
  } else {
    const bool np = py::isinstance<py::array>(obj);
    const std::string pre = np ? "" : "torch.";
    Refuse(what,
           dtype ? "dtype " + pre + DTypeUserName(*dtype)
                 : np ? std::string("dtype float32 or float16 (numpy has no bfloat16)")
                      : std::string("dtype torch.float32, torch.float16 or torch.bfloat16"),
           "dtype " + pre + i.dtype);
  }
  if (dtype && t.dtype != *dtype) {
    Refuse(what, "dtype " + DTypeUserName(*dtype), "dtype " + DTypeUserName(t.dtype));
  }
  CheckSize(what, i, numel);
  t.data = i.data;
  t.numel = i.numel;
  return t;
}

uint8_t* ReadBytes(py::handle obj, const std::string& what, uint64_t numel, bool writable) {
  const Inspected i = Inspect(obj, what, writable);
  if (i.dtype != "uint8") {
    const std::string pre = py::isinstance<py::array>(obj) ? "" : "torch.";
    Refuse(what, "dtype " + pre + "uint8", "dtype " + pre + i.dtype);
  }
  CheckSize(what, i, numel);
  return static_cast<uint8_t*>(i.data);
}

}  // namespace csdkit::py_binding
