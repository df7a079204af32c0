"""Shared helpers of the Python tests: a deterministic small MLP, its data, and a training loop
that runs a torch.optim optimizer and a csdkit.torch optimizer side by side.

Run (ctest label quick does this with the build's package root):
    PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python
"""

import copy

import pytest
import torch

torch.set_num_threads(1)  # deterministic and polite on a shared machine


def pytest_configure(config):
    # ctest's python_pytest (label quick) runs -m "not nightly"; python_pytest_nightly the rest:
    # further variants of what a quick test already covers.
    config.addinivalue_line("markers", "nightly: a further variant, run by the nightly tests")

# Every test uses 2 emulated SmartSSDs (backend model). A store of a layout is split into
# shards of whole 65536-element blocks, one per device, so a single-group model needs more than
# 65536 parameters for 2 devices: the MLP below has 74753.
DEVICES = 2


class MLP(torch.nn.Module):
    def __init__(self, d_in=32, hidden=256):
        super().__init__()
        self.fc1 = torch.nn.Linear(d_in, hidden)
        self.fc2 = torch.nn.Linear(hidden, hidden)
        self.head = torch.nn.Linear(hidden, 1)

    def forward(self, x):
        return self.head(torch.tanh(self.fc2(torch.tanh(self.fc1(x))))).squeeze(-1)


def make_model(seed=0):
    torch.manual_seed(seed)
    return MLP()


def make_data(seed=1, n=128, d_in=32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g)
    y = torch.sin(x[:, :4].sum(1)) + 0.1 * x[:, 4]
    return x, y


def loss_of(model, x, y):
    return torch.nn.functional.mse_loss(model(x), y)


def max_rel_diff(model_a, model_b, scales=None):
    """max over parameter tensors of max|a - b| / scale, scale = max(max|b|, scales[i]).

    The inf-norm relative difference of each tensor. `scales` (the tensors' initial max|b|)
    keeps a tensor that passes through zero (the 1-element head.bias does) from turning a
    difference of 1e-9 into a large relative one."""
    worst = 0.0
    for i, (a, b) in enumerate(zip(model_a.parameters(), model_b.parameters())):
        d = (a.detach().double() - b.detach().double()).abs().max().item()
        s = b.detach().double().abs().max().item()
        if scales is not None:
            s = max(s, scales[i])
        worst = max(worst, d / s if s > 0 else d)
    return worst


def train_side_by_side(ref_model, kit_model, ref_opt, kit_opt, steps, x, y, schedulers=()):
    """Runs both; returns per-step (ref loss, kit loss, max relative parameter difference)."""
    rows = []
    scales = [p.detach().double().abs().max().item() for p in ref_model.parameters()]
    for _ in range(steps):
        for model, opt in ((ref_model, ref_opt), (kit_model, kit_opt)):
            opt.zero_grad(set_to_none=True)
            loss = loss_of(model, x, y)
            loss.backward()
            opt.step()
            if model is ref_model:
                ref_loss = loss.item()
            else:
                kit_loss = loss.item()
        for sched in schedulers:
            sched.step()
        rows.append((ref_loss, kit_loss, max_rel_diff(kit_model, ref_model, scales)))
    return rows


@pytest.fixture
def twin_models():
    ref = make_model()
    kit = copy.deepcopy(ref)
    return ref, kit
