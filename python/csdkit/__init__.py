"""csdkit: optimizer steps on (emulated) computational storage devices.

`csdkit.Session` is the C++ runtime's trainer session (the device set, the store of one model
and the scheduler; see docs/trainer.md); `csdkit.torch` holds torch.optim optimizers
built on it. Errors of a store (missing, corrupt, another model's) raise `csdkit.StoreError`
(a RuntimeError); a step that would store NaN or infinity raises `csdkit.DivergenceError` (a
RuntimeError) and commits nothing; bad arguments raise ValueError with what was expected and what was found.
"""

from ._csdkit import DivergenceError, Session, StoreError, __version__

__all__ = ["DivergenceError", "Session", "StoreError", "__version__"]
