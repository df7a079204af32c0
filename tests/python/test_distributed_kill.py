"""A killed rank and restart: 2 gloo ranks (dist_kill_train.py) train with
csdkit.torch.distributed.AdamW; one rank is SIGKILLed inside a step, its peer then fails in its
next collective (gloo notices the closed connection, or its short timeout expires; the test
kills it if it has not exited in time), and both are restarted with resume(). The ranks' stores
are the checkpoint; a kill between the two ranks' commits leaves them one step apart, and
resume() rolls the one ahead back to the common step. After every kill and restart the run
ends with the weights of an uninterrupted 2-rank run, bit for bit, on both ranks.

Kills: once deterministically between the commits (rank 1 held inside step 3 just before its
store commits, and killed as soon as rank 0's store shows step 4 committed: the stores are then
at 4 and 3, which the test checks on disk; the restart must report that rank 0 was rolled
back), then at a random instant inside a step of rank 0 and of rank 1 (uniform over the
uninterrupted run's median step duration; seeded, the seed and instants printed with -s).
"""

import json
import os
import random
import signal
import subprocess
import sys
import time

import torch

import csdkit

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 10
WORLD = 2


def committed_step(store, rank):
    """Rank `rank`'s store's committed step as its manifest says (None if not readable yet)."""
    try:
        with open(os.path.join(store, "rank-%d" % rank, "manifest.json")) as f:
            return json.load(f)["committed_step"]
    except (OSError, ValueError, KeyError):
        return None


def progress(tmp, name, rank):
    """The lines of a rank's progress file, split into words."""
    path = tmp / ("%s.%d.progress" % (name, rank))
    return [line.split(" ", 2) for line in path.read_text().splitlines()] if path.exists() \
        else []


def entered(tmp, name, rank, step):
    return any(w[:2] == ["stepping", str(step)] for w in progress(tmp, name, rank))


def step_seconds(tmp, name, rank):
    """The median duration of a run's steps on a rank (stepping -> done, its own clock)."""
    t = {}
    for w in progress(tmp, name, rank):
        if w[0] in ("stepping", "done"):
            t.setdefault(int(w[1]), {})[w[0]] = float(w[2])
    d = sorted(v["done"] - v["stepping"] for v in t.values() if len(v) == 2)
    return d[len(d) // 2]


def launch(tmp, name, store, hold=None):
    """Starts the 2 ranks (a fresh rendezvous file per launch); `hold`: (rank, step) that
    stops before its commit of that step."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(csdkit.__file__))] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["OMP_NUM_THREADS"] = "1"
    procs = []
    for r in range(WORLD):
        cmd = [sys.executable, os.path.join(HERE, "dist_kill_train.py"), "--rank", str(r),
               "--world", str(WORLD), "--init", str(tmp / (name + ".init")), "--store",
               str(store), "--steps", str(STEPS), "--progress",
               str(tmp / ("%s.%d.progress" % (name, r))),
               "--out", str(tmp / ("%s.%d.pt" % (name, r)))]
        if hold is not None and hold[0] == r:
            cmd += ["--hold-step", str(hold[1])]
        procs.append(subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE))
    return procs


def wait_until(what, cond, procs, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        if any(p.poll() is not None for p in procs):
            return cond()
        time.sleep(0.002)
    raise AssertionError("timed out waiting for " + what)


def finish_survivors(procs, timeout=30):
    """After a kill: each other rank must stop by itself (its collective fails); after
    `timeout` s it is killed. Returns each rank's (exit code, last line of its stderr)."""
    deadline = time.monotonic() + timeout
    out = []
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        err = p.stderr.read().decode(errors="replace").strip().splitlines()
        out.append((p.returncode, err[-1] if err else ""))
    return out


def run_to_end(tmp, name, store):
    procs = launch(tmp, name, store)
    for r, p in enumerate(procs):
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, "rank %d of %s exited %d:\n%s" % (
            r, name, p.returncode, err.decode(errors="replace"))
    return [torch.load(tmp / ("%s.%d.pt" % (name, r))) for r in range(WORLD)]


def test_killed_rank_then_restart_equals_uninterrupted_run(tmp_path):
    ref = run_to_end(tmp_path, "ref", tmp_path / "ref_store")
    assert all(torch.equal(a, b) for a, b in zip(ref[0], ref[1]))
    store = tmp_path / "store"
    log = []

    # 1. Deterministic: rank 0 commits step 4 (index 3), rank 1 does not.
    procs = launch(tmp_path, "hold", store, hold=(1, 3))
    assert wait_until("rank 0 to commit step 4 while rank 1 holds",
                      lambda: committed_step(store, 0) == 4 and
                      ["holding", "3"] in progress(tmp_path, "hold", 1), procs), \
        "rank 0 did not commit step 4 while rank 1 held: %s" % finish_survivors(procs)
    procs[1].send_signal(signal.SIGKILL)
    ends = finish_survivors(procs)
    assert ends[1][0] == -signal.SIGKILL
    assert ends[0][0] != 0, "rank 0 should fail in its collective after rank 1's death"
    log.append("rank 1 killed holding step 3; rank 0 exited %d (%s)" % ends[0])
    assert (committed_step(store, 0), committed_step(store, 1)) == (4, 3), \
        "the stores should be one step apart"

    # 2. Random instants inside a step (uniform over the reference run's median step
    # duration), of rank 0 then rank 1; each launch first resumes (the first one rolling rank
    # 0 back to step 3).
    seed = 11
    rng = random.Random(seed)
    dur = step_seconds(tmp_path, "ref", 0)
    log.append("seed %d, median step %.4f s" % (seed, dur))
    for victim, kill_at in ((0, 5), (1, 8)):
        name = "kill%d" % victim
        delay = rng.uniform(0.0, dur)
        procs = launch(tmp_path, name, store)
        got_in = wait_until("rank %d to enter step %d" % (victim, kill_at),
                            lambda: entered(tmp_path, name, victim, kill_at), procs)
        if got_in:
            time.sleep(delay)
            procs[victim].send_signal(signal.SIGKILL)
        ends = finish_survivors(procs)
        log.append("rank %d killed %.4f s into step %d: exits %s, stores at %s" % (
            victim, delay, kill_at, [e[0] for e in ends],
            [committed_step(store, r) for r in range(WORLD)]))
        assert got_in and ends[victim][0] == -signal.SIGKILL, log[-1]
        if victim == 0:
            first = progress(tmp_path, name, 0)[0]
            assert first[:2] == ["resumed", "3"], first
            assert json.loads(first[2]) == {"step": 3, "ranks": [0], "steps": [4, 3]}, first

    got = run_to_end(tmp_path, "end", store)
    print("\n  " + "\n  ".join(log))
    for r in range(WORLD):
        for i, (a, b) in enumerate(zip(ref[r], got[r])):
            assert torch.equal(a, b), "rank %d: parameter %d differs from the uninterrupted " \
                                      "run after the kills:\n  %s" % (r, i, "\n  ".join(log))
