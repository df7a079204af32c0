#!/usr/bin/python3
"""How much of csdkit.torch.AdamW.step() is the runtime's step, and how much is around it.

For a model of about P parameters (tensors of a small transformer's shapes), per parameter
dtype (fp32, bf16), after a warm-up, this times over several repetitions:

  (a) opt.step() of csdkit.torch.AdamW, wall time (time.perf_counter);
  (b) the `seconds` of that step's report (opt.last_report): the scheduler's own clock, from
      the launch of the device workers to the commit;
  (c) csdkit.Session.step(...) called directly on the same session with the same arguments the
      optimizer passes (gradients, this step's hyper-parameters, weights_out), wall time, and
  (d) its report's `seconds`.

What lies between (a) and (b), and is the subject of the 10 % target: the Python optimizer
layer (param_groups walk, gradient checks, hyper-parameter dicts), the binding's argument
checks, the gather of the .grad tensors by address into the runtime's transfer buffer
(python/src/session.cpp: GradientSet::Gather into the session's buffer, kept from step to step;
one pass per tensor that copies 64 KiB at a time and checks the copy for non-finite values
while it is in cache, so the scheduler needs no scan of its own) and the copy of the new
weights from the runtime's buffer into the parameters (Scheduler::CopyWeightsOut: one memcpy
per tensor of the store's out dtype; fp32 for an fp32 model, whose fp32 weights are read back
over the link). (c) - (d) is the binding's share of it, (a) - (c) the Python layer's.

The runtime reports no time for the gather or the copy-back, so a skipped step splits (c) - (d)
further, using the kit's own code path (a skipped step reads, writes and commits nothing):

  (e) Session.step(..., found_inf=True): the binding's checks, the gather, the report dict --
      python/src/session.cpp gathers before the scheduler sees found_inf and returns;

so the gather is about (e), and the weight copy-back with the rest (launch set-up) is
((c) - (d)) - (e), each difference taken per repetition. For scale the benchmark also times the
same memory traffic done by torch (the gradients concatenated into a preallocated flat buffer,
the weights copied back out of a flat buffer).

Then the trainer's view, with a backward pass (synthetic: each parameter's loss term is
sum(tanh(p) * c) for a fixed random c, so autograd computes and accumulates every gradient and
runs the optimizer's hooks), twice from the same weights: overlap_backward=False (step() gathers
every gradient) and overlap_backward=True (each gradient is queued as backward finishes it and
copied by the kit's filler thread while backward goes on; from the second step on the runtime's
step itself starts during backward, Session.start_speculative, and step() confirms it). For
each, per repetition: `exposed_host_seconds` = the wall time from the end of backward to the
return of step(), minus the part of the runtime's step that ran after backward ended (from the
report's `started_at` and `finished_at`, CLOCK_MONOTONIC like time.monotonic(): all of the step
when it starts in step(), the rest of it when it started during backward), and
`exposed_host_fraction` = that over the runtime's step (the report's `seconds`, its start to
its commit). `speculation` counts what the overlapped steps did with the update started during
backward ('committed', 'abandoned: ...'; 'none': not started). Target (issue 26): <= 0.02.

Prints JSON (stdout, or --json FILE) and a short summary on stderr. Stores live in a temporary
directory this script creates (under --dir) and removes when done. Nothing is asserted on time.

    /usr/bin/python3 bench/optim_step.py --params 4000000 --reps 10 --json optim_step.json
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from kit_import import import_csdkit

TARGET_OVERHEAD = 0.10  # the target: Python + gather + copy <= 10 % of the step
TARGET_EXPOSED = 0.02   # issue 26: host work exposed after backward <= 2 % of the runtime step

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# Bytes per element of the kit's dtype names (Session.grad_dtype / out_dtype). out "none" means
# the store keeps no low-precision copy: the fp32 weights themselves come back.
KIT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "none": 4}


def transformer_shapes(params, d_model, vocab):
    """Tensor shapes of a decoder-only transformer (embedding, then per layer: attention
    in/out projections with biases, two layer norms, the 4x MLP) with as many layers as bring
    the total nearest to `params` (at least one)."""
    per_layer = [(3 * d_model, d_model), (3 * d_model,), (d_model, d_model), (d_model,),
                 (d_model,), (d_model,),                       # layer norm 1
                 (4 * d_model, d_model), (4 * d_model,), (d_model, 4 * d_model), (d_model,),
                 (d_model,), (d_model,)]                       # layer norm 2
    layer_numel = sum(_numel(s) for s in per_layer)
    embed = [(vocab, d_model)]
    layers = max(1, round((params - _numel(embed[0])) / layer_numel))
    return embed + per_layer * layers + [(d_model,), (d_model,)]  # final layer norm


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def median(xs):
    return statistics.median(xs)


def summary_of(xs):
    return {"median": median(xs), "min": min(xs), "max": max(xs), "all": xs}


@torch.no_grad()
def host_copy_estimate(grads, params):
    """The memory traffic of the gather and the weight copy-back, done by torch: every
    gradient copied back to back into a flat buffer allocated beforehand; every parameter
    filled from a flat buffer (of the parameters' own values, so nothing changes). Returns
    (gather seconds, copy-back seconds)."""
    n = sum(g.numel() for g in grads)
    flat = torch.zeros(n, dtype=grads[0].dtype)
    t0 = time.perf_counter()
    torch.cat([g.reshape(-1) for g in grads], out=flat)
    t1 = time.perf_counter()
    src = torch.cat([p.reshape(-1) for p in params])
    t2 = time.perf_counter()
    at = 0
    for p in params:
        p.view(-1).copy_(src[at:at + p.numel()])
        at += p.numel()
    t3 = time.perf_counter()
    return t1 - t0, t3 - t2


def bench_dtype(csdkit, name, args, workdir):
    dtype = DTYPES[name]
    torch.manual_seed(args.seed)
    shapes = transformer_shapes(args.params, args.d_model, args.vocab)
    params = [torch.nn.Parameter((0.02 * torch.randn(s)).to(dtype)) for s in shapes]
    for p in params:
        p.grad = (1e-3 * torch.randn(p.shape)).to(dtype)
    n = sum(p.numel() for p in params)
    # One param group with weight decay and one without (a GPT trainer's usual split), so the
    # optimizer hands over one hyper-parameter dict per group as it would in training.
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = csdkit.torch.AdamW(groups, lr=1e-4, store=workdir / name, devices=args.devices,
                             mode=args.mode)

    # The arguments opt.step() passes to the session, built the same way, once.
    order = [p for g in opt.param_groups for p in g["params"]]
    grads = [p.grad for p in order]

    def hyper():
        # The optimizer's own translation of a param group into the kit's names (a private
        # method, used so that (c) passes exactly what (a) passes).
        return [opt._group_hyper(g) for g in opt.param_groups if g["params"]]

    rows = {k: [] for k in ("opt_wall", "opt_runtime", "session_wall", "session_runtime",
                            "skip_found_inf", "copy_gather", "copy_back",
                            "virtual")}
    report = None
    for rep in range(args.warmup + args.reps):
        t0 = time.perf_counter()
        opt.step()
        t1 = time.perf_counter()
        r_opt = opt.last_report
        session = opt.session  # exists after the first step
        t2 = time.perf_counter()
        r_ses = session.step(grads, group_hyper=hyper(), weights_out=order, mode=args.mode)
        t3 = time.perf_counter()
        r_inf = session.step(grads, group_hyper=hyper(), weights_out=order, found_inf=True,
                             mode=args.mode)
        t4 = time.perf_counter()
        if not r_inf["skipped"]:
            raise RuntimeError("expected the found_inf probe step to be skipped, found {!r}"
                               .format(r_inf))
        cg, cb = host_copy_estimate(grads, order)
        if rep < args.warmup:
            continue  # the first step creates the store; caches and page tables settle
        rows["opt_wall"].append(t1 - t0)
        rows["opt_runtime"].append(r_opt["seconds"])
        rows["session_wall"].append(t3 - t2)
        rows["session_runtime"].append(r_ses["seconds"])
        rows["virtual"].append(r_opt["virtual_seconds"])
        rows["skip_found_inf"].append(t4 - t3)
        rows["copy_gather"].append(cg)
        rows["copy_back"].append(cb)
        report = r_opt

    a, b = median(rows["opt_wall"]), median(rows["opt_runtime"])
    c, d = median(rows["session_wall"]), median(rows["session_runtime"])
    e = median(rows["skip_found_inf"])
    # The same differences taken per repetition, then the median: the runtime's step varies
    # with the machine's load from one repetition to the next, and this cancels it.
    outside_opt = median([w - r for w, r in zip(rows["opt_wall"], rows["opt_runtime"])])
    outside_ses = median([w - r for w, r in zip(rows["session_wall"],
                                                rows["session_runtime"])])
    virtual = median(rows["virtual"])
    grad_bytes = KIT_BYTES[session.grad_dtype]
    out_bytes = KIT_BYTES[session.out_dtype]
    result = {
        "dtype": name,
        "params": n,
        "tensors": len(params),
        "grad_elements_over_link": report["bytes"]["host_to_device"] // grad_bytes,
        "devices": session.devices,
        "grad_dtype": session.grad_dtype,
        "out_dtype": session.out_dtype,
        "seconds": {
            "opt_step_wall": summary_of(rows["opt_wall"]),
            "opt_step_runtime_report": summary_of(rows["opt_runtime"]),
            "session_step_wall": summary_of(rows["session_wall"]),
            "session_step_runtime_report": summary_of(rows["session_runtime"]),
            "session_step_skipped_found_inf": summary_of(rows["skip_found_inf"]),
            "torch_copy_estimate_gather": summary_of(rows["copy_gather"]),
            "torch_copy_estimate_weights_back": summary_of(rows["copy_back"]),
        },
        "overhead": {
            "target": TARGET_OVERHEAD,
            # From the medians: (a) opt.step wall, (b) its report's seconds, (c) Session.step
            # wall, (d) its report's seconds.
            "opt_step": (a - b) / a,
            "opt_step_within_target": (a - b) / a <= TARGET_OVERHEAD,
            "session_step": (c - d) / c,
            # Seconds outside the runtime's clock, as medians of per-repetition differences;
            # c - d split with the skipped step (e: found_inf; see the docstring).
            "seconds": {
                "opt_step_minus_report": outside_opt,
                "session_step_minus_report": outside_ses,
                "python_layer": outside_opt - outside_ses,
                "gather": e,
                "copy_back_and_rest": outside_ses - e,
            },
            # The same seconds against the link model's estimate of the step on SmartSSD
            # hardware instead of the emulation's wall time: what they would weigh there if the
            # host side stayed as it is.
            "link_model_step_seconds": virtual,
            "opt_step_vs_link_model": outside_opt / (outside_opt + virtual) if virtual else None,
        },
        "bytes_per_param": {
            # Host memory traffic outside the runtime's clock, per model parameter: each .grad
            # read once and written once into the reused buffer (checked in cache), each
            # parameter written once from the runtime's weights.
            "gather_copy": grad_bytes,
            "weights_copy_back": out_bytes,
        },
        "link_bytes_per_step": report["bytes"],
        "link_bytes_per_param": {k: v / n for k, v in report["bytes"].items()},
    }
    return result


def bench_backward(csdkit, name, args, workdir):
    """The trainer's view: backward, then step(), with overlap_backward off and on (see the
    module docstring). Returns {"serial": {...}, "overlapped": {...}} of medians."""
    dtype = DTYPES[name]
    shapes = transformer_shapes(args.params, args.d_model, args.vocab)
    out = {}
    for label, overlap in (("serial", False), ("overlapped", True)):
        torch.manual_seed(args.seed)
        params = [torch.nn.Parameter((0.02 * torch.randn(s)).to(dtype)) for s in shapes]
        coefs = [1e-3 * torch.randn(s) for s in shapes]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        opt = csdkit.torch.AdamW(groups, lr=1e-4, store=workdir / "{}-{}".format(name, label),
                                 devices=args.devices, mode=args.mode, overlap_backward=overlap)
        rows = {k: [] for k in ("backward", "after_backward", "runtime", "runtime_after",
                                "exposed")}
        outcomes = {}
        for rep in range(args.warmup + args.reps):
            opt.zero_grad(set_to_none=True)
            # time.monotonic(): CLOCK_MONOTONIC, the clock of the report's started_at and
            # finished_at (the runtime's steady_clock).
            t0 = time.monotonic()
            loss = sum((torch.tanh(p.float()) * c).sum() for p, c in zip(params, coefs))
            loss.backward()
            t1 = time.monotonic()
            opt.step()
            t2 = time.monotonic()
            if rep < args.warmup:
                continue
            r = opt.last_report
            # The runtime's step still running after backward: all of it for a step that
            # starts in step(), the rest of it for one started during backward.
            after = max(0.0, r["finished_at"] - max(r["started_at"], t1))
            rows["backward"].append(t1 - t0)
            rows["after_backward"].append(t2 - t1)
            rows["runtime"].append(r["seconds"])
            rows["runtime_after"].append(after)
            rows["exposed"].append((t2 - t1) - after)
            key = r.get("speculation", "none")
            outcomes[key] = outcomes.get(key, 0) + 1
        exposed = median(rows["exposed"])
        runtime = median(rows["runtime"])
        out[label] = {
            "backward_seconds": summary_of(rows["backward"]),
            "step_after_backward_seconds": summary_of(rows["after_backward"]),
            "runtime_step_seconds": summary_of(rows["runtime"]),
            "runtime_after_backward_seconds": summary_of(rows["runtime_after"]),
            "exposed_host_seconds": exposed,
            "exposed_host_fraction": exposed / runtime,
            "speculation": outcomes,
        }
        del opt
    out["target_exposed_host_fraction"] = TARGET_EXPOSED
    out["overlapped_within_target"] = out["overlapped"]["exposed_host_fraction"] <= TARGET_EXPOSED
    return out


def print_summary(r):
    """A few readable lines per dtype on stderr (the JSON has everything)."""
    s, o, b = r["seconds"], r["overhead"], r["bytes_per_param"]
    t = o["seconds"]

    def ms(x):
        return "{:.2f} ms".format(1e3 * x)

    lines = [
        "{} ({:,} parameters, {} tensors, {} devices):".format(
            r["dtype"], r["params"], r["tensors"], r["devices"]),
        "  (a) opt.step() wall {}, (b) report seconds {}: (a-b)/a = {:.1%} (target <= {:.0%})"
        .format(ms(s["opt_step_wall"]["median"]), ms(s["opt_step_runtime_report"]["median"]),
                o["opt_step"], o["target"]),
        "  (c) Session.step() wall {}, (d) report seconds {}: (c-d)/c = {:.1%}".format(
            ms(s["session_step_wall"]["median"]),
            ms(s["session_step_runtime_report"]["median"]), o["session_step"]),
        "  outside the runtime's clock (per-repetition medians): opt.step {}, Session.step {}, "
        "so the Python optimizer layer {}".format(
            ms(t["opt_step_minus_report"]), ms(t["session_step_minus_report"]),
            ms(t["python_layer"])),
        "  Session.step's share: gather (with the finiteness check) {}, weight copy-back and "
        "the rest {} (torch doing the same copies: {} + {})".format(
            ms(t["gather"]), ms(t["copy_back_and_rest"]),
            ms(s["torch_copy_estimate_gather"]["median"]),
            ms(s["torch_copy_estimate_weights_back"]["median"])),
        "  host bytes per parameter copied: gather {}, weights back {}; shared link {:.3f} per "
        "parameter".format(b["gather_copy"], b["weights_copy_back"],
                           r["link_bytes_per_param"]["shared_total"]),
        "  if the runtime's step took the link model's SmartSSD estimate ({}), the time outside "
        "it would be {:.0%} of opt.step".format(
            ms(o["link_model_step_seconds"]), o["opt_step_vs_link_model"] or 0.0),
    ]
    bw = r.get("backward")
    if bw:
        for label in ("serial", "overlapped"):
            x = bw[label]
            lines.append(
                "  with backward, {}: backward {}, step() after it {}, runtime {} ({} of it after "
                "backward): exposed host {} = {:.1%} of the runtime step (target <= {:.0%}); "
                "{}".format(
                    label, ms(x["backward_seconds"]["median"]),
                    ms(x["step_after_backward_seconds"]["median"]),
                    ms(x["runtime_step_seconds"]["median"]),
                    ms(x["runtime_after_backward_seconds"]["median"]),
                    ms(x["exposed_host_seconds"]),
                    x["exposed_host_fraction"], bw["target_exposed_host_fraction"],
                    x["speculation"]))
    print("\n".join(lines), file=sys.stderr)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", type=int, default=4_000_000,
                    help="approximate parameter count (default 4000000)")
    ap.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=["fp32", "bf16"])
    ap.add_argument("--devices", type=int, default=4, help="emulated CSDs (default 4)")
    ap.add_argument("--mode", choices=("smart", "baseline"), default="smart")
    ap.add_argument("--reps", type=int, default=15, help="timed repetitions (default 15)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="untimed repetitions first (default 2; the first creates the store)")
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", type=Path, default=None,
                    help="where to create the temporary store directory (default: $TMPDIR)")
    ap.add_argument("--json", type=Path, default=None, help="write the JSON here, not stdout")
    args = ap.parse_args(argv)
    for k in ("params", "devices", "reps", "d_model", "vocab"):
        if getattr(args, k) < 1:
            ap.error("--{}: expected a value >= 1, found {}".format(k.replace("_", "-"),
                                                                    getattr(args, k)))
    if args.warmup < 1:
        ap.error("--warmup: expected >= 1 (the first step creates the store), found {}"
                 .format(args.warmup))
    return args


def main(argv=None):
    args = parse_args(argv)
    csdkit = import_csdkit("optim_step.py", "csdkit.torch")
    # Only this directory is ours: it is created empty here and removed with what the kit
    # wrote into it; nothing else is touched.
    workdir = Path(tempfile.mkdtemp(prefix="csdkit-optim-bench-", dir=args.dir))
    try:
        results = []
        for name in args.dtypes:
            r = bench_dtype(csdkit, name, args, workdir)
            r["backward"] = bench_backward(csdkit, name, args, workdir)
            results.append(r)
    finally:
        shutil.rmtree(workdir)
    doc = {
        "benchmark": "optim_step",
        "host": {"cpus": os.cpu_count(), "torch": torch.__version__,
                 "torch_threads": torch.get_num_threads(), "python": platform.python_version()},
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "results": results,
    }
    text = json.dumps(doc, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    else:
        print(text)
    for r in results:
        print_summary(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
