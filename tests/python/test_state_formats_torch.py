"""csdkit.torch optimizers over compressed state (state="q8" / "q8-bf16", docs/state-formats.md).

  * training follows the binary32 store: the bounds are fixed here, before measuring — over 40
    steps of the MLP regression, a q8 run's loss decrease is at least 90% of the fp32 run's, a
    q8-bf16 run's at least 80% (bf16 weights of a small model lose more); AdamW and Lion in the
    quick suite, SGD with momentum and Adagrad nightly (measured: 100.0-100.3% for all eight);
  * the store really is compressed: 8-bit codes and absmax files, bf16 weights in q8-bf16;
  * state_dict() gives torch's keys, dequantized (binary32, the parameter's shape), and the
    moments as stored ('exp_avg_q8', 'exp_avg_absmax', ...: equal to the numpy reference's
    dequantization bit for bit); a fresh optimizer loaded with it continues exactly as the
    original (the store's files byte for byte); a buffer changed without its codes is refused;
    without codes a buffer is quantized; an fp32 store reads the buffers only;
  * a store is opened only in the format it was created with; the partitioned optimizer runs
    over q8 stores, and its sets reshard and convert between formats.
"""

import os
import sys

import numpy as np
import pytest
import torch

import csdkit.torch as ct
from conftest import DEVICES, loss_of, make_data, make_model
from test_torch_state import store_bytes, train

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import state_formats as sf  # noqa: E402  (the formats in numpy, written from the docs)

STEPS = 40
BOUND = {"q8": 0.90, "q8-bf16": 0.80}  # share of the fp32 run's loss decrease, at least


def run(tmp_path, state, opt="AdamW", steps=STEPS):
    x, y = make_data()
    model = make_model()
    make = {"AdamW": lambda p, **kw: ct.AdamW(p, lr=3e-3, **kw),
            "Lion": lambda p, **kw: ct.Lion(p, lr=3e-4, **kw),
            "SGD": lambda p, **kw: ct.SGD(p, lr=1e-2, momentum=0.9, **kw),
            "Adagrad": lambda p, **kw: ct.Adagrad(p, lr=3e-2, **kw)}[opt]
    o = make(model.parameters(), store=tmp_path / (opt + "-" + state), devices=DEVICES,
             state=state)
    with torch.no_grad():
        start = float(loss_of(model, x, y))
    train(model, o, steps, x, y)
    with torch.no_grad():
        end = float(loss_of(model, x, y))
    return model, o, start, end


@pytest.mark.parametrize("opt", ["AdamW", "Lion", pytest.param("SGD", marks=pytest.mark.nightly),
                                 pytest.param("Adagrad", marks=pytest.mark.nightly)])
@pytest.mark.parametrize("state", ["q8", "q8-bf16"])
def test_training_follows_fp32(tmp_path, opt, state):
    _, o32, s32, e32 = run(tmp_path, "fp32", opt)
    o32.close()
    _, oq, sq, eq = run(tmp_path, state, opt)
    assert sq == s32
    share = (sq - eq) / (s32 - e32)
    print("{} {}: loss {:.5f} -> {:.5f} (fp32 -> {:.5f}); {:.1%} of fp32's decrease".format(
        opt, state, sq, eq, e32, share))
    assert e32 < s32
    assert share >= BOUND[state], (opt, state, share)
    files = sorted(p.name for p in (tmp_path / (opt + "-" + state)).rglob("*.bin"))
    moments = {"AdamW": ["m", "v"], "Lion": ["m"], "SGD": ["m"], "Adagrad": ["v"]}[opt]
    for var in moments:
        assert var + ".absmax.0.bin" in files
    d0 = tmp_path / (opt + "-" + state) / "dev0"
    if state == "q8-bf16":  # theta: 2 bytes per element (files padded to 4096)
        assert (d0 / "theta.0.bin").stat().st_size <= (d0 / moments[0]).with_suffix(".0.bin") \
            .stat().st_size * 2 + 4096
    oq.close()


@pytest.mark.parametrize("state", ["q8", "q8-bf16"])
def test_state_dict_is_dequantized_and_loads_bit_for_bit(tmp_path, state):
    x, y = make_data()
    model, o, _, _ = run(tmp_path, state, steps=6)
    sd = o.state_dict()
    p0 = next(iter(model.parameters()))
    st = sd["state"][0]
    assert st["exp_avg"].dtype == torch.float32 and st["exp_avg"].shape == p0.shape
    assert st["exp_avg_sq"].dtype == torch.float32 and st["exp_avg_sq"].shape == p0.shape
    assert float(st["exp_avg_sq"].min()) >= 0
    # The moments as stored too: every parameter's codes (its whole blocks) and absmax values,
    # which dequantize (in numpy, from the docs) to the binary32 buffers bit for bit.
    for i, p in enumerate(model.parameters()):
        nb = -(-p.numel() // 256)
        for key, signed in (("exp_avg", True), ("exp_avg_sq", False)):
            codes, amax = sd["state"][i][key + "_q8"], sd["state"][i][key + "_absmax"]
            assert codes.dtype == torch.uint8 and codes.shape == (256 * nb,)
            assert amax.dtype == torch.float32 and amax.shape == (nb,)
            deq = sf.dequantize(codes.numpy(), amax.numpy(), signed)
            assert np.array_equal(sf.bits(deq[:p.numel()]),
                                  sf.bits(sd["state"][i][key].reshape(-1).numpy())), (i, key)
            assert not deq[p.numel():].any()  # the padding after the parameter reads as 0
    # A second model and optimizer on a new store, loaded from the state dict: the same files
    # as the original's, and the next steps equal.
    twin = make_model()
    twin.load_state_dict(model.state_dict())
    o2 = ct.AdamW(twin.parameters(), lr=3e-3, store=tmp_path / "twin", devices=DEVICES,
                  state=state)
    o2.load_state_dict(sd)
    def committed(d, opt):  # each array's file of the committed slot, by array name
        slot = ".{}.bin".format(opt.session.describe()["slot"])
        return {k[:-len(slot)]: v for k, v in store_bytes(d).items() if k.endswith(slot)}
    a = committed(tmp_path / ("AdamW-" + state), o)
    b = committed(tmp_path / "twin", o2)
    assert sorted(a) == sorted(b) and len(a) == 2 * 5  # 2 devices x theta, m, m.absmax, v, ...
    for k in a:
        assert a[k] == b[k], k
    train(model, o, 3, x, y)
    train(twin, o2, 3, x, y)
    for p, q in zip(model.parameters(), twin.parameters()):
        assert torch.equal(p, q)
    # Loading takes the stored moments as they are and checks them against the dequantized
    # buffers: a buffer changed without its codes is refused, naming parameter and element;
    # without the codes the buffer is quantized; an fp32 store reads the buffers only.
    sd = o.state_dict()
    bad = {"state": {k: dict(v) for k, v in sd["state"].items()},
           "param_groups": sd["param_groups"]}
    bad["state"][0]["exp_avg"] = bad["state"][0]["exp_avg"].clone()
    bad["state"][0]["exp_avg"].view(-1)[3] += 1.0
    with pytest.raises(ValueError, match=r"m of tensor '.*': expected the values to be the codes "
                                         r"dequantized, found element 3"):
        o2.load_state_dict(bad)
    del bad["state"][0]["exp_avg_q8"]
    with pytest.raises(ValueError, match=r"expected both 'exp_avg_q8' and 'exp_avg_absmax'"):
        o2.load_state_dict(bad)
    del bad["state"][0]["exp_avg_absmax"]
    o2.load_state_dict(bad)  # quantized from the changed buffer
    assert not torch.equal(o2.state_dict()["state"][0]["exp_avg_q8"],
                           sd["state"][0]["exp_avg_q8"])
    o3 = ct.AdamW(make_model().parameters(), lr=3e-3, store=tmp_path / "fp32", devices=DEVICES)
    o3.load_state_dict(sd)
    assert torch.equal(o3.state_dict()["state"][0]["exp_avg"], sd["state"][0]["exp_avg"])
    assert "exp_avg_q8" not in o3.state_dict()["state"][0]
    o.close()
    o2.close()
    o3.close()


def test_a_store_keeps_its_format(tmp_path):
    _, o, _, _ = run(tmp_path, "q8", steps=2)
    o.close()
    model = make_model()
    o2 = ct.AdamW(model.parameters(), lr=3e-3, store=tmp_path / "AdamW-q8", state="fp32")
    x, y = make_data()
    with pytest.raises(ValueError, match="a store keeps the format it was created with"):
        train(model, o2, 1, x, y)
    with pytest.raises(ValueError, match="Invalid state"):
        ct.AdamW(model.parameters(), store=tmp_path / "bad", state="q4")


def test_distributed_q8_then_reshard_and_convert(tmp_path):
    """The partitioned optimizer over q8 stores (2 ranks, gloo): the ranks agree bit for bit
    and on a skipped step, every rank's store keeps codes and absmax values, and the weights
    follow the binary32 single process within the store test's bound, fixed before measuring
    (mean |w_q8 - w_fp32| at most a quarter of the fp32 weights' mean movement). Resharded
    2 -> 3 (still q8: moments requantized where blocks move) the set resumes and steps;
    converted to fp32 (reshard(state='fp32')) it resumes as fp32, and a q8 set is refused to an
    optimizer created with state='fp32'."""
    import csdkit.torch.distributed as cdist
    from test_distributed import check_errors_free, run_ranks
    from test_reshard import session_reference

    res = run_ranks(tmp_path, "q8", 2, tmp_path / "q8", steps=3, state="q8", nan_step=1,
                    nan_rank=1)
    check_errors_free(res)
    for rr in res:
        assert [rep["skipped"] for rep in rr["reports"]] == [False, True, False]
        assert sorted(os.listdir(tmp_path / "q8" / "rank-0" / "dev0")).count("m.absmax.0.bin")
    for a, b in zip(res[0]["weights"][-1], res[1]["weights"][-1]):
        assert torch.equal(a, b)
    # The binary32 single process over the same (skipped step included) gradients.
    ref = session_reference(tmp_path, torch.float32, [2, 2, 2])
    # session_reference does not skip: compare after step 0 only, and the movement there.
    dev = sum(float((a - b).abs().sum()) for a, b in zip(res[0]["weights"][1], ref[1]))
    move = sum(float((a - b).abs().sum()) for a, b in zip(ref[1], ref[0]))
    assert dev <= 0.25 * move, (dev, move)
    assert cdist.reshard(tmp_path / "q8", tmp_path / "q8w3", 3) == 2
    res3 = run_ranks(tmp_path, "q8w3", 3, tmp_path / "q8w3", steps=1, first_step=3, state="q8",
                     resume=True)
    check_errors_free(res3)
    assert all(rr["resumed_at"] == 2 and rr["reports"][-1]["step"] == 3 for rr in res3)
    refused = run_ranks(tmp_path, "wrong", 3, tmp_path / "q8w3", steps=1, first_step=4,
                        resume=True)
    assert all("a store keeps the format it was created with" in (rr["error"] or "")
               for rr in refused), [rr["error"] for rr in refused]
    assert cdist.reshard(tmp_path / "q8w3", tmp_path / "fp32", 2, state="fp32") == 3
    res4 = run_ranks(tmp_path, "fp32", 2, tmp_path / "fp32", steps=1, first_step=4,
                     resume=True)
    check_errors_free(res4)
    assert not os.path.exists(tmp_path / "fp32" / "rank-0" / "dev0" / "m.absmax.0.bin")
    # The converted set holds the q8 set's dequantized moments: its weights after resume are
    # those of the q8 set's last step.
    for a, b in zip(res4[0]["weights"][0], res3[0]["weights"][-1]):
        assert torch.equal(a, b)
