#!/usr/bin/python3
"""PyTorch's own CPU AdamW on fp32 arrays, timed as `csdkit bench kernel` times the host model.

Run by `csdkit bench kernel` (bench/kernel_bench.cpp) in the same invocation, once per thread
count: one fp32 parameter of --n elements with an fp32 gradient, both implementations torch.optim
has for CPU tensors (foreach=True, the multi-tensor path, and foreach=False, the single-tensor
loop), torch.set_num_threads(--threads), best of --reps steps after one warm-up step. Prints one
JSON object; exit status 2 with a message when torch cannot be imported.
"""
import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, required=True, help="elements")
    ap.add_argument("--threads", type=int, required=True, help="torch.set_num_threads")
    ap.add_argument("--reps", type=int, default=3, help="timed steps (best of)")
    a = ap.parse_args()
    if a.n < 1 or a.threads < 1 or a.reps < 1:
        ap.error("--n, --threads and --reps: expected positive integers")
    try:
        import torch
    except ImportError as e:
        print(f"torch_adamw.py: cannot import torch ({e})", file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    gen = torch.Generator().manual_seed(1)
    out = {"torch": torch.__version__, "threads": a.threads, "n": a.n, "results": []}
    for foreach in (True, False):
        p = torch.nn.Parameter(torch.rand(a.n, generator=gen) * 0.1 - 0.05)
        p.grad = torch.rand(a.n, generator=gen) * 2 - 1
        opt = torch.optim.AdamW([p], lr=1e-3, foreach=foreach)
        opt.step()  # allocates exp_avg / exp_avg_sq
        best = float("inf")
        for _ in range(a.reps):
            t0 = time.perf_counter()
            opt.step()
            best = min(best, time.perf_counter() - t0)
        out["results"].append({"implementation": "foreach" if foreach else "single_tensor",
                               "seconds": best, "elements_per_second": a.n / best})
        del opt, p
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
