#!/usr/bin/python3
"""Soak: many optimizer steps on one store, watching the process for leaks.

Creates a store for a small model (csdkit.Session, AdamW, emulated devices) in a temporary
directory, runs --steps steps with fresh random gradients (every 10th step also a skipped one,
found_inf, and every 7th with one tensor's gradient None), copying the weights out after each,
and samples after every step: the resident set size (VmRSS, /proc/self/status), the open file
descriptors (/proc/self/fd) and the threads (/proc/self/task). A leak of memory, descriptors
or threads per step shows up as growth from the first sample to the last.

Prints JSON (stdout, or --json FILE): first, last, max and min of each series after a warm-up
of --warmup steps, the growth last - first, and the step times. Nothing is asserted: the
numbers are for the reader (docs/reliability.md quotes them). The temporary directory is this
script's own and is removed at the end.

    /usr/bin/python3 bench/soak.py --steps 1000 --json soak.json
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from kit_import import import_csdkit



def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def threads():
    return len(os.listdir("/proc/self/task"))


def series(xs):
    return {"first": xs[0], "last": xs[-1], "max": max(xs), "min": min(xs),
            "growth": xs[-1] - xs[0]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1000, help="steps (default 1000)")
    ap.add_argument("--warmup", type=int, default=20,
                    help="steps before sampling starts (default 20: caches, pools, page tables)")
    ap.add_argument("--devices", type=int, default=2, help="emulated devices (default 2)")
    ap.add_argument("--dir", type=Path, default=None,
                    help="where the temporary store directory goes (default: $TMPDIR)")
    ap.add_argument("--json", type=Path, default=None, help="write the JSON here, not stdout")
    args = ap.parse_args(argv)
    for k in ("steps", "devices"):
        if getattr(args, k) < 1:
            ap.error("--{}: expected a value >= 1, found {}".format(k, getattr(args, k)))
    if not 0 <= args.warmup < args.steps:
        ap.error("--warmup: expected a value in [0, --steps), found {}".format(args.warmup))
    csdkit = import_csdkit("soak.py", "csdkit")

    # Three tensors in two param groups, 2 x 65536 + a bit per device.
    layout = [("embed", 100000, 0), ("ln", 1000, 0), ("head", 70000, 1)]
    rng = np.random.default_rng(0)
    weights = [rng.uniform(-0.1, 0.1, n).astype(np.float32) for _, n, _ in layout]
    out = [np.empty(n, np.float32) for _, n, _ in layout]
    grads = [np.empty(n, np.float32) for _, n, _ in layout]

    work = Path(tempfile.mkdtemp(prefix="csdkit-soak-", dir=args.dir))
    try:
        s = csdkit.Session.create(str(work / "store"), layout, [{"lr": 1e-3}, {"lr": 3e-4}],
                                  weights, optimizer="adamw", devices=args.devices)
        samples = {"rss_kib": [], "open_fds": [], "threads": []}
        step_seconds, skipped = [], 0
        for k in range(args.steps):
            for g in grads:
                g[:] = rng.standard_normal(g.size, dtype=np.float32)
            given = list(grads)
            if k % 7 == 3:
                given[1] = None  # a tensor without gradient this step
            t0 = time.perf_counter()
            rep = s.step(given, weights_out=out, group_hyper=[{"lr": 1e-3 / (1 + k)}, {}])
            step_seconds.append(time.perf_counter() - t0)
            if k % 10 == 9:
                skipped += s.step(given, found_inf=True)["skipped"]
            if rep["skipped"]:
                raise RuntimeError("step {} was skipped: {}".format(k, rep["skip_reason"]))
            if k >= args.warmup:
                samples["rss_kib"].append(rss_kib())
                samples["open_fds"].append(open_fds())
                samples["threads"].append(threads())
        s.verify()
        doc = {
            "benchmark": "soak",
            "config": {"steps": args.steps, "warmup": args.warmup, "devices": args.devices,
                       "params": sum(n for _, n, _ in layout)},
            "committed_step": s.step_count,
            "skipped_steps": skipped,
            "rss_kib": series(samples["rss_kib"]),
            "open_fds": series(samples["open_fds"]),
            "threads": series(samples["threads"]),
            "step_seconds": {"median": statistics.median(step_seconds),
                             "max": max(step_seconds)},
        }
        del s
    finally:
        shutil.rmtree(work)
    text = json.dumps(doc, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    else:
        print(text)
    print("soak: {} steps ({} skipped on purpose); RSS {first} -> {last} KiB (max {max}), "
          "descriptors {f0} -> {f1}, threads {t0} -> {t1}".format(
              doc["committed_step"], skipped, f0=doc["open_fds"]["first"],
              f1=doc["open_fds"]["last"], t0=doc["threads"]["first"],
              t1=doc["threads"]["last"], **doc["rss_kib"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
