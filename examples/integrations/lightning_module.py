#!/usr/bin/env python3
"""csdkit.torch.AdamW in a Lightning module: configure_optimizers, precision, gradient clipping,
gradient accumulation, ModelCheckpoint every K steps and resume with fit(..., ckpt_path=...).

    class LitGPT(pl.LightningModule):
        def configure_optimizers(self):
            return csdkit.torch.AdamW(self.parameters(), lr=1e-3, store="ckpt/optim", devices=2)

    pl.Trainer(precision="bf16-mixed", gradient_clip_val=1.0, accumulate_grad_batches=2,
               callbacks=[ModelCheckpoint(every_n_train_steps=4, save_top_k=-1)], ...)
    trainer.fit(LitGPT(), loader, ckpt_path=...)

--precision: bf16-mixed or 16-mixed (GradScaler) on CUDA, 32-true on CPU. Lightning clips
with gradient_clip_val 1.0 (it refuses to for optimizers that unscale internally; the kit does
not, for float32 parameters: docs/integrations.md). --accumulate A: accumulate_grad_batches=A.

--save-every K: ModelCheckpoint(dirpath=<out>/checkpoints, filename="{step}",
every_n_train_steps=K, save_top_k=-1) writes step=<K>.ckpt after every K-th optimizer step
(the module's weights, the optimizer's state_dict() -- for the kit read from its store --, the
loops' progress). --resume: trainer.fit(..., ckpt_path=<the latest>). Lightning restores the
weights, calls configure_optimizers(), then the optimizer's load_state_dict(), which for the
kit imports the checkpoint's state into the store as its committed step (after a crash the
store is ahead of the checkpoint: this rewinds it).

The data: Lightning restores its batch counter from a checkpoint taken inside an epoch but
starts a plain DataLoader again from the epoch's first batch (it warns about that); so
training_step takes micro_batch(batch_idx) by the restored batch_idx, and the loader (of
indices, steps x A of them: one epoch) only paces the epoch.

    python3 examples/integrations/lightning_module.py --optimizer kit --store /tmp/l/store \\
        --out /tmp/l --steps 20 --accumulate 2 --save-every 4
"""

import importlib
import os
import sys
from pathlib import Path

import torch

import common

SCRIPT = Path(__file__).name
PRECISIONS = (("32-true", "bf16-mixed", "16-mixed"), "32-true", "bf16-mixed", ("32-true",))


def import_lightning():
    for name in ("lightning.pytorch", "pytorch_lightning"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    common.die(SCRIPT, "neither lightning nor pytorch_lightning is installed")


def step_of(path):
    stem = path.stem  # step=<K>
    return int(stem[5:]) if stem.startswith("step=") and stem[5:].isdigit() else None


def main():
    p = common.parser(__doc__, PRECISIONS, accumulate=True)
    args = common.check_args(p, p.parse_args(), PRECISIONS)
    os.environ.setdefault("PL_DISABLE_FORK", "1")
    pl = import_lightning()

    log = common.StepLosses()

    class LitGPT(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = common.make_gpt(args.model)
            self.opt = None

        def training_step(self, batch, batch_idx):
            tokens = common.micro_batch(batch_idx).to(self.device)
            loss = self.model(input_ids=tokens, labels=tokens).loss
            log.add(self.global_step + 1, loss.item())
            return loss

        def configure_optimizers(self):
            self.opt = common.make_optimizer(args, self.model.parameters())
            return self.opt

    class KillAt(pl.Callback):
        """SIGKILL once optimizer step `step` has completed (ModelCheckpoint, which Lightning
        runs after the other callbacks, has not saved that step)."""

        def __init__(self, step):
            self.step = step

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            if trainer.global_step == self.step:
                common.kill_self()

    ckpt_dir = args.out / "checkpoints"
    callbacks = [KillAt(args.kill_at)] if args.kill_at else []
    if args.save_every:
        callbacks.append(pl.callbacks.ModelCheckpoint(
            dirpath=str(ckpt_dir), filename="{step}", every_n_train_steps=args.save_every,
            save_top_k=-1, save_on_train_epoch_end=False))
    resumed_from, ckpt = None, None
    if args.resume:
        resumed_from, ckpt = common.latest(ckpt_dir.glob("step=*.ckpt"), step_of)
        if ckpt is None:
            common.die(SCRIPT, "--resume: expected a checkpoint step=<K>.ckpt in {}, found none"
                       .format(ckpt_dir))

    trainer = pl.Trainer(max_steps=args.steps,
                         accelerator="gpu" if args.device == "cuda" else "cpu",
                         devices=1, precision=args.precision,
                         gradient_clip_val=common.CLIP, accumulate_grad_batches=args.accumulate,
                         callbacks=callbacks, enable_checkpointing=bool(args.save_every),
                         logger=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, default_root_dir=str(args.out))
    lit = LitGPT()
    loader = torch.utils.data.DataLoader(range(args.steps * args.accumulate), batch_size=None)
    trainer.fit(lit, loader, ckpt_path=None if ckpt is None else str(ckpt))

    store_step = common.finish_kit(lit.opt)
    common.write_results(args, "lightning", log, lit.model, resumed_from, store_step,
                         accumulate=args.accumulate, model_class=type(lit.model).__name__)


if __name__ == "__main__":
    sys.exit(main())
