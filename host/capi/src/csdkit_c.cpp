// The C API over the runtime (Store, GradientSet, Scheduler) and the device set. Every entry
// point runs its body inside Guard(): arguments are checked first (a null pointer or a value out
// of range becomes CSDKIT_INVALID_ARGUMENT with a message naming the argument), and every C++
// exception is caught and mapped to a status, its message kept per thread and per store.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "csdkit/aio/io_error.h"
#include "csdkit/csdkit.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/device.h"
#include "csdkit/platform/optimizer.h"
#include "csdkit/runtime/gradients.h"
#include "csdkit/runtime/layout.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/sizing.h"
#include "csdkit/runtime/state_io.h"
#include "csdkit/runtime/store.h"
#include "csdkit/system/device_set.h"

// The C enums mirror the C++ ones value for value (they are converted by cast).
static_assert(CSDKIT_FP32 == static_cast<int>(csdkit::DType::kFp32) &&
              CSDKIT_FP16 == static_cast<int>(csdkit::DType::kFp16) &&
              CSDKIT_BF16 == static_cast<int>(csdkit::DType::kBf16));
static_assert(CSDKIT_ADAMW == static_cast<int>(csdkit::Optimizer::kAdamW) &&
              CSDKIT_ADAM == static_cast<int>(csdkit::Optimizer::kAdam) &&
              CSDKIT_SGD == static_cast<int>(csdkit::Optimizer::kSgd) &&
              CSDKIT_ADAGRAD == static_cast<int>(csdkit::Optimizer::kAdagrad) &&
              CSDKIT_LION == static_cast<int>(csdkit::Optimizer::kLion));
static_assert(CSDKIT_STATE_FP32 == static_cast<int>(csdkit::hls::StateFmt::kFp32) &&
              CSDKIT_STATE_Q8 == static_cast<int>(csdkit::hls::StateFmt::kQ8) &&
              CSDKIT_STATE_Q8_BF16 == static_cast<int>(csdkit::hls::StateFmt::kQ8Bf16));
static_assert(CSDKIT_NUM_LINKS == csdkit::kNumLinks &&
              CSDKIT_LINK_SSD_TO_FPGA == static_cast<int>(csdkit::Link::kSsdToFpga) &&
              CSDKIT_LINK_FPGA_TO_SSD == static_cast<int>(csdkit::Link::kFpgaToSsd) &&
              CSDKIT_LINK_HOST_TO_DEVICE == static_cast<int>(csdkit::Link::kHostToDevice) &&
              CSDKIT_LINK_DEVICE_TO_HOST == static_cast<int>(csdkit::Link::kDeviceToHost) &&
              CSDKIT_LINK_NVME_TO_HOST == static_cast<int>(csdkit::Link::kNvmeToHost) &&
              CSDKIT_LINK_HOST_TO_NVME == static_cast<int>(csdkit::Link::kHostToNvme));

struct csdkit_store {
  // Destroyed in reverse order: the scheduler (device buffers) before the store and devices.
  std::unique_ptr<csdkit::DeviceSet> devices;
  std::unique_ptr<csdkit::Store> store;
  std::unique_ptr<csdkit::Scheduler> scheduler;
  csdkit::AlignedBuffer gather_buf;  // the transfer buffer, kept from step to step
  std::string last_error;

  ~csdkit_store() {
    scheduler.reset();
    store.reset();
    devices.reset();
  }
};

namespace {

using csdkit::DType;
using csdkit::OptimizerConfig;

thread_local std::string t_last_error;

/// A call's arguments refused before use: carries the status (always INVALID_ARGUMENT or
/// BAD_STATE) so that Guard reports it as such.
struct ApiError {
  csdkit_status status;
  std::string message;
};

[[noreturn]] void Invalid(const std::string& message) {
  throw ApiError{CSDKIT_INVALID_ARGUMENT, message};
}

template <typename T>
void NotNull(const T* p, const char* name) {
  if (p == nullptr) Invalid(std::string(name) + ": expected a pointer, found NULL");
}

/// Runs `body`, mapping every exception to a status; records the message per thread and, when
/// `h` is given, per store.
template <typename Body>
csdkit_status Guard(csdkit_store* h, Body&& body) {
  csdkit_status st = CSDKIT_OK;
  std::string msg;
  try {
    body();
  } catch (const ApiError& e) {
    st = e.status;
    msg = e.message;
  } catch (const csdkit::DivergenceError& e) {
    st = CSDKIT_DIVERGED;
    msg = e.what();
  } catch (const csdkit::StoreError& e) {
    st = CSDKIT_STORE_ERROR;
    msg = e.what();
  } catch (const csdkit::CapacityError& e) {
    st = CSDKIT_CAPACITY;
    msg = e.what();
  } catch (const csdkit::aio::IoError& e) {
    st = CSDKIT_IO;
    msg = e.what();
  } catch (const std::invalid_argument& e) {
    st = CSDKIT_INVALID_ARGUMENT;
    msg = e.what();
  } catch (const std::out_of_range& e) {
    st = CSDKIT_INVALID_ARGUMENT;
    msg = e.what();
  } catch (const std::logic_error& e) {
    // What remains of logic_error in the runtime: a call out of order (weights before a step).
    st = CSDKIT_BAD_STATE;
    msg = e.what();
  } catch (const std::bad_alloc&) {
    st = CSDKIT_OUT_OF_MEMORY;
    msg = "out of host memory";
  } catch (const std::exception& e) {
    st = CSDKIT_RUNTIME;
    msg = e.what();
  } catch (...) {
    st = CSDKIT_RUNTIME;
    msg = "unknown error (an exception that is not a std::exception)";
  }
  // Recording a message must not throw either (it could only fail for lack of memory).
  try {
    t_last_error = msg;
    if (h != nullptr) h->last_error = msg;
  } catch (...) {
  }
  return st;
}

std::string Str(const char* s) { return s == nullptr ? std::string() : std::string(s); }

DType ToDType(csdkit_dtype t, const char* name) {
  if (t != CSDKIT_FP32 && t != CSDKIT_FP16 && t != CSDKIT_BF16) {
    Invalid(std::string(name) + ": expected CSDKIT_FP32, CSDKIT_FP16 or CSDKIT_BF16, found " +
            std::to_string(static_cast<int>(t)));
  }
  return static_cast<DType>(t);
}

csdkit::Optimizer ToOptimizer(csdkit_optimizer o, const std::string& name) {
  if (static_cast<int>(o) < CSDKIT_ADAMW || static_cast<int>(o) > CSDKIT_LION) {
    Invalid(name + ": expected a csdkit_optimizer (0..4), found " +
            std::to_string(static_cast<int>(o)));
  }
  return static_cast<csdkit::Optimizer>(o);
}

OptimizerConfig ToConfig(const csdkit_hyper& h, const std::string& name) {
  OptimizerConfig c;
  c.opt = ToOptimizer(h.optimizer, name + ".optimizer");
  c.lr = h.lr;
  c.beta1 = h.beta1;
  c.beta2 = h.beta2;
  c.eps = h.eps;
  c.weight_decay = h.weight_decay;
  c.momentum = h.momentum;
  c.dampening = h.dampening;
  c.nesterov = h.nesterov != 0;
  c.lr_decay = h.lr_decay;
  c.initial_accumulator_value = h.initial_accumulator_value;
  return c;
}

std::vector<OptimizerConfig> ToConfigs(const csdkit_hyper* h, size_t n, const char* name) {
  NotNull(h, name);
  std::vector<OptimizerConfig> out;
  for (size_t g = 0; g < n; ++g)
    out.push_back(ToConfig(h[g], name + ("[" + std::to_string(g) + "]")));
  return out;
}

csdkit::DeviceSpec ToDeviceSpec(const csdkit_device_spec& s) {
  csdkit::DeviceSpec d;
  switch (s.backend) {
    case CSDKIT_BACKEND_MODEL:
      d.backend = csdkit::Backend::kModel;
      break;
    case CSDKIT_BACKEND_RTL:
      d.backend = csdkit::Backend::kRtl;
      break;
    case CSDKIT_BACKEND_OPENCL:
      d.backend = csdkit::Backend::kOpenCl;
      break;
    default:
      Invalid("devices->backend: expected CSDKIT_BACKEND_MODEL, _RTL or _OPENCL, found " +
              std::to_string(static_cast<int>(s.backend)));
  }
  if (s.count == 0) Invalid("devices->count: expected at least 1 device, found 0");
  d.count = s.count;
  d.first = s.first;
  d.device_mem = s.device_mem;
  d.platform = Str(s.platform);
  d.xclbin = Str(s.xclbin);
  d.link_model = s.link_model != 0;
  return d;
}

csdkit::ParamLayout ToLayout(const csdkit_layout* l) {
  NotNull(l, "layout");
  if (l->n_tensors == 0) Invalid("layout->n_tensors: expected at least 1 tensor, found 0");
  NotNull(l->names, "layout->names");
  NotNull(l->numels, "layout->numels");
  NotNull(l->groups, "layout->groups");
  std::vector<csdkit::TensorSpec> t(l->n_tensors);
  for (size_t i = 0; i < l->n_tensors; ++i) {
    if (l->names[i] == nullptr) {
      Invalid("layout->names[" + std::to_string(i) + "]: expected a name, found NULL");
    }
    t[i].name = l->names[i];
    t[i].numel = l->numels[i];
    t[i].group = l->groups[i];
  }
  return csdkit::ParamLayout(std::move(t));  // throws std::invalid_argument when malformed
}

/// Refuses a pointer list that is NULL, of another length than the layout's, or holds a NULL.
template <typename P>
void CheckTensorPointers(const csdkit::ParamLayout& l, P const* p, size_t n, const char* name) {
  NotNull(p, name);
  if (n != l.tensors().size()) {
    Invalid(std::string("n_tensors: expected the layout's ") + std::to_string(l.tensors().size()) +
            " tensors, found " + std::to_string(n));
  }
  for (size_t t = 0; t < n; ++t) {
    if (p[t] == nullptr) {
      Invalid(std::string(name) + "[" + std::to_string(t) + "] (tensor '" + l.tensors()[t].name +
              "'): expected a buffer, found NULL");
    }
  }
}

void CheckStore(const csdkit_store* h) {
  if (h == nullptr || !h->store) Invalid("store: expected an open store handle, found NULL");
}

/// The store's name of a state variable.
std::string StateVarName(csdkit_state_var var) {
  switch (var) {
    case CSDKIT_STATE_THETA:
      return "theta";
    case CSDKIT_STATE_M:
      return "m";
    case CSDKIT_STATE_V:
      return "v";
  }
  Invalid("var: expected CSDKIT_STATE_THETA, _M or _V, found " +
          std::to_string(static_cast<int>(var)));
}

/// Opens the devices, checking that there is one per shard.
std::unique_ptr<csdkit::DeviceSet> OpenDevices(const csdkit_device_spec* spec, unsigned need) {
  NotNull(spec, "devices");
  const csdkit::DeviceSpec d = ToDeviceSpec(*spec);
  if (need != 0 && d.count != need) {
    Invalid("devices->count: expected the store's " + std::to_string(need) + " devices, found " +
            std::to_string(d.count));
  }
  return std::make_unique<csdkit::DeviceSet>(d);
}

void CopyReason(const std::string& s, char (&dst)[256]) {
  const size_t n = std::min(s.size(), sizeof dst - 1);
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

/// The step options of a call, checked (the message names the field), as the runtime's.
csdkit::StepOptions ToStepOptions(const csdkit::Store& s, const csdkit_step_options* options,
                                  csdkit_step_options* out) {
  csdkit_step_options opt;
  csdkit_step_options_init(&opt);
  if (options != nullptr) opt = *options;
  csdkit::StepOptions o;
  if (opt.mode != CSDKIT_MODE_SMART && opt.mode != CSDKIT_MODE_BASELINE) {
    Invalid("options->mode: expected CSDKIT_MODE_SMART or CSDKIT_MODE_BASELINE, found " +
            std::to_string(static_cast<int>(opt.mode)));
  }
  o.mode =
      opt.mode == CSDKIT_MODE_SMART ? csdkit::UpdateMode::kSmart : csdkit::UpdateMode::kBaseline;
  if (opt.loss_scale != 0.0) {
    if (!(opt.loss_scale > 0.0) || !std::isfinite(opt.loss_scale)) {
      Invalid("options->loss_scale: expected 0 (the store's) or a finite value > 0, found " +
              std::to_string(opt.loss_scale));
    }
    o.loss_scale = opt.loss_scale;
  }
  if (!(opt.clip_coef > 0.0) || !std::isfinite(opt.clip_coef)) {
    Invalid("options->clip_coef: expected a finite value > 0, found " +
            std::to_string(opt.clip_coef));
  }
  if (!(opt.max_norm >= 0.0) || !std::isfinite(opt.max_norm)) {
    Invalid("options->max_norm: expected 0 (off) or a finite value > 0, found " +
            std::to_string(opt.max_norm));
  }
  if (opt.max_norm > 0.0 && opt.clip_coef != 1.0) {
    Invalid(
        "options->clip_coef and options->max_norm: expected at most one of them set, "
        "found clip_coef " +
        std::to_string(opt.clip_coef) + " and max_norm " + std::to_string(opt.max_norm));
  }
  if (opt.n_group_hyper == 0 && opt.group_hyper != nullptr) {
    Invalid("options->n_group_hyper: expected the store's " +
            std::to_string(s.group_hyper().size()) +
            " param groups with group_hyper set, "
            "found 0");
  }
  if (opt.n_group_hyper != 0) {
    if (opt.n_group_hyper != s.group_hyper().size()) {
      Invalid("options->n_group_hyper: expected 0 or the store's " +
              std::to_string(s.group_hyper().size()) + " param groups, found " +
              std::to_string(opt.n_group_hyper));
    }
    o.group_hyper = ToConfigs(opt.group_hyper, opt.n_group_hyper, "options->group_hyper");
  }
  o.found_inf = opt.found_inf != 0;
  o.fp32_weights_out = opt.fp32_weights_out != 0;
  o.host_threads = opt.host_threads;
  o.allow_nonfinite = opt.allow_nonfinite != 0;

  o.clip_coef = opt.clip_coef;
  *out = opt;
  return o;
}

/// Fills the C report from the runtime's.
void ToReport(const csdkit::StepReport& r, std::chrono::steady_clock::time_point t0,
              csdkit_step_report* report) {
  if (report == nullptr) return;
  report->step = r.step;
  report->skipped = r.skipped ? 1 : 0;
  CopyReason(r.skip_reason, report->skip_reason);
  CopyReason(r.warning, report->warning);
  report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report->virtual_seconds = r.virtual_seconds;
  report->subgroups = r.subgroups;
  report->nonfinite_values = r.nonfinite_values;
  report->shared_link_bytes = r.bytes.Shared();
  for (unsigned k = 0; k < CSDKIT_NUM_LINKS; ++k) report->link_bytes[k] = r.bytes.bytes[k];
}

// The checks and the theta part shared by csdkit_state_import and csdkit_state_import_q8.
csdkit::StateImport BeginImport(csdkit_store* store, int64_t step, const void* const* theta,
                                csdkit_dtype theta_dtype, size_t n_tensors) {
  CheckStore(store);
  const csdkit::ParamLayout& l = *store->store->layout();
  NotNull(theta, "theta");
  if (n_tensors != l.tensors().size()) {
    Invalid("n_tensors: expected the layout's " + std::to_string(l.tensors().size()) +
            " tensors, found " + std::to_string(n_tensors));
  }
  csdkit::StateImport in;
  in.step = step;
  in.theta_dtype = ToDType(theta_dtype, "theta_dtype");
  in.theta.assign(theta, theta + n_tensors);
  return in;
}

}  // namespace

extern "C" {

int csdkit_version(void) { return CSDKIT_VERSION; }

const char* csdkit_status_name(csdkit_status status) {
  switch (status) {
    case CSDKIT_OK:
      return "CSDKIT_OK";
    case CSDKIT_INVALID_ARGUMENT:
      return "CSDKIT_INVALID_ARGUMENT";
    case CSDKIT_STORE_ERROR:
      return "CSDKIT_STORE_ERROR";
    case CSDKIT_CAPACITY:
      return "CSDKIT_CAPACITY";
    case CSDKIT_IO:
      return "CSDKIT_IO";
    case CSDKIT_RUNTIME:
      return "CSDKIT_RUNTIME";
    case CSDKIT_BAD_STATE:
      return "CSDKIT_BAD_STATE";
    case CSDKIT_OUT_OF_MEMORY:
      return "CSDKIT_OUT_OF_MEMORY";
    case CSDKIT_DIVERGED:
      return "CSDKIT_DIVERGED";
  }
  return "unknown status";
}

const char* csdkit_last_error(void) { return t_last_error.c_str(); }

const char* csdkit_store_last_error(const csdkit_store* store) {
  return store == nullptr ? "" : store->last_error.c_str();
}

csdkit_status csdkit_device_spec_init(csdkit_device_spec* spec) {
  return Guard(nullptr, [&] {
    NotNull(spec, "spec");
    const csdkit::DeviceSpec d;
    spec->backend = CSDKIT_BACKEND_MODEL;
    spec->count = d.count;
    spec->first = d.first;
    spec->device_mem = d.device_mem;
    spec->platform = nullptr;
    spec->xclbin = nullptr;
    spec->link_model = d.link_model ? 1 : 0;
  });
}

csdkit_status csdkit_hyper_init(csdkit_hyper* hyper, csdkit_optimizer optimizer) {
  return Guard(nullptr, [&] {
    NotNull(hyper, "hyper");
    const OptimizerConfig c = OptimizerConfig::Defaults(ToOptimizer(optimizer, "optimizer"));
    hyper->optimizer = optimizer;
    hyper->lr = c.lr;
    hyper->beta1 = c.beta1;
    hyper->beta2 = c.beta2;
    hyper->eps = c.eps;
    hyper->weight_decay = c.weight_decay;
    hyper->momentum = c.momentum;
    hyper->dampening = c.dampening;
    hyper->nesterov = c.nesterov ? 1 : 0;
    hyper->lr_decay = c.lr_decay;
    hyper->initial_accumulator_value = c.initial_accumulator_value;
  });
}

csdkit_status csdkit_store_config_init(csdkit_store_config* config) {
  return Guard(nullptr, [&] {
    NotNull(config, "config");
    const csdkit::StoreConfig c;
    config->grad = static_cast<csdkit_dtype>(c.grad);
    config->out = static_cast<csdkit_dtype>(c.out);
    config->ftz = c.ftz ? 1 : 0;
    config->loss_scale = c.loss_scale;
    config->subgroup_elems = 0;
    config->state = static_cast<csdkit_state_format>(c.state);
    config->seed = c.seed;
  });
}

csdkit_status csdkit_step_options_init(csdkit_step_options* options) {
  return Guard(nullptr, [&] {
    NotNull(options, "options");
    const csdkit::StepOptions o;
    options->mode = CSDKIT_MODE_SMART;
    options->loss_scale = 0.0;
    options->found_inf = 0;
    options->clip_coef = o.clip_coef;
    options->max_norm = 0.0;
    options->fp32_weights_out = 0;
    options->group_hyper = nullptr;
    options->n_group_hyper = 0;
    options->host_threads = 0;
    options->allow_nonfinite = 0;
  });
}

csdkit_status csdkit_store_create(const char* dir, const csdkit_device_spec* devices,
                                  const csdkit_store_config* config, const csdkit_layout* layout,
                                  const csdkit_hyper* group_hyper, size_t n_groups,
                                  const void* weights, csdkit_dtype weight_dtype,
                                  csdkit_store** out) {
  return Guard(nullptr, [&] {
    NotNull(out, "out");
    *out = nullptr;
    NotNull(dir, "dir");
    if (*dir == '\0') Invalid("dir: expected a directory path, found \"\"");
    NotNull(devices, "devices");
    NotNull(config, "config");
    const csdkit::ParamLayout l = ToLayout(layout);
    const std::vector<OptimizerConfig> groups = ToConfigs(group_hyper, n_groups, "group_hyper");
    if (n_groups != l.groups()) {
      Invalid("n_groups: expected hyper-parameters for the layout's " + std::to_string(l.groups()) +
              " param groups, found " + std::to_string(n_groups));
    }
    NotNull(weights, "weights");
    csdkit::StoreConfig c;
    c.devices = devices->count;
    c.hyper = groups[0];
    c.grad = ToDType(config->grad, "config->grad");
    c.out = ToDType(config->out, "config->out");
    c.ftz = config->ftz != 0;
    c.loss_scale = config->loss_scale;
    if (config->state != CSDKIT_STATE_FP32 && config->state != CSDKIT_STATE_Q8 &&
        config->state != CSDKIT_STATE_Q8_BF16) {
      Invalid("config->state: expected CSDKIT_STATE_FP32, CSDKIT_STATE_Q8 or "
              "CSDKIT_STATE_Q8_BF16, found " + std::to_string(static_cast<int>(config->state)));
    }
    c.state = static_cast<csdkit::hls::StateFmt>(config->state);
    c.seed = config->seed;
    const DType wd = ToDType(weight_dtype, "weight_dtype");
    if (!(c.loss_scale > 0.0) || !std::isfinite(c.loss_scale)) {
      Invalid("config->loss_scale: expected a finite value > 0, found " +
              std::to_string(c.loss_scale));
    }
    auto h = std::make_unique<csdkit_store>();
    h->devices = OpenDevices(devices, 0);
    // The subgroup size: as `csdkit init` chooses it, from the devices' actual memory.
    const uint64_t shard = (l.total() + c.devices - 1) / c.devices;
    const uint32_t fit =
        csdkit::SubgroupForMemory(h->devices->device(0).capacity(), c.hyper, c.grad, c.out, shard);
    if (config->subgroup_elems == 0) {
      c.subgroup_elems = csdkit::SubgroupForState(std::min<uint32_t>(fit, 4u << 20), c.state);
    } else if (config->subgroup_elems > fit) {
      Invalid("config->subgroup_elems: expected at most " + std::to_string(fit) +
              " elements (two workers' buffers in device memory), found " +
              std::to_string(config->subgroup_elems));
    } else {
      c.subgroup_elems = config->subgroup_elems;
    }
    h->store = std::make_unique<csdkit::Store>(
        csdkit::Store::CreateForModel(dir, c, l, groups, weights, wd));
    h->scheduler = std::make_unique<csdkit::Scheduler>(*h->store, *h->devices);
    *out = h.release();
  });
}

csdkit_status csdkit_store_open(const char* dir, const csdkit_device_spec* devices,
                                const csdkit_layout* layout, csdkit_store** out) {
  return Guard(nullptr, [&] {
    NotNull(out, "out");
    *out = nullptr;
    NotNull(dir, "dir");
    NotNull(devices, "devices");
    const csdkit::ParamLayout l = ToLayout(layout);
    auto h = std::make_unique<csdkit_store>();
    h->store = std::make_unique<csdkit::Store>(csdkit::Store::Open(dir, l));
    h->devices = OpenDevices(devices, h->store->config().devices);
    h->scheduler = std::make_unique<csdkit::Scheduler>(*h->store, *h->devices);
    *out = h.release();
  });
}

csdkit_status csdkit_step(csdkit_store* store, const void* const* grads, size_t n_tensors,
                          const csdkit_step_options* options, double* l2norm,
                          csdkit_step_report* report) {
  return Guard(store, [&] {
    CheckStore(store);
    const csdkit::Store& s = *store->store;
    CheckTensorPointers(*s.layout(), grads, n_tensors, "grads");
    csdkit_step_options opt;
    csdkit::StepOptions o = ToStepOptions(s, options, &opt);
    const auto t0 = std::chrono::steady_clock::now();
    double norm = 0;
    const bool want_norm = l2norm != nullptr || opt.max_norm > 0.0;
    const std::vector<const void*> ptrs(grads, grads + n_tensors);
    csdkit::GradientSet g = csdkit::GradientSet::Gather(s, ptrs, want_norm ? &norm : nullptr,
                                                        std::move(store->gather_buf));
    if (l2norm != nullptr) *l2norm = norm;
    if (opt.max_norm > 0.0 && std::isfinite(norm)) {
      // PyTorch's clip_grad_norm_ on the unscaled gradients (a non-finite norm skips the step).
      const double scale = o.loss_scale ? *o.loss_scale : s.config().loss_scale;
      o.clip_coef = std::min(1.0, opt.max_norm / (norm / scale + 1e-6));
    }
    csdkit::StepReport r;
    try {
      r = store->scheduler->Step(g, o);
    } catch (...) {
      store->gather_buf = std::move(g).TakeBuffer();
      throw;
    }
    store->gather_buf = std::move(g).TakeBuffer();  // the next step gathers into it again
    ToReport(r, t0, report);
  });
}

csdkit_status csdkit_store_subgroups(csdkit_store* store, csdkit_subgroup* out, size_t capacity,
                                     size_t* count) {
  return Guard(store, [&] {
    CheckStore(store);
    NotNull(count, "count");
    const std::vector<csdkit::Subgroup> all = store->store->AllSubgroups();
    *count = all.size();
    if (out == nullptr) return;
    if (capacity < all.size()) {
      Invalid("capacity: expected room for the store's " + std::to_string(all.size()) +
              " subgroups, found " + std::to_string(capacity));
    }
    for (size_t k = 0; k < all.size(); ++k) {
      const csdkit::Subgroup& g = all[k];
      out[k].device = g.device;
      out[k].index = g.index;
      out[k].begin = store->store->shards().at(g.device).begin + g.begin;
      out[k].n = g.n;
      out[k].group = g.group;
    }
  });
}

csdkit_status csdkit_step_sparse(csdkit_store* store, const csdkit_sparse_grad* streams,
                                 size_t n_streams, const csdkit_step_options* options,
                                 csdkit_step_report* report) {
  return Guard(store, [&] {
    CheckStore(store);
    NotNull(streams, "streams");
    const csdkit::Store& s = *store->store;
    csdkit_step_options opt;
    const csdkit::StepOptions o = ToStepOptions(s, options, &opt);
    if (opt.max_norm > 0.0) {
      Invalid("options->max_norm: expected 0 with sparse gradients (the kit sees only the kept "
              "entries; clip with clip_coef from the dense norm), found " +
              std::to_string(opt.max_norm));
    }
    const std::vector<csdkit::Subgroup> all = s.AllSubgroups();
    if (n_streams != all.size()) {
      Invalid("n_streams: expected one stream per subgroup (" + std::to_string(all.size()) +
              ", csdkit_store_subgroups), found " + std::to_string(n_streams));
    }
    const auto t0 = std::chrono::steady_clock::now();
    const DType dt = s.config().grad;
    std::vector<std::vector<csdkit::SparseGrad>> sg(s.config().devices);
    for (size_t k = 0; k < all.size(); ++k) {
      const csdkit_sparse_grad& in = streams[k];
      const std::string what = "streams[" + std::to_string(k) + "] (device " +
                               std::to_string(all[k].device) + " subgroup " +
                               std::to_string(all[k].index) + ")";
      if (in.n != all[k].n) {
        Invalid(what + ": expected n = " + std::to_string(all[k].n) + " (the subgroup's size), found " +
                std::to_string(in.n));
      }
      if (in.blk == nullptr) Invalid(what + "->blk: expected the block table, found NULL");
      if (in.nnz > 0 && (in.idx == nullptr || in.val == nullptr)) {
        Invalid(what + ": expected idx and val for " + std::to_string(in.nnz) +
                " entries, found NULL");
      }
      if (in.nnz > in.n) {
        Invalid(what + ": expected nnz <= n (" + std::to_string(in.n) + "), found " +
                std::to_string(in.nnz));
      }
      // Copied into device-transferable (4096-aligned) buffers; validated by FromStreams.
      csdkit::SparseGrad g;
      g.n = in.n;
      g.nnz = in.nnz;
      g.dtype = dt;
      const uint64_t nb = (static_cast<uint64_t>(in.n) + 65535) / 65536;
      g.blk = csdkit::AlignedBuffer((nb + 1) * 4);
      std::memcpy(g.blk.data(), in.blk, (nb + 1) * 4);
      g.idx = csdkit::AlignedBuffer(static_cast<uint64_t>(in.nnz) * 2);
      g.val = csdkit::AlignedBuffer(static_cast<uint64_t>(in.nnz) * csdkit::DTypeBytes(dt));
      if (in.nnz > 0) {
        std::memcpy(g.idx.data(), in.idx, static_cast<uint64_t>(in.nnz) * 2);
        std::memcpy(g.val.data(), in.val, static_cast<uint64_t>(in.nnz) * csdkit::DTypeBytes(dt));
      }
      sg[all[k].device].push_back(std::move(g));
    }
    const csdkit::GradientSet g = csdkit::GradientSet::FromStreams(s, std::move(sg));
    ToReport(store->scheduler->Step(g, o), t0, report);
  });
}

csdkit_status csdkit_weights_out(csdkit_store* store, void* const* dst, size_t n_tensors) {
  return Guard(store, [&] {
    CheckStore(store);
    CheckTensorPointers(*store->store->layout(), dst, n_tensors, "dst");
    store->scheduler->CopyWeightsOut(std::vector<void*>(dst, dst + n_tensors));
  });
}

csdkit_status csdkit_state_export(csdkit_store* store, csdkit_state_var var, float* const* dst,
                                  size_t n_tensors) {
  return Guard(store, [&] {
    CheckStore(store);
    const csdkit::Store& s = *store->store;
    CheckTensorPointers(*s.layout(), dst, n_tensors, "dst");
    csdkit::ExportState(s, StateVarName(var), std::vector<float*>(dst, dst + n_tensors));
  });
}

csdkit_status csdkit_state_import(csdkit_store* store, int64_t step, const void* const* theta,
                                  csdkit_dtype theta_dtype, const float* const* m,
                                  const float* const* v, size_t n_tensors) {
  return Guard(store, [&] {
    csdkit::StateImport in = BeginImport(store, step, theta, theta_dtype, n_tensors);
    csdkit::Store& s = *store->store;
    if (m) in.m.assign(m, m + n_tensors);
    if (v) in.v.assign(v, v + n_tensors);
    csdkit::ImportState(s, in);
    store->scheduler->InvalidateWeightsOut();
  });
}

csdkit_status csdkit_state_export_q8(csdkit_store* store, csdkit_state_var var,
                                     uint8_t* const* codes, float* const* absmax,
                                     size_t n_tensors) {
  return Guard(store, [&] {
    CheckStore(store);
    const csdkit::Store& s = *store->store;
    CheckTensorPointers(*s.layout(), codes, n_tensors, "codes");
    CheckTensorPointers(*s.layout(), absmax, n_tensors, "absmax");
    csdkit::ExportStateQ8(s, StateVarName(var), std::vector<uint8_t*>(codes, codes + n_tensors),
                          std::vector<float*>(absmax, absmax + n_tensors));
  });
}

csdkit_status csdkit_state_import_q8(csdkit_store* store, int64_t step, const void* const* theta,
                                     csdkit_dtype theta_dtype, const uint8_t* const* m_codes,
                                     const float* const* m_absmax,
                                     const uint8_t* const* v_codes,
                                     const float* const* v_absmax, size_t n_tensors) {
  return Guard(store, [&] {
    csdkit::StateImport in = BeginImport(store, step, theta, theta_dtype, n_tensors);
    csdkit::Store& s = *store->store;
    if (!csdkit::hls::IsQ8(s.state())) {
      Invalid("store: expected a q8 or q8-bf16 store for codes, found one that keeps " +
              std::string(csdkit::StateFmtName(s.state())) + " state (use csdkit_state_import)");
    }
    if ((m_codes == nullptr) != (m_absmax == nullptr) ||
        (v_codes == nullptr) != (v_absmax == nullptr)) {
      Invalid(std::string((m_codes == nullptr) != (m_absmax == nullptr) ? "m_codes / m_absmax"
                                                                        : "v_codes / v_absmax") +
              ": expected both or neither, found one of them NULL");
    }
    if (m_codes) {
      in.m_codes.assign(m_codes, m_codes + n_tensors);
      in.m_absmax.assign(m_absmax, m_absmax + n_tensors);
    }
    if (v_codes) {
      in.v_codes.assign(v_codes, v_codes + n_tensors);
      in.v_absmax.assign(v_absmax, v_absmax + n_tensors);
    }
    csdkit::ImportState(s, in);
    store->scheduler->InvalidateWeightsOut();
  });
}

csdkit_status csdkit_store_step(csdkit_store* store, int64_t* step) {
  return Guard(store, [&] {
    CheckStore(store);
    NotNull(step, "step");
    *step = store->store->step();
  });
}

csdkit_status csdkit_tensor_steps(csdkit_store* store, int64_t* steps, size_t n_tensors) {
  return Guard(store, [&] {
    CheckStore(store);
    NotNull(steps, "steps");
    const std::vector<int64_t>& c = store->store->tensor_steps();
    if (n_tensors != c.size()) {
      Invalid("n_tensors: expected the layout's " + std::to_string(c.size()) + " tensors, found " +
              std::to_string(n_tensors));
    }
    std::copy(c.begin(), c.end(), steps);
  });
}

csdkit_status csdkit_store_info_get(csdkit_store* store, csdkit_store_info* info) {
  return Guard(store, [&] {
    CheckStore(store);
    NotNull(info, "info");
    const csdkit::Store& s = *store->store;
    info->devices = s.config().devices;
    info->n_tensors = s.layout()->tensors().size();
    info->n_groups = s.layout()->groups();
    info->params = s.config().params;
    info->optimizer = static_cast<csdkit_optimizer>(s.config().hyper.opt);
    info->grad = static_cast<csdkit_dtype>(s.config().grad);
    info->out = static_cast<csdkit_dtype>(s.config().out);
    info->step = s.step();
    info->state = static_cast<csdkit_state_format>(s.state());
  });
}

csdkit_status csdkit_store_close(csdkit_store* store) {
  // Releasing cannot report anything useful (the committed state is already durable); the
  // destructors do not throw.
  delete store;
  t_last_error.clear();
  return CSDKIT_OK;
}

}  // extern "C"
