// csdkit._csdkit: the Python binding of a trainer session (session.h) — create or open the
// store of a model, run optimizer steps with per-tensor gradients handed over by address, copy
// the new weights into the trainer's tensors — and of the reshard of a set of rank stores
// (csdkit/runtime/reshard.h). Tensors are torch tensors or numpy arrays, read
// and written in place (tensor_arg.h). Long calls run with the GIL released. C++ exceptions
// keep their message: StoreError -> csdkit.StoreError (a RuntimeError), DivergenceError ->
// csdkit.DivergenceError (a RuntimeError), std::invalid_argument
// -> ValueError, anything else -> RuntimeError (pybind11's translation).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/sparse_codec.h"
#include "csdkit/runtime/layout.h"
#include "csdkit/runtime/reshard.h"
#include "csdkit/runtime/state_io.h"
#include "csdkit/runtime/store.h"
#include "session.h"
#include "tensor_arg.h"

namespace py = pybind11;

namespace csdkit::py_binding {
namespace {

py::object JsonToPy(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

ParamLayout LayoutFromPy(const std::vector<std::tuple<std::string, uint64_t, unsigned>>& l) {
  std::vector<TensorSpec> t;
  t.reserve(l.size());
  for (const auto& [name, numel, group] : l) t.push_back({name, numel, group});
  return ParamLayout(std::move(t));
}

py::dict HyperToPy(const OptimizerConfig& h) {
  py::dict d;
  d["optimizer"] = OptimizerName(h.opt);
  d["lr"] = h.lr;
  d["beta1"] = h.beta1;
  d["beta2"] = h.beta2;
  d["eps"] = h.eps;
  d["weight_decay"] = h.weight_decay;
  d["momentum"] = h.momentum;
  d["dampening"] = h.dampening;
  d["nesterov"] = h.nesterov;
  d["lr_decay"] = h.lr_decay;
  d["initial_accumulator_value"] = h.initial_accumulator_value;
  return d;
}

// `base` with the entries of `d` (OptimizerConfig's names; "optimizer" only if it names base's).
OptimizerConfig HyperFromPy(const py::dict& d, OptimizerConfig base, const std::string& what) {
  for (const auto& [k, v] : d) {
    const std::string key = py::str(k).cast<std::string>();
    auto num = [&](double* field) {
      try {
        *field = v.cast<double>();
      } catch (const py::cast_error&) {
        throw std::invalid_argument(what + ": '" + key + "': expected a number, found " +
                                    py::repr(v).cast<std::string>());
      }
    };
    if (key == "optimizer") {
      const std::string o = py::str(v).cast<std::string>();
      if (ParseOptimizer(o) != base.opt) {
        throw std::invalid_argument(what + ": expected optimizer " +
                                    std::string(OptimizerName(base.opt)) + ", found '" + o + "'");
      }
    } else if (key == "lr") {
      num(&base.lr);
    } else if (key == "beta1") {
      num(&base.beta1);
    } else if (key == "beta2") {
      num(&base.beta2);
    } else if (key == "eps") {
      num(&base.eps);
    } else if (key == "weight_decay") {
      num(&base.weight_decay);
    } else if (key == "momentum") {
      num(&base.momentum);
    } else if (key == "dampening") {
      num(&base.dampening);
    } else if (key == "nesterov") {
      base.nesterov = py::reinterpret_borrow<py::object>(v).cast<bool>();
    } else if (key == "lr_decay") {
      num(&base.lr_decay);
    } else if (key == "initial_accumulator_value") {
      num(&base.initial_accumulator_value);
    } else {
      throw std::invalid_argument(
          what + ": unknown hyper-parameter '" + key +
          "'; expected lr, beta1, beta2, eps, "
          "weight_decay, momentum, dampening, nesterov, lr_decay, initial_accumulator_value");
    }
  }
  try {
    ValidateConfig(base);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(what + ": " + e.what());
  }
  return base;
}

// One dict per param group of the store, each on top of what the group last used.
std::vector<OptimizerConfig> GroupHyperFromPy(const Store& st, const std::vector<py::dict>& d) {
  if (d.size() != st.group_hyper().size()) {
    throw std::invalid_argument("group_hyper: expected one dict per param group (" +
                                std::to_string(st.group_hyper().size()) + "), found " +
                                std::to_string(d.size()));
  }
  std::vector<OptimizerConfig> h;
  for (size_t k = 0; k < d.size(); ++k) {
    h.push_back(HyperFromPy(d[k], st.group_hyper()[k], "group_hyper[" + std::to_string(k) + "]"));
  }
  return h;
}

DeviceSpec SpecFromPy(const std::string& backend, uint64_t device_mem, bool link_model) {
  DeviceSpec s;
  s.backend = ParseBackend(backend);
  s.device_mem = device_mem;
  s.link_model = link_model;
  return s;
}

std::string TensorName(const Store& s, size_t t) {
  return "'" + s.layout()->tensors().at(t).name + "'";
}

// The bytes of an integer array handed over from Python (a stream's block table or offsets):
// a torch tensor of dtype `torch_dtype` (torch 1.x has no unsigned 16/32-bit types: the bits
// are taken as the unsigned values) or a numpy array of integers of `bytes` bytes, CPU,
// contiguous. Copied into a buffer the devices can read; `count` elements when given.
AlignedBuffer ReadInts(py::handle obj, const std::string& what, unsigned bytes,
                       const char* torch_dtype, std::optional<uint64_t> count,
                       uint64_t* found_count) {
  auto refuse = [&](const std::string& expected, const std::string& found) {
    throw std::invalid_argument(what + ": expected " + expected + ", found " + found);
  };
  const std::string np_kinds = bytes == 4 ? "uint32/int32" : "uint16/int16";
  const void* data = nullptr;
  uint64_t n = 0;
  const std::string mod = py::str(py::type::handle_of(obj).attr("__module__")).cast<std::string>();
  if (obj.is_none()) {
    refuse("an integer tensor", "None");
  } else if ((mod == "torch" || mod.rfind("torch.", 0) == 0) && py::hasattr(obj, "data_ptr")) {
    const std::string dt = py::str(obj.attr("dtype")).cast<std::string>();
    if (dt != torch_dtype) refuse(std::string("dtype ") + torch_dtype, "dtype " + dt);
    const std::string dev = py::str(obj.attr("device").attr("type")).cast<std::string>();
    if (dev != "cpu") refuse("a CPU tensor", "a tensor on " + py::str(obj.attr("device")).cast<std::string>());
    if (py::str(obj.attr("layout")).cast<std::string>() != "torch.strided" ||
        !obj.attr("is_contiguous")().cast<bool>()) {
      refuse("a dense contiguous tensor", "strides " + py::str(obj.attr("stride")()).cast<std::string>());
    }
    n = obj.attr("numel")().cast<uint64_t>();
    data = reinterpret_cast<const void*>(obj.attr("data_ptr")().cast<uintptr_t>());
  } else if (py::isinstance<py::array>(obj)) {
    py::array a = py::reinterpret_borrow<py::array>(obj);
    const py::dtype adt = a.dtype();
    if (!((adt.kind() == 'u' || adt.kind() == 'i') && adt.itemsize() == static_cast<py::ssize_t>(bytes))) {
      refuse("dtype " + np_kinds, "dtype " + py::str(static_cast<py::handle>(adt)).cast<std::string>());
    }
    if (!(a.flags() & py::array::c_style)) refuse("a C-contiguous array", "another layout");
    n = static_cast<uint64_t>(a.size());
    data = a.data();
  } else {
    refuse("a torch.Tensor or numpy.ndarray",
           "an object of type " +
               py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>());
  }
  if (count && n != *count) {
    refuse(std::to_string(*count) + " elements", std::to_string(n));
  }
  *found_count = n;
  AlignedBuffer b(n * bytes);
  if (n > 0) std::memcpy(b.data(), data, n * bytes);
  return b;
}

// The Python object: a Session plus nothing else (the store knows its layout).
class PySession {
 public:
  explicit PySession(std::unique_ptr<Session> s) : s_(std::move(s)) {}

  static PySession Create(const std::string& dir,
                          const std::vector<std::tuple<std::string, uint64_t, unsigned>>& layout,
                          const std::vector<py::dict>& groups, const py::list& weights,
                          const std::string& optimizer, unsigned devices,
                          const std::string& backend, std::optional<std::string> grad_dtype,
                          std::optional<std::string> out_dtype, double loss_scale,
                          uint32_t subgroup_elems, uint64_t device_mem, bool link_model, bool ftz,
                          uint64_t seed, const std::string& state) {
    const ParamLayout l = LayoutFromPy(layout);
    const size_t nt = l.tensors().size();
    if (weights.size() != nt) {
      throw std::invalid_argument("weights: expected one tensor per layout entry (" +
                                  std::to_string(nt) + "), found " +
                                  std::to_string(weights.size()));
    }
    if (groups.size() != l.groups()) {
      throw std::invalid_argument("groups: expected hyper-parameters for the layout's " +
                                  std::to_string(l.groups()) + " groups, found " +
                                  std::to_string(groups.size()));
    }
    StoreConfig cfg;
    cfg.devices = devices;
    cfg.hyper = OptimizerConfig::Defaults(ParseOptimizer(optimizer));
    std::vector<OptimizerConfig> hyper;
    for (size_t g = 0; g < groups.size(); ++g) {
      hyper.push_back(HyperFromPy(groups[g], cfg.hyper, "groups[" + std::to_string(g) + "]"));
    }
    cfg.hyper = hyper.at(0);
    // The weights: one dtype for all, each the layout's size.
    std::vector<TensorArg> w;
    for (size_t t = 0; t < nt; ++t) {
      const std::string what = "weights[" + std::to_string(t) + "] '" + l.tensors()[t].name + "'";
      w.push_back(ReadTensor(weights[t], what, t ? std::optional<DType>(w[0].dtype) : std::nullopt,
                             l.tensors()[t].numel, false));
    }
    const DType wd = w.at(0).dtype;
    cfg.grad = grad_dtype ? ParseGradDType(*grad_dtype) : wd;
    cfg.out = out_dtype ? ParseOutDType(*out_dtype) : wd;  // fp32 weights: no copy
    cfg.loss_scale = loss_scale;
    cfg.subgroup_elems = subgroup_elems;
    cfg.ftz = ftz;
    cfg.seed = seed;
    cfg.state = ParseStateFmt(state);
    const DeviceSpec spec = SpecFromPy(backend, device_mem, link_model);
    py::gil_scoped_release nogil;
    // The store takes the tensors back to back: packed once, at creation.
    const unsigned eb = DTypeBytes(wd);
    uint64_t total = 0;
    for (const TensorArg& a : w) total += a.numel;
    AlignedBuffer packed(total * eb);
    uint64_t at = 0;
    for (const TensorArg& a : w) {
      std::memcpy(packed.data() + at * eb, a.data, a.numel * eb);
      at += a.numel;
    }
    return PySession(Session::Create(dir, l, cfg, hyper, packed.data(), wd, spec));
  }

  static PySession Open(const std::string& dir,
                        const std::vector<std::tuple<std::string, uint64_t, unsigned>>& layout,
                        const std::string& backend, uint64_t device_mem, bool link_model) {
    const ParamLayout l = LayoutFromPy(layout);
    const DeviceSpec spec = SpecFromPy(backend, device_mem, link_model);
    py::gil_scoped_release nogil;
    return PySession(Session::Open(dir, l, spec));
  }

  StepOptions Options(const std::optional<std::vector<py::dict>>& group_hyper,
                      std::optional<double> loss_scale, bool found_inf, double clip_coef,
                      const std::string& mode, bool allow_nonfinite) const {
    StepOptions o;
    o.allow_nonfinite = allow_nonfinite;
    o.mode = ParseUpdateMode(mode);
    o.loss_scale = loss_scale;
    o.found_inf = found_inf;
    o.clip_coef = clip_coef;
    if (!(clip_coef > 0 && clip_coef <= 1)) {
      throw std::invalid_argument("clip_coef: expected a value in (0, 1], found " +
                                  std::to_string(clip_coef));
    }
    if (loss_scale && !(*loss_scale > 0)) {
      throw std::invalid_argument("loss_scale: expected a positive value, found " +
                                  std::to_string(*loss_scale));
    }
    if (group_hyper) o.group_hyper = GroupHyperFromPy(s_->store(), *group_hyper);
    return o;
  }

  // The destinations of the weights out (the caller sets o.fp32_weights_out for a store
  // without a low-precision copy).
  std::vector<void*> WeightsOut(const py::list& weights_out) const {
    const Store& st = s_->store();
    const ParamLayout& l = *st.layout();
    const size_t nt = l.tensors().size();
    if (weights_out.size() != nt) {
      throw std::invalid_argument("weights_out: expected one tensor per layout entry (" +
                                  std::to_string(nt) + "), found " +
                                  std::to_string(weights_out.size()));
    }
    const DType od = st.config().out;  // kFp32 = no copy: the fp32 weights come back
    std::vector<void*> out;
    for (size_t t = 0; t < nt; ++t) {
      if (weights_out[t].is_none()) {  // not written (the weights hook's caller copies it)
        out.push_back(nullptr);
        continue;
      }
      out.push_back(ReadTensor(weights_out[t],
                               "weights_out[" + std::to_string(t) + "] (" + TensorName(st, t) + ")",
                               od, l.tensors()[t].numel, true)
                        .data);
    }
    return out;
  }

  // WeightsOut of an optional list (empty without one), and the option a store without a
  // low-precision copy needs to send its fp32 weights back.
  std::vector<void*> WeightsOutOf(const std::optional<py::list>& weights_out,
                                  StepOptions* o) const {
    if (!weights_out) return {};
    o->fp32_weights_out = s_->store().config().out == DType::kFp32;
    return WeightsOut(*weights_out);
  }

  py::dict Step(const py::list& grads, std::optional<std::vector<py::dict>> group_hyper,
                std::optional<double> loss_scale, bool found_inf, double clip_coef, double max_norm,
                bool return_norm, std::optional<py::list> weights_out, const std::string& mode,
                bool allow_nonfinite) {
    const Store& st = s_->store();
    const ParamLayout& l = *st.layout();
    const size_t nt = l.tensors().size();
    if (grads.size() != nt) {
      throw std::invalid_argument("grads: expected one entry per tensor (" + std::to_string(nt) +
                                  "; None for a tensor without gradient), found " +
                                  std::to_string(grads.size()));
    }
    std::vector<const void*> g(nt, nullptr);
    for (size_t t = 0; t < nt; ++t) {
      if (grads[t].is_none()) continue;
      g[t] = ReadTensor(grads[t],
                        "grads[" + std::to_string(t) + "] (grad of " + TensorName(st, t) + ")",
                        st.config().grad, l.tensors()[t].numel, false)
                 .data;
    }
    StepOptions o = Options(group_hyper, loss_scale, found_inf, clip_coef, mode, allow_nonfinite);
    const std::vector<void*> out = WeightsOutOf(weights_out, &o);
    double norm = 0;
    StepReport rep;
    {
      py::gil_scoped_release nogil;
      rep = s_->Step(g, o, max_norm, return_norm ? &norm : nullptr, weights_out ? &out : nullptr);
    }
    py::dict d = JsonToPy(rep.ToJson());
    if (return_norm) d["grad_norm"] = norm;
    AddHostBytes(d);
    return d;
  }

  // The gradient arena (Session::QueueFill / Fill / StepArena).
  const void* ArenaSource(size_t t, py::handle grad) const {
    const Store& st = s_->store();
    const ParamLayout& l = *st.layout();
    if (t >= l.tensors().size()) {
      throw std::invalid_argument("t: expected a layout entry below " +
                                  std::to_string(l.tensors().size()) + ", found " +
                                  std::to_string(t));
    }
    return ReadTensor(grad, "grads[" + std::to_string(t) + "] (grad of " + TensorName(st, t) + ")",
                      st.config().grad, l.tensors()[t].numel, false)
        .data;
  }

  void QueueFill(size_t t, py::handle grad) { s_->QueueFill(t, ArenaSource(t, grad)); }

  // A numpy array of `bytes` bytes at `data` that keeps this session alive.
  py::array Bytes(const uint8_t* data, uint64_t bytes) {
    return py::array(py::dtype("uint8"), {static_cast<py::ssize_t>(bytes)},
                     {static_cast<py::ssize_t>(1)}, data, py::cast(this));
  }

  py::array GradArenaArray() {
    void* a = nullptr;
    {
      py::gil_scoped_release nogil;  // (waits for a running speculation's lock)
      a = s_->GradArena();
    }
    return Bytes(static_cast<const uint8_t*>(a), s_->GradArenaBytes());
  }

  py::object WeightsBufferArray() {
    const uint8_t* w = s_->WeightsBuffer();
    if (w == nullptr) return py::none();
    const StoreConfig& c = s_->store().config();
    return Bytes(w, c.params * (c.out != DType::kFp32 ? 2 : 4));
  }

  void BeginFill(size_t t) {
    py::gil_scoped_release nogil;  // may wait for a speculation to stop
    s_->BeginFill(t);
  }

  void EndFill(size_t t, std::optional<double> sumsq) {
    std::optional<TensorGradient> r;
    if (sumsq) {
      r = TensorGradient{};
      r->finite = std::isfinite(*sumsq);
      r->sumsq = *sumsq;
    }
    s_->EndFill(t, r);
  }

  // BeginFill / EndFill of several entries in one call (a bucket).
  void BeginFills(const std::vector<size_t>& ts) {
    py::gil_scoped_release nogil;
    for (const size_t t : ts) s_->BeginFill(t);
  }

  void EndFills(const std::vector<size_t>& ts, const std::vector<double>& sumsqs) {
    if (sumsqs.size() != ts.size()) {
      throw std::invalid_argument("end_fills: expected one sum of squares per entry (" +
                                  std::to_string(ts.size()) + "), found " +
                                  std::to_string(sumsqs.size()));
    }
    for (size_t i = 0; i < ts.size(); ++i) EndFill(ts[i], sumsqs[i]);
  }

  void SetWeightsHook(py::object hook) {
    if (hook.is_none()) {
      s_->SetWeightsHook(nullptr);
      weights_hook_ = py::none();
      return;
    }
    if (!PyCallable_Check(hook.ptr())) {
      throw std::invalid_argument("weights hook: expected a callable (begin, n) or None, found "
                                  "an object of type " +
                                  py::str(py::type::handle_of(hook).attr("__name__"))
                                      .cast<std::string>());
    }
    weights_hook_ = hook;
    s_->SetWeightsHook([this](uint64_t begin, uint64_t n) {
      py::gil_scoped_acquire gil;
      try {
        weights_hook_(begin, n);
      } catch (py::error_already_set& e) {
        throw std::runtime_error("weights hook: " + std::string(e.what()));
      }
    });
  }

  // The step's host byte counts (Session::last_host_bytes) into a report.
  void AddHostBytes(py::dict& d) const {
    const Session::HostBytes& b = s_->last_host_bytes();
    py::dict h;
    h["gradients_copied"] = b.gradients_copied;
    h["gradients_received"] = b.gradients_received;
    h["weights_written"] = b.weights_written;
    h["weights_saved"] = b.weights_saved;
    d["host_bytes"] = h;
  }

  void Fill(size_t t, py::handle grad) {
    const void* src = ArenaSource(t, grad);
    py::gil_scoped_release nogil;
    s_->Fill(t, src);
  }

  py::list WaitFills() {
    std::vector<bool> v;
    {
      py::gil_scoped_release nogil;
      v = s_->WaitFills();
    }
    py::list l;
    for (const bool b : v) l.append(b);
    return l;
  }

  py::dict StepArena(const std::vector<bool>& has_grad,
                     std::optional<std::vector<py::dict>> group_hyper,
                     std::optional<double> loss_scale, bool found_inf, double clip_coef,
                     double max_norm, bool return_norm, std::optional<py::list> weights_out,
                     const std::string& mode, bool allow_nonfinite) {
    StepOptions o = Options(group_hyper, loss_scale, found_inf, clip_coef, mode, allow_nonfinite);
    const std::vector<void*> out = WeightsOutOf(weights_out, &o);
    double norm = 0;
    StepReport rep;
    {
      py::gil_scoped_release nogil;
      rep = s_->StepArena(has_grad, o, max_norm, return_norm ? &norm : nullptr,
                          weights_out ? &out : nullptr);
    }
    py::dict d = JsonToPy(rep.ToJson());
    if (return_norm) d["grad_norm"] = norm;
    if (!s_->last_speculation().empty()) d["speculation"] = s_->last_speculation();
    AddHostBytes(d);
    return d;
  }

  void StartSpeculative(const std::vector<bool>& has_grad,
                        std::optional<std::vector<py::dict>> group_hyper,
                        std::optional<double> loss_scale, double clip_coef,
                        std::optional<py::list> weights_out, const std::string& mode,
                        bool allow_nonfinite) {
    StepOptions o = Options(group_hyper, loss_scale, false, clip_coef, mode, allow_nonfinite);
    const std::vector<void*> out = WeightsOutOf(weights_out, &o);
    py::gil_scoped_release nogil;
    s_->StartSpeculative(has_grad, o, weights_out ? &out : nullptr);
  }

  py::dict StepSparse(const py::list& streams, std::optional<std::vector<py::dict>> group_hyper,
                      std::optional<double> loss_scale, bool found_inf, double clip_coef,
                      std::optional<py::list> weights_out, const std::string& mode,
                      std::optional<std::vector<int64_t>> no_grad, bool allow_nonfinite) {
    const Store& st = s_->store();
    // Layout entries without a gradient: their flattened element ranges, in layout order.
    std::vector<std::pair<uint64_t, uint64_t>> frozen;
    if (no_grad) {
      const ParamLayout& l = *st.layout();
      const int64_t nt = static_cast<int64_t>(l.tensors().size());
      int64_t prev = -1;
      for (const int64_t t : *no_grad) {
        if (t <= prev || t >= nt) {
          throw std::invalid_argument("no_grad: expected ascending layout entry indices below " +
                                      std::to_string(nt) + ", found " + std::to_string(t) +
                                      (prev >= 0 ? " after " + std::to_string(prev) : ""));
        }
        prev = t;
        frozen.push_back({l.offset(static_cast<size_t>(t)),
                          l.offset(static_cast<size_t>(t)) + l.tensors()[t].numel});
      }
    }
    const std::vector<Subgroup> all = st.AllSubgroups();
    if (streams.size() != all.size()) {
      throw std::invalid_argument("streams: expected one (blk, idx, val) per subgroup (" +
                                  std::to_string(all.size()) +
                                  ", in the order of `subgroups`), found " +
                                  std::to_string(streams.size()));
    }
    const DType dt = st.config().grad;
    std::vector<std::vector<SparseGrad>> sg(st.config().devices);
    for (size_t k = 0; k < all.size(); ++k) {
      const std::string what = "streams[" + std::to_string(k) + "] (device " +
                               std::to_string(all[k].device) + " subgroup " +
                               std::to_string(all[k].index) + ")";
      const py::handle item = streams[k];
      if (!py::isinstance<py::tuple>(item) && !py::isinstance<py::list>(item)) {
        throw std::invalid_argument(what + ": expected a tuple (blk, idx, val), found an object "
                                    "of type " +
                                    py::str(py::type::handle_of(item).attr("__name__"))
                                        .cast<std::string>());
      }
      const py::sequence t = py::reinterpret_borrow<py::sequence>(item);
      if (t.size() != 3) {
        throw std::invalid_argument(what + ": expected a tuple (blk, idx, val), found " +
                                    std::to_string(t.size()) + " items");
      }
      SparseGrad g;
      g.n = all[k].n;
      g.dtype = dt;
      uint64_t nb = 0, nnz = 0;
      g.blk = ReadInts(t[0], what + " blk", 4, "torch.int32",
                       (uint64_t{all[k].n} + 65535) / 65536 + 1  // NumBlocks + 1
                      , &nb);
      g.idx = ReadInts(t[1], what + " idx", 2, "torch.int16", std::nullopt, &nnz);
      if (nnz > all[k].n) {
        throw std::invalid_argument(what + " idx: expected at most n = " +
                                    std::to_string(all[k].n) + " entries, found " +
                                    std::to_string(nnz));
      }
      g.nnz = static_cast<uint32_t>(nnz);
      const TensorArg v = ReadTensor(t[2], what + " val", dt, nnz, false);
      g.val = AlignedBuffer(nnz * DTypeBytes(dt));
      if (nnz > 0) std::memcpy(g.val.data(), v.data, nnz * DTypeBytes(dt));
      sg[all[k].device].push_back(std::move(g));
    }
    StepOptions o = Options(group_hyper, loss_scale, found_inf, clip_coef, mode, allow_nonfinite);
    const std::vector<void*> out = WeightsOutOf(weights_out, &o);
    StepReport rep;
    {
      py::gil_scoped_release nogil;
      rep = s_->StepSparse(std::move(sg), std::move(frozen), o, weights_out ? &out : nullptr);
    }
    py::dict d = JsonToPy(rep.ToJson());
    AddHostBytes(d);
    return d;
  }

  py::list subgroups() const {
    const Store& st = s_->store();
    py::list l;
    for (const Subgroup& g : st.AllSubgroups()) {
      py::dict d;
      d["device"] = g.device;
      d["index"] = g.index;
      d["begin"] = st.shards().at(g.device).begin + g.begin;
      d["n"] = g.n;
      d["group"] = g.group;
      l.append(d);
    }
    return l;
  }

  py::list tensor_offsets() const {
    const ParamLayout& l = *s_->store().layout();
    py::list o;
    for (size_t t = 0; t < l.tensors().size(); ++t) o.append(l.offset(t));
    return o;
  }

  void ExportState(const std::string& var, const py::list& dst) {
    const Store& st = s_->store();
    const ParamLayout& l = *st.layout();
    const size_t nt = l.tensors().size();
    if (dst.size() != nt) {
      throw std::invalid_argument("dst: expected one float32 tensor per layout entry (" +
                                  std::to_string(nt) + "), found " + std::to_string(dst.size()));
    }
    StateVariableIndex(st, var);  // an unknown variable before any tensor is looked at
    std::vector<float*> p(nt, nullptr);
    for (size_t t = 0; t < nt; ++t) {
      if (dst[t].is_none()) continue;
      p[t] = static_cast<float*>(ReadTensor(dst[t],
                                            "dst[" + std::to_string(t) + "] (" +
                                                TensorName(st, t) + ")",
                                            DType::kFp32, l.tensors()[t].numel, true)
                                     .data);
    }
    py::gil_scoped_release nogil;
    s_->Export(var, p);
  }

  void ExportStateQ8(const std::string& var, const py::list& codes, const py::list& absmax) {
    const Store& st = s_->store();
    const ParamLayout& l = *st.layout();
    const size_t nt = l.tensors().size();
    if (codes.size() != nt || absmax.size() != nt) {
      throw std::invalid_argument("codes, absmax: expected one entry per layout entry (" +
                                  std::to_string(nt) + "), found " +
                                  std::to_string(codes.size()) + " and " +
                                  std::to_string(absmax.size()));
    }
    std::vector<uint8_t*> c(nt, nullptr);
    std::vector<float*> a(nt, nullptr);
    for (size_t t = 0; t < nt; ++t) {
      const uint64_t nb = Q8TensorBlocks(l.tensors()[t].numel);
      const std::string name = std::to_string(t) + "] (" + TensorName(st, t) + ")";
      if (!codes[t].is_none()) {
        c[t] = ReadBytes(codes[t], "codes[" + name, nb * hls::kQ8Block, true);
      }
      if (!absmax[t].is_none()) {
        a[t] = static_cast<float*>(
            ReadTensor(absmax[t], "absmax[" + name, DType::kFp32, nb, true).data);
      }
    }
    py::gil_scoped_release nogil;
    s_->ExportQ8(var, c, a);
  }

  void ImportState(int64_t step, const py::list& theta, std::optional<py::list> m,
                   std::optional<py::list> v, std::optional<std::vector<py::dict>> group_hyper,
                   std::optional<std::vector<int64_t>> tensor_steps,
                   std::optional<py::list> m_codes, std::optional<py::list> m_absmax,
                   std::optional<py::list> v_codes, std::optional<py::list> v_absmax) {
    const Store& st = s_->store();
    const ParamLayout& l = *st.layout();
    const size_t nt = l.tensors().size();
    StateImport in;
    in.step = step;
    auto count = [&](const py::list& x, const char* what) {
      if (x.size() != nt) {
        throw std::invalid_argument(std::string(what) + ": expected one entry per layout entry (" +
                                    std::to_string(nt) + "; None = " +
                                    (std::string(what) == "theta" ? "keep the store's"
                                                                  : "the initial value") +
                                    "), found " + std::to_string(x.size()));
      }
    };
    count(theta, "theta");
    std::optional<DType> td;
    for (size_t t = 0; t < nt; ++t) {
      if (theta[t].is_none()) {
        in.theta.push_back(nullptr);
        continue;
      }
      const TensorArg a = ReadTensor(theta[t],
                                     "theta[" + std::to_string(t) + "] (" + TensorName(st, t) + ")",
                                     td, l.tensors()[t].numel, false);
      td = a.dtype;
      in.theta.push_back(a.data);
    }
    in.theta_dtype = td.value_or(DType::kFp32);
    auto floats = [&](const std::optional<py::list>& x, const char* what,
                      std::vector<const float*>* out) {
      if (!x) return;
      count(*x, what);
      for (size_t t = 0; t < nt; ++t) {
        out->push_back((*x)[t].is_none()
                           ? nullptr
                           : static_cast<const float*>(
                                 ReadTensor((*x)[t],
                                            std::string(what) + "[" + std::to_string(t) + "] (" +
                                                TensorName(st, t) + ")",
                                            DType::kFp32, l.tensors()[t].numel, false)
                                     .data));
      }
    };
    floats(m, "m", &in.m);
    floats(v, "v", &in.v);
    // A moment as stored (q8 stores): per entry its blocks' codes and absmax values, or None.
    auto stored = [&](const std::optional<py::list>& c, const std::optional<py::list>& a,
                      const char* var, std::vector<const uint8_t*>* cs,
                      std::vector<const float*>* as) {
      if (!c && !a) return;
      const std::string cn = std::string(var) + "_codes", an = std::string(var) + "_absmax";
      if (!c || !a) {
        throw std::invalid_argument(cn + ", " + an + ": expected both or neither, found only " +
                                    (c ? cn : an));
      }
      count(*c, cn.c_str());
      count(*a, an.c_str());
      for (size_t t = 0; t < nt; ++t) {
        const uint64_t nb = Q8TensorBlocks(l.tensors()[t].numel);
        const std::string name = std::to_string(t) + "] (" + TensorName(st, t) + ")";
        cs->push_back((*c)[t].is_none()
                          ? nullptr
                          : ReadBytes((*c)[t], cn + "[" + name, nb * hls::kQ8Block, false));
        as->push_back((*a)[t].is_none()
                          ? nullptr
                          : static_cast<const float*>(
                                ReadTensor((*a)[t], an + "[" + name, DType::kFp32, nb, false)
                                    .data));
      }
    };
    stored(m_codes, m_absmax, "m", &in.m_codes, &in.m_absmax);
    stored(v_codes, v_absmax, "v", &in.v_codes, &in.v_absmax);
    if (group_hyper) in.group_hyper = GroupHyperFromPy(st, *group_hyper);
    if (tensor_steps) {
      if (tensor_steps->size() != nt) {
        throw std::invalid_argument("tensor_steps: expected one step count per layout entry (" +
                                    std::to_string(nt) + "), found " +
                                    std::to_string(tensor_steps->size()));
      }
      in.tensor_steps = *tensor_steps;
    }
    py::gil_scoped_release nogil;
    s_->Import(in);
  }

  std::string state() const { return StateFmtName(s_->store().state()); }

  py::list vars() const {
    py::list l;
    for (const std::string& v : s_->store().vars()) l.append(v);
    return l;
  }

  std::string last_speculation() const { return s_->last_speculation(); }
  int64_t step() const { return s_->store().step(); }
  std::string dir() const { return s_->store().dir(); }
  unsigned devices() const { return s_->store().config().devices; }
  std::string grad_dtype() const { return DTypeName(s_->store().config().grad); }
  std::string out_dtype() const { return OutDTypeName(s_->store().config().out); }
  py::list group_hyper() const {
    py::list l;
    for (const OptimizerConfig& h : s_->store().group_hyper()) l.append(HyperToPy(h));
    return l;
  }
  py::list layout() const {
    py::list l;
    for (const TensorSpec& t : s_->store().layout()->tensors())
      l.append(py::make_tuple(t.name, t.numel, t.group));
    return l;
  }
  py::object describe() const { return JsonToPy(s_->store().Describe()); }
  std::vector<int64_t> tensor_steps() const { return s_->store().tensor_steps(); }
  py::object previous_step() const {
    if (!s_->store().can_roll_back()) return py::none();
    return py::int_(s_->store().previous_step());
  }
  void roll_back() {
    py::gil_scoped_release nogil;
    s_->RollBack();
  }
  void verify() const {
    py::gil_scoped_release nogil;
    s_->store().Verify();
  }

 private:
  std::shared_ptr<Session> s_;
  py::object weights_hook_ = py::none();  // called with the GIL (SetWeightsHook)
};

// csdkit.torch.distributed.reshard's work (reshard.h). No device is opened: the stores' files
// are read and written directly, so `backend` and `link_model` change nothing (the backend's
// name is still checked, as the sessions the Python code once opened checked it).
int64_t Reshard(const std::string& src, const std::string& dst, int64_t world,
                std::optional<int64_t> devices, const std::string& backend, uint64_t device_mem,
                bool /*link_model*/, const std::optional<std::string>& state) {
  ParseBackend(backend);
  ReshardOptions o;
  o.src = src;
  o.dst = dst;
  o.world = world;
  o.devices = devices;
  o.device_mem = device_mem;
  if (state) o.state = ParseStateFmt(*state);
  py::gil_scoped_release nogil;
  return csdkit::Reshard(o).step;
}

}  // namespace
}  // namespace csdkit::py_binding

PYBIND11_MODULE(_csdkit, m) {
  using csdkit::py_binding::PySession;
  m.doc() = "csdkit: optimizer steps on (emulated) computational storage devices";
  // The CMake project version (python/CMakeLists.txt), which setup.py also gives the wheel.
  m.attr("__version__") = CSDKIT_PROJECT_VERSION;
  py::register_exception<csdkit::StoreError>(m, "StoreError", PyExc_RuntimeError);
  py::register_exception<csdkit::DivergenceError>(m, "DivergenceError", PyExc_RuntimeError);
  m.def("reshard", &csdkit::py_binding::Reshard, py::arg("src"), py::arg("dst"), py::arg("world"),
        py::arg("devices") = py::none(), py::kw_only(), py::arg("backend") = "model",
        py::arg("device_mem") = uint64_t{4} << 30, py::arg("link_model") = true,
        py::arg("state") = py::none(),
        R"(Re-splits the rank stores under `src` into a new set under `dst` for `world` ranks
(`devices` devices per store; None: as src's rank 0; `state`: the new stores' state format,
'fp32' | 'q8' | 'q8-bf16', None: the source's) at the same committed step, and returns
that step (csdkit/runtime/reshard.h; `csdkit reshard` runs the same code). StoreError for a set
that cannot be re-split, ValueError for a bad argument; nothing is left in `dst` on a failure.
device_mem sizes the new stores' subgroups; backend and link_model change nothing (no device is
opened).)");

  py::class_<PySession>(m, "Session",
                        "The device set, the store of one model and the scheduler. Create with "
                        "Session.create (a new store) or Session.open (an existing one).")
      .def_static("create", &PySession::Create, py::arg("dir"), py::arg("layout"),
                  py::arg("groups"), py::arg("weights"), py::kw_only(),
                  py::arg("optimizer") = "adamw", py::arg("devices") = 1u,
                  py::arg("backend") = "model", py::arg("grad_dtype") = py::none(),
                  py::arg("out_dtype") = py::none(), py::arg("loss_scale") = 1.0,
                  py::arg("subgroup_elems") = 0u, py::arg("device_mem") = uint64_t{4} << 30,
                  py::arg("link_model") = true, py::arg("ftz") = false, py::arg("seed") = 1u,
                  py::arg("state") = "fp32",
                  R"(Creates the store of a model in `dir` (absent or empty) and opens its devices.

layout: [(name, numel, group), ...] in flattening order; groups numbered 0, 1, ... in order.
groups: one dict of hyper-parameters per group (OptimizerConfig names: lr, beta1, beta2, eps,
  weight_decay, momentum, dampening, nesterov, lr_decay, initial_accumulator_value), on top of
  the optimizer's PyTorch defaults.
weights: one tensor per layout entry (torch or numpy; CPU, contiguous, float32/float16/bfloat16,
  all the same dtype): the initial fp32 master weights (fp16/bf16 widened exactly).
grad_dtype: 'fp32' | 'fp16' | 'bf16' (default: the weights' dtype).
out_dtype: 'none' | 'fp16' | 'bf16' (default: the weights' dtype; float32 weights: 'none').
subgroup_elems: 0 = the largest that fits device_mem, at most 1 Mi.
state: 'fp32' | 'q8' | 'q8-bf16' (docs/state-formats.md): how the store keeps the state.)")
      .def_static("open", &PySession::Open, py::arg("dir"), py::arg("layout"), py::kw_only(),
                  py::arg("backend") = "model", py::arg("device_mem") = uint64_t{4} << 30,
                  py::arg("link_model") = true,
                  "Opens the store of this model (StoreError for another model's store) and as "
                  "many devices as it has.")
      .def("step", &PySession::Step, py::arg("grads"), py::kw_only(),
           py::arg("group_hyper") = py::none(), py::arg("loss_scale") = py::none(),
           py::arg("found_inf") = false, py::arg("clip_coef") = 1.0, py::arg("max_norm") = 0.0,
           py::arg("return_norm") = false, py::arg("weights_out") = py::none(),
           py::arg("mode") = "smart", py::arg("allow_nonfinite") = false,
           R"(One optimizer step; returns the step report as a dict.

grads: one entry per tensor: a tensor of the store's grad dtype and the tensor's size, or None
  (no gradient: the tensor's weights and state are left unchanged).
group_hyper: this step's hyper-parameters per group (dicts, on top of the last step's).
loss_scale: the gradients arrive multiplied by it (default: the store's).
found_inf: skip the step (nothing read, written or committed).
clip_coef: multiplies the unscaled gradient (in (0, 1]).
max_norm: > 0: clip by the global L2 norm like torch.nn.utils.clip_grad_norm_ (replaces
  clip_coef), from the norm computed while gathering.
return_norm: add 'grad_norm' (L2 norm of the gradients as given) to the report.
weights_out: one tensor per layout entry to receive the new weights (the store's out dtype, or
  float32 for a store without a low-precision copy); tensors without a gradient are not written,
  nor None entries (their weights are in weights_buffer(); see set_weights_hook).
The report's 'host_bytes': bytes this session moved on the host for the step: gradients_copied
(by the kit into its transfer buffer), gradients_received (written into the arena by the caller:
begin_fill/end_fill), weights_written (into weights_out), weights_saved (what weights_out held,
kept for the put-back of a failed step).
mode: 'smart' (SmartUpdate) or 'baseline'.
allow_nonfinite: commit the step even if it writes NaN or infinity into the weights or the
  optimizer state; by default such a step raises csdkit.DivergenceError (naming the device,
  subgroup and first element) and nothing is committed. The report's 'nonfinite_values' counts
  them.)")
      .def("step_sparse", &PySession::StepSparse, py::arg("streams"), py::kw_only(),
           py::arg("group_hyper") = py::none(), py::arg("loss_scale") = py::none(),
           py::arg("found_inf") = false, py::arg("clip_coef") = 1.0,
           py::arg("weights_out") = py::none(), py::arg("mode") = "smart",
           py::arg("no_grad") = py::none(), py::arg("allow_nonfinite") = false,
           R"(One optimizer step with Top-K gradients; returns the step report as a dict.

streams: one (blk, idx, val) per subgroup, in the order of `subgroups` (device 0's first), in
  the kit's block format (docs/sparse-format.md): blk the block table (NumBlocks(n) + 1 entries,
  torch.int32 or numpy uint32/int32), idx the 16-bit in-block offsets (torch.int16 or numpy
  uint16/int16; the bits are the unsigned offset), val the kept values in the store's grad dtype.
  Copied, then validated with the kernel's checks (GradientSet::FromStreams) before anything
  moves: a bad stream raises ValueError naming its device and subgroup.
no_grad: ascending indices of the layout entries without a gradient this step (PyTorch's
  `grad is None`): their weights and state stay unchanged, whatever their streams hold.
The other arguments as for step(); no max_norm (the kit sees only the kept entries: fold your
  clip coefficient into clip_coef).)")
      .def("queue_fill", &PySession::QueueFill, py::arg("t"), py::arg("grad"),
           R"(Queues layout entry t's gradient (a CPU tensor of the store's grad dtype and the
entry's size, contiguous) to be copied into the gradient arena by the session's filler thread,
checked for finiteness and summed (squares, double) as it is copied. Returns at once: keep the
tensor alive and unchanged until step_arena (or fill it again; the latest fill counts).)")
      .def("fill", &PySession::Fill, py::arg("t"), py::arg("grad"),
           "The same copy as queue_fill, done now in this thread (after t's queued fills).")
      .def("grad_arena", &PySession::GradArenaArray,
           R"(The gradient arena's bytes as a writable numpy uint8 array (it keeps the session
alive): the model's elements in the store's order (tensor_offsets) and grad dtype, group padding
zero. Written by the fills, and by the caller between begin_fill and end_fill.)")
      .def("begin_fill", &PySession::BeginFill, py::arg("t"),
           R"(An external fill of layout entry t: the caller is about to write t's slice of
grad_arena() itself (e.g. a CUDA copy straight into it). A speculation that may have sent the
slice (or takes t as without a gradient) is abandoned first. Until end_fill(t), step_arena,
step and start_speculative refuse to run.)")
      .def("end_fill", &PySession::EndFill, py::arg("t"), py::arg("sumsq"),
           R"(Ends begin_fill(t): sumsq is the sum of squares of t's gradient (double), as the
caller's own pass found it (non-finite: the gradient has a non-finite value); it counts as a
fill of t with that norm and finiteness. None: the copy failed, t has no fill.)")
      .def("begin_fills", &PySession::BeginFills, py::arg("ts"),
           "begin_fill of each entry of ts, in order, in one call (a bucket).")
      .def("end_fills", &PySession::EndFills, py::arg("ts"), py::arg("sumsqs"),
           "end_fill(ts[i], sumsqs[i]) for each i, in one call.")
      .def("weights_buffer", &PySession::WeightsBufferArray,
           R"(The runtime's buffer of the last step's new weights as a numpy uint8 array (the
store's out dtype, or float32 without a low-precision copy; the model's elements in store
order), None before it exists. Rewritten during every step: read it from the weights hook or
after a step that committed.)")
      .def("set_weights_hook", &PySession::SetWeightsHook, py::arg("hook"),
           R"(hook(begin, n) is called, with the GIL, as the new weights of elements
[begin, begin + n) of the store's order reach weights_buffer() during a step (after they went
into weights_out); from the runtime's worker threads, before the step commits. What it raises
fails the step. None: no hook.)")
      .def("wait_fills", &PySession::WaitFills,
           "Waits for the queued fills; returns, per layout entry, whether it was filled since "
           "the last step.")
      .def("step_arena", &PySession::StepArena, py::arg("has_grad"), py::kw_only(),
           py::arg("group_hyper") = py::none(), py::arg("loss_scale") = py::none(),
           py::arg("found_inf") = false, py::arg("clip_coef") = 1.0, py::arg("max_norm") = 0.0,
           py::arg("return_norm") = false, py::arg("weights_out") = py::none(),
           py::arg("mode") = "smart", py::arg("allow_nonfinite") = false,
           R"(One optimizer step from the gradient arena: has_grad[t] says whether layout entry t
has a gradient this step (each such entry filled since the last step, else ValueError). No pass
over the gradient: finiteness and the norm come from the fills, and equal step()'s bit for bit.
The other arguments and the report as for step(). When a speculation (start_speculative) is
running, the report's 'speculation' says what became of it: 'committed', or 'abandoned: <why>'
(the step was then run from the arena as without one).)")
      .def("start_speculative", &PySession::StartSpeculative, py::arg("has_grad"), py::kw_only(),
           py::arg("group_hyper") = py::none(), py::arg("loss_scale") = py::none(),
           py::arg("clip_coef") = 1.0, py::arg("weights_out") = py::none(),
           py::arg("mode") = "smart", py::arg("allow_nonfinite") = false,
           R"(Starts the next step_arena's update while backward is still filling the arena (a
speculation; SmartUpdate only): has_grad the entries expected to have a gradient (the last
step's), every gradient taken as finite, clip_coef as the clip coefficient. Each device takes
its subgroups last first and sends one once the entries it covers are filled; nothing is
committed and nothing written into weights_out until step_arena finds its own arguments (and
the fills' finiteness and norm, so its clip coefficient) equal to these, and no entry filled
twice; otherwise step_arena abandons it and steps as without one. Bit for bit the same result
either way. Any other call but queue_fill, fill, wait_fills and step_arena abandons it.)")
      .def_property_readonly("subgroups", &PySession::subgroups,
                             "the store's subgroups, device 0's first (the order of step_sparse's "
                             "streams): dicts with device, index, begin (first flattened "
                             "element), n (elements) and group")
      .def_property_readonly("last_speculation",
                             &PySession::last_speculation,
                             "what the last step did with an update started during backward: '' "
                             "(none), 'committed', 'failed' (confirmed, then the step failed) or "
                             "'abandoned: <why>'")
      .def_property_readonly("tensor_offsets", &PySession::tensor_offsets,
                             "each layout entry's first element in the flattened model (param "
                             "groups start at 65536-element block boundaries)")
      .def("export_state", &PySession::ExportState, py::arg("var"), py::arg("dst"),
           R"(Reads state variable `var` ('theta', 'm' or 'v'; see `vars`) of the committed step
into `dst`: one writable float32 tensor per layout entry (None: skipped). Every subgroup's CRC is
checked as it is read (StoreError naming the file and subgroup on a mismatch).)")
      .def("export_state_q8", &PySession::ExportStateQ8, py::arg("var"), py::arg("codes"),
           py::arg("absmax"),
           R"(Reads moment `var` ('m' or 'v') of a q8 / q8-bf16 store's committed step as stored:
per layout entry, codes: a writable uint8 tensor of 256 * ceil(numel / 256) elements (the
entry's blocks: its elements, then the padding to its next block), absmax: a writable float32
tensor of ceil(numel / 256) (None: skipped). CRC-checked as export_state, which gives the same
moment dequantized. ValueError for an fp32 store.)")
      .def("import_state", &PySession::ImportState, py::arg("step"), py::arg("theta"),
           py::kw_only(), py::arg("m") = py::none(), py::arg("v") = py::none(),
           py::arg("group_hyper") = py::none(), py::arg("tensor_steps") = py::none(),
           py::arg("m_codes") = py::none(), py::arg("m_absmax") = py::none(),
           py::arg("v_codes") = py::none(), py::arg("v_absmax") = py::none(),
           R"(Replaces the whole state and commits it as step `step` (>= 0), atomically.

theta: one tensor per layout entry (float32/float16/bfloat16, all of one dtype; widened
  exactly), or None to keep the store's weights of that tensor.
m, v: None, or one float32 tensor per layout entry (None entries: the initial value, 0 or
  Adagrad's initial accumulator value); only variables the optimizer keeps (`vars`).
group_hyper: the hyper-parameters recorded with the step, per group (on top of the current).
tensor_steps: None (every layout entry at `step`), or each entry's step count, in [0, step].
m_codes, m_absmax, v_codes, v_absmax (q8 / q8-bf16 stores): a moment as stored, as
  export_state_q8 gives it (both lists or neither; None entries: from m / v as above), written
  as given; where m / v is given too it must be these codes dequantized, bit for bit.
Values are checked before anything is written: non-finite values (or a negative v) raise
ValueError naming tensor and element.)")
      .def_property_readonly("state", &PySession::state,
                             "how the store keeps its state: 'fp32', 'q8' or 'q8-bf16'")
      .def_property_readonly("vars", &PySession::vars,
                             "the state variables the store keeps: 'theta', then 'm' and/or 'v'")
      .def_property_readonly("step_count", &PySession::step, "the committed step")
      .def_property_readonly("tensor_steps", &PySession::tensor_steps,
                             "each layout entry's step count (torch.optim's per-parameter "
                             "'step'): the committed steps in which it had a gradient")
      .def_property_readonly("previous_step", &PySession::previous_step,
                             "the step roll_back() returns to (the state the last commit "
                             "replaced, kept in the other slot), or None when there is none")
      .def("roll_back", &PySession::roll_back,
           "Commits again the state the last commit replaced (step previous_step, its weights, "
           "state and hyper-parameters; a manifest rename, no shard byte moved): one step back. "
           "StoreError when there is none (a new or rolled-back store).")
      .def_property_readonly("dir", &PySession::dir)
      .def_property_readonly("devices", &PySession::devices)
      .def_property_readonly("grad_dtype", &PySession::grad_dtype)
      .def_property_readonly("out_dtype", &PySession::out_dtype)
      .def_property_readonly("group_hyper", &PySession::group_hyper,
                             "hyper-parameters per group as the last committed step used them")
      .def_property_readonly("layout", &PySession::layout)
      .def("describe", &PySession::describe, "the store's manifest summary as a dict")
      .def("verify", &PySession::verify,
           "reads the committed state and checks every checksum (StoreError on a mismatch)");
}
