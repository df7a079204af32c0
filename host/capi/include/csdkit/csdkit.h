/* The csdkit C API: optimizer steps of a trainer's model on N (emulated or OpenCL) devices,
 * with the optimizer state in a crash-consistent store on the devices' storage.
 *
 * Pure C (C99 and C++), no C++ type crosses it. Objects are opaque handles; every call returns
 * a csdkit_status and never lets an exception through. The message of a failed call is kept
 * per thread (csdkit_last_error) and, for calls on a store, per store (csdkit_store_last_error).
 *
 *   csdkit_device_spec spec;     csdkit_device_spec_init(&spec); spec.count = 2;
 *   csdkit_store_config cfg;     csdkit_store_config_init(&cfg);
 *   csdkit_hyper hyper[2];       csdkit_hyper_init(&hyper[0], CSDKIT_ADAMW); ...
 *   csdkit_store* s;
 *   if (csdkit_store_create(dir, &spec, &cfg, &layout, hyper, 2, weights, CSDKIT_FP16, &s))
 *     fprintf(stderr, "%s\n", csdkit_last_error());
 *   csdkit_step(s, grads, n_tensors, &opts, NULL, &report);
 *   csdkit_weights_out(s, dst, n_tensors);
 *   csdkit_store_close(s);
 *
 * A store handle is not thread-safe: one thread at a time may call functions on it. Different
 * handles may be used from different threads. docs/trainer.md describes the API.
 */
#ifndef CSDKIT_CSDKIT_H_
#define CSDKIT_CSDKIT_H_

#include <stddef.h>
#include <stdint.h>

#if defined(CSDKIT_C_BUILD)
#define CSDKIT_API __attribute__((visibility("default")))
#else
#define CSDKIT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Version of this header; csdkit_version() gives the library's. */
#define CSDKIT_VERSION_MAJOR 0
#define CSDKIT_VERSION_MINOR 4
#define CSDKIT_VERSION_PATCH 0
/** MAJOR * 10000 + MINOR * 100 + PATCH. */
#define CSDKIT_VERSION \
  (CSDKIT_VERSION_MAJOR * 10000 + CSDKIT_VERSION_MINOR * 100 + CSDKIT_VERSION_PATCH)

/** The enums below are int-sized in C. In C++ they get `int` as their fixed underlying type, so
 *  that any int a C caller passes is a value of the enum type there (without a fixed type,
 *  reading a value outside the enumerators is undefined behaviour in C++); the library refuses
 *  values outside the enumerators with CSDKIT_INVALID_ARGUMENT. */
#ifdef __cplusplus
#define CSDKIT_ENUM(name) enum name : int
#else
#define CSDKIT_ENUM(name) enum name
#endif

/** What a call returns. Anything but CSDKIT_OK leaves a message (csdkit_last_error). */
typedef CSDKIT_ENUM(csdkit_status) {
  CSDKIT_OK = 0,
  /** A null pointer, a count that does not match, a value out of range, or a description
   *  (layout, hyper-parameters, device spec) the kit refuses. The message names the argument. */
  CSDKIT_INVALID_ARGUMENT = 1,
  /** The store cannot be used: missing, corrupt, of another model, already open, not empty. */
  CSDKIT_STORE_ERROR = 2,
  /** Device memory too small for what the store's subgroups need. */
  CSDKIT_CAPACITY = 3,
  /** A read or write of the store's files failed (file, range and errno in the message). */
  CSDKIT_IO = 4,
  /** Anything else the runtime reports: a device that cannot be opened, a kernel error. */
  CSDKIT_RUNTIME = 5,
  /** A call made when it cannot be served, e.g. weights out before any step of this handle. */
  CSDKIT_BAD_STATE = 6,
  /** Host memory could not be allocated. */
  CSDKIT_OUT_OF_MEMORY = 7,
  /** The divergence guard refused the step: it would have stored NaN or infinity in the
   *  weights or the optimizer state (the message names the device, subgroup and first element).
   *  Nothing was committed; csdkit_step_options.allow_nonfinite commits such a step. */
  CSDKIT_DIVERGED = 8
} csdkit_status;

/** Element types. As an output type (csdkit_store_config.out) CSDKIT_FP32 means "no
 *  low-precision copy": the step returns the fp32 weights. */
typedef CSDKIT_ENUM(csdkit_dtype) { CSDKIT_FP32 = 0, CSDKIT_FP16 = 1, CSDKIT_BF16 = 2 } csdkit_dtype;

/** Optimizer rules (docs/optimizers.md). */
typedef CSDKIT_ENUM(csdkit_optimizer) {
  CSDKIT_ADAMW = 0,
  CSDKIT_ADAM = 1,
  CSDKIT_SGD = 2,
  CSDKIT_ADAGRAD = 3,
  CSDKIT_LION = 4
} csdkit_optimizer;

/** What runs the kernel. */
typedef CSDKIT_ENUM(csdkit_backend) {
  CSDKIT_BACKEND_MODEL = 0, /**< emulated SmartSSDs, the kernel's host model */
  CSDKIT_BACKEND_RTL = 1,   /**< emulated SmartSSDs, the Verilated RTL (builds with Verilator) */
  CSDKIT_BACKEND_OPENCL = 2 /**< OpenCL devices: a Xilinx card with its xclbin, or PoCL */
} csdkit_backend;

/** How a step runs (docs/runtime.md): the update on the devices, or the ZeRO-Infinity-style
 *  baseline on the host. Both give bit-identical state. */
typedef CSDKIT_ENUM(csdkit_mode) { CSDKIT_MODE_SMART = 0, CSDKIT_MODE_BASELINE = 1 } csdkit_mode;

/** Links whose bytes a step counts (index of csdkit_step_report.link_bytes). */
typedef CSDKIT_ENUM(csdkit_link) {
  CSDKIT_LINK_SSD_TO_FPGA = 0,    /**< device-internal P2P read */
  CSDKIT_LINK_FPGA_TO_SSD = 1,    /**< device-internal P2P write */
  CSDKIT_LINK_HOST_TO_DEVICE = 2, /**< shared link */
  CSDKIT_LINK_DEVICE_TO_HOST = 3, /**< shared link */
  CSDKIT_LINK_NVME_TO_HOST = 4,   /**< shared link (baseline) */
  CSDKIT_LINK_HOST_TO_NVME = 5    /**< shared link (baseline) */
} csdkit_link;
#define CSDKIT_NUM_LINKS 6

/** State variables of a store. theta always; m and v as the optimizer keeps them (AdamW, Adam:
 *  m and v; SGD with momentum: m; Adagrad: v; Lion: m; SGD without momentum: none). */
typedef CSDKIT_ENUM(csdkit_state_var) {
  CSDKIT_STATE_THETA = 0,
  CSDKIT_STATE_M = 1,
  CSDKIT_STATE_V = 2
} csdkit_state_var;

/** How a store keeps its state (docs/state-formats.md), fixed at creation: binary32 theta, m,
 *  v (12 bytes per parameter for AdamW); 8-bit codes of each moment with one binary32 absmax per
 *  block of 256 (6.03); the same with theta as bf16, rounded stochastically (4.03). */
typedef CSDKIT_ENUM(csdkit_state_format) {
  CSDKIT_STATE_FP32 = 0,
  CSDKIT_STATE_Q8 = 1,
  CSDKIT_STATE_Q8_BF16 = 2
} csdkit_state_format;

/** The devices a store runs on. Initialise with csdkit_device_spec_init, then change fields.
 *  Strings are read during the call that takes the spec and not kept. */
typedef struct csdkit_device_spec {
  csdkit_backend backend; /**< default CSDKIT_BACKEND_MODEL */
  unsigned count;         /**< devices = the store's shards; default 1 */
  unsigned first;         /**< first device number (OpenCL: index in the platform); default 0 */
  uint64_t device_mem;    /**< bytes per device (OpenCL: 0 = what it reports); default 4 GiB */
  const char* platform;   /**< OpenCL platform name substring; NULL or "" = the first one */
  const char* xclbin;     /**< xclbin to load and check; NULL or "" = none (emulated devices) */
  int link_model;         /**< emulated devices: SmartSSD link model in virtual time; default 1 */
} csdkit_device_spec;

/** Hyper-parameters of one param group, named as PyTorch names them. Fields the optimizer does
 *  not have are ignored. Initialise with csdkit_hyper_init. */
typedef struct csdkit_hyper {
  csdkit_optimizer optimizer;
  double lr;
  double beta1; /**< Adam, AdamW, Lion */
  double beta2; /**< Adam, AdamW, Lion */
  double eps;   /**< Adam, AdamW, Adagrad */
  double weight_decay;
  double momentum;                  /**< SGD */
  double dampening;                 /**< SGD */
  int nesterov;                     /**< SGD */
  double lr_decay;                  /**< Adagrad */
  double initial_accumulator_value; /**< Adagrad: initial v (at creation only) */
} csdkit_hyper;

/** What a store fixes for its life. Initialise with csdkit_store_config_init. */
typedef struct csdkit_store_config {
  csdkit_dtype grad;       /**< dtype of the gradients handed to csdkit_step; default fp16 */
  csdkit_dtype out;        /**< dtype of the weights out; CSDKIT_FP32 = no low-precision copy;
                                default fp16 */
  int ftz;                 /**< FTZ/DAZ arithmetic policy (docs/numeric-contract.md); default 0 */
  double loss_scale;       /**< gradients arrive multiplied by this (steps may override); 1.0 */
  uint32_t subgroup_elems; /**< elements per subgroup, a multiple of 65536; 0 (default) = the
                                largest that fits device memory for two workers, at most 4 Mi */
  csdkit_state_format state; /**< default CSDKIT_STATE_FP32 (since 0.4) */
  uint64_t seed;             /**< the store's seed: the key of q8-bf16's stochastic rounding;
                                  default 1 (since 0.4) */
} csdkit_store_config;

/** A trainer's parameter layout: n_tensors tensors in order, tensor i named names[i] with
 *  numels[i] elements in param group groups[i]. Groups are numbered 0, 1, ... in order, each
 *  group's tensors contiguous; every group starts on a 65536-element boundary of the flattened
 *  parameters. The arrays are read during the call and not kept. */
typedef struct csdkit_layout {
  size_t n_tensors;
  const char* const* names;
  const uint64_t* numels;
  const unsigned* groups;
} csdkit_layout;

/** Options of one step. Initialise with csdkit_step_options_init. */
typedef struct csdkit_step_options {
  csdkit_mode mode;     /**< default CSDKIT_MODE_SMART */
  double loss_scale;    /**< this step's loss scale; 0 (default) = the store's */
  int found_inf;        /**< non-zero: the trainer found a non-finite gradient; the step is
                             skipped (nothing read, written or committed) */
  double clip_coef;     /**< global-norm clip coefficient (finite, > 0), folded into the
                             kernel's unscale factor; default 1.0 */
  double max_norm;      /**< > 0: clip to this global L2 norm instead of clip_coef (which
                             must then stay 1.0): clip_coef = min(1, max_norm / (norm /
                             loss_scale + 1e-6)), norm computed while gathering; default 0 */
  int fp32_weights_out; /**< stores with out = fp32: read the fp32 weights back for
                             csdkit_weights_out; default 0 */
  const csdkit_hyper* group_hyper; /**< this step's hyper-parameters per group (n_group_hyper
                                        = the store's groups), or NULL: those of the last step */
  size_t n_group_hyper;
  unsigned host_threads; /**< baseline compute threads; 0 = all hardware threads */
  int allow_nonfinite;   /**< non-zero: commit a step even if it writes NaN or infinity into
                              the weights or state (default 0: CSDKIT_DIVERGED, nothing
                              committed) */
} csdkit_step_options;

/** What a step did. */
typedef struct csdkit_step_report {
  int64_t step;               /**< the step committed (or that would have been, if skipped) */
  int skipped;                /**< non-zero: nothing was read, written or committed */
  char skip_reason[256];      /**< why (NUL-terminated, truncated), "" when not skipped */
  double seconds;             /**< wall time of the step, gather and commit included */
  double virtual_seconds;     /**< link-model estimate for SmartSSD hardware (0 without) */
  uint64_t subgroups;         /**< kernel launches */
  uint64_t shared_link_bytes; /**< sum over the links of the shared uplink */
  uint64_t link_bytes[CSDKIT_NUM_LINKS]; /**< per link, indexed by csdkit_link */
  /** "" or, for a committed step, why it may not survive a power loss (the store's directory
   *  sync after the commit's rename failed): the step is committed (do not retry it). */
  char warning[256];
  uint64_t nonfinite_values;  /**< NaN/inf values written to the state (non-zero only when
                                   allow_nonfinite let such a step commit) */
} csdkit_step_report;

/** What a store is. */
typedef struct csdkit_store_info {
  unsigned devices;
  size_t n_tensors;
  unsigned n_groups;
  uint64_t params; /**< flattened parameters, padding before groups included */
  csdkit_optimizer optimizer;
  csdkit_dtype grad;
  csdkit_dtype out;
  int64_t step; /**< committed step */
  csdkit_state_format state; /**< since 0.4 */
} csdkit_store_info;

/** An open store with its devices. Created by csdkit_store_create or csdkit_store_open, owned
 *  by the caller, released by csdkit_store_close. */
typedef struct csdkit_store csdkit_store;

/** The library's version, MAJOR * 10000 + MINOR * 100 + PATCH (compare with CSDKIT_VERSION).
 *  Never fails. */
CSDKIT_API int csdkit_version(void);

/** The name of a status ("CSDKIT_OK", ...; "unknown status" for other values). The string is
 *  static. Never fails. */
CSDKIT_API const char* csdkit_status_name(csdkit_status status);

/** The message of the last failed call made on this thread, "" after a successful call. The
 *  string belongs to the library and stays valid until the next csdkit call on this thread. */
CSDKIT_API const char* csdkit_last_error(void);

/** The message of the last failed call on `store`, "" after a successful one (and for NULL).
 *  The string belongs to the store and stays valid until the next call on it or its close. */
CSDKIT_API const char* csdkit_store_last_error(const csdkit_store* store);

/** Fills *spec with the defaults (model backend, 1 device, 4 GiB, link model on).
 *  Errors: CSDKIT_INVALID_ARGUMENT if spec is NULL. */
CSDKIT_API csdkit_status csdkit_device_spec_init(csdkit_device_spec* spec);

/** Fills *hyper with the kit's defaults for `optimizer`, those of `csdkit init` (PyTorch's;
 *  SGD: lr 0.01, momentum 0.9; Adagrad: lr 0.01, eps 1e-10; Lion: lr 1e-4, beta2 0.99).
 *  Errors: CSDKIT_INVALID_ARGUMENT if hyper is NULL or optimizer is not a csdkit_optimizer. */
CSDKIT_API csdkit_status csdkit_hyper_init(csdkit_hyper* hyper, csdkit_optimizer optimizer);

/** Fills *config with the defaults (fp16 gradients, fp16 weights out, IEEE, loss scale 1,
 *  subgroups sized to device memory). Errors: CSDKIT_INVALID_ARGUMENT if config is NULL. */
CSDKIT_API csdkit_status csdkit_store_config_init(csdkit_store_config* config);

/** Fills *options with the defaults (smart mode, store's loss scale, no clipping, no found_inf,
 *  last step's hyper-parameters). Errors: CSDKIT_INVALID_ARGUMENT if options is NULL. */
CSDKIT_API csdkit_status csdkit_step_options_init(csdkit_step_options* options);

/** Creates a store of a model in `dir` (created; must be absent or empty) on the devices of
 *  `devices` (one shard per device), with theta = the trainer's `weights` and zero optimizer
 *  state (Adagrad: each group's initial accumulator value), committed as step 0, and opens it.
 *
 *  `weights` holds the tensors back to back in layout order (no padding), as `weight_dtype`
 *  elements (fp16 and bf16 are widened exactly); it is read during the call and not kept.
 *  `group_hyper[g]` are group g's hyper-parameters (n_groups = the layout's groups, the same
 *  optimizer for all). Every pointer argument is borrowed; on success *out receives a new
 *  handle that the caller owns and releases with csdkit_store_close, else *out is NULL.
 *
 *  Errors: CSDKIT_INVALID_ARGUMENT (a NULL argument, a malformed layout, a dtype or enum out of
 *  range, hyper-parameters out of range, a group count that is not the layout's, devices that
 *  cannot each hold whole 65536-element blocks, a subgroup that does not fit device memory);
 *  CSDKIT_STORE_ERROR (`dir` holds a store or cannot be created); CSDKIT_IO; CSDKIT_RUNTIME
 *  (devices that cannot be opened). Nothing is created when an argument is refused. */
CSDKIT_API csdkit_status csdkit_store_create(const char* dir, const csdkit_device_spec* devices,
                                             const csdkit_store_config* config,
                                             const csdkit_layout* layout,
                                             const csdkit_hyper* group_hyper, size_t n_groups,
                                             const void* weights, csdkit_dtype weight_dtype,
                                             csdkit_store** out);

/** Opens the store of this model in `dir` at its committed step, on `devices` (count must be
 *  the store's device count). One writer at a time may hold a store (any handle, optimizer or
 *  command of the kit, in any process): its lock file is flock'ed until csdkit_store_close. On success *out receives a new handle owned by the caller,
 *  else *out is NULL.
 *
 *  Errors: CSDKIT_INVALID_ARGUMENT (a NULL argument, a malformed layout, a device count that is
 *  not the store's); CSDKIT_STORE_ERROR (no store, a broken store, a store of another model
 *  (layout fingerprints differ) or without a layout, a store already open); CSDKIT_RUNTIME. */
CSDKIT_API csdkit_status csdkit_store_open(const char* dir, const csdkit_device_spec* devices,
                                           const csdkit_layout* layout, csdkit_store** out);

/** Runs one optimizer step with dense gradients and commits it on every device (or on none).
 *
 *  `grads[t]` points at tensor t's gradient (n_tensors = the layout's tensors, layout order,
 *  the store's grad dtype, contiguous); they are read once, during the call. `options` may be
 *  NULL (defaults). If `l2norm` is not NULL it receives the global L2 norm of the gradients as
 *  given (loss scale included, double accumulation, +inf if any value is not finite), computed
 *  in the same pass that gathers them. If `report` is not NULL it receives what the step did.
 *  A gradient with a non-finite value, or options->found_inf, skips the step (CSDKIT_OK,
 *  report->skipped = 1): nothing is read, written or committed.
 *
 *  Errors: CSDKIT_INVALID_ARGUMENT (NULL store, grads or grads[t]; n_tensors not the layout's;
 *  options out of range; group_hyper of another count or optimizer); CSDKIT_STORE_ERROR (a
 *  checksum mismatch: nothing committed); CSDKIT_CAPACITY; CSDKIT_IO; CSDKIT_RUNTIME. After an
 *  error the committed step is unchanged and the handle stays usable. */
CSDKIT_API csdkit_status csdkit_step(csdkit_store* store, const void* const* grads,
                                     size_t n_tensors, const csdkit_step_options* options,
                                     double* l2norm, csdkit_step_report* report);

/** One subgroup of a store: a kernel launch's range on one device. Elements [begin, begin + n)
 *  of the flattened model (layout offsets: each param group starts on a 65536-element block,
 *  the padding before it included); `group` is the param group all of them belong to. */
typedef struct csdkit_subgroup {
  unsigned device;
  uint32_t index; /**< within the device */
  uint64_t begin;
  uint32_t n;
  unsigned group;
} csdkit_subgroup;

/** The store's subgroups, device 0's first, each device's in order: *count receives how many;
 *  `out` (NULL: only count) receives them if `capacity` is enough. A Top-K trainer compresses
 *  its gradient per subgroup in this order for csdkit_step_sparse.
 *  Errors: CSDKIT_INVALID_ARGUMENT (NULL store or count, capacity too small). */
CSDKIT_API csdkit_status csdkit_store_subgroups(csdkit_store* store, csdkit_subgroup* out,
                                                size_t capacity, size_t* count);

/** One subgroup's Top-K gradient in the kit's block format (docs/sparse-format.md): `n` the
 *  subgroup's size, `nnz` kept entries, `blk` ceil(n / 65536) + 1 prefix counts, `idx` nnz
 *  16-bit in-block offsets (ascending within a block), `val` nnz values in the store's grad
 *  dtype. Borrowed for the call. */
typedef struct csdkit_sparse_grad {
  uint32_t n;
  uint32_t nnz;
  const uint32_t* blk;
  const uint16_t* idx;
  const void* val;
} csdkit_sparse_grad;

/** Runs one optimizer step with Top-K gradients: streams[k] is subgroup k in
 *  csdkit_store_subgroups' order (n_streams = their count). Every stream is validated with the
 *  kernel's own checks before anything moves (sorted, in range, the right length; the message
 *  names the stream and the error); entries not kept are zero gradient. Options as for
 *  csdkit_step, but max_norm must be 0 (clip with clip_coef from the dense norm). A non-finite
 *  value or found_inf skips the step. The streams are copied into transfer buffers: what moves
 *  over the shared link is their bytes, not the dense gradient's.
 *
 *  Errors: CSDKIT_INVALID_ARGUMENT (NULL store or streams, a count that is not the subgroups',
 *  a malformed stream, options out of range); CSDKIT_STORE_ERROR; CSDKIT_CAPACITY; CSDKIT_IO;
 *  CSDKIT_RUNTIME. After an error nothing is committed. */
CSDKIT_API csdkit_status csdkit_step_sparse(csdkit_store* store, const csdkit_sparse_grad* streams,
                                            size_t n_streams, const csdkit_step_options* options,
                                            csdkit_step_report* report);

/** Copies the weights produced by the last step of this handle into the trainer's tensors:
 *  dst[t] (n_tensors = the layout's tensors) receives tensor t's elements in the store's out
 *  dtype, or fp32 for stores with out = fp32 (steps run with fp32_weights_out). The buffers are
 *  borrowed and written during the call.
 *
 *  Errors: CSDKIT_INVALID_ARGUMENT (NULL store, dst or dst[t]; n_tensors not the layout's);
 *  CSDKIT_BAD_STATE (no step of this handle produced weights yet). */
CSDKIT_API csdkit_status csdkit_weights_out(csdkit_store* store, void* const* dst,
                                            size_t n_tensors);

/** Reads one state variable of the committed step into the trainer's buffers: dst[t]
 *  (n_tensors = the layout's tensors) receives tensor t's elements as fp32. Every subgroup's
 *  CRC is checked as it is read. Moves nothing over a device; reads the store's files.
 *
 *  Errors: CSDKIT_INVALID_ARGUMENT (NULL store, dst or dst[t]; n_tensors not the layout's; a
 *  variable the store's optimizer does not keep); CSDKIT_STORE_ERROR (a CRC mismatch);
 *  CSDKIT_IO. */
CSDKIT_API csdkit_status csdkit_state_export(csdkit_store* store, csdkit_state_var var,
                                             float* const* dst, size_t n_tensors);

/** Replaces the store's whole state and commits it as step `step` (>= 0): the weights theta[t]
 *  (`theta_dtype` elements; fp16/bf16 widened exactly; theta[t] NULL = keep the store's), and
 *  m[t], v[t] as fp32 (m or v NULL, or an entry NULL: the variable's initial value, 0 or
 *  Adagrad's initial accumulator value). What a checkpoint in the trainer's format (e.g.
 *  PyTorch's state_dict, whose `step` gives `step`) is loaded through. The new state goes to
 *  the slot that is not committed and is committed atomically, as a step is; weights out
 *  refuses (CSDKIT_BAD_STATE) until the next step.
 *
 *  Errors: CSDKIT_INVALID_ARGUMENT (NULL store or theta; n_tensors not the layout's; step < 0;
 *  a dtype out of range; m or v given for a variable the optimizer does not keep; a non-finite
 *  value, or a negative v, named by tensor and element — all checked before anything is
 *  written); CSDKIT_STORE_ERROR (a CRC mismatch reading kept weights: nothing committed);
 *  CSDKIT_IO. */
CSDKIT_API csdkit_status csdkit_state_import(csdkit_store* store, int64_t step,
                                             const void* const* theta, csdkit_dtype theta_dtype,
                                             const float* const* m, const float* const* v,
                                             size_t n_tensors);

/** Reads moment `var` (CSDKIT_STATE_M or CSDKIT_STATE_V) of a q8 / q8-bf16 store's committed
 *  step as stored: per tensor t, codes[t] receives the codes of its blocks — 256 ·
 *  ceil(numel / 256) bytes, the tensor's elements then the padding to its next block — and
 *  absmax[t] one binary32 per block. Every subgroup's CRC is checked. csdkit_state_export gives
 *  the same moment dequantized.
 *
 *  Errors: CSDKIT_INVALID_ARGUMENT (NULL store, codes, absmax or an entry of them; n_tensors not
 *  the layout's; an
 *  fp32 store; theta, or a moment the optimizer does not keep); CSDKIT_STORE_ERROR (a CRC
 *  mismatch); CSDKIT_IO. */
CSDKIT_API csdkit_status csdkit_state_export_q8(csdkit_store* store, csdkit_state_var var,
                                                uint8_t* const* codes, float* const* absmax,
                                                size_t n_tensors);

/** csdkit_state_import for a q8 / q8-bf16 store with the moments as stored: m_codes[t] and
 *  m_absmax[t] (csdkit_state_export_q8's arrays) are written as given instead of quantizing
 *  fp32 values, so a state exported that way comes back bit for bit. A list NULL, or a tensor's
 *  two entries NULL: the moment's initial value. Each absmax must be +0 or a normal, finite,
 *  positive binary32.
 *
 *  Errors: as csdkit_state_import, and CSDKIT_INVALID_ARGUMENT for an fp32 store, codes without
 *  absmax values or the reverse, or an absmax out of range (named by tensor and block; all
 *  checked before anything is written). */
CSDKIT_API csdkit_status csdkit_state_import_q8(csdkit_store* store, int64_t step,
                                                const void* const* theta,
                                                csdkit_dtype theta_dtype,
                                                const uint8_t* const* m_codes,
                                                const float* const* m_absmax,
                                                const uint8_t* const* v_codes,
                                                const float* const* v_absmax, size_t n_tensors);

/** *step receives the committed step (0 after creation).
 *  Errors: CSDKIT_INVALID_ARGUMENT if store or step is NULL. */
CSDKIT_API csdkit_status csdkit_store_step(csdkit_store* store, int64_t* step);

/** steps[t] receives tensor t's step count (PyTorch's per-parameter `step`): the committed
 *  steps in which it had a gradient. Every csdkit_step gives every tensor one, so through this
 *  API the counts stay equal to the committed step; a store written by csdkit.torch, where a
 *  parameter without a gradient keeps its count, continues from its counts here (bias
 *  correction, Adagrad's lr decay and SGD's first step use them), and csdkit_state_import
 *  sets every count to its `step`.
 *  Errors: CSDKIT_INVALID_ARGUMENT (NULL store or steps; n_tensors not the layout's). */
CSDKIT_API csdkit_status csdkit_tensor_steps(csdkit_store* store, int64_t* steps,
                                             size_t n_tensors);

/** *info receives what the store is. Errors: CSDKIT_INVALID_ARGUMENT if store or info is NULL. */
CSDKIT_API csdkit_status csdkit_store_info_get(csdkit_store* store, csdkit_store_info* info);

/** Releases the store: its devices, its files and its lock. The committed state stays on
 *  storage. NULL is accepted and does nothing. Always returns CSDKIT_OK. */
CSDKIT_API csdkit_status csdkit_store_close(csdkit_store* store);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CSDKIT_CSDKIT_H_ */
