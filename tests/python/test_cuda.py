"""csdkit.torch with CUDA parameters (2 emulated SmartSSDs; skipped without a CUDA device).

CUDA parameters and gradients go through pinned host buffers (csdkit/torch/optim.py): each
gradient is copied to a pinned buffer, the kit steps, and the new weights are copied back
into the parameter's own storage. Checked here against torch.optim.AdamW on the same device:

  * an fp32 model: csdkit.torch.AdamW against torch.optim.AdamW(foreach=False) over 30 steps,
    the inf-norm relative parameter difference and the relative loss difference bounded at
    every step by 1e-5, the bound of test_torch_optim.py (reasoning there);
  * bf16 and fp16 models under torch.amp.GradScaler("cuda") used unchanged (scaler.scale(loss)
    .backward(); scaler.step(opt); scaler.update()): the kit's weights are the rounding of
    torch.optim.AdamW's on an fp32 master copy fed the same (unscaled) gradients, within one
    ulp of the parameter dtype and > 99 % identical at every step, and the store's fp32 master
    weights within 1e-5 relative of the reference's; one step has an inf injected into a
    gradient: it is skipped (last_report["skipped"]), the parameters and every file of the
    store (but its lock file) are unchanged byte for byte, and update() halves the scale;
  * in both, the parameters stay on CUDA and are updated in place (same data_ptr).

Measured values are printed with -s.
"""

import copy

import pytest
import torch

import csdkit.torch as ct
from conftest import DEVICES, loss_of, make_data, make_model, train_side_by_side

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA device (torch.cuda.is_available() is False): csdkit.torch with "
           "CUDA parameters")

REL_BOUND = 1e-5
CUDA = torch.device("cuda")


def store_bytes(d):
    """Every file of a store directory (but its lock file), as bytes."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and p.name != "lock"}


def cuda_grad_scaler(**kw):
    """torch.amp.GradScaler("cuda") where torch has it (>= 2.3), else torch.cuda.amp's."""
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", **kw)
    return torch.cuda.amp.GradScaler(**kw)


def pointers(model):
    return [p.data_ptr() for p in model.parameters()]


def assert_on_cuda_in_place(model, ptrs, initial):
    for p, ptr, p0 in zip(model.parameters(), ptrs, initial):
        assert p.device.type == "cuda", "a parameter left the GPU: %s" % p.device
        assert p.data_ptr() == ptr, "a parameter's storage was replaced (not updated in place)"
        assert not torch.equal(p.detach(), p0), "a parameter was not updated"


def test_fp32_cuda_model_matches_torch_adamw(tmp_path):
    ref = make_model().to(CUDA)
    kit = copy.deepcopy(ref)
    x, y = (t.to(CUDA) for t in make_data())
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=3e-3, foreach=False)
    kit_opt = ct.AdamW(kit.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES)
    ptrs = pointers(kit)
    initial = [p.detach().clone() for p in kit.parameters()]
    rows = train_side_by_side(ref, kit, ref_opt, kit_opt, 30, x, y)
    worst = max(r[2] for r in rows)
    worst_loss = max(abs(a - b) / abs(a) for a, b, _ in rows)
    print("\n  CUDA fp32, 30 steps: max rel. parameter difference %.3g, max rel. loss "
          "difference %.3g, loss %.4g -> %.4g"
          % (worst, worst_loss, rows[0][0], rows[-1][0]))
    for i, (ref_loss, kit_loss, d) in enumerate(rows):
        assert d <= REL_BOUND, "step %d: parameters differ by %.3g relative" % (i + 1, d)
        assert abs(kit_loss - ref_loss) <= REL_BOUND * abs(ref_loss), (
            "step %d: loss %r (kit) vs %r (torch)" % (i + 1, kit_loss, ref_loss))
    assert rows[-1][0] < 0.75 * rows[0][0]  # it trains
    assert_on_cuda_in_place(kit, ptrs, initial)
    assert all(p.grad.device.type == "cuda" for p in kit.parameters())
    assert kit_opt.session.step_count == 30
    assert not kit_opt.last_report["skipped"]
    kit_opt.session.verify()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_cuda_model_with_grad_scaler(tmp_path, dtype):
    steps, inf_step = 8, 3
    kit = make_model().to(CUDA, dtype)
    master = [torch.nn.Parameter(p.detach().float()) for p in kit.parameters()]
    ref_opt = torch.optim.AdamW(master, lr=1e-3, foreach=False)
    opt = ct.AdamW(kit.parameters(), lr=1e-3, store=tmp_path / "s", devices=DEVICES)
    scaler = cuda_grad_scaler(init_scale=1024.0, growth_interval=1000)
    x, y = (t.to(CUDA, dtype) for t in make_data())
    ptrs = pointers(kit)
    initial = [p.detach().clone() for p in kit.parameters()]
    scales = [m.detach().double().abs().max().item() for m in master]
    # One ulp of the parameter dtype, relative; and its smallest spacing (fp16's subnormals).
    ulp = 2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10
    tiny = 2.0 ** -133 if dtype == torch.bfloat16 else 2.0 ** -24
    worst_ulp, worst_same = 0.0, 1.0
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        scale = scaler.get_scale()
        scaler.scale(loss_of(kit, x, y)).backward()
        if step == inf_step:
            kit.fc2.weight.grad[1, 2] = float("inf")  # an overflow: the step must be skipped
            before = store_bytes(tmp_path / "s")
            weights = [p.detach().clone() for p in kit.parameters()]
        else:
            # The reference: the same gradients, unscaled (a power of two: exact), on fp32.
            for p, m in zip(kit.parameters(), master):
                m.grad = p.grad.float() / scale
        scaler.step(opt)
        scaler.update()
        if step == inf_step:
            assert opt.last_report["skipped"]
            assert store_bytes(tmp_path / "s") == before, "a skipped step changed the store"
            assert all(torch.equal(a, b) for a, b in zip(weights, kit.parameters()))
            assert scaler.get_scale() == scale * 0.5, "update() did not back off"
            continue
        assert not opt.last_report["skipped"]
        assert scaler.get_scale() == scale
        ref_opt.step()
        for p, m in zip(kit.parameters(), master):
            want = m.detach().to(dtype).float()
            got = p.detach().float()
            one_ulp = (ulp * torch.maximum(got.abs(), want.abs())).clamp_min(tiny)
            ulps = ((got - want).abs() / one_ulp).max().item()
            same = (got == want).float().mean().item()
            worst_ulp, worst_same = max(worst_ulp, ulps), min(worst_same, same)
            assert ulps <= 1.0, "step %d: kit and torch differ by %.3g ulp" % (step, ulps)
            assert same > 0.99
    assert opt.session.step_count == steps - 1
    # The store's fp32 master weights against the reference's.
    sd = opt.state_dict()["state"]
    d = max((sd[i]["fp32_master"].to(CUDA).double() - m.detach().double()).abs().max().item()
            / max(scales[i], m.detach().abs().max().item()) for i, m in enumerate(master))
    print("\n  CUDA %s + GradScaler, %d steps + 1 skipped: max %.3g ulp of the parameter dtype, "
          ">= %.5f identical, fp32 master max rel. difference %.3g, scale %g"
          % (str(dtype).replace("torch.", ""), steps - 1, worst_ulp, worst_same, d,
             scaler.get_scale()))
    assert d <= REL_BOUND
    assert_on_cuda_in_place(kit, ptrs, initial)
    assert opt.session.grad_dtype == {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    opt.session.verify()
