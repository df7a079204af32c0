#!/usr/bin/python3
"""State-format quality study: does the GPT of train_gpt.py train as well with the optimizer
state compressed on the devices (docs/state-formats.md: q8, q8-bf16) as with binary32 state,
when pretrained and when fine-tuned, and does Top-K 2 % with error feedback fine-tune as well
as dense gradients?

Two phases, every run one train_gpt.py subprocess (--no-torch) with the same seed, so that the
runs of a phase start from the same weights and see the same batches in the same order:

  pretrain  the corpus of train_gpt.py (--corpus, default Debian's common licenses) from random
            weights, --iters iterations, with state fp32 / q8 / q8-bf16; the vocabulary
            covers the fine-tuning corpus too (--vocab-corpus), so one model serves both phases;
            the fp32 run's model is saved;
  finetune  that model trained further on --finetune-corpus (a different text), --finetune-iters
            iterations at --finetune-lr, with state fp32 / q8 / q8-bf16, and with Top-K 2 % +
            error feedback (fp32 state).

Each variant is compared with the fp32 run of its phase. The bounds (BOUNDS, below) were fixed
before anything was measured. The script writes to --out:

  <variant>/         train_gpt.py's output of each run (summary.json, loss.png)
  <variant>.log      its standard output and error
  pretrained.pt      the fp32 pretraining run's model (train_gpt.py --save-model)
  loss.png           the loss curves of both phases and each variant's gap to fp32
  state_quality.md   the table (also printed); state_quality.json: everything in it

Exit status: 0 when every bounded variant holds its bound, 1 when one does not (or a reference
run failed train_gpt.py's own check), 2 when the study could not be made.

    /usr/bin/python3 examples/gpt/state_quality.py --out sq-out --finetune-corpus DIR --device cuda

See examples/gpt/README.md, "State-format quality study".
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality  # noqa: E402  (the Top-K study: its runner and helpers)

TRAIN = quality.TRAIN

# The largest accepted relative gap of a variant's loss above its phase's fp32 run, for the
# final training loss (mean of the last tenth of the iterations, the same batches for every
# variant) and for the held-out loss (the same batches for every variant) alike. A variant
# below fp32 passes.
#
# q8 1 %, q8-bf16 2 %, Top-K 2 % + error feedback on fine-tuning 1 %: the bounds, set
# from what the literature reports at scale — bitsandbytes' 8-bit blockwise Adam matches
# 32-bit Adam on 1.5B-parameter LM pretraining and GLUE fine-tuning (Dettmers et al., ICLR'22);
# bf16 weights with stochastic rounding come within -0.1 / +0.2 % of fp32 on seven tasks
# (Zamirai et al., "Revisiting BFloat16 Training"), a looser 2 % since a small model's bf16
# weights lose more per step; the paper's Top-K fine-tuning (MNLI 89.50 vs 89.60) is within
# 0.1 %. They were fixed before the first run of this script and are not moved to fit a
# measurement: a variant that exceeds its bound is reported with its cause.
BOUNDS = {
    ("pretrain", "q8"): 0.01,
    ("pretrain", "q8-bf16"): 0.02,
    ("finetune", "q8"): 0.01,
    ("finetune", "q8-bf16"): 0.02,
    ("finetune", "topk2-ef"): 0.01,
}

PHASES = ("pretrain", "finetune")
# Per phase: (variant, train_gpt.py options). The first is the phase's reference.
VARIANTS = {
    "pretrain": (("fp32", ["--state", "fp32"]), ("q8", ["--state", "q8"]),
                 ("q8-bf16", ["--state", "q8-bf16"])),
    "finetune": (("fp32", ["--state", "fp32"]), ("q8", ["--state", "q8"]),
                 ("q8-bf16", ["--state", "q8-bf16"]),
                 ("topk2-ef", ["--state", "fp32", "--compress", "topk:0.02"])),
}

# Options passed to every run unchanged (train_gpt.py's defaults apply when not given).
PASS_THROUGH = (("--devices", int), ("--seed", int), ("--batch", int), ("--weight-decay", float))
# The model's shape: given to the pretraining runs (fine-tuning takes it from the model file).
SHAPE = (("--layers", int), ("--d-model", int), ("--heads", int), ("--context", int))


def die(message):
    """Refuses to go on: the message on stderr, exit status 2 (1 is the bounds')."""
    print("state_quality.py: " + message, file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="State-format quality study: train_gpt.py's GPT pretrained and fine-tuned "
                    "with fp32, q8 and q8-bf16 optimizer state (and Top-K 2 %% + EF on "
                    "fine-tuning); loss curves, a table of the gaps to fp32, bounds.")
    ap.add_argument("--out", type=Path, default=Path("state-quality-out"),
                    help="output directory, absent or empty (default state-quality-out)")
    ap.add_argument("--finetune-corpus", type=Path, required=True,
                    help="the fine-tuning text: a directory of files other than the "
                         "pretraining corpus")
    ap.add_argument("--corpus", type=Path, default=None,
                    help="the pretraining text (train_gpt.py --corpus; default its own)")
    ap.add_argument("--iters", type=int, default=2000,
                    help="pretraining iterations per run (default 2000)")
    ap.add_argument("--finetune-iters", type=int, default=600,
                    help="fine-tuning iterations per run (default 600)")
    ap.add_argument("--lr", type=float, default=1e-3, help="pretraining peak LR (default 1e-3)")
    ap.add_argument("--finetune-lr", type=float, default=3e-4,
                    help="fine-tuning peak LR (default 3e-4)")
    quality.add_runner_options(ap)
    for opt, kind in PASS_THROUGH + SHAPE:
        ap.add_argument(opt, type=kind, default=None, help="passed to train_gpt.py")
    args = ap.parse_args(argv)
    for name in ("iters", "finetune_iters", "jobs"):
        if getattr(args, name) < 1:
            ap.error("--{}: expected a value >= 1, found {}".format(
                name.replace("_", "-"), getattr(args, name)))
    for name in ("lr", "finetune_lr"):
        if not getattr(args, name) > 0:
            ap.error("--{}: expected a value > 0, found {}".format(
                name.replace("_", "-"), getattr(args, name)))
    if not args.finetune_corpus.is_dir():
        ap.error("--finetune-corpus {}: expected a directory, found none".format(
            args.finetune_corpus))
    if args.store is not None and args.store.resolve() == args.out.resolve():
        ap.error("--store {}: expected a directory other than --out, found the same"
                 .format(args.store))
    return args


def run_name(phase, variant):
    return "{}-{}".format(phase, variant)


def command(args, phase, variant, options):
    name = run_name(phase, variant)
    iters = args.iters if phase == "pretrain" else args.finetune_iters
    cmd = [sys.executable, str(TRAIN), "--out", str(args.out / name), "--no-torch",
           "--iters", str(iters), "--device", args.device, "--log-every", "0",
           "--lr", repr(args.lr if phase == "pretrain" else args.finetune_lr)] + options
    if args.store is not None:
        cmd += ["--store", str(args.store / name)]
    for opt, _ in PASS_THROUGH + (SHAPE if phase == "pretrain" else ()):
        value = getattr(args, opt[2:].replace("-", "_"))
        if value is not None:
            cmd += [opt, str(value)]
    if phase == "pretrain":
        if args.corpus is not None:
            cmd += ["--corpus", str(args.corpus)]
        cmd += ["--vocab-corpus", str(args.finetune_corpus)]
        if variant == "fp32":
            cmd += ["--save-model", str(args.out / "pretrained.pt")]
    else:
        cmd += ["--corpus", str(args.finetune_corpus), "--init", str(args.out / "pretrained.pt")]
    return cmd


def analyse(args, phase, done):
    """The rows of one phase (dicts), read from every run's summary.json."""
    iters = args.iters if phase == "pretrain" else args.finetune_iters
    w = quality.tail_window(iters)
    rows = []
    for variant, _ in VARIANTS[phase]:
        name = run_name(phase, variant)
        s = json.loads((args.out / name / "summary.json").read_text())
        losses = s["loss"]["csdkit"]
        per_step = s["csdkit_bytes_per_step"]
        rows.append(dict(
            phase=phase, variant=variant, name=name, exit_status=done[name][0],
            seconds=done[name][1], losses=losses, parameters=s["parameters"],
            final_train_loss=statistics.fmean(losses[-w:]),
            held_out_loss=s["held_out_loss"]["csdkit"],
            device_bytes_per_param=(per_step.get("ssd_to_fpga", 0.0) +
                                    per_step.get("fpga_to_ssd", 0.0)) / s["parameters"],
            kit_step_seconds=s["mean_seconds_per_iteration"]["csdkit"].get("step"),
            bound=BOUNDS.get((phase, variant)), check=s["check"]))
    ref = rows[0]
    for r in rows:
        for key in ("final_train_loss", "held_out_loss"):
            r[key + "_gap_rel"] = (r[key] - ref[key]) / ref[key]
        r["worst_gap_rel"] = max(r["final_train_loss_gap_rel"], r["held_out_loss_gap_rel"])
        r["passed"] = None if r["bound"] is None else r["worst_gap_rel"] <= r["bound"]
    return rows


def table(rows, args):
    lines = ["| phase | variant | final training loss | gap vs fp32 | held-out loss | gap vs fp32 "
             "| bound | verdict | SSD↔FPGA bytes/param/step |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        ref = r["variant"] == "fp32"
        gap = (lambda k: "–") if ref else (lambda k: "{:+.2f} %".format(100 * r[k + "_gap_rel"]))
        lines.append("| {} | {} | {:.4f} | {} | {:.4f} | {} | {} | {} | {:.2f} |".format(
            r["phase"], r["variant"], r["final_train_loss"], gap("final_train_loss"),
            r["held_out_loss"], gap("held_out_loss"),
            "–" if r["bound"] is None else "{:g} %".format(100 * r["bound"]),
            "–" if r["passed"] is None else ("ok" if r["passed"] else "EXCEEDED"),
            r["device_bytes_per_param"]))
    return "\n".join(lines)


def plot(path, rows, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"fp32": "black", "q8": "tab:blue", "q8-bf16": "tab:orange",
               "topk2-ef": "tab:red"}
    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5), sharex="col",
                             gridspec_kw={"height_ratios": [3, 2]})
    for col, phase in enumerate(PHASES):
        prow = [r for r in rows if r["phase"] == phase]
        w = quality.tail_window(len(prow[0]["losses"]))
        ref = quality.moving_mean(prow[0]["losses"], w)
        top, bottom = axes[0][col], axes[1][col]
        for r in prow:
            its = range(len(r["losses"]))
            mm = quality.moving_mean(r["losses"], w)
            top.plot(its, mm, color=colours[r["variant"]], lw=1.4, label=r["variant"])
            if r["variant"] != "fp32":
                bottom.plot(its, [100 * (a - b) / b for a, b in zip(mm, ref)],
                            color=colours[r["variant"]], lw=1.3, label=r["variant"])
        bottom.axhline(0.0, color="black", lw=0.8)
        for (ph, variant), b in BOUNDS.items():
            if ph == phase:
                bottom.axhline(100 * b, color=colours[variant], lw=0.8, ls="--")
        top.set_title("{}: {:,} parameters, {} iterations".format(
            phase, prow[0]["parameters"], len(prow[0]["losses"])))
        top.set_ylabel("training loss (nats/char), mean of {}".format(w))
        top.legend()
        top.grid(alpha=0.3)
        bottom.set_ylabel("gap to fp32 (%); dashed: bounds")
        bottom.set_xlabel("iteration (every variant sees the same batches)")
        bottom.legend(fontsize=8)
        bottom.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    quality.die = die  # refusals of the shared helpers exit as this script's
    quality.prepare_dir("--out", args.out)
    if args.store is not None:
        quality.prepare_dir("--store", args.store)
    t0 = time.perf_counter()
    rows = []
    for phase in PHASES:
        done = quality.run_jobs(args, [(run_name(phase, v), command(args, phase, v, o))
                                       for v, o in VARIANTS[phase]])
        failed = {n: st for n, (st, _) in done.items() if st not in (0, 1)}
        if failed:
            die("runs that did not complete: {} (expected exit status 0 or 1 from "
                "train_gpt.py); see the .log files in {}".format(
                    ", ".join("{} (exit status {})".format(n, st) for n, st in failed.items()),
                    args.out))
        rows += analyse(args, phase, done)
    wall = time.perf_counter() - t0
    bounded = [r for r in rows if r["bound"] is not None]
    refs = [r for r in rows if r["variant"] == "fp32"]
    ok = all(r["passed"] for r in bounded) and all(r["exit_status"] == 0 for r in refs)
    verdicts = ["{} {}: {:+.2f} % (bound {:g} %) {}".format(
        r["phase"], r["variant"], 100 * r["worst_gap_rel"], 100 * r["bound"],
        "ok" if r["passed"] else "EXCEEDED") for r in bounded]
    verdicts += ["the {} fp32 run failed train_gpt.py's check ({})".format(
        r["phase"], r["check"]["kind"]) for r in refs if r["exit_status"] != 0]
    text = ("{}\n\nLargest relative gap of each variant (final training loss = mean of the "
            "last tenth of the iterations; held-out loss): {}.\n\nPretraining: {} iterations "
            "at peak LR {:g}; fine-tuning on {}: {} iterations at peak LR {:g}, from the fp32 "
            "pretraining run's model. Same seed and batches within a phase; {:,} parameters. "
            "Study wall time {:.0f} s ({} job(s)).\n".format(
                table(rows, args), "; ".join(verdicts), args.iters, args.lr,
                args.finetune_corpus, args.finetune_iters, args.finetune_lr,
                rows[0]["parameters"], wall, args.jobs))
    print("\n" + text)
    (args.out / "state_quality.md").write_text(text)
    plot(args.out / "loss.png", rows, args)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    with open(args.out / "state_quality.json", "w") as f:
        json.dump({"config": config, "bounds": {"{} {}".format(*k): b
                                                for k, b in BOUNDS.items()},
                   "passed": ok, "wall_seconds": wall, "runs": rows}, f, indent=1)
    print("wrote {}, {} and {}".format(args.out / "loss.png", args.out / "state_quality.md",
                                      args.out / "state_quality.json"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
