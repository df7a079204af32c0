"""Plots of a plan written by ``csdkit plan --plot DIR``, which runs this file's text (embedded
at build time) with the interpreter CMake found.

Usage: ``python3 -m csdkit.plan_plot PLAN_JSON OUT_DIR``. Writes OUT_DIR/speedup.png (per mode:
the optimizer step's throughput against the baseline's on the fewest devices, and the
iteration's speedup over the baseline on as many devices, with the paper's published points
when the plan holds the calibration; the iteration at the plan's --overlap level) and
OUT_DIR/breakdown.png (the serial iteration split into forward+backward, gradients out, the
host's gradient fill, optimizer step, the host's weight copy-back and weights in, per mode, at
the largest device count, with a mark at the iteration of each overlap level).
"""
import json
import os
import sys

PHASES = [("fwd_bwd", "forward + backward (GPU)"), ("grad_out", "gradients GPU -> host"),
          ("grad_fill", "host: gradient fill"), ("step", "optimizer step"),
          ("weights_back", "host: weights back"), ("weights_in", "weights host -> GPU")]
# The overlapped iterations marked on the breakdown (csdkit/planner/planner.h, Overlap).
LEVELS = [("iteration_weights", "overlap: weights (runtime today, CUDA params)", ":"),
          ("iteration_grads", "overlap: grads (runtime today, CPU params)", "--"),
          ("iteration_step", "overlap: step, %s shards (issue 26, not implemented)", "-")]
MODE_LABEL = {"baseline": "baseline (ZeRO-Infinity, RAID0)", "smart": "SmartUpdate",
              "handler": "SmartUpdate + handler", "topk": "SmartUpdate + handler + Top-K"}
# Published points of the Smart-Infinity paper (10 SmartSSDs): speedup over the baseline on as
# many devices (ranges drawn as bars), and the baseline's scaling.
PAPER_SPEEDUP = {"smart": (1.54, 1.60), "handler": (1.60, 1.66), "topk": (1.85, 1.98)}


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: plan_plot.py PLAN_JSON OUT_DIR\n")
        return 2
    path, out = argv
    with open(path) as f:
        plan = json.load(f)
    pts = plan.get("points") or []
    if not pts:
        sys.stderr.write("%s: expected a plan with points (a model), found none\n" % path)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = [m for m in MODE_LABEL if any(p["mode"] == m for p in pts)]
    ns = sorted({p["devices"] for p in pts})
    title = "%s, system %s" % (plan["model"]["name"], plan["system"]["name"])
    level = (plan.get("overlap") or {}).get("level", "none")
    if level != "none":
        title += ", overlap %s" % level
    paper = "paper" in plan

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    base1 = [p for p in pts if p["mode"] == "baseline" and p["devices"] == ns[0]]
    for m in modes:
        mp = sorted((p for p in pts if p["mode"] == m), key=lambda p: p["devices"])
        if base1:
            ref = base1[0]["seconds"]["step"]
            a.plot([p["devices"] for p in mp], [ref / p["seconds"]["step"] for p in mp], "o-",
                   label=MODE_LABEL[m])
        if m != "baseline" and all("speedup_vs_baseline" in p for p in mp):
            b.plot([p["devices"] for p in mp], [p["speedup_vs_baseline"] for p in mp], "o-",
                   label=MODE_LABEL[m])
    if paper:
        a.plot([4], [2.25], "k*", markersize=12, label="paper: baseline saturates (~2.25x at 4)")
        for i, (m, (lo, hi)) in enumerate(PAPER_SPEEDUP.items()):
            b.errorbar([10 + 0.15 * i], [(lo + hi) / 2], yerr=[[(hi - lo) / 2], [(hi - lo) / 2]],
                       fmt="k*", markersize=10, capsize=4,
                       label="paper, 10 SSDs" if i == 0 else None)
        b.plot([10.45], [2.11], "kx", markersize=9, label="paper: Top-K on A100")
    a.set_xlabel("devices")
    a.set_ylabel("optimizer steps/s vs baseline on %d device(s)" % ns[0])
    a.set_title("scaling of the optimizer step")
    a.grid(alpha=0.3)
    a.legend(fontsize=7)
    b.set_xlabel("devices")
    b.set_ylabel("speedup over the baseline, same devices")
    b.set_title("speedup")
    b.grid(alpha=0.3)
    b.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "speedup.png"), dpi=110)
    plt.close(fig)

    nmax = ns[-1]
    last = [next(p for p in pts if p["mode"] == m and p["devices"] == nmax) for m in modes]
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    bottom = [0.0] * len(last)
    for key, label in PHASES:
        vals = [p["seconds"].get(key, 0.0) for p in last]
        if key in ("grad_fill", "weights_back") and not any(vals):
            continue  # no host path in this plan
        ax.bar(range(len(last)), vals, bottom=bottom, label=label)
        bottom = [x + y for x, y in zip(bottom, vals)]
    order = plan["model"].get("shard_order", "contiguous")
    for key, label, style in LEVELS:
        if not all(key in p["seconds"] for p in last):
            continue
        if "%s" in label:
            label = label % order
        for i, p in enumerate(last):
            ax.hlines(p["seconds"][key], i - 0.4, i + 0.4, colors="k", linestyles=style,
                      label=label if i == 0 else None)
    ax.set_xticks(range(len(last)))
    ax.set_xticklabels([MODE_LABEL[m].replace(" + ", "\n+ ") for m in modes], fontsize=8)
    ax.set_ylabel("seconds per iteration")
    ax.set_title("%s, %d devices" % (title, nmax))
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "breakdown.png"), dpi=110)
    plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
