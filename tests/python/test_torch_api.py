"""csdkit.torch as a drop-in torch.optim optimizer: the contracts trainer frameworks rely on.

  * o.load_state_dict(o.state_dict()) -- Accelerate's prepare() -- leaves a store at its step
    (it used to import an initial state at step 0), and refuses when the model is not at the
    store's weights rather than overwrite them;
  * _step_supports_amp_scaling only with fused=True, or by default for float16/bfloat16
    parameters (Lightning refuses gradient clipping for optimizers that unscale internally);
  * the kit's arguments in the signature, user-facing docstrings;
  * close() and the context manager release the store; copies and pickles are refused;
  * a bad store path, another optimizer's store or a wrong device count are refused when the
    optimizer is built, not at its first step.
"""

import copy
import inspect
import pickle
import pydoc

import pytest
import torch

import csdkit
import csdkit.torch as ct
from conftest import DEVICES, loss_of, make_data, make_model
from test_torch_state import store_bytes, train

OPTIMIZERS = {
    "AdamW": lambda params, **kw: ct.AdamW(params, lr=3e-3, **kw),
    "SGD": lambda params, **kw: ct.SGD(params, lr=1e-2, momentum=0.9, **kw),
    "SGD-plain": lambda params, **kw: ct.SGD(params, lr=1e-2, **kw),
    "Adagrad": lambda params, **kw: ct.Adagrad(params, lr=1e-2, **kw),
    "Lion": lambda params, **kw: ct.Lion(params, lr=1e-4, **kw),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_state_dict_round_trip_keeps_the_stores_step(tmp_path, name):
    """What Accelerate's prepare() does to an optimizer over a resumed store: state_dict()
    (before this session's first step) handed straight back to load_state_dict(). The store
    stays at its committed step, no byte of it changes, and the next step continues exactly as
    an uninterrupted run."""
    make = OPTIMIZERS[name]
    x, y = make_data()
    a, b = make_model(), make_model()
    oa = make(a.parameters(), store=tmp_path / "a", devices=DEVICES)
    ob = make(b.parameters(), store=tmp_path / "b", devices=DEVICES)
    train(a, oa, 5, x, y)
    train(b, ob, 5, x, y)
    ob.close()
    before = store_bytes(tmp_path / "b")

    b2 = make_model(seed=7)  # another model, resumed from the store
    ob2 = make(b2.parameters(), store=tmp_path / "b")
    assert ob2.resume() == 5
    sd = ob2.state_dict()
    assert ob2.session.step_count == 5, "state_dict() of an existing store reads its step"
    if name not in ("SGD", "SGD-plain"):
        assert all(float(st["step"]) == 5 for st in sd["state"].values())
    ob2.load_state_dict(sd)
    assert ob2.session.step_count == 5
    assert store_bytes(tmp_path / "b") == before, "the round trip wrote into the store"
    train(a, oa, 2, x, y)
    train(b2, ob2, 2, x, y)
    assert ob2.session.step_count == 7
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b2.parameters()))


def test_round_trip_with_a_model_not_at_the_stores_weights_imports_nothing(tmp_path):
    """State and step are the store's, the model's weights are not (it was not resumed; HF
    Trainer resuming from an older checkpoint is here after Accelerate's prepare()): importing
    would replace the store's weights by the model's. Nothing is imported or written; step()
    then refuses the model until a load or resume() brings both to one step."""
    x, y = make_data()
    m = make_model()
    o = ct.AdamW(m.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES)
    train(m, o, 3, x, y)
    o.close()
    before = store_bytes(tmp_path / "s")
    fresh = make_model()  # the initial weights, not step 3's
    o2 = ct.AdamW(fresh.parameters(), lr=3e-3, store=tmp_path / "s")
    sd = o2.state_dict()
    o2.load_state_dict(sd)
    assert o2.session.step_count == 3
    assert store_bytes(tmp_path / "s") == before
    with pytest.raises(csdkit.StoreError, match=r"committed step 3.*expected the model's "
                                                r"weights.*call resume\(\)"):
        train(fresh, o2, 1, x, y)
    assert store_bytes(tmp_path / "s") == before
    o2 = ct.AdamW(fresh.parameters(), lr=3e-3, store=tmp_path / "s")
    o2.resume()
    o2.load_state_dict(sd)  # now the model is at the store's weights
    assert o2.session.step_count == 3
    train(fresh, o2, 1, x, y)
    assert o2.session.step_count == 4


def test_a_changed_state_is_still_imported(tmp_path):
    """Only the store's own state is recognised: a state dict with one buffer changed is
    imported at its step as before."""
    x, y = make_data()
    m = make_model()
    o = ct.AdamW(m.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES)
    train(m, o, 3, x, y)
    sd = o.state_dict()
    sd["state"][0]["exp_avg"] = sd["state"][0]["exp_avg"] * 0.5
    o.load_state_dict(sd)
    assert o.session.step_count == 3
    assert torch.equal(o.state_dict()["state"][0]["exp_avg"], sd["state"][0]["exp_avg"])


def test_amp_scaling_is_declared_only_when_fused(tmp_path):
    """Lightning's check (_optimizer_handles_unscaling: the attribute, default False) refuses
    gradient_clip_val for optimizers that declare it. torch's fused optimizers declare it; so
    does the kit's with fused=True, and only then."""
    m = make_model()
    assert ct.AdamW(m.parameters(), store=tmp_path / "a")._step_supports_amp_scaling is False
    assert ct.AdamW(m.parameters(), store=tmp_path / "b",
                    fused=True)._step_supports_amp_scaling is True
    for cls in (ct.Adam, ct.Adagrad, ct.Lion):
        assert cls(m.parameters(), store=tmp_path / cls.__name__)._step_supports_amp_scaling \
            is False
    assert ct.SGD(m.parameters(), lr=0.1, store=tmp_path / "c")._step_supports_amp_scaling \
        is False
    # float16/bfloat16 parameters: GradScaler cannot unscale their gradients itself (it refuses
    # float16 ones, has no bfloat16 kernel), so the kit folds it unless told not to.
    for dtype in (torch.float16, torch.bfloat16):
        half = make_model().to(dtype)
        assert ct.AdamW(half.parameters(), store=tmp_path / str(dtype)) \
            ._step_supports_amp_scaling is True
        assert ct.AdamW(half.parameters(), store=tmp_path / "x", fused=False) \
            ._step_supports_amp_scaling is False


def test_signature_and_docstrings_show_the_kits_arguments():
    kit = ["store", "devices", "backend", "device_mem", "link_model", "mode", "max_grad_norm",
           "compress", "overlap_backward", "fused"]
    for cls in (ct.AdamW, ct.Adam, ct.SGD, ct.Adagrad, ct.Lion):
        sig = inspect.signature(cls)
        for k in kit:
            assert k in sig.parameters, (cls.__name__, k)
            assert sig.parameters[k].kind is inspect.Parameter.KEYWORD_ONLY, (cls.__name__, k)
        assert sig.parameters["store"].default is inspect.Parameter.empty  # required
        text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
        assert "store (str or os.PathLike, required)" in text, cls.__name__
        assert "Args:" in text and "subclasses set" not in text.lower(), cls.__name__
    with pytest.raises(TypeError, match="store"):
        ct.AdamW(make_model().parameters())
    with pytest.raises(TypeError, match="unexpected keyword argument 'stor'"):
        ct.AdamW(make_model().parameters(), stor="x")
    assert isinstance(csdkit.__version__, str) and csdkit.__version__.count(".") == 2


def test_close_and_the_context_manager_release_the_store(tmp_path):
    x, y = make_data()
    m = make_model()
    with ct.AdamW(m.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES) as o:
        sched = torch.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.5)
        train(m, o, 2, x, y)
        sched.step()
    assert o.closed
    # The scheduler still holds the optimizer; the store is free all the same.
    o2 = ct.AdamW(m.parameters(), lr=3e-3, store=tmp_path / "s")
    train(m, o2, 1, x, y)
    assert o2.session.step_count == 3
    for call in (o.step, o.state_dict, lambda: o.load_state_dict(o2.state_dict())):
        with pytest.raises(RuntimeError, match="closed .*create a new optimizer"):
            call()
    o.close()  # idempotent
    o2.close()


def test_copies_and_pickles_are_refused(tmp_path):
    m = make_model()
    o = ct.AdamW(m.parameters(), store=tmp_path / "s")
    for what in (copy.deepcopy, copy.copy, pickle.dumps):
        with pytest.raises(TypeError, match="cannot be copied or pickled.*state_dict"):
            what(o)


def test_bad_stores_are_refused_at_construction(tmp_path):
    x, y = make_data()
    m = make_model()
    (tmp_path / "file").write_text("not a store")
    with pytest.raises(ValueError, match="Invalid store '.*file': expected a directory"):
        ct.AdamW(m.parameters(), store=tmp_path / "file")
    with pytest.raises(ValueError, match="Invalid store '.*': expected a path where a "
                                         "directory can be created, found '.*file' not a "
                                         "directory"):
        ct.AdamW(m.parameters(), store=tmp_path / "file" / "s")
    with pytest.raises(ValueError, match="Invalid devices value: 0"):
        ct.AdamW(m.parameters(), store=tmp_path / "s", devices=0)
    o = ct.AdamW(m.parameters(), lr=3e-3, store=tmp_path / "s", devices=DEVICES)
    train(m, o, 1, x, y)
    o.close()
    with pytest.raises(ValueError, match="expected a store of SGD .*found one of optimizer "
                                         "'adamw'"):
        ct.SGD(m.parameters(), lr=0.1, store=tmp_path / "s")
    with pytest.raises(ValueError, match="Invalid devices value: 1 .*has 2 devices"):
        ct.AdamW(m.parameters(), store=tmp_path / "s", devices=1)
    ct.AdamW(m.parameters(), store=tmp_path / "s", devices=DEVICES).close()  # its own count
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "manifest.json").write_text("[" * 100 + "]" * 100)
    with pytest.raises(csdkit.StoreError, match="readable manifest.json.*nested at most 64"):
        ct.AdamW(m.parameters(), store=tmp_path / "bad")


def test_a_store_path_below_missing_directories_is_created(tmp_path):
    """Construction accepts a path whose nearest existing ancestor is writable; the first
    step() creates the directories above the store (torch.distributed users name one store per
    rank below a run directory that does not exist yet)."""
    x, y = make_data()
    m = make_model()
    store = tmp_path / "run" / "optim" / "rank-0"
    with ct.AdamW(m.parameters(), store=store, devices=DEVICES) as o:
        train(m, o, 1, x, y)
        assert o.session.step_count == 1
    assert (store / "manifest.json").exists()
