"""torch.optim optimizers over a csdkit store (a thin Optimizer class over the kit's step).

Each optimizer keeps no state in Python: the fp32 master weights and the optimizer state (m,
v, momentum buffer, sum of squares) live in the store (`store=` directory, one subdirectory per
device), and every step runs there:

  * the store is created on the first step() from the current parameters (all parameters of
    all param groups, in order, frozen ones included: their gradient is None, so they and
    their state stay unchanged), or opened when `store` already holds one: then it must be the
    store of this model (same tensors, sizes and groups) whose committed weights are the
    parameters' (else csdkit.StoreError), or resume() loads its weights into the model;
  * every step hands over each parameter's .grad by address (None allowed), with this step's
    hyper-parameters read from self.param_groups (torch.optim.lr_scheduler works unchanged),
    and the kit writes the updated weights back into the parameters in place (CUDA parameters:
    each gradient device-to-host straight into the session's page-locked gradient arena, each
    new weight host-to-device from the runtime's weights buffer; see _cuda_arena.py);
  * state_dict() / load_state_dict() speak PyTorch's format, so checkpoints move between
    torch.optim.X and csdkit.torch.X both ways; `state` is a read-only view of the store's
    committed step keyed by parameter (state_dict()'s entries, read when accessed);
  * DTensor parameters (PyTorch FSDP2's fully_shard, torch >= 2.4): each rank's optimizer, with
    a store of its own, works on the local shards (a shard without elements has nothing in the
    store), writes the new weights into them in place, and gives DTensor state in state_dict();
    clip with torch.nn.utils.clip_grad_norm_ (max_grad_norm= is refused: its norm would be the
    shards');
  * torch.amp.GradScaler unscales the gradients before step() as for any optimizer, or, with
    fused=True, hands itself to step() and the kit folds the unscale into its own pass
    (_step_supports_amp_scaling, as torch's fused optimizers).

Parameters may be float32 (gradients float32; the fp32 weights come back over the link) or
float16/bfloat16 (gradients of that dtype; the kit keeps fp32 master weights and returns a
correctly rounded copy). Deviations from torch.optim are listed in docs/trainer.md.
"""

import collections.abc
import ctypes
import importlib
import json
import math
import os
import stat
import time
import warnings
import weakref

import torch
from torch.optim.optimizer import required

import csdkit

from ._cuda_arena import CudaArena
from .compress import TopK

__all__ = ["AdamW", "Adam", "SGD", "Adagrad", "Lion"]

_KIT_DTYPE = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}

# The kit's own constructor arguments, shared by every optimizer, and their defaults.
_KIT_ARGS = dict(store=None, devices=None, backend="model", device_mem=4 << 30, link_model=True,
                 mode="smart", max_grad_norm=None, compress=None, overlap_backward=True,
                 state="fp32")


def _probe(g):
    """Three elements of a contiguous CPU gradient (first, middle, last), as bit patterns; None
    when all three are zero (either sign). A gradient queued into the arena during backward and
    then changed in place without a version bump -- GradScaler.unscale_ on torch 2.x does
    exactly that (torch._amp_foreach_non_finite_check_and_unscale_ leaves _version as it was),
    multiplying every element by 1/scale -- differs here at step(), and is copied again. A
    gradient with those three zero is copied again in any case.

    Read straight from the tensor's memory (it is alive, contiguous and on the CPU: only such
    gradients are queued): about 2 us, where three elements through torch ops took about 60 us
    per gradient, twice per step: half of overlap_backward's cost per tensor (903 tensors:
    backward 260 ms with the kit's hooks before, 180 ms after, 110 ms without them)."""
    n = g.numel()
    size = g.element_size()
    kind, nonzero = _PROBE[size]
    base = g.data_ptr()
    vals = (kind.from_address(base).value, kind.from_address(base + (n // 2) * size).value,
            kind.from_address(base + (n - 1) * size).value)
    if not (vals[0] & nonzero or vals[1] & nonzero or vals[2] & nonzero):
        return None
    return vals


# element size -> (the unsigned integer of that size, the bits that are not the sign)
_PROBE = {4: (ctypes.c_uint32, 0x7FFFFFFF), 2: (ctypes.c_uint16, 0x7FFF)}




def _kit_args(local_vars):
    """The kit's keyword arguments out of a constructor's locals()."""
    return {k: local_vars[k] for k in _KIT_ARGS}


# -- DTensor parameters (PyTorch FSDP2's fully_shard) --------------------------------------------
# Under FSDP2 each parameter and its gradient are DTensors: each rank holds a shard (its "local
# tensor") of every parameter, and the kit's optimizer on that rank works on the local shards
# only (its store holds exactly them). torch < 2.4 has no public DTensor (torch 1.13: none): the
# class is looked up on first use, never at import.

_DTENSOR = []  # [the DTensor class or None], once looked up


def _dtensor_type():
    """torch's DTensor class (torch.distributed.tensor, torch.distributed._tensor before 2.5),
    or None where this torch has none."""
    if not _DTENSOR:
        cls = None
        for mod in ("torch.distributed.tensor", "torch.distributed._tensor"):
            try:
                cls = getattr(importlib.import_module(mod), "DTensor", None)
            except Exception:  # ImportError, or a torch built without distributed support
                cls = None
            if cls is not None:
                break
        _DTENSOR.append(cls)
    return _DTENSOR[0]


def _is_dtensor(t):
    """Whether `t` is a DTensor (an FSDP2 parameter or gradient)."""
    if type(t) in (torch.Tensor, torch.nn.Parameter) or not isinstance(t, torch.Tensor):
        return False
    cls = _dtensor_type()
    return cls is not None and isinstance(t, cls)


def _local(t):
    """A DTensor's local shard (the tensor itself, written in place by the kit), else `t`."""
    if not _is_dtensor(t):
        return t
    loc = getattr(t, "_local_tensor", None)
    return loc if loc is not None else t.to_local()


def _empty_shard(p):
    """Whether `p` is a DTensor whose shard on this rank has no element (FSDP2 shards dim 0 in
    chunks of ceil(size / ranks): a tensor with fewer rows than ranks leaves some ranks none).
    Such a parameter has nothing in this rank's store."""
    return _is_dtensor(p) and _local(p).numel() == 0


def _as_param_state(t, p):
    """A state tensor `t` (CPU, of the local shard's shape) as the parameter keeps its data: for a
    DTensor parameter a DTensor of the same mesh, placements, global shape and stride with `t`
    (moved to the shard's device) as this rank's shard; else `t`."""
    if not _is_dtensor(p):
        return t
    return _dtensor_type().from_local(t.to(_local(p).device), p.device_mesh, p.placements,
                                      run_check=False, shape=p.shape, stride=p.stride())


def _stored_moment(codes, amax, what, key):
    """A state dict's q8 moment as stored ('<key>_q8', '<key>_absmax'): both, as contiguous CPU
    uint8 / float32 tensors (their sizes are checked against the parameter by the kit)."""
    if codes is None or amax is None:
        raise ValueError("{}: expected both '{}_q8' and '{}_absmax' or neither, found only "
                         "'{}'".format(what, key, key, key + ("_q8" if amax is None else
                                                             "_absmax")))
    for name, t, dt in ((key + "_q8", codes, torch.uint8), (key + "_absmax", amax,
                                                           torch.float32)):
        if not torch.is_tensor(t) or t.dtype != dt:
            raise ValueError("{}['{}']: expected a {} tensor, found {!r}".format(
                what, name, dt, getattr(t, "dtype", type(t))))
    return (codes.detach().to("cpu").reshape(-1).contiguous(),
            amax.detach().to("cpu").reshape(-1).contiguous())


def _local_state(t, p, what):
    """The part of a loaded state tensor `t` that belongs to this rank's shard of parameter `p`:
    for a DTensor parameter `t` must be a DTensor of the same mesh, placements and global shape
    (then its local tensor is this rank's shard of the same elements); a plain `t` is taken as it
    is. ValueError naming `what` otherwise."""
    if not _is_dtensor(p):
        if _is_dtensor(t):
            raise ValueError("{}: expected a tensor (the parameter is not a DTensor), found a "
                             "DTensor".format(what))
        return t
    if not _is_dtensor(t):
        if tuple(t.shape) == tuple(_local(p).shape) == tuple(p.shape):
            return t  # the parameter is whole on this rank
        raise ValueError("{}: expected a DTensor sharded as the parameter (placements {}, shape "
                         "{}), as get_optimizer_state_dict() or this optimizer's state_dict() "
                         "gives, found a plain tensor of shape {}".format(
                             what, tuple(p.placements), tuple(p.shape), tuple(t.shape)))
    if t.device_mesh != p.device_mesh or tuple(t.placements) != tuple(p.placements) \
            or tuple(t.shape) != tuple(p.shape):
        raise ValueError("{}: expected a DTensor of the parameter's mesh, placements {} and shape "
                         "{}, found placements {} and shape {}{}".format(
                             what, tuple(p.placements), tuple(p.shape), tuple(t.placements),
                             tuple(t.shape), "" if t.device_mesh == p.device_mesh
                             else " on another device mesh"))
    return _local(t)


def _exchange_dirs(a, b):
    """Swaps directories a and b in one step (renameat2 with RENAME_EXCHANGE: at every moment
    each path names one complete directory), then makes the swap durable (fsync of the parent)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        raise csdkit.StoreError("cannot exchange '{}' and '{}' atomically: this C library has "
                                "no renameat2 (glibc >= 2.28 has)".format(a, b))
    at_fdcwd, rename_exchange = -100, 2
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) != 0:
        e = ctypes.get_errno()
        raise csdkit.StoreError("cannot exchange '{}' and '{}' atomically: {}{}".format(
            a, b, os.strerror(e), " (the file system does not support RENAME_EXCHANGE)"
            if e in (22, 38, 95) else ""))
    fd = os.open(os.path.dirname(a) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _device_files(vars_):
    """The files a store writes in each device's directory: its identity and both slots of
    each state variable."""
    return ["device.json"] + ["{}.{}.bin".format(v, s) for v in vars_ for s in (0, 1)]


def _foreign_files(path, devices, vars_):
    """What the store at `path` holds that it did not write (paths relative to it), in order:
    growing a store removes the old one, and with it anything that is there."""
    top = {"manifest.json", "manifest.json.tmp"} | {"dev%d" % d for d in range(devices)}
    mine = set(_device_files(vars_))
    out = []
    for entry in sorted(os.listdir(path)):
        if entry not in top:
            out.append(entry)
        elif entry.startswith("dev"):
            out += [os.path.join(entry, f) for f in sorted(os.listdir(os.path.join(path, entry)))
                    if f not in mine]
    return out


def _remove_store_files(path, devices, vars_):
    """Removes a store's own files (the manifest, each device's identity and state files) and
    its directories; anything else found there stays, and so does the directory holding it."""
    names = _device_files(vars_)
    for d in range(devices):
        dev = os.path.join(path, "dev%d" % d)
        for f in names:
            try:
                os.unlink(os.path.join(dev, f))
            except FileNotFoundError:
                pass
        try:
            os.rmdir(dev)
        except (FileNotFoundError, OSError):
            pass
    for f in ("manifest.json", "manifest.json.tmp"):
        try:
            os.unlink(os.path.join(path, f))
        except FileNotFoundError:
            pass
    try:
        os.rmdir(path)
    except OSError:
        pass


def _read_json(path, max_bytes):
    """A JSON document the kit wrote (a manifest, a rank record) read under the bounds its C++
    reader holds to (csdkit/platform/json_file.h): a regular file of at most `max_bytes`,
    nested at most _MAX_JSON_DEPTH deep. ValueError naming what was expected and found."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("expected a regular JSON file, found {}".format(
            "a directory" if stat.S_ISDIR(st.st_mode) else
            "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file"))
    if st.st_size > max_bytes:
        raise ValueError("expected at most {} bytes of JSON, found {}"
                         .format(max_bytes, st.st_size))
    with open(path) as f:
        text = f.read(max_bytes + 1)
    if _json_depth(text) > _MAX_JSON_DEPTH:
        raise ValueError("expected JSON nested at most {} levels deep, found deeper nesting"
                         .format(_MAX_JSON_DEPTH))
    return json.loads(text)


_MAX_JSON_DEPTH = 64
_MAX_MANIFEST_BYTES = 64 << 20  # kMaxJsonFileBytes


def _json_depth(text):
    """The deepest nesting of arrays and objects in `text`, counted outside strings."""
    depth = deepest = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


class _StateView(collections.abc.Mapping):
    """What `optimizer.state` is: a read-only mapping, keyed by parameter, over the state the
    store holds (and the little the optimizer keeps in Python), as torch.optim's `state`.

    The keys are the parameters that have state -- those with a step count > 0 in the store's
    committed step, or a Top-K residual -- in param_groups order; the store is opened if it
    exists (as by state_dict()), so the view is not empty once the store has committed steps,
    before this session's first step too. `view[p]` is a new plain dict each time, with the keys
    and values of p's entry in state_dict()['state'] (tensors read from the committed step when
    accessed; DTensors for DTensor parameters); a parameter without state gives {} as torch's
    defaultdict does, but no entry is created: `p in view` stays False for it. Writing into such a
    dict (Lightning moves optimizer state to a device this way) changes that dict only; the
    view itself refuses assignment: load_state_dict() imports state. items() and values() read
    each state variable once for all parameters.
    """

    __slots__ = ("_opt",)

    def __init__(self, opt):
        self._opt = opt

    def _keys(self):
        opt = self._opt
        return [] if opt._state_hidden else opt._state_params()

    def __getitem__(self, p):
        opt = self._opt
        if opt._state_hidden or not isinstance(p, torch.Tensor):
            return {}
        return opt._state_entries([p]).get(p, {})

    def __contains__(self, p):
        return isinstance(p, torch.Tensor) and any(k is p for k in self._keys())

    def __iter__(self):
        return iter(self._keys())

    def __len__(self):
        return len(self._keys())

    def get(self, p, default=None):
        return self[p] if p in self else default

    def _all(self):
        opt = self._opt
        return {} if opt._state_hidden else opt._state_entries()

    def items(self):
        return self._all().items()

    def values(self):
        return self._all().values()

    def __setitem__(self, p, value):
        raise TypeError("optimizer.state is a read-only view of the store '{}': load state with "
                        "load_state_dict()".format(self._opt._store_dir))

    def __delitem__(self, p):
        self.__setitem__(p, None)

    def __repr__(self):
        return "<optimizer.state of {} over the store '{}': {} parameter(s) with state>".format(
            type(self._opt).__name__, self._opt._store_dir, len(self))


class _StoreOptimizer(torch.optim.Optimizer):
    """The shared skeleton: layout, store creation/opening, gradients in, weights out, state in
    PyTorch's format.

    Subclasses set _optimizer (the kit's name) and _state_keys (PyTorch's state names of the
    store's variables m and v, e.g. {"m": "exp_avg", "v": "exp_avg_sq"}), and implement
    _group_hyper(group) -> dict in the kit's names (OptimizerConfig: lr, beta1, beta2, eps,
    weight_decay, ...) and _check_group(group) raising for options the kit does not implement.
    """

    _optimizer = None
    _state_keys = {}
    _has_step_state = True  # PyTorch's state has a per-parameter "step"
    #: With fused=True (set per instance in __init__), torch.amp.GradScaler hands itself to
    #: step() (grad_scaler=) instead of unscaling the gradients in a separate pass: the kit
    #: folds 1/scale into its unscale factor.
    _step_supports_amp_scaling = False
    #: Whether gradients may be handed to the kit's gradient arena as backward finishes them
    #: (overlap_backward); the partitioned optimizer of csdkit.torch.distributed hands over its
    #: reduce-scattered slice instead.
    _arena_capable = True
    #: While True, `state` shows no entry: set while torch.optim.Optimizer.state_dict() packs
    #: self.state inside this class's state_dict(), which reads the store itself.
    _state_hidden = False

    @property
    def state(self):
        """The per-parameter state as torch.optim's `state`: a read-only view of the store's
        committed step (see _StateView)."""
        # A wrapper that copies this optimizer's __dict__ and subclasses its class keeps it in
        # `_optimizer` (Lightning's LightningOptimizer): the view is of the optimizer itself.
        inner = self.__dict__.get("_optimizer")
        return _StateView(inner if isinstance(inner, _StoreOptimizer) else self)

    @state.setter
    def state(self, value):
        # torch.optim.Optimizer.__init__ assigns its empty defaultdict(dict): that becomes the
        # part kept in Python (Top-K residuals). Nothing else may replace the view.
        if "_pystate" in self.__dict__:
            raise AttributeError("{}.state is a read-only view of the store; load state with "
                                 "load_state_dict()".format(type(self).__name__))
        self._pystate = value

    def __init__(self, params, defaults, kit):
        store, devices, backend = kit["store"], kit["devices"], kit["backend"]
        device_mem, mode, max_grad_norm = kit["device_mem"], kit["mode"], kit["max_grad_norm"]
        if store is None or not isinstance(store, (str, os.PathLike)) or not str(store):
            raise ValueError("Invalid store: expected a directory path, found {!r}".format(store))
        if devices is not None and (not isinstance(devices, int) or isinstance(devices, bool)
                                    or devices < 1):
            raise ValueError("Invalid devices value: {!r} (expected None or an int >= 1)"
                             .format(devices))
        if backend not in ("model", "rtl", "opencl"):
            raise ValueError("Invalid backend: {!r} (expected 'model', 'rtl' or 'opencl')"
                             .format(backend))
        if mode not in ("smart", "baseline"):
            raise ValueError("Invalid mode: {!r} (expected 'smart' or 'baseline')".format(mode))
        if not isinstance(device_mem, int) or device_mem <= 0:
            raise ValueError("Invalid device_mem value: {!r} (expected bytes > 0)"
                             .format(device_mem))
        if max_grad_norm is not None and not (isinstance(max_grad_norm, (int, float))
                                              and 0 < max_grad_norm < float("inf")):
            raise ValueError("Invalid max_grad_norm value: {!r} (expected None or a finite "
                             "number > 0)".format(max_grad_norm))
        if kit["state"] not in ("fp32", "q8", "q8-bf16"):
            raise ValueError("Invalid state: {!r} (expected 'fp32', 'q8' or 'q8-bf16': the store's "
                             "state format, docs/state-formats.md)".format(kit["state"]))
        self._state_fmt = kit["state"]
        compress = kit["compress"]
        if compress is not None and not isinstance(compress, TopK):
            raise ValueError("Invalid compress: expected None or csdkit.torch.TopK(ratio), found "
                             "{!r}".format(compress))
        self._check_store_path(os.fspath(store), devices)
        super().__init__(params, defaults)
        # torch's fused optimizers take GradScaler's unscale into their step; so does the kit's
        # with fused=True (GradScaler.step hands itself over, the kit divides the scale out in
        # its own pass). Otherwise GradScaler unscales the gradients itself first, and trainers
        # that refuse gradient clipping for optimizers that unscale internally (Lightning) let
        # it clip. fused=None: True for float16/bfloat16 parameters (the kit holds their fp32
        # master weights; GradScaler refuses to unscale float16 gradients itself and has no
        # bfloat16 unscale kernel), False for float32 ones (GradScaler's own unscale works).
        fused = defaults.get("fused")
        if fused is None:
            fused = any(p.dtype in (torch.float16, torch.bfloat16)
                        for g in self.param_groups for p in g["params"])
        self._step_supports_amp_scaling = bool(fused)
        self._closed = False
        self._weights_checked = False  # an opened store's weights were found to be the model's
        self._compress = compress
        self._flat_acc = None    # with compress: the flattened accumulated gradient (reused)
        self._store_dir = os.fspath(store)
        self._devices = 1 if devices is None else devices
        self._backend = backend
        self._device_mem = device_mem
        self._link_model = bool(kit["link_model"])
        self._mode = mode
        self._max_grad_norm = float(max_grad_norm) if max_grad_norm is not None else 0.0
        self._session = None
        self._params = None      # the parameters in layout order
        self._layout = None      # [(name, numel, group)]
        self._shapes = None      # their shapes
        self._staging = None     # per parameter: None (CPU) or (pinned grad, pinned weights)
        self._cuda = None        # CudaArena: every parameter on one CUDA device, no compress=
        #: The report of the last step as a dict (csdkit StepReport; with max_grad_norm also
        #: 'grad_norm', the gradients' global L2 norm before clipping; 'host_seconds', see
        #: step()), or None before any.
        self.last_report = None
        self._marks = None       # perf_counter() just before and after the binding's step call
        if any(_is_dtensor(p) for g in self.param_groups for p in g["params"]):
            self._check_dtensor_options()
        # overlap_backward: CPU gradients copied into the kit's gradient arena by its filler
        # thread as backward finishes each (hooks), checked and summed as they are copied.
        self._overlap = bool(kit["overlap_backward"]) and self._arena_capable
        self._arena_index = {}   # id(parameter) -> layout entry, once the store is open
        self._arena_src = {}     # layout entry -> (gradient tensor, its _version) as queued
        self._arena_keep = []    # every tensor queued since the last step (kept alive for it)
        # The update started during backward (Session.start_speculative), from the second
        # step on: what the last arena step was (has_grad, loss scale, backward passes), the
        # passes of this step so far and the layout entries seen in the current one, and how
        # many steps to leave out after speculations that were abandoned.
        self._spec_last = None
        self._spec_passes = 0
        self._spec_seen = set()
        self._spec_started = False
        self._spec_skip = 0
        self._spec_misses = 0
        self._grad_hooks = []
        self._hook_seconds = 0.0  # in the hooks since the last step
        if self._overlap:
            for group in self.param_groups:
                self._hook_params(group["params"])
        for group in self.param_groups:
            self._check_group(group)

    def _check_dtensor_options(self):
        """What the kit refuses for DTensor (FSDP2) parameters: its own clipping, whose norm
        would be this rank's shards' only, and Top-K compression (its residuals are per rank and
        would not be saved as shards)."""
        name = type(self).__name__
        if self._max_grad_norm > 0:
            raise ValueError(
                "{}: max_grad_norm= with DTensor (FSDP2) parameters: the kit's norm would be of "
                "this rank's shards only; clip with torch.nn.utils.clip_grad_norm_(model."
                "parameters(), max_norm) before step(), which takes the global norm of DTensor "
                "gradients".format(name))
        if self._compress is not None:
            raise ValueError("{}: compress= with DTensor (FSDP2) parameters is not implemented "
                             "(use dense gradients)".format(name))

    def _check_store_path(self, path, devices):
        """What can be checked of `store` before the first step: an existing path must be a
        directory; a missing one must be creatable (its nearest existing ancestor a directory
        this process may write); an existing store must be one of this optimizer, and of
        `devices` devices when that is given."""
        name = type(self).__name__
        if os.path.lexists(path):
            if not os.path.isdir(path):
                raise ValueError("Invalid store '{}': expected a directory (or a path to create "
                                 "one at), found a file".format(path))
            manifest = os.path.join(path, "manifest.json")
            if not os.path.lexists(manifest):
                return
            try:
                config = _read_json(manifest, _MAX_MANIFEST_BYTES)["config"]
                found_opt, found_devices = str(config["optimizer"]), int(config["devices"])
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise csdkit.StoreError("store '{}': expected a readable manifest.json, found "
                                        "{}".format(path, e)) from None
            if found_opt != self._optimizer:
                raise ValueError("Invalid store '{}': expected a store of {} (optimizer '{}'), "
                                 "found one of optimizer '{}'"
                                 .format(path, name, self._optimizer, found_opt))
            if devices is not None and devices != found_devices:
                raise ValueError("Invalid devices value: {} (the store '{}' has {} devices; "
                                 "leave devices unset to open it with its own, or reshard it: "
                                 "csdkit reshard)".format(devices, path, found_devices))
            return
        parent = os.path.dirname(os.path.abspath(path))
        while not os.path.lexists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
            raise ValueError("Invalid store '{}': expected a path where a directory can be "
                             "created, found '{}' {}".format(
                                 path, parent, "not writable" if os.path.isdir(parent)
                                 else "not a directory"))

    # -- the model --------------------------------------------------------------------------

    def _describe_model(self):
        params, layout = [], []
        g_kit = 0
        for gi, group in enumerate(self.param_groups):
            if not group["params"]:
                continue
            in_store = False
            for pi, p in enumerate(group["params"]):
                name = "param_groups[{}].params[{}]".format(gi, pi)
                if _is_dtensor(p):
                    # FSDP2: this rank's shard is what the store holds; a shard without
                    # elements has nothing in it (its group may then have no tensor here).
                    self._check_dtensor_options()
                    if _empty_shard(p):
                        continue
                loc = _local(p)
                if loc.is_sparse or loc.layout != torch.strided:
                    raise ValueError("{}: expected a dense parameter, found layout {}"
                                     .format(name, loc.layout))
                if loc.device.type not in ("cpu", "cuda"):
                    raise ValueError("{}: expected a CPU or CUDA parameter, found device {}"
                                     .format(name, loc.device))
                if p.dtype not in _KIT_DTYPE:
                    raise ValueError("{}: expected dtype torch.float32, torch.float16 or "
                                     "torch.bfloat16, found {}".format(name, p.dtype))
                if loc.device.type == "cpu" and not loc.is_contiguous():
                    raise ValueError("{}: expected a contiguous parameter (updated in place by "
                                     "address), found strides {}".format(name, loc.stride()))
                if loc.numel() == 0:
                    raise ValueError("{}: expected a parameter with elements, found shape {}"
                                     .format(name, tuple(p.shape)))
                params.append(p)
                layout.append((name, loc.numel(), g_kit))
                in_store = True
            g_kit += 1 if in_store else 0
        dtypes = {p.dtype for p in params}
        if len(dtypes) != 1:
            raise ValueError("parameters: expected one dtype for the whole model (the store has "
                             "one gradient dtype), found {}".format(sorted(map(str, dtypes))))
        return params, layout

    def _store_groups(self):
        """The param groups that have tensors in the store, in order (the store's groups): those
        with parameters, less any whose every parameter is a DTensor without elements on this
        rank."""
        return [g for g in self.param_groups if any(not _empty_shard(p) for p in g["params"])]

    def _check_same_model(self, params, layout):
        """After the store is open: the parameters must be the ones it was made for."""
        if len(layout) != len(self._layout):
            raise ValueError("param_groups: expected the {} parameters the store was created "
                             "for, found {} (a parameter list changed other than through "
                             "add_param_group, which grows the store)"
                             .format(len(self._layout), len(layout)))
        for (name, n, g), (_, n0, g0), p, p0, shape in zip(layout, self._layout, params,
                                                          self._params, self._shapes):
            if p is not p0:
                raise ValueError("{}: expected the parameter the store was created for, found "
                                 "another tensor (the store's layout is fixed)".format(name))
            if n != n0 or tuple(_local(p).shape) != shape:
                raise ValueError("{}: expected shape {} ({} elements, the store's layout), found "
                                 "shape {} ({} elements)"
                                 .format(name, shape, n0, tuple(p.shape), n))
            if g != g0:
                raise ValueError("{}: expected param group {} (the store's layout), found {}"
                                 .format(name, g0, g))

    def _state_format_error(self, session):
        """Why a store opened as `session` cannot be used with `state=` (its format is
        another), or None. The caller drops the session (releasing the store's lock) before it
        raises the ValueError."""
        found = session.describe().get("state", "fp32")
        if found == self._state_fmt:
            return None
        return ("state: expected the store {!r} in {!r} (state={!r}), found {!r}: a store "
                "keeps the format it was created with; pass state={!r}".format(
                    self._store_dir, self._state_fmt, self._state_fmt, found, found))

    def _ensure_session(self, check_weights=True):
        self._check_open()
        params, layout = self._describe_model()
        if self._session is not None:
            self._check_same_model(params, layout)
            if check_weights and not self._weights_checked:
                self._check_weights_match()
            return False
        hyper = [self._group_hyper(g) for g in self._store_groups()]
        opened = os.path.exists(os.path.join(self._store_dir, "manifest.json"))
        if opened:
            session = csdkit.Session.open(self._store_dir, layout, backend=self._backend,
                                          device_mem=self._device_mem,
                                          link_model=self._link_model)
            error = self._state_format_error(session)
            if error:
                session = None  # (closes it: releases the store's lock)
                raise ValueError(error)
        else:
            # A store path whose parent does not exist yet (accepted at construction when
            # its nearest existing ancestor is writable): the directories above it first.
            os.makedirs(os.path.dirname(os.path.abspath(self._store_dir)), exist_ok=True)
            with torch.no_grad():
                weights = [_local(p).detach().to("cpu").contiguous() for p in params]
                session = csdkit.Session.create(
                    self._store_dir, layout, hyper, weights, optimizer=self._optimizer,
                    devices=self._devices, backend=self._backend,
                    device_mem=self._device_mem, link_model=self._link_model,
                    state=self._state_fmt)
        local = [_local(p) for p in params]
        staging = []
        if self._compress is None and local and all(p.is_cuda for p in local) \
                and len({p.device for p in local}) == 1 and not any(map(_is_dtensor, params)):
            # Gradients straight into the session's arena, weights straight from its buffer.
            staging = [None] * len(local)
            self._cuda = CudaArena(session, local, session.tensor_offsets, local[0].device)
            cuda = weakref.ref(self._cuda)  # (the session must not keep the arena alive)
            session.set_weights_hook(lambda begin, n: cuda().on_weights(begin, n))
        else:
            for p in local:
                if p.device.type == "cpu":
                    staging.append(None)
                else:
                    pin = dict(dtype=p.dtype, pin_memory=True)
                    staging.append((torch.empty(p.numel(), **pin),
                                    torch.empty(p.numel(), **pin)))
        self._session, self._params, self._layout = session, params, layout
        self._shapes = [tuple(_local(p).shape) for p in params]
        self._staging = staging
        self._arena_index = {id(p): t for t, p in enumerate(params)}
        self._weights_checked = not opened
        if opened and check_weights:
            self._check_weights_match()
        return opened

    def _store_weights(self):
        """The store's committed fp32 weights, one flat CPU tensor per parameter."""
        theta = [torch.empty(n, dtype=torch.float32) for _, n, _ in self._layout]
        self._session.export_state("theta", theta)
        return theta

    def _check_weights_match(self):
        """An opened store must be at the model's weights (the same checkpoint step)."""
        theta = self._store_weights()
        for (name, _, _), p, t in zip(self._layout, self._params, theta):
            mine = _local(p).detach().reshape(-1).to("cpu")
            store = t.to(p.dtype)
            if not torch.equal(mine, store):
                i = int((mine != store).nonzero()[0])
                step = self._session.step_count
                self._drop_session()  # closes the store (and releases its lock)
                self._weights_checked = False
                raise csdkit.StoreError(
                    "store '{}' (committed step {}): expected the model's weights, found "
                    "others: {} element {} is {!r} in the model and {!r} in the store, so the "
                    "model is not at the store's step; call resume() to load the store's "
                    "weights into the model, or load the model checkpoint of step {}"
                    .format(self._store_dir, step, name, i, float(mine[i]), float(store[i]),
                            step))
        self._weights_checked = True

    @property
    def session(self):
        """The csdkit.Session (None before the store is opened or created)."""
        return self._session

    def resume(self, expected_step=None):
        """Opens the existing store now and loads its committed weights into the parameters
        (rounded to the parameters' dtype); returns the committed step.

        The store is the checkpoint: a training script restarted after a crash calls resume()
        and continues at the returned step. `expected_step`: the step the trainer expects (e.g.
        from its own checkpoint); another committed step raises csdkit.StoreError. Raises
        csdkit.StoreError when `store` holds no store, or a store of another model.
        """
        if not os.path.exists(os.path.join(self._store_dir, "manifest.json")):
            raise csdkit.StoreError("store '{}': expected a store to resume from, found none "
                                    "(the first step() creates it)".format(self._store_dir))
        for group in self.param_groups:
            self._check_group(group)
        self._ensure_session(check_weights=False)
        step = self._session.step_count
        if expected_step is not None and int(expected_step) != step:
            raise csdkit.StoreError("store '{}': expected committed step {} (the trainer's), "
                                    "found step {}".format(self._store_dir, int(expected_step),
                                                           step))
        theta = self._store_weights()
        with torch.no_grad():
            for p, t in zip(map(_local, self._params), theta):
                p.copy_(t.reshape(p.shape))
        self._weights_checked = True
        return step

    # -- the store's lifetime ---------------------------------------------------------------

    def close(self):
        """Closes the store (releasing its lock, so that another optimizer or `csdkit` command
        may open it) and removes the gradient hooks. Idempotent. A closed optimizer refuses
        step(), state_dict() and load_state_dict(); its last_report stays. Also what leaving a
        `with` block does."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        for h in self._grad_hooks:
            (h[1] if isinstance(h, tuple) else h).remove()
        self._grad_hooks.clear()
        self._arena_src.clear()
        self._arena_keep.clear()
        self._drop_session()  # the session's destructor closes the devices and the store

    def _drop_session(self):
        """Lets the session go (its destructor closes the devices and the store), after the
        CUDA copies into and out of its buffers."""
        if self._cuda is not None:
            self._cuda.close()
            self._cuda = None
        if self._session is not None:
            self._session.set_weights_hook(None)
        self._session = None

    @property
    def closed(self):
        """True after close()."""
        return self._closed

    def __enter__(self):
        self._check_open()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _check_open(self):
        if self._closed:
            raise RuntimeError("{}: closed (its store '{}' was released by close()); create a "
                               "new optimizer to use the store again"
                               .format(type(self).__name__, self._store_dir))

    def __getstate__(self):
        # copy.deepcopy and pickle go through here. A copy would be a second writer of the same
        # store (refused by its lock at its first step) or an optimizer without one; neither is
        # what a copy of a torch.optim optimizer is, so none is made.
        raise TypeError("{} cannot be copied or pickled: its state lives in the store '{}', "
                        "which has one writer; save state_dict() (torch.save) and load it into "
                        "a new optimizer instead".format(type(self).__name__,
                                                         getattr(self, "_store_dir", "?")))

    def add_param_group(self, param_group):
        """Adds a param group, as torch.optim.Optimizer.add_param_group (the way gradual
        unfreezing and progressive growing are written).

        Before the store exists the group joins the layout the first step() creates. Once it
        exists, the store grows: its committed state (weights, buffers, each parameter's step
        count, the groups' hyper-parameters) is carried into a store of the grown layout built
        beside it (`<store>.grow-<pid>`, same file system), whose new parameters start from
        their current values, the initial buffers and step count 0; that store replaces the
        old one in one atomic exchange of the two directories (renameat2 RENAME_EXCHANGE; a
        file system without it is refused with nothing changed), and the old store's files are
        removed. The committed step stays; the state the last commit replaced does not carry
        over (roll_back() has nothing to return to until the next step). Takes the store's
        size in host memory for the copy, and its read and write once.

        Raises what torch.optim raises for a bad group (a parameter already in another group,
        ...), ValueError for a parameter the kit cannot hold, csdkit.StoreError when the model
        is not at the store's weights (as step() does) or the store directory holds files the
        store did not write (they would be lost with the old store). On any error the
        optimizer and the store are as they were.
        """
        if not hasattr(self, "_store_dir"):  # torch.optim.Optimizer.__init__ is running
            super().add_param_group(param_group)
            return
        self._check_open()
        n_before = len(self.param_groups)
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        try:
            self._check_group(group)
            if group["params"] and self._needs_growth():
                self._grow_store()
        except BaseException:
            del self.param_groups[n_before:]
            raise
        if self._overlap:
            self._hook_params(group["params"])

    def _needs_growth(self):
        """Whether the store exists with fewer tensors than the param groups now hold. A store
        that already holds them all (one grown by an earlier process, reopened by a script that
        builds its optimizer and then adds the group again) just takes the group back."""
        if self._session is not None:
            return True
        manifest = os.path.join(self._store_dir, "manifest.json")
        if not os.path.exists(manifest):
            return False
        try:
            tensors = len(_read_json(manifest, _MAX_MANIFEST_BYTES)["layout"]["tensors"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise csdkit.StoreError("store '{}': expected a readable manifest.json, found {}"
                                    .format(self._store_dir, e)) from None
        return tensors < len(self._describe_model()[1])

    def _grow_store(self):
        """add_param_group on an existing store: the store of the grown layout replaces it,
        carrying its committed state (see add_param_group)."""
        name = type(self).__name__
        added = self.param_groups.pop()
        try:  # the store as it is, for the layout without the new group
            self._ensure_session(check_weights=True)
        finally:
            self.param_groups.append(added)
        sess = self._session
        params, layout = self._describe_model()  # checks the new parameters too
        n_old = len(self._layout)
        if len(layout) == n_old:  # FSDP2: the new group has no elements on this rank
            return
        devices = sess.devices
        vars_ = list(sess.vars)
        # Everything in the directory must be the store's own: the old store is removed below.
        extra = _foreign_files(self._store_dir, devices, vars_)
        if extra:
            raise csdkit.StoreError(
                "{}.add_param_group: the store '{}' holds '{}', which the store did not write; "
                "growing the store replaces its directory, so move that elsewhere first"
                .format(name, self._store_dir, extra[0]))
        store = os.path.abspath(self._store_dir)
        tmp = "{}.grow-{}".format(store, os.getpid())
        if os.path.lexists(tmp):
            raise csdkit.StoreError(
                "{}.add_param_group: '{}' exists (left by an interrupted add_param_group of a "
                "process with this pid: the store before or after growing, the other being "
                "'{}'); expected to create it; remove it or move it away".format(
                    name, tmp, self._store_dir))
        desc = sess.describe()
        step = sess.step_count
        new_params = params[n_old:]
        counts = list(sess.tensor_steps) + [0] * len(new_params)
        with torch.no_grad():
            theta = self._store_weights() + [
                _local(p).detach().to(device="cpu", dtype=torch.float32).reshape(-1)
                .contiguous() for p in new_params]
        bufs = {}
        for var in ("m", "v"):
            if var in vars_:
                flat = [torch.empty(n, dtype=torch.float32) for _, n, _ in self._layout]
                sess.export_state(var, flat)
                bufs[var] = flat + [None] * len(new_params)  # None: the initial value
        groups = list(sess.group_hyper) + [self._group_hyper(self._store_groups()[-1])]
        grown = None
        try:
            grown = csdkit.Session.create(
                tmp, layout, groups, theta, optimizer=self._optimizer, devices=devices,
                backend=self._backend, grad_dtype=sess.grad_dtype, out_dtype=sess.out_dtype,
                loss_scale=float(desc["loss_scale"]), device_mem=self._device_mem,
                link_model=self._link_model, ftz=bool(desc["ftz"]), seed=int(desc["seed"]),
                state=str(desc.get("state", "fp32")))
            if step > 0:
                grown.import_state(step, theta, m=bufs.get("m"), v=bufs.get("v"),
                                   group_hyper=groups, tensor_steps=counts)
            grown.verify()
            grown = None  # closes it (and releases its lock) before the exchange
            _exchange_dirs(store, tmp)
        except BaseException:
            grown = None
            if os.path.isdir(tmp):  # ours: made by Session.create above
                _remove_store_files(tmp, devices, vars_)
            raise
        # The store path names the grown store now; tmp the old one, still open here.
        self._drop_session()  # closes the old store
        self._arena_src.clear()
        self._arena_keep.clear()
        self._flat_acc = None
        self._ensure_session(check_weights=False)
        self._weights_checked = True  # old parameters at the store's weights, new ones taken as they are
        _remove_store_files(tmp, devices, vars_)

    # -- gradients handed over during backward (overlap_backward) ---------------------------

    def _hook_params(self, params):
        """Registers, for each parameter that requires a gradient, a hook that runs when
        backward has accumulated its gradient: torch >= 2.1's post-accumulate-grad hook, or on
        older torch a hook on the parameter's AccumulateGrad node (kept alive here, so that
        autograd reuses it). The hooks hold the optimizer weakly: they never keep it (and its
        store's lock) alive."""
        ref = weakref.ref(self)

        def ready(p):
            opt = ref()
            if opt is not None:
                opt._grad_ready(p)

        for p in params:
            if not isinstance(p, torch.Tensor) or not p.requires_grad:
                continue
            if hasattr(p, "register_post_accumulate_grad_hook"):
                self._grad_hooks.append(p.register_post_accumulate_grad_hook(ready))
            else:
                with torch.enable_grad():
                    acc = p.expand_as(p).grad_fn.next_functions[0][0]
                handle = acc.register_hook(lambda *_unused, p=p: ready(p))
                self._grad_hooks.append((acc, handle))

    def _grad_ready(self, p):
        """Backward has finished p's gradient (for this backward pass): queue its copy into the
        gradient arena (the time spent here, in backward, is step()'s report's
        host_seconds['hooks'])."""
        t0 = time.perf_counter()
        try:
            self._grad_ready_timed(p)
        finally:
            self._hook_seconds += time.perf_counter() - t0

    def _grad_ready_timed(self, p):
        """_grad_ready's work. Only gradients the kit takes as they are (the parameter's dtype
        and shape, contiguous; on the CPU, or on the CUDA device of CudaArena) are queued;
        anything else is left to step(), which checks it."""
        if self._session is None or self._compress is not None:
            return
        t = self._arena_index.get(id(p))
        g = p.grad
        cuda = self._cuda is not None and g is not None and g.is_cuda \
            and g.device == self._cuda.device
        if t is None or g is None or _is_dtensor(g) or not (cuda or g.device.type == "cpu") \
                or g.is_sparse or g.dtype != p.dtype or g.shape != p.shape \
                or not g.is_contiguous():
            return
        if t in self._spec_seen or not self._spec_passes:
            # A backward pass begins (several per step with gradient accumulation).
            self._spec_passes += 1
            self._spec_seen = set()
        self._spec_seen.add(t)
        if not self._spec_started and self._spec_last is not None \
                and self._spec_passes == self._spec_last[2]:
            self._spec_started = True
            if self._start_speculation():
                # The earlier passes' copies no longer count (the kit waits for this pass's);
                # step() copies what this pass does not queue.
                self._arena_src.clear()
        if cuda:
            self._cuda.queue(t, g)
            self._arena_src[t] = (g, g._version, None)
            return
        self._session.queue_fill(t, g)
        self._arena_src[t] = (g, g._version, _probe(g))
        self._arena_keep.append(g)

    def _start_speculation(self):
        """At the first gradient of this step's last backward pass (as many passes as the last
        step had), starts the update in the kit with what the last step had -- the same
        parameters with gradients, the same loss scale, no clipping, every gradient finite --
        and this step's hyper-parameters. step() confirms it or has it abandoned (the result is
        the same bit for bit). SmartUpdate only; after k abandoned ones in a row, the next
        2^k - 1 steps (at most 63) are left out before the next try."""
        if self._mode != "smart":
            return False
        if self._spec_skip > 0:
            self._spec_skip -= 1
            return False
        has_grad, loss_scale, _ = self._spec_last
        try:
            if self._cuda is not None:
                self._cuda.finish()  # the earlier passes' copies end first
            self._session.start_speculative(has_grad, group_hyper=self._session_hyper(),
                                            loss_scale=loss_scale,
                                            weights_out=self._weights_out(), mode=self._mode)
        except Exception:  # pylint: disable=broad-except
            return False  # step() finds and raises what is wrong
        return True

    def _session_hyper(self):
        """This step's hyper-parameters of the session's groups, in its order."""
        return [self._group_hyper(g) for g in self._store_groups()]

    def _uses_arena(self):
        return self._cuda is not None or (self._overlap and self._compress is None
                                          and all(s is None for s in self._staging))

    def _weights_out(self):
        """The session's weights_out: the parameters (CPU), their pinned staging buffers
        (CUDA without the arena), None for the arena's (they take theirs from the GPU buffer)."""
        if self._cuda is not None:
            return [None] * len(self._params)
        return [_local(p) if s is None else s[1] for p, s in zip(self._params, self._staging)]

    def _step_arena(self, grads, hyper, out, loss_scale, found_inf, stale=False):
        """The dense step from the gradient arena: each gradient queued during backward is
        used as it was copied, unless the tensor changed since (another tensor in p.grad, or
        one modified in place: clip_grad_norm_, GradScaler.unscale_, a second backward of
        gradient accumulation), which is copied again now. CUDA gradients (CudaArena): a
        version bump or another tensor is seen here, a change in place without one by its
        norm (CudaArena.changed); `stale`: every one is copied again (GradScaler.unscale_ ran,
        which bumps no version)."""
        sess = self._session
        cu = self._cuda
        has_grad = [g is not None for g in grads]
        try:
            kept = []  # CUDA entries whose copy during backward stands so far
            for t, g in enumerate(grads):
                if g is None:
                    continue
                src = self._arena_src.get(t)
                if cu is not None and g.is_cuda:
                    if stale or src is None or src[0] is not g or src[1] != g._version:
                        cu.queue(t, g)
                    else:
                        kept.append(t)
                elif src is None or src[0] is not g or src[1] != g._version \
                        or src[2] is None or src[2] != _probe(g):
                    sess.fill(t, g)
            if cu is not None:
                cu.finish()
                for t in cu.changed(kept, [grads[t] for t in kept]):
                    cu.queue(t, grads[t])
                cu.finish()
                cu.before_step()
            self._marks = [time.perf_counter()]
            rep = sess.step_arena(has_grad, group_hyper=hyper, weights_out=out,
                                  mode=self._mode, loss_scale=loss_scale, found_inf=found_inf,
                                  max_norm=self._max_grad_norm,
                                  return_norm=self._max_grad_norm > 0)
            spec = rep.get("speculation")
            if spec is not None and spec != "committed":
                self._spec_skip = min(64, 1 << self._spec_misses) - 1
                self._spec_misses = min(self._spec_misses + 1, 6)
            elif spec == "committed":
                self._spec_misses = 0
            self._spec_last = (has_grad, loss_scale, max(self._spec_passes, 1))
            return rep
        finally:
            if cu is not None:
                cu.abort()  # (nothing left after a step; after an error, what was announced)
            self._arena_src.clear()
            self._arena_keep.clear()
            self._spec_passes = 0
            self._spec_seen = set()
            self._spec_started = False

    # -- the step ---------------------------------------------------------------------------

    @torch.no_grad()
    def step(self, closure=None, grad_scaler=None):
        """Performs a single optimization step in the kit.

        Args:
            closure (callable, optional): A closure that reevaluates the model and returns the
                loss.
            grad_scaler (torch.cuda.amp.GradScaler, optional): passed by GradScaler.step():
                the gradients carry its scale (or were unscaled by scaler.unscale_), which the
                kit divides out in its step; a non-finite gradient skips the step, and the
                scaler learns it (its found_inf for this optimizer) so that scaler.update()
                backs off.

        The report (last_report) gets 'host_seconds': perf_counter() intervals of this call
        outside the runtime's own clock, which together cover it up to the report's hand-over:
        'setup' (group checks, opening or creating the store, the GradScaler's state),
        'gradients_out' (checks, this step's hyper-parameters; CUDA: the copies into the
        gradient arena not made during backward, the wait for them and the check of those made
        during backward; CPU: the fills not made during backward; compress=: accumulation,
        selection, encoding and the streams' copy to the host),
        'session' (the binding's step call: the runtime's step -- the report's 'seconds' --, the
        weights written to the parameters (CPU) or sent to the GPU buffer (CUDA) as they come),
        'weights_in' (CUDA: the parameters written from the GPU buffer, queued without waiting
        for them; compress=: also the residual's update), and 'hooks' (the time spent in the
        gradient hooks during backward since the last step). 'seconds_in_step': the part of the
        runtime's step that ran inside this call -- its 'seconds' unless the step started during
        backward (overlap_backward: then from the binding's call on, by the report's
        'started_at'/'finished_at').
        'host_bytes': the bytes moved on the host for the step (docs/trainer.md, "CUDA
        parameters: each byte once"), with 'weights_sent' (host-to-device) added here.
        """
        t_enter = time.perf_counter()
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._check_group(group)
        self._ensure_session()
        loss_scale, found_inf, scaler_state, unscaled = None, False, None, False
        if grad_scaler is not None:
            scaler_state = grad_scaler._per_optimizer_states[id(self)]
            if scaler_state["stage"].name == "UNSCALED":
                unscaled = True
                # scaler.unscale_(self) ran (e.g. before clip_grad_norm_): the gradients are
                # unscaled and its inf check is recorded.
                loss_scale = 1.0
                found_inf = any(float(t.sum()) > 0
                                for t in scaler_state["found_inf_per_device"].values())
            else:
                loss_scale = float(grad_scaler._get_scale_async())
        t_grads = time.perf_counter()
        if self._compress is not None:
            rep = self._step_compressed(self._checked_grads(staged=False), loss_scale, found_inf)
            if rep is not None:
                rep["host_seconds"] = self._host_seconds(t_enter, t_grads)
                self._finish_step(rep, grad_scaler, scaler_state)
            return loss
        arena = self._uses_arena()
        grads = self._checked_grads(staged=True)  # (the arena path has no CUDA staging)
        if all(g is None for g in grads):
            if self._cuda is not None:
                self._cuda.abort()
            self._arena_src.clear()
            self._arena_keep.clear()
            self._spec_passes = 0
            self._spec_seen = set()
            self._spec_started = False
            return loss  # as torch.optim: nothing to update, no step counted
        if any(s is not None for s in self._staging):
            torch.cuda.synchronize()
        hyper = self._session_hyper()
        out = self._weights_out()
        if arena:
            rep = self._step_arena(grads, hyper, out, loss_scale, found_inf, stale=unscaled)
        else:
            self._marks = [time.perf_counter()]
            rep = self._session.step(grads, group_hyper=hyper, weights_out=out, mode=self._mode,
                                     loss_scale=loss_scale, found_inf=found_inf,
                                     max_norm=self._max_grad_norm,
                                     return_norm=self._max_grad_norm > 0)
        self._marks.append(time.perf_counter())
        # The part of the runtime's step inside this call (all of it, unless it started during
        # backward): from the call's start on time.monotonic(), the report's clock.
        rep["seconds_in_step"] = min(rep["seconds"], max(
            0.0, rep["finished_at"] - max(rep["started_at"], time.monotonic() - (
                self._marks[1] - self._marks[0]))))
        hb = rep["host_bytes"]
        hb["weights_sent"] = 0  # host-to-device bytes of the new weights
        if self._cuda is not None:
            if not rep["skipped"]:
                self._cuda.weights_in([t for t, g in enumerate(grads) if g is not None])
            hb["weights_sent"] = self._cuda.bytes_sent
        for p, s, g in zip(map(_local, self._params), self._staging, grads):
            if s is not None and g is not None:  # (CUDA through the pinned staging buffers)
                hb["gradients_received"] += g.numel() * g.element_size()
                if not rep["skipped"]:
                    p.copy_(s[1].reshape(p.shape), non_blocking=True)
                    hb["weights_sent"] += p.numel() * p.element_size()
        rep["host_seconds"] = self._host_seconds(t_enter, t_grads)
        self._finish_step(rep, grad_scaler, scaler_state)
        return loss

    def _host_seconds(self, t_enter, t_grads):
        """step()'s intervals around the binding's call (see step()), ending now, and the time
        spent in the gradient hooks during backward since the last step."""
        t_call, t_back = self._marks
        hooks, self._hook_seconds = self._hook_seconds, 0.0
        return {"setup": t_grads - t_enter, "gradients_out": t_call - t_grads,
                "session": t_back - t_call, "weights_in": time.perf_counter() - t_back,
                "hooks": hooks}

    def _finish_step(self, rep, grad_scaler, scaler_state):
        """Tells the GradScaler whether the step was skipped; keeps the report."""
        if scaler_state is not None:
            dev = grad_scaler._scale.device
            scaler_state["found_inf_per_device"] = {
                dev: torch.full((1,), 1.0 if rep["skipped"] else 0.0, dtype=torch.float32,
                                device=dev)}
        if rep.get("warning"):
            # Committed, but the store may not keep it through a power loss: not an error (the
            # step is done; retrying would step twice).
            warnings.warn(rep["warning"], RuntimeWarning, stacklevel=3)
        self.last_report = rep

    def _checked_grads(self, staged):
        """Each parameter's .grad (None allowed), checked; with `staged`, CUDA gradients are
        copied into their pinned host buffers (not yet synchronized) and those are returned."""
        grads = []
        for (name, _, _), p, stage in zip(self._layout, self._params, self._staging):
            g = p.grad
            if g is not None:
                if _is_dtensor(p):  # FSDP2: this rank's shard of the gradient
                    if not _is_dtensor(g) or g.device_mesh != p.device_mesh \
                            or tuple(g.placements) != tuple(p.placements):
                        raise ValueError("grad of {}: expected a DTensor sharded as the parameter "
                                         "(placements {}), found {}".format(
                                             name, tuple(p.placements),
                                             "placements {}".format(tuple(g.placements))
                                             if _is_dtensor(g) else "a plain tensor"))
                    g, p = _local(g), _local(p)
                if g.is_sparse:
                    raise RuntimeError("{} does not support sparse gradients ({})"
                                       .format(type(self).__name__, name))
                if g.shape != p.shape:
                    raise ValueError("grad of {}: expected shape {}, found {}"
                                     .format(name, tuple(p.shape), tuple(g.shape)))
                if g.device != p.device:
                    raise ValueError("grad of {}: expected device {} (the parameter's), found {}"
                                     .format(name, p.device, g.device))
                if (stage is not None or not staged or g.device.type != "cpu") \
                        and g.dtype != p.dtype:
                    # (CPU gradients of the dense path: the binding checks them.)
                    raise ValueError("grad of {}: expected dtype {} (the parameter's), "
                                     "found {}".format(name, p.dtype, g.dtype))
                if staged and stage is not None:
                    stage[0].copy_(g.reshape(-1), non_blocking=True)
                    g = stage[0]
            grads.append(g)
        return grads

    # -- compression ------------------------------------------------------------------------
    # A compressed step in four pieces, shared with csdkit.torch.distributed (whose ranks step
    # their slice of the model through their store exactly as this class steps a whole model
    # through its own): _topk_accumulate, _topk_sumsq, _topk_encode, _topk_commit. They work on
    # the store's layout entries (session.layout); where entry j keeps its error-feedback
    # residual is said by _topk_residual(j) / _topk_keep(j, ...) (here: self._pystate[p] of the
    # j-th parameter, in the parameter's shape).

    def _step_compressed(self, grads, loss_scale, found_inf):
        """The step with compress=TopK: accumulate (gradient + residual), compress every
        (device, subgroup) slice where the gradient lives, step the kit with the streams, and
        keep the new residual only when the step was not skipped. Returns the report, or None
        when no parameter has a gradient (no step, as torch.optim)."""
        if all(g is None for g in grads):
            return None
        # Parameters without a gradient (None) are left alone, as by torch.optim: nothing of
        # them is sent, the kit keeps their weights and state, their residual stays.
        no_grad = [i for i, g in enumerate(grads) if g is None]
        devices = {g.device for g in grads if g is not None}
        if len(devices) != 1:
            raise ValueError("gradients: expected one device for the whole model with "
                             "compress= (the flattened gradient is built there), found {}"
                             .format(sorted(map(str, devices))))
        dev = devices.pop()
        scale = 1.0 if loss_scale is None else float(loss_scale)
        flat = self._topk_accumulate(grads, scale, dev)
        norm = None
        clip_coef = 1.0
        if self._max_grad_norm > 0:
            # The norm of the accumulated gradient (what the compressor sees), before
            # compression; as given, i.e. times the loss scale, as the dense path reports it.
            norm = math.sqrt(self._topk_sumsq(flat))
            if math.isfinite(norm):
                clip_coef = min(1.0, self._max_grad_norm / (norm / scale + 1e-6))
            # A non-finite norm means a non-finite value, which is kept: the kit skips.
        streams = self._topk_encode(flat)
        hyper = [self._group_hyper(g) for g in self._store_groups()]
        out = [_local(p) if s is None else s[1] for p, s in zip(self._params, self._staging)]
        self._marks = [time.perf_counter()]
        rep = self._session.step_sparse(streams, group_hyper=hyper, weights_out=out,
                                        mode=self._mode, loss_scale=loss_scale,
                                        found_inf=found_inf, clip_coef=clip_coef,
                                        no_grad=no_grad)
        self._marks.append(time.perf_counter())
        if norm is not None:
            rep["grad_norm"] = norm
        rep["host_bytes"]["weights_sent"] = 0
        if not rep["skipped"]:
            for p, s, g in zip(map(_local, self._params), self._staging, grads):
                if s is not None and g is not None:
                    p.copy_(s[1].reshape(p.shape), non_blocking=True)
                    rep["host_bytes"]["weights_sent"] += p.numel() * p.element_size()
            self._topk_commit(flat, grads, scale)
        return rep

    def _topk_accumulate(self, grads, scale, dev):
        """The accumulated gradient of the store's layout as one float32 tensor on `dev`
        (reused from step to step): layout entry j's elements (at session.tensor_offsets[j])
        are float32(grads[j]) + entry j's residual, one binary32 addition, the residual first
        rescaled to `scale` (this step's loss scale) when it was kept at another one (exact for
        GradScaler's power-of-two factors); zeros where grads[j] is None and in the group
        padding. `grads`: one tensor (any shape, the entry's element count) or None per
        entry."""
        sess = self._session
        offsets = sess.tensor_offsets
        total = max(sg["begin"] + sg["n"] for sg in sess.subgroups)
        if self._flat_acc is None or self._flat_acc.numel() != total \
                or self._flat_acc.device != dev:
            self._flat_acc = torch.zeros(total, dtype=torch.float32, device=dev)
        flat = self._flat_acc  # group padding stays 0: no entry is ever written there
        for j, (g, off, (_, n, _)) in enumerate(zip(grads, offsets, sess.layout)):
            dst = flat[off:off + n]
            if g is None:
                dst.zero_()
                continue
            dst.copy_(g.reshape(-1))
            if self._compress.error_feedback:
                res = self._topk_residual(j)
                if res is not None:
                    r, rs = res
                    r = r.reshape(-1).to(dev)
                    if rs != scale:
                        r = r * (scale / rs)
                    dst.add_(r)
        return flat

    def _topk_sumsq(self, flat):
        """The sum of squares of the accumulated gradient `flat`, in float64: each subgroup's
        sum on flat's device, added in subgroup order; a Python float."""
        return float(sum(flat[sg["begin"]:sg["begin"] + sg["n"]].double().square().sum()
                         for sg in self._session.subgroups))

    def _topk_encode(self, flat):
        """One (blk, idx, val) stream (CPU) per subgroup of the store, in session.subgroups'
        order, from the accumulated gradient `flat`, which becomes the candidate residual in
        place: what was not sent, and acc - float32(sent) where something was."""
        sess = self._session
        gdtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[
            sess.grad_dtype]
        streams = []
        for sg in sess.subgroups:
            seg = flat[sg["begin"]:sg["begin"] + sg["n"]]
            blk, idx, val, kept = self._compress.encode(seg, gdtype)
            # The residual of this slice, in place: the kept entries lose what was sent.
            seg.index_put_((kept,), seg[kept] - val.float())
            streams.append((blk.cpu(), idx.cpu(), val.cpu()))
        return streams

    def _topk_commit(self, flat, grads, scale):
        """After a step the kit took: the candidate residual in `flat` becomes the residual of
        every layout entry that had a gradient, kept at loss scale `scale`."""
        if not self._compress.error_feedback:
            return
        for j, (g, off, (_, n, _)) in enumerate(zip(grads, self._session.tensor_offsets,
                                                    self._session.layout)):
            if g is not None:
                self._topk_keep(j, flat[off:off + n], scale)

    def _topk_residual(self, j):
        """Layout entry j's residual as (float32 tensor, loss scale), or None (zero)."""
        st = self._pystate.get(self._params[j]) or {}
        res = st.get("topk_residual")
        if res is None:
            return None
        return res, float(st.get("topk_residual_scale", 1.0))

    def _topk_keep(self, j, values, scale):
        """Keeps `values` (1-D float32, layout entry j's elements) as entry j's residual."""
        p = self._params[j]
        st = self._pystate[p]
        res = st.get("topk_residual")
        if res is None or res.device != values.device or res.shape != p.shape:
            res = torch.empty(p.shape, dtype=torch.float32, device=values.device)
            st["topk_residual"] = res
        res.reshape(-1).copy_(values)
        st["topk_residual_scale"] = scale

    # -- state in PyTorch's format ----------------------------------------------------------

    def state_dict(self):
        """The optimizer state in torch.optim's format: {'state': {index: {...}}, 'param_groups':
        [...]}, loadable by torch.optim.X.load_state_dict (and by this class).

        Per parameter (index in param_groups order, as PyTorch numbers them): 'step' (a float32
        scalar tensor: the parameter's own step count, the committed steps in which it had a
        gradient) where PyTorch keeps one, and the optimizer's buffers (exp_avg / exp_avg_sq,
        momentum_buffer, sum) as float32 CPU tensors of the parameter's shape, read from the
        store's committed step (CRC-checked). For float16 / bfloat16 models also 'fp32_master':
        the fp32 master weights, which torch.optim ignores and load_state_dict here restores.
        A parameter that has not taken a step yet has no entry, as in torch.optim. Before the
        store exists the state is empty, as torch.optim's before its first step; a store that
        exists is opened (as by step()) and its committed step is what is returned, before
        this session's first step too. `state` (a read-only view) shows the same entries.

        DTensor (FSDP2) parameters: the buffers and fp32_master are DTensors of the parameter's
        mesh, placements, shape and stride whose local tensor is this rank's shard (on the
        shard's device), as torch.optim's under FSDP2, so that
        torch.distributed.checkpoint.state_dict.get_optimizer_state_dict() and dcp.save() save
        them as shards; 'step' is a plain tensor. A parameter whose shard on this rank has no
        element has an entry without 'step' once the store has a committed step (see
        _state_entries).
        """
        self._check_open()
        sd = self._base_state_dict()
        index_of = {}
        for g, sg in zip(self.param_groups, sd["param_groups"]):
            for p, i in zip(g["params"], sg["params"]):
                index_of.setdefault(id(p), i)
        sd["state"] = {index_of[id(p)]: st for p, st in self._state_entries().items()}
        return sd

    def _base_state_dict(self):
        """torch.optim.Optimizer.state_dict() (the param groups, its hooks) with `state` hidden
        while it packs it: the caller reads the store itself, once."""
        self._state_hidden = True
        try:
            return torch.optim.Optimizer.state_dict(self)
        finally:
            self._state_hidden = False

    def _state_params(self):
        """The parameters that have state (the keys of `state`), in param_groups order; reads
        no buffer."""
        return list(self._state_entries(buffers=False))

    def _state_entries(self, which=None, buffers=True):
        """{parameter: its entry of state_dict()['state'] (a new dict)} for the parameters in
        `which` (None: all) that have state, in param_groups order, read from the store's
        committed step (the store is opened if it exists; before it exists nothing has state).
        buffers=False: the values are None and nothing is read.

        Has state: a parameter with a step count > 0 or a Top-K residual. A DTensor parameter
        without elements on this rank (nothing in the store) gets, once the store has committed
        a step and if it requires a gradient, an entry of DTensors with no local element and no
        'step' (its count is kept by the ranks that hold its elements): so that its key exists
        on every rank, as with torch.optim under FSDP2, for
        torch.distributed.checkpoint.state_dict.set_optimizer_state_dict, which requires state
        for every parameter that requires a gradient."""
        self._check_open()
        if self._session is None:
            if not os.path.exists(os.path.join(self._store_dir, "manifest.json")):
                return {}
            self._ensure_session(check_weights=False)
        sess = self._session
        counts = sess.tensor_steps
        t_of = {id(p): t for t, p in enumerate(self._params)}
        want = None if which is None else {id(p) for p in which}
        chosen = []  # (parameter, its layout entry, or None for a shard without elements)
        for g in self.param_groups:
            for p in g["params"]:
                if want is not None and id(p) not in want:
                    continue
                t = t_of.get(id(p))
                if t is None:
                    if _empty_shard(p) and p.requires_grad and sess.step_count > 0:
                        chosen.append((p, None))
                elif counts[t] > 0 or self._residual_of(p) is not None:
                    chosen.append((p, t))
        if not buffers:
            return {p: None for p, _ in chosen}
        rows = [t for _, t in chosen if t is not None]

        def export(var):  # var of the chosen layout entries only (their subgroups are read)
            dst = [None] * len(self._params)
            for t in rows:
                dst[t] = torch.empty(self._layout[t][1], dtype=torch.float32)
            sess.export_state(var, dst)
            return dst
        vars_ = sess.vars
        exported = {var: export(var) for var in ("m", "v") if var in vars_ and rows}
        # q8 stores: the moments as stored too (codes of the tensor's whole blocks, absmax per
        # block), for plain parameters (a DTensor's shards would need a DTensor of codes).
        raw_rows = [t for p, t in chosen if t is not None and not _is_dtensor(p)]
        stored = {}
        if sess.state != "fp32" and raw_rows:
            for var in ("m", "v"):
                if var not in vars_:
                    continue
                codes = [None] * len(self._params)
                amax = [None] * len(self._params)
                for t in raw_rows:
                    nb = -(-self._layout[t][1] // 256)
                    codes[t] = torch.empty(nb * 256, dtype=torch.uint8)
                    amax[t] = torch.empty(nb, dtype=torch.float32)
                sess.export_state_q8(var, codes, amax)
                stored[var] = (codes, amax)
        master = (export("theta") if rows and self._params[0].dtype != torch.float32
                  else None)
        out = {}
        for p, t in chosen:
            shape = _local(p).shape
            st = {}
            if self._has_step_state and t is not None:
                st["step"] = torch.tensor(float(counts[t]))
            for var, key in self._state_keys.items():
                if var not in vars_:
                    st[key] = None  # (SGD without momentum)
                    continue
                buf = exported[var][t] if t is not None else torch.empty(0)
                st[key] = _as_param_state(buf.reshape(shape), p)
                if var in stored and stored[var][0][t] is not None:
                    st[key + "_q8"] = stored[var][0][t]
                    st[key + "_absmax"] = stored[var][1][t]
            if p.dtype != torch.float32:
                buf = master[t] if t is not None else torch.empty(0)
                st["fp32_master"] = _as_param_state(buf.reshape(shape), p)
            py = self._pystate.get(p) or {}
            res = py.get("topk_residual")
            if res is not None:
                # compress=TopK error feedback: what was not sent yet, in units of the gradient
                # as handed over at loss scale topk_residual_scale.
                st["topk_residual"] = res.detach().to("cpu", copy=True)
                st["topk_residual_scale"] = torch.tensor(
                    float(py.get("topk_residual_scale", 1.0)), dtype=torch.float64)
            out[p] = st
        return out

    def _residual_of(self, p):
        """p's Top-K residual kept in Python, or None."""
        return (self._pystate.get(p) or {}).get("topk_residual")

    def load_state_dict(self, state_dict):
        """Loads a state in torch.optim's format (from torch.optim.X.state_dict() or this
        class's) into the store, which commits it as one step (atomically).

        The param groups replace this optimizer's (hyper-parameters included), as torch.optim
        does. Per parameter the buffers must have the parameter's element count; parameters
        without state start from the initial state (zeros; Adagrad: initial_accumulator_value)
        at step count 0. Each parameter's 'step' becomes its step count in the store, and the
        store's committed step the largest of them (SGD, which keeps no 'step': 1 for a
        parameter with a momentum buffer, else 0). The weights are the parameters' current values (load the model first),
        or 'fp32_master' where present. Creates the store if it does not exist yet.

        The store's own committed state handed back -- o.load_state_dict(o.state_dict()), what
        Accelerate's prepare() does -- is recognised (step, buffers and weights equal bit for
        bit) and not imported: only the param groups change. If its step and buffers are the
        store's but the model's weights are not (a model not loaded to the store's step, as
        when HF Trainer resumes from an older checkpoint), nothing is imported either -- the
        store's weights are not replaced by the model's -- and step() refuses to run until a
        load of another state or resume() brings model and store to one step.
        """
        self._check_open()
        if not isinstance(state_dict, dict) or "state" not in state_dict \
                or "param_groups" not in state_dict:
            raise ValueError("state_dict: expected a dict with 'state' and 'param_groups' (an "
                             "optimizer's state_dict()), found {!r}".format(type(state_dict)))
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, sg in zip(self.param_groups, saved_groups):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
        new_groups = []
        for g, sg in zip(self.param_groups, saved_groups):
            ng = dict(g)
            ng.update({k: v for k, v in sg.items() if k != "params"})
            ng["params"] = g["params"]
            self._check_group(ng)
            new_groups.append(ng)
        # Saved index -> this optimizer's parameter.
        index_of = {}
        for g, sg in zip(self.param_groups, saved_groups):
            for p, idx in zip(g["params"], sg["params"]):
                index_of[id(p)] = idx
        saved_state = state_dict["state"]
        params, _ = self._describe_model()
        theta, bufs, steps = [], {var: [] for var in self._state_keys}, []
        raw = {var: [] for var in self._state_keys}  # q8: (codes, absmax) per parameter or None
        residuals = []  # compress=TopK error feedback per parameter: (residual, scale) or None
        for i, p in enumerate(params):
            st = saved_state.get(index_of[id(p)], {})
            what = "state[{}]".format(index_of[id(p)])
            master = st.get("fp32_master")
            theta.append(self._flat(master, p, what + "['fp32_master']") if master is not None
                         else _local(p).detach().to(device="cpu", dtype=torch.float32)
                         .reshape(-1).contiguous())
            for var, key in self._state_keys.items():
                t = st.get(key)
                bufs[var].append(None if t is None else self._flat(t, p, what + "['%s']" % key))
                codes, amax = st.get(key + "_q8"), st.get(key + "_absmax")
                raw[var].append(None if codes is None and amax is None else
                                _stored_moment(codes, amax, what, key))
            res = st.get("topk_residual")
            if res is not None:
                res = self._flat(res, p, what + "['topk_residual']")
                scale = _residual_scale(res, st, what)
                residuals.append((res.reshape(_local(p).shape).to(_local(p).device), scale))
            else:
                residuals.append(None)
            if "step" in st and self._has_step_state:
                s = st["step"]
                s = float(s.item() if torch.is_tensor(s) else s)
                if not (s >= 0 and s == int(s) and s < 2.0 ** 53):
                    raise ValueError("{}['step']: expected a whole number >= 0, found {!r}"
                                     .format(what, s))
                steps.append(int(s))
            elif self._has_step_state:
                steps.append(0)  # no state: it has not stepped
            else:  # SGD: what matters is whether the momentum buffer exists (the first step)
                steps.append(1 if any(bufs[var][-1] is not None for var in bufs) else 0)
        step = max(steps) if steps else 0
        # Apply: the groups first (the store records them with the imported step); a refusal
        # below puts this optimizer's back.
        old_groups = list(self.param_groups)
        self.param_groups[:] = new_groups
        try:
            self._ensure_session(check_weights=False)
            vars_ = self._session.vars
            for var in bufs:
                if var not in vars_ and any(b is not None for b in bufs[var]):
                    raise ValueError("state: '{}' buffers given, but the store '{}' keeps none "
                                     "(SGD: momentum was 0 when it was created)"
                                     .format(self._state_keys[var], self._store_dir))
            master_given = any("fp32_master" in saved_state.get(index_of[id(p)], {})
                               for p in params)
            hyper = [self._group_hyper(g) for g in self._store_groups()]
            # The store's own committed state handed back (o.load_state_dict(o.state_dict()),
            # as Accelerate's prepare() does) is not imported: the step count stays, and
            # nothing is written.
            if not self._is_committed_state(steps if self._has_step_state else None, theta,
                                            bufs, master_given):
                # A q8 store takes the moments as stored where the state has them (exact,
                # padding codes included); an fp32 store reads only the dequantized buffers.
                kw = {}
                if self._session.state != "fp32":
                    for var in raw:
                        if var in vars_ and any(r is not None for r in raw[var]):
                            kw[var + "_codes"] = [r and r[0] for r in raw[var]]
                            kw[var + "_absmax"] = [r and r[1] for r in raw[var]]
                self._session.import_state(
                    step, theta,
                    m=bufs["m"] if "m" in bufs and "m" in vars_ else None,
                    v=bufs["v"] if "v" in bufs and "v" in vars_ else None,
                    group_hyper=hyper, tensor_steps=steps, **kw)
                # The imported weights are the model's (or the state's fp32 masters): the store
                # is at them by definition, as a store this optimizer created.
                self._weights_checked = True
        except BaseException:
            self.param_groups[:] = old_groups
            raise
        for p, r in zip(params, residuals):
            st = self._pystate.pop(p, None) or {}
            st.pop("topk_residual", None)
            st.pop("topk_residual_scale", None)
            if r is not None:
                st["topk_residual"], st["topk_residual_scale"] = r
            if st:
                self._pystate[p] = st

    def _is_committed_state(self, counts, theta, bufs, master_given):
        """Whether a loaded state is the store's committed one: every parameter's step count
        (None: the state has none, as SGD's), every buffer (a parameter without one: at the
        initial value) and the weights equal, bit for bit. When only the weights differ and
        they were taken from the model (no 'fp32_master'), the model is not at the store's
        step: importing would make the model's weights the store's and lose its own, so that
        is refused."""
        sess = self._session
        if sess.step_count == 0 or (counts is not None and counts != list(sess.tensor_steps)):
            return False
        groups = self._store_groups()
        for var in bufs:
            if var not in sess.vars:
                if any(b is not None for b in bufs[var]):
                    return False
                continue
            stored = [torch.empty(n, dtype=torch.float32) for _, n, _ in self._layout]
            sess.export_state(var, stored)
            for (_, n, g), a, b in zip(self._layout, stored, bufs[var]):
                if b is None:  # the initial value: 0, or Adagrad's initial accumulator value
                    b = torch.full((n,), float(groups[g].get("initial_accumulator_value", 0.0)
                                               if var == "v" else 0.0), dtype=torch.float32)
                if not torch.equal(a, b):
                    return False
        stored = self._store_weights()
        for (name, _, _), a, b in zip(self._layout, stored, theta):
            if not torch.equal(a, b):
                if master_given:
                    return False
                # Step and buffers are the store's, the weights not: the model is not at the
                # store's step (HF Trainer resuming from an older checkpoint: Accelerate's
                # prepare() hands the optimizer its own state back before the checkpoint's
                # state is loaded). Importing would replace the store's weights with the
                # model's, so nothing is imported; step() refuses a model not at the store's
                # weights until a load (or resume()) brings the two to one step.
                self._weights_checked = False
                return True
        return True

    @staticmethod
    def _flat(t, p, what):
        if not torch.is_tensor(t):
            raise ValueError("{}: expected a tensor, found {!r}".format(what, type(t)))
        t = _local_state(t, p, what)  # DTensor (FSDP2): this rank's shard
        p = _local(p)
        if t.numel() != p.numel():
            raise ValueError("{}: expected {} elements (shape {}, the parameter's), found shape "
                             "{}".format(what, p.numel(), tuple(p.shape), tuple(t.shape)))
        return t.detach().to(device="cpu", dtype=torch.float32).reshape(-1).contiguous()

    # -- per optimizer ----------------------------------------------------------------------

    def _group_hyper(self, group):
        raise NotImplementedError

    def _check_group(self, group):
        if group.get("maximize", False):
            raise NotImplementedError("{}: maximize=True is not implemented by the kit"
                                      .format(type(self).__name__))
        for flag in ("capturable", "differentiable"):
            if group.get(flag, False):
                raise NotImplementedError("{}: {}=True is not implemented by the kit"
                                          .format(type(self).__name__, flag))


def _check_adam_args(lr, betas, eps, weight_decay):
    # torch.optim.Adam(W)'s checks and messages.
    if not 0.0 <= lr:
        raise ValueError("Invalid learning rate: {}".format(lr))
    if not 0.0 <= eps:
        raise ValueError("Invalid epsilon value: {}".format(eps))
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))
    if not 0.0 <= weight_decay:
        raise ValueError("Invalid weight_decay value: {}".format(weight_decay))


def _residual_scale(res, st, what):
    """A loaded Top-K residual's checks (finite values) and its scale from the state entry `st`
    (st['topk_residual_scale'], default 1.0; a finite number > 0), as a float. `what` names the
    entry in the errors. Shared by the one-process and the distributed load_state_dict."""
    if not bool(torch.isfinite(res).all()):
        raise ValueError("{}['topk_residual']: expected finite values, found a "
                         "non-finite one".format(what))
    scale = st.get("topk_residual_scale", 1.0)
    scale = float(scale.item() if torch.is_tensor(scale) else scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError("{}['topk_residual_scale']: expected a finite number > 0, "
                         "found {!r}".format(what, scale))
    return scale


_KIT_DOC = """
    The kit's arguments (keyword only):
        store (str or os.PathLike, required): the store's directory. The first step() creates
            the store there from the parameters, or opens the store it holds, which must be one
            of this model and optimizer at the model's weights (see resume()). Checked at
            construction: a path that can be created, or an existing store of this optimizer.
        devices (int, optional): computational storage devices of a new store (default 1); an
            existing store is opened with its own count, and a different value is refused.
        backend (str): the devices' kernel: 'model' (the bit-accurate C++ model, default),
            'rtl' (the Verilated RTL) or 'opencl'.
        device_mem (int): each device's memory in bytes (default 4 GiB); sizes the subgroups.
        link_model (bool): book each step on the SmartSSD link model (report's
            'virtual_seconds'; default True).
        mode (str): 'smart' (the update on the devices, default) or 'baseline' (ZeRO-Infinity
            style: the state over the shared link, the update on the host).
        max_grad_norm (float, optional): clip by the global L2 norm as
            torch.nn.utils.clip_grad_norm_ does, with the norm computed while the kit reads the
            gradients (no second pass); None: no clipping. With compress=, the norm of the
            accumulated gradient before compression.
        compress (csdkit.torch.TopK, optional): Top-K gradient streams per (device, subgroup)
            with error feedback (the residual in state[p]['topk_residual']); None: dense.
        overlap_backward (bool): hand CPU gradients to the kit as backward finishes each (a
            hook per parameter; the kit copies and checks them while backward goes on), so that
            step() makes no pass over them; a gradient changed after backward is read again at
            step(). From the second step on (SmartUpdate), the kit's step itself starts during
            backward, taking the last step's parameters-with-gradients, loss scale and no
            clipping as given: step() lets it commit when that is what the step turns out to
            be, else abandons it and steps again (last_report['speculation']). Bit for bit the
            step of overlap_backward=False. Default True; CUDA parameters, compress= and
            csdkit.torch.distributed take the serial path.
        fused (bool, optional): True folds torch.amp.GradScaler's unscale into the kit's step
            (GradScaler.step() hands itself over instead of unscaling first), as torch's fused
            optimizers do; trainers then refuse their own gradient clipping (Lightning's
            gradient_clip_val): use max_grad_norm. Default None: True for float16/bfloat16
            parameters (GradScaler cannot unscale their gradients itself), False for float32
            ones (mixed precision by autocast).

    A step returns the loss of `closure` when given; last_report holds the runtime's report.
    close() (or leaving a `with` block) releases the store. Deviations from torch.optim:
    docs/trainer.md.
"""


class AdamW(_StoreOptimizer):
    r"""AdamW (decoupled weight decay) whose optimizer state lives in a csdkit store and whose
    update runs on its devices: torch.optim.AdamW's arguments and defaults plus the kit's.

    Args:
        params (iterable): parameters or dicts defining parameter groups (float32, float16 or
            bfloat16, one dtype for the model; CPU or CUDA).
        lr (float): learning rate (default 1e-3).
        betas (Tuple[float, float]): coefficients of the running averages (default
            (0.9, 0.999)).
        eps (float): added to the denominator (default 1e-8).
        weight_decay (float): decoupled weight decay (default 1e-2).
        amsgrad, maximize, capturable, differentiable: accepted for compatibility; True is
            refused (NotImplementedError). foreach: ignored (the kit has one implementation).

    Per element, at step t, in binary32 without fused multiply-add:
        theta <- theta * (1 - lr * weight_decay)
        m <- beta1 * m + (1 - beta1) * g
        v <- beta2 * v + (1 - beta2) * g * g
        theta <- theta - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
    (the kernel's order of operations is normative: docs/optimizers.md). State (state_dict):
    step, exp_avg, exp_avg_sq.
    """

    _optimizer = "adamw"
    _state_keys = {"m": "exp_avg", "v": "exp_avg_sq"}

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None, store, devices=None, backend="model",
                 device_mem=4 << 30, link_model=True, mode="smart", max_grad_norm=None,
                 compress=None, overlap_backward=True, state="fp32"):
        _check_adam_args(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        foreach=foreach, maximize=maximize, capturable=capturable,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults, _kit_args(locals()))

    def _check_group(self, group):
        super()._check_group(group)
        if group.get("amsgrad", False):
            raise NotImplementedError("{}: amsgrad=True is not implemented by the kit"
                                      .format(type(self).__name__))

    def _group_hyper(self, group):
        b1, b2 = group["betas"]
        return dict(lr=float(group["lr"]), beta1=float(b1), beta2=float(b2),
                    eps=float(group["eps"]), weight_decay=float(group["weight_decay"]))


class Adam(AdamW):
    r"""Adam (L2 weight decay folded into the gradient: g + weight_decay * theta) whose
    optimizer state lives in a csdkit store and whose update runs on its devices:
    torch.optim.Adam's arguments and defaults (weight_decay=0) plus the kit's.

    Args:
        params, lr, betas, eps: as torch.optim.Adam (defaults 1e-3, (0.9, 0.999), 1e-8).
        weight_decay (float): L2 penalty (default 0).
        amsgrad, maximize, capturable, differentiable: True is refused (NotImplementedError).
        foreach: ignored.

    State (state_dict): step, exp_avg, exp_avg_sq.
    """

    _optimizer = "adam"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, store, devices=None, backend="model",
                 device_mem=4 << 30, link_model=True, mode="smart", max_grad_norm=None,
                 compress=None, overlap_backward=True, state="fp32"):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         **_kit_args(locals()))


class SGD(_StoreOptimizer):
    r"""SGD (momentum, dampening, Nesterov, L2 weight decay) whose optimizer state lives in a
    csdkit store and whose update runs on its devices: torch.optim.SGD's arguments plus the
    kit's.

    Args:
        params (iterable): as torch.optim.SGD.
        lr (float): learning rate (required).
        momentum, dampening, weight_decay (float), nesterov (bool): as torch.optim.SGD (defaults
            0, 0, 0, False). The store keeps a momentum buffer only when momentum != 0 at its
            creation; turning momentum on or off later is refused.
        maximize, differentiable: True is refused (NotImplementedError). foreach: ignored.

    State (state_dict): momentum_buffer (None without momentum); PyTorch keeps no step.
    """

    _optimizer = "sgd"
    _state_keys = {"m": "momentum_buffer"}
    _has_step_state = False

    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None, store, devices=None, backend="model", device_mem=4 << 30,
                 link_model=True, mode="smart", max_grad_norm=None, compress=None,
                 overlap_backward=True, state="fp32"):
        if lr is not required and lr < 0.0:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if momentum < 0.0:
            raise ValueError("Invalid momentum value: {}".format(momentum))
        if weight_decay < 0.0:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults, _kit_args(locals()))

    def _group_hyper(self, group):
        return dict(lr=float(group["lr"]), momentum=float(group["momentum"]),
                    dampening=float(group["dampening"]), nesterov=bool(group["nesterov"]),
                    weight_decay=float(group["weight_decay"]))


class Adagrad(_StoreOptimizer):
    r"""Adagrad (lr decay, L2 weight decay, initial accumulator value) whose optimizer state
    lives in a csdkit store and whose update runs on its devices: torch.optim.Adagrad's
    arguments and defaults plus the kit's.

    Args:
        params, lr, lr_decay, weight_decay, initial_accumulator_value, eps: as
            torch.optim.Adagrad (defaults 1e-2, 0, 0, 0, 1e-10); initial_accumulator_value is
            used when the store is created.
        maximize, differentiable: True is refused (NotImplementedError). foreach: ignored.

    State (state_dict): step, sum.
    """

    _optimizer = "adagrad"
    _state_keys = {"v": "sum"}

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None,
                 store, devices=None, backend="model", device_mem=4 << 30, link_model=True,
                 mode="smart", max_grad_norm=None, compress=None, overlap_backward=True, state="fp32"):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= lr_decay:
            raise ValueError("Invalid lr_decay value: {}".format(lr_decay))
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        if not 0.0 <= initial_accumulator_value:
            raise ValueError("Invalid initial_accumulator_value value: {}"
                             .format(initial_accumulator_value))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults, _kit_args(locals()))

    def _group_hyper(self, group):
        return dict(lr=float(group["lr"]), lr_decay=float(group["lr_decay"]),
                    eps=float(group["eps"]), weight_decay=float(group["weight_decay"]),
                    initial_accumulator_value=float(group["initial_accumulator_value"]))


class Lion(_StoreOptimizer):
    r"""Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms") whose optimizer
    state lives in a csdkit store and whose update runs on its devices. PyTorch has no Lion;
    the arguments and defaults are the paper's reference ones.

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float): learning rate (default 1e-4).
        betas (Tuple[float, float]): interpolation and momentum coefficients (default
            (0.9, 0.99)).
        weight_decay (float): decoupled, as AdamW's (default 0).
        maximize: True is refused (NotImplementedError).

    Per element, in binary32 without fused multiply-add:
        c <- beta1 * m + (1 - beta1) * g
        theta <- theta * (1 - lr * weight_decay) - lr * sign(c)
        m <- beta2 * m + (1 - beta2) * g
    State (state_dict): step (the store's step count; Lion's update does not use it), exp_avg.
    """

    _optimizer = "lion"
    _state_keys = {"m": "exp_avg"}

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, *, maximize=False,
                 fused=None, store, devices=None, backend="model", device_mem=4 << 30,
                 link_model=True, mode="smart", max_grad_norm=None, compress=None,
                 overlap_backward=True, state="fp32"):
        _check_adam_args(lr, betas, 0.0, weight_decay)  # Lion has no eps
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay, maximize=maximize,
                        fused=fused)
        super().__init__(params, defaults, _kit_args(locals()))

    def _group_hyper(self, group):
        b1, b2 = group["betas"]
        return dict(lr=float(group["lr"]), beta1=float(b1), beta2=float(b2),
                    weight_decay=float(group["weight_decay"]))


# The kit's arguments, common to every class, after each one's own (a class body's docstring
# must be a literal: appended here).
for _cls in (AdamW, Adam, SGD, Adagrad, Lion):
    _cls.__doc__ += _KIT_DOC
del _cls
