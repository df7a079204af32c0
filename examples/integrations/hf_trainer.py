#!/usr/bin/env python3
"""csdkit.torch.AdamW in the Hugging Face Transformers Trainer, handed over either way the
Trainer takes an optimizer, with max_grad_norm, save_steps and resume_from_checkpoint.

--hf-optimizer optimizers (default): the optimizer built here, with a scheduler of our own
(linear warm-up over 4 steps, then constant):

    opt = csdkit.torch.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01,
                             store="ckpt/optim", devices=2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 4))
    Trainer(model=model, args=args, train_dataset=data, optimizers=(opt, sched))

--hf-optimizer cls_and_kwargs: the Trainer builds it (its two param groups: weight decay
args.weight_decay on the matrices, 0 on biases and LayerNorm weights) and its own linear-decay
scheduler:

    Trainer(model=model, args=args, train_dataset=data,
            optimizer_cls_and_kwargs=(csdkit.torch.AdamW,
                                      {"lr": 1e-3, "store": "ckpt/optim", "devices": 2}))

The Trainer clips with accelerator.clip_grad_norm_ (max_grad_norm 1.0), runs bf16 or fp16
autocast on CUDA (--precision; fp32 on CPU), and with --save-every K saves
<out>/checkpoints/checkpoint-<K> (model, optimizer.pt = the optimizer's state_dict(), for the kit
read from its store, scheduler.pt, RNG states, trainer_state.json). --resume calls
trainer.train(resume_from_checkpoint=<the latest>): the Trainer loads the model's weights,
hands the optimizer to Accelerate's prepare(), loads optimizer.pt into it -- which for the kit
imports it into the store as its committed step; after a crash the store is ahead of the
checkpoint, and this rewinds it -- and skips the batches already trained.

The data: 8 sequences per batch, the rows of micro_batch(0 .. steps-1), one epoch; the Trainer
samples them in its seeded random order, the same order again in a resumed run. The recorded
loss of a step is the one compute_loss returned (not the rounded one in log_history).

    python3 examples/integrations/hf_trainer.py --optimizer kit --store /tmp/h/store \\
        --out /tmp/h --steps 20 --save-every 4
"""

import dataclasses
import sys
from pathlib import Path

import torch

import common

SCRIPT = Path(__file__).name
PRECISIONS = (("fp32", "bf16", "fp16"), "fp32", "bf16", ("fp32",))
WARMUP = 4


def warmup(step):
    return min(1.0, (step + 1) / WARMUP)


def main():
    p = common.parser(__doc__, PRECISIONS)
    p.add_argument("--hf-optimizer", choices=("optimizers", "cls_and_kwargs"),
                   default="optimizers",
                   help="Trainer(optimizers=(opt, sched)) or Trainer(optimizer_cls_and_kwargs="
                        "(cls, kwargs)) (default optimizers)")
    args = common.check_args(p, p.parse_args(), PRECISIONS)
    try:
        from transformers import Trainer, TrainerCallback, TrainingArguments
        from transformers.trainer_utils import get_last_checkpoint
    except ImportError:
        common.die(SCRIPT, "transformers is not installed")
    if args.model == "plain":
        p.error("--model plain: the Trainer example uses transformers' GPT-2")

    log = common.StepLosses()

    class LossRecordingTrainer(Trainer):
        """Records each training micro-batch's loss as compute_loss returns it."""

        def compute_loss(self, model, inputs, *rest, **kw):
            out = super().compute_loss(model, inputs, *rest, **kw)
            if model.training:
                loss = out[0] if isinstance(out, tuple) else out
                # Under DataParallel (the Trainer on several GPUs of one process) one loss per
                # GPU: the Trainer steps with their mean, and so the record.
                log.add(self.state.global_step + 1, loss.detach().float().mean().item())
            return out

    class KillAt(TrainerCallback):
        """SIGKILL once step `step` has completed (before that step's logging and saving)."""

        def __init__(self, step):
            self.step = step

        def on_step_end(self, targs, state, control, **kw):
            if state.global_step == self.step:
                common.kill_self()

    ckpt_dir = args.out / "checkpoints"
    kw = dict(output_dir=str(ckpt_dir), max_steps=args.steps,
              per_device_train_batch_size=common.BATCH, learning_rate=common.LR,
              weight_decay=common.WEIGHT_DECAY, max_grad_norm=common.CLIP,
              bf16=args.precision == "bf16", fp16=args.precision == "fp16",
              save_strategy="steps" if args.save_every else "no",
              save_steps=args.save_every or 500, logging_steps=1, report_to="none", seed=0,
              dataloader_num_workers=0, disable_tqdm=True)
    if args.device == "cpu":
        fields = {f.name for f in dataclasses.fields(TrainingArguments)}
        kw["use_cpu" if "use_cpu" in fields else "no_cuda"] = True
    targs = TrainingArguments(**kw)

    model = common.make_gpt("hf")
    if args.hf_optimizer == "optimizers":
        model.to(args.device)  # the optimizer over the parameters where they will train
        opt = common.make_optimizer(args, model.parameters())
        sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup)
        hand_over = dict(optimizers=(opt, sched))
    else:
        if args.optimizer == "kit":
            cls = common.import_csdkit().AdamW
            kwargs = dict(lr=common.LR, **common.kit_kwargs(args))
        else:
            cls, kwargs = torch.optim.AdamW, dict(lr=common.LR, foreach=False)
        hand_over = dict(optimizer_cls_and_kwargs=(cls, kwargs))

    data = [{"input_ids": t, "labels": t} for t in common.MicroBatches(args.steps)]
    callbacks = [KillAt(args.kill_at)] if args.kill_at else []
    trainer = LossRecordingTrainer(model=model, args=targs, train_dataset=data,
                                   callbacks=callbacks, **hand_over)

    resumed_from, ckpt = None, None
    if args.resume:
        ckpt = get_last_checkpoint(str(ckpt_dir)) if ckpt_dir.is_dir() else None
        if ckpt is None:
            common.die(SCRIPT, "--resume: expected a checkpoint-<K> directory in {}, found none"
                       .format(ckpt_dir))
        resumed_from = int(Path(ckpt).name.split("-")[-1])
    trainer.train(resume_from_checkpoint=ckpt)

    store_step = common.finish_kit(trainer.optimizer)
    common.write_results(args, "hf_trainer", log, trainer.model, resumed_from, store_step,
                         hf_optimizer=args.hf_optimizer)


if __name__ == "__main__":
    sys.exit(main())
