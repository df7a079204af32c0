#!/usr/bin/python3
"""The GPT example of train_gpt.py, data-parallel: csdkit.torch.distributed.AdamW over
torch.distributed, one process per rank (torchrun), each rank with its own store of emulated
CSDs, the optimizer state partitioned over the ranks (docs/trainer.md, "Data parallel").

The model, corpus, batches, param groups and LR schedule are train_gpt.py's (imported, not
copied). --batch is the GLOBAL batch: rank r of W takes sequences [r*B/W, (r+1)*B/W) of each
iteration's batch, so runs over 1, 2 or 4 ranks see the same data per iteration, and the
optimizer averages the ranks' gradients (the model is NOT wrapped in DDP). Usage, from the
repository root (gloo on CPUs; --device cuda uses NCCL, one GPU per rank):

    torchrun --standalone --nproc_per_node 2 examples/gpt/train_gpt_dist.py \\
        --device cuda --dtype bfloat16 --layers 28 --d-model 1024 --heads 16 --context 1024 \\
        --batch 16 --lr 3e-4 --iters 50 --devices 4 --store /disk/gpt-dist --out gpt-dist-w2

Per iteration and rank it measures forward, backward and optimizer.step() (host clock after
torch.cuda.synchronize()), and inside the step: the gradients' reduce-scatter and the weights'
all-gather (the optimizer's own collective calls, timed by wrappers that synchronize before and
after them: the times include waiting for the slowest rank), the kit's step (the runtime's own
clock, the report's `seconds`) and the rest, the exposed host time (flat-buffer copies, the
ranks' agreement, the slice to and from pinned host memory, the binding). Rank 0 writes
<out>/summary.json with every rank's figures, the shared-link bytes per rank, the medians after
--warmup iterations, the versions and the machine.

Checks (docs/trainer.md, "Across GPUs", has the runs and their results):
  --grads seeded   every step's gradient comes from a seed instead of forward/backward: a global
                   gradient G_k (bf16/fp32, from the seed and the step only) of which each
                   element is given, times W, to one rank drawn at random (the others get 0), so
                   the ranks' sum is W * G_k exactly in any reduction order and the averaged
                   gradient is G_k whatever the world size (W a power of two);
  --save-state F   rank 0 saves the weights and the stores' theta/m/v (fp32, gathered) to F;
  --compare A B    (no torchrun) compares two saved states bit for bit; exit 0 if equal;
  --kill-rank R --kill-step K
                   in the job's first attempt (TORCHELASTIC_RESTART_COUNT 0) rank R stops inside
                   step K just before its store commits, waits until every other rank's store
                   has committed step K (their manifests, so the stores must be visible on one
                   host), then SIGKILLs itself; run under torchrun --max_restarts 1, the job
                   restarts, resume() rolls the others back to the common step and the run
                   goes on to --iters.
Exit status: 0 done (and equal, for --compare), 1 --compare found a difference, 2 refused.
"""

import argparse
import datetime
import hashlib
import inspect
import json
import os
import platform
import signal
import socket
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_gpt as tg  # noqa: E402  (model, corpus, batches, param groups, LR schedule)

# Per iteration and rank: the fields timed (seconds). "step" is optimizer.step()'s wall time;
# reduce_scatter + kit_step + all_gather + exposed_host = step.
TIMED = ("forward", "backward", "step", "reduce_scatter", "kit_step", "all_gather",
         "exposed_host")
# The runtime's own figures of the step (seconds, from the report).
REPORTED = ("io_wait_seconds", "compute_seconds", "virtual_seconds")


def die(message):
    print("train_gpt_dist.py: " + message, file=sys.stderr, flush=True)
    sys.exit(2)


# -- arguments ---------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Data-parallel char-level GPT with csdkit.torch.distributed.AdamW (one "
                    "store of emulated CSDs per rank); run under torchrun.")
    ap.add_argument("--out", type=Path, help="output directory (rank 0; absent or empty)")
    ap.add_argument("--store", type=Path,
                    help="root of the ranks' stores (<store>/rank-<r>); on a disk file system")
    ap.add_argument("--devices", type=int, default=4, help="emulated CSDs per rank (default 4)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=3,
                    help="iterations left out of the medians (default 3)")
    ap.add_argument("--batch", type=int, default=16,
                    help="GLOBAL batch (sequences per iteration over all ranks; default 16)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=sorted(tg.DTYPES), default="float32")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="cpu: gloo; cuda: NCCL, the GPU LOCAL_RANK")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--checkpoint", action="store_true", help="activation checkpointing")
    ap.add_argument("--grads", choices=("model", "seeded"), default="model",
                    help="model: forward/backward (training); seeded: the check's gradients")
    ap.add_argument("--save-state", type=Path, default=None,
                    help="rank 0 saves weights and gathered theta/m/v here after the last step")
    ap.add_argument("--kill-rank", type=int, default=None)
    ap.add_argument("--kill-step", type=int, default=None)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="collectives' timeout, s (default 300)")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"),
                    help="compare two --save-state files bit for bit (no torchrun) and exit")
    args = ap.parse_args(argv)
    if args.compare:
        return args
    if args.out is None or args.store is None:
        ap.error("--out and --store are required (unless --compare)")
    for name in ("iters", "devices", "batch", "layers", "d_model", "heads", "context"):
        if getattr(args, name) < 1:
            ap.error("--{}: expected a value >= 1".format(name.replace("_", "-")))
    if args.d_model % args.heads:
        ap.error("--d-model must be a multiple of --heads")
    if (args.kill_rank is None) != (args.kill_step is None):
        ap.error("--kill-rank and --kill-step go together")
    return args


# -- instrumentation ---------------------------------------------------------------------------

class Phases:
    """Wall time of the optimizer's own collective calls, accumulated per iteration: each call
    is wrapped with a device synchronisation before (so queued work is not charged to it) and
    after (so its own is)."""

    def __init__(self, cuda):
        self.cuda, self.acc = cuda, {}

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def wrap(self, name, fn):
        def timed(*a, **kw):
            self.sync()
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.sync()
                self.acc[name] = self.acc.get(name, 0.0) + time.perf_counter() - t
        return timed


class KillBeforeCommit:
    """Stands in for the optimizer's session (a test hook, as tests/python/dist_kill_train.py):
    its step_arena() (or step()) with the store at committed step `step` waits until every other rank's store
    has committed that step (manifest.json's committed_step == step + 1), then SIGKILLs this
    process, so that this rank's store stays one step behind the others'."""

    def __init__(self, session, step, root, rank, world):
        self._s, self._step, self._root, self._rank, self._world = (session, step, root,
                                                                     rank, world)

    def __getattr__(self, name):
        return getattr(self._s, name)

    def _committed(self, r):
        try:
            with open(os.path.join(self._root, "rank-%d" % r, "manifest.json")) as f:
                return json.load(f)["committed_step"]
        except (OSError, ValueError, KeyError):
            return None

    def step_arena(self, *a, **kw):  # (what the optimizer calls; step() for older code)
        self._kill_if_due()
        return self._s.step_arena(*a, **kw)

    def step(self, *a, **kw):
        self._kill_if_due()
        return self._s.step(*a, **kw)

    def _kill_if_due(self):
        if self._s.step_count == self._step:
            others = [r for r in range(self._world) if r != self._rank]
            t_end = time.monotonic() + 120
            while time.monotonic() < t_end and any(self._committed(r) != self._step + 1
                                                   for r in others):
                time.sleep(0.01)
            print("rank {}: SIGKILL inside step {}, before its commit (its store at committed "
                  "step {}; ranks {} at {})".format(
                      self._rank, self._step, self._s.step_count, others,
                      [self._committed(r) for r in others]), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


# -- seeded gradients (check mode) -------------------------------------------------------------

def seeded_grads(params, k, seed, rank, world, dtype, device):
    """Rank `rank`'s gradients at step k in --grads seeded: G (N(0, 1e-3) values rounded to
    `dtype`, from (seed, k) alone, in the optimizer's flattened order) with each element given,
    times `world`, to one rank drawn from (seed, k, world); zeros elsewhere. The sum over the
    ranks is world * G exactly (one non-zero term per element; a power-of-two multiple), so
    the average the optimizer steps with is G bit for bit for any world size and any order of
    the reduction."""
    n = sum(p.numel() for p in params)
    gen = torch.Generator(device=device).manual_seed(seed * 1_000_003 + 2 * k)
    g = (torch.randn(n, generator=gen, device=device, dtype=torch.float32) * 1e-3).to(dtype)
    if world > 1:
        gen.manual_seed(seed * 1_000_003 + 2 * k + 1)
        owner = torch.randint(0, world, (n,), generator=gen, device=device, dtype=torch.uint8)
        g = torch.where(owner == rank, g * world, torch.zeros((), dtype=dtype, device=device))
    out, at = [], 0
    for p in params:
        out.append(g[at:at + p.numel()].view(p.shape))
        at += p.numel()
    return out


# -- state of the stores (check mode) ----------------------------------------------------------

def gather_store_var(opt, orig_all_gather, var):
    """The stores' committed `var` ("theta", "m", "v") of the whole model, float32 on the CPU
    of every rank, in the optimizer's flattened order. Each rank exports its own pieces as
    resume() does (through the optimizer's internals: _plan_, _piece_views, _session), then an
    all-gather."""
    plan, world = opt._plan_, dist.get_world_size()
    full = torch.zeros(plan["chunk"] * world, dtype=torch.float32)
    opt._session.export_state(var, opt._piece_views(full, 0))
    dev = opt._device
    full = full.to(dev)
    orig_all_gather(full)
    return full[:plan["total"]].cpu()


def digest(t):
    return hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def compare(a_path, b_path):
    a, b = torch.load(a_path), torch.load(b_path)
    print("A: {} (world size {}, step {})\nB: {} (world size {}, step {})".format(
        a_path, a["world_size"], a["step"], b_path, b["world_size"], b["step"]))
    equal = a["step"] == b["step"]
    for key in ("weights", "theta", "m", "v"):
        x, y = a[key], b[key]
        if x.shape != y.shape or x.dtype != y.dtype:
            print("  {}: shapes/dtypes differ: {} {} vs {} {}".format(key, tuple(x.shape),
                                                                    x.dtype, tuple(y.shape),
                                                                    y.dtype))
            equal = False
            continue
        bits = x.view(torch.int16 if x.dtype in (torch.bfloat16, torch.float16) else torch.int32)
        ybits = y.view(bits.dtype)
        ndiff = int((bits != ybits).sum())
        maxd = float((x.float() - y.float()).abs().max()) if ndiff else 0.0
        print("  {:7s} {:>12,} elements ({}): {} bit patterns differ, max |A-B| {:.3e}; sha256 "
              "{} / {}".format(key, x.numel(), str(x.dtype).replace("torch.", ""), ndiff, maxd,
                               digest(x)[:16], digest(y)[:16]))
        equal = equal and ndiff == 0
    print("EQUAL bit for bit" if equal else "DIFFERENT")
    return 0 if equal else 1


# -- the run -----------------------------------------------------------------------------------

def init_process_group(args):
    backend = "nccl" if args.device == "cuda" else "gloo"
    kw = dict(backend=backend, timeout=datetime.timedelta(seconds=args.timeout))
    if args.device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)  # NCCL: all_gather_object needs it
        if "device_id" in inspect.signature(dist.init_process_group).parameters:
            kw["device_id"] = torch.device("cuda", local)
    dist.init_process_group(**kw)
    return torch.device("cuda", torch.cuda.current_device()) if args.device == "cuda" \
        else torch.device("cpu")


def agree_or_die(error):
    """Every rank learns every rank's refusal; all exit 2 if any refused."""
    errors = [None] * dist.get_world_size()
    dist.all_gather_object(errors, error)
    bad = [(r, e) for r, e in enumerate(errors) if e]
    if bad:
        if dist.get_rank() == 0:
            for r, e in bad:
                print("train_gpt_dist.py: rank {}: {}".format(r, e), file=sys.stderr)
        sys.exit(2)


def machine_info(device):
    info = dict(torch=torch.__version__, python=platform.python_version(),
                host=socket.gethostname(), cpus=os.cpu_count(), platform=platform.platform())
    import csdkit
    info["csdkit"] = getattr(csdkit, "__version__", None)
    if device.type == "cuda":
        info.update(cuda=torch.version.cuda, gpu=torch.cuda.get_device_name(device),
                    gpus_visible=torch.cuda.device_count(),
                    nccl=".".join(map(str, torch.cuda.nccl.version())))
    return info


def median(xs):
    return statistics.median(xs) if xs else None


def collective_alone(flat_numel, dtype, device, world, reps=5):
    """The same reduce-scatter and all-gather (sizes and dtypes of the step's) timed alone
    after a barrier, median of `reps`: the transfer without the ranks' skew."""
    if world == 1 and device.type == "cpu":
        return None
    flat = torch.ones(flat_numel, dtype=dtype, device=device)
    chunk = flat_numel // world
    rank = dist.get_rank()
    out = {}
    nccl = dist.get_backend() == "nccl"
    for name in ("reduce_scatter", "all_gather"):
        times = []
        for _ in range(reps + 1):
            dist.barrier()
            if device.type == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            if name == "reduce_scatter":
                if nccl:
                    dist.reduce_scatter_tensor(flat[rank * chunk:(rank + 1) * chunk], flat)
                else:
                    dist.all_reduce(flat)
            else:
                if nccl:
                    dist.all_gather_into_tensor(flat, flat[rank * chunk:(rank + 1) * chunk])
                else:
                    parts = list(flat.split(chunk))
                    dist.all_gather(parts, parts[rank].clone())
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
            if name == "reduce_scatter":
                flat.fill_(1)
        out[name] = statistics.median(times[1:])
    return out


def main(argv=None):
    args = parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        die("--device cuda: expected a CUDA device, found none")
    device = init_process_group(args)
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    tg.import_csdkit()  # csdkit on sys.path (or this checkout's build)
    import csdkit.torch.distributed as cdist
    dtype = tg.DTYPES[args.dtype]

    # Refusals, agreed so that no rank is left waiting.
    error = None
    if args.batch % world:
        error = "--batch {} (global): expected a multiple of the world size {}".format(
            args.batch, world)
    elif args.grads == "seeded" and world & (world - 1):
        error = ("--grads seeded: expected a power-of-two world size (W * G exact, and the "
                 "kit's 1/W fold equal to dividing first), found {}".format(world))
    elif args.kill_rank is not None and not 0 <= args.kill_rank < world:
        error = "--kill-rank {}: expected a rank of 0 .. {}".format(args.kill_rank, world - 1)
    elif attempt == 0:
        for p in (args.store / ("rank-%d" % rank), args.store / ("rank-%d.json" % rank)):
            if p.exists():
                error = ("--store {}: {} exists; a new run needs none (a restarted attempt of "
                         "the same job resumes it)".format(args.store, p))
        if rank == 0 and error is None:
            if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
                error = "--out {}: expected an absent or empty directory".format(args.out)
            else:
                args.out.mkdir(parents=True, exist_ok=True)
    agree_or_die(error)

    text, files = tg.load_corpus(tg.CORPUS_DIR)
    data = tg.CharData(text)
    torch.manual_seed(args.seed)
    model = tg.GPT(data.vocab, args.context, args.d_model, args.layers, args.heads,
                   checkpoint=args.checkpoint).to(dtype).to(device)
    groups = tg.param_groups(model, args.weight_decay)
    params = [p for g in groups for p in g["params"]]  # the optimizer's flattened order
    n_params = sum(p.numel() for p in params)
    g = torch.Generator().manual_seed(args.seed)  # train_gpt.py's batches, in its order
    starts = [torch.randint(0, len(data.train) - args.context - 1, (args.batch,), generator=g)
              for _ in range(args.iters)]
    per_rank = args.batch // world
    held_out = tg.held_out_batches(data, args)
    factor = tg.warmup_then_cosine(args.iters)

    opt = cdist.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, store=args.store,
                      devices=args.devices)
    phases = Phases(cuda)
    orig_all_gather = opt._all_gather_flat
    opt._reduce = phases.wrap("reduce_scatter", opt._reduce)
    opt._all_gather_flat = phases.wrap("all_gather", opt._all_gather_flat)

    if rank == 0:
        print("world size {} ({}), attempt {}; model {:,} parameters ({}), {} layers, d_model "
              "{}, {} heads, context {}; global batch {} ({} per rank); {} iterations; {} "
              "emulated CSDs per rank under {}; gradients: {}".format(
                  world, dist.get_backend(), attempt, n_params, args.dtype, args.layers,
                  args.d_model, args.heads, args.context, args.batch, per_rank, args.iters,
                  args.devices, args.store, args.grads), flush=True)
    t = time.perf_counter()
    start = opt.resume()  # creates the stores (first attempt) or rolls back to the common step
    resume_seconds = time.perf_counter() - t
    if rank == 0:
        print("resume(): step {} in {:.2f} s; rolled_back {}".format(
            start, resume_seconds, json.dumps(opt.rolled_back)), flush=True)
    if args.kill_rank == rank and attempt == 0:
        opt._session = KillBeforeCommit(opt._session, args.kill_step, str(args.store), rank,
                                        world)

    recs = []
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t_run = time.perf_counter()
    for it in range(start, args.iters):
        for group in opt.param_groups:
            group["lr"] = args.lr * factor(it)
        opt.zero_grad(set_to_none=True)
        phases.acc = {}
        rec = dict(iteration=it)
        if args.grads == "model":
            s = starts[it][rank * per_rank:(rank + 1) * per_rank]
            x, y = (v.to(device) for v in data.batch(data.train, s, args.context))
            phases.sync()
            t0 = time.perf_counter()
            loss = tg.loss_of(model, x, y)
            phases.sync()
            t1 = time.perf_counter()
            loss.backward()
            phases.sync()
            t2 = time.perf_counter()
        else:
            for p, gr in zip(params, seeded_grads(params, it, args.seed, rank, world, dtype,
                                                  device)):
                p.grad = gr
            loss = None
            phases.sync()
            t0 = t1 = t2 = time.perf_counter()
        opt.step()
        phases.sync()
        t3 = time.perf_counter()
        rep = opt.last_report
        rec.update(forward=t1 - t0, backward=t2 - t1, step=t3 - t2,
                   reduce_scatter=phases.acc.get("reduce_scatter", 0.0),
                   all_gather=phases.acc.get("all_gather", 0.0),
                   kit_step=rep.get("seconds_in_step", rep["seconds"]))
        rec["speculation"] = rep.get("speculation")
        rec["host_bytes"] = dict(rep.get("host_bytes", {}))
        rec["exposed_host"] = (rec["step"] - rec["reduce_scatter"] - rec["all_gather"]
                               - rec["kit_step"])
        for k in REPORTED:
            rec[k] = rep[k]
        rec["bytes"] = dict(rep["bytes"])
        rec["skipped"] = bool(rep["skipped"])
        if loss is not None:
            lv = loss.detach().float().reshape(1)
            dist.all_reduce(lv)  # the global batch's mean loss (equal micro-batches)
            rec["loss"] = float(lv) / world
        recs.append(rec)
        if rank == 0 and args.log_every and (it % args.log_every == 0 or it == args.iters - 1):
            print("  iter {:4d}  loss {}  fwd {:7.1f}  bwd {:7.1f}  step {:8.1f} ms (reduce "
                  "{:6.1f}, kit {:8.1f}, gather {:6.1f}, host {:6.1f}){}".format(
                      it, "{:.5f}".format(rec["loss"]) if "loss" in rec else "–",
                      *(1e3 * rec[k] for k in ("forward", "backward", "step", "reduce_scatter",
                                               "kit_step", "all_gather", "exposed_host")),
                      "  update during backward: " + rec["speculation"]
                      if rec["speculation"] else ""),
                  flush=True)
    run_seconds = time.perf_counter() - t_run
    if rank == 0 and recs:
        print("bytes moved on rank 0's host in its last step: {}".format(recs[-1]["host_bytes"]),
              flush=True)
    peak = torch.cuda.max_memory_allocated(device) if cuda else None

    held = tg.held_out_loss(model, held_out, args) if args.grads == "model" else None
    # Every rank holds the same weights: check it (sha256 of the flattened parameters).
    with torch.no_grad():
        flat_w = torch.cat([p.detach().reshape(-1) for p in params]).cpu()
    mine = digest(flat_w)
    state = None
    if args.save_state is not None or args.grads == "seeded":
        state = {v: gather_store_var(opt, orig_all_gather, v) for v in ("theta", "m", "v")}
    alone = collective_alone(opt._plan_["chunk"] * world, opt._reduce_dtype, device, world)

    per = dict(rank=rank, records=recs, peak_gpu_bytes=peak, run_seconds=run_seconds,
               resume_seconds=resume_seconds, weights_sha256=mine,
               elements=opt._plan_["hi"] - opt._plan_["lo"],
               range=[opt._plan_["lo"], opt._plan_["hi"]],
               collective_alone=alone)
    if cuda:
        per["gpu"] = torch.cuda.get_device_name(device)
    everyone = [None] * world
    dist.all_gather_object(everyone, per)
    if rank == 0:
        write_summary(args, everyone, n_params, world, start, held, state, flat_w, files,
                      len(text), data.vocab, opt, attempt, machine_info(device))
    dist.barrier()
    dist.destroy_process_group()
    return 0


def write_summary(args, ranks, n_params, world, start, held, state, flat_w, files, chars,
                  vocab, opt, attempt, machine):
    first = start + args.warmup
    med = []
    for r in ranks:
        kept = [x for x in r["records"] if x["iteration"] >= first] or r["records"]
        m = {k: median([x[k] for x in kept]) for k in TIMED + REPORTED}
        m["iteration"] = m["forward"] + m["backward"] + m["step"] if kept else None
        shared = [x["bytes"].get("shared_total", 0) for x in r["records"]]
        m["shared_link_bytes_per_step"] = median(shared)
        m["shared_link_bytes_per_element_of_slice"] = (median(shared) / r["elements"]
                                                       if shared else None)
        m["host_to_device_bytes"] = median([x["bytes"].get("host_to_device", 0)
                                            for x in r["records"]])
        m["device_to_host_bytes"] = median([x["bytes"].get("device_to_host", 0)
                                            for x in r["records"]])
        m["private_bytes_per_step"] = median([x["bytes"].get("ssd_to_fpga", 0)
                                              + x["bytes"].get("fpga_to_ssd", 0)
                                              for x in r["records"]])
        m["iterations_in_median"] = len(kept)
        med.append(m)
    g = torch.tensor([], dtype=opt._reduce_dtype).element_size()  # bytes per reduced element
    chunk = -(-n_params // world)
    network = dict(
        note="computed, not measured: ring algorithms, bytes each rank sends per step",
        reduce_scatter=(world - 1) * chunk * g, all_gather=(world - 1) * chunk * g)
    losses = [x.get("loss") for x in ranks[0]["records"]]
    summary = dict(
        config={k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        machine=machine, world_size=world, attempt=attempt, first_iteration=start,
        rolled_back=opt.rolled_back, parameters=n_params,
        corpus=dict(files=files, characters=chars, vocabulary=vocab),
        loss=losses, held_out_loss=held,
        weights_equal_on_all_ranks=len({r["weights_sha256"] for r in ranks}) == 1,
        weights_sha256=ranks[0]["weights_sha256"],
        median_seconds_per_rank=med, network_bytes_per_rank_per_step=network,
        ranks=ranks)
    if state is not None:
        summary["store_sha256"] = {k: digest(v) for k, v in state.items()}
    with open(args.out / "summary.json", "w") as f:
        json.dump(summary, f, indent=1)
    if args.save_state is not None:
        torch.save(dict(world_size=world, step=opt._session.step_count, weights=flat_w,
                        **state), args.save_state)

    n_kept = med[0]["iterations_in_median"] if med else 0
    print("\n### Median per iteration (ms), {} ({} ranks, {})\n".format(
        "iterations {}..{}".format(first, args.iters - 1) if first < args.iters
        else "all {} iterations run (fewer than --warmup after {})".format(n_kept, start),
        world, dist.get_backend()))
    print("| rank | forward | backward | reduce-scatter | kit step | all-gather | exposed host "
          "| step | iteration |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r, m in enumerate(med):
        print("| {} | {} |".format(r, " | ".join(
            "{:.1f}".format(1e3 * m[k]) if m[k] is not None else "–"
            for k in ("forward", "backward", "reduce_scatter", "kit_step", "all_gather",
                      "exposed_host", "step", "iteration"))))
    print("\nshared link (host <-> its devices) per step: " + "; ".join(
        "rank {}: {:,.0f} bytes ({:.3f} per element of its slice; gradients out {:,.0f}, "
        "weights in {:,.0f})".format(r, m["shared_link_bytes_per_step"],
                                     m["shared_link_bytes_per_element_of_slice"],
                                     m["host_to_device_bytes"], m["device_to_host_bytes"])
        for r, m in enumerate(med)))
    for r in ranks:
        if r["collective_alone"]:
            print("rank {}: collectives alone (after a barrier, median of 5): reduce-scatter "
                  "{:.2f} ms, all-gather {:.2f} ms".format(
                      r["rank"], 1e3 * r["collective_alone"]["reduce_scatter"],
                      1e3 * r["collective_alone"]["all_gather"]))
    if losses and losses[-1] is not None:
        print("final training loss {:.6f}; held-out {}".format(
            losses[-1], "{:.6f}".format(held) if held is not None else "–"))
    print("weights equal on all ranks: {} (sha256 {})".format(
        summary["weights_equal_on_all_ranks"], summary["weights_sha256"][:16]))
    if state is not None:
        print("stores: " + ", ".join("{} {}".format(k, v[:16])
                                     for k, v in summary["store_sha256"].items()))
    if args.save_state is not None:
        print("saved the state to {}".format(args.save_state))
    print("wrote {}".format(args.out / "summary.json"), flush=True)


if __name__ == "__main__":
    sys.exit(main())
