"""One rank of a test_distributed_kill.py run (gloo, CPU): trains dist_common's MLP with
csdkit.torch.distributed.AdamW for --steps steps, rank r's gradient at step k being
dist_common.rank_grads(model, k, r) (so that a restarted run sees the same data), starting with
resume() (which creates the stores when there are none, and otherwise rolls the ranks back to
their common committed step). At the end it saves the parameters to --out.

It appends to --progress (flushed at once): "resumed <step> <rolled_back as JSON>", then
"stepping <k> <perf_counter>" before each optimizer step and "done <k> <perf_counter>" after.
With --hold-step K this rank stops inside step K (0-based) after the ranks' agreement, just
before its store would commit (a wrapper around its session's step, written "holding <K>"), and
waits there to be killed: its peers commit step K meanwhile (their stores reach K + 1), so the
test can leave the stores one step apart deterministically.
"""

import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_common  # noqa: E402

import csdkit.torch.distributed as cdist  # noqa: E402


class HoldBeforeCommit:
    """Stands in for the optimizer's session; its step() and step_arena() (the one the
    optimizer calls) for step index `step` (the store at committed step `step`) write
    "holding <step>" and sleep instead of committing."""

    def __init__(self, session, step, log):
        self._s, self._step, self._log = session, step, log

    def __getattr__(self, name):
        return getattr(self._s, name)

    def _hold(self):
        if self._s.step_count == self._step:
            self._log("holding %d" % self._step)
            time.sleep(600)  # the test kills this process

    def step(self, *args, **kwargs):
        self._hold()
        return self._s.step(*args, **kwargs)

    def step_arena(self, *args, **kwargs):
        self._hold()
        return self._s.step_arena(*args, **kwargs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--init", required=True, help="FileStore path (file:// init_method)")
    ap.add_argument("--store", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--progress", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--hold-step", type=int, default=-1)
    ap.add_argument("--timeout", type=float, default=10.0,
                    help="gloo's collective timeout, s: a rank whose peer died fails soon")
    a = ap.parse_args()
    torch.set_num_threads(1)
    prog = open(a.progress, "a")

    def log(line):
        prog.write(line + "\n")
        prog.flush()

    dist.init_process_group("gloo", init_method="file://" + a.init, rank=a.rank,
                            world_size=a.world, timeout=datetime.timedelta(seconds=a.timeout))
    model = dist_common.make_model()
    opt = cdist.AdamW(dist_common.param_groups(model), lr=1e-2, store=a.store, devices=1)
    start = opt.resume()
    log("resumed %d %s" % (start, json.dumps(opt.rolled_back)))
    if a.hold_step >= 0:
        opt._session = HoldBeforeCommit(opt._session, a.hold_step, log)
    for k in range(start, a.steps):
        grads = dist_common.rank_grads(model, k, a.rank)
        for p, g in zip(model.parameters(), grads):
            p.grad = g
        opt.param_groups[0]["lr"] = 1e-2 if k == 0 else 0.5e-2  # as an LR scheduler would
        log("stepping %d %.6f" % (k, time.perf_counter()))
        opt.step()
        log("done %d %.6f" % (k, time.perf_counter()))
    torch.save([p.detach().clone() for p in model.parameters()], a.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
