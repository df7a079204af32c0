"""csdkit.torch inside the trainers ML engineers use: Hugging Face Trainer, Accelerate and
Lightning, each run twice on the same small GPT-2 -- once with torch.optim.AdamW, once with
csdkit.torch.AdamW -- with gradient clipping (the trainer's own) and, on a GPU, bf16 mixed
precision.

Each test is skipped where its trainer is not installed (the CI machine has none of them: Debian
ships no transformers, accelerate or lightning); they run on the project's GPU machine
(docs/integrations.md has the figures).

The bound, fixed before measuring: the mean of the last 5 training losses of the kit's run is
within LOSS_BOUND (relative) of torch.optim's. Both runs see the same batches in the same order
from the same initial weights; they differ only by the optimizers' arithmetic (the kit's binary32
without fused multiply-add against PyTorch's kernels), which bf16 forward passes amplify.
"""

import importlib.util
import itertools
import os

import pytest
import torch

import csdkit.torch as ct

LOSS_BOUND = 1e-3
STEPS = 20
DEVICES = 2
CUDA = torch.cuda.is_available()


def _need(module):
    if importlib.util.find_spec(module) is None:
        pytest.skip("{} is not installed (the GPU machine has it; see docs/integrations.md)"
                    .format(module))


def make_gpt():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=2,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(cfg)  # 137k parameters: two devices of 65536-element blocks


def token_batches(n=64, length=32):
    """Sequences counting up mod 256 from random starts, every 3rd token repeated: a
    next-token task a small model learns within a few steps."""
    g = torch.Generator().manual_seed(1)
    start = torch.randint(0, 256, (n, 1), generator=g)
    pos = torch.arange(length)
    return ((start + pos - pos // 3) % 256).long()


def kit_opt(params, store, **kw):
    return ct.AdamW(params, lr=1e-3, weight_decay=0.01, store=store, devices=DEVICES, **kw)


def torch_opt(params, **kw):
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, foreach=False)


def compare(ref, kit, what):
    a, b = sum(ref[-5:]) / 5, sum(kit[-5:]) / 5
    rel = abs(a - b) / abs(a)
    worst = max(abs(x - y) / abs(x) for x, y in zip(ref, kit))
    print("\n  {}: {} steps, loss {:.4f} -> {:.4f} (torch.optim) / {:.4f} (csdkit); last-5 mean "
          "rel. difference {:.2e} (bound {:.0e}), worst step {:.2e}"
          .format(what, len(ref), ref[0], a, b, rel, LOSS_BOUND, worst))
    assert len(ref) == len(kit) == STEPS
    # A precondition, not the bound: 20 steps must move the loss for the comparison to say
    # anything (the runs go from about 5.3 to 4.5; HF Trainer's linear decay to 4.6).
    assert a < 0.95 * ref[0], "the model did not learn: the comparison would say nothing"
    assert rel <= LOSS_BOUND


# -- Accelerate ----------------------------------------------------------------------------


def _reset_accelerate():
    """Accelerate keeps one process-wide state (mixed precision included) and refuses another
    Accelerator's settings: reset it, as a new process would start."""
    from accelerate.state import AcceleratorState, GradientState
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def run_accelerate(make_opt, steps=STEPS, model=None, precision="bf16"):
    from accelerate import Accelerator
    _reset_accelerate()
    acc = Accelerator(mixed_precision=precision if CUDA else "no", cpu=not CUDA)
    model = model if model is not None else make_gpt()
    opt = make_opt(model.parameters())
    data = torch.utils.data.DataLoader(token_batches(), batch_size=8, shuffle=False)
    model, opt, data = acc.prepare(model, opt, data)
    losses = []
    for batch in itertools.islice(itertools.cycle(data), steps):
        out = model(input_ids=batch, labels=batch)
        acc.backward(out.loss)
        acc.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(out.loss.item())
    return losses, model, opt


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_accelerate_trains_as_torch_optim(tmp_path, precision):
    """fp16: Accelerate's GradScaler unscales the float32 parameters' gradients before
    clip_grad_norm_ and skips steps it finds an inf in, as for torch.optim."""
    _need("accelerate")
    _need("transformers")
    if precision == "fp16" and not CUDA:
        pytest.skip("fp16 mixed precision needs CUDA")
    ref, _, _ = run_accelerate(torch_opt, precision=precision)
    kit, _, opt = run_accelerate(lambda p: kit_opt(p, tmp_path / "s"), precision=precision)
    skipped = STEPS - opt.optimizer.session.step_count
    opt.optimizer.close()
    compare(ref, kit, "Accelerate (clip_grad_norm_ 1.0, {} on CUDA; {} steps skipped by the "
            "scaler)".format(precision, skipped))
    if precision == "bf16":
        assert skipped == 0


def test_accelerate_prepare_keeps_a_resumed_stores_step(tmp_path):
    """prepare() hands the optimizer's state_dict() back to load_state_dict(): a resumed store
    must stay at its step (it used to go back to step 0), with no byte written."""
    _need("accelerate")
    _need("transformers")
    _, _, opt = run_accelerate(lambda p: kit_opt(p, tmp_path / "s"), steps=3)
    opt.optimizer.close()
    files = {p: p.read_bytes() for p in sorted((tmp_path / "s").rglob("*")) if p.is_file()}
    model = make_gpt()
    inner = ct.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, store=tmp_path / "s")
    assert inner.resume() == 3
    from accelerate import Accelerator
    _reset_accelerate()
    acc = Accelerator(mixed_precision="bf16" if CUDA else "no", cpu=not CUDA)
    model, opt = acc.prepare(model, inner)
    assert inner.session.step_count == 3
    assert files == {p: p.read_bytes() for p in files}, "prepare() wrote into the store"
    inner.close()


# -- Hugging Face Trainer ------------------------------------------------------------------


def run_hf_trainer(make_opt, out_dir):
    from transformers import Trainer, TrainingArguments
    model = make_gpt()
    opt = make_opt(model.parameters())
    data = [{"input_ids": t, "labels": t} for t in token_batches()]
    kw = dict(output_dir=str(out_dir), max_steps=STEPS, per_device_train_batch_size=8,
              learning_rate=1e-3, weight_decay=0.01, max_grad_norm=1.0, bf16=CUDA,
              logging_steps=1, report_to=[], save_strategy="no", seed=0,
              dataloader_num_workers=0, disable_tqdm=True)
    if not CUDA:
        kw["use_cpu"] = True
    trainer = Trainer(model=model, args=TrainingArguments(**kw), train_dataset=data,
                      optimizers=(opt, None))
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return losses, opt


def test_hf_trainer_trains_as_torch_optim(tmp_path):
    _need("transformers")
    _need("accelerate")
    ref, _ = run_hf_trainer(torch_opt, tmp_path / "ref")
    kit, opt = run_hf_trainer(lambda p: kit_opt(p, tmp_path / "s"), tmp_path / "kit")
    assert opt.session.step_count == STEPS
    opt.close()
    compare(ref, kit, "HF Trainer (max_grad_norm 1.0, linear schedule, bf16 on CUDA)")


# -- Lightning -----------------------------------------------------------------------------


def _lightning():
    for name in ("lightning.pytorch", "pytorch_lightning"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    pytest.skip("neither lightning nor pytorch_lightning is installed (the GPU machine has "
                "pytorch_lightning; see docs/integrations.md)")


def run_lightning(make_opt, precision):
    pl = _lightning()

    class LitGPT(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = make_gpt()
            self.losses = []
            self.opt = None

        def training_step(self, batch, _):
            loss = self.model(input_ids=batch, labels=batch).loss
            self.losses.append(loss.item())
            return loss

        def configure_optimizers(self):
            self.opt = make_opt(self.model.parameters())
            return self.opt

    lit = LitGPT()
    trainer = pl.Trainer(max_steps=STEPS, accelerator="gpu" if CUDA else "cpu", devices=1,
                         precision=precision if CUDA else "32-true", gradient_clip_val=1.0,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(lit, torch.utils.data.DataLoader(token_batches(), batch_size=8))
    return lit.losses, lit.opt


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
def test_lightning_clips_and_trains_as_torch_optim(tmp_path, precision):
    """Lightning refuses gradient_clip_val for an optimizer that declares
    _step_supports_amp_scaling (it unscales internally); the kit declares it only with
    fused=True (or float16/bfloat16 parameters), so Lightning's gradient clipping runs here, in
    bf16-mixed and in 16-mixed (GradScaler) precision on a GPU."""
    _need("transformers")
    _lightning()
    if precision == "16-mixed" and not CUDA:
        pytest.skip("16-mixed precision needs CUDA")
    os.environ.setdefault("PL_DISABLE_FORK", "1")
    ref, _ = run_lightning(torch_opt, precision)
    kit, opt = run_lightning(lambda p: kit_opt(p, tmp_path / "s"), precision)
    skipped = STEPS - opt.session.step_count
    opt.close()
    compare(ref, kit, "Lightning (gradient_clip_val 1.0, {} on CUDA; {} steps skipped by the "
            "scaler)".format(precision, skipped))
    if precision == "bf16-mixed":
        assert skipped == 0
