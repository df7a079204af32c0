"""csdkit.torch.distributed: data parallel with partitioned optimizer state over gloo, 2 and 4
processes on this machine (dist_worker.py, one subprocess per rank, rendezvous through a
FileStore in the test's tmp directory: no TCP port).

Every rank contributes a deterministic gradient whose sum over the ranks is exact
(dist_common.py), so the single process given the averaged gradient must end with the same
weights bit for bit, at every step, on every rank.
"""

import json
import math
import os
import subprocess
import sys

import pytest
import torch

import csdkit
import csdkit.torch
import csdkit.torch.distributed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dist_common  # noqa: E402
import dist_overlap_worker  # noqa: E402

torch.set_num_threads(1)


def run_ranks(tmp, name, world, store, **opts):
    """Runs `world` dist_worker.py processes; returns their results (dicts), rank order."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(csdkit.__file__))] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["OMP_NUM_THREADS"] = "1"
    init = tmp / (name + ".init")
    args = []
    for k, v in opts.items():
        flag = "--" + k.replace("_", "-")
        args += [flag] if v is True else [flag, str(v)]
    procs = []
    for r in range(world):
        cmd = [sys.executable, os.path.join(HERE, "dist_worker.py"), "--rank", str(r),
               "--world", str(world), "--init", str(init), "--store", str(store),
               "--out", str(tmp / ("%s.%d.pt" % (name, r)))] + args
        procs.append(subprocess.Popen(cmd, env=env))
    for p in procs:
        assert p.wait(timeout=180) == 0
    return [torch.load(tmp / ("%s.%d.pt" % (name, r))) for r in range(world)]


def reference_run(tmp, world, dtype, steps, opt="AdamW"):
    """The single process: csdkit.torch.<opt> over one store, given the averaged gradients."""
    model = dist_common.make_model(dtype)
    groups = dist_common.param_groups(model)
    if opt == "SGD":
        o = csdkit.torch.SGD(groups, lr=1e-2, momentum=0.9, store=str(tmp / "ref"), devices=1)
    else:
        o = getattr(csdkit.torch, opt)(groups, lr=1e-2, store=str(tmp / "ref"), devices=1)
    return model, o, [[p.detach().clone() for p in model.parameters()]]


def step_reference(model, o, step, world, nan_step=-1, none=None):
    grads = dist_common.averaged_grads(model, step, world, none)
    if step == nan_step:
        grads[1].view(-1)[7] = float("nan")
    for p, g in zip(model.parameters(), grads):
        p.grad = g
    if step >= 1:
        o.param_groups[0]["lr"] = 0.5e-2
    o.step()
    return [p.detach().clone() for p in model.parameters()]


def assert_same(got, exp, what):
    for i, (a, b) in enumerate(zip(got, exp)):
        assert a.dtype == b.dtype and torch.equal(a, b), (
            "%s: parameter %d differs (max |diff| %g)" % (what, i,
                                                         (a.double() - b.double()).abs().max()))


def check_errors_free(results):
    for r, res in enumerate(results):
        assert res["error"] is None, "rank %d: %s\n%s" % (r, res["error"], res.get("traceback"))


def test_two_ranks_equal_single_process_and_agree_on_a_skipped_step(tmp_path):
    """fp32 AdamW, two param groups, an lr change, 4 steps; rank 1 puts a NaN in its gradient
    at step 2: both ranks skip it (weights unchanged), and the run still equals the single
    process (which skips it too) bit for bit at every step."""
    world, steps, nan_step = 2, 4, 2
    res = run_ranks(tmp_path, "w2", world, tmp_path / "store", steps=steps, nan_step=nan_step,
                    nan_rank=1)
    check_errors_free(res)
    model, o, ref = reference_run(tmp_path, world, torch.float32, steps)
    skipped = []
    for s in range(steps):
        ref.append(step_reference(model, o, s, world, nan_step))
        skipped.append(o.last_report["skipped"])
    assert skipped == [False, False, True, False]
    for r, rr in enumerate(res):
        assert [rep["skipped"] for rep in rr["reports"]] == skipped, "rank %d" % r
        for s in range(steps + 1):
            assert_same(rr["weights"][s], ref[s], "rank %d after step %d" % (r, s))
        assert_same(rr["weights"][nan_step + 1], rr["weights"][nan_step], "skipped step")
        assert rr["reports"][-1]["step"] == 3  # 4 steps, one skipped: every store at step 3
    # Each rank's store holds its slice only: elements [r * chunk, ...) of the 19075.
    total = sum(p.numel() for p in model.parameters())
    for r in range(world):
        with open(tmp_path / "store" / ("rank-%d.json" % r)) as f:
            rec = json.load(f)
        b, e = csdkit.torch.distributed.partition(total, world)[r]
        assert (rec["world_size"], rec["rank"], rec["begin"], rec["end"]) == (world, r, b, e)


def test_four_ranks_bf16_equal_single_process_then_other_world_size_refused(tmp_path):
    """bf16 parameters (gloo reduces in float32, all-gathers the bf16 copy as bytes), 4 ranks,
    3 steps: every rank's weights equal the single process's bit for bit. Then the 4-rank store
    opened by 2 ranks is refused on both, naming the world sizes."""
    world, steps = 4, 3
    res = run_ranks(tmp_path, "w4", world, tmp_path / "store", steps=steps, dtype="bf16")
    check_errors_free(res)
    model, o, ref = reference_run(tmp_path, world, torch.bfloat16, steps)
    for s in range(steps):
        ref.append(step_reference(model, o, s, world))
    for r, rr in enumerate(res):
        for s in range(steps + 1):
            assert_same(rr["weights"][s], ref[s], "rank %d after step %d" % (r, s))
    # 19075 elements over 4 ranks: rank 0 holds group 0 only, rank 3 both groups.
    again = run_ranks(tmp_path, "w2", 2, tmp_path / "store", steps=1, dtype="bf16")
    for r, rr in enumerate(again):
        assert rr["error"] is not None and "StoreError" in rr["error"], rr["error"]
        assert "written for world size 4" in rr["error"] and "expected world size 2" in \
            rr["error"], rr["error"]


def test_clip_coefficient_agreed_and_equal_to_the_single_session(tmp_path):
    """max_grad_norm below the gradients' norm, 2 ranks: every rank reports the same global
    norm and clip coefficient (bit for bit), the norm is the averaged gradient's (float64), and
    the weights equal a single session stepped with that coefficient, bit for bit."""
    world, steps, max_norm = 2, 3, 1e-3
    res = run_ranks(tmp_path, "clip", world, tmp_path / "store", steps=steps,
                    max_grad_norm=max_norm)
    check_errors_free(res)
    for s in range(steps):
        norms = {rr["reports"][s]["grad_norm"] for rr in res}
        coefs = {rr["reports"][s]["clip_coef"] for rr in res}
        assert len(norms) == 1 and len(coefs) == 1, (s, norms, coefs)
    model = dist_common.make_model()
    params = list(model.parameters())
    names = [n for n, _ in model.named_parameters()]
    layout = [(n, p.numel(), 1 if n.startswith("head.") else 0) for n, p in zip(names, params)]
    hyper = [dict(lr=1e-2, weight_decay=1e-2), dict(lr=3e-3, weight_decay=0.0)]
    sess = csdkit.Session.create(str(tmp_path / "ref"), layout, hyper,
                                 [p.detach().reshape(-1) for p in params], optimizer="adamw")
    for s in range(steps):
        grads = dist_common.averaged_grads(model, s, world)
        norm = math.sqrt(sum(float(g.double().square().sum()) for g in grads))
        got = res[0]["reports"][s]["grad_norm"]
        assert abs(got - norm) <= 1e-12 * norm, (s, got, norm)
        coef = res[0]["reports"][s]["clip_coef"]
        assert coef == min(1.0, max_norm / (got + 1e-6)) and coef < 1.0
        gh = [dict(hyper[0]), dict(hyper[1])]
        if s >= 1:
            gh[0]["lr"] = 0.5e-2
        out = [torch.empty(p.numel()) for p in params]
        sess.step([g.reshape(-1) for g in grads], group_hyper=gh, clip_coef=coef,
                  weights_out=out)
        with torch.no_grad():
            for p, w in zip(params, out):
                p.copy_(w.reshape(p.shape))
        for r, rr in enumerate(res):
            assert_same(rr["weights"][s + 1], [p.detach() for p in params],
                        "rank %d after step %d" % (r, s))


def test_missing_gradients_then_resume(tmp_path):
    """2 ranks, 2 steps with no gradient for head.weight on rank 1 (averaged with zero there);
    then a new pair of processes resume() from the stores and take step 3 with no gradient for
    head.bias on any rank (its weights and state unchanged, as torch.optim leaves them): all
    equal to the single process's 3 steps bit for bit."""
    world = 2
    none = {(4, 1)}
    res = run_ranks(tmp_path, "a", world, tmp_path / "store", steps=2, none_param=4,
                    none_rank=1)
    check_errors_free(res)
    model, o, ref = reference_run(tmp_path, world, torch.float32, 3)
    for s in range(2):
        ref.append(step_reference(model, o, s, world, none=none))
    for r, rr in enumerate(res):
        for s in range(3):
            assert_same(rr["weights"][s], ref[s], "rank %d after step %d" % (r, s))
    res2 = run_ranks(tmp_path, "b", world, tmp_path / "store", steps=1, first_step=2,
                     none_param=5, resume=True)
    check_errors_free(res2)
    ref.append(step_reference(model, o, 2, world, none={(5, 0), (5, 1)}))
    assert torch.equal(ref[3][5], ref[2][5])  # head.bias unchanged by the kit
    for r, rr in enumerate(res2):
        assert rr["resumed_at"] == 2
        assert_same(rr["weights"][0], ref[2], "rank %d resumed" % r)
        assert_same(rr["weights"][1], ref[3], "rank %d after step 3" % r)


def test_ranks_with_different_models_refused_on_every_rank(tmp_path):
    """Rank 1 builds a smaller model: both ranks raise (no rank waits in a collective), naming
    rank 0's model as expected and rank 1's as found."""
    # run_ranks passes one set of options to all ranks: these two are started by hand.
    envp = dict(os.environ)
    envp["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(csdkit.__file__))] +
        ([envp["PYTHONPATH"]] if envp.get("PYTHONPATH") else []))
    procs = []
    for r, hidden in enumerate((128, 64)):
        cmd = [sys.executable, os.path.join(HERE, "dist_worker.py"), "--rank", str(r),
               "--world", "2", "--init", str(tmp_path / "init"), "--store",
               str(tmp_path / "store"), "--out", str(tmp_path / ("m.%d.pt" % r)),
               "--steps", "1", "--hidden", str(hidden)]
        procs.append(subprocess.Popen(cmd, env=envp))
    for p in procs:
        assert p.wait(timeout=180) == 0
    res = [torch.load(tmp_path / ("m.%d.pt" % r)) for r in range(2)]
    for rr in res:
        err = rr["error"]
        assert err is not None and err.startswith("ValueError: the ranks' models differ"), err
        assert "expected rank 0's (6 tensors, 19075 elements" in err, err
        assert "rank 1: 6 tensors, 5443 elements" in err, err
    assert not os.path.exists(tmp_path / "store" / "rank-0")  # nothing created


def test_partition_rule():
    p = csdkit.torch.distributed.partition
    assert p(10, 4) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert p(8, 2) == [(0, 4), (4, 8)]
    with pytest.raises(ValueError, match="ranks \\[3\\] would own no element"):
        p(6, 4)  # chunk 2: rank 3 would start at 6


@pytest.mark.parametrize("world,dtype", [(2, "fp32"), (3, "bf16")])
def test_overlapped_reduction_and_update_equal_serial_bit_for_bit(tmp_path, world, dtype):
    """overlap_backward on every rank (dist_overlap_worker.py): the buckets' reductions are
    launched by the hooks during backward and the update starts during backward; the stores'
    bytes, every rank's weights, the skipped steps and the agreed norms equal those of the same
    run with overlap_backward=False, bit for bit, over clipping on some steps, gradients None
    on every rank and on one rank, scaled in place, changed through .data, replaced, a
    non-finite value on one rank, two backward passes and an LR changed after backward; the
    update started during backward commits on most steps."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(csdkit.__file__))] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["OMP_NUM_THREADS"] = "1"
    store = tmp_path / "set"
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "dist_overlap_worker.py"),
                               "--rank", str(r), "--world", str(world), "--init",
                               str(tmp_path / "init"), "--store", str(store), "--dtype", dtype,
                               "--out", str(tmp_path / ("r%d.pt" % r))], env=env)
             for r in range(world)]
    for p in procs:
        assert p.wait(timeout=240) == 0
    res = [torch.load(tmp_path / ("r%d.pt" % r)) for r in range(world)]
    for r, out in enumerate(res):
        on, off = out["on"], out["off"]
        assert on["buckets"] >= 3
        for i, (a, b) in enumerate(zip(on["reports"], off["reports"])):
            assert a["skipped"] == b["skipped"] and a["step"] == b["step"], (r, i)
            assert a["grad_norm"] == b["grad_norm"] or (
                math.isnan(a["grad_norm"]) and math.isnan(b["grad_norm"])), (r, i)
        assert [a["skipped"] for a in on["reports"]].count(True) == 1
        clipped = [a["clip_coef"] < 1 for a in on["reports"] if not a["skipped"]]
        assert any(clipped) and not all(clipped)
        for x, y in zip(on["weights"], off["weights"]):
            bits = torch.int16 if x.dtype == torch.bfloat16 else torch.int32
            assert torch.equal(x.view(bits), y.view(bits)), r
        spec = [a.get("speculation") for a in on["reports"]]
        print("rank", r, "speculations:", spec)
        # What every rank agrees on abandons the update everywhere (the clip coefficient, the
        # skip, the hyper-parameters); the last steps are plain and commit; after an abandoned
        # update the next 2^k - 1 steps start none (k abandoned in a row).
        plan = dist_overlap_worker.PLAN
        for tag, why in (("big", "abandoned: clip coefficient"), ("inf0", "abandoned: "),
                         ("lr", "abandoned: other hyper-parameters")):
            assert spec[plan.index({tag})].startswith(why), (tag, spec)
        assert spec[-2:] == ["committed"] * 2 and spec.count("committed") >= 12, spec
        assert all("speculation" not in a for a in off["reports"])
    for r in range(world):
        on = {str(p.relative_to(store / "on")): p.read_bytes()
              for p in sorted((store / "on" / ("rank-%d" % r)).rglob("*.bin"))}
        off = {str(p.relative_to(store / "off")): p.read_bytes()
               for p in sorted((store / "off" / ("rank-%d" % r)).rglob("*.bin"))}
        assert on and on == off, r
