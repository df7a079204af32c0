"""csdkit.Session (the pybind11 module) directly: numpy and torch tensors by address, low-
precision models with fp32 master weights, found_inf, clipping, and the refusals with their
messages. Two emulated SmartSSDs (backend model), stores under pytest's tmp_path."""

import numpy as np
import pytest
import torch

import csdkit
from conftest import DEVICES

# Two tensors in one group: 71000 elements, two 65536-element blocks (one per device).
LAYOUT = [("w", 70000, 0), ("b", 1000, 0)]


def weights_np(seed=0):
    r = np.random.default_rng(seed)
    return [r.uniform(-0.5, 0.5, n).astype(np.float32) for _, n, _ in LAYOUT]


def grads_np(step):
    r = np.random.default_rng(100 + step)
    return [r.uniform(-1, 1, n).astype(np.float32) for _, n, _ in LAYOUT]


def test_numpy_and_torch_tensors_give_the_same_step(tmp_path):
    w = weights_np()
    a = csdkit.Session.create(str(tmp_path / "a"), LAYOUT, [{"lr": 1e-2}], w, devices=DEVICES)
    b = csdkit.Session.create(str(tmp_path / "b"), LAYOUT, [{"lr": 1e-2}],
                              [torch.from_numpy(x.copy()) for x in w], devices=DEVICES)
    assert a.grad_dtype == "fp32" and a.out_dtype == "none"
    out_a = [np.full(n, -7, np.float32) for _, n, _ in LAYOUT]
    out_b = [torch.full((n,), -7.0) for _, n, _ in LAYOUT]
    g = grads_np(1)
    ra = a.step(g, weights_out=out_a, return_norm=True)
    rb = b.step([torch.from_numpy(x) for x in g], weights_out=out_b)
    assert not ra["skipped"] and ra["step"] == 1 and a.step_count == 1
    assert ra["grad_norm"] == pytest.approx(
        np.sqrt(sum(float(np.dot(x.astype(np.float64), x.astype(np.float64))) for x in g)),
        rel=1e-12)
    assert "bytes" in rb and rb["bytes"]["device_to_host"] > 0
    for x, t, w0 in zip(out_a, out_b, w):
        assert np.array_equal(x, t.numpy())
        assert not np.array_equal(x, w0)  # moved
        # AdamW's first step moves every element by ~lr (m/sqrt(v) = sign(g)).
        assert np.max(np.abs(x - w0 * (1 - 1e-2 * 1e-2))) == pytest.approx(1e-2, rel=1e-3)


def test_none_gradient_leaves_the_destination_alone(tmp_path):
    s = csdkit.Session.create(str(tmp_path / "s"), LAYOUT, [{}], weights_np(), devices=DEVICES)
    out = [np.full(n, -7, np.float32) for _, n, _ in LAYOUT]
    s.step([grads_np(1)[0], None], weights_out=out)
    assert np.all(out[1] == -7) and not np.any(out[0] == -7)


def test_found_inf_skips_and_max_norm_clips_like_torch(tmp_path):
    w = weights_np()
    a = csdkit.Session.create(str(tmp_path / "a"), LAYOUT, [{}], w, devices=DEVICES)
    b = csdkit.Session.create(str(tmp_path / "b"), LAYOUT, [{}], w, devices=DEVICES)
    g = grads_np(1)
    rep = a.step(g, found_inf=True)
    assert rep["skipped"] and a.step_count == 0
    # Gradients scaled by 1024, clipped to norm 5 from the norm of the same pass ...
    scaled = [x * np.float32(1024) for x in g]
    out_a = [np.zeros(n, np.float32) for _, n, _ in LAYOUT]
    ra = a.step(scaled, loss_scale=1024.0, max_norm=5.0, return_norm=True, weights_out=out_a)
    # ... equal a step with the coefficient torch.nn.utils.clip_grad_norm_ would use.
    norm = ra["grad_norm"] / 1024.0
    coef = min(1.0, 5.0 / (norm + 1e-6))
    assert coef < 0.1
    out_b = [np.zeros(n, np.float32) for _, n, _ in LAYOUT]
    b.step(scaled, loss_scale=1024.0, clip_coef=coef, weights_out=out_b)
    for x, y in zip(out_a, out_b):
        assert np.array_equal(x, y)


def test_bf16_model_keeps_fp32_master_weights(tmp_path):
    """bf16 weights and gradients: the kit's bf16 copy is the rounding of fp32 master weights,
    i.e. torch.optim.AdamW on an fp32 master copy, rounded to bf16, within 1 bf16 ulp."""
    w16 = [torch.from_numpy(x).to(torch.bfloat16) for x in weights_np()]
    s = csdkit.Session.create(str(tmp_path / "s"), LAYOUT, [{"lr": 1e-3, "weight_decay": 0.01}],
                              w16, devices=DEVICES)
    assert s.grad_dtype == "bf16" and s.out_dtype == "bf16"
    master = [torch.nn.Parameter(x.float()) for x in w16]
    ref = torch.optim.AdamW(master, lr=1e-3, weight_decay=0.01, foreach=False)
    out = [x.clone() for x in w16]
    for step in range(1, 11):
        g16 = [torch.from_numpy(x).to(torch.bfloat16) for x in grads_np(step)]
        s.step(g16, weights_out=out)
        for p, g in zip(master, g16):
            p.grad = g.float()
        ref.step()
        for o, p in zip(out, master):
            want = p.detach().to(torch.bfloat16).float()
            got = o.float()
            scale = torch.maximum(want.abs(), got.abs())
            assert torch.all((got - want).abs() <= scale * 2.0 ** -7), "step %d" % step
            # Most elements round identically.
            assert (got == want).float().mean().item() > 0.99


def test_refusals_name_the_tensor(tmp_path):
    s = csdkit.Session.create(str(tmp_path / "s"), LAYOUT, [{}], weights_np(), devices=DEVICES)
    g = grads_np(1)
    with pytest.raises(ValueError, match=r"grads\[1\] \(grad of 'b'\): expected dtype float32, "
                                         r"found dtype float16"):
        s.step([g[0], g[1].astype(np.float16)])
    with pytest.raises(ValueError, match=r"grads\[0\] \(grad of 'w'\): expected 70000 elements, "
                                         r"found 69999"):
        s.step([g[0][:-1], g[1]])
    with pytest.raises(ValueError, match=r"grads\[0\] \(grad of 'w'\): expected a C-contiguous"):
        s.step([np.repeat(g[0], 2)[::2], g[1]])
    with pytest.raises(ValueError, match=r"expected one entry per tensor \(2"):
        s.step([g[0]])
    with pytest.raises(ValueError, match=r"grads\[1\].*expected a torch.Tensor or numpy.ndarray"):
        s.step([g[0], [1.0] * 1000])
    with pytest.raises(ValueError, match=r"weights_out\[1\] \('b'\): expected a writable array"):
        ro = np.zeros(1000, np.float32)
        ro.flags.writeable = False
        s.step(g, weights_out=[np.zeros(70000, np.float32), ro])
    with pytest.raises(ValueError, match=r"group_hyper\[0\]: unknown hyper-parameter 'betas'"):
        s.step(g, group_hyper=[{"betas": (0.9, 0.99)}])
    with pytest.raises(ValueError, match=r"clip_coef: expected a value in \(0, 1\]"):
        s.step(g, clip_coef=2.0)
    assert s.step_count == 0  # nothing ran
    with pytest.raises(ValueError, match=r"weights\[1\] 'b': expected dtype float32, found "
                                         r"dtype bfloat16"):
        csdkit.Session.create(str(tmp_path / "t"), LAYOUT, [{}],
                              [torch.zeros(70000), torch.zeros(1000, dtype=torch.bfloat16)])
    with pytest.raises(ValueError, match="use at most 1 devices"):
        csdkit.Session.create(str(tmp_path / "u"), [("x", 100, 0)], [{}],
                              [np.zeros(100, np.float32)], devices=2)


def test_open_refuses_another_model_and_missing_stores(tmp_path):
    d = str(tmp_path / "s")
    csdkit.Session.create(d, LAYOUT, [{}], weights_np(), devices=DEVICES)
    s = csdkit.Session.open(d, LAYOUT)
    assert s.devices == DEVICES and s.step_count == 0
    # One writer per store: a second session is refused while the first holds it.
    with pytest.raises(csdkit.StoreError, match="one writer per store"):
        csdkit.Session.open(d, LAYOUT)
    del s
    with pytest.raises(csdkit.StoreError, match="another model"):
        csdkit.Session.open(d, [("w", 70000, 0), ("b", 1001, 0)])
    with pytest.raises(csdkit.StoreError, match="expected a directory"):
        csdkit.Session.open(str(tmp_path / "none"), LAYOUT)


def test_a_step_that_would_store_infinity_is_refused(tmp_path):
    """The divergence guard: a finite gradient whose square overflows AdamW's v is refused with
    csdkit.DivergenceError naming the element, and nothing is committed; allow_nonfinite=True
    commits it and the report counts what was stored."""
    s = csdkit.Session.create(str(tmp_path / "s"), LAYOUT, [{}], weights_np(), devices=DEVICES)
    s.step(grads_np(1))
    g = grads_np(2)
    g[0][1234] = 3e38  # finite in binary32; (1 - beta2) * g^2 in v is not
    for mode in ("smart", "baseline"):
        with pytest.raises(csdkit.DivergenceError,
                           match=r"wrote 1 non-finite value \(NaN or infinity\).* element 1234, "
                                 r"parameter 1234 \(tensor 'w' element 1234\).*keeps step 1"):
            s.step(g, mode=mode)
        assert s.step_count == 1
    out = [np.zeros(n, np.float32) for _, n, _ in LAYOUT]
    r = s.step(g, allow_nonfinite=True, weights_out=out)
    assert r["step"] == 2 and r["nonfinite_values"] == 1 and s.step_count == 2
    assert np.all(np.isfinite(out[0]))  # theta stays finite: m / sqrt(inf) = 0
    v = [np.zeros(n, np.float32) for _, n, _ in LAYOUT]
    s.export_state("v", v)
    assert np.isinf(v[0][1234]) and np.count_nonzero(~np.isfinite(v[0])) == 1
