"""csdkit.torch.distributed with compress=csdkit.torch.TopK over gloo (dist_worker.py ranks, as in
test_distributed.py).

The references are built from single-process pieces, independently of the partition code:
  * world 1: the distributed class must equal csdkit.torch's optimizer over the same model,
    given the same gradients (clipping, loss scales and a skipped step included), bit for bit;
  * world 2 and 4: rank r must equal a csdkit.torch optimizer whose parameters are exactly rank
    r's slice (cut here with partition(), one parameter per piece, the pieces' param groups in
    order of appearance, the same devices), given at each step that slice of the ranks' summed
    gradient at loss scale world * scale; the model the gradients are computed on is stitched
    from all ranks' references, not taken from the distributed run.
The streams each rank sent are decoded here in numpy (test_topk.decode) to check residual +
sent == accumulated exactly, and the kept set, on every rank.
"""

import math
import os
import sys

import numpy as np
import pytest
import torch

import csdkit.torch as ct
import csdkit.torch.distributed as cdist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dist_common  # noqa: E402
from test_distributed import assert_same, check_errors_free, run_ranks  # noqa: E402
from test_topk import decode, expected_kept  # noqa: E402
from test_torch_state import cpu_grad_scaler  # noqa: E402

torch.set_num_threads(1)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def summed_grads(model, step, world, scale, nan=None):
    """The ranks' gradients at `step` (dist_common, times the loss scale `scale`: a power of
    two, exact) summed in float32 (exact) and rounded to the model's dtype (exact): what every
    owner holds after the reduction. `nan`: (rank, step) that puts a NaN into fc1.bias[7]."""
    per = [dist_common.rank_grads(model, step, r) for r in range(world)]
    out = []
    for t, p in enumerate(model.parameters()):
        s = torch.zeros(p.shape, dtype=torch.float32)
        for r in range(world):
            s += per[r][t].float() * scale
        out.append(s.to(p.dtype))
    if nan is not None and nan[1] == step:
        out[1].view(-1)[7] = float("nan")
    return out


class SliceReference:
    """csdkit.torch.AdamW over exactly rank `rank`'s slice: one parameter per piece of a tensor
    inside [lo, hi) (partition(N, world)), param groups in order of appearance with the global
    groups' hyper-parameters, stepped through a GradScaler at world * scale."""

    def __init__(self, tmp, model, world, rank, ratio, devices):
        self.world = world
        params = list(model.parameters())
        total = sum(p.numel() for p in params)
        self.lo, self.hi = cdist.partition(total, world)[rank]
        groups = dist_common.param_groups(model)
        group_of = {id(p): g for g, grp in enumerate(groups) for p in grp["params"]}
        self.pieces, local, at, self.offsets = [], {}, 0, []
        for t, p in enumerate(params):
            self.offsets.append(at)
            a, b = max(self.lo, at), min(self.hi, at + p.numel())
            if a < b:
                q = torch.nn.Parameter(p.detach().reshape(-1)[a - at:b - at].clone())
                self.pieces.append((t, a, b, q))
                g = group_of[id(p)]
                local.setdefault(g, dict({k: v for k, v in groups[g].items() if k != "params"},
                                         params=[]))["params"].append(q)
            at += p.numel()
        self.global_groups = list(local)  # local group i is global group global_groups[i]
        self.opt = ct.AdamW(list(local.values()), lr=1e-2, store=str(tmp / ("ref%d" % rank)),
                            devices=devices, compress=ct.TopK(ratio), fused=True)
        self.scaler = cpu_grad_scaler(1.0)[0]

    def step(self, grads, step, scale):
        for t, a, b, q in self.pieces:
            off = self.offsets[t]
            q.grad = grads[t].reshape(-1)[a - off:b - off].clone()
        if step >= 1 and 0 in self.global_groups:  # the workers' lr change
            self.opt.param_groups[self.global_groups.index(0)]["lr"] = 0.5e-2
        self.scaler._scale.fill_(scale * self.world)
        self.scaler.step(self.opt)
        self.scaler._per_optimizer_states.clear()
        return self.opt.last_report

    def residuals(self):
        out = []
        for _, _, _, q in self.pieces:
            st = self.opt.state.get(q) or {}
            out.append(None if "topk_residual" not in st else
                       (st["topk_residual"].reshape(-1).clone(), st["topk_residual_scale"]))
        return out


def stitch(model, refs):
    """Writes the references' pieces into `model` (the whole model: every element is in
    exactly one rank's slice)."""
    with torch.no_grad():
        flat = [p.detach().reshape(-1) for p in model.parameters()]
        for ref in refs:
            for t, a, b, q in ref.pieces:
                off = ref.offsets[t]
                flat[t][a - off:b - off].copy_(q.detach())
    return [p.detach().clone() for p in model.parameters()]


def run_references(tmp, dtype, world, steps, ratio, devices=1, scales=None, nan=None,
                   skipped=()):
    """Every rank's SliceReference in lockstep. Returns (weights after each step, per step the
    residuals of each rank's pieces, per step the summed gradients, the references). At the
    steps in `skipped` (the distributed run's agreed skips) no reference steps: a skipped step
    changes nothing."""
    model = dist_common.make_model(dtype)
    refs = [SliceReference(tmp, model, world, r, ratio, devices) for r in range(world)]
    weights, residuals, grads_at = [stitch(model, refs)], [[ref.residuals() for ref in refs]], []
    for s in range(steps):
        scale = scales[s] if scales else 1.0
        grads = summed_grads(model, s, world, scale, nan)
        grads_at.append(grads)
        if s not in skipped:
            for ref in refs:
                rep = ref.step(grads, s, scale)
                assert not rep["skipped"], "reference of rank %d skipped step %d" % (
                    refs.index(ref), s)
        weights.append(stitch(model, refs))
        residuals.append([ref.residuals() for ref in refs])
    return weights, residuals, grads_at, refs


def sent_per_piece(rr, streams):
    """One rank's recorded streams decoded (numpy, from the format) into float32 per piece of
    its slice, using its store's subgroups and layout offsets."""
    plan = rr["plan"]
    total = max(sg["begin"] + sg["n"] for sg in plan["subgroups"])
    flat = torch.zeros(total, dtype=torch.float32)
    for sg, (blk, idx, val) in zip(plan["subgroups"], streams):
        pos, v = decode(blk, idx, val, sg["n"])
        flat[sg["begin"] + torch.from_numpy(pos)] = v.float()
    return flat, [flat[o:o + b - a] for o, (_, a, b) in zip(plan["tensor_offsets"],
                                                            plan["pieces"])]


def check_residual_identity(rr, rank, grads_at, world, scales, skipped, first=1):
    """On one rank, at every recorded step: residual + sent == accumulated exactly (binary32),
    accumulated = float32(summed gradient of the piece) + previous residual (rescaled by the
    loss scales' ratio, a power of two); the kept positions the top k of each subgroup; at a
    skipped step the residuals unchanged. Returns the number of steps checked."""
    plan = rr["plan"]
    checked = 0
    for s in range(first, len(rr["reports"])):
        prev, new = rr["residuals"][s], rr["residuals"][s + 1]
        flat, sent = sent_per_piece(rr, rr["streams"][s + 1])
        kit_scale = (scales[s] if scales else 1.0) * world
        acc_flat = torch.zeros_like(flat)
        accs = []
        for j, (t, a, b) in enumerate(plan["pieces"]):
            off = plan["offsets"][t]
            acc = grads_at[s][t].reshape(-1)[a - off:b - off].float()
            if prev[j] is not None:
                r, rs, _ = prev[j]
                acc = acc + (r if rs == kit_scale else r * (kit_scale / rs))
            accs.append(acc)
            acc_flat[plan["tensor_offsets"][j]:plan["tensor_offsets"][j] + b - a] = acc
        what = "rank %d step %d" % (rank, s)
        if s in skipped:
            assert rr["reports"][s]["skipped"], what
            for j in range(len(plan["pieces"])):
                assert torch.equal(new[j][0], prev[j][0]) and new[j][1] == prev[j][1], (
                    "%s: a skipped step changed the residual of piece %d" % (what, j))
            continue
        assert not rr["reports"][s]["skipped"], what
        for j, (acc, snt) in enumerate(zip(accs, sent)):
            r = new[j][0]
            assert new[j][1] == kit_scale, (what, new[j][1], kit_scale)
            assert torch.equal(r + snt, acc), (
                "%s piece %d: residual + sent != accumulated at %d elements"
                % (what, j, int((r + snt != acc).sum())))
        for sg, (blk, idx, val) in zip(plan["subgroups"], rr["streams"][s + 1]):
            seg = acc_flat[sg["begin"]:sg["begin"] + sg["n"]]
            pos, _ = decode(blk, idx, val, sg["n"])
            k = ct.TopK(rr["ratio"]).count(sg["n"])
            assert np.array_equal(pos, expected_kept(seg, k)), "%s: kept set" % what
        checked += 1
    return checked


def compare_to_references(res, weights, residuals, steps):
    for r, rr in enumerate(res):
        for s in range(steps + 1):
            assert_same(rr["weights"][s], weights[s], "rank %d after step %d" % (r, s))
            if s == 0:
                continue
            for j, (got, exp) in enumerate(zip(rr["residuals"][s], residuals[s][r])):
                assert (got is None) == (exp is None), (r, s, j)
                if got is not None:
                    assert torch.equal(got[0], exp[0]) and got[1] == exp[1], (
                        "rank %d piece %d: residual after step %d differs from the "
                        "reference's" % (r, j, s))


def test_world_one_equals_the_single_process_optimizer(tmp_path):
    """One rank, two devices (two subgroups), TopK(0.05), max_grad_norm that clips, loss scales
    4, 4, 16, 8 (the residual rescaled), a NaN at step 2: weights, residuals, grad_norm and the
    skip equal csdkit.torch.AdamW's given the same gradients, bit for bit, at every step."""
    steps, scales, ratio, max_norm = 4, [4.0, 4.0, 16.0, 8.0], 0.05, 1e-2
    res = run_ranks(tmp_path, "w1", 1, tmp_path / "store", steps=steps, topk=ratio, devices=2,
                    loss_scales=",".join(map(str, scales)), max_grad_norm=max_norm, nan_step=2,
                    nan_rank=0, record=True)
    check_errors_free(res)
    rr = res[0]
    rr["ratio"] = ratio
    model = dist_common.make_model()
    opt = ct.AdamW(dist_common.param_groups(model), lr=1e-2, store=str(tmp_path / "ref"),
                   devices=2, compress=ct.TopK(ratio), max_grad_norm=max_norm, fused=True)
    scaler = cpu_grad_scaler(1.0)[0]
    params = list(model.parameters())
    for s in range(steps):
        grads = summed_grads(model, s, 1, scales[s], nan=(0, 2))
        for p, g in zip(params, grads):
            p.grad = g
        if s >= 1:
            opt.param_groups[0]["lr"] = 0.5e-2
        scaler._scale.fill_(scales[s])
        scaler.step(opt)
        scaler._per_optimizer_states.clear()
        rep, got = opt.last_report, rr["reports"][s]
        assert (got["skipped"], got["step"]) == (rep["skipped"], rep["step"]), (s, got, rep)
        assert got["grad_norm"] == rep["grad_norm"] or (
            math.isinf(got["grad_norm"]) and math.isnan(rep["grad_norm"])), (
            s, got["grad_norm"], rep["grad_norm"])
        assert_same(rr["weights"][s + 1], [p.detach() for p in params], "after step %d" % s)
        for j, p in enumerate(params):
            res_j = rr["residuals"][s + 1][j]
            assert torch.equal(res_j[0], opt.state[p]["topk_residual"].reshape(-1)), (s, j)
            assert res_j[1] == opt.state[p]["topk_residual_scale"] and \
                res_j[2] == (0, p.numel()), (s, j, res_j[1:])
    assert [r["skipped"] for r in rr["reports"]] == [False, False, True, False]
    assert [r["clip_coef"] < 1.0 for r in rr["reports"]] == [True, True, False, True]
    assert check_residual_identity(rr, 0, [summed_grads_at(rr, s, 1, scales[s], (0, 2))
                                           for s in range(steps)], 1, scales, {2}) == 2


def summed_grads_at(rr, step, world, scale, nan=None):
    """summed_grads on the model as the run had it before `step` (its saved weights)."""
    model = dist_common.make_model(rr["weights"][step][0].dtype)
    with torch.no_grad():
        for p, w in zip(model.parameters(), rr["weights"][step]):
            p.copy_(w)
    return summed_grads(model, step, world, scale, nan)


def test_two_ranks_equal_slice_references_skip_together_and_keep_residuals(tmp_path):
    """2 ranks, fp32, TopK(0.05), loss scales 4, 4, 16, 8, rank 1 puts a NaN into fc1.bias at
    step 2 (an element of rank 0's slice): both ranks skip it with every residual unchanged
    (rank 1's own slice was finite), and every rank's weights and residuals equal its slice
    reference's bit for bit at every step; residual + sent == accumulated on both ranks."""
    world, steps, ratio = 2, 4, 0.05
    scales = [4.0, 4.0, 16.0, 8.0]
    res = run_ranks(tmp_path, "w2", world, tmp_path / "store", steps=steps, topk=ratio,
                    loss_scales=",".join(map(str, scales)), nan_step=2, nan_rank=1,
                    record=True)
    check_errors_free(res)
    for rr in res:
        assert [r["skipped"] for r in rr["reports"]] == [False, False, True, False]
        rr["ratio"] = ratio
    weights, residuals, grads_at, refs = run_references(
        tmp_path, torch.float32, world, steps, ratio, scales=scales, nan=(1, 2), skipped={2})
    for r, (rr, ref) in enumerate(zip(res, refs)):
        assert [(t, a, b) for t, a, b, _ in ref.pieces] == [tuple(x) for x in
                                                            rr["plan"]["pieces"]], r
        assert [sg["n"] for sg in ref.opt.session.subgroups] == \
            [sg["n"] for sg in rr["plan"]["subgroups"]], r
    compare_to_references(res, weights, residuals, steps)
    for r, rr in enumerate(res):
        assert check_residual_identity(rr, r, grads_at, world, scales, {2}) == 2
    # The NaN reached rank 0's stream (its owner), not rank 1's.
    assert any(not torch.isfinite(v).all() for _, _, v in res[0]["streams"][3])
    assert all(torch.isfinite(v).all() for _, _, v in res[1]["streams"][3])


@pytest.mark.nightly
def test_four_ranks_bf16_equal_slice_references(tmp_path):
    """4 ranks, bf16 (gloo sums in float32, each owner rounds its slice once), TopK(0.1), 3
    steps: every rank's weights and residuals equal its slice reference's bit for bit; residual
    + sent == accumulated on every rank (the residual holds what bf16 rounding lost)."""
    world, steps, ratio = 4, 3, 0.1
    res = run_ranks(tmp_path, "w4", world, tmp_path / "store", steps=steps, topk=ratio,
                    dtype="bf16", record=True)
    check_errors_free(res)
    weights, residuals, grads_at, _ = run_references(tmp_path, torch.bfloat16, world, steps,
                                                     ratio)
    compare_to_references(res, weights, residuals, steps)
    for r, rr in enumerate(res):
        rr["ratio"] = ratio
        assert check_residual_identity(rr, r, grads_at, world, None, set()) == 2


def test_clip_agreed_and_state_dict_resume_keeps_residuals(tmp_path):
    """2 ranks, TopK(0.1), max_grad_norm: every rank reports the same grad_norm and clip_coef,
    the norm that of the averaged accumulated gradient sqrt(sum over ranks of |summed slice +
    residual|^2) / world. A run of 2 steps saving each rank's state_dict(), then new processes
    that resume() and load it (the dict of step 1 refused first: the stores are at step 2) take
    steps 3 and 4 equal to an uninterrupted 4-step run bit for bit, residuals included."""
    world, ratio, max_norm = 2, 0.1, 1e-2
    opts = dict(topk=ratio, max_grad_norm=max_norm, record=True)
    full = run_ranks(tmp_path, "full", world, tmp_path / "full", steps=4, **opts)
    check_errors_free(full)
    for s in range(4):
        norms = {rr["reports"][s]["grad_norm"] for rr in full}
        coefs = {rr["reports"][s]["clip_coef"] for rr in full}
        assert len(norms) == 1 and len(coefs) == 1, (s, norms, coefs)
        grads = summed_grads_at(full[0], s, world, 1.0)
        sumsq = 0.0
        for rr in full:
            for j, (t, a, b) in enumerate(rr["plan"]["pieces"]):
                off = rr["plan"]["offsets"][t]
                acc = grads[t].reshape(-1)[a - off:b - off].double()
                if rr["residuals"][s] is not None and rr["residuals"][s][j] is not None:
                    acc = acc + rr["residuals"][s][j][0].double()
                sumsq += float(acc.square().sum())
        norm = math.sqrt(sumsq) / world
        got = norms.pop()
        assert abs(got - norm) <= 1e-12 * norm, (s, got, norm)
        assert coefs.pop() == min(1.0, max_norm / (got + 1e-6)) < 1.0
    assert any(float(x[0].abs().max()) > 0 for rr in full for x in rr["residuals"][2])
    state = str(tmp_path / "state.{rank}.pt")
    a = run_ranks(tmp_path, "a", world, tmp_path / "store", steps=2, save_state=state, **opts)
    check_errors_free(a)
    b = run_ranks(tmp_path, "b", world, tmp_path / "store", steps=2, first_step=2, resume=True,
                  load_state=state, **opts)
    check_errors_free(b)
    for r, rr in enumerate(b):
        assert rr["resumed_at"] == 2
        err = rr["load_refusal"]
        assert err.startswith("StoreError: state_dict: expected the state of committed step 2"
                              ) and "found step 1" in err, err
        for k in range(3):
            assert_same(rr["weights"][k], full[r]["weights"][2 + k],
                        "resumed rank %d after step %d" % (r, 2 + k))
            for j, (x, y) in enumerate(zip(rr["residuals"][k], full[r]["residuals"][2 + k])):
                assert torch.equal(x[0], y[0]) and x[1:] == y[1:], (r, k, j)
