#!/usr/bin/python3
"""Train a small character-level GPT twice: with torch.optim.AdamW and with csdkit.torch.AdamW.

Both runs start from the same initial weights and see the same batches in the same order, so
the only difference between them is where (and in which binary32 order of operations) the
optimizer step runs: in PyTorch, or in the kit on emulated SmartSSDs (backend "model"). The
script prints a markdown table of the mean time per phase of one iteration for both runs and
the bytes the kit moved per step on each link, writes <out>/loss.png and <out>/summary.json,
and exits 1 when the kit's final training loss is further from PyTorch's than the bound
stated at LOSS_BOUND below (2 when it refuses to run: bad options, an --out that is not empty).

With --compress topk:RATIO the kit receives Top-K gradients (csdkit.torch.TopK, with error
feedback unless --no-error-feedback); it no longer follows PyTorch to rounding, so the exit
status then only checks that the run learned (see progress_check). --no-torch skips the
PyTorch run, with the same check. examples/gpt/quality.py runs the Top-K quality study.

The corpus is every regular file under /usr/share/common-licenses (Debian's base-files, on
every installation), read in name order, symlinks skipped. Usage, from the repository root:

    /usr/bin/python3 examples/gpt/train_gpt.py --out gpt-out

See examples/gpt/README.md for the options and what the figures mean.
"""

import argparse
import copy
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

CORPUS_DIR = Path("/usr/share/common-licenses")
REPO_ROOT = Path(__file__).resolve().parents[2]

# The bound on |kit - torch| / |torch| of the final training loss, per parameter dtype.
#
# float32: both optimizers compute AdamW in binary32 and differ only in rounding (PyTorch
# fuses and groups some operations, the kit follows its normative order without FMA): a few
# ulps per element and step (docs/trainer.md: <= 1.3e-6 relative on an MLP's
# parameters over 50 steps). Through a transformer those ulps do not stay put (softmax and
# layer norm amplify them), so the bound is set from measurements of this script:
#   seed 0, batch 16, 100 iterations (the defaults): max 1.6e-6, final 2.8e-7;
#   seed 1, batch 8,  100 iterations:               max 5.2e-6, final 2.2e-6;
# and from what a semantic error does to the same run (torch.optim only, 40 iterations,
# batch 16): L2 weight decay instead of decoupled moves the loss by up to 4e-1 (final 5e-2),
# a learning rate off by 0.1 % by up to 5.2e-3 (final 1.9e-3). 1e-3 sits between the two:
# ~200x what rounding did, and below what a 0.1 % error in the learning rate does.
#
# bfloat16: both sides keep fp32 master weights, but every step rounds the weights to bf16
# (8 significant bits), so a one-ulp difference in a master weight that straddles a rounding
# boundary flips a bf16 weight by 2^-8 relative, and the runs drift apart the way any two
# runs do that differ by rounding: perturbing the torch run's lr by 2^-20 alone moves its loss
# by 1e-4 .. 2.4e-3 within 12 iterations (batch 4), as much as kit vs torch does. Short bf16
# runs at batch 4 (what fits in minutes here: bf16 convolutions are slow on this CPU) are
# also unstable, with loss spikes that land on different iterations once the runs have
# drifted apart. Measured kit vs torch, batch 4, 25 iterations: final 1.2e-2 (max 1.1e-1) and
# final 5.2e-2 (max 7.5e-1) in two versions of this model code. The bound, 0.25, therefore only
# catches gross failures in bf16 (weights not coming back leave the loss near its initial 4.5,
# ~50 % above a trained run's); float32 is the comparison that checks the kit's arithmetic.
LOSS_BOUND = {"float32": 1e-3, "bfloat16": 0.25}

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}

# torch >= 2.0 has fused attention (flash / memory-efficient kernels on the GPU): it keeps no
# (batch, heads, context, context) score tensor for the backward, which a GPT-2-sized run with
# context 1024 needs. Debian's torch 1.13 does not have it; there the attention is written out
# (scores, mask, softmax). The two differ in rounding, so runs on machines with different torch
# versions are not comparable bit for bit; both runs of one invocation use the same path.
SDPA = getattr(F, "scaled_dot_product_attention", None)


def die(message):
    """Refuses to go on: the message on stderr, exit status 2 (1 is the loss check's)."""
    print("train_gpt.py: " + message, file=sys.stderr)
    sys.exit(2)


def import_csdkit():
    """Imports csdkit.torch: from sys.path (scripts/build's csdkit.pth), else from this
    checkout's build (build/release/python, where CMake puts the package)."""
    try:
        import csdkit.torch  # noqa: F401
    except ImportError:
        build = REPO_ROOT / "build" / "release" / "python"
        if not (build / "csdkit").is_dir():
            die("cannot import csdkit; expected it on sys.path or in {} (build the project "
                "first, or set PYTHONPATH to the build's python directory)".format(build))
        sys.path.insert(0, str(build))
        import csdkit.torch  # noqa: F401
    return sys.modules["csdkit.torch"]


# -- data --------------------------------------------------------------------------------------

def load_corpus(directory):
    """The text of every regular file in `directory` (not symlinks, not subdirectories),
    concatenated in name order. Undecodable bytes become U+FFFD rather than failing."""
    names = [n for n in sorted(os.listdir(directory))
             if not (directory / n).is_symlink() and (directory / n).is_file()]
    if not names:
        die("expected text files in {}, found none (is Debian's base-files installed?)"
            .format(directory))
    text = "".join((directory / n).read_bytes().decode("utf-8", errors="replace")
                   for n in names)
    return text, names


class CharData:
    """Character-level tokens: vocabulary = the corpus's distinct characters (or `chars`, a
    given sorted vocabulary that must hold every character of the text), sorted. The first
    90 % of the text is for training, the rest is held out."""

    def __init__(self, text, chars=None):
        self.chars = sorted(set(text)) if chars is None else list(chars)
        index = {c: i for i, c in enumerate(self.chars)}
        missing = set(text) - set(index)
        if missing:
            die("the corpus has {} characters outside the vocabulary (e.g. {!r}); build the "
                "vocabulary over this corpus too (--vocab-corpus at pretraining)".format(
                    len(missing), sorted(missing)[:8]))
        tokens = torch.tensor([index[c] for c in text], dtype=torch.long)
        cut = int(0.9 * len(tokens))
        self.train, self.held_out = tokens[:cut], tokens[cut:]

    @property
    def vocab(self):
        return len(self.chars)

    @staticmethod
    def batch(tokens, starts, context):
        """Inputs and next-character targets for windows beginning at `starts`."""
        x = torch.stack([tokens[s:s + context] for s in starts.tolist()])
        y = torch.stack([tokens[s + 1:s + 1 + context] for s in starts.tolist()])
        return x, y


# -- the model ---------------------------------------------------------------------------------

class Dense(nn.Module):
    """y = x W^T + b over the last dimension, as nn.Linear (same parameter shapes and
    initialisation role), computed as a 1x1 convolution.

    Why not nn.Linear: Debian's python3-torch links the reference BLAS (torch.__config__ says
    BLAS_INFO=generic), so nn.Linear runs at ~2 GFLOP/s here, while convolutions go through
    oneDNN: measured 45-70 GFLOP/s for forward + backward of a 256 -> 1024 layer on one core.
    The arithmetic is the same up to the order of summation; the parameters stay plain 2-D
    (out, in) and 1-D tensors, so the optimizer sees exactly what an nn.Linear model gives it.
    """

    # torch 1.13 on one thread hands a 1x1 convolution to oneDNN only when its batch holds at
    # least 16 sequences (otherwise it takes the slow BLAS path again: measured 2.5 GFLOP/s at
    # 8), so the tokens are cut into 16 sequences whatever the training batch is.
    CONV_BATCH = 16

    def __init__(self, d_in, d_out, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in))
        self.bias = nn.Parameter(torch.zeros(d_out)) if bias else None

    def forward(self, x):
        if x.is_cuda:
            # The convolution detour is for the CPU's reference BLAS only; cuBLAS is fast.
            return F.linear(x, self.weight, self.bias)
        *lead, c = x.shape
        rows = x.reshape(-1, c)  # one row per token
        n = rows.shape[0]
        seqs = self.CONV_BATCH if n % self.CONV_BATCH == 0 else n
        # (seqs, n/seqs, c) -> (seqs, c, n/seqs) for conv1d, and back.
        y = F.conv1d(rows.view(seqs, n // seqs, c).transpose(1, 2), self.weight.unsqueeze(-1),
                     self.bias)
        return y.transpose(1, 2).reshape(*lead, -1)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t only sees positions <= t."""

    def __init__(self, d_model, heads, context):
        super().__init__()
        assert d_model % heads == 0
        self.heads = heads
        self.qkv = Dense(d_model, 3 * d_model)
        self.proj = Dense(d_model, d_model)
        if SDPA is None:
            causal = torch.tril(torch.ones(context, context, dtype=torch.bool))
            self.register_buffer("causal", causal, persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        hd = c // self.heads
        # (b, t, 3c) -> three (b, heads, t, hd) tensors.
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
        if SDPA is not None:
            y = SDPA(q, k, v, is_causal=True)  # scale 1/sqrt(hd), as below
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            scores = scores.masked_fill(~self.causal[:t, :t], float("-inf"))
            y = torch.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, d_model, heads, context):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads, context)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(Dense(d_model, 4 * d_model), nn.GELU(),
                                 Dense(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Decoder-only transformer with learned positions and an untied output head; no dropout,
    so a forward pass is a deterministic function of the weights and the batch."""

    def __init__(self, vocab, context, d_model, layers, heads, checkpoint=False):
        super().__init__()
        # Activation checkpointing: keep only each block's input for the backward and
        # recompute the block's inside there (one more forward of the blocks per iteration).
        # The recomputation is exact: the model has no dropout or other randomness.
        self.checkpoint = checkpoint
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, context) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = Dense(d_model, vocab, bias=False)
        # GPT-2's initialisation: N(0, 0.02) weights, zero biases, and the two projections
        # that add into the residual stream scaled down by sqrt(2 * layers).
        for m in self.modules():
            if isinstance(m, (Dense, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
        for blk in self.blocks:
            for proj in (blk.attn.proj, blk.mlp[2]):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * layers))

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            if self.checkpoint and torch.is_grad_enabled():
                x = torch.utils.checkpoint.checkpoint(blk, x, use_reentrant=False)
            else:
                x = blk(x)
        return self.head(self.ln_f(x))


def loss_of(model, x, y):
    logits = model(x)
    # Cross-entropy in fp32 whatever the parameter dtype.
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))


def param_groups(model, weight_decay):
    """Two groups, as GPT trainers usually do: matrices (and embeddings) decay, biases and
    layer-norm gains do not. The kit stores each group from a block boundary with its own
    hyper-parameters."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


# -- optimizers --------------------------------------------------------------------------------

class MasterAdamW:
    """torch.optim.AdamW on fp32 master copies of low-precision parameters: the gradient is
    widened into the master's .grad, AdamW updates the master, the parameter receives the
    master rounded to its dtype. This is what the kit does with bf16 parameters (fp32 master
    weights in the store, a correctly rounded copy back), so it is the reference to compare
    with. `optimizer` is the inner torch.optim.AdamW (for the LR scheduler)."""

    def __init__(self, groups, **kw):
        self.pairs = []
        master_groups = []
        for g in groups:
            masters = []
            for p in g["params"]:
                m = p.detach().float().clone().requires_grad_(True)
                self.pairs.append((p, m))
                masters.append(m)
            master_groups.append(dict(g, params=masters))
        self.optimizer = torch.optim.AdamW(master_groups, **kw)

    def zero_grad(self, set_to_none=True):
        for p, m in self.pairs:
            p.grad = None
            m.grad = None

    @torch.no_grad()
    def step(self):
        for p, m in self.pairs:
            m.grad = None if p.grad is None else p.grad.float()
        self.optimizer.step()
        for p, m in self.pairs:
            p.copy_(m)  # round to nearest even into the parameter's dtype


def make_torch_optimizer(model, args):
    groups = param_groups(model, args.weight_decay)
    # foreach: the single-tensor loop on the CPU (what torch 1.13 does there anyway); on CUDA
    # torch's own default (the multi-tensor kernels in torch 2.x), as a GPU trainer runs it.
    kw = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
              foreach=None if args.device == "cuda" else False)
    if DTYPES[args.dtype] == torch.float32:
        opt = torch.optim.AdamW(groups, **kw)
        return opt, opt
    opt = MasterAdamW(groups, **kw)
    return opt, opt.optimizer


def make_kit_optimizer(model, args, csdkit_torch, store):
    compress = None
    if args.compress is not None:
        compress = csdkit_torch.TopK(args.compress, error_feedback=not args.no_error_feedback)
    opt = csdkit_torch.AdamW(param_groups(model, args.weight_decay), lr=args.lr,
                             betas=(0.9, 0.95), eps=1e-8, store=store, devices=args.devices,
                             compress=compress, state=args.state,
                             overlap_backward=not args.no_overlap_backward)
    return opt, opt


def warmup_then_cosine(iters):
    """LR multiplier: linear warm-up over the first 10 % of the iterations, then a cosine decay
    to 10 % (through torch.optim.lr_scheduler, so the kit gets a new lr every step)."""
    warm = max(1, iters // 10)

    def factor(it):
        if it < warm:
            return (it + 1) / warm
        progress = (it - warm) / max(1, iters - warm)
        return 0.1 + 0.45 * (1.0 + math.cos(math.pi * progress))
    return factor


# -- one training run --------------------------------------------------------------------------

PHASES = ("forward", "backward", "step")
# The kit's step() split into consecutive intervals that add up to its wall time (see
# split_kit_step), then the report's own figures.
KIT_PARTS = ("setup", "gradients_out", "binding", "runtime", "weights_in")
KIT_FIGURES = KIT_PARTS + ("io_wait_seconds", "compute_seconds", "virtual_seconds", "hooks")


def split_kit_step(wall, rep):
    """The kit's step() wall time (`wall`, up to the clock after it) cut at the marks the
    optimizer reports in rep["host_seconds"] and at the runtime's own clock (rep["seconds"]):

      setup          group checks, opening the store (iteration 0: creating it);
      gradients_out  the .grad checks, this step's hyper-parameters; CUDA: the copies into the
                     pinned host buffers; Top-K: accumulation, selection, encoding, streams to
                     the host;
      binding        the binding's step call minus the runtime's step: the gather into the
                     transfer buffer with its finiteness check (dense) or the streams'
                     validation (Top-K), and the new weights written to the parameters (CPU)
                     or the pinned buffers (CUDA). The kit reports no finer figure;
      runtime        the report's `seconds_in_step`: device workers, state I/O, commit -- the
                     part of the runtime's step inside step() (its `seconds`, unless it
                     started during backward: overlap_backward);
      weights_in     the rest: CUDA copies back into the parameters until they are done (the
                     clock waits for the GPU), the Top-K residual's update, the report's
                     hand-over. On the CPU the weights were already written in `binding`.
    """
    hs = rep["host_seconds"]
    runtime = rep.get("seconds_in_step", rep["seconds"])
    return {"setup": hs["setup"], "gradients_out": hs["gradients_out"],
            "binding": hs["session"] - runtime, "runtime": runtime,
            "weights_in": wall - hs["setup"] - hs["gradients_out"] - hs["session"]}


def held_out_batches(data, args):
    """8 fixed batches from the held-out text (the same for every run of the same seed)."""
    g = torch.Generator().manual_seed(args.seed + 1)
    hi = len(data.held_out) - args.context - 1
    return [data.batch(data.held_out, torch.randint(0, hi, (args.batch,), generator=g),
                       args.context) for _ in range(8)]


@torch.no_grad()
def held_out_loss(model, batches, args):
    return statistics.fmean(loss_of(model, x.to(args.device), y.to(args.device)).item()
                            for x, y in batches)


def train(name, model, opt, sched_target, data, starts, held_out, args):
    """Runs len(starts) iterations; returns the loss per iteration, per-iteration timings (and
    for the kit the step reports' figures) and the held-out loss at the end."""
    sched = torch.optim.lr_scheduler.LambdaLR(sched_target, warmup_then_cosine(len(starts)))
    kit = hasattr(opt, "last_report")
    losses, times, links = [], {k: [] for k in PHASES + (KIT_FIGURES if kit else ())}, []
    first_report = last_report = None
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t_run = time.perf_counter()
    for it, s in enumerate(starts):
        x, y = (t.to(args.device) for t in data.batch(data.train, s, args.context))
        opt.zero_grad(set_to_none=True)  # not timed: drops the .grad references
        t0 = clock(args)
        loss = loss_of(model, x, y)
        t1 = clock(args)
        loss.backward()
        t2 = clock(args)
        opt.step()
        t3 = clock(args)
        sched.step()
        losses.append(loss.item())
        times["forward"].append(t1 - t0)
        times["backward"].append(t2 - t1)
        times["step"].append(t3 - t2)
        if kit:
            rep = opt.last_report
            if first_report is None:
                first_report = rep
            last_report = rep
            for k, v in split_kit_step(t3 - t2, rep).items():
                times[k].append(v)
            for k in ("io_wait_seconds", "compute_seconds", "virtual_seconds"):
                times[k].append(rep[k])
            # The kit's gradient hooks' time inside backward (overlap_backward).
            times["hooks"].append(rep["host_seconds"].get("hooks", 0.0))
            links.append(rep["bytes"])
        if args.log_every and (it % args.log_every == 0 or it == len(starts) - 1):
            print("  [{}] iter {:4d}  loss {:.5f}  step {:7.1f} ms".format(
                name, it, losses[-1], 1e3 * (t3 - t2)), flush=True)
    elapsed = time.perf_counter() - t_run
    peak = torch.cuda.max_memory_allocated() if args.device == "cuda" else None
    return dict(losses=losses, times=times, links=links, first_report=first_report,
                last_report=last_report, held_out_loss=held_out_loss(model, held_out, args), seconds=elapsed,
                peak_gpu_bytes=peak)


def clock(args):
    """time.perf_counter(), after the GPU's queued work is done when the model is on CUDA (so
    that each phase is charged its own kernels)."""
    if args.device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def mean_after_first(xs):
    """Mean over iterations 1.. (iteration 0 creates the store / the optimizer state)."""
    rest = xs[1:] if len(xs) > 1 else xs
    return statistics.fmean(rest)


# -- checks ------------------------------------------------------------------------------------

def bound_check(diff, dtype):
    """Dense kit against torch.optim.AdamW: the final training loss within LOSS_BOUND (`diff`:
    loss_difference's). A NaN fails the comparison, so it fails the check."""
    bound = LOSS_BOUND[dtype]
    return dict(kind="final training loss within LOSS_BOUND of torch.optim.AdamW's",
                passed=diff["final_rel"] <= bound, bound_final_rel=bound)


def progress_check(kit, initial_held_out):
    """When the kit is not expected to follow torch.optim.AdamW to rounding (Top-K gradients)
    or there is no torch run (--no-torch), the exit status checks only that the run learned:
    every training loss is finite and the held-out loss after training is below the initial
    weights' on the same 8 held-out batches. It catches a step that does nothing or diverges,
    not a quality loss: examples/gpt/quality.py measures that against a dense run."""
    finite = all(math.isfinite(x) for x in kit["losses"]) and math.isfinite(kit["held_out_loss"])
    return dict(kind="all training losses finite and held-out loss below the initial weights'",
                passed=finite and kit["held_out_loss"] < initial_held_out,
                held_out_initial=initial_held_out, held_out_final=kit["held_out_loss"])


def loss_difference(ref, kit):
    abs_diff = [abs(a - b) for a, b in zip(kit["losses"], ref["losses"])]
    rel_diff = [d / abs(b) for d, b in zip(abs_diff, ref["losses"])]
    return {"max_abs": max(abs_diff), "max_rel": max(rel_diff),
            "max_rel_iteration": rel_diff.index(max(rel_diff)),
            "final_abs": abs_diff[-1], "final_rel": rel_diff[-1]}


# -- report ------------------------------------------------------------------------------------

def ms(x):
    return "{:.2f}".format(1e3 * x)


KIT_ROWS = (
    ("setup", "setup: checks, store open (`host_seconds.setup`)"),
    ("gradients_out", "gradients out: .grad checks; CUDA → pinned host copies; Top-K encoding "
                      "(`host_seconds.gradients_out`)"),
    ("binding", "binding, outside the runtime's clock: gather + finiteness check (Top-K: stream "
                "validation) + weights written out (`host_seconds.session − seconds_in_step`)"),
    ("runtime", "runtime step: device work, state I/O, commit (report `seconds_in_step`: its "
                "`seconds` inside step())"),
    ("weights_in", "weights in: copy-back into the parameters, until done on CUDA (rest of the "
                   "step wall)"),
    ("io_wait_seconds", "runtime: workers' storage wait, summed (`io_wait_seconds`)"),
    ("compute_seconds", "runtime: kernel time, summed (`compute_seconds`)"),
    ("virtual_seconds", "link model, SmartSSD estimate (`virtual_seconds`)"),
)


def print_tables(ref, kit, params):
    kt = kit["times"]
    rt = ref["times"] if ref is not None else None

    def cell(t, key):
        return ms(mean_after_first(t[key])) if t is not None else "–"

    print("\n### Mean time per iteration (ms; iterations 1..N-1, iteration 0 excluded)\n")
    print("| phase | torch.optim.AdamW | csdkit.torch.AdamW |")
    print("|---|---:|---:|")
    for p, label in (("forward", "forward"), ("backward", "backward"),
                     ("step", "optimizer.step() (wall)")):
        print("| {} | {} | {} |".format(label, cell(rt, p), cell(kt, p)))
    for key, label in KIT_ROWS:
        print("| &nbsp;&nbsp;{} | – | {} |".format(label, cell(kt, key)))
    it_kit = sum(mean_after_first(kt[p]) for p in PHASES)
    it_ref = ms(sum(mean_after_first(rt[p]) for p in PHASES)) if rt is not None else "–"
    print("| iteration (forward + backward + step) | {} | {} |".format(it_ref, ms(it_kit)))
    print("| first iteration's step (creates optimizer state / the store) | {} | {} |".format(
        ms(rt["step"][0]) if rt is not None else "–", ms(kt["step"][0])))
    print("\nThe five indented rows from setup to weights in add up to the step wall. The "
          "runtime reports no separate time for the gather of the .grad tensors into its "
          "transfer buffer or for writing the new weights out: both are in the binding row.")

    per_step = mean_link_bytes(kit["links"])
    print("\n### csdkit bytes per step, by link (mean over all steps; {:,} parameters)\n"
          .format(params))
    print("| link | bytes/step | bytes/parameter |")
    print("|---|---:|---:|")
    for link, label in LINK_LABELS:
        b = per_step.get(link, 0)
        print("| {} | {:,.0f} | {:.3f} |".format(label, b, b / params))


LINK_LABELS = (
    ("host_to_device", "host → device (shared PCIe): gradients out"),
    ("device_to_host", "device → host (shared PCIe): weights in"),
    ("nvme_to_host", "NVMe → host (shared PCIe; baseline mode only)"),
    ("host_to_nvme", "host → NVMe (shared PCIe; baseline mode only)"),
    ("shared_total", "**shared link total**"),
    ("ssd_to_fpga", "SSD → FPGA (device-internal P2P): state read"),
    ("fpga_to_ssd", "FPGA → SSD (device-internal P2P): state write"),
)


def mean_link_bytes(reports):
    keys = set().union(*(r.keys() for r in reports)) if reports else set()
    return {k: statistics.fmean(r.get(k, 0) for r in reports) for k in sorted(keys)}


def kit_label(args):
    label = "csdkit.torch.AdamW ({} emulated CSDs".format(args.devices)
    if args.state != "fp32":
        label += ", state {}".format(args.state)
    if args.compress is not None:
        label += ", Top-K {:g} %{}".format(
            100 * args.compress, "" if args.no_error_feedback else " + error feedback")
    return label + ")"


def plot(path, ref, kit, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    its = range(len(kit["losses"]))
    title = "char-level GPT on /usr/share/common-licenses, {}".format(args.dtype)
    if ref is None:
        fig, top = plt.subplots(figsize=(8, 4.5))
    else:
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True,
                                          gridspec_kw={"height_ratios": [3, 1.4]})
        top.plot(its, ref["losses"], label="torch.optim.AdamW", lw=2.2, color="tab:blue")
    top.plot(its, kit["losses"], label=kit_label(args), lw=1.0, ls="--", color="tab:orange")
    top.set_ylabel("training loss (cross-entropy, nats/char)")
    top.set_title(title)
    top.legend()
    top.grid(alpha=0.3)
    if ref is None:
        top.set_xlabel("iteration")
    else:
        diff = [abs(a - b) for a, b in zip(kit["losses"], ref["losses"])]
        # Identical losses (a difference of exactly 0) cannot be drawn on a log axis: those
        # iterations are left out, and said so in the label.
        nonzero = [(i, d) for i, d in zip(its, diff) if d > 0]
        if nonzero:
            bottom.plot(*zip(*nonzero), ls="none", marker=".", color="tab:red")
            bottom.set_yscale("log")
        bottom.set_ylabel("|kit − torch|\n({} of {} equal)".format(len(diff) - len(nonzero),
                                                                   len(diff)))
        bottom.set_xlabel("iteration")
        bottom.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- main --------------------------------------------------------------------------------------

def parse_compress(text):
    """--compress's value: 'topk:RATIO' with RATIO in (0, 1], as a float; None if malformed."""
    method, sep, value = text.partition(":")
    if method != "topk" or not sep:
        return None
    try:
        ratio = float(value)
    except ValueError:
        return None
    return ratio if 0.0 < ratio <= 1.0 else None  # (NaN fails the comparison too)


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Train a small char-level GPT with torch.optim.AdamW and with "
                    "csdkit.torch.AdamW (emulated SmartSSDs) from the same start; compare "
                    "losses and time per phase.")
    ap.add_argument("--iters", type=int, default=100,
                    help="iterations per run (default 100: about 80 s per run on one core)")
    ap.add_argument("--out", type=Path, default=Path("gpt-out"),
                    help="output directory, absent or empty (default gpt-out); the kit's store "
                         "is <out>/store unless --store is given")
    ap.add_argument("--store", type=Path, default=None,
                    help="the kit's store directory, absent or empty (default <out>/store); it "
                         "must be on a file system with O_DIRECT (not tmpfs)")
    ap.add_argument("--devices", type=int, default=4, help="emulated CSDs (default 4)")
    ap.add_argument("--compress", default=None, metavar="topk:RATIO",
                    help="hand the kit Top-K gradients: RATIO in (0, 1] of each subgroup's "
                         "elements, e.g. topk:0.01 (default: dense gradients)")
    ap.add_argument("--state", choices=("fp32", "q8", "q8-bf16"), default="fp32",
                    help="how the kit's store keeps the optimizer state (docs/state-formats.md; "
                         "default fp32)")
    ap.add_argument("--corpus", type=Path, default=CORPUS_DIR,
                    help="the training text: every regular file of this directory, in name "
                         "order (default {})".format(CORPUS_DIR))
    ap.add_argument("--vocab-corpus", type=Path, default=None,
                    help="also give the characters of this directory's files a token (to "
                         "fine-tune on that corpus later with --init)")
    ap.add_argument("--save-model", type=Path, default=None,
                    help="write the kit-trained model, its vocabulary and its shape here "
                         "(torch.save; a new file)")
    ap.add_argument("--init", type=Path, default=None,
                    help="start from a model written by --save-model (fine-tuning): its "
                         "weights, vocabulary and shape (--layers, --d-model, --heads, "
                         "--context are taken from it)")
    ap.add_argument("--no-error-feedback", action="store_true",
                    help="with --compress: drop what Top-K does not send instead of adding it "
                         "to the next step's gradient")
    ap.add_argument("--no-overlap-backward", action="store_true",
                    help="the kit's optimizer with overlap_backward=False: no gradient copied "
                         "and no update started during backward (every copy in step())")
    ap.add_argument("--no-torch", action="store_true",
                    help="skip the torch.optim.AdamW reference run; the exit status then checks "
                         "only that the kit's run learned")
    ap.add_argument("--seed", type=int, default=0, help="initial weights and batch order")
    ap.add_argument("--batch", type=int, default=16, help="sequences per batch (default 16)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32",
                    help="parameter dtype (default float32); bfloat16: both optimizers keep "
                         "fp32 master weights")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where the model and its gradients live (cuda: the kit stages them "
                         "through pinned host buffers)")
    ap.add_argument("--checkpoint", action="store_true",
                    help="activation checkpointing: recompute each block in the backward")
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (default 1e-3)")
    ap.add_argument("--weight-decay", type=float, default=0.1,
                    help="decoupled weight decay of the matrices (default 0.1)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--log-every", type=int, default=25,
                    help="print the loss every N iterations (0: never)")
    args = ap.parse_args(argv)
    for name in ("iters", "devices", "batch", "layers", "d_model", "heads", "context"):
        if getattr(args, name) < 1:
            ap.error("--{}: expected a value >= 1, found {}".format(
                name.replace("_", "-"), getattr(args, name)))
    if args.d_model % args.heads:
        ap.error("--d-model ({}) must be a multiple of --heads ({})".format(
            args.d_model, args.heads))
    if args.compress is not None:
        ratio = parse_compress(args.compress)
        if ratio is None:
            ap.error("--compress: expected topk:RATIO with RATIO a number in (0, 1] (e.g. "
                     "topk:0.01), found {!r}".format(args.compress))
        args.compress = ratio
    elif args.no_error_feedback:
        ap.error("--no-error-feedback: expected together with --compress topk:RATIO, found no "
                 "--compress")
    if args.save_model is not None and (args.save_model.exists() or
                                        args.save_model.is_symlink()):
        ap.error("--save-model {}: expected a new file, found one that exists (this script "
                 "overwrites nothing)".format(args.save_model))
    if args.store is not None and args.store.resolve() == args.out.resolve():
        ap.error("--store {}: expected a directory other than --out, found the same"
                 .format(args.store))
    return args


def prepare_dir(option, path, fail=None):
    """Creates `path`, or accepts it empty. Anything else is refused (through `fail`, default
    die): this script never deletes or overwrites what it did not create. quality.py uses it
    too, with its own `fail`."""
    die_ = fail or die
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            die_("{} {}: expected a directory (absent or empty), found something else"
                 .format(option, path))
        if any(path.iterdir()):
            die_("{} {}: expected an absent or empty directory, found one with files; "
                 "choose another {} or remove it yourself".format(option, path, option))
    else:
        path.mkdir(parents=True)


def main(argv=None):
    args = parse_args(argv)
    csdkit_torch = import_csdkit()
    dtype = DTYPES[args.dtype]

    init_file = None
    chars = None
    if args.init is not None:
        try:
            init_file = torch.load(args.init, map_location="cpu")
            chars = init_file["chars"]
            for k in ("layers", "d_model", "heads", "context"):
                setattr(args, k, int(init_file["shape"][k]))
        except (OSError, KeyError, TypeError, ValueError, RuntimeError) as e:
            die("--init {}: expected a model written by --save-model, found what could not "
                "be read as one ({})".format(args.init, e))
    text, files = load_corpus(args.corpus)
    if chars is None and args.vocab_corpus is not None:
        chars = sorted(set(text) | set(load_corpus(args.vocab_corpus)[0]))
    data = CharData(text, chars)
    if len(data.held_out) <= args.context + 1:
        die("--context {}: expected fewer characters than a tenth of the corpus ({})".format(
            args.context, len(text)))
    if args.device == "cuda" and not torch.cuda.is_available():
        die("--device cuda: expected a CUDA device, found none (torch.cuda.is_available())")
    prepare_dir("--out", args.out)
    store = args.out / "store"
    if args.store is not None:
        prepare_dir("--store", args.store)
        store = args.store

    # The same initial weights and the same batch order for both runs.
    torch.manual_seed(args.seed)
    init = GPT(data.vocab, args.context, args.d_model, args.layers, args.heads,
               checkpoint=args.checkpoint).to(dtype)
    if init_file is not None:
        init.load_state_dict(init_file["model"])
    init = init.to(args.device)
    n_params = sum(p.numel() for p in init.parameters())
    g = torch.Generator().manual_seed(args.seed)
    starts = [torch.randint(0, len(data.train) - args.context - 1, (args.batch,), generator=g)
              for _ in range(args.iters)]
    held_out = held_out_batches(data, args)
    attention = "scaled_dot_product_attention" if SDPA is not None else "explicit softmax"
    print("corpus: {} files, {:,} characters, vocabulary {}; model: {:,} parameters ({}), "
          "{} layers, d_model {}, {} heads, context {}; {} iterations of batch {}; attention: "
          "{}{}".format(len(files), len(text), data.vocab, n_params, args.dtype, args.layers,
                        args.d_model, args.heads, args.context, args.iters, args.batch,
                        attention, "; activation checkpointing" if args.checkpoint else ""),
          flush=True)
    initial_held_out = held_out_loss(init, held_out, args)

    ref = None
    if not args.no_torch:
        print("run 1: torch.optim.AdamW", flush=True)
        model = copy.deepcopy(init)
        opt, sched_target = make_torch_optimizer(model, args)
        ref = train("torch", model, opt, sched_target, data, starts, held_out, args)
        del model, opt, sched_target  # its optimizer state, before the kit's run
        if args.device == "cuda":
            torch.cuda.empty_cache()

    print("run {}: {}, store {}".format(1 if ref is None else 2, kit_label(args), store),
          flush=True)
    model = copy.deepcopy(init)
    opt, sched_target = make_kit_optimizer(model, args, csdkit_torch, store)
    try:
        kit = train("csdkit", model, opt, sched_target, data, starts, held_out, args)
    except ValueError as e:
        # The kit's refusals of arguments (e.g. more devices than the model has blocks) are
        # ValueErrors that say what to change; anything else keeps its traceback.
        die("csdkit refused the run: {}".format(e))

    if args.save_model is not None:
        torch.save({"chars": data.chars, "model": {k: v.detach().cpu() for k, v in
                                                   model.state_dict().items()},
                    "shape": {"layers": args.layers, "d_model": args.d_model,
                              "heads": args.heads, "context": args.context}}, args.save_model)
        print("wrote the model to {}".format(args.save_model))

    print("\none csdkit step report (the first step's, as opt.last_report gives it):")
    print(json.dumps(kit["first_report"], indent=1, sort_keys=True))

    print_tables(ref, kit, n_params)
    per_step = mean_link_bytes(kit["links"])
    shared = per_step.get("shared_total", 0.0)
    virtual = mean_after_first(kit["times"]["virtual_seconds"])
    print("\nshared link: {:,.0f} bytes per step ({:.3f} per parameter); link model estimate "
          "of the kit's step on SmartSSD hardware: {} ms".format(shared, shared / n_params,
                                                                ms(virtual)))

    diff = loss_difference(ref, kit) if ref is not None else None
    if ref is not None and args.compress is None:
        check = bound_check(diff, args.dtype)
    else:
        check = progress_check(kit, initial_held_out)
    if ref is not None:
        print("\nfinal training loss: torch {:.6f}, csdkit {:.6f}; |difference| {:.3e} "
              "(relative {:.3e})".format(ref["losses"][-1], kit["losses"][-1],
                                         diff["final_abs"], diff["final_rel"]))
        print("max over iterations: |difference| {:.3e}, relative {:.3e} (iteration {})".format(
            diff["max_abs"], diff["max_rel"], diff["max_rel_iteration"]))
    else:
        print("\nfinal training loss: csdkit {:.6f}".format(kit["losses"][-1]))
    print("held-out loss: initial weights {:.6f}, torch {}, csdkit {:.6f}".format(
        initial_held_out, "{:.6f}".format(ref["held_out_loss"]) if ref is not None else "–",
        kit["held_out_loss"]))
    if "bound_final_rel" in check:
        print("check: {} (bound {:g}): {}".format(check["kind"], check["bound_final_rel"],
                                                   "ok" if check["passed"] else "EXCEEDED"))
    else:
        print("check: {}: {}".format(check["kind"], "ok" if check["passed"] else "FAILED"))
    print("wall time: torch run {}, csdkit run {:.1f} s".format(
        "{:.1f} s".format(ref["seconds"]) if ref is not None else "skipped (--no-torch)",
        kit["seconds"]))
    if args.device == "cuda":
        print("peak GPU memory allocated: torch run {}, csdkit run {:.2f} GiB".format(
            "{:.2f} GiB".format(ref["peak_gpu_bytes"] / 2**30) if ref is not None else "–",
            kit["peak_gpu_bytes"] / 2**30))

    plot(args.out / "loss.png", ref, kit, args)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    config.update(store=str(store), attention=attention, torch_version=torch.__version__)
    summary = {
        "config": config,
        "corpus": {"dir": str(args.corpus), "files": files, "characters": len(text),
                   "vocabulary": data.vocab},
        "state": args.state,
        "init": None if args.init is None else str(args.init),
        "parameters": n_params,
        "compress": None if args.compress is None else {
            "method": "topk", "ratio": args.compress,
            "error_feedback": not args.no_error_feedback},
        "loss": {"torch": ref["losses"] if ref is not None else None,
                 "csdkit": kit["losses"]},
        "loss_difference": diff,
        "held_out_loss": {"initial": initial_held_out,
                          "torch": ref["held_out_loss"] if ref is not None else None,
                          "csdkit": kit["held_out_loss"]},
        "check": check,
        "mean_seconds_per_iteration": {
            "note": "iterations 1..N-1; the csdkit step split: setup + gradients_out + binding "
                    "+ runtime + weights_in = step (see split_kit_step in train_gpt.py)",
            "torch": ({p: mean_after_first(ref["times"][p]) for p in PHASES}
                      if ref is not None else None),
            "csdkit": {k: mean_after_first(v) for k, v in kit["times"].items()}},
        "seconds_per_iteration": {
            "torch": ref["times"] if ref is not None else None, "csdkit": kit["times"]},
        "first_step_seconds": {"torch": ref["times"]["step"][0] if ref is not None else None,
                               "csdkit": kit["times"]["step"][0]},
        "csdkit_bytes_per_step": per_step,
        "shared_link_bytes_per_step": shared,
        "shared_link_bytes_per_parameter_per_step": shared / n_params,
        "virtual_seconds_per_step": virtual,
        "csdkit_first_report": kit["first_report"],
        "csdkit_last_report": kit["last_report"],
        "run_seconds": {"torch": ref["seconds"] if ref is not None else None,
                        "csdkit": kit["seconds"]},
        "peak_gpu_bytes": {"torch": ref["peak_gpu_bytes"] if ref is not None else None,
                           "csdkit": kit["peak_gpu_bytes"]},
    }
    with open(args.out / "summary.json", "w") as f:
        json.dump(summary, f, indent=1)
    print("wrote {} and {}".format(args.out / "loss.png", args.out / "summary.json"))
    return 0 if check["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
