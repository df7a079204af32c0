"""One rank of a test_distributed.py run (gloo, CPU): trains dist_common's MLP with a
csdkit.torch.distributed optimizer on the deterministic per-rank gradients and saves, per step,
the weights and the report (or the error it raised) to --out.

With --topk the optimizer compresses (csdkit.torch.TopK); --loss-scales hands the gradients
over multiplied by a per-step loss scale through a GradScaler; --record also saves, per step,
this rank's Top-K residuals (per piece of its slice) and the streams it sent (from the second
step on), with its partition; --save-state / --load-state write and read the rank's
state_dict() per committed step."""

import argparse
import datetime
import os
import sys
import traceback

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_common  # noqa: E402
from test_topk import Recorder  # noqa: E402
from test_torch_state import cpu_grad_scaler  # noqa: E402

import csdkit.torch  # noqa: E402
import csdkit.torch.distributed as cdist  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--init", required=True, help="FileStore path (file:// init_method)")
    ap.add_argument("--store", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--opt", default="AdamW")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--nan-step", type=int, default=-1)
    ap.add_argument("--nan-rank", type=int, default=0)
    ap.add_argument("--max-grad-norm", type=float, default=None)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--first-step", type=int, default=0)
    ap.add_argument("--none-param", type=int, default=-1, help="a parameter whose grad is None")
    ap.add_argument("--none-rank", type=int, default=-1, help="... on this rank (-1: all)")
    ap.add_argument("--topk", type=float, default=None, help="compress=TopK(ratio)")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--state", default="fp32", help="the stores' state format")
    ap.add_argument("--loss-scales", default=None, help="comma-separated, one per step")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--save-state", default=None,
                    help="{committed step: state_dict()} to this path ('{rank}' replaced)")
    ap.add_argument("--load-state", default=None, help="('{rank}' replaced) after resume(): "
                    "load its entry of the resumed step, after trying the previous step's")
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + a.init, rank=a.rank,
                            world_size=a.world, timeout=datetime.timedelta(seconds=60))
    result = dict(weights=[], reports=[], error=None)
    try:
        model = dist_common.make_model(DTYPES[a.dtype], hidden=a.hidden)
        kw = dict(store=a.store, devices=a.devices, max_grad_norm=a.max_grad_norm,
                  fused=bool(a.loss_scales),  # GradScaler.step hands itself to step()
                  state=a.state)
        if a.topk is not None:
            kw["compress"] = csdkit.torch.TopK(a.topk)
        if a.opt == "SGD":
            opt = cdist.SGD(dist_common.param_groups(model), lr=1e-2, momentum=0.9, **kw)
        else:
            opt = getattr(cdist, a.opt)(dist_common.param_groups(model), lr=1e-2, **kw)
        if a.resume:
            result["resumed_at"] = opt.resume()
        if a.load_state:
            saved = torch.load(a.load_state.format(rank=a.rank))
            try:
                opt.load_state_dict(saved[result["resumed_at"] - 1])
            except Exception as e:  # noqa: BLE001 - reported to the test
                result["load_refusal"] = "{}: {}".format(type(e).__name__, e)
            opt.load_state_dict(saved[result["resumed_at"]])
        scales = [float(x) for x in a.loss_scales.split(",")] if a.loss_scales else None
        scaler = cpu_grad_scaler(1.0)[0] if scales else None
        states, rec = {}, None
        result["weights"].append([p.detach().clone() for p in model.parameters()])
        if a.record:
            result.update(residuals=[dist_common.piece_residuals(opt)], streams=[None])
        for step in range(a.first_step, a.first_step + a.steps):
            grads = dist_common.rank_grads(model, step, a.rank)
            if scales:
                grads = [g * scales[step - a.first_step] for g in grads]  # powers of two: exact
            if a.none_param >= 0 and a.none_rank in (-1, a.rank):
                grads[a.none_param] = None
            if step == a.nan_step and a.rank == a.nan_rank:
                grads[1].view(-1)[7] = float("nan")
            for p, g in zip(model.parameters(), grads):
                p.grad = g
            if step >= 1:
                opt.param_groups[0]["lr"] = 0.5e-2  # as an LR scheduler would
            if scaler is not None:
                scaler._scale.fill_(scales[step - a.first_step])
                scaler.step(opt)  # opt.step(grad_scaler=scaler)
                scaler._per_optimizer_states.clear()  # what update() does (CUDA-only in 1.13)
            else:
                opt.step()
            result["weights"].append([p.detach().clone() for p in model.parameters()])
            result["reports"].append(dict(opt.last_report))
            if a.record:
                result["residuals"].append(dist_common.piece_residuals(opt))
                result["streams"].append(rec.streams.pop() if rec is not None else None)
                if rec is None:  # the store exists now: record the streams from here on
                    rec = Recorder(opt._session)
                    opt._session = rec
                    plan = opt._plan_
                    result["plan"] = dict(pieces=plan["pieces"], offsets=plan["offsets"],
                                          groups=plan["groups"], lo=plan["lo"], hi=plan["hi"],
                                          subgroups=rec.subgroups,
                                          tensor_offsets=rec.tensor_offsets)
            if a.save_state:
                states[opt.session.step_count] = opt.state_dict()
                torch.save(states, a.save_state.format(rank=a.rank))
    except Exception as e:  # noqa: BLE001 - reported to the test
        result["error"] = "{}: {}".format(type(e).__name__, e)
        result["traceback"] = traceback.format_exc()
    torch.save(result, a.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
