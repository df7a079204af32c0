"""Per-parameter step counts: a parameter whose gradient is None in some steps (a layer frozen
and unfrozen later, a branch not taken, an expert that got no tokens) keeps its own step count,
as torch.optim's state['step'], and its bias correction (Adam, AdamW), Adagrad's lr decay and
SGD's first momentum step follow that count.

Bound (fixed before measuring, as tests/python/test_torch_optim.py's): every parameter tensor
within 1e-5 relative (inf-norm, over its initial magnitude) of torch.optim at every step. Using
the store's global step instead (what the kit did before) puts an unfrozen layer 4.8% away after
20 steps and a bias skipped every 5th step 6e-4 away: both fail at once.

Both optimizers get the same gradients (torch's model computes them; the kit's parameters get a
copy): what is compared is the optimizers, not the model's feedback. With each side computing
its own, the ulps by which the weights differ after step 1 change a cancelling gradient element
of fc2.weight by 0.4% (2.579e-7 vs 2.569e-7 in step 2), and Adam, whose v for that element is
6e-15, turns that into an update differing by a quarter of lr (1.1e-5 relative): a property of
Adam on that element, seen with every count equal, not of the counts.

The MLP's tensors share one 65536-element subgroup, so the steps where counts differ run the
subgroup as several launches (one per count): the smart and baseline modes must agree bit for
bit with each other as well.
"""

import copy

import pytest
import torch

import csdkit
import csdkit.torch as ct
from conftest import DEVICES, loss_of, make_data, make_model

REL_BOUND = 1e-5
STEPS = 20

# name -> (torch.optim factory, kit factory); hyper-parameters where each count-dependent term
# matters (Adagrad's lr decay, SGD's momentum).
OPTIMIZERS = {
    "adamw": (lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.05, foreach=False),
              lambda p, **k: ct.AdamW(p, lr=3e-3, weight_decay=0.05, **k)),
    "adam": (lambda p: torch.optim.Adam(p, lr=3e-3, foreach=False),
             lambda p, **k: ct.Adam(p, lr=3e-3, **k)),
    # As in test_torch_optim.py, a non-zero initial accumulator: with 0, the first step is
    # lr * g / |g| for every element, and the ulps by which the two differ then grow to ~1e-5
    # in the second step whatever the counts (seen with every gradient present).
    "adagrad": (lambda p: torch.optim.Adagrad(p, lr=2e-2, lr_decay=0.05,
                                              initial_accumulator_value=0.1, foreach=False),
                lambda p, **k: ct.Adagrad(p, lr=2e-2, lr_decay=0.05,
                                          initial_accumulator_value=0.1, **k)),
    "sgd": (lambda p: torch.optim.SGD(p, lr=2e-2, momentum=0.9, foreach=False),
            lambda p, **k: ct.SGD(p, lr=2e-2, momentum=0.9, **k)),
}


def unfreeze(step, name):
    """fc1 frozen for the first 10 steps (gradual unfreezing)."""
    return not (name.startswith("fc1.") and step < 10)


def intermittent(step, name):
    """head.bias without a gradient every 5th step, fc2.weight every 3rd."""
    if name == "head.bias":
        return step % 5 != 4
    if name == "fc2.weight":
        return step % 3 != 2
    return True


PATTERNS = {"unfreeze": unfreeze, "intermittent": intermittent}


def run(model, opt, pattern, steps, x, y, start=0, twin=None):
    """`steps` steps; after backward, the gradients the pattern withholds are set to None.
    `twin`: (model, optimizer) stepped with copies of the same gradients."""
    for i in range(start, start + steps):
        opt.zero_grad(set_to_none=True)
        loss_of(model, x, y).backward()
        for name, p in model.named_parameters():
            if not pattern(i, name):
                p.grad = None
        if twin is not None:
            for p, q in zip(model.parameters(), twin[0].parameters()):
                q.grad = None if p.grad is None else p.grad.clone()
            twin[1].step()
        opt.step()


def rel_diff(a_model, b_model, scales):
    worst = 0.0
    for (name, a), b, s in zip(a_model.named_parameters(), b_model.parameters(), scales):
        d = (a.detach().double() - b.detach().double()).abs().max().item()
        worst = max(worst, d / max(s, b.detach().double().abs().max().item()))
    return worst


def side_by_side(name, pattern, tmp_path, mode="smart"):
    ref = make_model()
    kit = copy.deepcopy(ref)
    x, y = make_data()
    make_ref, make_kit = OPTIMIZERS[name]
    ref_opt = make_ref(ref.parameters())
    kit_opt = make_kit(kit.parameters(), store=tmp_path / ("s-" + mode), devices=DEVICES,
                       mode=mode)
    scales = [p.detach().double().abs().max().item() for p in ref.parameters()]
    worst = 0.0
    for i in range(STEPS):
        run(ref, ref_opt, pattern, 1, x, y, start=i, twin=(kit, kit_opt))
        d = rel_diff(kit, ref, scales)
        assert d <= REL_BOUND, "%s/%s step %d: parameters differ by %.3g relative (bound %g)" % (
            name, pattern.__name__, i + 1, d, REL_BOUND)
        worst = max(worst, d)
    print("\n  %s %s (%s): max rel. parameter difference %.3g" % (name, pattern.__name__, mode,
                                                                   worst))
    return ref, ref_opt, kit, kit_opt


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_none_gradients_follow_torch_per_parameter_steps(name, pattern, tmp_path):
    ref, ref_opt, kit, kit_opt = side_by_side(name, PATTERNS[pattern], tmp_path)
    # The store's counts are torch's state['step'] (SGD keeps none: its momentum buffers exist
    # for the same parameters).
    counts = kit_opt.session.tensor_steps
    assert kit_opt.session.step_count == STEPS
    for i, p in enumerate(ref.parameters()):
        st = ref_opt.state[p]
        if "step" in st:
            assert counts[i] == int(float(st["step"])), i
        elif name == "sgd":
            assert counts[i] > 0
    assert min(counts) < STEPS  # the pattern did leave some parameters behind
    kit_opt.session.verify()


def test_smart_and_baseline_modes_agree_bit_for_bit(tmp_path):
    _, _, smart, smart_opt = side_by_side("adamw", unfreeze, tmp_path, mode="smart")
    _, _, base, base_opt = side_by_side("adamw", unfreeze, tmp_path, mode="baseline")
    for a, b in zip(smart.parameters(), base.parameters()):
        assert torch.equal(a, b)
    assert smart_opt.session.tensor_steps == base_opt.session.tensor_steps
    for var in smart_opt.session.vars:
        sa = [torch.empty(p.numel()) for p in smart.parameters()]
        sb = [torch.empty(p.numel()) for p in base.parameters()]
        smart_opt.session.export_state(var, sa)
        base_opt.session.export_state(var, sb)
        assert all(torch.equal(a, b) for a, b in zip(sa, sb)), var


def test_counts_survive_reopen_and_roll_back(tmp_path):
    """The counts are in the manifest: a new optimizer on the store continues as an
    uninterrupted run, bit for bit; roll_back() returns them to the step before."""
    x, y = make_data()
    whole = make_model()
    split = copy.deepcopy(whole)
    o = ct.AdamW(whole.parameters(), lr=3e-3, store=tmp_path / "whole", devices=DEVICES)
    run(whole, o, unfreeze, 14, x, y)
    o.close()
    o1 = ct.AdamW(split.parameters(), lr=3e-3, store=tmp_path / "split", devices=DEVICES)
    run(split, o1, unfreeze, 8, x, y)
    before = list(o1.session.tensor_steps)
    run(split, o1, unfreeze, 1, x, y, start=8)
    after = list(o1.session.tensor_steps)
    assert before != after
    o1.session.roll_back()
    assert list(o1.session.tensor_steps) == before
    o1.close()
    o2 = ct.AdamW(split.parameters(), lr=3e-3, store=tmp_path / "split", devices=DEVICES)
    o2.resume(expected_step=8)
    run(split, o2, unfreeze, 6, x, y, start=8)
    for a, b in zip(whole.parameters(), split.parameters()):
        assert torch.equal(a, b)
    assert o2.session.tensor_steps == [4, 4, 14, 14, 14, 14]
    o2.close()


def test_state_dict_carries_per_parameter_steps_both_ways(tmp_path):
    """The kit's state_dict has torch's per-parameter 'step' (and no entry for a parameter
    that never stepped); torch.optim loads it and continues as the kit does; a torch.optim
    state with differing steps loads into the kit and continues as torch does."""
    x, y = make_data()
    ref = make_model()
    kit = copy.deepcopy(ref)
    never = lambda i, name: name != "head.bias" and unfreeze(i, name)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=3e-3, foreach=False)
    kit_opt = ct.AdamW(kit.parameters(), lr=3e-3, store=tmp_path / "a", devices=DEVICES)
    run(ref, ref_opt, never, 12, x, y, twin=(kit, kit_opt))
    sd = kit_opt.state_dict()
    ref_sd = ref_opt.state_dict()
    assert sorted(sd["state"]) == sorted(ref_sd["state"]) == [0, 1, 2, 3, 4]
    for i in sd["state"]:
        assert float(sd["state"][i]["step"]) == float(ref_sd["state"][i]["step"])
    # torch.optim continues from the kit's state as the kit continues from its own.
    ref2 = copy.deepcopy(kit)
    ref2_opt = torch.optim.AdamW(ref2.parameters(), lr=3e-3, foreach=False)
    ref2_opt.load_state_dict(sd)
    # The round trip on the live store is a no-op (nothing imported: step kept).
    kit_opt.load_state_dict(kit_opt.state_dict())
    assert kit_opt.session.step_count == 12
    scales = [p.detach().double().abs().max().item() for p in ref2.parameters()]
    run(ref2, ref2_opt, unfreeze, 5, x, y, start=12, twin=(kit, kit_opt))
    assert rel_diff(kit, ref2, scales) <= REL_BOUND
    # torch.optim's state (steps 12, 12, 2, 2, 12 and none for head.bias at this point of
    # `ref`) into a fresh kit store: counts as torch's, and the next steps as torch's.
    kit3 = copy.deepcopy(ref)
    kit3_opt = ct.AdamW(kit3.parameters(), lr=3e-3, store=tmp_path / "b", devices=DEVICES)
    kit3_opt.load_state_dict(ref_opt.state_dict())
    assert kit3_opt.session.tensor_steps == [2, 2, 12, 12, 12, 0]
    assert kit3_opt.session.step_count == 12
    scales = [p.detach().double().abs().max().item() for p in ref.parameters()]
    run(ref, ref_opt, unfreeze, 5, x, y, start=12, twin=(kit3, kit3_opt))
    assert rel_diff(kit3, ref, scales) <= REL_BOUND
    assert kit3_opt.session.tensor_steps == [7, 7, 17, 17, 17, 5]


def test_bad_step_counts_are_refused(tmp_path):
    kit = make_model()
    x, y = make_data()
    opt = ct.AdamW(kit.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES)
    run(kit, opt, unfreeze, 2, x, y)
    theta = [p.detach().reshape(-1).clone() for p in kit.parameters()]
    with pytest.raises(ValueError, match=r"tensor_steps: expected one step count per layout "
                                         r"entry \(6\), found 2"):
        opt.session.import_state(3, theta, tensor_steps=[1, 2])
    with pytest.raises(ValueError, match=r"tensor 'param_groups\[0\]\.params\[2\]': expected "
                                         r"a step count in \[0, 3\] \(the imported step\), "
                                         r"found 4"):
        opt.session.import_state(3, theta, tensor_steps=[1, 1, 4, 3, 3, 3])
    assert opt.session.step_count == 2
    sd = opt.state_dict()
    sd["state"][2]["step"] = torch.tensor(2.5)
    with pytest.raises(ValueError, match=r"state\[2\]\['step'\]: expected a whole number"):
        opt.load_state_dict(sd)
    assert opt.session.step_count == 2


def test_topk_streams_with_counts_apart_agree_across_modes(tmp_path):
    """compress=TopK: the sparse streams of a subgroup whose tensors are at different counts go
    through the same launches per count; the smart and baseline modes agree bit for bit, and
    the counts are torch's."""
    x, y = make_data()
    models, opts = [], []
    for mode in ("smart", "baseline"):
        m = make_model()
        models.append(m)
        opts.append(ct.AdamW(m.parameters(), lr=3e-3, store=tmp_path / mode, devices=DEVICES,
                             mode=mode, compress=ct.TopK(0.1)))
    run(models[0], opts[0], unfreeze, 13, x, y, twin=(models[1], opts[1]))
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(a, b)
    assert opts[0].session.tensor_steps == opts[1].session.tensor_steps == [3, 3, 13, 13, 13, 13]
    assert not torch.equal(models[0].fc1.weight, make_model().fc1.weight)  # unfrozen: trained
