"""The example programs of examples/integrations/ (Hugging Face Trainer, Accelerate, Lightning,
torch.compile in a plain loop), run as subprocesses with this interpreter, each with
torch.optim.AdamW and with csdkit.torch.AdamW (2 emulated devices):

(a) the trainer features test_integrations.py does not cover -- gradient accumulation
    (Accelerate, Lightning), Trainer(optimizer_cls_and_kwargs=...), torch.compile -- train as
    with torch.optim: 20 steps, same weights and batches; the bound, fixed before measuring and
    shared with test_integrations.py: the mean of the kit's last 5 losses within LOSS_BOUND
    (1e-3, relative) of torch.optim's. On CUDA with bf16 autocast where there is a GPU, else on
    CPU in float32.

(b) kill and resume through the trainer's own checkpointing: an uninterrupted run of N steps
    with a checkpoint every K steps, against a run killed with SIGKILL (exit status -9) right
    after step S, which is then resumed from the trainer's latest checkpoint (step K' = S // K
    * K < S) and run to N. The kit's store commits every step, so after the kill it is at step
    S while the checkpoint is at K'; resuming, the trainer hands the checkpoint's optimizer
    state to load_state_dict(), which imports it into the store as its committed step
    (rewinding it). Checked: every weight tensor of the two runs bit for bit equal
    (torch.equal), the losses of steps K'+1 .. N equal, the store at N. With torch.optim as
    the control: it shows that the trainer's resume itself reproduces the run. On CPU even
    where there is a GPU (deterministic there).

Each test is skipped, with the reason, where its trainer (or torch >= 2.0 for torch.compile)
is not installed; the CI machine (torch 1.13, none of the trainers) runs the plain-loop kill
and resume (compiled.py --no-compile), the option parsing of every script, and the round-trip
check below. The GPU machine runs all (docs/integrations.md).
"""

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import csdkit
import csdkit.torch as ct
from conftest import DEVICES, loss_of, make_data, make_model
from test_integrations import STEPS, compare

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "integrations"
SCRIPTS = ("hf_trainer.py", "accelerate_loop.py", "lightning_module.py", "compiled.py")
CUDA = torch.cuda.is_available()
# Kill and resume: N steps, a checkpoint every K, killed after step S (not a checkpoint step).
N, K, S = 12, 4, 6
ACCUMULATE = 2


def need(*modules):
    for m in modules:
        if importlib.util.find_spec(m) is None:
            pytest.skip("{} is not installed (the GPU machine has it; see docs/integrations.md)"
                        .format(m))


def need_lightning():
    need("transformers")
    if all(importlib.util.find_spec(m) is None for m in ("lightning", "pytorch_lightning")):
        pytest.skip("neither lightning nor pytorch_lightning is installed (the GPU machine has "
                    "both; see docs/integrations.md)")


def need_compile():
    if not hasattr(torch, "compile"):
        pytest.skip("torch.compile needs torch >= 2.0, this is torch {}".format(torch.__version__))


def run_example(cwd, script, *args):
    """Runs examples/integrations/<script> with this interpreter in `cwd`; returns the
    CompletedProcess (stdout and stderr as text)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(csdkit.__file__))] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        env.setdefault(var, "1")  # nothing is downloaded: the model is built from its config
    env.setdefault("OMP_NUM_THREADS", "2")  # the same in every run of a comparison
    cmd = [sys.executable, str(EXAMPLES / script)] + [str(a) for a in args]
    return subprocess.run(cmd, cwd=str(cwd), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=600)


def check_exit(proc, killed=False):
    """Exit status 0, or -SIGKILL for a run killed by its --kill-at."""
    expected = -signal.SIGKILL if killed else 0
    if proc.returncode != expected:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        pytest.fail("{} exited with status {}, expected {}:\n{}".format(
            " ".join(proc.args[1:]), proc.returncode, expected, tail))


def results(out):
    return json.loads((out / "losses.json").read_text()), torch.load(out / "weights.pt")


def committed_step(store):
    """The store's committed step, from its manifest (docs/runtime.md)."""
    return json.loads((store / "manifest.json").read_text())["committed_step"]


# -- (a) kit vs torch.optim ------------------------------------------------------------------


def trains_as_torch_optim(tmp_path, script, what, *opts, precision):
    """Runs `script` for STEPS steps with each optimizer (CUDA and `precision` where there is a
    GPU) and compares the losses with the bound."""
    device = ["--device", "cuda", "--precision", precision] if CUDA else ["--device", "cpu"]
    base = ["--steps", STEPS] + device + list(opts)
    ref = run_example(tmp_path, script, "--optimizer", "torch", "--out", tmp_path / "ref", *base)
    check_exit(ref)
    kit = run_example(tmp_path, script, "--optimizer", "kit", "--store", tmp_path / "store",
                      "--out", tmp_path / "kit", *base)
    check_exit(kit)
    (r, _), (k, _) = results(tmp_path / "ref"), results(tmp_path / "kit")
    assert r["steps"] == k["steps"] == list(range(1, STEPS + 1))
    assert k["store_step"] == STEPS, "the kit skipped steps"
    compare(r["losses"], k["losses"], "{} ({} on {})".format(what, r["precision"], r["device"]))


def test_accelerate_accumulation_trains_as_torch_optim(tmp_path):
    """Accelerator(gradient_accumulation_steps=2) with accelerator.accumulate(): the kit's
    gradient hooks see each micro-batch's backward; its step takes the accumulated (then
    clipped) gradients."""
    need("accelerate", "transformers")
    trains_as_torch_optim(tmp_path, "accelerate_loop.py", "Accelerate, accumulation 2, clip 1.0",
                          "--accumulate", ACCUMULATE, precision="bf16")


def test_lightning_accumulation_trains_as_torch_optim(tmp_path):
    """accumulate_grad_batches=2 with gradient_clip_val=1.0: Lightning runs the accumulating
    micro-batches itself and hands the last one to opt.step(closure=...)."""
    need_lightning()
    trains_as_torch_optim(tmp_path, "lightning_module.py",
                          "Lightning, accumulate_grad_batches 2, gradient_clip_val 1.0",
                          "--accumulate", ACCUMULATE, precision="bf16-mixed")


def test_hf_optimizer_cls_and_kwargs_trains_as_torch_optim(tmp_path):
    """Trainer(optimizer_cls_and_kwargs=(cls, kwargs)): the Trainer builds the optimizer over
    its two param groups (weight decay 0 for biases and LayerNorm weights) with its own
    linear-decay scheduler."""
    need("transformers", "accelerate")
    trains_as_torch_optim(tmp_path, "hf_trainer.py",
                          "HF Trainer, optimizer_cls_and_kwargs, max_grad_norm 1.0",
                          "--hf-optimizer", "cls_and_kwargs", precision="bf16")


def test_compiled_model_trains_as_torch_optim(tmp_path):
    """torch.compile(model) (inductor), then the optimizer over its parameters."""
    need_compile()
    trains_as_torch_optim(tmp_path, "compiled.py", "torch.compile (inductor), clip 1.0",
                          "--compile-backend", "inductor", precision="bf16")


# -- (b) kill and resume ---------------------------------------------------------------------


def kill_and_resume(tmp_path, script, optimizer, what, *opts):
    """The check (b) of the module's docstring for one script and optimizer, on CPU."""
    base = ["--optimizer", optimizer, "--steps", N, "--save-every", K, "--device", "cpu"]
    base += list(opts)
    full, run = tmp_path / "full", tmp_path / "run"

    def store(out):
        return ["--store", out / "store"] if optimizer == "kit" else []

    check_exit(run_example(tmp_path, script, *base, "--out", full, *store(full)))
    check_exit(run_example(tmp_path, script, *base, "--out", run, *store(run), "--kill-at", S),
               killed=True)
    assert not (run / "losses.json").exists(), "the killed run got to its end"
    if optimizer == "kit":
        assert committed_step(run / "store") == S, "the store is not at the step of the kill"
    resumed = run_example(tmp_path, script, *base, "--out", run, *store(run), "--resume")
    check_exit(resumed)

    (a, wa), (b, wb) = results(full), results(run)
    ckpt = S // K * K
    assert a["resumed_from"] is None and b["resumed_from"] == ckpt
    assert a["steps"] == list(range(1, N + 1)) and b["steps"] == list(range(ckpt + 1, N + 1))
    assert b["losses"] == a["losses"][ckpt:], "the losses after the checkpoint differ"
    assert sorted(wa) == sorted(wb)
    differing = [name for name in wa if not torch.equal(wa[name], wb[name])]
    assert not differing, "{} of {} weight tensors differ, first {}".format(
        len(differing), len(wa), differing[0])
    if optimizer == "kit":
        assert a["store_step"] == b["store_step"] == N
    print("\n  {} ({}): killed after step {} (store at {}), resumed from checkpoint {}: "
          "losses of steps {}..{} equal, {} weight tensors bit for bit equal"
          .format(what, optimizer, S, S if optimizer == "kit" else "-", ckpt, ckpt + 1, N,
                  len(wa)))


@pytest.mark.parametrize("optimizer", ["kit", pytest.param("torch", marks=pytest.mark.nightly)])
def test_plain_loop_kill_and_resume(tmp_path, optimizer):
    """compiled.py --no-compile: torch.save checkpoints of the model's and the optimizer's
    state_dict(), resumed with load_state_dict(). Runs wherever torch does (the CI machine:
    the model written out in PyTorch; with transformers installed, its GPT-2)."""
    kill_and_resume(tmp_path, "compiled.py", optimizer, "plain loop", "--no-compile")


@pytest.mark.parametrize("optimizer", ["kit", "torch"])
def test_compiled_model_kill_and_resume(tmp_path, optimizer):
    """compiled.py with torch.compile(backend='aot_eager'): the compiled forward and backward
    graphs as inductor gets them, run by eager kernels (no code generation: seconds, where
    inductor's CPU compile takes tens of seconds per run; the (a) test runs inductor)."""
    need_compile()
    kill_and_resume(tmp_path, "compiled.py", optimizer, "torch.compile", "--compile-backend",
                    "aot_eager")


@pytest.mark.parametrize("optimizer", ["kit", "torch"])
def test_accelerate_kill_and_resume(tmp_path, optimizer):
    """save_state() / load_state() with gradient accumulation 2; the kit's store is resumed
    before prepare() (docs/integrations.md), load_state() rewinds it to the checkpoint."""
    need("accelerate", "transformers")
    kill_and_resume(tmp_path, "accelerate_loop.py", optimizer, "Accelerate", "--accumulate",
                    ACCUMULATE)


@pytest.mark.parametrize("optimizer", ["kit", "torch"])
@pytest.mark.parametrize("hand_over", ["optimizers", "cls_and_kwargs"])
def test_hf_trainer_kill_and_resume(tmp_path, hand_over, optimizer):
    """save_steps and train(resume_from_checkpoint=...), the optimizer handed over as
    optimizers=(opt, sched) (the LambdaLR's state comes back from scheduler.pt) or built by
    the Trainer from optimizer_cls_and_kwargs."""
    need("transformers", "accelerate")
    kill_and_resume(tmp_path, "hf_trainer.py", optimizer, "HF Trainer, " + hand_over,
                    "--hf-optimizer", hand_over)


@pytest.mark.parametrize("optimizer", ["kit", "torch"])
def test_lightning_kill_and_resume(tmp_path, optimizer):
    """ModelCheckpoint(every_n_train_steps=4) and fit(..., ckpt_path=...) with
    accumulate_grad_batches 2."""
    need_lightning()
    kill_and_resume(tmp_path, "lightning_module.py", optimizer, "Lightning", "--accumulate",
                    ACCUMULATE)


# -- what runs everywhere --------------------------------------------------------------------


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_options(tmp_path, script):
    """Every script parses its options without its trainer installed (the trainer is imported
    after them)."""
    proc = run_example(tmp_path, script, "--help")
    assert proc.returncode == 0, proc.stderr
    for option in ("--optimizer", "--store", "--steps", "--out", "--save-every", "--kill-at",
                   "--resume", "--device", "--precision"):
        assert option in proc.stdout


def test_script_refusals(tmp_path):
    """The checks the scripts share (common.check_args): a --kill-at outside the run, a kit
    run without --store, and a --resume with no checkpoint are refused with exit status 2 and
    a message naming the option."""
    out = ["--out", tmp_path / "o", "--no-compile"]
    proc = run_example(tmp_path, "compiled.py", *out, "--optimizer", "torch", "--steps", 5,
                       "--kill-at", 5)
    assert proc.returncode == 2 and "--kill-at: expected a step in 1 .. 4" in proc.stderr, \
        proc.stderr
    proc = run_example(tmp_path, "compiled.py", *out, "--optimizer", "kit")
    assert proc.returncode == 2 and "--store" in proc.stderr, proc.stderr
    proc = run_example(tmp_path, "compiled.py", *out, "--optimizer", "torch", "--resume")
    assert proc.returncode == 2 and "--resume: expected a checkpoint" in proc.stderr, \
        proc.stderr


def test_prepare_round_trip_on_a_store_ahead_of_the_model(tmp_path):
    """What a trainer that resumes through Accelerate does, in one process: a run checkpointed
    (model and optimizer state_dict()) after step 2 goes on to step 5 and dies; the resumed run
    loads the model of step 2, builds the optimizer on the same store (at step 5), goes through
    prepare()'s round trip, opt.load_state_dict(opt.state_dict()), then loads the checkpoint's
    optimizer state and takes steps 3 to 5. Expected: the same weights, bit for bit, as an
    uninterrupted run of 5 steps (the round trip a no-op, the checkpoint's state imported)."""
    x, y = make_data()

    def steps(model, opt, n):
        for _ in range(n):
            opt.zero_grad(set_to_none=True)
            loss_of(model, x, y).backward()
            opt.step()

    ref = make_model()
    with ct.AdamW(ref.parameters(), store=tmp_path / "ref", devices=DEVICES) as opt:
        steps(ref, opt, 5)
    crashed = make_model()
    with ct.AdamW(crashed.parameters(), store=tmp_path / "run", devices=DEVICES) as opt:
        steps(crashed, opt, 2)
        ckpt = ({k: v.clone() for k, v in crashed.state_dict().items()}, opt.state_dict())
        steps(crashed, opt, 3)
    resumed = make_model()
    resumed.load_state_dict(ckpt[0])
    with ct.AdamW(resumed.parameters(), store=tmp_path / "run") as opt:
        opt.load_state_dict(opt.state_dict())  # Accelerate's prepare()
        opt.load_state_dict(ckpt[1])           # the trainer's checkpoint
        assert opt.session.step_count == 2
        steps(resumed, opt, 3)
    for a, b in zip(ref.parameters(), resumed.parameters()):
        assert torch.equal(a, b)
