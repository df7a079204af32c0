#!/usr/bin/env python3
"""csdkit.torch.AdamW over a torch.compile'd model, in a plain PyTorch training loop.

    model = torch.compile(model)
    opt = csdkit.torch.AdamW(model.parameters(), lr=1e-3, store="ckpt/optim", devices=2)

torch.compile wraps the module; its parameters are the original module's tensors, which the
compiled forward and backward read and whose .grad they fill, so the kit's optimizer takes them
as from an eager model: its gradient hooks fire as the compiled backward accumulates each
gradient, and it writes the new weights into the same tensors, which the next compiled call
reads (dynamo guards on shapes and dtypes, not values: nothing recompiles).

Each step: forward (autocast to bfloat16 with --precision bf16), backward,
clip_grad_norm_(1.0), opt.step(), opt.zero_grad(). With --save-every K the loop saves
{'step', 'model': the module's state_dict(), 'optimizer': opt.state_dict()} to
<out>/checkpoints/step-<K>.pt every K steps (torch.save to a temporary file, then a rename).
--resume loads the latest one: the model's weights first, then opt.load_state_dict(), which
for the kit imports the checkpoint's optimizer state into the store as its committed step --
after a crash the store is ahead of the checkpoint (it commits every step), and this rewinds it.

--no-compile runs the same loop on the eager model (torch 1.13 has no torch.compile).

    python3 examples/integrations/compiled.py --optimizer kit --store /tmp/c/store \\
        --out /tmp/c --steps 20 --save-every 4
"""

import sys
from pathlib import Path

import torch

import common

SCRIPT = Path(__file__).name
# (choices, default on CPU, default on CUDA, choices on CPU)
PRECISIONS = (("fp32", "bf16"), "fp32", "bf16", ("fp32", "bf16"))


def step_of(path):
    stem = path.stem
    return int(stem[5:]) if stem.startswith("step-") and stem[5:].isdigit() else None


def save_checkpoint(path, step, model, opt):
    tmp = path.with_suffix(".tmp")
    torch.save({"step": step, "model": model.state_dict(), "optimizer": opt.state_dict()}, tmp)
    tmp.replace(path)


def main():
    p = common.parser(__doc__, PRECISIONS)
    p.add_argument("--no-compile", action="store_true", help="run the eager model")
    p.add_argument("--compile-backend", default="inductor",
                   help="torch.compile's backend (default inductor; aot_eager traces forward "
                        "and backward the same way without generating kernels)")
    args = common.check_args(p, p.parse_args(), PRECISIONS)
    if not args.no_compile and not hasattr(torch, "compile"):
        p.error("torch.compile needs torch >= 2.0, this is torch {} (--no-compile runs the "
                "eager loop)".format(torch.__version__))
    device = torch.device(args.device)
    model = common.make_gpt(args.model).to(device)
    model.train()
    run = model if args.no_compile else torch.compile(model, backend=args.compile_backend)
    opt = common.make_optimizer(args, run.parameters())

    ckpt_dir = args.out / "checkpoints"
    start, resumed_from = 0, None
    if args.resume:
        step, path = common.latest(ckpt_dir.glob("step-*.pt"), step_of)
        if path is None:
            common.die(SCRIPT, "--resume: expected a checkpoint step-<K>.pt in {}, found none"
                       .format(ckpt_dir))
        ck = torch.load(path, map_location="cpu")
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])  # the kit: imported as the store's step (rewound)
        start = resumed_from = ck["step"]
    ckpt_dir.mkdir(exist_ok=True)

    log = common.StepLosses()
    bf16 = args.precision == "bf16"
    for step in range(start + 1, args.steps + 1):
        tokens = common.micro_batch(step - 1).to(device)
        with torch.autocast(device_type=args.device, dtype=torch.bfloat16, enabled=bf16):
            loss = run(input_ids=tokens, labels=tokens).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), common.CLIP)
        opt.step()
        opt.zero_grad(set_to_none=True)
        log.add(step, loss.item())
        if args.save_every and step % args.save_every == 0:
            save_checkpoint(ckpt_dir / "step-{}.pt".format(step), step, model, opt)
        if step == args.kill_at:
            common.kill_self()

    store_step = common.finish_kit(opt)
    common.write_results(
        args, "plain loop" if args.no_compile else "torch.compile", log, model, resumed_from,
        store_step, compile_backend=None if args.no_compile else args.compile_backend,
        model_class=type(model).__name__)


if __name__ == "__main__":
    sys.exit(main())
