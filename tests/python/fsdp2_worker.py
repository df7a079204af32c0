"""One rank of test_fsdp2.py's comparison run (torchrun; the model, sharding, batches and
training step are examples/fsdp2/train_fsdp2.py's, imported).

For each configuration ({GPU-resident, CPUOffloadPolicy} x {fp32, bf16 MixedPrecisionPolicy with
fp32 reduction}), with clip_grad_norm_(1.0) on the DTensor gradients:
  1. torch.optim.AdamW (foreach=False) and csdkit.torch.AdamW train two identical fully_shard-ed
     models side by side for --steps steps on the same batches: per step both mean losses and
     the max relative parameter difference (max over tensors of max|kit - torch| / max(max|torch|,
     its initial max|torch|), over all ranks' shards);
  2. at step --dcp-at, the kit's model and optimizer go to a DCP checkpoint (get_*_state_dict,
     dcp.save); a new model (other initial weights) and a new kit optimizer with new stores load
     it (dcp.load into their own state dicts, set_*_state_dict) -- the optimizer's store is
     created by DCP's own initialising step -- and train to --steps: the optimizer state after
     the import must equal the saved one and the final weights the uninterrupted run's, bit for
     bit, on every rank.
Also: which parameters have an empty shard on which rank, the store's layout size, the state
entries of empty shards, and the refusals (the kit's max_grad_norm= with DTensors;
csdkit.torch.distributed with DTensors). Rank 0 writes everything to --out (JSON).
"""

import argparse
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "fsdp2"))
import train_fsdp2 as ex  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch starts CUDA)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import csdkit.torch  # noqa: E402
import csdkit.torch.distributed  # noqa: E402


def local(p):
    return p._local_tensor if hasattr(p, "_local_tensor") else p


def global_max(values, device):
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def abs_max(t):
    return float(t.detach().double().abs().max()) if t.numel() else 0.0


def rel_diffs(ref, kit, scales, device):
    """Per parameter tensor: max|kit - torch| / max(max|torch|, its initial max|torch|), over
    every rank's shard."""
    d = global_max([abs_max(local(a).detach().double() - local(b).detach().double())
                    for a, b in zip(ref.parameters(), kit.parameters())], device)
    s = global_max([abs_max(local(a)) for a in ref.parameters()], device)
    return [di / max(si, sc) if max(si, sc) > 0 else di for di, si, sc in zip(d, s, scales)]


def all_ranks(flag, device):
    t = torch.tensor([1 if flag else 0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(int(t))


def local_state(sd):
    """{index: {key: this rank's part (CPU copy) or the value}} of an optimizer state dict."""
    return {i: {k: local(v).detach().cpu().clone() if torch.is_tensor(v) else v
                for k, v in st.items()} for i, st in sd["state"].items()}


def same_state(a, b):
    if sorted(a) != sorted(b):
        return False
    for i in a:
        if sorted(a[i]) != sorted(b[i]):
            return False
        for k, v in a[i].items():
            w = b[i][k]
            if torch.is_tensor(v) != torch.is_tensor(w):
                return False
            if torch.is_tensor(v) and not (v.dtype == w.dtype and v.shape == w.shape
                                           and torch.equal(v, w)):
                return False
            if not torch.is_tensor(v) and v != w:
                return False
    return True


def refusal(fn):
    try:
        opt = fn()
    except Exception as e:  # noqa: BLE001 - reported
        return "{}: {}".format(type(e).__name__, e)
    opt.close()
    return None


def run_config(name, args, device, tmp):
    a = argparse.Namespace(**vars(args))
    a.bf16, a.cpu_offload = "bf16" in name, "offload" in name
    rank, t0 = dist.get_rank(), time.time()
    a.opt = "torch"
    model_t = ex.build(a, device)
    opt_t = ex.make_optimizer(a, model_t)
    a.opt = "kit"
    model_k = ex.build(a, device)
    opt_k = ex.make_optimizer(a, model_k, store=os.path.join(tmp, name, "kit"))
    scales = global_max([abs_max(local(p)) for p in model_t.parameters()], device)
    out = dict(losses_torch=[], losses_kit=[], rel_diff=[])
    dcp_dir = os.path.join(tmp, name, "dcp")
    at_k = None
    for step in range(args.steps):
        lt = ex.mean_over_ranks(ex.train_step(model_t, opt_t, step, a, device), device)
        lk = ex.mean_over_ranks(ex.train_step(model_k, opt_k, step, a, device), device)
        out["losses_torch"].append(lt)
        out["losses_kit"].append(lk)
        per = rel_diffs(model_t, model_k, scales, device)
        out["rel_diff"].append(max(per))
        out.setdefault("worst_tensor", []).append(
            [n for n, _ in model_k.named_parameters()][per.index(max(per))])
        out["final_rel_diff_per_tensor"] = dict(zip([n for n, _ in model_k.named_parameters()],
                                                    per))
        if step + 1 == args.dcp_at:
            ex.save_dcp(model_k, opt_k, dcp_dir, step + 1)
            at_k = local_state(opt_k.state_dict())
    out["seconds_side_by_side"] = time.time() - t0
    final = ex.local_weights(model_k)
    # What this rank holds: empty shards, the store's layout, the state of empty shards.
    names = [n for n, _ in model_k.named_parameters()]
    params = [p for _, p in model_k.named_parameters()]
    empty = [n for n, p in zip(names, params) if local(p).numel() == 0]
    ksd = opt_k.state_dict()["state"]
    tsd = opt_t.state_dict()["state"]
    index = {id(p): i for i, p in enumerate(p for g in opt_k.param_groups for p in g["params"])}
    mine = dict(rank=rank, empty_shards=empty, params=len(params),
                store_tensors=len(opt_k.session.layout),
                store_groups=len(opt_k.session.group_hyper),
                state_view_len=len(opt_k.state),
                empty_entries={n: sorted(ksd.get(index[id(p)], {})) for n, p in
                               zip(names, params) if n in empty},
                kit_keys_vs_torch={n: [sorted(ksd.get(index[id(p)], {})),
                                       sorted(tsd.get(index[id(p)], {}))]
                                   for n, p in zip(names, params)
                                   if sorted(ksd.get(index[id(p)], {})) !=
                                   sorted(tsd.get(index[id(p)], {}))},
                view_equals_state_dict=same_state(
                    local_state({"state": {index[id(p)]: st
                                           for p, st in opt_k.state.items()}}),
                    local_state({"state": ksd})))
    ranks = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, mine)
    out["ranks"] = ranks
    if name == "gpu-fp32":
        out["refused_max_grad_norm"] = refusal(lambda: csdkit.torch.AdamW(
            model_k.parameters(), store=os.path.join(tmp, "refused", "r%d" % rank),
            max_grad_norm=1.0))
        out["refused_distributed"] = refusal(lambda: csdkit.torch.distributed.AdamW(
            model_k.parameters(), store=os.path.join(tmp, "refused-dist")))
    opt_k.close()
    del opt_t
    # The round trip: a new model and optimizer (new stores) from the DCP checkpoint.
    t1 = time.time()
    model_r = ex.build(a, device, seed=1)
    opt_r = ex.make_optimizer(a, model_r, store=os.path.join(tmp, name, "round-trip"))
    step = ex.load_dcp(model_r, opt_r, dcp_dir)
    out["loaded_step"] = step
    out["store_step_after_load"] = opt_r.session.step_count
    out["import_equal"] = all_ranks(same_state(local_state(opt_r.state_dict()), at_k), device)
    for s in range(step, args.steps):
        ex.train_step(model_r, opt_r, s, a, device)
    got = ex.local_weights(model_r)
    out["round_trip_equal"] = all_ranks(
        all(torch.equal(got[n], final[n]) for n in final), device)
    out["seconds_round_trip"] = time.time() - t1
    opt_r.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--configs", default="gpu-fp32,gpu-bf16,offload-fp32,offload-bf16")
    ap.add_argument("--dcp-at", type=int, default=30)
    a, rest = ap.parse_known_args()
    args = ex.parse(rest)
    args.dcp_at = a.dcp_at
    device = ex.setup()
    result = dict(world=dist.get_world_size(), torch=torch.__version__,
                  gpu=torch.cuda.get_device_name(device), steps=args.steps,
                  dcp_at=args.dcp_at, configs={})
    rc = 0
    for name in a.configs.split(","):
        try:
            result["configs"][name] = run_config(name, args, device, a.tmp)
        except Exception:  # noqa: BLE001 - reported to the test, then the others go on
            result["configs"][name] = dict(error=traceback.format_exc())
            rc = 1
            print(traceback.format_exc(), file=sys.stderr, flush=True)
    if dist.get_rank() == 0:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    dist.destroy_process_group()
    return rc


if __name__ == "__main__":
    sys.exit(main())
