#!/usr/bin/python3
"""Replays a dumped updater launch (`csdkit kernel --dump DIR`, `csdkit step --dump-launches`) in
numpy, from the documentation alone — the rules' textbook forms and operands of
docs/optimizers.md, the binary32 contract of docs/numeric-contract.md, the state formats of
docs/state-formats.md (tests/reference/state_formats.py), the status word of
docs/kernel-interface.md — and compares every output buffer of the dump with it, bit for bit.

    /usr/bin/python3 tests/reference/replay.py DIR [DIR ...]

Exit 0 when every output of every directory is identical, 1 on a difference (the buffer, the
first differing element, expected and found in hex), 2 on a directory it cannot read.
"""

import json
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import state_formats as sf  # noqa: E402

F32 = np.float32
NAN = sf.from_bits(np.uint32(sf.CANONICAL_NAN))[()]
EXP = 0x7F800000


class Fp:
    """The contract's binary32 operations under one policy (IEEE, or FTZ/DAZ)."""

    def __init__(self, ftz):
        self.ftz = ftz

    def _in(self, x):
        return sf._daz(np.asarray(x, dtype=F32), self.ftz)

    def _out(self, x):
        return sf._canon(sf._ftz(np.asarray(x, dtype=F32), self.ftz))

    def add(self, a, b):
        with np.errstate(all="ignore"):
            return self._out(self._in(a) + self._in(b))

    def sub(self, a, b):
        with np.errstate(all="ignore"):
            return self._out(self._in(a) - self._in(b))

    def mul(self, a, b):
        with np.errstate(all="ignore"):
            return self._out(self._in(a) * self._in(b))

    def div(self, a, b):
        with np.errstate(all="ignore"):
            return self._out(self._in(a) / self._in(b))

    def sqrt(self, a):
        with np.errstate(all="ignore"):
            return self._out(np.sqrt(self._in(a)))

    def sign(self, a):
        b = sf.bits(self._in(a))
        mag = b & 0x7FFFFFFF
        one = (b & 0x80000000) | 0x3F800000
        return sf.from_bits(np.where(mag > EXP, sf.CANONICAL_NAN, np.where(mag == 0, 0, one))
                            .astype(np.uint32))


def widen_fp16(h):
    """fp16 -> binary32 exactly (VCVTPH2PS: NaN quieted, payload kept in the top bits)."""
    h = np.asarray(h, dtype=np.uint16)
    v = h.view(np.float16).astype(F32)
    nan = (h & 0x7C00) == 0x7C00
    nan &= (h & 0x03FF) != 0
    b = ((h.astype(np.uint32) & 0x8000) << 16) | 0x7F800000 | 0x00400000 | \
        ((h.astype(np.uint32) & 0x03FF) << 13)
    return np.where(nan, sf.from_bits(b), v).astype(F32)


def narrow_fp16(x):
    """binary32 -> fp16 bits, nearest even (F16C; NaN keeps sign and top payload, quieted)."""
    x = np.asarray(x, dtype=F32)
    with np.errstate(all="ignore"):
        h = x.astype(np.float16).view(np.uint16)
    b = sf.bits(x)
    nan = np.isnan(x)
    q = (((b >> 16) & 0x8000) | 0x7E00 | ((b >> 13) & 0x03FF)).astype(np.uint16)
    return np.where(nan, q, h)


def mode_fields(mode):
    return {
        "opt": mode & 7, "grad": (mode >> 3) & 3, "out": (mode >> 5) & 3,
        "sparse": bool(mode & (1 << 7)), "ftz": bool(mode & (1 << 8)), "l2": bool(mode & (1 << 9)),
        "momentum": bool(mode & (1 << 10)), "nesterov": bool(mode & (1 << 11)),
        "first": bool(mode & (1 << 12)), "state": (mode >> 13) & 3,
    }


DTYPES = {"fp32": np.uint32, "u32": np.uint32, "fp16": np.uint16, "bf16": np.uint16,
          "u16": np.uint16, "u8": np.uint8}


def load(d, entry):
    return np.fromfile(os.path.join(d, entry["file"]), dtype=DTYPES[entry["dtype"]])


def replay(d):
    """Returns a list of (buffer, message) differences."""
    with open(os.path.join(d, "problem.json")) as f:
        pj = json.load(f)
    args = {a["name"]: int(a["hex"], 16) for a in pj["args"] if "hex" in a}
    n, nnz = args["n"], args["nnz"]
    md = mode_fields(args["mode"])
    fp = Fp(md["ftz"])
    sc = {k: sf.from_bits(np.uint32(args[k]))[()] for k in
          ("unscale", "lr", "beta1", "omb1", "beta2", "omb2", "eps", "wd", "c1", "c2")}
    ins = {e["name"]: load(d, e) for e in pj["inputs"]}
    outs = {e["name"]: (e, load(d, e)) for e in pj["outputs"]}
    opt = md["opt"]  # 0 AdamW, 1 Adam, 2 SGD, 3 Adagrad, 4 Lion
    has_m = opt in (0, 1, 4) or (opt == 2 and md["momentum"])
    has_v = opt in (0, 1, 3)
    state = md["state"]
    q8 = state != 0
    blocks = n // sf.BLOCK

    # The state as binary32.
    theta = sf.bf16_to_f32(ins["theta"]) if state == 2 else sf.from_bits(ins["theta"])
    def moment(name, signed):
        if not q8:
            return sf.from_bits(ins[name])
        return sf.dequantize(ins[name], sf.from_bits(ins[name + "_absmax"]), signed, md["ftz"])
    m = moment("m", True) if has_m else np.zeros(n, F32)
    v = moment("v", False) if has_v else np.zeros(n, F32)

    # The gradient as binary32 (a sparse one scattered into zeros).
    kind = {0: "fp32", 1: "fp16", 2: "bf16"}[md["grad"]]
    raw = ins["grad"]
    vals = sf.from_bits(raw) if kind == "fp32" else (
        widen_fp16(raw) if kind == "fp16" else sf.bf16_to_f32(raw))
    if md["sparse"]:
        g_in = np.zeros(n, F32)
        blk, idx = ins["sp_blk"], ins["sp_idx"]
        for b in range(len(blk) - 1):
            k = np.arange(blk[b], blk[b + 1])
            g_in[b * 65536 + idx[k].astype(np.int64)] = vals[k]
    else:
        g_in = vals[:n]

    # The rules' textbook forms (docs/optimizers.md), one binary32 operation at a time.
    g = fp.mul(g_in, sc["unscale"])
    if opt in (0, 1):
        if md["l2"]:
            g = fp.add(g, fp.mul(sc["wd"], theta))
        m = fp.add(fp.mul(sc["beta1"], m), fp.mul(sc["omb1"], g))
        v = fp.add(fp.mul(sc["beta2"], v), fp.mul(sc["omb2"], fp.mul(g, g)))
        den = fp.add(fp.mul(fp.sqrt(v), sc["c2"]), sc["eps"])
        upd = fp.mul(sc["lr"], fp.div(m, den))
        theta = fp.sub(fp.mul(theta, sc["c1"]), upd) if opt == 0 else fp.sub(theta, upd)
    elif opt == 2:
        if md["l2"]:
            g = fp.add(g, fp.mul(sc["wd"], theta))
        if md["momentum"]:
            m = g if md["first"] else fp.add(fp.mul(sc["beta1"], m), fp.mul(sc["omb1"], g))
            g = fp.add(g, fp.mul(sc["beta1"], m)) if md["nesterov"] else m
        theta = fp.sub(theta, fp.mul(sc["lr"], g))
    elif opt == 3:
        if md["l2"]:
            g = fp.add(g, fp.mul(sc["wd"], theta))
        v = fp.add(v, fp.mul(g, g))
        theta = fp.sub(theta, fp.mul(sc["lr"], fp.div(g, fp.add(fp.sqrt(v), sc["eps"]))))
    else:
        c = fp.add(fp.mul(sc["beta1"], m), fp.mul(sc["omb1"], g))
        theta = fp.sub(fp.mul(theta, sc["c1"]), fp.mul(sc["lr"], fp.sign(c)))
        m = fp.add(fp.mul(sc["beta2"], m), fp.mul(sc["omb2"], g))

    # Stored as the format says; what reads back non-finite.
    exp = {}
    if state == 2:
        seed = args.get("seed_lo", 0) | (args.get("seed_hi", 0) << 32)
        step = args.get("step_lo", 0) | (args.get("step_hi", 0) << 32)
        index0 = args.get("index_lo", 0) | (args.get("index_hi", 0) << 32)
        r = sf.random16(seed, step, np.arange(n, dtype=np.uint64) + np.uint64(index0))
        t16 = sf.round_bf16_stochastic(theta, r)
        exp["theta"] = t16
        stored_theta = sf.bf16_to_f32(t16)
    else:
        exp["theta"] = sf.bits(theta)
        stored_theta = theta
    bad = (sf.bits(stored_theta) & EXP) == EXP
    count = int(bad.sum())
    for name, x, on, signed in (("m", m, has_m, True), ("v", v, has_v, False)):
        if not on:
            continue
        if q8:
            codes, amax = sf.quantize(x, signed, md["ftz"])
            exp[name], exp[name + "_absmax"] = codes, sf.bits(amax)
            nb = np.repeat((sf.bits(amax) & EXP) == EXP, sf.BLOCK)
        else:
            exp[name] = sf.bits(x)
            nb = (sf.bits(x) & EXP) == EXP
        bad |= nb
        count += int(nb.sum())
    if md["out"] == 1:
        exp["out16"] = narrow_fp16(stored_theta)
    elif md["out"] == 2:
        exp["out16"] = exp["theta"] if state == 2 else sf.round_bf16_nearest_even(stored_theta)

    # The status word.
    def crc(*parts):
        c = 0
        for p in parts:
            c = zlib.crc32(np.ascontiguousarray(p).tobytes(), c)
        return c
    def var_crc(arrs, name, on):
        if not on:
            return 0
        return crc(arrs[name], arrs[name + "_absmax"]) if q8 else crc(arrs[name])
    st = np.zeros(16, dtype=np.uint32)
    st[2] = n
    st[3] = nnz if md["sparse"] else 0
    in_arrs = {k: ins[k] for k in ins}
    st[4] = crc(ins["theta"])
    st[5] = var_crc(in_arrs, "m", has_m)
    st[6] = var_crc(in_arrs, "v", has_v)
    st[7] = crc(exp["theta"].astype(ins["theta"].dtype))
    out_arrs = {k: np.asarray(val).astype(ins[k].dtype) for k, val in exp.items() if k in ins}
    st[8] = var_crc(out_arrs, "m", has_m)
    st[9] = var_crc(out_arrs, "v", has_v)
    st[10] = min(count, 0xFFFFFFFF)
    st[11] = int(np.argmax(bad)) if count else 0xFFFFFFFF
    st[15] = 0xC5D0001B
    exp["status"] = st

    diffs = []
    for name, (entry, got) in outs.items():
        if name not in exp:
            diffs.append((name, "an output the replay does not produce"))
            continue
        want = np.asarray(exp[name]).astype(got.dtype)[:got.size]
        if want.size != got.size:
            diffs.append((name, "expected %d elements, found %d" % (want.size, got.size)))
            continue
        ne = np.nonzero(want != got)[0]
        if ne.size:
            i = int(ne[0])
            w = 2 * got.dtype.itemsize
            diffs.append((name, "%d of %d %s elements differ; first at element %d: expected "
                          "0x%0*x, found 0x%0*x" % (ne.size, got.size, entry["dtype"], i, w,
                                                    int(want[i]), w, int(got[i]))))
    return diffs


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    worst = 0
    for d in argv:
        try:
            diffs = replay(d)
        except (OSError, KeyError, ValueError) as e:
            print("%s: cannot replay: %s" % (d, e))
            worst = max(worst, 2)
            continue
        if diffs:
            worst = max(worst, 1)
            for name, msg in diffs:
                print("%s: %s DIFFERS: %s" % (d, name, msg))
        else:
            print("%s: every output identical to the numpy replay" % d)
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
