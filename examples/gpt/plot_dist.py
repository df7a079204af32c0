#!/usr/bin/python3
"""Plots train_gpt_dist.py runs on one figure: the training loss per iteration of every run,
each run's |loss - first run's loss|, and the median time split of each rank (log scale).

    python3 examples/gpt/plot_dist.py --out dist.png 1rank=w1/summary.json 2ranks=w2/summary.json

Each positional argument is LABEL=SUMMARY (a summary.json written by train_gpt_dist.py); the
first is the reference of the difference panel. Prints the figures it plots as a markdown table.
"""

import argparse
import json
import sys
from pathlib import Path

PHASES = (("forward", "forward"), ("backward", "backward"),
          ("reduce_scatter", "reduce-scatter"), ("kit_step", "kit step"),
          ("all_gather", "all-gather"), ("exposed_host", "exposed host"))


def load(spec):
    label, sep, path = spec.partition("=")
    if not sep:
        sys.exit("plot_dist.py: expected LABEL=SUMMARY, found {!r}".format(spec))
    with open(path) as f:
        return label, json.load(f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the PNG to write")
    ap.add_argument("runs", nargs="+", metavar="LABEL=SUMMARY")
    args = ap.parse_args(argv)
    runs = [load(s) for s in args.runs]

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, mid, bottom) = plt.subplots(3, 1, figsize=(9, 10),
                                           gridspec_kw={"height_ratios": [3, 1.3, 2.6]})
    mid.sharex(top)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    ref = runs[0][1]["loss"]
    for i, (label, s) in enumerate(runs):
        its = range(s["first_iteration"], s["first_iteration"] + len(s["loss"]))
        top.plot(list(its), s["loss"], label="{} (final {:.4f})".format(label, s["loss"][-1]),
                 lw=2.2 if i == 0 else 1.1, ls="-" if i == 0 else "--", color=colors[i % 5])
        if i:
            pts = [(it, abs(a - b)) for it, a, b in zip(its, s["loss"], ref) if a != b]
            if pts:
                mid.plot(*zip(*pts), ls="none", marker=".", color=colors[i % 5],
                         label="{} − {}".format(label, runs[0][0]))
    c = runs[0][1]["config"]
    top.set_title("char-level GPT, {:,} parameters, {}, global batch {}; csdkit.torch."
                  "distributed.AdamW,\n{} emulated CSDs per rank".format(
                      runs[0][1]["parameters"], c["dtype"], c["batch"], c["devices"]),
                  fontsize=10)
    top.set_ylabel("training loss (nats/char)")
    top.legend()
    top.grid(alpha=0.3)
    mid.set_yscale("log")
    mid.set_ylabel("|Δ loss| (equal: not drawn)")
    mid.set_xlabel("iteration")
    mid.grid(alpha=0.3)
    if mid.get_legend_handles_labels()[0]:
        mid.legend(fontsize=8)

    bars = [(label, s, r, m) for label, s in runs
            for r, m in enumerate(s["median_seconds_per_rank"])]
    width = 0.8 / len(bars)
    rows = []
    for j, (label, s, r, m) in enumerate(bars):
        xs = [k + (j - (len(bars) - 1) / 2) * width for k in range(len(PHASES))]
        ys = [1e3 * m[key] if m[key] else 0.0 for key, _ in PHASES]
        bottom.bar(xs, ys, width=width, label="{}, rank {}".format(label, r),
                   color=colors[[x[0] for x in runs].index(label) % 5],
                   alpha=1.0 - 0.45 * (r / max(1, s["world_size"] - 1)) if s["world_size"] > 1
                   else 1.0, edgecolor="black", lw=0.4)
        rows.append((label, r, ys, 1e3 * m["step"], 1e3 * m["iteration"]))
    bottom.set_xticks(range(len(PHASES)))
    bottom.set_xticklabels([name for _, name in PHASES])
    bottom.set_yscale("log")
    bottom.set_ylabel("median ms per iteration")
    bottom.grid(alpha=0.3, axis="y")
    bottom.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print("| run | rank | " + " | ".join(n for _, n in PHASES) + " | step | iteration |")
    print("|---|---:|" + "---:|" * (len(PHASES) + 2))
    for label, r, ys, step, it in rows:
        print("| {} | {} | {} | {:.1f} | {:.1f} |".format(
            label, r, " | ".join("{:.1f}".format(y) for y in ys), step, it))
    print("wrote {}".format(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
