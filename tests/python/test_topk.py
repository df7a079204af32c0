"""csdkit.torch.TopK: Top-K gradients in the kit's block format with error feedback.

The streams are decoded here independently, in numpy, from the format's definition
(hls/include/csdkit/hls/sparse.h): blk uint32[NumBlocks(n) + 1] cumulative entry counts per
65536-element block, idx the 16-bit in-block offsets (sorted, unique), val in the grad dtype.
"""

import copy
import math

import numpy as np
import pytest
import torch

import csdkit
import csdkit.torch as ct
from conftest import DEVICES, loss_of, make_data, make_model

BLOCK = 65536


def decode(blk, idx, val, n):
    """(positions int64, values as float64) of one stream, checked against the format."""
    blk = blk.numpy().view(np.uint32).astype(np.int64)
    idx = idx.numpy().view(np.uint16).astype(np.int64)
    nb = (n + BLOCK - 1) // BLOCK
    assert blk.shape == (nb + 1,) and blk[0] == 0 and blk[-1] == idx.size
    assert np.all(np.diff(blk) >= 0)
    pos = []
    for b in range(nb):
        off = idx[blk[b]:blk[b + 1]]
        assert np.all(np.diff(off) > 0), "offsets sorted and unique within a block"
        assert np.all(off < min(BLOCK, n - b * BLOCK))
        pos.append(b * BLOCK + off)
    pos = np.concatenate(pos) if pos else np.zeros(0, np.int64)
    return pos, val


def expected_kept(acc, k):
    """Top-k by magnitude, non-finite first, ties to the lower index (numpy, independent)."""
    a = acc.numpy().astype(np.float64)
    key = np.where(np.isfinite(a), np.abs(a), np.inf)
    order = np.lexsort((np.arange(a.size), -key))  # by -key, then by index
    return np.sort(order[:k])


def bits(t):
    """A float tensor's bit patterns (int view), for bit-for-bit comparisons."""
    return t.contiguous().view({4: torch.int32, 2: torch.int16}[t.element_size()])


# -- the compressor alone -------------------------------------------------------------------

@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.0000001, 2, float("nan"), float("inf"), "0.1",
                                 None, True])
def test_bad_ratio_refused(bad):
    with pytest.raises(ValueError, match="ratio.*expected a finite number in \\(0, 1\\]"):
        ct.TopK(bad)


def test_bad_compress_refused(tmp_path):
    with pytest.raises(ValueError, match="Invalid compress: expected None or csdkit.torch.TopK"):
        ct.AdamW(make_model().parameters(), store=str(tmp_path / "s"), compress=0.1)


@pytest.mark.parametrize("n", [1, 1000, BLOCK, BLOCK + 1, 3 * BLOCK - 7])
@pytest.mark.parametrize("ratio", [1e-4, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_stream_decodes_to_kept(n, ratio, dtype):
    g = torch.Generator().manual_seed(n)
    # Few distinct magnitudes: many ties at the k-th magnitude.
    acc = torch.randint(-6, 7, (n,), generator=g).float() * 0.37
    top = ct.TopK(ratio)
    blk, idx, val, kept = top.encode(acc, dtype)
    k = max(1, min(n, math.ceil(ratio * n)))
    assert top.count(n) == k and val.numel() == k and val.dtype == dtype
    pos, v = decode(blk, idx, val, n)
    assert np.array_equal(pos, expected_kept(acc, k))
    assert np.array_equal(pos, kept.numpy())
    assert torch.equal(bits(v), bits(acc[torch.from_numpy(pos)].to(dtype)))


def test_nonfinite_always_kept():
    n = 2 * BLOCK + 5
    acc = torch.randn(n, generator=torch.Generator().manual_seed(3)) * 1e30
    acc[7], acc[BLOCK + 3], acc[n - 1] = float("nan"), float("inf"), float("-inf")
    for ratio in (1e-9, 2 / n):  # k = 1, 2: not even room for all three
        blk, idx, val, _ = ct.TopK(ratio).encode(acc, torch.float32)
        pos, v = decode(blk, idx, val, n)
        assert set(pos.tolist()) <= {7, BLOCK + 3, n - 1} and not torch.isfinite(v).any()
    blk, idx, val, _ = ct.TopK(3 / n).encode(acc, torch.float16)
    pos, v = decode(blk, idx, val, n)
    assert pos.tolist() == [7, BLOCK + 3, n - 1]


# -- the session's sparse step --------------------------------------------------------------

def _session(path, layout, devices, **kw):
    groups = sorted({g for _, _, g in layout})
    w = [torch.linspace(-1, 1, n) for _, n, _ in layout]
    return csdkit.Session.create(str(path), layout, [{"lr": 1e-2}] * len(groups), w,
                                 devices=devices, subgroup_elems=131072, **kw)


def test_step_sparse_equals_dense_step_of_decoded(tmp_path):
    # Two groups on two devices: device 0's subgroup is tensor a plus group padding (two
    # blocks), device 1's is 100000 elements (a partial second block).
    layout = [("a", 70000, 0), ("b", 100000, 1)]
    sparse = _session(tmp_path / "sparse", layout, 2)
    dense = _session(tmp_path / "dense", layout, 2)
    assert [(s["device"], s["n"]) for s in sparse.subgroups] == [(0, 131072), (1, 100000)]
    assert sparse.tensor_offsets == [0, 131072]
    g = torch.Generator().manual_seed(5)
    top = ct.TopK(0.3)
    for _ in range(3):
        grads = [torch.randn(n, generator=g) for _, n, _ in layout]
        flat = torch.zeros(131072 + 100000)
        for t, off in zip(grads, sparse.tensor_offsets):
            flat[off:off + t.numel()] = t
        streams, decoded = [], torch.zeros_like(flat)
        for sg in sparse.subgroups:
            seg = flat[sg["begin"]:sg["begin"] + sg["n"]]
            blk, idx, val, _ = top.encode(seg, torch.float32)
            pos, v = decode(blk, idx, val, sg["n"])
            decoded[sg["begin"] + torch.from_numpy(pos)] = v
            streams.append((blk, idx, val))
        rs = sparse.step_sparse(streams)
        rd = dense.step([decoded[off:off + t.numel()].clone()
                         for t, off in zip(grads, sparse.tensor_offsets)])
        assert not rs["skipped"] and not rd["skipped"]
    for var in sparse.vars:
        a = [torch.empty(n) for _, n, _ in layout]
        b = [torch.empty(n) for _, n, _ in layout]
        sparse.export_state(var, a)
        dense.export_state(var, b)
        assert all(torch.equal(x, y) for x, y in zip(a, b)), var


def test_step_sparse_refusals(tmp_path):
    s = _session(tmp_path / "s", [("a", 70000, 0), ("b", 100000, 1)], 2)
    top = ct.TopK(0.01)
    good = [top.encode(torch.randn(sg["n"]), torch.float32)[:3] for sg in s.subgroups]
    with pytest.raises(ValueError, match="streams: expected one .* per subgroup \\(2"):
        s.step_sparse(good[:1])
    blk, idx, val = good[1]
    bad_idx = idx.clone()
    bad_idx[[0, 1]] = bad_idx[[1, 0]]
    with pytest.raises(ValueError, match="device 1 subgroup 0: .*entry 1: index below its predecessor"):
        s.step_sparse([good[0], (blk, bad_idx, val)])
    with pytest.raises(ValueError, match="device 1 subgroup 0\\) blk: expected 3 elements"):
        s.step_sparse([good[0], (blk[:2], idx, val)])
    with pytest.raises(ValueError, match="device 1 subgroup 0\\) val: expected dtype"):
        s.step_sparse([good[0], (blk, idx, val.half())])
    with pytest.raises(ValueError, match="device 1 subgroup 0\\) idx: expected dtype torch.int16"):
        s.step_sparse([good[0], (blk, idx.int(), val)])
    with pytest.raises(ValueError, match="no_grad: expected ascending layout entry indices below "
                                         "2, found 0 after 1"):
        s.step_sparse(good, no_grad=[1, 0])
    with pytest.raises(ValueError, match="no_grad: expected ascending layout entry indices below "
                                         "2, found 2"):
        s.step_sparse(good, no_grad=[2])
    assert s.step_count == 0


# -- the optimizers ------------------------------------------------------------------------

class Recorder:
    """Stands in for the optimizer's session and keeps the streams of each sparse step."""

    def __init__(self, session):
        self._s = session
        self.streams = []

    def __getattr__(self, name):
        return getattr(self._s, name)

    def step_sparse(self, streams, **kw):
        self.streams.append([tuple(t.clone() for t in s) for s in streams])
        return self._s.step_sparse(streams, **kw)


def _grads(model, x, y):
    model.zero_grad(set_to_none=True)
    loss = loss_of(model, x, y)
    loss.backward()
    return loss.item()


def _sent(rec, opt):
    """The last step's streams decoded into one float32 tensor per parameter."""
    subgroups = opt.session.subgroups
    total = max(sg["begin"] + sg["n"] for sg in subgroups)
    flat = torch.zeros(total)
    for sg, (blk, idx, val) in zip(subgroups, rec.streams[-1]):
        pos, v = decode(blk, idx, val, sg["n"])
        flat[sg["begin"] + torch.from_numpy(pos)] = v.float()
    return [flat[o:o + p.numel()].reshape(p.shape)
            for p, o in zip(opt._params, opt.session.tensor_offsets)]


@pytest.mark.parametrize("dtype", [torch.float32,
                                   pytest.param(torch.bfloat16, marks=pytest.mark.nightly),
                                   pytest.param(torch.float16, marks=pytest.mark.nightly)])
def test_residual_plus_sent_is_accumulated(tmp_path, dtype):
    # The gradients come from an fp32 twin (torch 1.13 has no fp16 matmul on the CPU), rounded
    # to the model's dtype.
    ref = make_model()
    model = copy.deepcopy(ref).to(dtype)
    x, y = make_data()
    params = list(model.parameters())

    def grads():
        with torch.no_grad():
            for q, p in zip(ref.parameters(), params):
                q.copy_(p.float())
        _grads(ref, x, y)
        for q, p in zip(ref.parameters(), params):
            p.grad = q.grad.to(dtype)

    opt = ct.AdamW(params, lr=1e-3, store=str(tmp_path / "s"), devices=DEVICES,
                   compress=ct.TopK(0.05))
    grads()
    opt.step()  # creates the store
    rec = Recorder(opt.session)
    opt._session = rec
    for _ in range(4):
        grads()
        acc = [p.grad.float() + opt.state[p]["topk_residual"] for p in params]
        opt.step()
        assert not opt.last_report["skipped"]
        sent = _sent(rec, opt)
        for p, a, s in zip(params, acc, sent):
            r = opt.state[p]["topk_residual"]
            assert torch.equal(r + s, a)  # exact, in binary32
            # Where something was sent the residual is what rounding to the grad dtype lost.
            m = s != 0
            assert torch.equal(r[m], a[m] - a[m].to(dtype).float())
        # The kept entries are the top 5 % of each subgroup's accumulated magnitudes.
        flat = torch.zeros(max(sg["begin"] + sg["n"] for sg in opt.session.subgroups))
        for a, o in zip(acc, opt.session.tensor_offsets):
            flat[o:o + a.numel()] = a.reshape(-1)
        for sg, (blk, idx, val) in zip(opt.session.subgroups, rec.streams[-1]):
            seg = flat[sg["begin"]:sg["begin"] + sg["n"]]
            pos, _ = decode(blk, idx, val, sg["n"])
            assert np.array_equal(pos, expected_kept(seg, math.ceil(0.05 * sg["n"])))


def test_nonfinite_gradient_skips_and_keeps_residual(tmp_path):
    model = make_model()
    x, y = make_data()
    opt = ct.AdamW(model.parameters(), lr=1e-3, store=str(tmp_path / "s"), devices=DEVICES,
                   compress=ct.TopK(0.01))
    for _ in range(2):
        _grads(model, x, y)
        opt.step()
    rec = Recorder(opt.session)
    opt._session = rec
    params = list(model.parameters())
    before_w = [p.detach().clone() for p in params]
    before_r = [opt.state[p]["topk_residual"].clone() for p in params]
    step = opt.session.step_count
    _grads(model, x, y)
    params[1].grad[17] = float("nan")  # a small bias element: far below the top 1 %
    opt.step()
    assert opt.last_report["skipped"]
    assert opt.session.step_count == step
    sent = _sent(rec, opt)
    assert torch.isnan(sent[1][17])
    assert all(torch.equal(p, w) for p, w in zip(params, before_w))
    assert all(torch.equal(opt.state[p]["topk_residual"], r) for p, r in zip(params, before_r))
    _grads(model, x, y)  # the next, finite step goes on from the same residual
    opt.step()
    assert not opt.last_report["skipped"] and opt.session.step_count == step + 1


@pytest.mark.parametrize("feedback", [True, False])
def test_ratio_one_equals_dense(tmp_path, feedback):
    x, y = make_data()
    a = make_model()
    b = copy.deepcopy(a)
    oa = ct.AdamW(a.parameters(), lr=3e-3, store=str(tmp_path / "a"), devices=DEVICES)
    ob = ct.AdamW(b.parameters(), lr=3e-3, store=str(tmp_path / "b"), devices=DEVICES,
                  compress=ct.TopK(1.0, error_feedback=feedback))
    for _ in range(5):
        for m, o in ((a, oa), (b, ob)):
            _grads(m, x, y)
            o.step()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    if feedback:  # fp32 gradients: nothing lost, nothing left
        assert all(not ob.state[p]["topk_residual"].any() for p in b.parameters())


@pytest.mark.parametrize("ratio", [1.0, 0.2])
def test_parameter_without_gradient_is_left_alone(tmp_path, ratio):
    # A frozen parameter (grad None) keeps its weights and gets no residual; the others move.
    # With TopK(1.0) they equal, bit for bit, a run whose optimizer holds only them (the frozen
    # bias's zeros are sent, so AdamW's decay would move it unless the kit puts it back).
    x, y = make_data()
    a = make_model()
    b = copy.deepcopy(a)
    for m in (a, b):
        m.head.bias.requires_grad_(False)
    oa = ct.AdamW(a.parameters(), lr=3e-3, weight_decay=0.1, store=str(tmp_path / "a"),
                  devices=DEVICES, compress=ct.TopK(ratio))
    ob = ct.AdamW([p for p in b.parameters() if p.requires_grad], lr=3e-3, weight_decay=0.1,
                  store=str(tmp_path / "b"), devices=DEVICES, compress=ct.TopK(ratio))
    bias0 = a.head.bias.detach().clone()
    start = [p.detach().clone() for p in a.parameters() if p.requires_grad]
    for _ in range(4):
        for m, o in ((a, oa), (b, ob)):
            _grads(m, x, y)
            o.step()
    assert a.head.bias.grad is None
    assert torch.equal(a.head.bias, bias0)
    assert "topk_residual" not in oa.state.get(a.head.bias, {})
    moved = [p for p in a.parameters() if p.requires_grad]
    assert all(not torch.equal(p, p0) for p, p0 in zip(moved, start))
    if ratio == 1.0:
        others = [q for q in b.parameters() if q.requires_grad]
        assert all(torch.equal(p, q) for p, q in zip(moved, others))


def test_state_dict_round_trips_residual(tmp_path):
    x, y = make_data()
    a = make_model()
    oa = ct.AdamW(a.parameters(), lr=3e-3, store=str(tmp_path / "a"), devices=DEVICES,
                  compress=ct.TopK(0.1))
    for _ in range(3):
        _grads(a, x, y)
        oa.step()
    sd = oa.state_dict()
    assert all("topk_residual" in st for st in sd["state"].values())
    b = copy.deepcopy(a)
    ob = ct.AdamW(b.parameters(), lr=3e-3, store=str(tmp_path / "b"), devices=DEVICES,
                  compress=ct.TopK(0.1))
    ob.load_state_dict(sd)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(oa.state[p]["topk_residual"], ob.state[q]["topk_residual"])
    for _ in range(2):
        for m, o in ((a, oa), (b, ob)):
            _grads(m, x, y)
            o.step()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_clipping_uses_accumulated_norm(tmp_path):
    model = make_model()
    x, y = make_data()
    opt = ct.AdamW(model.parameters(), store=str(tmp_path / "s"), devices=DEVICES,
                   compress=ct.TopK(0.1), max_grad_norm=1e-3)
    _grads(model, x, y)
    opt.step()
    _grads(model, x, y)
    acc = [(p.grad + opt.state[p]["topk_residual"]).double() for p in model.parameters()]
    opt.step()
    norm = math.sqrt(sum(float((a * a).sum()) for a in acc))
    assert opt.last_report["grad_norm"] == pytest.approx(norm, rel=1e-12)


def test_training_with_topk_decreases_loss(tmp_path):
    model = make_model()
    x, y = make_data()
    opt = ct.AdamW(model.parameters(), lr=3e-3, store=str(tmp_path / "s"), devices=DEVICES,
                   compress=ct.TopK(0.1))
    losses = []
    for _ in range(30):
        losses.append(_grads(model, x, y))
        opt.step()
    rep = opt.last_report
    assert losses[-1] < 0.5 * losses[0], losses
    assert rep["subgroups"] >= 1
