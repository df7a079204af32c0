#!/usr/bin/env python3
"""A small GPT trained under PyTorch FSDP2 (fully_shard) with csdkit.torch.AdamW: each rank's
optimizer steps its own shards of the parameters, and its store (<store>/rank<r>) holds exactly
those shards. Needs torch >= 2.4 and one GPU per rank (NCCL; CPU collectives, which
clip_grad_norm_ issues for gradients offloaded to the host, go over gloo).

    torchrun --standalone --nproc_per_node 2 examples/fsdp2/train_fsdp2.py \\
        --store /tmp/fsdp2-store --steps 50 --bf16 --cpu-offload --clip 1.0

What the kit does under FSDP2 (docs/integrations.md, "FSDP2"):
  * the parameters and their gradients are DTensors; the kit takes each one's local shard
    (a shard without elements, which FSDP2 gives a rank when a tensor has fewer rows than there
    are ranks, has nothing in the store) and writes the new weights into it in place;
  * GPU-resident shards go through pinned host buffers; with --cpu-offload (CPUOffloadPolicy)
    the shards and gradients are in pinned host memory and are read and written in place;
  * clip with torch.nn.utils.clip_grad_norm_ (global over the DTensor gradients); the kit's own
    max_grad_norm= is refused for DTensors (its norm would be of this rank's shards only);
  * checkpoints: torch.distributed.checkpoint with get/set_optimizer_state_dict (--save-dcp,
    --load-dcp): the kit's state_dict() gives DTensors of the parameters' placements. Or the
    stores alone (--resume): each rank reopens its store; the ranks agree on one committed step
    first (resume_common: a rank whose store committed one step more than another's, the job
    having been killed between their commits, rolls back to the common step).

Every batch is a function of (step, rank) only, and the run uses deterministic algorithms, so a
run resumed at step k (from a DCP checkpoint or from the stores) ends with the weights of the
uninterrupted run, bit for bit (tests/python/test_fsdp2.py checks it). --kill-at K SIGKILLs
every rank right after step K (the stores have committed it), for that test.

Outputs (--out PREFIX): PREFIX.rank<r>.pt per rank (its local weight shards, losses, the steps
run) and PREFIX.json from rank 0 (the mean loss of every step, the configuration).
"""

import argparse
import datetime
import json
import math
import os
import signal
import sys

# cuBLAS reproducibility under torch.use_deterministic_algorithms (set before CUDA starts).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

try:  # torch >= 2.6
    from torch.distributed.fsdp import (CPUOffloadPolicy, MixedPrecisionPolicy,  # noqa: E402
                                        OffloadPolicy, fully_shard)
except ImportError:  # torch 2.4, 2.5
    from torch.distributed._composable.fsdp import (CPUOffloadPolicy,  # noqa: E402
                                                    MixedPrecisionPolicy, OffloadPolicy,
                                                    fully_shard)


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention (written out: deterministic backward)
    and a 4x MLP. The q/k/v projection has no bias: a key bias adds q.b to every logit of a
    query alike, which softmax ignores, so its gradient is zero in exact arithmetic and what
    backward computes for it is rounding noise -- which Adam scales up to steps of about lr, so
    that any two implementations (the kit and torch.optim, or two GPUs) would walk it apart."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(d, dim=2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token, position and 3-way segment embeddings, blocks, a final LayerNorm, an untied head
    and a learned 1-element logit scale. Shapes chosen so that FSDP2's dim-0 shards are uneven:
    vocab 97 rows (49/48 over 2 ranks, 25/25/25/22 over 4), the segment table's 3 rows (over 4
    ranks one rank holds none) and the logit scale's 1 element (only rank 0 holds it)."""

    def __init__(self, vocab=97, d=64, layers=2, heads=4, context=32):
        super().__init__()
        self.tok, self.pos, self.seg = (nn.Embedding(vocab, d), nn.Embedding(context, d),
                                        nn.Embedding(3, d))
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.logit_scale = nn.Parameter(torch.ones(1))

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos) + self.seg(pos * 3 // t)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x)) * self.logit_scale


def build(args, device, seed=0):
    """The GPT, initialised from `seed` (the same on every rank), on `device`, fully_shard-ed
    block by block and at the root, with bf16 compute (--bf16: MixedPrecisionPolicy with fp32
    gradient reduction) and the shards in pinned host memory (--cpu-offload)."""
    torch.manual_seed(seed)
    model = GPT(args.vocab, args.d_model, args.layers, args.heads, args.context).to(device)
    kw = dict(offload_policy=CPUOffloadPolicy() if args.cpu_offload else OffloadPolicy())
    if args.bf16:
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                               reduce_dtype=torch.float32)
    for blk in model.blocks:
        fully_shard(blk, **kw)
    fully_shard(model, **kw)
    return model


def param_groups(model, lr):
    """Weight decay for the matrices of the blocks and the head; none for biases, norms and
    embeddings; and a third group holding only the logit scale (lr / 10), which has no element
    on ranks > 0."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if name == "logit_scale":
            continue
        (decay if p.ndim >= 2 and not name.startswith(("tok", "pos", "seg")) else
         no_decay).append(p)
    return [dict(params=decay, weight_decay=0.1), dict(params=no_decay, weight_decay=0.0),
            dict(params=[model.logit_scale], weight_decay=0.0, lr=lr * 0.1)]


def make_optimizer(args, model, store=None):
    """csdkit.torch.AdamW over this rank's shards (store <store>/rank<r>), or torch.optim.AdamW
    (single-tensor implementation, the reference of the tests)."""
    kw = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    if args.opt == "torch":
        return torch.optim.AdamW(param_groups(model, args.lr), foreach=False, **kw)
    import csdkit.torch
    store = store or args.store
    os.makedirs(store, exist_ok=True)  # (the kit creates <store>/rank<r>, not its parents)
    return csdkit.torch.AdamW(param_groups(model, args.lr), **kw,
                              store=os.path.join(store, "rank%d" % dist.get_rank()),
                              devices=args.devices)


def batch(step, rank, args, device):
    """Rank `rank`'s batch of step `step`: random tokens from a generator seeded by both."""
    g = torch.Generator().manual_seed(100003 * step + rank)
    idx = torch.randint(args.vocab, (args.batch, args.context + 1), generator=g)
    idx = idx.to(device)
    return idx[:, :-1], idx[:, 1:]


def train_step(model, opt, step, args, device):
    """Forward, backward, clip_grad_norm_ (global, over the DTensor gradients), step. Returns
    this rank's loss (a float)."""
    x, y = batch(step, dist.get_rank(), args, device)
    loss = F.cross_entropy(model(x).float().flatten(0, 1), y.flatten())
    loss.backward()
    if args.clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss)


def mean_over_ranks(value, device):
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t) / dist.get_world_size()


def resume_common(opt, device):
    """Reopens this rank's store (opt.resume(): its committed weights into the local shards)
    with every rank at one committed step, which is returned. Each rank's store commits on its
    own; a job killed between two ranks' commits of step k leaves some at k and some at k - 1,
    and those at k roll back (the store keeps the state its last commit replaced). A collective:
    every rank calls it."""
    step = opt.resume()
    prev = opt.session.previous_step
    mine = torch.tensor([step, -1 if prev is None else prev], dtype=torch.int64, device=device)
    rows = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(rows, mine)
    common = min(int(r[0]) for r in rows)
    if step != common:
        if prev != common:
            raise RuntimeError("rank {}: store at step {} (previous {}), other ranks at {}: "
                               "cannot roll back to a common step"
                               .format(dist.get_rank(), step, prev, common))
        opt.session.roll_back()
        step = opt.resume()
    return step


def save_dcp(model, opt, path, step):
    """Model and optimizer state, sharded, with torch.distributed.checkpoint."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (get_model_state_dict,
                                                         get_optimizer_state_dict)
    dcp.save({"model": get_model_state_dict(model),
              "optim": get_optimizer_state_dict(model, opt),
              "train": {"step": torch.tensor(step)}}, checkpoint_id=path)


def load_dcp(model, opt, path):
    """Loads save_dcp()'s checkpoint into the model and the optimizer (a new one: the kit
    imports the state into its store, which it creates if needed); returns the step."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (get_model_state_dict,
                                                         get_optimizer_state_dict,
                                                         set_model_state_dict,
                                                         set_optimizer_state_dict)
    sd = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt),
          "train": {"step": torch.tensor(0)}}
    dcp.load(sd, checkpoint_id=path)
    set_model_state_dict(model, sd["model"])
    set_optimizer_state_dict(model, opt, sd["optim"])
    return int(sd["train"]["step"])


def local_weights(model):
    """{name: this rank's shard (a CPU copy)}."""
    return {n: (p._local_tensor if hasattr(p, "_local_tensor") else p).detach().cpu().clone()
            for n, p in model.named_parameters()}


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--opt", choices=("kit", "torch"), default="kit")
    ap.add_argument("--store", default="fsdp2-store", help="the kit's stores: <store>/rank<r>")
    ap.add_argument("--devices", type=int, default=1, help="emulated CSDs per rank store")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--clip", type=float, default=1.0, help="clip_grad_norm_ (0: none)")
    ap.add_argument("--bf16", action="store_true", help="MixedPrecisionPolicy(bf16, fp32)")
    ap.add_argument("--cpu-offload", action="store_true", help="CPUOffloadPolicy()")
    ap.add_argument("--vocab", type=int, default=97)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8, help="sequences per rank and step")
    ap.add_argument("--save-dcp", default=None, help="a DCP checkpoint at --save-at")
    ap.add_argument("--save-at", type=int, default=0)
    ap.add_argument("--load-dcp", default=None, help="start from this DCP checkpoint")
    ap.add_argument("--resume", action="store_true", help="start from the stores (kit)")
    ap.add_argument("--kill-at", type=int, default=0, help="SIGKILL every rank after step K")
    ap.add_argument("--out", default=None, help="output prefix (see the docstring)")
    return ap.parse_args(argv)


def setup():
    """The process group (NCCL for CUDA tensors, gloo for CPU ones) and this rank's GPU."""
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("cuda:nccl,cpu:gloo", timeout=datetime.timedelta(seconds=180))
    torch.use_deterministic_algorithms(True, warn_only=True)
    return torch.device("cuda", local)


def main(argv=None):
    args = parse(argv)
    device = setup()
    rank = dist.get_rank()
    if args.resume and args.opt != "kit":
        raise SystemExit("--resume reopens the kit's stores: --opt kit")
    model = build(args, device)
    opt = make_optimizer(args, model)
    start = 0
    if args.resume:
        start = resume_common(opt, device)
    elif args.load_dcp:
        start = load_dcp(model, opt, args.load_dcp)
    losses = []
    for step in range(start, args.steps):
        losses.append(mean_over_ranks(train_step(model, opt, step, args, device), device))
        if rank == 0:
            print("step {:3d}  loss {:.6f}".format(step + 1, losses[-1]), flush=True)
        if args.save_dcp and step + 1 == args.save_at:
            save_dcp(model, opt, args.save_dcp, step + 1)
        if args.kill_at and step + 1 == args.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    if args.out:
        torch.save(dict(weights=local_weights(model), losses=losses, start=start,
                        steps=args.steps), "{}.rank{}.pt".format(args.out, rank))
        if rank == 0:
            with open(args.out + ".json", "w") as f:
                json.dump(dict(vars(args), start=start, losses=losses,
                               world=dist.get_world_size(), torch=torch.__version__), f,
                          indent=1)
    if hasattr(opt, "close"):
        opt.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
