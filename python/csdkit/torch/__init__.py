"""torch.optim optimizers whose update runs in csdkit (optimizer state in the store, on the
devices): AdamW, Adam, SGD and Adagrad, with PyTorch's constructor arguments and defaults plus
`store=` (the store directory), `devices=` and `backend=`. See docs/trainer-python.md."""

from .optim import SGD, Adagrad, Adam, AdamW

__all__ = ["AdamW", "Adam", "SGD", "Adagrad"]
