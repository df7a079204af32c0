"""optimizer.state as a read-only view of the store (issue 27): keyed by parameter, the entries of
state_dict()['state'] read lazily from the committed step, plus the Top-K residuals the kit keeps
in Python; what trainer frameworks do with it (Lightning writes moved tensors back into each
entry, torch.distributed.checkpoint asks `if optim.state:`) is harmless; torch.optim.Optimizer's
own state_dict() inside the kit's does not read the store.

Every comparison is bit for bit (torch.equal): the view and state_dict() read the same bytes.
"""

import datetime
import os

import pytest
import torch

import csdkit
import csdkit.torch as ct
from conftest import DEVICES, loss_of, make_data, make_model

OPTIMIZERS = {
    "AdamW": lambda ps, **kw: ct.AdamW(ps, lr=3e-3, weight_decay=0.05, **kw),
    "SGD-momentum": lambda ps, **kw: ct.SGD(ps, lr=1e-2, momentum=0.9, **kw),
    "SGD": lambda ps, **kw: ct.SGD(ps, lr=1e-2, **kw),
    "Adagrad": lambda ps, **kw: ct.Adagrad(ps, lr=1e-2, initial_accumulator_value=0.1, **kw),
    "Lion": lambda ps, **kw: ct.Lion(ps, lr=1e-4, weight_decay=0.1, **kw),
}


def train(model, opt, steps, x, y, frozen=()):
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss_of(model, x, y).backward()
        for p in frozen:
            p.grad = None  # never a gradient: no state, as in torch.optim
        opt.step()


def assert_entry_equal(got, exp, what):
    assert isinstance(got, dict), what
    assert list(got) == list(exp), (what, list(got), list(exp))
    for k, e in exp.items():
        g = got[k]
        if not torch.is_tensor(e):
            assert g == e, (what, k, g, e)
        else:
            assert g.dtype == e.dtype and g.shape == e.shape and torch.equal(g, e), (what, k)


def assert_view_is_state_dict(opt):
    """Every parameter: opt.state[p] (and items()) against state_dict()['state'] by index."""
    sd = opt.state_dict()["state"]
    params = [p for g in opt.param_groups for p in g["params"]]
    with_state = [p for i, p in enumerate(params) if i in sd]
    assert list(opt.state) == with_state and len(opt.state) == len(sd)
    assert bool(opt.state) == bool(sd)
    items = list(opt.state.items())
    assert [p for p, _ in items] == with_state
    for i, p in enumerate(params):
        if i in sd:
            assert p in opt.state
            assert_entry_equal(opt.state[p], sd[i], "state[%d]" % i)
            assert_entry_equal(opt.state.get(p), sd[i], "state.get(%d)" % i)
            assert_entry_equal(dict(items)[p], sd[i], "items()[%d]" % i)
        else:
            assert p not in opt.state
            assert opt.state[p] == {} and opt.state.get(p) is None
    assert len(opt.state) == len(sd)  # looking a parameter up created nothing


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_view_equals_state_dict_bit_for_bit(name, tmp_path):
    """After 4 steps with one parameter never given a gradient (fc1.bias: no state): the keys
    are the parameters with state, in order; each entry equals state_dict()'s, key for key."""
    model = make_model()
    x, y = make_data()
    opt = OPTIMIZERS[name](model.parameters(), store=tmp_path / "s", devices=DEVICES)
    assert not opt.state and len(opt.state) == 0 and list(opt.state) == []
    assert opt.state[model.fc1.weight] == {}
    train(model, opt, 4, x, y, frozen=[model.fc1.bias])
    assert opt.state and model.fc1.bias not in opt.state
    assert_view_is_state_dict(opt)
    st = opt.state[model.fc2.weight]
    if name in ("AdamW", "Adagrad", "Lion"):
        assert st["step"].dtype == torch.float32 and float(st["step"]) == 4.0
    if name == "SGD":
        assert st == {"momentum_buffer": None}
    assert "<optimizer.state of" in repr(opt.state)
    repr(opt)  # torch.optim.Optimizer.__repr__ still works


def test_view_of_a_bf16_model_has_the_master_weights(tmp_path):
    model = make_model().to(torch.bfloat16)
    x, y = make_data()
    opt = ct.AdamW(model.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES)
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x.bfloat16()).float(), y).backward()
        opt.step()
    assert set(opt.state[model.head.weight]) == {"step", "exp_avg", "exp_avg_sq", "fp32_master"}
    assert_view_is_state_dict(opt)


def test_view_before_the_first_step_of_a_reopened_store(tmp_path):
    """A store at step 3, closed; a new optimizer on it: the view is not empty before its first
    step (the store is opened on demand, as by state_dict()), and shows the same bytes as
    before the close; then it steps on and the view follows the new committed step."""
    model = make_model()
    x, y = make_data()
    with ct.AdamW(model.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES) as opt:
        train(model, opt, 3, x, y)
        before = {i: opt.state[p] for i, p in enumerate(model.parameters())}
    opt2 = ct.AdamW(model.parameters(), lr=3e-3, store=tmp_path / "s")
    assert opt2.session is None
    assert bool(opt2.state) and len(opt2.state) == 6  # what DCP's `if optim.state:` asks
    for i, p in enumerate(model.parameters()):
        assert_entry_equal(opt2.state[p], before[i], "reopened state[%d]" % i)
    assert_view_is_state_dict(opt2)
    train(model, opt2, 1, x, y)
    assert float(opt2.state[model.fc1.weight]["step"]) == 4.0
    assert not torch.equal(opt2.state[model.fc1.weight]["exp_avg"], before[0]["exp_avg"])
    assert_view_is_state_dict(opt2)
    opt2.close()
    with pytest.raises(RuntimeError, match="closed"):
        len(opt2.state)


def test_topk_residuals_are_in_the_view_and_kept_privately(tmp_path):
    """compress=TopK: the residual lives in the optimizer's private _pystate; the view and
    state_dict() show copies of it next to the store's buffers."""
    model = make_model()
    x, y = make_data()
    opt = ct.AdamW(model.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES,
                   compress=ct.TopK(0.05))
    train(model, opt, 3, x, y)
    assert_view_is_state_dict(opt)
    for p in model.parameters():
        mine = opt._pystate[p]["topk_residual"]
        shown = opt.state[p]["topk_residual"]
        assert torch.equal(shown, mine) and shown.data_ptr() != mine.data_ptr()
        assert float(opt.state[p]["topk_residual_scale"]) == opt._pystate[p][
            "topk_residual_scale"]
        assert {"step", "exp_avg", "exp_avg_sq"} <= set(opt.state[p])


def test_lightning_style_write_through_is_harmless(tmp_path):
    """Lightning's _optimizer_to_device: for p, v in state.items(): for k, val in v.items():
    v[k] = val.to(device). Here the values are replaced and the tensors handed out are zeroed
    in place: the store (every file) and the run that follows are as if nothing happened; the
    view itself refuses assignment."""
    x, y = make_data()
    ref_model, model = make_model(), make_model()
    ref = ct.AdamW(ref_model.parameters(), lr=3e-3, store=tmp_path / "ref", devices=DEVICES)
    opt = ct.AdamW(model.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES)
    train(ref_model, ref, 3, x, y)
    train(model, opt, 3, x, y)
    files = {f: (tmp_path / "s" / f).read_bytes() for f in sorted(
        os.path.relpath(os.path.join(d, n), tmp_path / "s")
        for d, _, ns in os.walk(tmp_path / "s") for n in ns if n != "lock")}
    sd_before = opt.state_dict()["state"]
    for p, v in opt.state.items():
        assert isinstance(v, dict)
        for k, val in v.items():
            if torch.is_tensor(val):
                v[k] = val.to(torch.float64)
                val.zero_()
    for v in opt.state.values():
        for val in v.values():
            val.fill_(7.0)
    sd_after = opt.state_dict()["state"]
    for i in sd_before:
        assert_entry_equal(sd_after[i], sd_before[i], "after write-through state[%d]" % i)
    assert files == {f: (tmp_path / "s" / f).read_bytes() for f in files}
    with pytest.raises(TypeError, match="read-only view"):
        opt.state[model.fc1.weight] = {}
    with pytest.raises(TypeError, match="read-only view"):
        del opt.state[model.fc1.weight]
    with pytest.raises(AttributeError, match="read-only view"):
        opt.state = {}
    train(ref_model, ref, 3, x, y)
    train(model, opt, 3, x, y)
    for a, b in zip(ref_model.parameters(), model.parameters()):
        assert torch.equal(a, b)


class ExportCounter:
    """Counts csdkit.Session.export_state calls (every read of a state variable)."""

    def __init__(self, monkeypatch):
        self.calls = []
        orig = csdkit.Session.export_state

        def counted(sess, var, dst):
            self.calls.append((var, sum(d is not None for d in dst)))
            return orig(sess, var, dst)
        monkeypatch.setattr(csdkit.Session, "export_state", counted)

    def take(self):
        out, self.calls = self.calls, []
        return out


def test_base_state_dict_does_not_read_the_store(tmp_path, monkeypatch):
    """state_dict() reads m and v once each (torch.optim.Optimizer.state_dict, which packs
    self.state, sees an empty state); len/bool/`in` read nothing; opt.state[p] reads p's
    entries of m and v only; items() reads each variable once."""
    model = make_model()
    x, y = make_data()
    opt = ct.AdamW(model.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES)
    train(model, opt, 2, x, y)
    n = ExportCounter(monkeypatch)
    sd = opt.state_dict()
    assert n.take() == [("m", 6), ("v", 6)] and len(sd["state"]) == 6
    assert len(opt.state) == 6 and bool(opt.state) and model.head.bias in opt.state
    assert list(opt.state) == list(model.parameters())
    assert n.take() == []
    opt.state[model.head.bias]
    assert n.take() == [("m", 1), ("v", 1)]
    dict(opt.state.items())
    assert n.take() == [("m", 6), ("v", 6)]
    # torch.optim.Optimizer.state_dict on its own (what the kit's calls) packs no state.
    assert opt._base_state_dict()["state"] == {} and n.take() == []


def test_distributed_view_shows_this_ranks_residuals(tmp_path, monkeypatch):
    """csdkit.torch.distributed (one gloo rank in this process): its state_dict()['state'] holds
    this rank's Top-K residuals only (the stores hold slices, not per-parameter state), and the
    view shows exactly those entries; without compress= the view is empty; the base
    state_dict reads no store."""
    import torch.distributed as dist
    import csdkit.torch.distributed as cdist
    dist.init_process_group("gloo", init_method="file://" + str(tmp_path / "init"), rank=0,
                            world_size=1, timeout=datetime.timedelta(seconds=60))
    try:
        x, y = make_data()
        for compress in (None, ct.TopK(0.05)):
            model = make_model()
            store = tmp_path / ("d-%s" % ("topk" if compress else "dense"))
            opt = cdist.AdamW(model.parameters(), lr=3e-3, store=str(store), devices=DEVICES,
                              compress=compress)
            assert not opt.state
            train(model, opt, 2, x, y)
            n = ExportCounter(monkeypatch)
            sd = opt.state_dict()
            assert n.take() == []
            params = list(model.parameters())
            assert list(opt.state) == [params[i] for i in sorted(sd["state"])]
            if compress is None:
                assert not opt.state and sd["state"] == {}
                opt.close()
                continue
            assert len(opt.state) == 6
            for i, p in enumerate(params):
                got = opt.state[p]
                assert set(got) == {"topk_residual", "topk_residual_scale",
                                    "topk_residual_range"}
                assert torch.equal(got["topk_residual"], sd["state"][i]["topk_residual"])
                assert got["topk_residual_range"] == sd["state"][i]["topk_residual_range"]
            opt.load_state_dict(opt.state_dict())  # the residuals go back to _pystate
            assert_entry_equal(opt.state[params[0]], sd["state"][0], "after load")
            with pytest.raises(TypeError, match="read-only view"):
                opt.state[params[0]] = {}
            opt.close()
    finally:
        dist.destroy_process_group()


def test_view_through_a_dict_copying_wrapper(tmp_path):
    """Lightning's LightningOptimizer copies the optimizer's __dict__ into itself, subclasses its
    class and keeps the optimizer in `_optimizer`: its `state` is the optimizer's view (the
    wrapper's stale copy of the attributes never opens the store a second time)."""

    class Wrapper:
        def __init__(self, optimizer):
            self.__dict__ = {k: v for k, v in optimizer.__dict__.items()
                             if k not in ("step", "__del__")}
            self._optimizer = optimizer
            self.__class__ = type("Lightning" + optimizer.__class__.__name__,
                                  (self.__class__, optimizer.__class__), {})

    model = make_model()
    x, y = make_data()
    opt = ct.AdamW(model.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES)
    wrapped = Wrapper(opt)
    train(model, opt, 2, x, y)
    assert len(wrapped.state) == 6 and wrapped.__dict__["_session"] is None
    for p in model.parameters():
        assert_entry_equal(wrapped.state[p], opt.state[p], "wrapped")
