#!/usr/bin/python3
"""The compressed state formats of docs/state-formats.md (q8, q8-bf16), in numpy, written from
that page alone: the quantization maps and their thresholds, blockwise quantization and
dequantization of a moment, Philox4x32-10 random bits and the stochastic rounding of θ to bf16.

It is the reference the kit's implementations (host model, RTL, OpenCL) are compared with bit for
bit, so it is deliberately plain: integer bit patterns where the contract speaks of bits, numpy
binary32 arithmetic (round to nearest even, IEEE subnormals) where it speaks of binary32
operations. The FTZ/DAZ policy is an argument where it matters (ftz=True).

    /usr/bin/python3 tests/reference/state_formats.py --tables   # the tables' SHA-256 and sizes
    /usr/bin/python3 tests/reference/state_formats.py --vectors F  # golden vectors (C++ tests)
"""

import argparse
import hashlib
import sys

import numpy as np

F32 = np.float32
BLOCK = 256
CANONICAL_NAN = 0x7FC00000
MIN_NORMAL = np.uint32(0x00800000).view(F32)  # 2^-126


def _decade_values(decades, per_decade_exp):
    """Binary32 values 10^(d-6) * (0.1 + 0.9 * (2j + 1) / 2^(n+1)) for d in `decades`, with
    n = per_decade_exp(d) and j = 0 .. 2^n - 1: computed in binary64 as written, then rounded
    once to binary32 (numpy's float64 -> float32 cast rounds to nearest even)."""
    out = []
    for d in decades:
        n = per_decade_exp(d)
        scale = float("1e%d" % (d - 6))  # the binary64 nearest to 10^(d-6)
        for j in range(2 ** n):
            out.append(scale * (0.1 + 0.9 * (2 * j + 1) / 2 ** (n + 1)))
    return np.array(out, dtype=np.float64).astype(F32)


def signed_magnitudes():
    """M[0..127]: 0, decades 1..6 with 2^d values each, 1."""
    mid = _decade_values(range(1, 7), lambda d: d)
    return np.concatenate([[F32(0)], mid, [F32(1)]]).astype(F32)


def unsigned_map():
    """U[0..255]: 0, decades 0..6 with 2^(d+1) values each, 1."""
    mid = _decade_values(range(0, 7), lambda d: d + 1)
    return np.concatenate([[F32(0)], mid, [F32(1)]]).astype(F32)


def thresholds(table):
    """T[i] = binary32 nearest (ties to even) to (table[i] + table[i+1]) / 2, exact in binary64."""
    t = table.astype(np.float64)
    return ((t[:-1] + t[1:]) / 2.0).astype(F32)


M = signed_magnitudes()
U = unsigned_map()
TM = thresholds(M)
TU = thresholds(U)


def table_digests():
    return {name: hashlib.sha256(arr.astype("<f4").tobytes()).hexdigest()
            for name, arr in (("M", M), ("TM", TM), ("U", U), ("TU", TU))}


# -- binary32 helpers -----------------------------------------------------------------------


def bits(x):
    return np.asarray(x, dtype=F32).view(np.uint32)


def from_bits(b):
    return np.asarray(b, dtype=np.uint32).view(F32)


def _daz(x, ftz):
    """DAZ: subnormal operands read as zero of the same sign."""
    x = np.asarray(x, dtype=F32)
    if not ftz:
        return x
    b = bits(x)
    sub = ((b & 0x7F800000) == 0) & ((b & 0x007FFFFF) != 0)
    return from_bits(np.where(sub, b & 0x80000000, b))


def _ftz(x, ftz):
    """FTZ: a subnormal result becomes zero of the same sign (after rounding)."""
    return _daz(x, ftz)


def _mul(a, b, ftz):
    with np.errstate(all="ignore"):
        r = (_daz(a, ftz) * _daz(b, ftz)).astype(F32)
    return _canon(_ftz(r, ftz))


def _canon(x):
    """Every NaN result is the canonical quiet NaN (numeric-contract.md)."""
    x = np.asarray(x, dtype=F32)
    return np.where(np.isnan(x), from_bits(np.uint32(CANONICAL_NAN)), x).astype(F32)


# -- dequantization and quantization of one moment -----------------------------------------


def dequantize(codes, absmax, signed, ftz=False):
    """codes: uint8 array of a whole number of blocks; absmax: binary32, one per block.
    Returns binary32 values: (-1)^sign * (M[k] * a) (signed) or U[c] * a (unsigned)."""
    codes = np.asarray(codes, dtype=np.uint8)
    a = np.repeat(np.asarray(absmax, dtype=F32), BLOCK)[:codes.size]
    if signed:
        mag = _mul(M[codes & 0x7F], a, ftz)
        neg = (codes & 0x80) != 0
        return from_bits(np.where(neg, bits(mag) ^ 0x80000000, bits(mag)))
    return _mul(U[codes], a, ftz)


def quantize_block(x, signed, ftz=False):
    """One block's new binary32 values (up to 256; a partial block only where a test wants
    one) -> (codes uint8, absmax binary32), by the contract's steps 1-5."""
    x = np.asarray(x, dtype=F32)
    xb = bits(x)
    if not np.all(np.isfinite(x)):
        return np.zeros(x.size, dtype=np.uint8), from_bits(np.uint32(CANONICAL_NAN))[()]
    xr = _daz(x, ftz)                      # the values as read under the policy
    mag_in = from_bits(bits(xr) & 0x7FFFFFFF)
    a = mag_in.max() if x.size else F32(0)
    sign = ((xb >> 31) & 1).astype(np.uint8) if signed else np.zeros(x.size, dtype=np.uint8)
    if a < MIN_NORMAL:                     # zero or subnormal absmax: the tiny block
        return (sign << 7).astype(np.uint8), F32(0)
    with np.errstate(all="ignore"):
        r = (F32(1) / a).astype(F32)       # one binary32 division, round to nearest even
    q = _mul(mag_in, r, ftz)
    table = TM if signed else TU
    # k = the number of thresholds <= q (a q on a threshold goes to the larger magnitude)
    k = np.searchsorted(table, q, side="right").astype(np.int64)
    nonzero = mag_in != 0
    k = np.where(nonzero & (k == 0), 1, k)
    if signed:
        return ((sign.astype(np.int64) << 7) | k).astype(np.uint8), F32(a)
    return k.astype(np.uint8), F32(a)


def quantize(x, signed, ftz=False):
    """A moment of a whole number of blocks -> (codes, absmax per block)."""
    x = np.asarray(x, dtype=F32)
    if x.size % BLOCK:
        raise ValueError("quantize: expected a whole number of %d-element blocks, found %d "
                         "elements" % (BLOCK, x.size))
    codes = np.empty(x.size, dtype=np.uint8)
    absmax = np.empty(x.size // BLOCK, dtype=F32)
    for b in range(x.size // BLOCK):
        codes[b * BLOCK:(b + 1) * BLOCK], absmax[b] = quantize_block(
            x[b * BLOCK:(b + 1) * BLOCK], signed, ftz)
    return codes, absmax


# -- Philox4x32-10 and the stochastic rounding of theta --------------------------------------

_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK = 0xFFFFFFFF


def philox4x32_10(ctr, key):
    """ctr: uint64 array (N, 4) of 32-bit words, key: (k0, k1). Returns (N, 4) uint64 words."""
    c = np.array(ctr, dtype=np.uint64).reshape(-1, 4).copy()
    k0, k1 = np.uint64(key[0] & _MASK), np.uint64(key[1] & _MASK)
    m0, m1 = np.uint64(_M0), np.uint64(_M1)
    mask = np.uint64(_MASK)
    for rnd in range(10):
        if rnd:
            k0 = (k0 + np.uint64(_W0)) & mask
            k1 = (k1 + np.uint64(_W1)) & mask
        p0 = c[:, 0] * m0                 # < 2^64: exact in uint64
        p1 = c[:, 2] * m1
        hi0, lo0 = p0 >> np.uint64(32), p0 & mask
        hi1, lo1 = p1 >> np.uint64(32), p1 & mask
        c = np.stack([hi1 ^ c[:, 1] ^ k0, lo1, hi0 ^ c[:, 3] ^ k1, lo0], axis=1)
    return c


def random16(seed, step, index):
    """R for elements `index` (store element indices, uint64) of the step `step` being
    committed, under the store's 64-bit `seed`: 16-bit values (uint32 array)."""
    index = np.asarray(index, dtype=np.uint64)
    e = index >> np.uint64(3)
    s = np.uint64(step)
    mask = np.uint64(_MASK)
    ctr = np.stack([e & mask, e >> np.uint64(32), np.full_like(e, s & mask),
                    np.full_like(e, s >> np.uint64(32))], axis=1)
    w = philox4x32_10(ctr, (int(seed) & _MASK, int(seed) >> 32))
    j = (index & np.uint64(7)).astype(np.int64)
    word = w[np.arange(index.size), j >> 1]
    shift = (16 * (j & 1)).astype(np.uint64)
    return ((word >> shift) & np.uint64(0xFFFF)).astype(np.uint32)


def round_bf16_stochastic(theta, r16):
    """binary32 theta' -> bf16 bit patterns (uint16): NaN -> 0x7fc0, else (bits + R) >> 16."""
    b = bits(theta).astype(np.uint64)
    out = ((b + np.asarray(r16, dtype=np.uint64)) >> np.uint64(16)).astype(np.uint16)
    return np.where(np.isnan(np.asarray(theta, dtype=F32)), np.uint16(0x7FC0), out)


def round_bf16_nearest_even(theta):
    """binary32 -> bf16 (numeric-contract.md): nearest even, NaN keeps sign and top 7 payload
    bits with the quiet bit set. Used for imports into q8-bf16 (no random bits)."""
    b = bits(theta).astype(np.uint64)
    nan = np.isnan(np.asarray(theta, dtype=F32))
    rounded = ((b + np.uint64(0x7FFF) + ((b >> np.uint64(16)) & np.uint64(1)))
               >> np.uint64(16)).astype(np.uint16)
    quiet = ((b >> np.uint64(16)) | np.uint64(0x0040)).astype(np.uint16)
    return np.where(nan, quiet, rounded)


def bf16_to_f32(h):
    return from_bits(np.asarray(h, dtype=np.uint32) << 16)


# -- golden vectors for the kit's implementations --------------------------------------------

VECTOR_BLOCKS = 64       # blocks per (map, policy) case
VECTOR_RANDOM = 4096     # random16 elements
VECTOR_THETA = 4096      # stochastic roundings
VECTOR_SEED = 0x0123456789ABCDEF
VECTOR_STEP = 0x100000007


def _vector_blocks(rng, signed):
    """VECTOR_BLOCKS blocks of 256 binary32 values: the corner cases of the contract first
    (zeros of both signs, a subnormal-only block, a NaN and an infinity, values exactly on the
    thresholds with absmax 1, the smallest and largest magnitudes, huge and tiny absmax), then
    random values over many decades with random signs (non-negative for the unsigned map)."""
    table = TM if signed else TU
    blocks = [np.zeros(BLOCK, F32),
              from_bits(np.where(np.arange(BLOCK) % 2, 0x80000000, 0).astype(np.uint32)),
              from_bits(rng.integers(1, 0x00800000, BLOCK).astype(np.uint32)),   # subnormals
              np.concatenate([np.ones(BLOCK - 1, F32), [F32(np.nan)]]).astype(F32),
              np.concatenate([np.ones(BLOCK - 1, F32), [F32(np.inf)]]).astype(F32)]
    on = np.zeros(BLOCK, F32)
    on[0] = 1
    on[1:1 + table.size] = table[:BLOCK - 1]
    blocks.append(on)
    blocks.append(np.concatenate([[F32(3e38)], np.full(BLOCK - 1, F32(1e-30))]).astype(F32))
    blocks.append(np.concatenate([[F32(2.0 ** -126)],
                                  from_bits(rng.integers(1, 0x00800000, BLOCK - 1)
                                            .astype(np.uint32))]).astype(F32))
    while len(blocks) < VECTOR_BLOCKS:
        mag = 10.0 ** rng.uniform(-12, 4, BLOCK)
        x = (mag * rng.uniform(0.5, 1.0, BLOCK)).astype(F32)
        x[rng.random(BLOCK) < 0.1] = 0
        if signed:
            x = np.where(rng.random(BLOCK) < 0.5, -x, x).astype(F32)
        blocks.append(x)
    return np.concatenate(blocks).astype(F32)


def write_vectors(path):
    """The little-endian golden vectors tests/state_q8_test.cpp reads, in this order: for each
    case (signed map, then unsigned; IEEE, then FTZ) the inputs x (VECTOR_BLOCKS · 256 binary32),
    the codes (uint8), the absmax values (binary32) and the dequantized codes (binary32); then
    VECTOR_RANDOM element indices (uint64) with their random16(VECTOR_SEED, VECTOR_STEP, .)
    (uint32); then VECTOR_THETA binary32 values θ', R (uint32) and their stochastic bf16
    (uint16)."""
    rng = np.random.default_rng(28)
    parts = []
    for signed in (True, False):
        x = _vector_blocks(rng, signed)
        for ftz in (False, True):
            codes, absmax = quantize(x, signed, ftz)
            parts += [x.astype("<f4"), codes, absmax.astype("<f4"),
                      dequantize(codes, absmax, signed, ftz).astype("<f4")]
    idx = np.concatenate([np.arange(64, dtype=np.uint64),
                          rng.integers(0, 2 ** 40, VECTOR_RANDOM - 65).astype(np.uint64),
                          np.array([2 ** 64 - 1], dtype=np.uint64)])
    parts += [idx.astype("<u8"), random16(VECTOR_SEED, VECTOR_STEP, idx).astype("<u4")]
    theta = from_bits(rng.integers(0, 2 ** 32, VECTOR_THETA, dtype=np.uint64).astype(np.uint32))
    theta[:4] = [F32(0), F32(-0.0), F32(np.inf), F32(3.3895314e38)]     # the largest bf16s
    theta = _canon(theta)                                                 # theta' is canonical
    r16 = rng.integers(0, 2 ** 16, VECTOR_THETA).astype(np.uint32)
    r16[:2] = 0xFFFF
    parts += [theta.astype("<f4"), r16.astype("<u4"),
              round_bf16_stochastic(theta, r16).astype("<u2")]
    with open(path, "wb") as f:
        for part in parts:
            f.write(np.ascontiguousarray(part).tobytes())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", action="store_true",
                    help="print the four tables' sizes, ends and SHA-256 digests")
    ap.add_argument("--vectors", metavar="FILE",
                    help="write the golden vectors of tests/state_q8_test.cpp to FILE")
    args = ap.parse_args(argv)
    if args.vectors:
        write_vectors(args.vectors)
        return 0
    if not args.tables:
        ap.print_help()
        return 2
    for name, arr in (("M", M), ("TM", TM), ("U", U), ("TU", TU)):
        print("%-2s %3d values  [%s .. %s]  sha256 %s" % (
            name, arr.size, arr[1 if name in ("M", "U") else 0], arr[-1],
            table_digests()[name]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
