#!/usr/bin/python3
"""Statistical cross-check of one optimizer step: csdkit's kernel host model against PyTorch.

Usage: /usr/bin/python3 check_torch_step.py PATH/TO/csdkit [-v]

For every case below the script runs `csdkit kernel ... --dump DIR` on a generated problem,
loads the dumped inputs (problem.json names every array, its dtype, count, file and CRC-32),
rebuilds the very same step in PyTorch's own optimizer (torch.optim, single-tensor
implementation, foreach=False, float32 on the CPU) with the state set exactly as the kernel saw
it, and compares the kernel's outputs with PyTorch's in ulps (the distance between the two
binary32 values counted in representable floats; +0 and -0 are the same point).

The numeric contract (docs / ARCHITECTURE.md, "Numeric contract") promises bit-exactness only
between the host model, the RTL and the OpenCL build. Against PyTorch the promise is
statistical: a small bounded ulp distance after one step. The bounds are stated per optimizer
(BOUNDS_* below, with the reasons); exceeding one FAILS the test and prints the worst elements
with their inputs, PyTorch's value (expected) and the kernel's (actual) in hex and as floats.
The scalars the host computed (problem.json "args") are checked bit for bit against the same
quantities computed the way PyTorch computes them (bias corrections, Adagrad's clr, ...).

Exit status: 0 pass, 1 fail, 77 skipped (no torch/numpy under this interpreter).
PyTorch is Debian's python3-torch, importable only from /usr/bin/python3.
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import time
import zlib

try:
    import numpy as np
    import torch
except Exception as exc:  # ImportError, or a broken install raising something else
    print("SKIPPED: torch not available under /usr/bin/python3 (install python3-torch)")
    print("  (%s: %s)" % (type(exc).__name__, exc))
    sys.exit(77)

# ------------------------------------------------------------------------------------------
# Bounds, and why they are what they are.
#
# Both sides compute in binary32 from bit-identical inputs, a bit-identical gradient (the
# unscale product g = f32(grad) * f32(clip / loss_scale) is one correctly rounded multiply on
# both sides) and bit-identical scalars (both compute them in double and round once to binary32:
# PyTorch passes Python floats to float32 kernels; checked by check_scalars below). They differ
# only in how the same formula is grouped and rounded. Replaying both sides in numpy reproduces
# each bit for bit (torch 1.13, AVX2 build):
#   * PyTorch fuses: `x.add_(y, alpha=a)` is fma(y, a, x) and `x.addcmul_(y, z, value=a)` is
#     fma(a*y, z, x); so m*beta1 + (1-beta1)*g, v*beta2 + (1-beta2)*g*g, g + wd*theta,
#     theta - lr*buf (SGD) and sum + g*g (Adagrad) round once less than in the kernel, which
#     never fuses (ARCHITECTURE.md: "No fused multiply-add anywhere").
#   * PyTorch groups differently: `theta.addcdiv_(m, den, value=-a)` is theta + ((-a)*m)/den,
#     the kernel theta - a*(m/den); PyTorch's Adam denominator is sqrt(v)/f32(sqrt(bc2)) + eps,
#     the kernel's sqrt(v)*f32(1/sqrt(bc2)) + eps.
# Each difference is about one rounding, i.e. <= 1 ulp of the largest operand of the operation
# that differs; summed along the path to an output they stay a few ulps of that operand.
#
# Two metrics are therefore bounded for every fp32 output (theta, m, v):
#   (a) "operand ulps": |torch - kernel| in ulps of the largest operand of the additions on the
#       element's path (operand_scale). This holds whatever the cancellation.
#   (b) the plain ulp distance (signed-int distance of the bit patterns) where the result keeps
#       its magnitude (|result| >= half the largest operand, at most one bit cancelled).
# The plain ulp distance is NOT bounded where the result cancels: theta' = theta - lr*u with
# theta ~ lr*u (theta is drawn from [-0.1, 0.1), the update is ~1e-3..1e-2), or
# m' = beta1*m + (1-beta1)*g with the two terms nearly opposite, turns one rounding of an
# operand into 2^k ulps of a result 2^k times smaller (seen: up to 512 ulp for Adagrad's theta,
# 2246 for Adam's m, every one of them <= 3 operand ulps). Such elements are counted
# ("cancel") and their plain max/mean are printed, but only (a) applies to them.
#
# Per optimizer (same number for (a) and (b); measured maxima are printed per case):
#   Adam, AdamW, Adagrad: 6. The theta path has a division and a square root whose inputs
#     already differ (den: ~1.5 ulp, m or g: <= 1 ulp, grouping of the product and quotient:
#     <= 2 ulp, final subtraction 1 ulp); Adam's L2 gradient g + wd*theta may differ by 1 ulp,
#     doubled by squaring in v. Measured: <= 4.
#   SGD, Lion: 4. Only fused-vs-unfused multiply-adds, at most three on a path (L2 gradient,
#     buffer, Nesterov term, update). Measured: <= 3.
# The fp16/bf16 weight copy (out16) is a correctly rounded conversion of theta on both sides,
# so it may differ by 1 ulp of its own format when the two thetas straddle a rounding
# boundary; in addition the kernel's out16 must be exactly the conversion of its own theta.
# A difference above these bounds means a semantic difference (wrong bias-correction step,
# dampening on the first step, lr_decay off by one step, L2 vs decoupled decay...), not
# rounding: with the data here even a relative change of 1e-6 in lr fails every case.
BOUND_16 = 1
BOUNDS_ADAM = {"theta": (6, 6), "m": (6, 6), "v": (6, 6), "out16": BOUND_16}
BOUNDS_SGD = {"theta": (4, 4), "m": (4, 4), "out16": BOUND_16}
BOUNDS_ADAGRAD = {"theta": (6, 6), "v": (6, 6), "out16": BOUND_16}
# Lion is not in torch 1.13; its reference is the lion-pytorch formulation (Chen et al. 2023,
# github.com/lucidrains/lion-pytorch) written with the same torch tensor ops. theta moves by
# exactly +-lr (or 0), so only a sign flip of the interpolation could make a big difference,
# and that needs beta1*m + (1-beta1)*g to be within one rounding of zero.
BOUNDS_LION = {"theta": (4, 4), "m": (4, 4), "out16": BOUND_16}

N = 4099          # not a multiple of any lane count / burst / word
N_SPARSE = 140001  # three 65536-element blocks, the last one partial

# (name, optimizer, extra CLI arguments, n, bounds)
CASES = [
    # AdamW: decoupled decay; bias corrections at steps 1, 10 and 1000.
    ("adamw_s1", "adamw", ["--step", "1"], N, BOUNDS_ADAM),
    ("adamw_s10_fp16_ls_clip_outbf16", "adamw",
     ["--step", "10", "--lr", "3e-4", "--beta2", "0.95", "--weight-decay", "0.1",
      "--grad", "fp16", "--loss-scale", "1024", "--clip", "0.5", "--out", "bf16"], N, BOUNDS_ADAM),
    ("adamw_s1000", "adamw",
     ["--step", "1000", "--lr", "1e-3", "--beta1", "0.8", "--beta2", "0.999", "--eps", "1e-6",
      "--weight-decay", "0.05"], N, BOUNDS_ADAM),
    ("adamw_sparse_bf16_s4", "adamw",
     ["--step", "4", "--topk", "0.05", "--grad", "bf16", "--loss-scale", "256", "--clip", "0.9"],
     N_SPARSE, BOUNDS_ADAM),
    # Adam: L2 decay folded into the gradient.
    ("adam_s1", "adam", ["--step", "1"], N, BOUNDS_ADAM),
    ("adam_wd_s7_bf16_outfp16", "adam",
     ["--step", "7", "--weight-decay", "0.05", "--grad", "bf16", "--loss-scale", "128",
      "--clip", "0.75", "--out", "fp16"], N, BOUNDS_ADAM),
    ("adam_wd_sparse_s3", "adam",
     ["--step", "3", "--weight-decay", "0.01", "--topk", "0.1", "--clip", "0.6"],
     N_SPARSE, BOUNDS_ADAM),
    # SGD: plain, weight decay, momentum (first step: buffer = gradient, no dampening), dampening,
    # Nesterov.
    ("sgd_plain_s1", "sgd", ["--step", "1", "--momentum", "0"], N, BOUNDS_SGD),
    ("sgd_plain_wd_s5_fp16", "sgd",
     ["--step", "5", "--momentum", "0", "--weight-decay", "0.01", "--grad", "fp16",
      "--loss-scale", "1024", "--clip", "0.8", "--out", "fp16"], N, BOUNDS_SGD),
    ("sgd_mom_s1", "sgd", ["--step", "1", "--momentum", "0.9"], N, BOUNDS_SGD),
    ("sgd_mom_s4", "sgd", ["--step", "4", "--momentum", "0.9"], N, BOUNDS_SGD),
    ("sgd_mom_damp_s1", "sgd",
     ["--step", "1", "--momentum", "0.9", "--dampening", "0.3"], N, BOUNDS_SGD),
    ("sgd_mom_damp_wd_s6", "sgd",
     ["--step", "6", "--momentum", "0.9", "--dampening", "0.3", "--weight-decay", "1e-3"],
     N, BOUNDS_SGD),
    ("sgd_nesterov_s1", "sgd",
     ["--step", "1", "--momentum", "0.9", "--nesterov", "--weight-decay", "1e-4"], N, BOUNDS_SGD),
    ("sgd_nesterov_s3_bf16_outbf16", "sgd",
     ["--step", "3", "--momentum", "0.95", "--nesterov", "--weight-decay", "1e-4",
      "--grad", "bf16", "--loss-scale", "64", "--clip", "0.7", "--out", "bf16"], N, BOUNDS_SGD),
    ("sgd_mom_sparse_fp16_s2", "sgd",
     ["--step", "2", "--momentum", "0.9", "--dampening", "0.1", "--topk", "0.05",
      "--grad", "fp16", "--loss-scale", "512", "--clip", "0.9"], N_SPARSE, BOUNDS_SGD),
    # Adagrad: initial accumulator, lr_decay (clr = lr / (1 + (step-1) lr_decay)), L2 decay.
    ("adagrad_s1", "adagrad", ["--step", "1", "--initial-accumulator", "0.1"], N, BOUNDS_ADAGRAD),
    ("adagrad_lrdecay_wd_s5", "adagrad",
     ["--step", "5", "--lr-decay", "0.05", "--weight-decay", "0.01",
      "--initial-accumulator", "0.1"], N, BOUNDS_ADAGRAD),
    ("adagrad_lrdecay_s50_fp16_outfp16", "adagrad",
     ["--step", "50", "--lr-decay", "0.01", "--eps", "1e-8", "--grad", "fp16",
      "--loss-scale", "2048", "--clip", "0.5", "--out", "fp16"], N, BOUNDS_ADAGRAD),
    ("adagrad_sparse_bf16_s2", "adagrad",
     ["--step", "2", "--lr-decay", "0.1", "--initial-accumulator", "0.5", "--topk", "0.05",
      "--grad", "bf16", "--loss-scale", "8", "--clip", "0.25"], N_SPARSE, BOUNDS_ADAGRAD),
    # Lion (reference written with torch ops, see BOUNDS_LION).
    ("lion_s3_wd", "lion", ["--step", "3", "--weight-decay", "0.1"], N, BOUNDS_LION),
]

STATUS_MAGIC = 0xC5D0001B
BLOCK = 65536

NP_DTYPES = {"fp32": "<u4", "u32": "<u4", "fp16": "<u2", "bf16": "<u2", "u16": "<u2"}


class CaseFailure(Exception):
    pass


# ------------------------------------------------------------------------------------------
# Bit-level helpers.

def widen_to_f32_bits(raw, dtype):
    """The exact binary32 bit pattern of every element (fp16/bf16 widening is exact)."""
    if dtype == "fp32":
        return raw.astype(np.uint32)
    if dtype == "fp16":
        return raw.view(np.float16).astype(np.float32).view(np.uint32)
    if dtype == "bf16":
        return raw.astype(np.uint32) << np.uint32(16)
    raise CaseFailure("unexpected gradient dtype %r" % dtype)


def ordered(bits, width):
    """Maps sign-magnitude float bit patterns onto integers ordered like the floats (+0 = -0)."""
    b = bits.astype(np.int64)
    sign = np.int64(1) << (width - 1)
    return np.where(b & sign, -(b & (sign - 1)), b)


def is_nan32(bits):
    return ((bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)) & \
        ((bits & np.uint32(0x007FFFFF)) != 0)


def ulp_distance(expected_bits, actual_bits, width, nan_check=True):
    d = np.abs(ordered(expected_bits, width) - ordered(actual_bits, width))
    if nan_check and width == 32:
        ne, na = is_nan32(expected_bits), is_nan32(actual_bits)
        d = np.where(ne & na, 0, d)
        d = np.where(ne ^ na, np.int64(1) << 40, d)
    return d


def f32(bits):
    return float(np.uint32(bits).view(np.float32))


def fmt32(bits):
    return "0x%08x (%.9g)" % (int(bits), f32(bits))


def fmt16(bits, dtype):
    if dtype == "fp16":
        val = float(np.uint16(bits).view(np.float16))
    else:
        val = f32(np.uint32(int(bits) << 16))
    return "0x%04x (%.5g)" % (int(bits), val)


# ------------------------------------------------------------------------------------------
# One case.

def run_kernel(csdkit, optimizer, args, n, workdir):
    cmd = [csdkit, "kernel", "--optimizer", optimizer, "--n", str(n), "--dump", workdir] + args
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, timeout=120)
    if res.returncode != 0:
        raise CaseFailure("command failed (exit %d): %s\n%s" % (res.returncode, " ".join(cmd),
                                                                res.stdout))
    with open(os.path.join(workdir, "problem.json")) as f:
        return json.load(f)


def load_arrays(prob, workdir, which):
    arrays = {}
    for a in prob[which]:
        path = os.path.join(workdir, a["file"])
        with open(path, "rb") as f:
            data = f.read()
        if len(data) != int(a["bytes"]):
            raise CaseFailure("%s: %d bytes, problem.json says %s" % (a["file"], len(data),
                                                                      a["bytes"]))
        crc = zlib.crc32(data) & 0xFFFFFFFF
        if crc != int(a["crc32"], 16):
            raise CaseFailure("%s: crc32 0x%08x, problem.json says %s" % (a["file"], crc,
                                                                         a["crc32"]))
        if a["dtype"] not in NP_DTYPES:
            raise CaseFailure("%s: unknown dtype %r" % (a["file"], a["dtype"]))
        arr = np.frombuffer(data, dtype=NP_DTYPES[a["dtype"]]).astype(
            np.uint32 if NP_DTYPES[a["dtype"]] == "<u4" else np.uint16)
        if arr.size != int(a["count"]):
            raise CaseFailure("%s: %d elements, problem.json says %s" % (a["file"], arr.size,
                                                                        a["count"]))
        arrays[a["name"]] = (arr, a["dtype"])
    return arrays


def scalar_bits(prob, name):
    for a in prob.get("args", []):
        if a.get("kind") == "scalar" and a.get("name") == name:
            return int(a["hex"], 16)
    raise CaseFailure("problem.json has no scalar %r" % name)


def check_scalars(prob):
    """The host's scalar operands against the same quantities computed as PyTorch computes them
    (Python doubles, rounded once to binary32 where a float32 kernel consumes them)."""
    h = prob["hyper"]
    opt = prob["optimizer"]
    t = float(prob["step"])  # torch: state step incremented, then step_t.item()
    f = lambda x: int(np.float32(x).view(np.uint32))
    want = {}
    if opt in ("adamw", "adam"):
        want["lr"] = f(h["lr"] / (1 - h["beta1"] ** t))  # torch step_size
        want.update(beta1=f(h["beta1"]), omb1=f(1 - h["beta1"]), beta2=f(h["beta2"]),
                    omb2=f(1 - h["beta2"]), eps=f(h["eps"]))
        # torch divides by sqrt(bc2); the kernel multiplies by its reciprocal (rules.h).
        want["c2"] = f(1 / math.sqrt(1 - h["beta2"] ** t))
        if opt == "adamw":
            want["c1"] = f(1 - h["lr"] * h["weight_decay"])  # torch param.mul_(1 - lr*wd)
        else:
            want["wd"] = f(h["weight_decay"])
    elif opt == "sgd":
        want.update(lr=f(h["lr"]), beta1=f(h["momentum"]), omb1=f(1 - h["dampening"]),
                    wd=f(h["weight_decay"]))
    elif opt == "adagrad":
        want.update(lr=f(h["lr"] / (1 + (t - 1) * h["lr_decay"])),  # torch clr
                    eps=f(h["eps"]), wd=f(h["weight_decay"]))
    elif opt == "lion":
        want.update(lr=f(h["lr"]), beta1=f(h["beta1"]), omb1=f(1 - h["beta1"]),
                    beta2=f(h["beta2"]), omb2=f(1 - h["beta2"]),
                    c1=f(1 - h["lr"] * h["weight_decay"]))
    want["unscale"] = f(h["clip_coef"] / h["loss_scale"])
    bad = ["%s 0x%08x (%.9g), expected 0x%08x (%.9g)" % (k, scalar_bits(prob, k),
                                                       f32(scalar_bits(prob, k)), w, f32(w))
           for k, w in sorted(want.items()) if scalar_bits(prob, k) != w]
    if bad:
        raise CaseFailure("host scalars differ from PyTorch's: " + "; ".join(bad))


def dense_gradient(prob, ins):
    """Raw gradient widened to binary32 (bits) at every element; zero where sparse drops it."""
    n = int(prob["n"])
    graw, gdt = ins["grad"]
    if gdt != prob["grad"]:
        raise CaseFailure("grad array dtype %s, problem.json grad %s" % (gdt, prob["grad"]))
    vals = widen_to_f32_bits(graw, gdt)
    if not prob["sparse"]:
        if vals.size != n:
            raise CaseFailure("dense gradient has %d elements, n = %d" % (vals.size, n))
        return vals
    idx = ins["sp_idx"][0].astype(np.int64)
    blk = ins["sp_blk"][0].astype(np.int64)
    nb = (n + BLOCK - 1) // BLOCK
    nnz = int(prob["nnz"])
    if blk.size != nb + 1 or blk[0] != 0 or blk[-1] != nnz or np.any(np.diff(blk) < 0):
        raise CaseFailure("malformed block table %s (n %d, nnz %d)" % (blk.tolist(), n, nnz))
    dense = np.zeros(n, dtype=np.uint32)
    for b in range(nb):
        lo, hi = int(blk[b]), int(blk[b + 1])
        pos = b * BLOCK + idx[lo:hi]
        if hi > lo and (np.any(np.diff(idx[lo:hi]) <= 0) or pos[-1] >= n):
            raise CaseFailure("block %d: indices not sorted/unique or out of range" % b)
        dense[pos] = vals[lo:hi]
    return dense


def torch_step(prob, ins, g):
    """One step of PyTorch's optimizer with the kernel's state. Returns output arrays (bits)."""
    h = prob["hyper"]
    opt_name = prob["optimizer"]
    step = int(prob["step"])
    theta_in = ins["theta"][0].view(np.float32)
    p = torch.nn.Parameter(torch.from_numpy(theta_in.copy()))
    p.grad = torch.from_numpy(g.view(np.float32).copy())
    state_t = lambda name: torch.from_numpy(ins[name][0].view(np.float32).copy())
    step_before = torch.tensor(float(step - 1))  # torch increments it first, then uses it
    out = {}
    if opt_name in ("adamw", "adam"):
        cls = torch.optim.AdamW if opt_name == "adamw" else torch.optim.Adam
        opt = cls([p], lr=h["lr"], betas=(h["beta1"], h["beta2"]), eps=h["eps"],
                  weight_decay=h["weight_decay"], amsgrad=False, foreach=False)
        opt.state[p] = {"step": step_before, "exp_avg": state_t("m"),
                        "exp_avg_sq": state_t("v")}
        opt.step()
        st = opt.state[p]
        if float(st["step"]) != float(step):
            raise CaseFailure("torch state step %s after the step, expected %d"
                              % (float(st["step"]), step))
        out["m"] = st["exp_avg"]
        out["v"] = st["exp_avg_sq"]
    elif opt_name == "sgd":
        opt = torch.optim.SGD([p], lr=h["lr"], momentum=h["momentum"], dampening=h["dampening"],
                              weight_decay=h["weight_decay"], nesterov=h["nesterov"],
                              foreach=False)
        if h["momentum"] != 0 and step > 1:
            # PyTorch's "first step" is "no buffer yet"; the kernel's is step == 1.
            opt.state[p] = {"momentum_buffer": state_t("m")}
        opt.step()
        if h["momentum"] != 0:
            out["m"] = opt.state[p]["momentum_buffer"]
    elif opt_name == "adagrad":
        opt = torch.optim.Adagrad([p], lr=h["lr"], lr_decay=h["lr_decay"],
                                  weight_decay=h["weight_decay"],
                                  initial_accumulator_value=h["initial_accumulator_value"],
                                  eps=h["eps"], foreach=False)
        opt.state[p] = {"step": step_before, "sum": state_t("v")}
        opt.step()
        out["v"] = opt.state[p]["sum"]
    elif opt_name == "lion":
        # lion-pytorch's update_fn (torch 1.13 has no Lion), same tensor ops, in place.
        lr, wd, b1, b2 = h["lr"], h["weight_decay"], h["beta1"], h["beta2"]
        exp_avg = state_t("m")
        with torch.no_grad():
            p.data.mul_(1 - lr * wd)
            update = exp_avg.clone().mul_(b1).add(p.grad, alpha=1 - b1).sign_()
            p.add_(update, alpha=-lr)
            exp_avg.mul_(b2).add_(p.grad, alpha=1 - b2)
        out["m"] = exp_avg
    else:
        raise CaseFailure("unknown optimizer %r" % opt_name)
    out["theta"] = p.detach()
    res = {k: v.contiguous().numpy().view(np.uint32).copy() for k, v in out.items()}
    if prob["out"] in ("fp16", "bf16"):
        t16 = p.detach().to(torch.float16 if prob["out"] == "fp16" else torch.bfloat16)
        res["out16"] = t16.view(torch.int16).numpy().view(np.uint16).copy()
    return res


def operand_scale(prob, ins, g, expected):
    """Per output array, the magnitude of the largest operand of the additions on its path.

    Computed in float64 from the textbook formulas (the exact values, not either side's
    roundings). A rounding difference of one ulp in an operand of x = a + b is one ulp of
    max(|a|, |b|), which is many ulps of x when a and b nearly cancel (theta' = theta - lr*u
    close to zero, m' = beta1*m + (1-beta1)*g close to zero). The distance in units of the
    ulp of this scale (`operand ulps`) is therefore bounded whatever the cancellation, while
    the plain ulp distance is bounded only where the result does not cancel.
    """
    h = prob["hyper"]
    opt = prob["optimizer"]
    t = float(prob["step"])
    th_signed = ins["theta"][0].view(np.float32).astype(np.float64)
    th = np.abs(th_signed)
    gg = np.abs(g.view(np.float32).astype(np.float64))
    state = lambda name: np.abs(ins[name][0].view(np.float32).astype(np.float64))
    ex_signed = {k: v.view(np.float32).astype(np.float64)
                 for k, v in expected.items() if k != "out16"}
    ex = {k: np.abs(v) for k, v in ex_signed.items()}
    wd = h["weight_decay"]
    sc = {}
    if opt in ("adamw", "adam"):
        b1, b2 = h["beta1"], h["beta2"]
        gl = np.maximum(gg, wd * th) if opt == "adam" else gg  # terms of g + wd*theta
        sc["m"] = np.maximum(b1 * state("m"), (1 - b1) * gl)
        sc["v"] = np.maximum(b2 * state("v"), (1 - b2) * gl * gl)
        den = np.sqrt(ex["v"]) / math.sqrt(1 - b2 ** t) + h["eps"]
        upd = h["lr"] / (1 - b1 ** t) * sc["m"] / den
        c1 = 1 - h["lr"] * wd if opt == "adamw" else 1.0
        sc["theta"] = np.maximum(c1 * th, upd)
    elif opt == "sgd":
        mom = h["momentum"]
        gl = np.maximum(gg, wd * th)
        if mom == 0:
            u = gl
        else:
            sc["m"] = gl if t == 1 else np.maximum(mom * state("m"), (1 - h["dampening"]) * gl)
            u = gl + mom * sc["m"] if h["nesterov"] else sc["m"]  # Nesterov: same-sign sum
        sc["theta"] = np.maximum(th, h["lr"] * u)
    elif opt == "adagrad":
        gl = np.maximum(gg, wd * th)
        sc["v"] = np.maximum(state("v"), gl * gl)
        clr = h["lr"] / (1 + (t - 1) * h["lr_decay"])
        sc["theta"] = np.maximum(th, clr * gl / (np.sqrt(ex["v"]) + h["eps"]))
    elif opt == "lion":
        sc["m"] = np.maximum(h["beta2"] * state("m"), (1 - h["beta2"]) * gg)
        sc["theta"] = np.maximum((1 - h["lr"] * wd) * th, h["lr"])
    # theta' = theta*c1 - lr*u: |theta - theta'| is the magnitude of the subtracted operand.
    sc["theta"] = np.maximum(sc["theta"], np.abs(th_signed - ex_signed["theta"]))
    for k in sc:
        sc[k] = np.maximum(sc[k], ex[k])  # never below the result itself
    return sc


def ulp32_of(x):
    """The binary32 ulp at magnitude x (float64 array), subnormal spacing at the bottom."""
    return np.spacing(np.abs(x).astype(np.float32)).astype(np.float64)


def check_case(csdkit, name, optimizer, args, n, bounds, verbose):
    with tempfile.TemporaryDirectory(prefix="csdkit_torch_") as workdir:
        prob = run_kernel(csdkit, optimizer, args, n, workdir)
        if prob.get("format") != "csdkit-golden-1":
            raise CaseFailure("unknown problem.json format %r" % prob.get("format"))
        if prob["ftz"]:
            raise CaseFailure("FTZ/DAZ problems are not comparable with PyTorch")
        ins = load_arrays(prob, workdir, "inputs")
        outs = load_arrays(prob, workdir, "outputs")

    st = outs["status"][0]
    if st[0] != 0 or st[15] != STATUS_MAGIC or st[2] != int(prob["n"]):
        raise CaseFailure("kernel status %s" % " ".join("0x%08x" % x for x in st))

    # Gradient exactly as the kernel decodes it: widened, scattered, times f32(clip/loss_scale).
    check_scalars(prob)
    h = prob["hyper"]
    unscale = np.float32(h["clip_coef"] / h["loss_scale"])
    g_raw = dense_gradient(prob, ins)
    g = (g_raw.view(np.float32) * unscale).astype(np.float32).view(np.uint32)

    expected = torch_step(prob, ins, g)

    scale = operand_scale(prob, ins, g, expected)
    stats = []
    failures = []
    for arr in ("theta", "m", "v", "out16"):
        if arr not in bounds or arr not in expected:
            continue  # e.g. SGD without momentum has no buffer in PyTorch
        if arr not in outs:
            raise CaseFailure("kernel dump has no output %r" % arr)
        act, dt = outs[arr]
        exp = expected[arr]
        if arr == "out16":
            if dt != prob["out"]:
                raise CaseFailure("out16 dtype %s, problem.json out %s" % (dt, prob["out"]))
            # The kernel's copy must be exactly the conversion of its own theta...
            own = torch.from_numpy(outs["theta"][0].view(np.float32).copy()).to(
                torch.float16 if dt == "fp16" else torch.bfloat16)
            own = own.view(torch.int16).numpy().view(np.uint16)
            if not np.array_equal(own, act):
                i = int(np.argmax(own != act))
                raise CaseFailure("out16[%d] %s is not the %s of the kernel's theta %s (%s)"
                                  % (i, fmt16(act[i], dt), dt, fmt32(outs["theta"][0][i]),
                                     fmt16(own[i], dt)))
            # ...and within 1 ulp of the conversion of PyTorch's theta.
            d = ulp_distance(exp, act, 16, nan_check=False)
            bad = d > bounds[arr]
            stats.append("out16 max %d mean %.3f" % (int(d.max()), float(d.mean())))
            if bad.any():
                failures.append(report(arr, bad, d, None, exp, act, dt,
                                       "%d %s ulp" % (bounds[arr], dt), ins, g_raw, g))
            continue
        raw_bound, op_bound = bounds[arr]
        d = ulp_distance(exp, act, 32)
        e = exp.view(np.float32).astype(np.float64)
        x = act.view(np.float32).astype(np.float64)
        with np.errstate(invalid="ignore"):
            opd = np.abs(e - x) / ulp32_of(scale[arr])
        opd = np.where(np.isnan(opd), np.inf, opd)
        opd = np.where(d == 0, 0.0, opd)
        cond = np.abs(e) >= 0.5 * scale[arr]  # at most one bit lost to cancellation
        dc = np.where(cond, d, 0)
        stats.append("%s max %d mean %.3f (well-cond. max %d; operand-ulp max %.2f; %d cancel)"
                     % (arr, int(d.max()), float(d.mean()), int(dc.max()), float(opd.max()),
                        int(np.count_nonzero(~cond))))
        bad = (dc > raw_bound) | (opd > op_bound)
        if bad.any():
            failures.append(report(arr, bad, d, opd, exp, act, dt,
                                   "%d ulp where well-conditioned, %g operand ulps anywhere"
                                   % (raw_bound, op_bound), ins, g_raw, g))
    print("%-34s %s n=%d step=%s grad=%s%s: %s" % (
        name, "FAIL" if failures else "ok  ", int(prob["n"]), prob["step"], prob["grad"],
        " sparse(nnz=%d)" % int(prob["nnz"]) if prob["sparse"] else "", "; ".join(stats)))
    if verbose:
        print("    csdkit kernel --optimizer %s --n %d %s" % (optimizer, n, " ".join(args)))
    for f in failures:
        print(f)
    return not failures


def report(arr, bad, d, opd, exp, act, dt, bound_text, ins, g_raw, g):
    """The worst offending elements with their inputs, PyTorch's and the kernel's values."""
    key = opd if opd is not None else d.astype(np.float64)
    order = np.argsort(-np.where(bad, key, -1.0), kind="stable")
    lines = ["  %s: %d elements beyond %s; worst first (expected = PyTorch, actual = kernel):"
             % (arr, int(np.count_nonzero(bad)), bound_text)]
    for i in order[:8]:
        if not bad[i]:
            break
        parts = ["    [%d] ulp %d%s" % (i, int(d[i]), "" if opd is None else
                                          ", operand ulps %.2f" % opd[i])]
        parts.append("theta_in %s" % fmt32(ins["theta"][0][i]))
        for s in ("m", "v"):
            if s in ins:
                parts.append("%s_in %s" % (s, fmt32(ins[s][0][i])))
        parts.append("grad(widened) %s" % fmt32(g_raw[i]))
        parts.append("g(unscaled) %s" % fmt32(g[i]))
        if dt == "fp32":
            parts.append("expected %s" % fmt32(exp[i]))
            parts.append("actual %s" % fmt32(act[i]))
        else:
            parts.append("expected %s" % fmt16(exp[i], dt))
            parts.append("actual %s" % fmt16(act[i], dt))
        lines.append("\n      ".join(parts))
    return "\n".join(lines)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 2
    csdkit = argv[1]
    verbose = "-v" in argv[2:]
    if not os.access(csdkit, os.X_OK):
        print("FAIL: %s is not an executable csdkit binary" % csdkit)
        return 1
    torch.set_num_threads(1)  # deterministic and polite on a shared machine
    print("torch %s, numpy %s, csdkit %s" % (torch.__version__, np.__version__, csdkit))
    t0 = time.monotonic()
    ok = True
    for name, optimizer, args, n, bounds in CASES:
        try:
            ok &= check_case(csdkit, name, optimizer, args, n, bounds, verbose)
        except (CaseFailure, subprocess.SubprocessError, OSError, ValueError, KeyError) as exc:
            print("%-34s FAIL: %s" % (name, exc))
            ok = False
    print("%d cases, %.1f s: %s" % (len(CASES), time.monotonic() - t0, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
