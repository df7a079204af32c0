"""Gradient compression on the trainer side: Top-K into the kit's block-sparse format.

`TopK(ratio)` turns one subgroup's gradient (a 1-D float32 tensor, on the GPU or the CPU, where
the gradient lives) into the stream the kit's kernel decodes (hls/include/csdkit/hls/sparse.h,
docs/sparse-format.md), with pure torch ops:

  * the k = ceil(ratio * n) entries (at least 1; TopKCount in sparse_codec.h) of largest
    magnitude are kept, found with torch.topk; a non-finite value (NaN, +-inf) ranks above every
    finite one, so it is always kept and the kit still sees the overflow and skips the step;
    ties at the k-th magnitude go to the lower indices (the reference compressor's rule);
  * blk: int32[NumBlocks(n) + 1], the cumulative count of kept entries per 65536-element block;
  * idx: int16, each kept entry's offset inside its block (the 16 bits of the unsigned offset:
    torch 1.x has no uint16), ascending;
  * val: the kept values rounded (round to nearest even) to the store's grad dtype.

The optimizers of csdkit.torch take it as `compress=TopK(ratio)` and keep the error-feedback
residual (see docs/trainer.md, "Compression").
"""

import math
import numbers

import torch

__all__ = ["TopK"]

BLOCK_BITS = 16
BLOCK_ELEMS = 1 << BLOCK_BITS


class TopK:
    """Top-K gradient compression with error feedback.

    Args:
        ratio (float): the fraction of each subgroup's elements sent, in (0, 1]; a subgroup of
            n elements sends ceil(ratio * n) of them, at least 1.
        error_feedback (bool): keep what was not sent (and what rounding to the grad dtype
            lost) in a float32 residual per parameter and add it to the next step's gradient.
    """

    def __init__(self, ratio, error_feedback=True):
        if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) \
                or not (math.isfinite(float(ratio)) and 0.0 < float(ratio) <= 1.0):
            raise ValueError("Invalid ratio: expected a finite number in (0, 1] (the fraction of "
                             "each subgroup's elements sent), found {!r}".format(ratio))
        if not isinstance(error_feedback, bool):
            raise ValueError("Invalid error_feedback: expected True or False, found {!r}"
                             .format(error_feedback))
        self.ratio = float(ratio)
        self.error_feedback = error_feedback

    def __repr__(self):
        return "TopK(ratio={!r}, error_feedback={!r})".format(self.ratio, self.error_feedback)

    def count(self, n):
        """Entries kept of n elements: ceil(ratio * n) (in double), at least 1, at most n
        (TopKCount of sparse_codec.h)."""
        if n == 0:
            return 0
        return int(min(max(math.ceil(self.ratio * n), 1), n))

    def select(self, acc):
        """The kept positions of `acc` (1-D float32), ascending (int64, on acc's device)."""
        n = acc.numel()
        k = self.count(n)
        if k == n:
            return torch.arange(n, device=acc.device)
        # Non-finite values rank above every finite magnitude (NaN and inf alike).
        key = torch.where(torch.isfinite(acc), acc.abs(),
                          torch.full_like(acc, float("inf")))
        thr = torch.topk(key, k, sorted=False).values.min()
        above = key > thr
        at = key == thr
        # Everything above the k-th magnitude, then the first of those equal to it.
        need = k - above.sum()
        keep = above | (at & (torch.cumsum(at, 0) <= need))
        return keep.nonzero().squeeze(1)

    def encode(self, acc, dtype):
        """Compresses one subgroup: `acc` (1-D float32, the gradient to send, any device) into
        (blk, idx, val, kept) on acc's device: the stream in the kit's format (see the module
        doc) and the kept positions (int64, ascending)."""
        if acc.dim() != 1 or acc.dtype != torch.float32:
            raise ValueError("acc: expected a 1-D float32 tensor, found dtype {} shape {}"
                             .format(acc.dtype, tuple(acc.shape)))
        if dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise ValueError("dtype: expected torch.float32, torch.float16 or torch.bfloat16, "
                             "found {}".format(dtype))
        n = acc.numel()
        kept = self.select(acc)
        val = acc[kept].to(dtype)
        blocks = (n + BLOCK_ELEMS - 1) >> BLOCK_BITS
        blk = torch.zeros(blocks + 1, dtype=torch.int64, device=acc.device)
        blk[1:] = torch.cumsum(torch.bincount(kept >> BLOCK_BITS, minlength=blocks), 0)
        off = kept & (BLOCK_ELEMS - 1)
        off = torch.where(off >= 1 << 15, off - BLOCK_ELEMS, off)  # uint16 bits as int16
        return blk.to(torch.int32), off.to(torch.int16), val, kept
