"""A training script killed with SIGKILL inside optimizer steps, restarted each time, ends with
the same weights, bit for bit, as an uninterrupted run with the same data order: the store is
the checkpoint (committed atomically every step) and resume() puts the model at its step."""

import os
import random
import signal
import subprocess
import sys
import time

import torch

import csdkit

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 14


def run_script(tmp, name, store, kill_at=None, delay=0.0):
    """Runs kill_resume_train.py; with kill_at, SIGKILLs it `delay` s after it enters step
    kill_at. Returns True when it was killed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(csdkit.__file__))] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    progress = tmp / (name + ".progress")
    cmd = [sys.executable, os.path.join(HERE, "kill_resume_train.py"), "--store", str(store),
           "--steps", str(STEPS), "--progress", str(progress), "--out", str(tmp / (name + ".pt"))]
    proc = subprocess.Popen(cmd, env=env)
    if kill_at is None:
        assert proc.wait(timeout=600) == 0
        return False
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if progress.exists() and ("stepping %d\n" % kill_at) in progress.read_text():
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.002)
    assert proc.wait(timeout=600) == 0  # it finished before reaching kill_at: fine
    return False


def test_sigkill_mid_step_then_resume_equals_uninterrupted_run(tmp_path):
    run_script(tmp_path, "ref", tmp_path / "ref_store")
    ref = torch.load(tmp_path / "ref.pt")
    rng = random.Random(7)
    store = tmp_path / "store"
    kills = 0
    for kill_at in (3, 7, 10):
        kills += run_script(tmp_path, "run", store, kill_at, rng.uniform(0.0, 0.03))
    run_script(tmp_path, "run", store)  # to the end
    assert kills >= 2, "the script was not killed inside its steps"
    got = torch.load(tmp_path / "run.pt")
    for i, (a, b) in enumerate(zip(ref, got)):
        assert torch.equal(a, b), "parameter %d differs after %d kills" % (i, kills)
    # The steps the killed runs entered and the committed steps agree with one full run.
    entered = (tmp_path / "run.progress").read_text().split()
    print("\n  killed %d times; steps entered (with repeats after kills): %s"
          % (kills, " ".join(entered[1::2])))
