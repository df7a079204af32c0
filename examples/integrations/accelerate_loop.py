#!/usr/bin/env python3
"""csdkit.torch.AdamW in a Hugging Face Accelerate training loop: prepare(), mixed precision,
gradient accumulation, accelerator.clip_grad_norm_, and save_state() / load_state() resume.

    accelerator = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=2)
    opt = csdkit.torch.AdamW(model.parameters(), lr=1e-3, store="ckpt/optim", devices=2)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    for tokens in loader:
        with accelerator.accumulate(model):
            loss = model(input_ids=tokens, labels=tokens).loss
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()         # Accelerate's wrapper steps only when sync_gradients
            opt.zero_grad()

--precision: bf16 or fp16 on CUDA (fp16 adds Accelerate's GradScaler, which unscales the
float32 parameters' gradients before the clip and skips a step with an inf), no on CPU.
--accumulate A: A micro-batches per optimizer step (accelerator.backward divides the loss by
A). The loader yields micro_batch(0), micro_batch(1), ... in order.

--save-every K: accelerator.save_state(<out>/checkpoints/step-<K>) after every K-th step (model,
optimizer state_dict() -- for the kit read from its store --, RNG states, the step counter of
the accumulation). --resume: the latest of them. prepare() hands the optimizer's state_dict()
back to its load_state_dict(), and the kit accepts its own committed state only with the model
at the store's weights (docs/integrations.md), so a resumed kit run first calls opt.resume()
(the store's weights into the model), then prepare(), then accelerator.load_state(): the
checkpoint's weights into the model and its optimizer state into the store, which after a crash
is ahead of the checkpoint and is rewound to it. The loader then skips the micro-batches already
trained (accelerator.skip_first_batches).

    python3 examples/integrations/accelerate_loop.py --optimizer kit --store /tmp/a/store \\
        --out /tmp/a --steps 20 --accumulate 2 --save-every 4
"""

import sys
from pathlib import Path

import torch

import common

SCRIPT = Path(__file__).name
PRECISIONS = (("no", "bf16", "fp16"), "no", "bf16", ("no",))


def step_of(path):
    name = path.name
    return int(name[5:]) if name.startswith("step-") and name[5:].isdigit() else None


def main():
    p = common.parser(__doc__, PRECISIONS, accumulate=True)
    args = common.check_args(p, p.parse_args(), PRECISIONS)
    try:
        from accelerate import Accelerator
    except ImportError:
        common.die(SCRIPT, "accelerate is not installed")

    acc = Accelerator(mixed_precision=args.precision, cpu=args.device == "cpu",
                      gradient_accumulation_steps=args.accumulate)
    model = common.make_gpt(args.model)
    opt = common.make_optimizer(args, model.parameters())
    micro = args.steps * args.accumulate
    loader = torch.utils.data.DataLoader(common.MicroBatches(micro), batch_size=common.BATCH,
                                         shuffle=False)

    ckpt_dir = args.out / "checkpoints"
    resumed_from, ckpt = None, None
    if args.resume:
        resumed_from, ckpt = common.latest(ckpt_dir.glob("step-*"), step_of)
        if ckpt is None:
            common.die(SCRIPT, "--resume: expected a checkpoint step-<K> in {}, found none"
                       .format(ckpt_dir))
        if args.optimizer == "kit":
            opt.resume()  # the model at the store's step, so that prepare()'s round trip holds
    model, opt, loader = acc.prepare(model, opt, loader)
    start = 0
    if ckpt is not None:
        acc.load_state(str(ckpt))  # the model, then the optimizer: the store rewound to ckpt
        start = resumed_from
        loader = acc.skip_first_batches(loader, start * args.accumulate)

    log = common.StepLosses()
    step = start
    model.train()
    for tokens in loader:
        with acc.accumulate(model):
            loss = model(input_ids=tokens, labels=tokens).loss
            acc.backward(loss)
            if acc.sync_gradients:
                acc.clip_grad_norm_(model.parameters(), common.CLIP)
            opt.step()
            opt.zero_grad(set_to_none=True)
        log.add(step + 1, loss.item())
        if not acc.sync_gradients:
            continue
        step += 1
        if args.save_every and step % args.save_every == 0:
            acc.save_state(str(ckpt_dir / "step-{}".format(step)))
        if step == args.kill_at:
            common.kill_self()
        if step == args.steps:
            break

    store_step = common.finish_kit(opt)
    common.write_results(args, "accelerate", log, acc.unwrap_model(model), resumed_from,
                         store_step, accumulate=args.accumulate,
                         model_class=type(acc.unwrap_model(model)).__name__)


if __name__ == "__main__":
    sys.exit(main())
