"""csdkit.torch beyond plain steps: Lion against a reference, checkpoints in torch.optim's
format both ways, resume from the store, GradScaler, fused clipping, param groups added, and the
refusals of bad input (each a clear error, with nothing written to the store).

Tolerances are those of test_torch_optim.py (REL_BOUND, see there); where a checkpoint moves
between implementations the comparison is after the move, so a bit-exact move is required of
the state itself (tensors compared with torch.equal).
"""

import copy
import unittest.mock

import pytest
import torch

import csdkit
import csdkit.torch as ct
from conftest import DEVICES, loss_of, make_data, make_model, max_rel_diff, train_side_by_side
from test_torch_optim import REL_BOUND, assert_close_run


def train(model, opt, steps, x, y):
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss_of(model, x, y).backward()
        opt.step()


def store_bytes(d):
    """Every file of a store directory (but its lock file), as bytes."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and p.name != "lock"}


# -- Lion ----------------------------------------------------------------------------------


class RefLion(torch.optim.Optimizer):
    """Lion as the paper's pseudo-code, one binary32 operation at a time (no fused ops)."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr, wd = group["lr"], group["weight_decay"]
            f = lambda x: torch.tensor(x, dtype=torch.float32)  # noqa: E731  binary32 scalars
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if "exp_avg" not in st:
                    st["exp_avg"] = torch.zeros_like(p)
                m, g = st["exp_avg"], p.grad
                c = m * f(b1) + g * f(1.0 - b1)
                p.copy_(p * f(1.0 - lr * wd) - f(lr) * torch.sign(c))
                m.copy_(m * f(b2) + g * f(1.0 - b2))


def test_lion_matches_the_reference_over_50_steps(twin_models, tmp_path):
    ref, kit = twin_models
    x, y = make_data()
    kw = dict(lr=3e-4, betas=(0.9, 0.99), weight_decay=0.1)
    rows = train_side_by_side(ref, kit, RefLion(ref.parameters(), **kw),
                              ct.Lion(kit.parameters(), store=tmp_path / "s", devices=DEVICES,
                                      **kw), 50, x, y)
    assert_close_run(rows)


# -- checkpoints in torch.optim's format ---------------------------------------------------


def test_state_dict_moves_to_torch_and_back(twin_models, tmp_path):
    """torch.optim.AdamW -> csdkit -> torch.optim.AdamW: each continues as if uninterrupted."""
    x, y = make_data()
    base, _ = twin_models
    kw = dict(lr=3e-3, weight_decay=0.05, foreach=False)
    # Reference: 30 uninterrupted torch steps.
    ref = copy.deepcopy(base)
    ref_opt = torch.optim.AdamW(ref.parameters(), **kw)
    train(ref, ref_opt, 10, x, y)
    # torch for 10 steps, checkpoint -> csdkit.
    m = copy.deepcopy(ref)
    kit_opt = ct.AdamW(m.parameters(), store=tmp_path / "s", devices=DEVICES, **kw)
    sd = ref_opt.state_dict()
    kit_opt.load_state_dict(sd)
    assert kit_opt.session.step_count == 10
    back = kit_opt.state_dict()
    # Bit for bit what torch saved (same keys, same values) after the round trip.
    assert back["param_groups"][0]["lr"] == 3e-3
    for i, st in sd["state"].items():
        assert set(back["state"][i]) == set(st), i
        for k in st:
            assert torch.equal(back["state"][i][k], st[k]), (i, k)
    # 10 more steps in the kit, then the checkpoint back into torch for 10 more.
    rows = train_side_by_side(ref, m, ref_opt, kit_opt, 10, x, y)
    assert_close_run(rows)
    sd2 = kit_opt.state_dict()
    assert float(sd2["state"][0]["step"]) == 20.0
    t_opt = torch.optim.AdamW(m.parameters(), **kw)
    t_opt.load_state_dict(sd2)
    rows = train_side_by_side(ref, m, ref_opt, t_opt, 10, x, y)
    worst = max(r[2] for r in rows)
    print("\n  torch -> kit -> torch, 30 steps: max rel. parameter difference %.3g" % worst)
    assert worst <= REL_BOUND


@pytest.mark.parametrize("name", ["SGD", "Adagrad"])
def test_state_dict_round_trip_other_optimizers(name, twin_models, tmp_path):
    ref, kit = twin_models
    x, y = make_data()
    kw = dict(lr=0.02, momentum=0.9) if name == "SGD" else dict(lr=0.02, lr_decay=0.01)
    ref_opt = getattr(torch.optim, name)(ref.parameters(), foreach=False, **kw)
    train(ref, ref_opt, 5, x, y)
    kit.load_state_dict(ref.state_dict())
    kit_opt = getattr(ct, name)(kit.parameters(), store=tmp_path / "s", devices=DEVICES, **kw)
    kit_opt.load_state_dict(ref_opt.state_dict())
    # What was loaded comes back bit for bit, in the parameters' shapes.
    key = "momentum_buffer" if name == "SGD" else "sum"
    saved, back = ref_opt.state_dict()["state"], kit_opt.state_dict()["state"]
    for i in saved:
        assert back[i][key].shape == saved[i][key].shape
        assert torch.equal(back[i][key], saved[i][key]), (i, key)
        if name == "Adagrad":
            assert torch.equal(back[i]["step"], saved[i]["step"])
    rows = train_side_by_side(ref, kit, ref_opt, kit_opt, 10, x, y)
    worst = max(r[2] for r in rows)
    print("\n  %s torch -> kit, 5 + 10 steps: max rel. parameter difference %.3g" % (name, worst))
    assert worst <= REL_BOUND, worst


def test_bad_state_dicts_are_refused_and_write_nothing(twin_models, tmp_path):
    ref, kit = twin_models
    x, y = make_data()
    ref_opt = torch.optim.AdamW(ref.parameters(), foreach=False)
    train(ref, ref_opt, 2, x, y)
    opt = ct.AdamW(kit.parameters(), store=tmp_path / "s", devices=DEVICES)
    train(kit, opt, 1, x, y)
    before = store_bytes(tmp_path / "s")
    sd = ref_opt.state_dict()
    bad = copy.deepcopy(sd)
    bad["state"][2]["exp_avg"] = torch.zeros(3)
    with pytest.raises(ValueError, match=r"state\[2\]\['exp_avg'\]: expected 65536 elements"):
        opt.load_state_dict(bad)
    bad = copy.deepcopy(sd)
    bad["state"][1]["step"] = torch.tensor(-1.0)  # (steps that differ are per-parameter counts)
    with pytest.raises(ValueError, match=r"state\[1\]\['step'\]: expected a whole number >= 0, "
                                         r"found -1.0"):
        opt.load_state_dict(bad)
    bad = copy.deepcopy(sd)
    bad["state"][0]["exp_avg_sq"][0, 0] = float("nan")
    bad["param_groups"][0]["lr"] = 0.5
    with pytest.raises(ValueError, match="expected finite values >= 0, found element 0"):
        opt.load_state_dict(bad)
    assert opt.param_groups[0]["lr"] == 1e-3  # the groups are put back too
    bad = copy.deepcopy(sd)
    bad["param_groups"][0]["params"] = bad["param_groups"][0]["params"][:-1]
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        opt.load_state_dict(bad)
    bad = copy.deepcopy(sd)
    bad["param_groups"][0]["amsgrad"] = True
    with pytest.raises(NotImplementedError, match="amsgrad"):
        opt.load_state_dict(bad)
    assert store_bytes(tmp_path / "s") == before
    assert opt.param_groups[0]["amsgrad"] is False


# -- resume from the store -----------------------------------------------------------------


def test_resume_loads_the_stores_weights_and_checks_the_step(tmp_path):
    x, y = make_data()
    a = make_model()
    opt = ct.AdamW(a.parameters(), lr=2e-3, store=tmp_path / "s", devices=DEVICES)
    train(a, opt, 3, x, y)
    del opt
    b = make_model(seed=5)  # other weights
    opt = ct.AdamW(b.parameters(), lr=2e-3, store=tmp_path / "s", devices=DEVICES)
    # Stepping a model that is not at the store's weights is refused, nothing written.
    before = store_bytes(tmp_path / "s")
    loss_of(b, x, y).backward()
    with pytest.raises(csdkit.StoreError, match=r"committed step 3.*expected the model's "
                                                r"weights.*call resume\(\)"):
        opt.step()
    assert store_bytes(tmp_path / "s") == before
    with pytest.raises(csdkit.StoreError, match="expected committed step 4 .*found step 3"):
        opt.resume(expected_step=4)
    del opt
    opt = ct.AdamW(b.parameters(), lr=2e-3, store=tmp_path / "s", devices=DEVICES)
    assert opt.resume(expected_step=3) == 3
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    with pytest.raises(csdkit.StoreError, match="expected a store to resume from"):
        ct.AdamW(b.parameters(), store=tmp_path / "none").resume()


# -- AMP -----------------------------------------------------------------------------------


def cpu_grad_scaler(init_scale):
    """A GradScaler for CPU tensors: torch.amp.GradScaler("cpu") where torch has it (>= 2.3),
    else torch.cuda.amp.GradScaler made while CUDA is reported available (torch 1.13 disables
    itself without CUDA; its step() is device-independent, its update() is CUDA-only)."""
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        s = torch.amp.GradScaler("cpu", init_scale=init_scale)
        s._lazy_init_scale_growth_tracker(torch.device("cpu"))  # as scale() would
        return s, True
    with unittest.mock.patch("torch.cuda.is_available", return_value=True):
        s = torch.cuda.amp.GradScaler(init_scale=init_scale)
    s._lazy_init_scale_growth_tracker(torch.device("cpu"))
    return s, False


@pytest.mark.parametrize("fused", [True, False])
def test_grad_scaler_unscale_and_inf_skips(twin_models, tmp_path, fused):
    """fused=True: GradScaler hands itself to step() and the kit divides the scale out and
    skips a non-finite step itself; fused=False (the default for float32 parameters):
    GradScaler unscales first and skips calling step() (what needs torch's CPU unscale, torch
    >= 2.3)."""
    if not fused and not (hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler")):
        pytest.skip("GradScaler's unscale of CPU gradients needs torch >= 2.3 (found {})"
                    .format(torch.__version__))
    ref, kit = twin_models
    x, y = make_data()
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=3e-3, foreach=False)
    opt = ct.AdamW(kit.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES,
                   fused=fused)
    assert opt._step_supports_amp_scaling is fused
    scaler, can_update = cpu_grad_scaler(1024.0)
    scale = float(scaler._scale)
    for step in range(6):
        ref_opt.zero_grad(set_to_none=True)
        loss_of(ref, x, y).backward()
        opt.zero_grad(set_to_none=True)
        (loss_of(kit, x, y) * scale).backward()  # what scaler.scale(loss) does
        if step == 3:
            kit.fc2.weight.grad[1, 2] = float("inf")  # an overflow: the step must be skipped
            before = store_bytes(tmp_path / "s")
            weights = [p.detach().clone() for p in kit.parameters()]
        scaler.step(opt)
        rec = scaler._per_optimizer_states[id(opt)]["found_inf_per_device"]
        if step == 3:
            assert opt.last_report["skipped"] or not fused
            assert store_bytes(tmp_path / "s") == before, "a skipped step changed the store"
            assert all(torch.equal(a, b) for a, b in zip(weights, kit.parameters()))
            assert float(sum(rec.values())) == 1.0  # what scaler.update() reads
        else:
            ref_opt.step()
            assert not opt.last_report["skipped"] and opt.session.step_count == step + (
                step < 3)
            assert float(sum(rec.values())) == 0.0
        if can_update:
            scaler.update()
            scale = float(scaler._scale)
        else:
            scaler._per_optimizer_states.clear()  # what update() does after its CUDA kernel
    assert opt.session.step_count == 5
    d = max_rel_diff(kit, ref)
    print("\n  GradScaler, 5 steps + 1 skipped: max rel. parameter difference %.3g" % d)
    assert d <= REL_BOUND


def test_fused_max_grad_norm_equals_clip_grad_norm(twin_models, tmp_path):
    a, b = twin_models
    x, y = make_data()
    oa = ct.AdamW(a.parameters(), lr=3e-3, store=tmp_path / "a", devices=DEVICES)
    ob = ct.AdamW(b.parameters(), lr=3e-3, store=tmp_path / "b", devices=DEVICES,
                  max_grad_norm=0.05)
    for _ in range(3):
        for m, o in ((a, oa), (b, ob)):
            o.zero_grad(set_to_none=True)
            loss_of(m, x, y).backward()
            if o is oa:
                norm = torch.nn.utils.clip_grad_norm_(m.parameters(), 0.05)
            o.step()
        assert abs(ob.last_report["grad_norm"] - float(norm)) <= 1e-5 * float(norm)
        # The clip coefficient is computed in double by the kit, in float32 by PyTorch: an ulp
        # of the coefficient apart, so the models agree within the statistical bound.
        assert max_rel_diff(b, a) <= REL_BOUND


# -- param groups --------------------------------------------------------------------------


def test_add_param_group_before_the_store_and_after(tmp_path):
    """Before the store: the group joins the layout. After: the store grows (the details in
    test_add_param_group.py)."""
    ref, kit = make_model(), make_model()
    x, y = make_data()
    ref_opt = torch.optim.AdamW([ref.fc1.weight, ref.fc1.bias], lr=1e-3, foreach=False)
    ref_opt.add_param_group({"params": [p for n, p in ref.named_parameters()
                                        if not n.startswith("fc1")], "lr": 4e-3})
    opt = ct.AdamW([kit.fc1.weight, kit.fc1.bias], lr=1e-3, store=tmp_path / "s",
                   devices=DEVICES)
    opt.add_param_group({"params": [p for n, p in kit.named_parameters()
                                    if not n.startswith("fc1")], "lr": 4e-3})
    assert_close_run(train_side_by_side(ref, kit, ref_opt, opt, 50, x, y))
    extra = torch.nn.Parameter(torch.zeros(3))
    opt.add_param_group({"params": [extra]})
    assert len(opt.session.layout) == 7 and opt.session.step_count == 50
    assert list(opt.session.tensor_steps) == [50] * 6 + [0]
    with pytest.raises(NotImplementedError, match="amsgrad=True"):
        ct.AdamW([kit.fc1.weight], store=tmp_path / "t").add_param_group(
            {"params": [kit.fc2.weight], "amsgrad": True})


# -- refusals ------------------------------------------------------------------------------


def test_two_optimizers_on_one_store_are_refused(twin_models, tmp_path):
    a, b = twin_models
    x, y = make_data()
    oa = ct.AdamW(a.parameters(), store=tmp_path / "s", devices=DEVICES)
    train(a, oa, 1, x, y)
    ob = ct.AdamW(b.parameters(), store=tmp_path / "s", devices=DEVICES)
    loss_of(b, x, y).backward()
    with pytest.raises(csdkit.StoreError, match="one writer per store"):
        ob.step()
    train(a, oa, 1, x, y)  # the first goes on
    assert oa.session.step_count == 2


def test_bad_gradients_and_parameters_are_refused_and_write_nothing(twin_models, tmp_path):
    _, m = twin_models
    x, y = make_data()
    opt = ct.AdamW(m.parameters(), store=tmp_path / "s", devices=DEVICES)
    train(m, opt, 1, x, y)
    before = store_bytes(tmp_path / "s")
    weights = [p.detach().clone() for p in m.parameters()]
    loss_of(m, x, y).backward()
    good = m.fc1.bias.grad

    def refused(grad, text):
        # autograd refuses a .grad of another dtype or shape by assignment; trainers that
        # replace .grad.data get past that check, the kit's own catches them. (A gradient on
        # another device than its parameter is refused too; this machine has one device.)
        m.fc1.bias.grad = good.clone()
        m.fc1.bias.grad.data = grad
        with pytest.raises(ValueError, match=text):
            opt.step()
        m.fc1.bias.grad = good
        assert store_bytes(tmp_path / "s") == before
        assert all(torch.equal(a, b) for a, b in zip(weights, m.parameters()))

    refused(good.double(), r"grad of 'param_groups\[0\]\.params\[1\]'\): expected dtype "
                           r"(torch\.)?float32, found dtype torch\.float64")
    refused(good.half(), r"expected dtype (torch\.)?float32, found dtype (torch\.)?float16")
    refused(torch.zeros(255), r"grad of param_groups\[0\]\.params\[1\]: expected shape "
                              r"\(256,\), found \(255,\)")
    refused(torch.zeros(512)[::2], r"expected a contiguous tensor, found strides \(2,\)")
    # A parameter that changed shape (its .data replaced) no longer fits the store's layout.
    old = m.head.bias.data
    m.head.bias.data = torch.zeros(2)
    m.head.bias.grad = torch.zeros(2)
    with pytest.raises(ValueError, match=r"param_groups\[0\]\.params\[5\]: expected shape "
                                         r"\(1,\) .* found shape \(2,\)"):
        opt.step()
    m.head.bias.data = old
    assert store_bytes(tmp_path / "s") == before
