"""torch.optim optimizers whose update runs in csdkit (optimizer state in the store, on the
devices): AdamW, Adam, SGD, Adagrad and Lion, with PyTorch's constructor arguments and defaults
plus `store=` (the store directory), `devices=`, `backend=` and the kit's other options; and
TopK, the gradient compressor they take as `compress=TopK(ratio)`. The data-parallel versions
of the optimizers, with their state partitioned over the ranks of a torch.distributed group,
are in csdkit.torch.distributed (imported on demand). See docs/trainer.md."""

from .compress import TopK
from .optim import SGD, Adagrad, Adam, AdamW, Lion

__all__ = ["AdamW", "Adam", "SGD", "Adagrad", "Lion", "TopK"]
