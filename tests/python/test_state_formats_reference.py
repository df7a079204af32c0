"""The numpy reference of the compressed state formats (tests/reference/state_formats.py) against
its contract (docs/state-formats.md): the tables as pinned, quantization's rules (nearest by
threshold with ties to the larger magnitude, nothing non-zero becomes zero or changes sign, the
tiny and the non-finite block), and the random bits against the Random123 library's Philox (the
C++ header Debian ships, compiled here).

The tables' digests are pinned: a change to a table is a change of format, never an edit.
"""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import state_formats as sf  # noqa: E402

F32 = np.float32

DIGESTS = {
    "M": "ab0d969a783eb2749a8348aeaeea41e2549d869485637556db94ac8f478d58a0",
    "TM": "20a0bf2e6c586dfb9e4de9c979753d32407fada031127754233ac356509966ee",
    "U": "02a9b523750e21348029626da435f2adadb851b687d86349cd20752f9255de26",
    "TU": "d75f5bcab1a0c859f8dbc01955a7e15882205d7a8836ce370437f38b1f525775",
}


def test_tables_are_the_pinned_ones():
    assert sf.table_digests() == DIGESTS
    assert sf.M.size == 128 and sf.U.size == 256 and sf.TM.size == 127 and sf.TU.size == 255
    assert sf.M[0] == 0 and sf.M[127] == 1 and sf.U[0] == 0 and sf.U[255] == 1
    assert sf.M[1] == F32(3.25e-6) and sf.U[1] == F32(3.25e-7)
    for t, th in ((sf.M, sf.TM), (sf.U, sf.TU)):
        t64, th64 = t.astype(np.float64), th.astype(np.float64)
        assert np.all(t64[:-1] < th64) and np.all(th64 < t64[1:])


def _hex(x):
    return "0x%08x" % int(np.asarray(x, dtype=F32).view(np.uint32))


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_quantize_picks_the_nearest_value_by_threshold(signed):
    """Every q in a block with absmax 1 (r = 1 exactly) lands on the table entry whose threshold
    interval holds it; q exactly on a threshold takes the larger magnitude."""
    table, th = (sf.M, sf.TM) if signed else (sf.U, sf.TU)
    rng = np.random.default_rng(5)
    q = np.concatenate([th, np.nextafter(th, F32(0)), np.nextafter(th, F32(2)),
                        rng.random(2000, dtype=np.float32), table]).astype(F32)
    for start in range(0, q.size, 255):
        x = np.concatenate([[F32(1)], q[start:start + 255]]).astype(F32)  # absmax 1
        codes, a = sf.quantize_block(x, signed)
        assert a == 1
        k = (codes & 0x7F) if signed else codes
        for xi, ki in zip(x, k):
            lo = th[ki - 1] if ki > 0 else -np.inf
            hi = th[ki] if ki < th.size else np.inf
            if xi == 0:
                assert ki == 0
                continue
            # [lo, hi): on a threshold, the larger magnitude; never 0 for a non-zero value
            assert (lo <= xi < hi) or (ki == 1 and xi < th[0]), (
                "q %s -> index %d (thresholds %s, %s)" % (_hex(xi), ki, lo, hi))
        np.testing.assert_array_equal(sf.dequantize(codes, [a], signed)[:x.size],
                                      np.where(x == 0, F32(0), table[k]).astype(F32))


def test_signs_zeros_and_the_non_zero_rule():
    a = F32(3.0)
    tiny = F32(1e-30)   # far below M[1] * a: still not zero, still its sign
    x = np.array([a, -a, 0.0, -0.0, tiny, -tiny, 1e-7, -1e-7] + [0.5] * 248, dtype=F32)
    codes, absmax = sf.quantize_block(x, signed=True)
    assert absmax == a
    assert list(codes[:8]) == [0x7F, 0xFF, 0x00, 0x80, 0x01, 0x81, 0x01, 0x81]
    back = sf.dequantize(codes, [absmax], signed=True)
    assert back[2] == 0 and not np.signbit(back[2])
    assert back[3] == 0 and np.signbit(back[3])
    assert back[0] == a and back[1] == -a
    v = np.array([a, 0.0, tiny] + [0.5] * 253, dtype=F32)
    codes, _ = sf.quantize_block(v, signed=False)
    assert list(codes[:3]) == [0xFF, 0x00, 0x01]


def test_tiny_and_non_finite_blocks():
    sub = np.uint32(0x00000123).view(F32)   # subnormal
    x = np.array([sub, -sub] + [0.0] * 254, dtype=F32)
    codes, a = sf.quantize_block(x, signed=True)
    assert a == 0 and list(codes[:3]) == [0x00, 0x80, 0x00]
    assert np.all(sf.dequantize(codes, [a], signed=True) == 0)
    for bad in (np.inf, -np.inf, np.nan):
        x = np.array([1.0, bad] + [0.25] * 254, dtype=F32)
        codes, a = sf.quantize_block(x, signed=True)
        assert sf.bits(a) == sf.CANONICAL_NAN and not codes.any()
        assert np.all(np.isnan(sf.dequantize(codes, [a], signed=True)))


def test_ftz_policy_reads_subnormals_as_zero():
    """Under DAZ a subnormal element counts as zero: it takes code ±0, not the smallest
    magnitude, where IEEE keeps it non-zero."""
    sub = np.uint32(0x00000123).view(F32)
    x = np.array([1.0, sub] + [0.5] * 254, dtype=F32)
    ieee, _ = sf.quantize_block(x, signed=True, ftz=False)
    ftz, _ = sf.quantize_block(x, signed=True, ftz=True)
    assert ieee[1] == 0x01 and ftz[1] == 0x00


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_round_trip_error_is_within_half_a_gap(signed):
    """Dequantized values differ from the originals by at most half the gap between the two
    table entries around them (times absmax), plus binary32 rounding."""
    table = sf.M if signed else sf.U
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(256 * 64) * 10.0 ** rng.integers(-4, 3, 256 * 64)).astype(F32)
    if not signed:
        x = np.abs(x)
    codes, absmax = sf.quantize(x, signed)
    back = sf.dequantize(codes, absmax, signed).astype(np.float64)
    a = np.repeat(absmax, 256).astype(np.float64)
    q = np.abs(x.astype(np.float64)) / a
    idx = np.clip(np.searchsorted(table.astype(np.float64), q), 1, table.size - 1)
    gap = (table[idx].astype(np.float64) - table[idx - 1].astype(np.float64)) * a
    err = np.abs(back - x.astype(np.float64))
    floor = table[1].astype(np.float64) * a  # the non-zero rule may lift a value to U[1]/M[1]
    assert np.all(err <= np.maximum(gap / 2, floor) * (1 + 1e-6) + 1e-30)


def test_stochastic_rounding_to_bf16():
    th = np.array([1.0, 1.0 + 2 ** -9, -(1.0 + 2 ** -9), 3.0e38, np.inf, -np.inf, np.nan,
                   np.uint32(0x00000001).view(F32)], dtype=F32)
    lo = sf.round_bf16_stochastic(th, np.zeros(th.size, dtype=np.uint32))
    hi = sf.round_bf16_stochastic(th, np.full(th.size, 0xFFFF, dtype=np.uint32))
    assert list(lo) == [0x3F80, 0x3F80, 0xBF80, 0x7F61, 0x7F80, 0xFF80, 0x7FC0, 0x0000]
    assert list(hi) == [0x3F80, 0x3F81, 0xBF81, 0x7F62, 0x7F80, 0xFF80, 0x7FC0, 0x0001]
    # Unbiased: the mean of many roundings of one value is the value (within 4 sigma).
    x = F32(1.0 + 0.3 * 2 ** -7)
    r = sf.random16(seed=7, step=1, index=np.arange(1 << 16, dtype=np.uint64))
    got = sf.bf16_to_f32(sf.round_bf16_stochastic(np.full(r.size, x, dtype=F32), r))
    p = 0.3
    ulp = 2 ** -7
    mean = got.astype(np.float64).mean()
    assert abs(mean - float(x)) <= 4 * ulp * np.sqrt(p * (1 - p) / r.size)


def test_random_bits_are_counter_based():
    idx = np.arange(64, dtype=np.uint64)
    a = sf.random16(1, 5, idx)
    assert np.array_equal(a, sf.random16(1, 5, idx[::-1])[::-1])     # order-free
    assert np.array_equal(a[8:16], sf.random16(1, 5, idx[8:16]))      # any element alone
    assert not np.array_equal(a, sf.random16(1, 6, idx))               # the step matters
    assert not np.array_equal(a, sf.random16(2, 5, idx))               # the seed matters
    big = np.array([2 ** 35 + 3], dtype=np.uint64)                     # e >= 2^32
    assert sf.random16(1, 2 ** 33, big).dtype == np.uint32


PHILOX_CPP = r"""
#include <Random123/philox.h>
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {
  // argv: k0 k1 then counters as c0 c1 c2 c3 ... ; prints the outputs in hex
  r123::Philox4x32_R<10> g;
  r123::Philox4x32_R<10>::key_type k = {{(uint32_t)strtoul(argv[1], 0, 0),
                                         (uint32_t)strtoul(argv[2], 0, 0)}};
  for (int i = 3; i + 3 < argc; i += 4) {
    r123::Philox4x32_R<10>::ctr_type c = {{(uint32_t)strtoul(argv[i], 0, 0),
        (uint32_t)strtoul(argv[i + 1], 0, 0), (uint32_t)strtoul(argv[i + 2], 0, 0),
        (uint32_t)strtoul(argv[i + 3], 0, 0)}};
    auto r = g(c, k);
    std::printf("%08x %08x %08x %08x\n", r[0], r[1], r[2], r[3]);
  }
  return 0;
}
"""


def test_philox_matches_random123(tmp_path):
    if not os.path.exists("/usr/include/Random123/philox.h"):
        pytest.skip("Random123's philox.h is not installed (Debian: librandom123-dev; "
                    "scripts/setup installs it)")
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "philox.cpp"
    src.write_text(PHILOX_CPP)
    exe = tmp_path / "philox"
    subprocess.run([cxx, "-std=c++17", "-O1", "-o", str(exe), str(src)], check=True)
    rng = np.random.default_rng(3)
    for key in ((0, 0), (0xFFFFFFFF, 0xFFFFFFFF), (0x243F6A88, 0x85A308D3),
                tuple(int(v) for v in rng.integers(0, 2 ** 32, 2))):
        ctrs = np.concatenate([np.array([[0, 0, 0, 0], [0xFFFFFFFF] * 4], dtype=np.uint64),
                               rng.integers(0, 2 ** 32, (30, 4)).astype(np.uint64)])
        out = subprocess.run([str(exe), hex(key[0]), hex(key[1])] +
                             [hex(int(v)) for v in ctrs.reshape(-1)], check=True,
                             capture_output=True, text=True).stdout.split("\n")
        mine = sf.philox4x32_10(ctrs, key)
        for row, line in zip(mine, out):
            assert " ".join("%08x" % int(v) for v in row) == line, (
                "key %s counter %s" % (key, row))
