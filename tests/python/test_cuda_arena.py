"""CUDA parameters through the gradient arena (csdkit/torch/_cuda_arena.py; skipped without a
CUDA device): each gradient is copied device-to-host once, straight into the session's pinned
arena, with its float64 norm computed on the GPU; the new weights come back host-to-device once
from the runtime's buffer, into a GPU buffer, and the parameters are written from it device to
device once the step has committed. The promise is the one of test_overlap.py for CPU
parameters: the update started during backward and the copies made during backward
(overlap_backward=True) give the serial path's result (overlap_backward=False, every copy made
in step()) bit for bit -- store bytes, parameters, step counts, reported norms -- over clipping
that triggers on some steps, None gradients, a non-finite value (a skipped step), gradients
scaled in place, replaced, changed through .data (no version bump), gradient accumulation, and
GradScaler with unscale_ and clip_grad_norm_; and the host moves each byte once.
"""

import pytest
import torch

import csdkit
import csdkit.torch as ct
from conftest import make_data
from test_overlap import PLAN, assert_same_bits, groups, loss_of, make, run, slot_files

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA device (torch.cuda.is_available() is False): the CUDA gradient arena")

CUDA = torch.device("cuda")


# test_overlap's plan on CUDA, plus 'data': every gradient halved through .data after
# backward (no version bump: the norm check must see it).
CUDA_PLAN = PLAN + [set(), {"data"}, set(), set()]


@pytest.mark.parametrize("dtype,devices", [(torch.float32, 1), (torch.bfloat16, 2),
                                           (torch.float32, 3), (torch.bfloat16, 4)])
def test_cuda_overlapped_equals_serial_bit_for_bit(tmp_path, dtype, devices):
    x, y = make_data(seed=5, n=64)
    x, y = x.to(CUDA), y.to(CUDA)
    outs = []
    for overlap in (True, False):
        model = make(dtype).to(CUDA)
        opt = ct.AdamW(groups(model), lr=3e-3, weight_decay=0.01,
                       store=tmp_path / ("on" if overlap else "off"), devices=devices,
                       max_grad_norm=5.0, overlap_backward=overlap)
        assert opt._cuda is None  # (made with the store, at the first step)
        reps = run(model, opt, x, y, CUDA_PLAN)
        assert opt._cuda is not None
        outs.append((model, opt, reps))
    (m_on, o_on, r_on), (m_off, o_off, r_off) = outs
    skipped = [r["skipped"] for r in r_on]
    assert skipped == [i == 3 for i in range(len(CUDA_PLAN))], skipped
    norms = [r["grad_norm"] for r in r_on if not r["skipped"]]
    assert min(norms) < 5.0 < max(norms), norms
    for a, b in zip(r_on, r_off):
        assert a["skipped"] == b["skipped"] and a["step"] == b["step"]
        if not a["skipped"]:
            assert a["grad_norm"] == b["grad_norm"]
    print("speculations:", [r.get("speculation") for r in r_on])
    assert_same_bits(m_on, m_off)
    assert o_on.session.step_count == o_off.session.step_count == len(CUDA_PLAN) - 1
    o_on.close()
    o_off.close()
    assert slot_files(tmp_path / "on") == slot_files(tmp_path / "off")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_parameters_move_each_byte_once(tmp_path, dtype):
    """Per step: every gradient byte device-to-host once (gradients_received), every weight
    byte of the store's subgroups host-to-device once (weights_sent: the model's elements with
    the group padding), nothing copied on the host; from the second step the update starts
    during backward and commits; the parameters stay where they were (same data_ptr)."""
    x, y = make_data(seed=5, n=64)
    x, y = x.to(CUDA).to(dtype), y.to(CUDA).to(dtype)
    model = make(dtype).to(CUDA)
    ptrs = [p.data_ptr() for p in model.parameters()]
    opt = ct.AdamW(groups(model), lr=1e-3, store=tmp_path / "s", devices=2)
    eb = 4 if dtype == torch.float32 else 2
    for i in range(4):
        opt.zero_grad(set_to_none=True)
        loss_of(model, x * (1 + 0.1 * i), y).backward()
        n = sum(p.numel() for p in model.parameters())
        opt.step()
        rep = opt.last_report
        total = sum(sg["n"] for sg in opt.session.subgroups)
        assert rep["host_bytes"] == {"gradients_copied": 0, "gradients_received": n * eb,
                                     "weights_written": 0, "weights_saved": 0,
                                     "weights_sent": total * eb}, (i, rep["host_bytes"])
        if i > 0:
            assert rep["speculation"] == "committed", rep.get("speculation")
    assert [p.data_ptr() for p in model.parameters()] == ptrs
    # The parameters are the store's weights (rounded as the kit rounds them).
    theta = opt._store_weights()
    for p, t in zip(model.parameters(), theta):
        assert torch.equal(p.detach().reshape(-1).cpu(), t.to(dtype))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cuda_grad_scaler_unscale_and_clip_equal_serial(tmp_path, dtype):
    """The AMP recipe with clipping (float32 parameters under autocast; scaler.scale(loss)
    .backward(); scaler.unscale_(opt); clip_grad_norm_; scaler.step(opt); scaler.update()):
    unscale_ changes every gradient in place without a version bump, so the copies made during
    backward are made again; the result equals the serial path's bit for bit."""
    x, y = make_data(seed=5, n=64)
    x, y = x.to(CUDA), y.to(CUDA)
    outs = []
    for overlap in (True, False):
        model = make(torch.float32).to(CUDA)
        opt = ct.AdamW(model.parameters(), lr=1e-3, store=tmp_path / str(overlap), devices=2,
                       overlap_backward=overlap)
        scaler = torch.amp.GradScaler("cuda", init_scale=1024.0)
        for i in range(6):
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=dtype):
                loss = loss_of(model, x * (1 + 0.3 * i), y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            scaler.step(opt)
            scaler.update()
        outs.append((model, opt))
    assert_same_bits(outs[0][0], outs[1][0])
    assert outs[0][1].session.step_count == outs[1][1].session.step_count
    for _, o in outs:
        o.close()
    assert slot_files(tmp_path / "True") == slot_files(tmp_path / "False")


def test_a_refused_cuda_step_leaves_the_parameters_unchanged(tmp_path):
    """The divergence guard refuses a step (confirmed speculation): the parameters keep their
    values although the new weights had already gone to the GPU buffer."""
    model = make(torch.float32).to(CUDA)
    opt = ct.SGD(model.parameters(), lr=1e-3, store=tmp_path / "s", devices=2)
    x, y = make_data(seed=5, n=64)
    x, y = x.to(CUDA), y.to(CUDA)
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        loss_of(model, x, y).backward()
        opt.step()
    before = [p.detach().clone() for p in model.parameters()]
    opt.param_groups[0]["lr"] = 3e38
    opt.zero_grad(set_to_none=True)
    (loss_of(model, x, y) * 1000).backward()
    with pytest.raises(csdkit.DivergenceError):
        opt.step()
    for a, b in zip(model.parameters(), before):
        assert torch.equal(a, b)
    assert opt.session.step_count == 2
    opt.param_groups[0]["lr"] = 1e-3
    opt.zero_grad(set_to_none=True)
    loss_of(model, x, y).backward()
    opt.step()
    assert opt.session.step_count == 3
