"""csdkit.torch optimizers against torch.optim on a small fp32 MLP (2 emulated SmartSSDs).

Tolerance (measured values are printed with -s and recorded in docs/trainer.md):
one step of the kit and of PyTorch differ by a few ulps of the operands (no FMA in the kit,
fused multiply-adds and another grouping in PyTorch; tests/torch/check_torch_step.py bounds
one step at <= 6 operand ulps for Adam/AdamW/Adagrad, <= 4 for SGD). Over the steps these
differences accumulate (and feed back through the gradients), so after k steps the parameters
differ by about k * 6 * 2^-23 relative to their magnitude in the worst case: 3.6e-5 for k =
50. The tests bound the inf-norm relative difference max|kit - torch| / max|torch| of every
parameter tensor at every step by REL_BOUND and the losses by the same relative amount; any
semantic difference (bias correction off by a step, wrong decay, a missed lr change) moves the
parameters by ~1e-3 relative after one step and fails at once.
"""

import copy
import warnings

import numpy as np
import pytest
import torch

import csdkit
import csdkit.torch as ct
from conftest import (DEVICES, MLP, loss_of, make_data, make_model, max_rel_diff,
                      train_side_by_side)

REL_BOUND = 1e-5
STEPS = 50


def assert_close_run(rows, bound=REL_BOUND):
    # The loss difference is taken relative to max(|loss|, |initial loss|), as the parameters'
    # is to their initial magnitude too: a loss that trains down to 2 % of its start would
    # otherwise turn the same absolute difference into a 50 times larger "relative" one (seen
    # with Adam + L2 under torch 2.11: 1.8e-7 absolute at a loss of 0.011).
    loss_scale = [max(abs(a), abs(rows[0][0])) for a, _, _ in rows]
    worst = max(r[2] for r in rows)
    worst_loss = max(abs(a - b) / s for (a, b, _), s in zip(rows, loss_scale))
    print("\n  max rel. parameter difference %.3g (step %d), max rel. loss difference %.3g"
          % (worst, 1 + max(range(len(rows)), key=lambda i: rows[i][2]), worst_loss))
    for i, (ref_loss, kit_loss, d) in enumerate(rows):
        assert d <= bound, "step %d: parameters differ by %.3g relative (bound %g)" % (
            i + 1, d, bound)
        assert abs(kit_loss - ref_loss) <= bound * loss_scale[i], (
            "step %d: loss %r (kit) vs %r (torch)" % (i + 1, kit_loss, ref_loss))
    # The run must actually train, or the comparison says little.
    assert rows[-1][0] < 0.75 * rows[0][0]


def test_adamw_matches_torch_over_50_steps(twin_models, tmp_path):
    ref, kit = twin_models
    x, y = make_data()
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=3e-3, foreach=False)
    kit_opt = ct.AdamW(kit.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES)
    rows = train_side_by_side(ref, kit, ref_opt, kit_opt, STEPS, x, y)
    assert_close_run(rows)
    assert kit_opt.session.step_count == STEPS
    assert kit_opt.session.devices == DEVICES
    rep = kit_opt.last_report
    assert rep["step"] == STEPS and not rep["skipped"]
    # fp32 model: gradients in fp32 and the fp32 weights back over the shared link.
    assert rep["bytes"]["host_to_device"] >= 4 * sum(p.numel() for p in kit.parameters())
    kit_opt.session.verify()


@pytest.mark.parametrize("kind", ["steplr", "lambdalr"])
def test_adamw_with_lr_scheduler(twin_models, tmp_path, kind):
    ref, kit = twin_models
    x, y = make_data()
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=5e-3, weight_decay=0.05, foreach=False)
    kit_opt = ct.AdamW(kit.parameters(), lr=5e-3, weight_decay=0.05, store=tmp_path / "s",
                       devices=DEVICES)
    if kind == "steplr":
        make = lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=10, gamma=0.5)
    else:
        make = lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda t: 1.0 / (1.0 + 0.1 * t))
    scheds = [make(ref_opt), make(kit_opt)]
    rows = train_side_by_side(ref, kit, ref_opt, kit_opt, 30, x, y, schedulers=scheds)
    assert_close_run(rows)
    # The store recorded the lr the last step used: the scheduler's value before its last step.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stepping a scheduler without optimizer steps warns
        last_lr = make(torch.optim.SGD([torch.zeros(1)], lr=5e-3))
        for _ in range(29):
            last_lr.step()
    assert kit_opt.session.group_hyper[0]["lr"] == pytest.approx(
        last_lr.optimizer.param_groups[0]["lr"], rel=1e-15)


def test_two_param_groups(twin_models, tmp_path):
    ref, kit = twin_models
    x, y = make_data()

    def groups(m):
        return [{"params": [m.fc1.weight, m.fc2.weight, m.head.weight], "lr": 4e-3,
                 "weight_decay": 0.1},
                {"params": [m.fc1.bias, m.fc2.bias, m.head.bias], "lr": 1e-3,
                 "weight_decay": 0.0, "betas": (0.8, 0.99)}]

    ref_opt = torch.optim.AdamW(groups(ref), foreach=False)
    kit_opt = ct.AdamW(groups(kit), store=tmp_path / "s", devices=DEVICES)
    rows = train_side_by_side(ref, kit, ref_opt, kit_opt, STEPS, x, y)
    assert_close_run(rows)
    gh = kit_opt.session.group_hyper
    assert [g["lr"] for g in gh] == [4e-3, 1e-3]
    assert [g["beta1"] for g in gh] == [0.9, 0.8]
    layout = kit_opt.session.layout
    assert [t[2] for t in layout] == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize("name,ref_cls,kit_cls,kw", [
    ("adam_wd", torch.optim.Adam, ct.Adam, dict(lr=2e-3, weight_decay=0.01)),
    ("sgd_nesterov", torch.optim.SGD, ct.SGD,
     dict(lr=0.02, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("sgd_plain", torch.optim.SGD, ct.SGD, dict(lr=0.05)),
    ("adagrad", torch.optim.Adagrad, ct.Adagrad,
     dict(lr=0.02, lr_decay=0.01, weight_decay=1e-3, initial_accumulator_value=0.1)),
])
def test_other_optimizers_match_torch(twin_models, tmp_path, name, ref_cls, kit_cls, kw):
    ref, kit = twin_models
    x, y = make_data()
    ref_opt = ref_cls(ref.parameters(), foreach=False, **kw)
    kit_opt = kit_cls(kit.parameters(), store=tmp_path / name, devices=DEVICES, **kw)
    rows = train_side_by_side(ref, kit, ref_opt, kit_opt, STEPS, x, y)
    assert_close_run(rows)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_parameters_keep_fp32_master_weights(tmp_path, dtype):
    """fp16/bf16 parameters: the kit updates fp32 master weights and writes their rounding into
    the parameters; torch.optim.AdamW on an fp32 master copy, rounded, agrees within one ulp of
    the parameter dtype (and on > 99 % of the elements exactly)."""
    g = torch.Generator().manual_seed(3)
    init = [torch.rand(70000, generator=g) - 0.5, torch.rand(1000, generator=g) - 0.5]
    params = [torch.nn.Parameter(x.to(dtype)) for x in init]
    master = [torch.nn.Parameter(p.detach().float()) for p in params]
    opt = ct.AdamW(params, lr=1e-3, store=tmp_path / "s", devices=DEVICES)
    ref = torch.optim.AdamW(master, lr=1e-3, foreach=False)
    ulp = 2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10
    for step in range(8):
        for p, m in zip(params, master):
            p.grad = (torch.rand(p.shape, generator=g) - 0.5).to(dtype)
            m.grad = p.grad.float()
        opt.step()
        ref.step()
        for p, m in zip(params, master):
            want = m.detach().to(dtype).float()
            got = p.detach().float()
            assert torch.all((got - want).abs() <= ulp * torch.maximum(got.abs(), want.abs()))
            assert (got == want).float().mean().item() > 0.99
    assert opt.session.grad_dtype == {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    assert opt.session.out_dtype == opt.session.grad_dtype


class WithSpare(MLP):
    """The MLP plus a parameter the forward pass never uses (its grad stays None)."""

    def __init__(self):
        super().__init__()
        self.spare = torch.nn.Parameter(torch.linspace(-1, 1, 1000))


def test_frozen_parameter_and_none_grad_stay_unchanged(tmp_path):
    torch.manual_seed(0)
    ref = WithSpare()
    ref.fc1.weight.requires_grad_(False)  # frozen: never has a gradient
    kit = copy.deepcopy(ref)
    x, y = make_data()
    frozen0 = kit.fc1.weight.detach().clone()
    spare0 = kit.spare.detach().clone()
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=3e-3, foreach=False)
    kit_opt = ct.AdamW(kit.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES)
    rows = train_side_by_side(ref, kit, ref_opt, kit_opt, 20, x, y)
    assert_close_run(rows)
    assert kit.fc1.weight.grad is None and kit.spare.grad is None
    assert torch.equal(kit.fc1.weight, frozen0), "frozen parameter changed"
    assert torch.equal(kit.spare, spare0), "parameter without gradient changed"
    # Both are in the layout (as tensors without gradient), so unfreezing later works.
    assert len(kit_opt.session.layout) == len(list(kit.parameters()))


def test_no_gradient_at_all_is_no_step(twin_models, tmp_path):
    _, kit = twin_models
    opt = ct.AdamW(kit.parameters(), store=tmp_path / "s", devices=DEVICES)
    x, y = make_data()
    loss_of(kit, x, y).backward()
    opt.step()
    assert opt.session.step_count == 1
    opt.zero_grad(set_to_none=True)
    opt.step()  # every grad None: as torch.optim, nothing happens
    assert opt.session.step_count == 1


def test_resume_from_the_store_equals_an_uninterrupted_run(tmp_path):
    x, y = make_data()

    def run(model, opt, steps):
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            loss_of(model, x, y).backward()
            opt.step()

    a = make_model()
    b = copy.deepcopy(a)
    run(a, ct.AdamW(a.parameters(), lr=2e-3, store=tmp_path / "a", devices=DEVICES), 10)
    run(b, ct.AdamW(b.parameters(), lr=2e-3, store=tmp_path / "b", devices=DEVICES), 4)
    # A new optimizer over the same store (and the model's weights of step 4) resumes at step 5.
    opt = ct.AdamW(b.parameters(), lr=2e-3, store=tmp_path / "b", devices=DEVICES)
    run(b, opt, 6)
    assert opt.session.step_count == 10
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)


# -- refusals ------------------------------------------------------------------------------


def test_constructor_arguments_are_validated(twin_models, tmp_path):
    _, m = twin_models
    p = m.parameters
    s = tmp_path / "s"
    cases = [
        (dict(lr=-1.0), ValueError, "Invalid learning rate: -1.0"),
        (dict(eps=-1e-8), ValueError, "Invalid epsilon value"),
        (dict(betas=(1.0, 0.999)), ValueError, "Invalid beta parameter at index 0"),
        (dict(betas=(0.9, -0.1)), ValueError, "Invalid beta parameter at index 1"),
        (dict(weight_decay=-0.1), ValueError, "Invalid weight_decay value"),
        (dict(amsgrad=True), NotImplementedError, "amsgrad=True"),
        (dict(maximize=True), NotImplementedError, "maximize=True"),
        (dict(devices=0), ValueError, "Invalid devices value: 0"),
        (dict(backend="gpu"), ValueError, "Invalid backend: 'gpu'"),
    ]
    for kw, exc, text in cases:
        with pytest.raises(exc, match=text.replace("(", r"\(").replace(")", r"\)")):
            ct.AdamW(p(), store=s, **kw)
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'store'"):
        ct.AdamW(p())
    with pytest.raises(ValueError, match="Invalid store"):
        ct.AdamW(p(), store="")
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        ct.SGD(p(), lr=0.1, nesterov=True, store=s)
    with pytest.raises(ValueError, match="Invalid initial_accumulator_value"):
        ct.Adagrad(p(), initial_accumulator_value=-1, store=s)
    with pytest.raises(ValueError, match="expected a dict with 'state' and 'param_groups'"):
        ct.AdamW(p(), store=s).load_state_dict({})
    with pytest.raises(TypeError, match="unexpected keyword argument 'stor'"):
        ct.AdamW(p(), stor=s)
    with pytest.raises(ValueError, match="Invalid max_grad_norm value: 0"):
        ct.AdamW(p(), store=s, max_grad_norm=0)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        ct.Lion(p(), betas=(0.9, 1.0), store=s)
    assert not s.exists()  # nothing of the refused optimizers was created


def test_sgd_momentum_cannot_be_switched_on_later(twin_models, tmp_path):
    _, m = twin_models
    opt = ct.SGD(m.parameters(), lr=0.01, store=tmp_path / "s", devices=DEVICES)
    x, y = make_data()
    loss_of(m, x, y).backward()
    opt.step()
    opt.param_groups[0]["momentum"] = 0.9
    with pytest.raises(ValueError, match="another optimizer state than the store keeps"):
        opt.step()
    assert opt.session.step_count == 1


def test_non_contiguous_gradient_is_refused_naming_the_tensor(twin_models, tmp_path):
    _, m = twin_models
    opt = ct.AdamW(m.parameters(), store=tmp_path / "s", devices=DEVICES)
    x, y = make_data()
    loss_of(m, x, y).backward()
    m.fc2.weight.grad = m.fc2.weight.grad.t().contiguous().t()  # same shape, transposed strides
    before = [p.detach().clone() for p in m.parameters()]
    with pytest.raises(ValueError, match=r"grad of 'param_groups\[0\]\.params\[2\]'\): expected "
                                         r"a contiguous tensor, found strides \(1, 256\)"):
        opt.step()
    for b, p in zip(before, m.parameters()):
        assert torch.equal(b, p)


def test_store_of_another_model_is_refused(tmp_path):
    x, y = make_data()
    a = make_model()
    opt = ct.AdamW(a.parameters(), store=tmp_path / "s", devices=DEVICES)
    loss_of(a, x, y).backward()
    opt.step()
    del opt  # closes the store
    other = MLP(hidden=257)
    other(x).sum().backward()
    opt2 = ct.AdamW(other.parameters(), store=tmp_path / "s", devices=DEVICES)
    with pytest.raises(csdkit.StoreError, match="another model"):
        opt2.step()
    assert issubclass(csdkit.StoreError, RuntimeError)


def test_mixed_dtypes_are_refused(tmp_path):
    m = make_model()
    m.head.to(torch.bfloat16)
    opt = ct.AdamW(m.parameters(), store=tmp_path / "s", devices=DEVICES)
    for p in m.parameters():
        p.grad = torch.zeros_like(p)
    with pytest.raises(ValueError, match="expected one dtype for the whole model"):
        opt.step()
