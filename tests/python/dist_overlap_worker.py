"""One rank of test_distributed.py's overlap test: the same run twice, with
csdkit.torch.distributed.AdamW(overlap_backward=True) (the buckets' reductions launched by the
hooks during backward, the update started during backward) and with overlap_backward=False
(every bucket reduced in step()), each over its own stores; real backward passes on this rank's
micro-batches; small buckets (several per model). Saves, per run, the reports and the final
weights."""

import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_common  # noqa: E402

import csdkit.torch.distributed as cdist  # noqa: E402

# Per step, what happens after backward: 'none': fc2.bias and head.weight get no gradient on
# every rank; 'none1': head.bias none on rank 1 only; 'scale': every gradient halved in place;
# 'data': halved through .data (no version bump); 'inf0': a non-finite value on rank 0 (the
# step is skipped everywhere); 'accum': two backward passes; 'replace': fc1.bias's gradient
# replaced by a new tensor; 'big': the loss times 4 (clipping triggers); 'lr': the LR
# changed after backward. Each is followed by two plain steps (after an abandoned update the
# next step starts none, the one after again).
TAGS = ["none", "none1", "scale", "inf0", "accum", "data", "replace", "big", "lr"]
PLAN = [set(), set()] + [s for t in TAGS for s in ({t}, set(), set())]


MAX_NORM = 3.0


def run(model, opt, rank, log):
    reports = []
    for i, tags in enumerate(PLAN):
        opt.zero_grad(set_to_none=True)
        g = torch.Generator().manual_seed(100 * i + rank)
        x = torch.randn(32, 16, generator=g).to(model.fc1.weight.dtype)
        y = torch.randn(32, 3, generator=g)
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
        (loss * 4 if "big" in tags else loss).backward()
        if "accum" in tags:
            torch.nn.functional.mse_loss(model(x.flip(0)).float(), y).backward()
        with torch.no_grad():
            if "none" in tags:
                model.fc2.bias.grad = None
                model.head.weight.grad = None
            if "none1" in tags and rank == 1:
                model.head.bias.grad = None
            if "scale" in tags:
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad.mul_(0.5)
            if "data" in tags:
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad.data.mul_(0.5)
            if "inf0" in tags and rank == 0:
                model.fc2.weight.grad[3, 7] = float("inf")
            if "replace" in tags:
                model.fc1.bias.grad = model.fc1.bias.grad * 2
        if "lr" in tags:
            opt.param_groups[0]["lr"] *= 0.5
        opt.step()
        reports.append(dict(opt.last_report))
        log("step %d %s" % (i, reports[-1].get("speculation")))
    return reports


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--init", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="fp32")
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + a.init, rank=a.rank,
                            world_size=a.world, timeout=datetime.timedelta(seconds=120))
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[a.dtype]
    out = {}
    for overlap in (True, False):
        model = dist_common.make_model(dtype, hidden=256)
        opt = cdist.AdamW(dist_common.param_groups(model), lr=1e-2, weight_decay=0.01,
                          store=os.path.join(a.store, "on" if overlap else "off"), devices=1,
                          max_grad_norm=MAX_NORM, overlap_backward=overlap)
        opt._bucket_bytes = 2 << 10  # three buckets for this small model
        reps = run(model, opt, a.rank, lambda s: None)
        out["on" if overlap else "off"] = dict(
            reports=reps, weights=[p.detach().clone() for p in model.parameters()],
            buckets=len(opt._buckets))
        opt.close()
    torch.save(out, a.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
