"""add_param_group after the store exists (gradual unfreezing as it is usually written: the
optimizer starts with the head, and a later param group brings the frozen layers in).

The store grows: its committed state moves into a store of the grown layout, which replaces it
atomically (optim.py, add_param_group). What must hold:

  * torch.optim fidelity: the same schedule with torch.optim.X.add_param_group stays within the
    bound of tests/python/test_per_param_steps.py (1e-5 relative, inf-norm over the tensor's
    initial magnitude, at every step; both optimizers get the same gradients), for AdamW, Adam,
    Adagrad and SGD with momentum;
  * the grown store equals, bit for bit (weights, buffers, step counts), a store that held every
    parameter from the start with the late ones' gradients None until they joined -- growing
    changes where the state lives, never a value;
  * it survives a reopen (resume) and state_dict round trips both ways;
  * every refusal leaves the optimizer's groups and the store as they were.
"""

import copy
import os

import pytest
import torch

import csdkit
import csdkit.torch as ct
import csdkit.torch.optim as kit_optim
from conftest import DEVICES, loss_of, make_data, make_model

REL_BOUND = 1e-5
BEFORE, AFTER = 8, 8  # steps before and after fc1 joins

OPTIMIZERS = {
    "adamw": (lambda p, **h: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.05, foreach=False,
                                               **h),
              lambda p, **k: ct.AdamW(p, lr=3e-3, weight_decay=0.05, **k)),
    "adam": (lambda p, **h: torch.optim.Adam(p, lr=3e-3, foreach=False, **h),
             lambda p, **k: ct.Adam(p, lr=3e-3, **k)),
    "adagrad": (lambda p, **h: torch.optim.Adagrad(p, lr=2e-2, lr_decay=0.05,
                                                   initial_accumulator_value=0.1, foreach=False,
                                                   **h),
                lambda p, **k: ct.Adagrad(p, lr=2e-2, lr_decay=0.05,
                                          initial_accumulator_value=0.1, **k)),
    "sgd": (lambda p, **h: torch.optim.SGD(p, lr=2e-2, momentum=0.9, foreach=False, **h),
            lambda p, **k: ct.SGD(p, lr=2e-2, momentum=0.9, **k)),
}

# The group fc1 joins with: its own learning rate, as gradual unfreezing usually has.
NEW_LR = {"adamw": 1e-3, "adam": 1e-3, "adagrad": 1e-2, "sgd": 1e-2}


def head_params(model):
    """fc2 and head: 66049 elements, enough for 2 devices of 65536-element blocks."""
    return list(model.fc2.parameters()) + list(model.head.parameters())


def step_pair(models, opts, x, y, frozen_fc1):
    """One step of models[0] with opts[0]; models[1..] get copies of its gradients."""
    src = models[0]
    for o in opts:
        o.zero_grad(set_to_none=True)
    loss_of(src, x, y).backward()
    if frozen_fc1:
        for p in src.fc1.parameters():
            p.grad = None
    for m in models[1:]:
        for p, q in zip(src.parameters(), m.parameters()):
            q.grad = None if p.grad is None else p.grad.clone()
    for o in opts:
        o.step()


def rel_diff(a_model, b_model, scales):
    worst = 0.0
    for a, b, s in zip(a_model.parameters(), b_model.parameters(), scales):
        d = (a.detach().double() - b.detach().double()).abs().max().item()
        worst = max(worst, d / max(s, b.detach().double().abs().max().item()))
    return worst


def store_state(opt):
    """Weights, buffers and counts of the committed step, per layout entry."""
    sess = opt.session
    out = {"step": sess.step_count, "counts": list(sess.tensor_steps)}
    for var in sess.vars:
        flat = [torch.empty(n, dtype=torch.float32) for _, n, _ in sess.layout]
        sess.export_state(var, flat)
        out[var] = flat
    return out


def assert_same_state(a, b, what):
    assert a["step"] == b["step"] and a["counts"] == b["counts"], what
    for var in ("theta", "m", "v"):
        assert (var in a) == (var in b), what
        for t, (x, y) in enumerate(zip(a.get(var, []), b.get(var, []))):
            if not torch.equal(x.view(torch.int32), y.view(torch.int32)):
                i = int((x.view(torch.int32) != y.view(torch.int32)).nonzero()[0])
                raise AssertionError("{}: {} of tensor {} element {}: 0x{:08x} vs 0x{:08x}"
                                     .format(what, var, t, i, int(x.view(torch.int32)[i]),
                                             int(y.view(torch.int32)[i])))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_grown_store_follows_torch_add_param_group(name, tmp_path):
    make_ref, make_kit = OPTIMIZERS[name]
    ref = make_model()
    kit = copy.deepcopy(ref)
    x, y = make_data()
    ref_opt = make_ref(head_params(ref))
    kit_opt = make_kit(head_params(kit), store=tmp_path / "s", devices=DEVICES)
    scales = [p.detach().double().abs().max().item() for p in ref.parameters()]
    worst = 0.0
    for i in range(BEFORE + AFTER):
        if i == BEFORE:
            ref_opt.add_param_group({"params": list(ref.fc1.parameters()), "lr": NEW_LR[name]})
            if name == "adagrad":
                # torch.optim.Adagrad creates its state in __init__ (torch 1.13 does not for
                # a group added later, and its step() then fails): as __init__ would.
                for p in ref.fc1.parameters():
                    ref_opt.state.setdefault(p, {"step": torch.tensor(0.0),
                                                 "sum": torch.full_like(p, 0.1)})
            kit_opt.add_param_group({"params": list(kit.fc1.parameters()), "lr": NEW_LR[name]})
            assert kit_opt.session.step_count == BEFORE
            assert list(kit_opt.session.tensor_steps) == [BEFORE] * 4 + [0, 0]
            assert sorted(os.listdir(tmp_path)) == ["s"]  # the old store is gone
        step_pair([ref, kit], [ref_opt, kit_opt], x, y, frozen_fc1=False)
        d = rel_diff(kit, ref, scales)
        assert d <= REL_BOUND, "%s step %d: parameters differ by %.3g relative (bound %g)" % (
            name, i + 1, d, REL_BOUND)
        worst = max(worst, d)
    print("\n  %s, fc1 added after %d steps: max rel. parameter difference %.3g"
          % (name, BEFORE, worst))
    counts = list(kit_opt.session.tensor_steps)
    assert counts == [BEFORE + AFTER] * 4 + [AFTER] * 2
    # torch's own counts agree (SGD keeps none).
    if name != "sgd":
        ref_counts = [int(ref_opt.state[p]["step"]) for g in ref_opt.param_groups
                      for p in g["params"]]
        assert ref_counts == counts
    kit_opt.close()


def test_grown_store_equals_a_store_with_every_parameter_from_the_start(tmp_path):
    """The late group held from the start with None gradients (the per-parameter counts keep
    it at 0) against the same group added after BEFORE steps: equal bit for bit, in the smart
    and the baseline mode, before and after the join."""
    for mode in ("smart", "baseline"):
        grown_m, full_m = make_model(), make_model()
        x, y = make_data()
        grown = ct.AdamW(head_params(grown_m), lr=3e-3, weight_decay=0.05,
                         store=tmp_path / ("grown-" + mode), devices=DEVICES, mode=mode)
        full = ct.AdamW(head_params(full_m), lr=3e-3, weight_decay=0.05,
                        store=tmp_path / ("full-" + mode), devices=DEVICES, mode=mode)
        full.add_param_group({"params": list(full_m.fc1.parameters()), "lr": 1e-3})
        for i in range(BEFORE + AFTER):
            if i == BEFORE:
                grown.add_param_group({"params": list(grown_m.fc1.parameters()), "lr": 1e-3})
                assert_same_state(store_state(grown), store_state(full),
                                  mode + ", just grown")
            step_pair([full_m, grown_m], [full, grown], x, y, frozen_fc1=i < BEFORE)
        assert_same_state(store_state(grown), store_state(full), mode + ", after the join")
        for a, b in zip(grown_m.parameters(), full_m.parameters()):
            assert torch.equal(a, b)
        assert grown.session.describe()["layout"] == full.session.describe()["layout"]
        grown.close()
        full.close()


def test_grown_store_resumes_and_round_trips(tmp_path):
    model = make_model()
    x, y = make_data()
    opt = ct.AdamW(head_params(model), lr=3e-3, store=tmp_path / "s", devices=DEVICES)
    for _ in range(3):
        step_pair([model], [opt], x, y, frozen_fc1=True)
    opt.add_param_group({"params": list(model.fc1.parameters()), "lr": 1e-3})
    for _ in range(2):
        step_pair([model], [opt], x, y, frozen_fc1=False)
    before = store_state(opt)
    sd = opt.state_dict()
    assert [float(sd["state"][i]["step"]) for i in range(6)] == [5.0] * 4 + [2.0] * 2
    assert [g["lr"] for g in sd["param_groups"]] == [3e-3, 1e-3]
    opt.close()

    # A new process: the optimizer built as the grown one, reopened, resumed.
    model2 = make_model(seed=7)  # other weights: resume() loads the store's
    opt2 = ct.AdamW(head_params(model2), lr=3e-3, store=tmp_path / "s")
    opt2.add_param_group({"params": list(model2.fc1.parameters()), "lr": 1e-3})
    assert opt2.resume() == 5
    assert_same_state(store_state(opt2), before, "reopened")
    for a, b in zip(model2.parameters(), model.parameters()):
        assert torch.equal(a, b)
    # The round trip is recognised (nothing imported), and torch.optim takes the state.
    opt2.load_state_dict(opt2.state_dict())
    assert_same_state(store_state(opt2), before, "after the round trip")
    ref = torch.optim.AdamW(head_params(model2), lr=3e-3, foreach=False)
    ref.add_param_group({"params": list(model2.fc1.parameters()), "lr": 1e-3})
    ref.load_state_dict(opt2.state_dict())
    assert int(ref.state[model2.fc1.weight]["step"]) == 2
    opt2.close()


def test_add_param_group_before_the_store_exists_joins_the_layout(tmp_path):
    model = make_model()
    opt = ct.AdamW(head_params(model), store=tmp_path / "s", devices=DEVICES)
    opt.add_param_group({"params": list(model.fc1.parameters())})
    assert not os.path.exists(tmp_path / "s")
    step_pair([model], [opt], *make_data(), frozen_fc1=False)
    assert len(opt.session.layout) == 6 and opt.session.describe()["layout"]["groups"] == 2
    opt.close()


def _grown_setup(tmp_path, steps=2):
    model = make_model()
    x, y = make_data()
    opt = ct.AdamW(head_params(model), lr=3e-3, store=tmp_path / "s", devices=DEVICES)
    for _ in range(steps):
        step_pair([model], [opt], x, y, frozen_fc1=True)
    return model, opt


def _snapshot(path):
    """Every file under path with its bytes."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, path)] = fh.read()
    return out


def _refused(opt, model, tmp_path, exc, match, **group):
    before = _snapshot(tmp_path / "s")
    groups = len(opt.param_groups)
    with pytest.raises(exc, match=match):
        opt.add_param_group(dict({"params": list(model.fc1.parameters())}, **group))
    assert len(opt.param_groups) == groups
    assert _snapshot(tmp_path / "s") == before
    assert sorted(os.listdir(tmp_path)) == sorted(["s"] + [f for f in os.listdir(tmp_path)
                                                           if f.startswith("s.grow-")])


def test_refusals_leave_optimizer_and_store_unchanged(tmp_path, monkeypatch):
    model, opt = _grown_setup(tmp_path)
    # A parameter already in a group (torch.optim's own check).
    groups = len(opt.param_groups)
    with pytest.raises(ValueError, match="more than one parameter group|some parameters"):
        opt.add_param_group({"params": [model.fc2.weight]})
    assert len(opt.param_groups) == groups
    # A parameter the kit cannot hold, and one of another dtype than the model's.
    before = _snapshot(tmp_path / "s")
    with pytest.raises(ValueError, match="expected dtype torch.float32"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(4, dtype=torch.float64))]})
    with pytest.raises(ValueError, match="one dtype"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(4, dtype=torch.float16))]})
    assert len(opt.param_groups) == groups and _snapshot(tmp_path / "s") == before
    # A file in the store that the store did not write.
    (tmp_path / "s" / "notes.txt").write_text("mine")
    _refused(opt, model, tmp_path, csdkit.StoreError, "notes.txt")
    os.unlink(tmp_path / "s" / "notes.txt")
    (tmp_path / "s" / "dev1" / "trace.bin").write_bytes(b"x")
    _refused(opt, model, tmp_path, csdkit.StoreError, "dev1/trace.bin")
    os.unlink(tmp_path / "s" / "dev1" / "trace.bin")
    # A leftover of an interrupted growth of a process with this pid.
    leftover = tmp_path / ("s.grow-%d" % os.getpid())
    leftover.mkdir()
    _refused(opt, model, tmp_path, csdkit.StoreError, "interrupted add_param_group")
    leftover.rmdir()
    # The exchange fails (a file system without RENAME_EXCHANGE): the grown copy is removed.
    def no_exchange(a, b):
        raise csdkit.StoreError("cannot exchange (test)")
    monkeypatch.setattr(kit_optim, "_exchange_dirs", no_exchange)
    _refused(opt, model, tmp_path, csdkit.StoreError, "cannot exchange")
    assert os.listdir(tmp_path) == ["s"]
    monkeypatch.undo()
    # The model moved away from the store's weights.
    with torch.no_grad():
        model.fc2.weight[0, 0] += 1.0
    opt.close()
    opt = ct.AdamW(head_params(model), lr=3e-3, store=tmp_path / "s")
    _refused(opt, model, tmp_path, csdkit.StoreError, "expected the model's weights")
    with torch.no_grad():
        model.fc2.weight[0, 0] -= 1.0
    # And then it works, with the store as it was.
    opt.resume()
    opt.add_param_group({"params": list(model.fc1.parameters())})
    assert list(opt.session.tensor_steps) == [2] * 4 + [0, 0]
    opt.close()


def test_growth_interrupted_after_the_exchange_leaves_a_working_store(tmp_path, monkeypatch):
    """A crash between the exchange and the old store's removal: the store path holds the grown
    store (usable at once), the old one waits at <store>.grow-<pid>."""
    model, opt = _grown_setup(tmp_path)
    monkeypatch.setattr(kit_optim, "_remove_store_files", lambda *a: None)
    opt.add_param_group({"params": list(model.fc1.parameters())})
    monkeypatch.undo()
    old = tmp_path / ("s.grow-%d" % os.getpid())
    old_layout = list(opt.session.layout)[:4]
    opt.close()
    before = csdkit.Session.open(str(old), old_layout)  # the old store, whole
    assert before.step_count == 2 and len(before.layout) == 4
    before = None
    opt2 = ct.AdamW(head_params(model), lr=3e-3, store=tmp_path / "s")
    opt2.add_param_group({"params": list(model.fc1.parameters())})
    assert opt2.resume() == 2
    step_pair([model], [opt2], *make_data(), frozen_fc1=False)
    assert list(opt2.session.tensor_steps) == [3] * 4 + [1, 1]
    opt2.close()



@pytest.mark.parametrize("foreign", [False, True], ids=["grows", "refused-then-grows"])
def test_distributed_set_grows_equal_to_one_process(tmp_path, foreign):
    """csdkit.torch.distributed on 2 gloo ranks: the head's group added after 3 steps grows
    the set (every rank's slice moves); after 3 more steps every rank's weights equal, bit for
    bit, one process's csdkit.torch.AdamW given the averaged gradients and the same
    add_param_group (dist_common's exact gradients: the sum of the ranks' is exact). With
    `foreign`, a file in the set's directory first makes every rank refuse the growth (param
    groups unchanged), then the growth goes through once it is gone."""
    import subprocess
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import dist_common
    import dist_grow_worker as w
    world = 2
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(csdkit.__file__))] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["OMP_NUM_THREADS"] = "1"
    procs = [subprocess.Popen([sys.executable, w.__file__, "--rank", str(r), "--world",
                               str(world), "--init", str(tmp_path / "init"), "--store",
                               str(tmp_path / "set"), "--out", str(tmp_path / ("r%d.pt" % r))]
                              + (["--foreign"] if foreign else []), env=env)
             for r in range(world)]
    assert all(p.wait(timeout=180) == 0 for p in procs)
    model = dist_common.make_model()
    body, head = dist_common.param_groups(model)
    ref = ct.AdamW([body], lr=1e-2, store=tmp_path / "ref", devices=1)
    for step in range(w.BEFORE + w.AFTER):
        if step == w.BEFORE:
            ref.add_param_group(head)
        for p, g in zip(model.parameters(), dist_common.averaged_grads(model, step, world)):
            p.grad = g
        ref.step()
    for r in range(world):
        got = torch.load(tmp_path / ("r%d.pt" % r))
        assert got["step"] == w.BEFORE + w.AFTER
        if foreign:
            message, groups = got["refused"]
            assert "notes.txt" in message and "which the set did not write" in message
            assert groups == 1
        assert not [f for f in got["leftovers"] if f.startswith("set.grow-")]
        for i, (a, b) in enumerate(zip(got["weights"], model.parameters())):
            assert torch.equal(a, b.detach()), "rank %d, parameter %d" % (r, i)
    assert list(ref.session.tensor_steps) == [6, 6, 6, 6, 3, 3]
    ref.close()
    # The grown set re-splits like any other (csdkit reshard): one rank, the same step, the
    # grown model's elements.
    import csdkit.torch.distributed as cdist
    assert cdist.reshard(tmp_path / "set", tmp_path / "one", 1) == 6
    import json
    record = json.loads((tmp_path / "one" / "rank-0.json").read_text())
    assert record["total_elements"] == sum(p.numel() for p in model.parameters())
