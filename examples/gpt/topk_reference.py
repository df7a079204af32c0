#!/usr/bin/python3
"""A torch-only reference of Top-K gradients feeding AdamW, on train_gpt.py's model and data.

What it does per iteration, with torch.optim.AdamW (betas 0.9/0.95, eps 1e-8, the same two
param groups, warm-up + cosine LR and batches as train_gpt.py):

    acc      = grad + residual            (residual = 0 with --no-error-feedback)
    sent     = Top-K by magnitude of acc, per slice (see --slices), zeros elsewhere
    residual = acc - sent
    p.grad   = sent;  AdamW.step()        (a dense AdamW step: unsent elements get grad 0,
                                           so m and v decay, the weight still moves by
                                           m_hat / (sqrt(v_hat) + eps), weight decay applies)

This is the algorithm csdkit.torch.AdamW(compress=TopK(ratio)) runs in the kit, so its loss
curve is a cross-check of the kit's Top-K run of the same configuration
(train_gpt.py --compress topk:RATIO --no-torch [--no-error-feedback]), to rounding.

--slices: where Top-K picks its k = ceil(ratio * n) entries:
    kit     the kit's (device, subgroup) slices of the flattened model (needs csdkit: a
            throwaway store is created in a temporary directory to read the layout; --devices)
    tensor  each parameter tensor on its own
    model   the whole flattened model at once

Remedies to try (all in this reference only): --dense-warmup N (N dense steps first),
--ratio, --lr, --momentum-sgd (sparse gradients into SGD with momentum instead of AdamW, the
classic pairing for Top-K + error feedback; --sgd-lr).

Several runs in one invocation: --runs 'dense' 'topk:0.02' 'topk:0.02,noef' 'topk:0.05,slices=tensor'
(comma-separated options per run: noef, slices=kit|tensor|model, warmup=N, lr=X, sgd). Writes
a JSON of every run's loss curve and held-out loss to --out (and, per Top-K run, the mean
fraction of each tensor's elements sent per step).

Measured (2 layers, d_model 128, 200 iterations, seed 0, CPU; mean of the last 20 training
losses / held-out loss): dense 2.439 / 2.736; Top-K 2 % kit slices with EF 2.677 / 2.854 (the
kit's run: the same curve, max |difference| 9.4e-5), without EF 2.614 / 2.803 (kit: max
4.8e-7); 2 % per tensor 2.975 / 3.114; 5 % 2.627 / 2.847; 10 % 2.580 / 2.815; 2 % after 20
dense steps 2.601 / 2.829; 2 % at lr 3e-3 3.119 / 3.359, at lr 3e-4 2.971 / 3.086.
"""

import argparse
import copy
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import train_gpt as T  # noqa: E402  (model, data, schedule, param groups)


def kit_slices(model, args):
    """(begin, n) of each (device, subgroup) slice, and each parameter's offset, in the kit's
    flattened layout (from a throwaway store)."""
    csdkit_torch = T.import_csdkit()
    with tempfile.TemporaryDirectory(dir=args.tmp) as d:
        opt = csdkit_torch.AdamW(T.param_groups(model, args.weight_decay), lr=args.lr,
                                 betas=(0.9, 0.95), eps=1e-8, store=Path(d) / "store",
                                 devices=args.devices,
                                 compress=csdkit_torch.TopK(0.5))
        opt._ensure_session()
        sess = opt._session
        subgroups = [(sg["begin"], sg["n"]) for sg in sess.subgroups]
        offsets = list(sess.tensor_offsets)
        sizes = [p.numel() for p in opt._params]  # the param groups' order, as below
        total = max(b + n for b, n in subgroups)
        del opt, sess
    return subgroups, offsets, sizes, total


def topk_mask(x, k):
    """Boolean mask of the k largest |x| (ties: lower index first, as the kit)."""
    n = x.numel()
    if k >= n:
        return torch.ones_like(x, dtype=torch.bool)
    key = x.abs()
    thr = torch.topk(key, k, sorted=False).values.min()
    above = key > thr
    at = key == thr
    need = k - above.sum()
    return above | (at & (torch.cumsum(at, 0) <= need))


def count(ratio, n):
    return int(min(max(math.ceil(ratio * n), 1), n))


class Sparsifier:
    """Turns the model's gradients into Top-K gradients in place, keeping the residual."""

    def __init__(self, params, ratio, ef, slices, kit_layout=None):
        self.params, self.ratio, self.ef, self.slices = params, ratio, ef, slices
        self.res = [torch.zeros_like(p, dtype=torch.float32) for p in params]
        self.kit_layout = kit_layout
        self.sent_frac = []  # per step: fraction of elements of each tensor that were sent

    @torch.no_grad()
    def __call__(self):
        accs = [p.grad.float().reshape(-1) + (r.reshape(-1) if self.ef else 0.0)
                for p, r in zip(self.params, self.res)]
        if self.slices == "tensor":
            masks = [topk_mask(a, count(self.ratio, a.numel())) for a in accs]
        else:
            if self.slices == "model":
                offs, total, cuts = [], 0, None
                for a in accs:
                    offs.append(total)
                    total += a.numel()
                cuts = [(0, total)]
            else:  # kit
                cuts, offs, sizes, total = self.kit_layout
                assert sizes == [p.numel() for p in self.params]
            flat = torch.zeros(total, device=accs[0].device)
            for a, o in zip(accs, offs):
                flat[o:o + a.numel()] = a
            fmask = torch.zeros(total, dtype=torch.bool, device=accs[0].device)
            for b, n in cuts:
                fmask[b:b + n] = topk_mask(flat[b:b + n], count(self.ratio, n))
            masks = [fmask[o:o + a.numel()] for a, o in zip(accs, offs)]
        self.sent_frac.append([float(m.float().mean()) for m in masks])
        for p, r, a, m in zip(self.params, self.res, accs, masks):
            sent = torch.where(m, a, torch.zeros_like(a))
            if self.ef:
                r.copy_((a - sent).reshape(r.shape))
            p.grad.copy_(sent.reshape(p.shape).to(p.grad.dtype))


def parse_run(text):
    spec = {"name": text, "ratio": None, "ef": True, "slices": None, "warmup": 0, "lr": None,
            "sgd": False}
    head, *opts = text.split(",")
    if head == "dense":
        pass
    elif head.startswith("topk:"):
        spec["ratio"] = float(head[5:])
    else:
        raise SystemExit("run {!r}: expected dense or topk:RATIO".format(text))
    for o in opts:
        k, _, v = o.partition("=")
        if k == "noef":
            spec["ef"] = False
        elif k == "slices":
            spec["slices"] = v
        elif k == "warmup":
            spec["warmup"] = int(v)
        elif k == "lr":
            spec["lr"] = float(v)
        elif k == "sgd":
            spec["sgd"] = True
        else:
            raise SystemExit("run {!r}: unknown option {!r}".format(text, o))
    return spec


def run(spec, init, data, starts, held_out, args, kit_layout):
    model = copy.deepcopy(init)
    lr = spec["lr"] if spec["lr"] is not None else (args.sgd_lr if spec["sgd"] else args.lr)
    groups = T.param_groups(model, args.weight_decay)
    if spec["sgd"]:
        opt = torch.optim.SGD(groups, lr=lr, momentum=0.9)
    else:
        opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, foreach=False)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, T.warmup_then_cosine(len(starts)))
    params = [p for g in opt.param_groups for p in g["params"]]
    sp = None
    if spec["ratio"] is not None:
        slices = spec["slices"] or args.slices
        sp = Sparsifier(params, spec["ratio"], spec["ef"], slices,
                        kit_layout if slices == "kit" else None)
    losses = []
    t0 = time.perf_counter()
    for it, s in enumerate(starts):
        x, y = (t.to(args.device) for t in data.batch(data.train, s, args.context))
        opt.zero_grad(set_to_none=True)
        loss = T.loss_of(model, x, y)
        loss.backward()
        if sp is not None and it >= spec["warmup"]:
            sp()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if args.log_every and (it % args.log_every == 0 or it == len(starts) - 1):
            print("  [{}] iter {:4d} loss {:.4f}".format(spec["name"], it, losses[-1]),
                  flush=True)
    out = {"spec": spec, "loss": losses, "seconds": time.perf_counter() - t0,
           "held_out_loss": T.held_out_loss(model, held_out, args)}
    if sp is not None and sp.sent_frac:
        names = {id(p): n for n, p in model.named_parameters()}
        fr = torch.tensor(sp.sent_frac)  # steps x tensors
        out["sent_fraction_per_tensor_mean"] = {
            names[id(p)]: float(f) for p, f in zip(params, fr.mean(0))}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", nargs="+", default=["dense", "topk:0.02", "topk:0.02,noef"])
    ap.add_argument("--slices", choices=("kit", "tensor", "model"), default="kit",
                    help="default selection granularity of the Top-K runs (default kit)")
    ap.add_argument("--devices", type=int, default=4, help="for --slices kit (default 4)")
    ap.add_argument("--tmp", default=None, help="where the throwaway store goes (not tmpfs)")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--sgd-lr", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("topk_reference.json"))
    ap.add_argument("--corpus", type=Path, default=T.CORPUS_DIR,
                    help="the training text (train_gpt.py --corpus)")
    ap.add_argument("--init", type=Path, default=None,
                    help="start from a model of train_gpt.py --save-model (its vocabulary and "
                         "shape too), as train_gpt.py --init does")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    specs = [parse_run(r) for r in args.runs]

    chars = saved = None
    if args.init is not None:
        saved = torch.load(args.init, map_location="cpu")
        chars = saved["chars"]
        for k in ("layers", "d_model", "heads", "context"):
            setattr(args, k, int(saved["shape"][k]))
    text, _ = T.load_corpus(args.corpus)
    data = T.CharData(text, chars)
    # The same initial weights, batches and held-out batches as train_gpt.py with these options.
    torch.manual_seed(args.seed)
    init = T.GPT(data.vocab, args.context, args.d_model, args.layers, args.heads)
    if saved is not None:
        init.load_state_dict(saved["model"])
    g = torch.Generator().manual_seed(args.seed)
    starts = [torch.randint(0, len(data.train) - args.context - 1, (args.batch,), generator=g)
              for _ in range(args.iters)]
    held_out = T.held_out_batches(data, args)
    kit_layout = None
    if any(s["ratio"] is not None and (s["slices"] or args.slices) == "kit" for s in specs):
        kit_layout = kit_slices(copy.deepcopy(init), args)
        print("kit slices (begin, n):", kit_layout[0], flush=True)
    init = init.to(args.device)
    results = []
    w = max(1, args.iters // 10)
    for spec in specs:
        r = run(spec, init, data, starts, held_out, args, kit_layout)
        r["tail_mean"] = sum(r["loss"][-w:]) / w
        print("{:40s} final {:.4f}  mean of last {} {:.4f}  held-out {:.4f}  ({:.0f} s)".format(
            spec["name"], r["loss"][-1], w, r["tail_mean"], r["held_out_loss"], r["seconds"]),
            flush=True)
        results.append(r)
    with open(args.out, "w") as f:
        json.dump({"config": {k: str(v) for k, v in vars(args).items()}, "runs": results}, f,
                  indent=1)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
