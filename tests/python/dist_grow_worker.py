"""One rank of test_add_param_group.py's distributed growth (gloo, CPU): csdkit.torch.
distributed.AdamW over dist_common's MLP without its head, 3 steps on the deterministic per-rank
gradients, then add_param_group with the head (the set grows), 3 more steps; saves the weights
and the set's counts to --out."""

import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_common  # noqa: E402

import csdkit  # noqa: E402
import csdkit.torch.distributed as cdist  # noqa: E402

BEFORE, AFTER = 3, 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--init", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--foreign", action="store_true",
                    help="first try the growth with a file in the set's directory that the set "
                         "did not write (refused on every rank), then without it")
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + args.init, rank=args.rank,
                            world_size=args.world, timeout=datetime.timedelta(seconds=120))
    model = dist_common.make_model()
    body, head = dist_common.param_groups(model)
    opt = cdist.AdamW([body], lr=1e-2, store=args.store, devices=1)
    refused = None
    for step in range(BEFORE + AFTER):
        if step == BEFORE:
            if args.foreign:
                note = os.path.join(args.store, "notes.txt")
                if args.rank == 0:
                    with open(note, "w") as f:
                        f.write("mine")
                dist.barrier()
                try:
                    opt.add_param_group(head)
                except csdkit.StoreError as e:
                    refused = (str(e), len(opt.param_groups))
                dist.barrier()
                if args.rank == 0:
                    os.unlink(note)
                dist.barrier()
            opt.add_param_group(head)
        for p, g in zip(model.parameters(), dist_common.rank_grads(model, step, args.rank)):
            p.grad = g
        opt.step()
    torch.save(dict(weights=[p.detach().clone() for p in model.parameters()],
                    step=opt.session.step_count, counts=list(opt.session.tensor_steps),
                    leftovers=sorted(os.listdir(os.path.dirname(args.store))),
                    refused=refused), args.out)
    opt.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
