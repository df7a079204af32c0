"""Bytes moved on the host per step (the report's 'host_bytes'), and the session calls that let
a trainer move each gradient and weight byte once: external fills of the gradient arena
(begin_fill / end_fill: the caller writes the slice, e.g. a CUDA copy straight into it) and
weights taken from the runtime's buffer (None in weights_out, set_weights_hook).

Stated (docs/trainer.md) and checked here for CPU parameters, per step with one backward pass:
every gradient byte copied once into the arena (gradients_copied), every new weight byte once
into the parameter (weights_written) and once aside for the put-back of a failed step
(weights_saved), tensors without a gradient not at all; nothing received or sent. The CUDA path
(gradients_received and weights_sent once each, nothing copied on the host) is checked by
tests/python/test_cuda.py on a GPU machine.
"""

import numpy as np
import pytest
import torch

import csdkit
import csdkit.torch as ct
from test_overlap import assert_same_bits, groups, loss_of, make, slot_files


def numel_with_grad(model):
    return sum(p.numel() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("overlap", [True, False])
def test_cpu_parameters_move_each_gradient_and_weight_byte_once(tmp_path, dtype, overlap):
    torch.manual_seed(1)
    x, y = torch.randn(32, 32).to(dtype), torch.randn(32).to(dtype)
    model = make(dtype)
    opt = ct.AdamW(groups(model), lr=1e-3, store=tmp_path / "s", devices=2,
                   overlap_backward=overlap)
    eb = 4 if dtype == torch.float32 else 2
    for i in range(7):
        opt.zero_grad(set_to_none=True)
        loss_of(model, x * (1 + 0.1 * i), y).backward()
        copied = numel_with_grad(model)  # with overlap, copied as backward made them
        if i == 3:
            model.head.weight.grad = None  # a tensor without a gradient moves nothing more
        n = numel_with_grad(model)
        if not overlap or i == 0:  # (the first step creates the store: no hooks before it)
            copied = n
        opt.step()
        hb = opt.last_report["host_bytes"]
        assert hb == {"gradients_copied": copied * eb, "gradients_received": 0,
                      "weights_written": n * eb, "weights_saved": n * eb,
                      "weights_sent": 0}, (i, hb)
    if overlap:
        assert opt.last_report["speculation"] == "committed"


LAYOUT = [("a", 70000, 0), ("b", 1000, 0), ("c", 65536, 0)]


def make_pair(tmp_path, dtype=torch.bfloat16):
    torch.manual_seed(7)
    w = [torch.randn(n).to(dtype) for _, n, _ in LAYOUT]
    return [csdkit.Session.create(str(tmp_path / k), LAYOUT, [{"lr": 1e-2}], w, devices=2)
            for k in ("fill", "ext")]


def sumsq(g):
    return float((g.double() ** 2).sum())


def test_an_external_fill_steps_as_a_fill_bit_for_bit(tmp_path):
    """The caller writes the slices of grad_arena() itself between begin_fill and end_fill:
    the step, its weights and the store's bytes equal those of fill() of the same gradients;
    the norm is the sum of the sums of squares handed to end_fill."""
    a, b = make_pair(tmp_path)
    arena = torch.from_numpy(b.grad_arena()).view(torch.bfloat16)
    offs = b.tensor_offsets
    outs = ([torch.empty(n, dtype=torch.bfloat16) for _, n, _ in LAYOUT] for _ in range(2))
    out_a, out_b = outs
    for step in range(3):
        g = [torch.randn(n).to(torch.bfloat16) for _, n, _ in LAYOUT]
        for t in range(len(LAYOUT)):
            a.fill(t, g[t])
            b.begin_fill(t)
            arena[offs[t]:offs[t] + g[t].numel()] = g[t]
            b.end_fill(t, sumsq(g[t]))
        ra = a.step_arena([True] * 3, weights_out=out_a, return_norm=True)
        rb = b.step_arena([True] * 3, weights_out=out_b, return_norm=True)
        assert ra["step"] == rb["step"] == step + 1
        assert rb["grad_norm"] == pytest.approx(ra["grad_norm"], rel=1e-12)
        assert rb["host_bytes"]["gradients_received"] == 2 * sum(n for _, n, _ in LAYOUT)
        assert rb["host_bytes"]["gradients_copied"] == 0
        assert ra["host_bytes"]["gradients_copied"] == 2 * sum(n for _, n, _ in LAYOUT)
        for u, v in zip(out_a, out_b):
            assert torch.equal(u.view(torch.int16), v.view(torch.int16))
    del a, b, arena
    assert slot_files(tmp_path / "fill") == slot_files(tmp_path / "ext")


def test_external_fill_misuse_is_refused(tmp_path):
    _, s = make_pair(tmp_path)
    s.begin_fill(1)
    with pytest.raises(RuntimeError, match="tensor 1 .'b'. was already begun"):
        s.begin_fill(1)
    with pytest.raises(RuntimeError, match="step_arena: the external fill of tensor 1 .'b'. "
                                           "was begun and not ended"):
        s.step_arena([True] * 3)
    with pytest.raises(RuntimeError, match="EndFill: no external fill of tensor 0 .'a'."):
        s.end_fill(0, 1.0)
    s.end_fill(1, None)  # the copy failed: no fill
    for t in (0, 2):
        s.begin_fill(t)
        s.end_fill(t, 1.0)
    with pytest.raises(ValueError, match="tensor 1 .'b'. has a gradient this step but was not "
                                         "copied"):
        s.step_arena([True] * 3)
    with pytest.raises(ValueError, match="t: expected a layout entry below 3, found 3|"
                                         "tensor index: expected a layout entry below 3"):
        s.begin_fill(3)
    assert s.step_count == 0


def test_a_non_finite_gradient_copied_in_skips_the_step(tmp_path):
    """The caller's pass found a non-finite value (its sum of squares is not finite): the step
    is skipped, the value named as the kit finds it in the arena."""
    _, s = make_pair(tmp_path)
    arena = torch.from_numpy(s.grad_arena()).view(torch.bfloat16)
    for t in range(3):
        s.begin_fill(t)
        if t == 1:
            arena[s.tensor_offsets[1] + 5] = float("inf")
        s.end_fill(t, float("inf") if t == 1 else 2.0)
    rep = s.step_arena([True] * 3)
    assert rep["skipped"] and s.step_count == 0
    assert "0x7f80" in rep["skip_reason"], rep


def test_weights_out_none_entries_and_the_weights_hook(tmp_path):
    """None in weights_out: that tensor is not written (nor saved); the hook sees every
    subgroup's range once, and weights_buffer() holds the new weights in store order."""
    _, s = make_pair(tmp_path)
    ranges = []
    s.set_weights_hook(lambda begin, n: ranges.append((begin, n)))
    for t, (_, n, _) in enumerate(LAYOUT):
        s.fill(t, torch.randn(n).to(torch.bfloat16))
    keep = torch.full((1000,), 3.0, dtype=torch.bfloat16)
    out = [torch.empty(70000, dtype=torch.bfloat16), keep, None]
    rep = s.step_arena([True] * 3, weights_out=out)
    assert not rep["skipped"]
    assert sorted(ranges) == [(sg["begin"], sg["n"]) for sg in
                              sorted(s.subgroups, key=lambda sg: sg["begin"])]
    assert rep["host_bytes"]["weights_written"] == 2 * (70000 + 1000)
    w = torch.from_numpy(np.array(s.weights_buffer())).view(torch.bfloat16)
    offs = s.tensor_offsets
    assert torch.equal(w[offs[0]:offs[0] + 70000].view(torch.int16), out[0].view(torch.int16))
    assert torch.equal(w[offs[1]:offs[1] + 1000].view(torch.int16), keep.view(torch.int16))
    theta = [torch.empty(n) for _, n, _ in LAYOUT]
    s.export_state("theta", theta)
    assert torch.equal(w[offs[2]:offs[2] + 65536].view(torch.int16),
                       theta[2].to(torch.bfloat16).view(torch.int16))
    with pytest.raises(ValueError, match="weights hook: expected a callable"):
        s.set_weights_hook(3)


def test_a_failing_weights_hook_fails_the_step_and_puts_back(tmp_path):
    _, s = make_pair(tmp_path)

    def hook(begin, n):
        raise KeyError("no room")

    s.set_weights_hook(hook)
    for t, (_, n, _) in enumerate(LAYOUT):
        s.fill(t, torch.randn(n).to(torch.bfloat16))
    before = [torch.full((n,), 1.5, dtype=torch.bfloat16) for _, n, _ in LAYOUT]
    out = [b.clone() for b in before]
    with pytest.raises(RuntimeError, match="weights hook: KeyError: 'no room'"):
        s.step_arena([True] * 3, weights_out=out)
    assert s.step_count == 0
    for u, v in zip(out, before):
        assert torch.equal(u, v)


def test_a_speculation_waits_for_external_fills(tmp_path):
    """The update started before the gradients (start_speculative) takes external fills as
    it takes fills: committed, bit for bit the serial step."""
    a, b = make_pair(tmp_path)
    arena = torch.from_numpy(b.grad_arena()).view(torch.bfloat16)
    offs = b.tensor_offsets
    out_a = [torch.empty(n, dtype=torch.bfloat16) for _, n, _ in LAYOUT]
    out_b = [torch.empty(n, dtype=torch.bfloat16) for _, n, _ in LAYOUT]
    for step in range(3):
        g = [torch.randn(n).to(torch.bfloat16) for _, n, _ in LAYOUT]
        if step > 0:
            b.start_speculative([True] * 3, weights_out=out_b)
        for t in reversed(range(3)):
            a.fill(t, g[t])
            b.begin_fill(t)
            arena[offs[t]:offs[t] + g[t].numel()] = g[t]
            b.end_fill(t, sumsq(g[t]))
        a.step_arena([True] * 3, weights_out=out_a)
        b.step_arena([True] * 3, weights_out=out_b)
        assert b.last_speculation == ("committed" if step > 0 else "")
        for u, v in zip(out_a, out_b):
            assert torch.equal(u.view(torch.int16), v.view(torch.int16))
    del a, b, arena
    assert slot_files(tmp_path / "fill") == slot_files(tmp_path / "ext")
