"""A training script for test_kill_resume.py: trains the tests' MLP with csdkit.torch.AdamW for
--steps steps, the batch of step k drawn from a generator seeded with k (so a restarted run sees
the same data order), resuming from the store when it holds one. Before each optimizer step it
appends "stepping <k>" to --progress (so that the test can kill it inside a step); at the end it
saves the parameters to --out.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import csdkit  # noqa: E402
import csdkit.torch as ct  # noqa: E402
from conftest import DEVICES, loss_of, make_model  # noqa: E402


def batch(k, n=64, d_in=32):
    g = torch.Generator().manual_seed(1000 + k)
    x = torch.randn(n, d_in, generator=g)
    return x, torch.sin(x[:, :4].sum(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--progress", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    model = make_model()
    opt = ct.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01, store=a.store,
                   devices=DEVICES)
    start = 0
    try:
        start = opt.resume()
    except csdkit.StoreError:
        if os.path.exists(os.path.join(a.store, "manifest.json")):
            raise  # a store that cannot be resumed is an error, not a fresh start
    with open(a.progress, "a") as prog:
        for k in range(start, a.steps):
            x, y = batch(k)
            opt.zero_grad(set_to_none=True)
            loss_of(model, x, y).backward()
            prog.write("stepping %d\n" % k)
            prog.flush()
            opt.step()
    torch.save([p.detach().clone() for p in model.parameters()], a.out)


if __name__ == "__main__":
    main()
