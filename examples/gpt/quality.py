#!/usr/bin/python3
"""Top-K quality study: the small GPT of train_gpt.py trained with dense gradients and with
Top-K gradients (2 % and 1 % of each subgroup, with and without error feedback).

Every variant is one run of train_gpt.py (a subprocess, --no-torch) with the same seed, so
they all start from the same initial weights and see the same batches in the same order; the
only difference between them is what the kit receives as the gradient. "dense" is
csdkit.torch.AdamW with dense gradients, which follows torch.optim.AdamW to rounding
(train_gpt.py checks that). The script writes to --out:

  <variant>/        train_gpt.py's output of each run (summary.json, loss.png; the store is
                    removed when the run is done unless --keep-stores);
  <variant>.log     its standard output and error;
  loss.png          all training-loss curves, and each variant's gap to dense;
  quality.md        the table (also printed);
  quality.json      everything in the table, the loss curves, the bound and the verdict.

Exit status: 0 when Top-K 2 % with error feedback is within GAP_BOUND_REL of dense (both gaps,
see below), 1 when it is not (or when it or the dense run failed train_gpt.py's own check), 2
when the study could not be made (bad options, a non-empty --out, a run that refused or
crashed).

    /usr/bin/python3 examples/gpt/quality.py --out quality-out

See examples/gpt/README.md.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TRAIN = Path(__file__).resolve().parent / "train_gpt.py"

# (name, Top-K ratio or None for dense, error feedback). The first is the reference.
VARIANTS = (
    ("dense", None, True),
    ("topk2-ef", 0.02, True),
    ("topk2-noef", 0.02, False),
    ("topk1-ef", 0.01, True),
    ("topk1-noef", 0.01, False),
)
CHECKED = "topk2-ef"  # the variant held to the bound

# The gap accepted for Top-K 2 % with error feedback: its loss may be at most 3 % above
# dense's, relative, both for the final training loss (mean of the last tenth of the
# iterations, the same batches for every variant) and for the held-out loss (the same 8
# batches for every variant).
#
# Why not 0: error feedback delays the part of the gradient that Top-K does not send rather
# than dropping it, and a run of a few hundred steps ends while part of it is still waiting, so
# a short run is expected to lag dense somewhat even when compression works.
#
# Why 3 %: the published Top-K runs with error feedback that train to the end of a full
# schedule report final quality within about 1 % of dense or better (Stich et al. 2018,
# "Sparsified SGD with memory"; Lin et al. 2018, "Deep Gradient Compression", at 0.1 %
# density with momentum correction and a sparsity warm-up; both with SGD, not Adam); this
# allows three times that for a short run. In this model's units, 3 % of a final loss of about 2.5
# nats/char is 0.075 nats/char, i.e. the compressed model gives the right next character on
# average exp(-0.075) = 93 % of the probability the dense one gives it: close, not equal. A
# larger bound would accept a run whose loss curve is visibly behind dense's for most of its
# length, which is not what "trains as well as dense" means.
#
# The bound was set before looking at the default-size study and was not moved to fit any
# measurement. Measured on this 2-core machine on a smaller model (--layers 2 --d-model 128,
# 150 iterations, seed 0): Top-K 2 % + EF was 11.3 % (training) and 8.4 % (held-out) above
# dense, and did worse than 2 % without EF (7.4 % and 4.4 %); see README.md.
GAP_BOUND_REL = 0.03

# Options passed through to train_gpt.py unchanged (its defaults apply when not given).
PASS_THROUGH = (("--devices", int), ("--seed", int), ("--batch", int), ("--dtype", str),
                ("--lr", float), ("--weight-decay", float), ("--layers", int),
                ("--d-model", int), ("--heads", int), ("--context", int))


def die(message):
    """Refuses to go on: the message on stderr, exit status 2 (1 is the bound's)."""
    print("quality.py: " + message, file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Top-K quality study: train_gpt.py's GPT with dense gradients and with "
                    "Top-K 2 % and 1 % with and without error feedback, same data and seed; "
                    "loss curves, a table of the gaps to dense, and a check of Top-K 2 % with "
                    "error feedback against GAP_BOUND_REL ({:g} %).".format(100 * GAP_BOUND_REL))
    ap.add_argument("--iters", type=int, default=200,
                    help="iterations per run (default 200)")
    ap.add_argument("--out", type=Path, default=Path("quality-out"),
                    help="output directory, absent or empty (default quality-out)")
    add_runner_options(ap)
    for opt, kind in PASS_THROUGH:
        choices = ("bfloat16", "float32") if opt == "--dtype" else None
        ap.add_argument(opt, type=kind, default=None, choices=choices,
                        help="passed to train_gpt.py")
    args = ap.parse_args(argv)
    for name in ("iters", "jobs"):
        if getattr(args, name) < 1:
            ap.error("--{}: expected a value >= 1, found {}".format(name, getattr(args, name)))
    if args.store is not None and args.store.resolve() == args.out.resolve():
        ap.error("--store {}: expected a directory other than --out, found the same"
                 .format(args.store))
    return args


def add_runner_options(ap):
    """The options of how the study's runs are made (run_jobs reads them): --device, --jobs,
    --store, --keep-stores. state_quality.py takes them too."""
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where the model lives (train_gpt.py --device; default cpu)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="variants run at the same time, in separate processes (default 1)")
    ap.add_argument("--store", type=Path, default=None,
                    help="parent of the runs' stores, absent or empty (default: each run's "
                         "<out>/<variant>/store); the store of a variant is <store>/<variant>")
    ap.add_argument("--keep-stores", action="store_true",
                    help="keep each run's store (by default it is removed once the run is done)")


def prepare_dir(option, path):
    """train_gpt.py's rule for an output directory (absent or empty; nothing deleted or
    overwritten), refusing as this script does."""
    sys.path.insert(0, str(TRAIN.parent))
    import train_gpt  # noqa: E402  (imported here: the study itself runs it as subprocesses)
    train_gpt.prepare_dir(option, path, fail=die)


def command(args, name, ratio, error_feedback):
    cmd = [sys.executable, str(TRAIN), "--out", str(args.out / name), "--no-torch",
           "--iters", str(args.iters), "--device", args.device, "--log-every", "0"]
    if args.store is not None:
        cmd += ["--store", str(args.store / name)]
    for opt, _ in PASS_THROUGH:
        value = getattr(args, opt[2:].replace("-", "_"))
        if value is not None:
            cmd += [opt, str(value)]
    if ratio is not None:
        cmd += ["--compress", "topk:{:g}".format(ratio)]
        if not error_feedback:
            cmd.append("--no-error-feedback")
    return cmd


def run_all(args):
    """Runs every variant, --jobs at a time; returns {name: (exit status, seconds)}."""
    return run_jobs(args, [(name, command(args, name, ratio, ef))
                           for name, ratio, ef in VARIANTS])


def run_jobs(args, jobs):
    """Runs the commands of `jobs` ((name, argv) pairs; output to <out>/<name>.log), --jobs at
    a time, removing each finished run's store unless --keep-stores; returns {name: (exit
    status, seconds)}. state_quality.py runs its variants with it too."""
    env = dict(os.environ)
    if args.jobs > 1 and "OMP_NUM_THREADS" not in env:
        # Share the cores between the runs instead of letting each take them all.
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // args.jobs))
    pending = list(jobs)
    running, done = {}, {}
    while pending or running:
        while pending and len(running) < args.jobs:
            name, argv = pending.pop(0)
            log = open(args.out / (name + ".log"), "w")
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
            running[name] = (proc, log, time.perf_counter())
            print("started {} ({})".format(name, " ".join(proc.args[2:])), flush=True)
        time.sleep(0.2)
        for name in [n for n, (p, _, _) in running.items() if p.poll() is not None]:
            proc, log, t0 = running.pop(name)
            log.close()
            done[name] = (proc.returncode, time.perf_counter() - t0)
            print("finished {}: exit status {}, {:.1f} s".format(name, proc.returncode,
                                                                 done[name][1]), flush=True)
            if not args.keep_stores and proc.returncode in (0, 1):
                remove_store(args, name)
    return done


def remove_store(args, name):
    """Removes a finished run's store: the files the kit created in a directory that
    train_gpt.py required to be absent or empty."""
    import shutil
    store = (args.store / name) if args.store is not None else (args.out / name / "store")
    if store.is_dir():
        shutil.rmtree(store)


def tail_window(iters):
    """Iterations averaged for the final training loss: the last tenth (at least one)."""
    return max(1, iters // 10)


def moving_mean(xs, w):
    out, acc = [], 0.0
    for i, x in enumerate(xs):
        acc += x
        if i >= w:
            acc -= xs[i - w]
        out.append(acc / min(i + 1, w))
    return out


def analyse(args, done):
    """Reads every run's summary.json; returns the rows of the table (dicts)."""
    w = tail_window(args.iters)
    rows = []
    for name, ratio, ef in VARIANTS:
        s = json.loads((args.out / name / "summary.json").read_text())
        losses = s["loss"]["csdkit"]
        per_step = s["csdkit_bytes_per_step"]
        rows.append(dict(
            name=name, ratio=ratio, error_feedback=ef if ratio is not None else None,
            exit_status=done[name][0], seconds=done[name][1], losses=losses,
            final_train_loss=statistics.fmean(losses[-w:]),
            held_out_loss=s["held_out_loss"]["csdkit"],
            gradient_bytes_per_param=per_step.get("host_to_device", 0.0) / s["parameters"],
            shared_bytes_per_param=s["shared_link_bytes_per_parameter_per_step"],
            parameters=s["parameters"], check=s["check"]))
    dense = rows[0]
    for r in rows:
        for key in ("final_train_loss", "held_out_loss"):
            gap = r[key] - dense[key]
            r[key + "_gap"] = gap
            r[key + "_gap_rel"] = gap / dense[key]
    return rows


def label(r):
    if r["ratio"] is None:
        return "dense"
    return "Top-K {:g} %{}".format(100 * r["ratio"],
                                   " + EF" if r["error_feedback"] else ", no EF")


def table(rows, args):
    w = tail_window(args.iters)
    lines = [
        "| variant | final training loss (mean of last {}) | gap vs dense | held-out loss | "
        "gap vs dense | gradients out, bytes/param/step | shared link, bytes/param/step |"
        .format(w),
        "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        def gap(key):
            if r is rows[0]:
                return "–"
            return "{:+.4f} ({:+.2f} %)".format(r[key + "_gap"], 100 * r[key + "_gap_rel"])
        lines.append("| {} | {:.4f} | {} | {:.4f} | {} | {:.3f} | {:.3f} |".format(
            label(r), r["final_train_loss"], gap("final_train_loss"), r["held_out_loss"],
            gap("held_out_loss"), r["gradient_bytes_per_param"], r["shared_bytes_per_param"]))
    return "\n".join(lines)


def plot(path, rows, args, bound_abs):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w = tail_window(args.iters)
    colours = ("black", "tab:blue", "tab:cyan", "tab:red", "tab:orange")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.5, 7.5), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
    dense = moving_mean(rows[0]["losses"], w)
    for r, c in zip(rows, colours):
        its = range(len(r["losses"]))
        top.plot(its, r["losses"], color=c, lw=0.6, alpha=0.3)
        mm = moving_mean(r["losses"], w)
        top.plot(its, mm, color=c, lw=1.6, label=label(r))
        if r is not rows[0]:
            bottom.plot(its, [a - b for a, b in zip(mm, dense)], color=c, lw=1.4,
                        label=label(r))
    bottom.axhline(0.0, color="black", lw=0.8)
    bottom.axhline(bound_abs, color="gray", lw=0.8, ls="--",
                   label="bound for Top-K 2 % + EF ({:g} % of dense)".format(
                       100 * GAP_BOUND_REL))
    top.set_ylabel("training loss (nats/char)\nfaint: per batch; solid: mean of {}".format(w))
    top.set_title("char-level GPT, {:,} parameters, {} iterations: dense vs Top-K".format(
        rows[0]["parameters"], args.iters))
    top.legend()
    top.grid(alpha=0.3)
    bottom.set_ylabel("gap to dense (nats/char,\nmeans of {} iterations)".format(w))
    bottom.set_xlabel("iteration (every variant sees the same batches)")
    bottom.legend(fontsize=8)
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    prepare_dir("--out", args.out)
    if args.store is not None:
        prepare_dir("--store", args.store)
    t0 = time.perf_counter()
    done = run_all(args)
    failed = {n: st for n, (st, _) in done.items() if st not in (0, 1)}
    if failed:
        logs = ", ".join(str(args.out / (n + ".log")) for n in failed)
        die("runs that did not complete: {} (expected exit status 0 or 1 from train_gpt.py); "
            "see {}".format(", ".join("{} (exit status {})".format(n, st)
                                      for n, st in failed.items()), logs))
    wall = time.perf_counter() - t0
    rows = analyse(args, done)
    checked = next(r for r in rows if r["name"] == CHECKED)
    worst = max(checked["final_train_loss_gap_rel"], checked["held_out_loss_gap_rel"])
    # A gap to a dense run that did not learn says nothing, so that run must pass its check.
    ok = rows[0]["exit_status"] == 0 and checked["exit_status"] == 0 and worst <= GAP_BOUND_REL
    md = table(rows, args)
    verdict = ("Top-K 2 % + EF: largest relative gap {:+.2f} % (bound {:g} %): {}".format(
        100 * worst, 100 * GAP_BOUND_REL, "ok" if ok else "EXCEEDED"))
    for r in (rows[0], checked):
        if r["exit_status"] != 0:
            verdict += "; the {} run failed train_gpt.py's check ({})".format(
                r["name"], r["check"]["kind"])
    text = ("{}\n\n{}\n\nAll runs: {} iterations, the same seed and batches; {:,} parameters. "
            "Final training loss: mean over the last {} iterations. Study wall time {:.0f} s "
            "({} job(s)).\n".format(md, verdict, args.iters, rows[0]["parameters"],
                                    tail_window(args.iters), wall, args.jobs))
    print("\n" + text)
    (args.out / "quality.md").write_text(text)
    plot(args.out / "loss.png", rows, args, GAP_BOUND_REL * rows[0]["final_train_loss"])
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    with open(args.out / "quality.json", "w") as f:
        json.dump({"config": config, "tail_window": tail_window(args.iters),
                   "bound": {"variant": CHECKED, "gap_rel": GAP_BOUND_REL,
                             "worst_gap_rel": worst, "passed": ok},
                   "wall_seconds": wall, "variants": rows}, f, indent=1)
    print("wrote {}, {} and {}".format(args.out / "loss.png", args.out / "quality.md",
                                      args.out / "quality.json"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
