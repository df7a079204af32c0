"""The kit's DTensor (FSDP2) code path on the CPU, with a stand-in DTensor class, on any torch.

Under FSDP2 every parameter and gradient is a DTensor and each rank's csdkit.torch optimizer
works on the local shards. The real thing needs torch >= 2.4 and GPUs (test_fsdp2.py); here the
kit's DTensor class is replaced by FakeDTensor, which carries what the kit uses of a DTensor (a
local tensor, device_mesh, placements, the global shape, DTensor.from_local), and two "ranks"
are two optimizers in this process, each over its dim-0 chunks of the same global model (as
FSDP2 shards: chunks of ceil(rows / 2) rows, so the 1-row head gives rank 1 nothing). AdamW is
elementwise, so the ranks' shards must equal, bit for bit, a single csdkit.torch.AdamW over the
global model given the same gradients; state_dict() gives FakeDTensors of the parameters'
placements, load_state_dict takes them back, and a shard without elements has no store entry.
"""

import pytest
import torch

import csdkit.torch as ct
import csdkit.torch.optim as optim_mod
from conftest import loss_of, make_data, make_model

WORLD = 2
MESH = "mesh-of-2"
PLACEMENTS = ("Shard(dim=0)",)


class FakeDTensor(torch.Tensor):
    """A tensor of the global shape (values unused) carrying this rank's shard."""

    @staticmethod
    def make(global_shape, local, mesh=MESH, placements=PLACEMENTS, requires_grad=False):
        t = torch.Tensor._make_subclass(FakeDTensor, torch.zeros(global_shape), requires_grad)
        t._local_tensor, t.device_mesh, t.placements = local, mesh, placements
        return t

    @classmethod
    def from_local(cls, local, mesh, placements, *, run_check=False, shape=None, stride=None):
        assert run_check is False and shape is not None and stride is not None
        return cls.make(shape, local, mesh, placements)


@pytest.fixture
def fake_dtensor(monkeypatch):
    monkeypatch.setattr(optim_mod, "_DTENSOR", [FakeDTensor])


def rows(n, r):
    c = -(-n // WORLD)
    return slice(min(n, r * c), min(n, (r + 1) * c))


def shard(t, r, **kw):
    return FakeDTensor.make(t.shape, t.detach()[rows(t.shape[0], r)].clone(), **kw)


def groups(params):
    """Two groups; the second (the head: 1 row) has no element on rank 1."""
    return [dict(params=params[:4]), dict(params=params[4:], lr=4e-3, weight_decay=0.0)]


def build_run(tmp_path, tag=""):
    ref_model = make_model()
    ref = ct.AdamW(groups(list(ref_model.parameters())), lr=3e-3, weight_decay=0.05,
                   store=tmp_path / ("ref" + tag), devices=1)
    ranks = []
    for r in range(WORLD):
        ps = [shard(p, r, requires_grad=True) for p in ref_model.parameters()]
        ranks.append((ps, ct.AdamW(groups(ps), lr=3e-3, weight_decay=0.05,
                                   store=tmp_path / ("rank%d%s" % (r, tag)), devices=1)))
    return ref_model, ref, ranks


def step_all(ref_model, ref, ranks, x, y):
    ref.zero_grad(set_to_none=True)
    loss_of(ref_model, x, y).backward()
    for r, (ps, opt) in enumerate(ranks):
        for p, q in zip(ps, ref_model.parameters()):
            p.grad = FakeDTensor.make(q.shape, q.grad[rows(q.shape[0], r)].clone())
        opt.step()
    ref.step()


def assert_shards_equal(ref_model, ranks):
    for i, q in enumerate(ref_model.parameters()):
        whole = torch.cat([ps[i]._local_tensor for ps, _ in ranks])
        assert torch.equal(whole, q.detach()), i


def test_shards_step_as_the_whole_model(fake_dtensor, tmp_path):
    ref_model, ref, ranks = build_run(tmp_path)
    x, y = make_data()
    for _ in range(5):
        step_all(ref_model, ref, ranks, x, y)
        assert_shards_equal(ref_model, ranks)
    (ps0, o0), (ps1, o1) = ranks
    # Rank 1 holds no element of the head: its store has the 4 body tensors, one group.
    assert len(o0.session.layout) == 6 and len(o1.session.layout) == 4
    assert len(o1.session.group_hyper) == 1 and len(o0.session.group_hyper) == 2
    ref_sd = ref.state_dict()["state"]
    for r, (ps, opt) in enumerate(ranks):
        sd = opt.state_dict()["state"]
        assert sorted(sd) == list(range(6))
        for i, p in enumerate(ps):
            st = sd[i]
            local = p._local_tensor
            for k in ("exp_avg", "exp_avg_sq"):
                assert isinstance(st[k], FakeDTensor) and st[k].shape == p.shape
                assert st[k].device_mesh == MESH and st[k].placements == PLACEMENTS
                assert torch.equal(st[k]._local_tensor,
                                   ref_sd[i][k][rows(p.shape[0], r)]), (r, i, k)
            if local.numel():
                assert float(st["step"]) == 5.0
            else:  # an empty shard: buffers without elements, no step
                assert sorted(st) == ["exp_avg", "exp_avg_sq"] and st["exp_avg"]._local_tensor \
                    .numel() == 0
        # The view shows the same entries.
        assert len(opt.state) == 6
        for i, p in enumerate(ps):
            assert sorted(opt.state[p]) == sorted(sd[i])


def test_state_dict_round_trip_into_new_stores(fake_dtensor, tmp_path):
    """Each rank's state_dict() (FakeDTensors) into a new optimizer with a new store: the
    imported state equals the saved one, and the runs go on equal to the uninterrupted one."""
    ref_model, ref, ranks = build_run(tmp_path)
    x, y = make_data()
    for _ in range(3):
        step_all(ref_model, ref, ranks, x, y)
    saved = [opt.state_dict() for _, opt in ranks]
    new = []
    for r, ((ps, opt), sd) in enumerate(zip(ranks, saved)):
        opt.close()
        o = ct.AdamW(groups(ps), lr=3e-3, weight_decay=0.05, store=tmp_path / ("new%d" % r),
                     devices=1)
        o.load_state_dict(sd)
        assert o.session.step_count == 3
        got = o.state_dict()["state"]
        for i, st in sd["state"].items():
            assert sorted(got[i]) == sorted(st)
            for k, v in st.items():
                a = v._local_tensor if isinstance(v, FakeDTensor) else v
                b = got[i][k]._local_tensor if isinstance(got[i][k], FakeDTensor) else got[i][k]
                assert torch.equal(a, b), (r, i, k)
        new.append((ps, o))
    for _ in range(3):
        step_all(ref_model, ref, new, x, y)
        assert_shards_equal(ref_model, new)


def test_refusals(fake_dtensor, tmp_path):
    ref_model = make_model()
    ps = [shard(p, 0, requires_grad=True) for p in ref_model.parameters()]
    with pytest.raises(ValueError, match="clip_grad_norm_"):
        ct.AdamW(ps, store=tmp_path / "a", max_grad_norm=1.0)
    with pytest.raises(ValueError, match="compress= with DTensor"):
        ct.AdamW(ps, store=tmp_path / "b", compress=ct.TopK(0.1))
    opt = ct.AdamW(ps, store=tmp_path / "c", devices=1)
    x, y = make_data()
    loss_of(ref_model, x, y).backward()
    # A plain gradient for a DTensor parameter, or one of other placements: refused.
    ps[0].grad = ref_model.fc1.weight.grad.clone()
    with pytest.raises(ValueError, match="expected a DTensor sharded as the parameter"):
        opt.step()
    for p, q in zip(ps, ref_model.parameters()):
        p.grad = FakeDTensor.make(q.shape, q.grad[rows(q.shape[0], 0)].clone())
    opt.step()
    sd = opt.state_dict()
    st = sd["state"][0]
    st["exp_avg"] = FakeDTensor.make(st["exp_avg"].shape, st["exp_avg"]._local_tensor,
                                     placements=("Replicate()",))
    with pytest.raises(ValueError, match="placements"):
        opt.load_state_dict(sd)
    st["exp_avg"] = torch.zeros(ps[0].shape)  # the whole tensor, not this rank's shard
    with pytest.raises(ValueError, match="expected a DTensor sharded as the parameter"):
        opt.load_state_dict(sd)
