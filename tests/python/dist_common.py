"""Shared by test_distributed.py and dist_worker.py: the model, its param groups and the
gradient each rank contributes at each step.

The gradient of rank r at step s is the MLP's gradient on micro-batch (s, r), rounded to a grid
of 2^-12 and clamped to +-32 grid steps (|g| <= 2^-7). Sums of up to 4 such values are exact in
float32, float16 and bfloat16 in any order, so the ranks' reduction (whatever its order and
dtype) and the single process's sum give the same averaged gradient bit for bit; that isolates
what is tested (partition, agreement, gather) from the reduction's rounding.
"""

import torch

GRID = 2.0 ** 12


class MLP(torch.nn.Module):
    def __init__(self, d_in=16, hidden=128):
        super().__init__()
        self.fc1 = torch.nn.Linear(d_in, hidden)
        self.fc2 = torch.nn.Linear(hidden, hidden)
        self.head = torch.nn.Linear(hidden, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


def make_model(dtype=torch.float32, hidden=128):
    torch.manual_seed(0)
    return MLP(hidden=hidden).to(dtype)


def param_groups(model, lr=1e-2):
    """Two groups (lr, weight decay), so that a rank's slice may hold one or both."""
    body = [p for n, p in model.named_parameters() if not n.startswith("head.")]
    head = [p for n, p in model.named_parameters() if n.startswith("head.")]
    return [dict(params=body), dict(params=head, lr=lr * 0.3, weight_decay=0.0)]


def rank_grads(model, step, rank):
    """Rank `rank`'s gradient at `step`: one tensor per parameter (the parameters' dtype)."""
    shadow = MLP(hidden=model.fc1.out_features)
    with torch.no_grad():
        for a, b in zip(shadow.parameters(), model.parameters()):
            a.copy_(b.float())
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(16, 16, generator=g)
    y = torch.randn(16, 3, generator=g)
    loss = torch.nn.functional.mse_loss(shadow(x), y)
    grads = torch.autograd.grad(loss, list(shadow.parameters()))
    return [(torch.round(q * GRID).clamp_(-32, 32) / GRID).to(p.dtype)
            for q, p in zip(grads, model.parameters())]


def averaged_grads(model, step, world, none=None):
    """What the single process is given: the sum of the ranks' gradients (rank order, float32;
    exact) divided by the world size. `none`: {(tensor, rank)} whose gradient is None (zero in
    the sum); a tensor None on every rank is None."""
    none = none or set()
    per_rank = [rank_grads(model, step, r) for r in range(world)]
    out = []
    for t, p in enumerate(model.parameters()):
        if all((t, r) in none for r in range(world)):
            out.append(None)
            continue
        s = torch.zeros(p.shape, dtype=torch.float32)
        for r in range(world):
            if (t, r) not in none:
                s += per_rank[r][t].float()
        out.append((s / world).to(p.dtype))
    return out


def piece_residuals(opt):
    """A csdkit.torch.distributed optimizer's Top-K residuals, per piece (t, a, b) of its rank's
    slice: (a copy of the residual, its loss scale, its range in the parameter) or None; None
    before its store is opened (no slice yet)."""
    if getattr(opt, "_plan_", None) is None:
        return None
    out = []
    for t, _, _ in opt._plan_["pieces"]:
        st = opt.state.get(opt._params[t]) or {}
        res = st.get("topk_residual")
        out.append(None if res is None else (res.clone(), st["topk_residual_scale"],
                                             tuple(st["topk_residual_range"])))
    return out
