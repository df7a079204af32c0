"""What the four trainer examples share: the model, the data, the options, the optimizers, the
kill switch and the result files.

  * The model: a GPT-2 of 2 layers, 64 wide, 2 heads, 256 tokens, no dropout (the model of
    tests/python/test_integrations.py): transformers' GPT2LMHeadModel where transformers is
    installed, else (--model plain) the same shapes written out in PyTorch, so that the plain
    loop of compiled.py also runs where only torch is. Both take input_ids= and labels= and
    return an object whose .loss is the next-token cross entropy.
  * The data: micro-batch i is a fixed function of i alone (micro_batch(i)), so a run resumed
    at step K sees the batches an uninterrupted run sees after step K.
  * The optimizers: --optimizer kit is csdkit.torch.AdamW on --kit-devices emulated devices
    (store --store), --optimizer torch is torch.optim.AdamW (foreach=False); both lr 1e-3,
    weight decay 0.01.
  * --kill-at S: after step S has completed (the optimizer stepped; the kit's store committed
    it), the process sends itself SIGKILL from a trainer callback: no handler, no flush, no
    close() -- what an OOM kill or a lost node does.
  * <out>/losses.json: the steps this process ran and their training losses (the mean over
    the step's micro-batches), the step it resumed from, the kit store's committed step at the
    end; <out>/weights.pt: the final model weights as {name: CPU tensor}.

Exit status 2: options refused (a message on stderr says which and why).
"""

import argparse
import json
import os
import signal
import sys
import types
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

REPO_ROOT = Path(__file__).resolve().parents[2]

VOCAB = 256
CONTEXT = 32     # tokens per sequence
BATCH = 8        # sequences per micro-batch
POOL_BATCHES = 8  # micro-batches before the data repeats (64 sequences, as the test's)
LR = 1e-3
WEIGHT_DECAY = 0.01
CLIP = 1.0       # every example clips the global gradient norm to 1.0 the trainer's way


def die(script, message):
    """Refuses to go on: the message on stderr, exit status 2."""
    print("{}: {}".format(script, message), file=sys.stderr)
    sys.exit(2)


def import_csdkit():
    """csdkit.torch from sys.path, else from this checkout's build (build/release/python)."""
    try:
        import csdkit.torch  # noqa: F401
    except ImportError:
        build = REPO_ROOT / "build" / "release" / "python"
        if not (build / "csdkit").is_dir():
            die(Path(sys.argv[0]).name, "cannot import csdkit; expected it on sys.path or in "
                "{} (pip install . or build the project first)".format(build))
        sys.path.insert(0, str(build))
        import csdkit.torch  # noqa: F401
    return sys.modules["csdkit.torch"]


# -- data --------------------------------------------------------------------------------------

def _pool():
    """64 sequences counting up mod 256 from random starts, every 3rd token repeated (the
    test's token_batches): a next-token task a small model learns within a few steps."""
    g = torch.Generator().manual_seed(1)
    start = torch.randint(0, VOCAB, (POOL_BATCHES * BATCH, 1), generator=g)
    pos = torch.arange(CONTEXT)
    return ((start + pos - pos // 3) % VOCAB).long()


_POOL = _pool()


def micro_batch(i):
    """Micro-batch i (int >= 0): a (BATCH, CONTEXT) int64 tensor of token ids, a function of i
    alone (the pool's batches in order, repeating every POOL_BATCHES)."""
    j = i % POOL_BATCHES
    return _POOL[j * BATCH:(j + 1) * BATCH].clone()


class MicroBatches(torch.utils.data.Dataset):
    """The rows of micro-batches 0 .. n-1 in order: a DataLoader over it with batch_size=BATCH
    and shuffle=False yields micro_batch(0), micro_batch(1), ..."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n * BATCH

    def __getitem__(self, k):
        if not -len(self) <= k < len(self):  # iteration stops here (a for loop over it)
            raise IndexError("MicroBatches: row {} of {}".format(k, len(self)))
        k %= len(self)
        return micro_batch(k // BATCH)[k % BATCH]


# -- the model ---------------------------------------------------------------------------------

class _Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.attn_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        # Written out (torch 1.13 has no scaled_dot_product_attention).
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        att = att.masked_fill(mask[:t, :t], float("-inf")).softmax(dim=-1)
        x = x + self.attn_proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class PlainGPT(nn.Module):
    """GPT-2's shapes in plain PyTorch: token and position embeddings, pre-LayerNorm blocks,
    a final LayerNorm and an output head tied to the token embedding (120,576 parameters at
    the defaults). forward(input_ids, labels=None) returns .logits and, with labels, .loss
    (labels shifted by one, as transformers does)."""

    def __init__(self, vocab=VOCAB, positions=64, d=64, layers=2, heads=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(positions, d)
        self.blocks = nn.ModuleList(_Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.register_buffer("mask", torch.ones(positions, positions).triu(1).bool(),
                             persistent=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, input_ids, labels=None):
        t = input_ids.shape[1]
        x = self.wte(input_ids) + self.wpe(torch.arange(t, device=input_ids.device))
        for block in self.blocks:
            x = block(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                   labels[:, 1:].reshape(-1))
        return types.SimpleNamespace(loss=loss, logits=logits)


def have_transformers():
    import importlib.util
    return importlib.util.find_spec("transformers") is not None


def make_gpt(kind="auto"):
    """The model with seed-0 weights: kind 'hf' (transformers' GPT2LMHeadModel), 'plain'
    (PlainGPT) or 'auto' (hf where transformers is installed)."""
    if kind == "auto":
        kind = "hf" if have_transformers() else "plain"
    torch.manual_seed(0)
    if kind == "plain":
        return PlainGPT()
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=2,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(cfg)


# -- options -----------------------------------------------------------------------------------

def parser(description, precisions, accumulate=False):
    """The options every example takes. `precisions`: (choices, default on CPU, default on
    CUDA, the choices that run on CPU). `accumulate`: offer --accumulate."""
    choices, cpu_default, cuda_default, _ = precisions
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--optimizer", choices=("kit", "torch"), default="kit",
                   help="csdkit.torch.AdamW or torch.optim.AdamW (default kit)")
    p.add_argument("--store", type=Path,
                   help="the kit's store directory (required with --optimizer kit; reused by "
                        "--resume)")
    p.add_argument("--kit-devices", type=int, default=2,
                   help="emulated devices of a new store (default 2)")
    p.add_argument("--steps", type=int, default=20, help="optimizer steps in all (default 20)")
    p.add_argument("--out", type=Path, required=True,
                   help="losses.json, weights.pt and the trainer's checkpoints go here")
    p.add_argument("--save-every", type=int, default=0, metavar="K",
                   help="the trainer's checkpoint every K steps (default 0: none)")
    p.add_argument("--kill-at", type=int, metavar="S",
                   help="SIGKILL this process once step S has completed")
    p.add_argument("--resume", action="store_true",
                   help="resume from the latest of the trainer's checkpoints under --out")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--precision", choices=choices,
                   help="default {} on CPU, {} on CUDA".format(cpu_default, cuda_default))
    p.add_argument("--model", choices=("auto", "hf", "plain"), default="auto",
                   help="transformers' GPT-2 (hf), the same shapes in plain PyTorch, or hf "
                        "where transformers is installed (default auto)")
    if accumulate:
        p.add_argument("--accumulate", type=int, default=1, metavar="A",
                       help="micro-batches per optimizer step (default 1)")
    return p


def check_args(p, args, precisions):
    """Refuses what cannot run (parser.error: exit status 2) and fills in defaults."""
    _, cpu_default, cuda_default, cpu_ok = precisions
    if args.optimizer == "kit" and args.store is None:
        p.error("--optimizer kit needs --store DIR (the kit's store)")
    if args.steps < 1:
        p.error("--steps: expected >= 1, found {}".format(args.steps))
    if args.save_every < 0:
        p.error("--save-every: expected >= 0, found {}".format(args.save_every))
    if args.kill_at is not None and not 1 <= args.kill_at < args.steps:
        p.error("--kill-at: expected a step in 1 .. {} (before the last), found {}"
                .format(args.steps - 1, args.kill_at))
    if getattr(args, "accumulate", 1) < 1:
        p.error("--accumulate: expected >= 1, found {}".format(args.accumulate))
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch.cuda.is_available() is False here")
    if args.precision is None:
        args.precision = cpu_default if args.device == "cpu" else cuda_default
    if args.device == "cpu" and args.precision not in cpu_ok:
        p.error("--precision {}: expected one of {} on CPU".format(args.precision,
                                                                   ", ".join(cpu_ok)))
    if args.model == "hf" and not have_transformers():
        p.error("--model hf: transformers is not installed (use --model plain)")
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def make_optimizer(args, params):
    """AdamW over `params` (tensors or param-group dicts), the kit's or torch.optim's."""
    if args.optimizer == "kit":
        ct = import_csdkit()
        return ct.AdamW(params, lr=LR, weight_decay=WEIGHT_DECAY, store=args.store,
                        devices=args.kit_devices)
    return torch.optim.AdamW(params, lr=LR, weight_decay=WEIGHT_DECAY, foreach=False)


def kit_kwargs(args):
    """The kit's keyword arguments, for trainers that build the optimizer themselves."""
    return dict(store=args.store, devices=args.kit_devices)


def unwrap_optimizer(opt):
    """The optimizer inside a trainer's wrapper (Accelerate's AcceleratedOptimizer keeps it in
    .optimizer)."""
    while hasattr(opt, "optimizer") and isinstance(opt.optimizer, torch.optim.Optimizer):
        opt = opt.optimizer
    return opt


def finish_kit(opt):
    """The kit store's committed step, after which the store is closed (its lock released);
    None for torch.optim."""
    opt = unwrap_optimizer(opt)
    session = getattr(opt, "session", None)
    if not hasattr(opt, "close"):
        return None
    step = session.step_count if session is not None else None
    opt.close()
    return step


# -- kill, results -----------------------------------------------------------------------------

def kill_self():
    """SIGKILL to this process: nothing after this line runs (no handler, no atexit)."""
    os.kill(os.getpid(), signal.SIGKILL)


class StepLosses:
    """Training losses per optimizer step: add(step, loss) for each micro-batch; a step's loss
    is the mean of its micro-batches'."""

    def __init__(self):
        self._sums = {}

    def add(self, step, loss):
        total, n = self._sums.get(step, (0.0, 0))
        self._sums[step] = (total + float(loss), n + 1)

    def steps(self):
        return sorted(self._sums)

    def losses(self):
        return [self._sums[s][0] / self._sums[s][1] for s in self.steps()]


def write_results(args, trainer, log, model, resumed_from, store_step, **extra):
    """<out>/losses.json and <out>/weights.pt (see the module's docstring)."""
    weights = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    torch.save(weights, args.out / "weights.pt")
    result = dict(trainer=trainer, optimizer=args.optimizer, device=args.device,
                  precision=args.precision, steps=log.steps(), losses=log.losses(),
                  resumed_from=resumed_from, store_step=store_step,
                  torch=torch.__version__, **extra)
    tmp = args.out / "losses.json.tmp"
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, args.out / "losses.json")
    print("{}: {} steps {}..{}, loss {:.4f} -> {:.4f}{}".format(
        trainer, len(result["steps"]), result["steps"][0], result["steps"][-1],
        result["losses"][0], result["losses"][-1],
        "" if resumed_from is None else ", resumed from step {}".format(resumed_from)))


def latest(paths, step_of):
    """The (step, path) of the highest step among `paths` (step_of(path) -> int or None)."""
    found = [(step_of(p), p) for p in paths]
    found = [(s, p) for s, p in found if s is not None]
    return max(found) if found else (None, None)
