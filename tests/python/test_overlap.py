"""overlap_backward: CPU gradients handed to the kit's gradient arena as backward finishes each
(hooks; the session's filler thread copies and checks them while backward goes on), so that
step() makes no pass over them. The promise is bit-identity with the serial path
(overlap_backward=False, which gathers every gradient at step()): the same store bytes, the same
parameters, the same reported norm, over runs with clipping that triggers on some steps and not
others, gradients set to None, a non-finite gradient (a skipped step), gradients changed after
backward (scaled in place, replaced), gradient accumulation over two backward passes, 1 to 4
devices, fp32 and bf16 models; and a refused step leaves the parameters unchanged on both.
"""

import pytest
import torch

import csdkit
import csdkit.torch as ct
from conftest import DEVICES, loss_of, make_data, make_model


def loss_of(model, x, y):
    """Mean squared error in float32 (torch 1.13 has no bf16 mse_loss on the CPU)."""
    return torch.nn.functional.mse_loss(model(x).float(), y.float())


class Net(torch.nn.Module):
    """Six parameter tensors in two param groups: 374,934 elements in group 0 (six
    65536-element blocks), 301 in group 1 (one block): seven blocks, so that 1, 2, 3 and 4
    devices all hold a part (shards are whole blocks)."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 2048)
        self.fc2 = torch.nn.Linear(2048, 150)
        self.head = torch.nn.Linear(150, 1)

    def forward(self, x):
        return self.head(torch.tanh(self.fc2(torch.tanh(self.fc1(x))))).squeeze(-1)


def make(dtype, seed=3):
    torch.manual_seed(seed)
    return Net().to(dtype)


def groups(model):
    return [{"params": [model.fc1.weight, model.fc1.bias, model.fc2.weight]},
            {"params": [model.fc2.bias, model.head.weight, model.head.bias], "lr": 1e-3}]


def slot_files(d):
    """The state files of a store (not its manifest, whose store id is random)."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*.bin"))}


def assert_same_bits(model_a, model_b):
    """Every parameter of the two models equal bit for bit (as integers of their width)."""
    for (n, a), b in zip(model_a.named_parameters(), model_b.parameters()):
        bits = torch.int16 if a.dtype == torch.bfloat16 else torch.int32
        assert torch.equal(a.view(bits), b.view(bits)), n


def run(model, opt, x, y, plan):
    """Steps by `plan`: per step a set of tags. 'none': fc2.bias and head.weight get no gradient;
    'inf': a non-finite gradient value (the step is skipped); 'scale': every gradient halved in
    place after backward; 'data': halved through .data (no version bump); 'replace': fc1.bias's
    gradient replaced by a new tensor; 'accum': two backward passes (gradient accumulation).
    Returns the reports."""
    reports = []
    for i, tags in enumerate(plan):
        opt.zero_grad(set_to_none=True)
        xs = x.to(next(model.parameters()).dtype) * (1.0 + 0.25 * i)  # norms change step to step
        loss_of(model, xs, y).backward()
        if "accum" in tags:
            loss_of(model, xs.flip(0), y).backward()
        with torch.no_grad():
            if "none" in tags:
                model.fc2.bias.grad = None
                model.head.weight.grad = None
            if "inf" in tags:
                model.fc2.weight.grad[3, 7] = float("inf")
            if "scale" in tags:
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad.mul_(0.5)
            if "data" in tags:
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad.data.mul_(0.5)
            if "replace" in tags:
                model.fc1.bias.grad = model.fc1.bias.grad * 2
        opt.step()
        reports.append(dict(opt.last_report))
    return reports


PLAN = [set(), {"none"}, {"scale"}, {"inf"}, {"accum"}, {"replace", "none"}, set(), {"accum",
                                                                                        "scale"}]


@pytest.mark.parametrize("dtype,devices", [(torch.float32, 1), (torch.bfloat16, 2),
                                           (torch.float32, 3), (torch.bfloat16, 4)])
def test_overlapped_equals_serial_bit_for_bit(tmp_path, dtype, devices):
    x, y = make_data(seed=5, n=64)
    outs = []
    for overlap in (True, False):
        model = make(dtype)
        # max_grad_norm between the norms of the steps: some steps clip, others do not.
        opt = ct.AdamW(groups(model), lr=3e-3, weight_decay=0.01,
                       store=tmp_path / ("on" if overlap else "off"), devices=devices,
                       max_grad_norm=5.0, overlap_backward=overlap)
        reps = run(model, opt, x, y, PLAN)
        outs.append((model, opt, reps))
    (m_on, o_on, r_on), (m_off, o_off, r_off) = outs
    assert [r["skipped"] for r in r_on] == [False, False, False, True, False, False, False, False]
    norms = [r["grad_norm"] for r in r_on if not r["skipped"]]
    assert min(norms) < 5.0 < max(norms), norms  # clipping triggered on some steps only
    for a, b in zip(r_on, r_off):
        assert a["skipped"] == b["skipped"] and a["step"] == b["step"]
        if not a["skipped"]:
            assert a["grad_norm"] == b["grad_norm"]  # the same double, to the last bit
    assert_same_bits(m_on, m_off)
    sa, sb = o_on.session, o_off.session
    assert sa.step_count == sb.step_count == 7
    del o_on, o_off, sa, sb
    assert slot_files(tmp_path / "on") == slot_files(tmp_path / "off")


def test_gradients_are_queued_during_backward(tmp_path):
    """From the second step on (the store exists), every gradient is queued by its hook while
    backward runs: step() finds each one copied and copies none again."""
    model = make(torch.float32)
    opt = ct.AdamW(model.parameters(), lr=1e-3, store=tmp_path / "s", devices=2)
    x, y = make_data(seed=5, n=64)
    for i in range(3):
        opt.zero_grad(set_to_none=True)
        loss_of(model, x, y).backward()
        if i == 0:
            opt.step()  # creates the store: nothing was queued, everything is copied now
            continue
        assert sorted(opt._arena_src) == list(range(6))
        assert opt.session.wait_fills() == [True] * 6
        with pytest.MonkeyPatch.context() as mp:
            calls = []
            real_fill = type(opt.session).fill
            mp.setattr(type(opt.session), "fill",
                       lambda self, t, g: (calls.append(t), real_fill(self, t, g)))
            opt.step()
        assert calls == []


def test_a_refused_step_leaves_the_parameters_unchanged(tmp_path):
    """A step the divergence guard refuses (an overflow of the weights: lr 3e38) changes no
    parameter, with and without overlap, and the store stays at its step."""
    for overlap in (True, False):
        model = make(torch.float32)
        opt = ct.SGD(model.parameters(), lr=1e-3, store=tmp_path / str(overlap), devices=2,
                     overlap_backward=overlap)
        x, y = make_data(seed=5, n=64)
        opt.zero_grad(set_to_none=True)
        loss_of(model, x, y).backward()   # the first step: the store is created
        opt.step()
        before = [p.detach().clone() for p in model.parameters()]
        opt.param_groups[0]["lr"] = 3e38  # theta - lr * g overflows wherever |g| > 1.2
        opt.zero_grad(set_to_none=True)
        (loss_of(model, x, y) * 1000).backward()
        with pytest.raises(csdkit.DivergenceError):
            opt.step()
        for a, b in zip(model.parameters(), before):
            assert torch.equal(a, b)
        assert opt.session.step_count == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_weights_handed_on_during_a_failed_step_are_put_back(tmp_path, dtype):
    """The new weights go into the parameters subgroup by subgroup while the step runs; a step
    refused in its last subgroup (a weight overflows there only) puts back what the earlier
    ones wrote. One device of 4 MiB: 65536-element subgroups, of which the worker that owns the
    last one has written two others by the time it gets there."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(5)]).to(dtype)
    params = list(model.parameters())
    opt = ct.SGD(params, lr=1e-3, store=tmp_path / "s", devices=1, device_mem=4 << 20)
    for p in params:
        p.grad = torch.full_like(p, 1e-3)
    opt.step()  # creates the store
    subgroups = opt.session.subgroups
    assert len(subgroups) == 6, subgroups
    before = [p.detach().clone() for p in params]
    opt.param_groups[0]["lr"] = 1e10  # 1e10 * 1e-3 stays finite; 1e10 * 1e30 does not
    params[-1].grad = torch.full_like(params[-1], 1e30)  # the last bias: the last subgroup
    with pytest.raises(csdkit.DivergenceError):
        opt.step()
    for i, (a, b) in enumerate(zip(params, before)):
        assert torch.equal(a, b), "parameter {} changed by a refused step".format(i)
    assert opt.session.step_count == 1
    params[-1].grad = torch.full_like(params[-1], 1e-3)  # the same step, now finite
    opt.step()
    assert opt.session.step_count == 2
    assert all(not torch.equal(a, b) for a, b in zip(params, before))


def test_gradients_changed_in_place_without_a_version_bump_are_copied_again(tmp_path):
    """GradScaler.unscale_ on torch 2.x divides the gradients in place through
    torch._amp_foreach_non_finite_check_and_unscale_, which leaves their _version as it was
    (seen on the GPU machine, torch 2.11: versions 0 -> 0, values / 1024): the copies queued
    into the arena during backward are then stale. The same change made here through .data
    (no version bump either) must still be what the kit steps with: equal to a step without
    overlap, bit for bit (with the stale copies, 6% apart after the second step)."""
    x, y = make_data()
    models, opts = [], []
    for overlap in (True, False):
        m = make_model()
        models.append(m)
        opts.append(ct.AdamW(m.parameters(), lr=3e-3, store=tmp_path / str(overlap),
                             devices=DEVICES, overlap_backward=overlap))
    for _ in range(3):
        for m, o in zip(models, opts):
            o.zero_grad(set_to_none=True)
            (loss_of(m, x, y) * 1024.0).backward()
            versions = [p.grad._version for p in m.parameters()]
            for p in m.parameters():
                p.grad.data.mul_(1.0 / 1024.0)
            assert [p.grad._version for p in m.parameters()] == versions
            o.step()
    for a, b in zip(*(m.parameters() for m in models)):
        assert torch.equal(a, b)


def run_scheduled(model, opt, x, y, steps, lr_between=None):
    """`steps` plain steps with a cosine LR schedule (the hyper-parameters change every step);
    at the steps in `lr_between`, the LR of group 0 is changed after backward, before step()
    (the update that started during backward then ran with the old one). Returns the reports."""
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    reports = []
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        xs = x.to(next(model.parameters()).dtype) * (1.0 + 0.1 * i)
        loss_of(model, xs, y).backward()
        if lr_between and i in lr_between:
            opt.param_groups[0]["lr"] *= 0.5
        opt.step()
        sched.step()
        reports.append(dict(opt.last_report))
    return reports


@pytest.mark.parametrize("dtype,devices", [(torch.float32, 1), (torch.bfloat16, 3)])
def test_the_update_started_during_backward_commits_bit_for_bit(tmp_path, dtype, devices):
    """From the second step on, the update starts during backward with the last step's
    parameters-with-gradients and this step's hyper-parameters (an LR scheduler's), and step()
    lets it commit: the reports say 'committed' for steps 2..8, except where the LR was changed
    after backward (step 5: abandoned, run again from the arena; the next step is left out,
    after which it commits again). Store bytes, parameters and the step counts equal the serial
    path's (overlap_backward=False) bit for bit."""
    x, y = make_data(seed=5, n=64)
    outs = []
    for overlap in (True, False):
        model = make(dtype)
        opt = ct.AdamW(groups(model), lr=3e-3, weight_decay=0.01,
                       store=tmp_path / ("on" if overlap else "off"), devices=devices,
                       overlap_backward=overlap)
        outs.append((model, opt, run_scheduled(model, opt, x, y, 10, lr_between={4})))
    (m_on, o_on, r_on), (m_off, o_off, r_off) = outs
    spec = [r.get("speculation") for r in r_on]
    assert spec[0] is None and spec[1:4] == ["committed"] * 3, spec
    assert spec[4] == "abandoned: other hyper-parameters", spec
    assert spec[5:] == ["committed"] * 5, spec
    assert all("speculation" not in r for r in r_off)
    assert_same_bits(m_on, m_off)
    assert o_on.session.tensor_steps == o_off.session.tensor_steps
    assert o_on.session.step_count == o_off.session.step_count == 10
    del o_on, o_off
    assert slot_files(tmp_path / "on") == slot_files(tmp_path / "off")


def test_a_refused_speculative_step_leaves_the_parameters_unchanged(tmp_path):
    """The divergence guard refuses a step whose update started during backward (and was
    confirmed: the same gradients and hyper-parameters as expected): no parameter changes, the
    store stays at its step, and the next step (finite) commits."""
    model = make(torch.float32)
    opt = ct.SGD(model.parameters(), lr=1e-3, store=tmp_path / "s", devices=2)
    x, y = make_data(seed=5, n=64)
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        loss_of(model, x, y).backward()
        opt.step()
    assert opt.last_report["speculation"] == "committed"
    before = [p.detach().clone() for p in model.parameters()]
    opt.param_groups[0]["lr"] = 3e38  # before backward: the speculation starts with it
    opt.zero_grad(set_to_none=True)
    (loss_of(model, x, y) * 1000).backward()
    with pytest.raises(csdkit.DivergenceError):
        opt.step()
    assert opt.session.last_speculation == "failed"
    for a, b in zip(model.parameters(), before):
        assert torch.equal(a, b)
    assert opt.session.step_count == 2
    opt.param_groups[0]["lr"] = 1e-3
    opt.zero_grad(set_to_none=True)
    loss_of(model, x, y).backward()
    opt.step()
    assert opt.session.step_count == 3


def test_the_update_starts_in_the_last_pass_of_gradient_accumulation(tmp_path):
    """With two backward passes per step, the update starts at the first gradient of the second
    pass (as many passes as the last step had), the first pass's copies superseded: step 2
    (whose predecessor had one pass) abandons it when the second pass copies a gradient again,
    steps 3..6 commit it; all equal to the serial path bit for bit."""
    x, y = make_data(seed=5, n=64)
    outs = []
    for overlap in (True, False):
        model = make(torch.float32)
        opt = ct.AdamW(groups(model), lr=3e-3, store=tmp_path / ("on" if overlap else "off"),
                       devices=2, overlap_backward=overlap)
        reps = []
        for i in range(6):
            opt.zero_grad(set_to_none=True)
            for half in (x[:32], x[32:]):
                loss_of(model, half * (1.0 + 0.1 * i), y[:32]).backward()
            opt.step()
            reps.append(opt.last_report.get("speculation"))
        outs.append((model, opt, reps))
    (m_on, o_on, r_on), (m_off, o_off, r_off) = outs
    assert r_on[0] is None and r_on[1].startswith("abandoned: tensor ") and \
        "copied again" in r_on[1], r_on
    assert r_on[2:] == ["committed"] * 4, r_on
    assert_same_bits(m_on, m_off)
    del o_on, o_off
    assert slot_files(tmp_path / "on") == slot_files(tmp_path / "off")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_topk_steps_alike_with_and_without_overlap(tmp_path, dtype):
    """compress=TopK: the selection needs the whole accumulated gradient, so the step takes
    the serial path whatever overlap_backward says (its hooks copy nothing): the plan of
    test_overlapped_equals_serial_bit_for_bit (clipping, None gradients, a non-finite value, in
    place changes, accumulation) gives the same store bytes and parameters bit for bit, and no
    bytes are copied into the arena."""
    x, y = make_data(seed=5, n=64)
    outs = []
    for overlap in (True, False):
        model = make(dtype)
        opt = ct.AdamW(groups(model), lr=3e-3, store=tmp_path / ("on" if overlap else "off"),
                       devices=2, max_grad_norm=5.0, compress=ct.TopK(0.05),
                       overlap_backward=overlap)
        reps = run(model, opt, x, y, PLAN)
        outs.append((model, opt, reps))
    (m_on, o_on, r_on), (m_off, o_off, r_off) = outs
    assert [r["skipped"] for r in r_on] == [r["skipped"] for r in r_off]
    assert any(r["skipped"] for r in r_on) and not all(r["skipped"] for r in r_on)
    assert all("speculation" not in r and r["host_bytes"]["gradients_copied"] == 0
               for r in r_on)
    assert_same_bits(m_on, m_off)
    del o_on, o_off
    assert slot_files(tmp_path / "on") == slot_files(tmp_path / "off")
