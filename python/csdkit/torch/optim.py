"""torch.optim optimizers over a csdkit store (a thin Optimizer class over the kit's step).

Each optimizer keeps no state in Python: the fp32 master weights and the optimizer state (m,
v, momentum buffer, sum of squares) live in the store (`store=` directory, one subdirectory per
device), and every step runs there:

  * the store is created on the first step() from the current parameters (all parameters of
    all param groups, in order, frozen ones included: their gradient is None, so they and
    their state stay unchanged), or opened when `store` already holds one: then it must be the
    store of this model (same tensors, sizes and groups), else csdkit.StoreError;
  * every step hands over each parameter's .grad by address (None allowed), with this step's
    hyper-parameters read from self.param_groups (torch.optim.lr_scheduler works unchanged),
    and the kit writes the updated weights back into the parameters in place.

Parameters may be float32 (gradients float32; the fp32 weights come back over the link) or
float16/bfloat16 (gradients of that dtype; the kit keeps fp32 master weights and returns a
correctly rounded copy). Deviations from torch.optim are listed in docs/trainer-python.md.
"""

import os

import torch
from torch.optim.optimizer import required

import csdkit

__all__ = ["AdamW", "Adam", "SGD", "Adagrad"]

_KIT_DTYPE = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


class _StoreOptimizer(torch.optim.Optimizer):
    """The shared skeleton: layout, store creation/opening, gradients in, weights out.

    Subclasses set _optimizer (the kit's name) and implement _group_hyper(group) -> dict in
    the kit's names (OptimizerConfig: lr, beta1, beta2, eps, weight_decay, ...), and
    _check_group(group) raising for options the kit does not implement.
    """

    _optimizer = None

    def __init__(self, params, defaults, store, devices, backend, device_mem, link_model,
                 mode):
        if store is None or not isinstance(store, (str, os.PathLike)) or not str(store):
            raise ValueError("Invalid store: expected a directory path, found {!r}".format(store))
        if not isinstance(devices, int) or isinstance(devices, bool) or devices < 1:
            raise ValueError("Invalid devices value: {!r} (expected an int >= 1)".format(devices))
        if backend not in ("model", "rtl", "opencl"):
            raise ValueError("Invalid backend: {!r} (expected 'model', 'rtl' or 'opencl')"
                             .format(backend))
        if mode not in ("smart", "baseline"):
            raise ValueError("Invalid mode: {!r} (expected 'smart' or 'baseline')".format(mode))
        if not isinstance(device_mem, int) or device_mem <= 0:
            raise ValueError("Invalid device_mem value: {!r} (expected bytes > 0)"
                             .format(device_mem))
        super().__init__(params, defaults)
        self._store_dir = os.fspath(store)
        self._devices = devices
        self._backend = backend
        self._device_mem = device_mem
        self._link_model = bool(link_model)
        self._mode = mode
        self._session = None
        self._params = None      # the parameters in layout order
        self._layout = None      # [(name, numel, group)]
        self._kit_groups = None  # torch param_groups index -> kit group number (None: empty)
        #: The report of the last step as a dict (csdkit StepReport), or None before any.
        self.last_report = None

    # -- the store --------------------------------------------------------------------------

    def _describe_model(self):
        params, layout, kit_groups = [], [], []
        g_kit = 0
        for gi, group in enumerate(self.param_groups):
            if not group["params"]:
                kit_groups.append(None)
                continue
            kit_groups.append(g_kit)
            for pi, p in enumerate(group["params"]):
                name = "param_groups[{}].params[{}]".format(gi, pi)
                if p.is_sparse or p.layout != torch.strided:
                    raise ValueError("{}: expected a dense parameter, found layout {}"
                                     .format(name, p.layout))
                if p.device.type != "cpu":
                    raise ValueError("{}: expected a CPU parameter (the kit reads gradients and "
                                     "writes weights in host memory), found device {}"
                                     .format(name, p.device))
                if p.dtype not in _KIT_DTYPE:
                    raise ValueError("{}: expected dtype torch.float32, torch.float16 or "
                                     "torch.bfloat16, found {}".format(name, p.dtype))
                if not p.is_contiguous():
                    raise ValueError("{}: expected a contiguous parameter (updated in place by "
                                     "address), found strides {}".format(name, p.stride()))
                if p.numel() == 0:
                    raise ValueError("{}: expected a parameter with elements, found shape {}"
                                     .format(name, tuple(p.shape)))
                params.append(p)
                layout.append((name, p.numel(), g_kit))
            g_kit += 1
        dtypes = {p.dtype for p in params}
        if len(dtypes) != 1:
            raise ValueError("parameters: expected one dtype for the whole model (the store has "
                             "one gradient dtype), found {}".format(sorted(map(str, dtypes))))
        return params, layout, kit_groups

    def _ensure_session(self):
        params, layout, kit_groups = self._describe_model()
        if self._session is not None:
            if layout != self._layout or any(a is not b for a, b in zip(params, self._params)):
                raise ValueError("param_groups: expected the parameters the store was created "
                                 "for ({} tensors), found another set (add_param_group or a "
                                 "changed param list after the first step is not supported)"
                                 .format(len(self._layout)))
            return
        hyper = [self._group_hyper(g) for g in self.param_groups if g["params"]]
        if os.path.exists(os.path.join(self._store_dir, "manifest.json")):
            session = csdkit.Session.open(self._store_dir, layout, backend=self._backend,
                                          device_mem=self._device_mem,
                                          link_model=self._link_model)
        else:
            with torch.no_grad():
                weights = [p.detach() for p in params]
                session = csdkit.Session.create(
                    self._store_dir, layout, hyper, weights, optimizer=self._optimizer,
                    devices=self._devices, backend=self._backend,
                    device_mem=self._device_mem, link_model=self._link_model)
        self._session, self._params, self._layout, self._kit_groups = (
            session, params, layout, kit_groups)

    @property
    def session(self):
        """The csdkit.Session (None before the first step)."""
        return self._session

    # -- the step ---------------------------------------------------------------------------

    @torch.no_grad()
    def step(self, closure=None):
        """Performs a single optimization step in the kit.

        Args:
            closure (callable, optional): A closure that reevaluates the model and returns the
                loss.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._check_group(group)
        self._ensure_session()
        grads = []
        for (name, _, _), p in zip(self._layout, self._params):
            g = p.grad
            if g is not None:
                if g.is_sparse:
                    raise RuntimeError("{} does not support sparse gradients ({})"
                                       .format(type(self).__name__, name))
                if g.shape != p.shape:
                    raise ValueError("grad of {}: expected shape {}, found {}"
                                     .format(name, tuple(p.shape), tuple(g.shape)))
            grads.append(g)
        if all(g is None for g in grads):
            return loss  # as torch.optim: nothing to update, no step counted
        hyper = [self._group_hyper(g) for g in self.param_groups if g["params"]]
        self.last_report = self._session.step(grads, group_hyper=hyper,
                                              weights_out=list(self._params), mode=self._mode)
        return loss

    def load_state_dict(self, state_dict):
        raise NotImplementedError(
            "{}.load_state_dict: the optimizer state lives in the store, not in a state_dict; "
            "to resume, construct the optimizer with store= the same directory (the store is "
            "the checkpoint: it is opened at the first step) and load the model's weights of "
            "the store's committed step".format(type(self).__name__))

    def state_dict(self):
        raise NotImplementedError(
            "{}.state_dict: the optimizer state lives in the store ({}), which is the "
            "checkpoint; PyTorch's state_dict format is not produced"
            .format(type(self).__name__, self._store_dir))

    # -- per optimizer ----------------------------------------------------------------------

    def _group_hyper(self, group):
        raise NotImplementedError

    def _check_group(self, group):
        if group.get("maximize", False):
            raise NotImplementedError("{}: maximize=True is not implemented by the kit"
                                      .format(type(self).__name__))
        for flag in ("capturable", "differentiable", "fused"):
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


class AdamW(_StoreOptimizer):
    r"""AdamW (decoupled weight decay) with the update in csdkit; torch.optim.AdamW's arguments
    and defaults plus `store`, `devices`, `backend`, `device_mem`, `link_model`, `mode`.

    Per element, at step t (the store's step count), in binary32 without fused multiply-add:
        theta <- theta * (1 - lr * weight_decay)
        m <- beta1 * m + (1 - beta1) * g
        v <- beta2 * v + (1 - beta2) * g * g
        theta <- theta - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
    (the kernel's order of operations is normative: docs/optimizers.md).
    amsgrad, maximize and capturable are refused (NotImplementedError).
    """

    _optimizer = "adamw"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 store=None, devices=1, backend="model", device_mem=4 << 30, link_model=True,
                 mode="smart"):
        _check_adam_args(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        foreach=foreach, maximize=maximize, capturable=capturable)
        super().__init__(params, defaults, store, devices, backend, device_mem, link_model, mode)
        for group in self.param_groups:
            self._check_group(group)

    def _check_group(self, group):
        super()._check_group(group)
        if group["amsgrad"]:
            raise NotImplementedError("{}: amsgrad=True is not implemented by the kit"
                                      .format(type(self).__name__))

    def _group_hyper(self, group):
        b1, b2 = group["betas"]
        return dict(lr=float(group["lr"]), beta1=float(b1), beta2=float(b2),
                    eps=float(group["eps"]), weight_decay=float(group["weight_decay"]))


class Adam(AdamW):
    r"""Adam (L2 weight decay folded into the gradient: g + weight_decay * theta) with the update
    in csdkit; torch.optim.Adam's arguments and defaults (weight_decay=0) plus the kit's.
    amsgrad, maximize and capturable are refused (NotImplementedError)."""

    _optimizer = "adam"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 store=None, devices=1, backend="model", device_mem=4 << 30, link_model=True,
                 mode="smart"):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                         capturable=capturable, store=store, devices=devices, backend=backend,
                         device_mem=device_mem, link_model=link_model, mode=mode)


class SGD(_StoreOptimizer):
    r"""SGD (momentum, dampening, Nesterov, L2 weight decay) with the update in csdkit;
    torch.optim.SGD's arguments (lr is required) plus the kit's. The store keeps a momentum
    buffer only when momentum != 0 at creation; turning momentum on or off later is refused.
    maximize and differentiable are refused (NotImplementedError)."""

    _optimizer = "sgd"

    def __init__(self, params, lr=required, momentum=0, dampening=0,
                 weight_decay=0, nesterov=False, *, maximize=False, foreach=None,
                 differentiable=False, store=None, devices=1, backend="model",
                 device_mem=4 << 30, link_model=True, mode="smart"):
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
                        foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults, store, devices, backend, device_mem, link_model, mode)
        for group in self.param_groups:
            self._check_group(group)

    def _group_hyper(self, group):
        return dict(lr=float(group["lr"]), momentum=float(group["momentum"]),
                    dampening=float(group["dampening"]), nesterov=bool(group["nesterov"]),
                    weight_decay=float(group["weight_decay"]))


class Adagrad(_StoreOptimizer):
    r"""Adagrad (lr decay, L2 weight decay, initial accumulator value) with the update in csdkit;
    torch.optim.Adagrad's arguments and defaults plus the kit's. maximize is refused
    (NotImplementedError). initial_accumulator_value is used when the store is created."""

    _optimizer = "adagrad"

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, store=None, devices=1,
                 backend="model", device_mem=4 << 30, link_model=True, mode="smart"):
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
                        maximize=maximize)
        super().__init__(params, defaults, store, devices, backend, device_mem, link_model, mode)
        for group in self.param_groups:
            self._check_group(group)

    def _group_hyper(self, group):
        return dict(lr=float(group["lr"]), lr_decay=float(group["lr_decay"]),
                    eps=float(group["eps"]), weight_decay=float(group["weight_decay"]),
                    initial_accumulator_value=float(group["initial_accumulator_value"]))
