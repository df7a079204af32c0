"""Data parallel training with partitioned optimizer state (ZeRO-1/2 style) over torch.distributed.

    import torch.distributed as dist, csdkit.torch.distributed as cdist
    dist.init_process_group("nccl")          # or "gloo"; torchrun sets rank and world size
    opt = cdist.AdamW(model.parameters(), lr=3e-4, store="ckpt/optim", devices=2)
    ...; loss.backward(); opt.step()         # every rank calls step(): it is a collective

The classes here (AdamW, Adam, SGD, Adagrad, Lion) take the arguments of their csdkit.torch
namesakes plus `process_group=` (default: the default group). Every rank holds the whole model
(replicated, as with DDP) but only its part of the optimizer: the flattened parameters (all
parameters of all param groups, in order, back to back, no padding) are cut into `world`
contiguous slices of chunk = ceil(N / world) elements, rank r owning [r * chunk, min(N, (r + 1) *
chunk)); a slice may cut tensors. Rank r keeps the fp32 master weights and optimizer state of
its slice in its own store, `<store>/rank-<r>/` (with its own `devices`), and a record of the
partition in `<store>/rank-<r>.json`.

Each step (a collective; all ranks call it):
  1. the gradients are copied into one flat buffer (zeros for a gradient that is None and for
     the padding) on the gradients' device and summed over the ranks: reduce-scatter where the
     backend has it (NCCL), else all-reduce and each rank keeps its slice (gloo in torch 1.13);
     gloo cannot reduce bfloat16, so there the sum is taken in float32 and each owner rounds its
     slice to bfloat16 once;
  2. each rank computes the float64 sum of squares of its summed slice and whether a local check
     found an inf (GradScaler.unscale_); one all-gather of these, plus each rank's "has a
     gradient" bit per parameter, makes every rank take the same decisions from the same
     numbers: the step is skipped everywhere if any value anywhere is non-finite; the global
     norm is sqrt(sum of the ranks' partial sums, added in rank order 0, 1, ...) / world; a
     parameter without a gradient on every rank is left alone (its weights and state);
  3. each rank steps its slice in its store, with 1 / world folded into the loss scale (the
     kernel's unscale factor, no pass over the gradient) and the agreed clip coefficient;
  4. the updated weights of every slice, in the parameters' dtype (fp32, or the kit's fp16/bf16
     copy), are all-gathered into a flat buffer and copied into the parameters.
With compress=csdkit.torch.TopK(ratio, error_feedback), step 1 is unchanged (the reduction over
the network stays dense); in steps 2 and 3 each rank compresses its summed slice per (device,
subgroup) of its store, with its own float32 residual of its pieces, exactly as csdkit.torch
does for a model that is that slice given that sum at loss scale world * scale, agrees with the
others on skipping (any non-finite value in any rank's streams) and on the clip coefficient
(the norm of the averaged gradient plus residual / world), and steps with Session.step_sparse.
Top-K shrinks what crosses each host's shared link to its devices, not the network traffic.
state_dict() is this rank's part (the residuals and the param groups; the stores hold the rest).
See docs/trainer.md, "Data parallel (torch.distributed)".
"""

import hashlib
import inspect
import json
import math
import os
import time

import weakref

import torch
import torch.distributed as dist

import csdkit

from . import optim as _optim
from ._cuda_arena import _register as _register_host
from ._cuda_arena import _unregister as _unregister_host

__all__ = ["AdamW", "Adam", "SGD", "Adagrad", "Lion", "partition", "reshard"]

_DTYPE_CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_FORMAT = "csdkit-zero-partition-1"


# A rank record is read under the bounds of every JSON the kit reads (optim._read_json: a
# regular file -- a FIFO would block open() forever --, nested at most 64 deep), at most 1 MiB.
_MAX_RECORD_BYTES = 1 << 20


def _read_record(path):
    """A partition record as a dict, or ValueError naming the file, what was expected and
    what was found."""
    rec = _optim._read_json(path, _MAX_RECORD_BYTES)
    if not isinstance(rec, dict):
        raise ValueError("expected a JSON object (a partition record), found {}"
                         .format(type(rec).__name__))
    return rec


def partition(total, world):
    """The partition rule: [(begin, end)] of each rank's slice of `total` flattened elements
    over `world` ranks, chunk = ceil(total / world), rank r owning [r * chunk, min(total, (r + 1)
    * chunk)). Raises ValueError when a rank would own nothing (total < world, or e.g. total 5
    over 4 ranks)."""
    chunk = -(-total // world)
    out = [(min(total, r * chunk), min(total, (r + 1) * chunk)) for r in range(world)]
    empty = [r for r, (b, e) in enumerate(out) if b >= e]
    if empty:
        raise ValueError("partition of {} elements over {} ranks (chunk {}): ranks {} would own "
                         "no element; use at most {} ranks for this model"
                         .format(total, world, chunk, empty, -(-total // chunk) if chunk else 0))
    return out


def reshard(src, dst, world, devices=None, *, backend="model", device_mem=4 << 30,
            link_model=True, state=None):
    """Re-splits the rank stores under `src` (written by csdkit.torch.distributed for some
    world size) into a new set under `dst` for `world` ranks (`devices` devices per rank store;
    None: as src's rank 0), at the same committed step, so that the optimizer's resume() with
    the new world size continues where the old run stopped. Returns the step.

    The work is done in C++ (csdkit/runtime/reshard.h), the code `csdkit reshard` runs too.
    It reads every rank's record (checked: one format, model fingerprint, element count, dtype
    and world size, ranks 0 .. W-1, ranges tiling [0, N) by the partition rule) and store (each
    opened for reading, one at a time: layout pieces tiling the model, one optimizer and set of
    state variables, the same committed step on every rank, else StoreError naming the ranks and
    steps); then, one new rank at a time, gathers its slice of theta and m/v from the source
    stores it overlaps, creates its store (the source's optimizer, dtypes, loss scale, ftz and
    seed, and the source's state format or `state` ('fp32', 'q8', 'q8-bf16': converting
    dequantizes and quantizes as a state import does; q8 blocks follow each new rank's pieces);
    subgroups sized for `device_mem`) and imports the slice at that step with, per local
    param group, the hyper-parameters the source recorded for the global group; the records
    rank-<r>.json come last. `src` is only read; `dst` must be absent or empty and is left as it
    was found if the reshard fails. StoreError for a set that cannot be re-split, ValueError for
    a bad argument (a world size for which a rank would own nothing, a device count the new
    slices cannot hold). No device is opened: `backend` (still checked) and `link_model` change
    nothing."""
    return csdkit._csdkit.reshard(os.fspath(src), os.fspath(dst), int(world),
                                  None if devices is None else int(devices), backend=backend,
                                  device_mem=int(device_mem), link_model=bool(link_model),
                                  state=None if state is None else str(state))


class _ZeroMixin:
    """The distributed skeleton over a csdkit.torch optimizer (see the module docstring)."""

    # overlap_backward: the hooks launch the buckets' reductions during backward (in bucket
    # order, in the step's last backward pass) and fill this rank's pieces into its session's
    # gradient arena as they complete; the update starts during backward (a speculation).
    _arena_capable = True
    # Gradient bytes (in the reduction's dtype) per bucket; tests set a smaller value on the
    # instance before the first step.
    _bucket_bytes = 25 << 20

    def __init__(self, params, *args, process_group=None, **kwargs):
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("{}: expected an initialized torch.distributed default process "
                               "group (dist.init_process_group), found none"
                               .format(type(self).__name__))
        super().__init__(params, *args, **kwargs)
        self._pg = process_group
        self._rank = dist.get_rank(process_group)
        self._world = dist.get_world_size(process_group)
        self._dist_backend = dist.get_backend(process_group)
        self._store_root = self._store_dir
        self._store_dir = os.path.join(self._store_root, "rank-%d" % self._rank)
        self._record_path = os.path.join(self._store_root, "rank-%d.json" % self._rank)
        # After a resume that rolled stores back to the common step: {step, ranks, steps}.
        self.rolled_back = None
        self._bucket_pg = None   # the buckets' reductions (their own group: see _make_buckets)
        self._cuda_weights = False  # CUDA parameters: the weights hook (_on_weights)
        self._cuda_pinned = None    # CUDA: the page-locked host buffers' addresses
        self._weights_buf, self._weights_pinned, self._weights_read = None, False, None
        self._bytes_sent = 0
        self._works = {}         # bucket -> [works, {param: (grad, _version, probe) or None}]
        self._filled = set()     # this rank's pieces filled into the arena since the last step
        self._piece_sumsq = {}   # piece -> float64 sum of squares of its reduced gradient
        self._launched = 0       # buckets launched during this step's backward (a prefix)
        self._launching = False  # this backward pass launches buckets
        self._refuse_dtensors()

    def _refuse_dtensors(self):
        """DTensor parameters (FSDP2's fully_shard) are sharded already: partitioning them again
        is not what this class does."""
        if any(_optim._is_dtensor(p) for g in self.param_groups for p in g["params"]):
            raise ValueError(
                "{}: DTensor (FSDP2 fully_shard) parameters: csdkit.torch.distributed partitions "
                "replicated parameters (data parallel); with FSDP2 each rank already holds its "
                "shards: use csdkit.torch.{} on every rank, each with its own store"
                .format(type(self).__name__, type(self).__name__))

    def add_param_group(self, param_group):
        """As torch.optim's; after construction a collective: every rank calls it with the
        same group (the ranks first learn whether any of them has its store).

        Before the rank stores exist the group joins the layout the first step() partitions.
        Once they exist, the set grows: every rank's committed state (weights, buffers,
        per-parameter counts) is gathered into the flattened model, the new group's parameters
        are appended (their current values, initial buffers, count 0), the grown model is
        partitioned again, and each rank writes its new slice as a new store beside the set
        (`<store>.grow-<pid of rank 0>/rank-<r>`, with its partition record); then rank 0
        exchanges the two set directories in one step (renameat2 RENAME_EXCHANGE) and every
        rank removes its old store. The committed step stays; the state the last commit
        replaced does not carry over. Takes the whole model's state (fp32, per state variable)
        in each rank's memory for the gather. The set's directory must be one directory that
        every rank sees (one host, or a shared file system), as for `csdkit reshard`. Refused
        with compress= (the Top-K residuals follow each rank's slice). On any error every rank's
        optimizer and the set are as they were.
        """
        if getattr(self, "_store_root", None) is None:  # torch.optim.Optimizer.__init__
            super().add_param_group(param_group)
            return
        mine = self._session is not None or os.path.exists(
            os.path.join(self._store_dir, "manifest.json"))
        flags = [None] * self._world
        dist.all_gather_object(flags, bool(mine), group=self._pg)
        if not any(flags):
            super().add_param_group(param_group)  # joins the layout of the first step()
            return
        self._check_open()
        n_before = len(self.param_groups)
        error = None
        try:
            if self._compress is not None:
                raise ValueError("{}.add_param_group: the rank stores under '{}' exist and "
                                 "compress= is set: the Top-K residuals follow each rank's "
                                 "slice, which growing moves; not supported"
                                 .format(type(self).__name__, self._store_root))
            torch.optim.Optimizer.add_param_group(self, param_group)  # torch's own checks
            self._check_group(self.param_groups[-1])
        except (ValueError, TypeError, NotImplementedError) as e:
            error = "{}: {}".format(type(e).__name__, e)
        try:
            self._agree(error)
            if self.param_groups[-1]["params"]:
                self._grow_set()
        except BaseException:
            del self.param_groups[n_before:]
            raise

    def _grow_set(self):
        """add_param_group on existing rank stores (see there); a collective."""
        added = self.param_groups.pop()
        try:  # the set as it is, for the layout without the new group
            self._ensure_session(check_weights=True)
        finally:
            self.param_groups.append(added)
        sess, old = self._session, self._plan_
        n_old = len(self._layout)
        vars_ = list(sess.vars)
        devices = sess.devices
        desc = sess.describe()
        step = sess.step_count
        # Everything in the set's directory and in this rank's store must be the set's own:
        # the old set is removed at the end.
        error = None
        extra = _optim._foreign_files(self._store_dir, devices, vars_)
        where = self._store_dir
        if self._rank == 0 and not extra:
            allowed = {"rank-%d" % r for r in range(self._world)} | {
                "rank-%d.json" % r for r in range(self._world)}
            extra = [f for f in sorted(os.listdir(self._store_root)) if f not in allowed]
            where = self._store_root
        if extra:
            error = ("'{}' holds '{}', which the set did not write; growing the set replaces "
                     "its directory, so move that elsewhere first".format(where, extra[0]))
        pid0 = [None] * self._world
        dist.all_gather_object(pid0, os.getpid(), group=self._pg)
        root = os.path.abspath(self._store_root)
        tmp_root = "{}.grow-{}".format(root, pid0[0])
        if self._rank == 0 and error is None and os.path.lexists(tmp_root):
            error = ("'{}' exists (left by an interrupted add_param_group: the set before or "
                     "after growing, the other being '{}'); expected to create it; remove it "
                     "or move it away".format(tmp_root, self._store_root))
        self._agree(error)
        # The committed state and counts of this rank's slice.
        local = {}
        for var in vars_:
            flat = [torch.empty(n, dtype=torch.float32) for _, n, _ in old["layout"]]
            sess.export_state(var, flat)
            local[var] = torch.cat(flat) if flat else torch.empty(0, dtype=torch.float32)
        piece_counts = [(t, c) for (t, _, _), c in zip(old["pieces"], sess.tensor_steps)]
        error = None
        try:
            params, layout = self._describe_model()  # the grown model (checks the new group)
        except ValueError as e:
            error = str(e)
        self._agree(error)
        dev = self._device
        fp = self._check_models_agree(params, layout, dev)
        new = self._plan(params, layout)
        # The old flattened state: every rank's slice, gathered (on the collectives' device).
        full = {}
        for var in vars_:
            mine = torch.zeros(old["chunk"], dtype=torch.float32, device=dev)
            mine[:local[var].numel()] = local[var].to(dev)
            outs = [torch.empty_like(mine) for _ in range(self._world)]
            dist.all_gather(outs, mine, group=self._pg)
            g = torch.empty(old["total"], dtype=torch.float32)
            for r, (lo, hi) in enumerate(old["slices"]):
                g[lo:hi] = outs[r][:hi - lo].cpu()
            full[var] = g
        rows = [None] * self._world
        dist.all_gather_object(rows, piece_counts, group=self._pg)
        count_of = {t: c for row in rows for t, c in row}
        # This rank's slice of the grown model: the old tensors keep their flattened offsets
        # (the new group comes last).
        bufs = {var: [] for var in vars_}
        counts = []
        with torch.no_grad():
            for t, a, b in new["pieces"]:
                if t < n_old:
                    for var in vars_:
                        bufs[var].append(full[var][a:b].clone())
                    counts.append(count_of[t])
                else:
                    off = new["offsets"][t]
                    bufs["theta"].append(params[t].detach().reshape(-1)[a - off:b - off]
                                         .to(device="cpu", dtype=torch.float32).contiguous())
                    for var in vars_:
                        if var != "theta":
                            bufs[var].append(None)  # the initial value
                    counts.append(0)
        full = local = None
        hyper = [self._group_hyper(g) for g in self.param_groups if g["params"]]
        groups = [hyper[g] for g in new["groups"]]
        record = dict(format=_FORMAT, world_size=self._world, rank=self._rank,
                      total_elements=new["total"], begin=new["lo"], end=new["hi"],
                      fingerprint="%014x" % fp, dtype=str(params[0].dtype))
        mine_dir = os.path.join(tmp_root, os.path.basename(self._store_dir))
        made = False
        error = None
        if self._rank == 0:
            try:
                os.mkdir(tmp_root)
            except OSError as e:
                error = "cannot create '{}': {}".format(tmp_root, e)
        self._agree(error)
        try:
            grown = csdkit.Session.create(
                mine_dir, new["layout"], groups, bufs["theta"], optimizer=self._optimizer,
                devices=devices, backend=self._backend, grad_dtype=sess.grad_dtype,
                out_dtype=sess.out_dtype, loss_scale=float(desc["loss_scale"]),
                device_mem=self._device_mem, link_model=self._link_model,
                ftz=bool(desc["ftz"]), seed=int(desc["seed"]),
                state=str(desc.get("state", "fp32")))
            made = True
            if step > 0:
                grown.import_state(step, bufs["theta"], m=bufs.get("m"), v=bufs.get("v"),
                                   group_hyper=groups, tensor_steps=counts)
            grown.verify()
            grown = None  # closes it
            tmp = os.path.join(tmp_root, os.path.basename(self._record_path) + ".tmp")
            with open(tmp, "w") as f:
                json.dump(record, f, indent=1)
            os.replace(tmp, os.path.join(tmp_root, os.path.basename(self._record_path)))
        except (RuntimeError, ValueError, OSError) as e:
            error = "{}: {}".format(type(e).__name__, e)
            grown = None
        bufs = None
        errors = [None] * self._world
        dist.all_gather_object(errors, error, group=self._pg)
        if any(errors):
            self._remove_grown(tmp_root, mine_dir if made else None, devices, vars_)
            self._agree(error)
        # Every rank's old store closed, then the one exchange of the two set directories.
        self._drop_session()
        error = None
        if self._rank == 0:
            try:
                _optim._exchange_dirs(root, tmp_root)
            except (csdkit.StoreError, OSError) as e:
                error = str(e)
        errors = [None] * self._world
        dist.all_gather_object(errors, error, group=self._pg)
        if any(errors):  # the old set as it was; the next step() opens it again
            self._remove_grown(tmp_root, mine_dir, devices, vars_)
            self._agree(error)
        # The set's directory is the grown set now, tmp_root the old one.
        self._plan_ = None
        self._ensure_session(check_weights=False)
        self._remove_grown(tmp_root, mine_dir, devices, vars_)

    def _remove_grown(self, tmp_root, mine_dir, devices, vars_):
        """Each rank removes its store and record under tmp_root (the grown copy after a failed
        growth, the old store after the exchange), then rank 0 the directory."""
        if mine_dir is not None and os.path.isdir(mine_dir):
            _optim._remove_store_files(mine_dir, devices, vars_)
        try:
            os.unlink(os.path.join(tmp_root, os.path.basename(self._record_path)))
        except FileNotFoundError:
            pass
        dist.barrier(group=self._pg)
        if self._rank == 0:
            try:
                os.rmdir(tmp_root)
            except OSError:
                pass

    # -- the model and its partition -----------------------------------------------------

    def _plan(self, params, layout):
        """Offsets, partition, this rank's pieces and its local layout."""
        offsets, at = [], 0
        for _, n, _ in layout:
            offsets.append(at)
            at += n
        total = at
        slices = partition(total, self._world)
        lo, hi = slices[self._rank]
        pieces, local_layout, groups = [], [], []
        for t, ((name, n, g), off) in enumerate(zip(layout, offsets)):
            a, b = max(lo, off), min(hi, off + n)
            if a >= b:
                continue
            if g not in groups:
                groups.append(g)
            pieces.append((t, a, b))  # global flattened range [a, b) of tensor t
            local_layout.append(("{}[{}:{}]".format(name, a - off, b - off), b - a,
                                 groups.index(g)))
        return dict(offsets=offsets, total=total, slices=slices, lo=lo, hi=hi,
                    chunk=-(-total // self._world), pieces=pieces, layout=local_layout,
                    groups=groups)

    @staticmethod
    def _fingerprint(params, layout):
        desc = [str(params[0].dtype)] + [[list(p.shape), g] for p, (_, _, g) in
                                         zip(params, layout)]
        h = hashlib.sha256(json.dumps(desc).encode()).digest()
        return int.from_bytes(h[:7], "little")  # fits an int64

    def _gather_ints(self, values, dev):
        mine = torch.tensor(values, dtype=torch.int64, device=dev)
        out = [torch.empty_like(mine) for _ in range(self._world)]
        dist.all_gather(out, mine, group=self._pg)
        return [[int(x) for x in o.tolist()] for o in out]

    def _agree(self, error):
        """Every rank learns every rank's error (a string or None); raises the same error on
        every rank if any rank has one, so no rank is left waiting in a later collective."""
        errors = [None] * self._world
        dist.all_gather_object(errors, error, group=self._pg)
        bad = [(r, e) for r, e in enumerate(errors) if e]
        if bad:
            raise csdkit.StoreError("; ".join("rank {}: {}".format(r, e) for r, e in bad))

    def _check_models_agree(self, params, layout, dev):
        ngroups = len({g for _, _, g in layout})
        mine = [self._fingerprint(params, layout), len(layout), sum(n for _, n, _ in layout),
                _DTYPE_CODE[params[0].dtype], ngroups]
        rows = self._gather_ints(mine, dev)
        names = {v: str(k).replace("torch.", "") for k, v in _DTYPE_CODE.items()}

        def text(row):
            return "{} tensors, {} elements, {}, {} param group(s), fingerprint {:014x}".format(
                row[1], row[2], names[row[3]], row[4], row[0])
        bad = [r for r, row in enumerate(rows) if row != rows[0]]
        if bad:
            raise ValueError("the ranks' models differ (every rank must build the same model: "
                             "the same parameters, shapes, dtype and param groups, in order): "
                             "expected rank 0's ({}), found {}".format(
                                 text(rows[0]), "; ".join("rank {}: {}".format(r, text(rows[r]))
                                                          for r in bad)))
        return rows[0][0]

    def _ensure_session(self, check_weights=True):
        self._refuse_dtensors()
        params, layout = self._describe_model()
        if self._session is not None:
            self._check_same_model(params, layout)
            return False
        devs = {p.device for p in params}
        if len(devs) != 1:
            raise ValueError("parameters: expected one device for the whole model (the flat "
                             "buffers of the collectives live there), found {}"
                             .format(sorted(map(str, devs))))
        dev = devs.pop()
        fp = self._check_models_agree(params, layout, dev)
        plan = self._plan(params, layout)
        record = dict(format=_FORMAT, world_size=self._world, rank=self._rank,
                      total_elements=plan["total"], begin=plan["lo"], end=plan["hi"],
                      fingerprint="%014x" % fp, dtype=str(params[0].dtype))
        # What this rank finds on its disk: 0 = nothing, 1 = its store; or an error.
        error, found = None, 0
        has_store = os.path.exists(os.path.join(self._store_dir, "manifest.json"))
        has_record = os.path.exists(self._record_path)
        try:
            if has_record:
                old = _read_record(self._record_path)
                keys = ("world_size", "rank", "total_elements", "begin", "end", "fingerprint")
                if old.get("format") != _FORMAT or any(old.get(k) != record[k] for k in keys):
                    error = ("store '{}' was written for world size {}, rank {}, elements [{}, "
                             "{}) of {} (model fingerprint {}); expected world size {}, rank {}, "
                             "elements [{}, {}) of {} (fingerprint {}): a partitioned store "
                             "resumes only with the world size and model it was written with"
                             .format(self._store_dir, old.get("world_size"), old.get("rank"),
                                     old.get("begin"), old.get("end"),
                                     old.get("total_elements"), old.get("fingerprint"),
                                     self._world, self._rank, plan["lo"], plan["hi"],
                                     plan["total"], record["fingerprint"]))
                elif not has_store:
                    error = ("partition record '{}' exists but its store '{}' does not"
                             .format(self._record_path, self._store_dir))
                else:
                    found = 1
            elif has_store:
                error = ("store '{}' exists without its partition record '{}' (not written by "
                         "csdkit.torch.distributed, or its creation was interrupted)"
                         .format(self._store_dir, self._record_path))
        except (OSError, ValueError) as e:
            error = "cannot read '{}': {}".format(self._record_path, e)
        founds = [None] * self._world
        dist.all_gather_object(founds, (error, found), group=self._pg)
        bad = [(r, e) for r, (e, _) in enumerate(founds) if e]
        if not bad and len({f for _, f in founds}) != 1:
            bad = [(None, "ranks {} have a store under '{}' and ranks {} do not (expected all "
                    "or none)".format([r for r, (_, f) in enumerate(founds) if f],
                                      self._store_root,
                                      [r for r, (_, f) in enumerate(founds) if not f]))]
        if bad:
            raise csdkit.StoreError("; ".join(e if r is None else "rank {}: {}".format(r, e)
                                              for r, e in bad))
        opened = found == 1
        # Open or create this rank's store; every rank learns whether all succeeded.
        session, error = None, None
        hyper = [self._group_hyper(g) for g in self.param_groups if g["params"]]
        try:
            if opened:
                session = csdkit.Session.open(self._store_dir, plan["layout"],
                                              backend=self._backend,
                                              device_mem=self._device_mem,
                                              link_model=self._link_model)
                error = self._state_format_error(session)
                if error:
                    session = None  # (closes it: releases the store's lock)
                    raise ValueError(error)
            else:
                with torch.no_grad():
                    flat = [p.detach().reshape(-1) for p in params]
                    weights = [flat[t][a - plan["offsets"][t]:b - plan["offsets"][t]]
                               .to("cpu").contiguous() for t, a, b in plan["pieces"]]
                os.makedirs(self._store_root, exist_ok=True)
                session = csdkit.Session.create(
                    self._store_dir, plan["layout"], [hyper[g] for g in plan["groups"]],
                    weights, optimizer=self._optimizer, devices=self._devices,
                    backend=self._backend, device_mem=self._device_mem,
                    link_model=self._link_model, state=self._state_fmt)
                tmp = self._record_path + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(record, f, indent=1)
                os.replace(tmp, self._record_path)
        except (RuntimeError, ValueError, OSError) as e:
            error = "{}: {}".format(type(e).__name__, e)
            session = None
        self._agree(error)
        self._session, self._params, self._layout = session, params, layout
        self._shapes = [tuple(p.shape) for p in params]
        self._staging = [None] * len(params)  # (the base class's per-parameter staging: unused)
        self._plan_ = plan
        self._device = dev
        self._arena_index = {id(p): t for t, p in enumerate(params)}
        self._make_buffers()
        if opened:
            self._roll_to_common_step(session, dev)
            if check_weights:
                try:
                    self._agree(self._weights_mismatch())
                except csdkit.StoreError:
                    self._drop_session()  # closes the store (and releases its lock)
                    raise
        return opened

    def _roll_to_common_step(self, session, dev):
        """The ranks' stores must be at one committed step. A rank that stopped between the
        others' commits leaves its store at step t and theirs at t + 1; those still record t as
        the state their last commit replaced (the two-slot store keeps it in the other slot), so
        they roll back to t (Session.roll_back) and the whole group resumes at t. Anything else
        (a store two steps ahead, or one without the earlier state) raises StoreError on every
        rank, naming every rank's committed and previous step."""
        prev = session.previous_step
        rows = self._gather_ints([session.step_count, -1 if prev is None else prev], dev)
        common = min(r[0] for r in rows)
        if all(r[0] == common for r in rows):
            return
        ahead = [r for r, row in enumerate(rows) if row[0] != common]
        if any(rows[r][1] != common for r in ahead):
            self._drop_session()
            raise csdkit.StoreError(
                "the ranks' stores under '{}' are at different committed steps ({}): ranks {} "
                "are ahead of step {} and cannot all roll back to it (a store returns only to "
                "the step its last commit replaced)".format(
                    self._store_root, ", ".join(
                        "rank {}: {} (previous {})".format(
                            r, row[0], "none" if row[1] < 0 else row[1])
                        for r, row in enumerate(rows)), ahead, common))
        error = None
        if self._rank in ahead:
            try:
                session.roll_back()
            except (RuntimeError, ValueError, OSError) as e:
                error = "{}: {}".format(type(e).__name__, e)
        try:
            self._agree(error)
        except csdkit.StoreError:
            self._drop_session()
            raise
        self.rolled_back = dict(step=common, ranks=ahead,
                                steps=[row[0] for row in rows])

    def _make_buffers(self):
        plan, dev, W = self._plan_, self._device, self._world
        dtype = self._params[0].dtype
        # gloo cannot reduce bfloat16: reduce in float32 there.
        self._reduce_dtype = (torch.float32 if dtype == torch.bfloat16
                              and self._dist_backend != "nccl" else dtype)
        n = plan["chunk"] * W
        self._flat_grad = torch.zeros(n, dtype=self._reduce_dtype, device=dev)
        self._flat_weights = torch.zeros(n, dtype=dtype, device=dev)
        # CUDA: the new weights come from the runtime's buffer through the weights hook.
        self._cuda_weights = dev.type != "cpu"
        self._make_buckets()

    def _make_buckets(self):
        """The buckets of the gradients' reduction: runs of whole parameters in reverse order
        (the order backward finishes them), each of about _bucket_bytes in the reduction's
        dtype, a contiguous range [a, b) of the flat buffer. A bucket is reduced as one
        `dist.reduce` per owner of a part of it (the ranks whose slices it crosses) to that
        owner: the same operations whether launched during backward or in step(), so both give
        the same sums bit for bit. This rank's pieces each lie in one bucket (a piece is part
        of one parameter). The reductions run on a process group of their own (made here, from
        the default group), so that those launched during backward never interleave with the
        step's other collectives; with a process_group= given they run on it, in step() only."""
        plan = self._plan_
        esize = torch.tensor([], dtype=self._reduce_dtype).element_size()
        n = len(self._params)
        buckets, cur, size = [], [], 0
        for t in reversed(range(n)):
            cur.append(t)
            size += self._params[t].numel() * esize
            if size >= self._bucket_bytes or t == 0:
                buckets.append(sorted(cur))
                cur, size = [], 0
        self._buckets = []
        self._bucket_of = [0] * n
        for k, ts in enumerate(buckets):
            a = plan["offsets"][ts[0]]
            b = plan["offsets"][ts[-1]] + self._params[ts[-1]].numel()
            segs = [(r, max(a, slo), min(b, shi)) for r, (slo, shi) in enumerate(plan["slices"])
                    if max(a, slo) < min(b, shi)]
            pieces = [j for j, (t, _, _) in enumerate(plan["pieces"]) if ts[0] <= t <= ts[-1]]
            self._buckets.append(dict(params=ts, a=a, b=b, segs=segs, pieces=pieces))
            for t in ts:
                self._bucket_of[t] = k
        if self._pg is None and self._bucket_pg is None and self._world > 1:
            self._bucket_pg = dist.new_group()
        self._reduce_pg = self._bucket_pg if self._pg is None else self._pg
        self._dst = [dist.get_global_rank(self._pg, r) if self._pg is not None else r
                     for r in range(self._world)]
        self._arena = None
        self._works, self._filled, self._piece_sumsq = {}, set(), {}
        self._launched, self._launching = 0, False

    def _piece_views(self, flat, base):
        """Views of `flat` (indexed from global element `base`) for this rank's pieces."""
        return [flat[a - base:b - base] for _, a, b in self._plan_["pieces"]]

    def _weights_mismatch(self):
        """None, or a message naming the first element where this rank's store's committed
        weights are not the model's."""
        plan = self._plan_
        theta = [torch.empty(b - a, dtype=torch.float32) for _, a, b in plan["pieces"]]
        self._session.export_state("theta", theta)
        for (t, a, b), th, (name, _, _) in zip(plan["pieces"], theta, plan["layout"]):
            p = self._params[t]
            off = plan["offsets"][t]
            mine = p.detach().reshape(-1)[a - off:b - off].to("cpu")
            store = th.to(p.dtype)
            if not torch.equal(mine, store):
                i = int((mine != store).nonzero()[0])
                return ("store '{}' (committed step {}): expected the model's weights, found "
                        "others: {} element {} is {!r} in the model and {!r} in the store; call "
                        "resume() on every rank to load the stores' weights into the model"
                        .format(self._store_dir, self._session.step_count, name, i,
                                float(mine[i]), float(store[i])))
        return None

    def resume(self, expected_step=None):
        """Opens every rank's store (a collective), checks that all are at one committed step
        (and at `expected_step` when given), loads the committed weights of every slice into
        every rank's parameters (all-gathered, rounded to the parameters' dtype) and returns
        the step."""
        for group in self.param_groups:
            self._check_group(group)
        self._ensure_session(check_weights=False)
        step = self._session.step_count
        if expected_step is not None and int(expected_step) != step:
            raise csdkit.StoreError("stores under '{}': expected committed step {} (the "
                                    "trainer's), found step {}".format(
                                        self._store_root, int(expected_step), step))
        plan = self._plan_
        full = torch.zeros(plan["chunk"] * self._world, dtype=torch.float32)
        self._session.export_state("theta", self._piece_views(full, 0))
        full = full.to(self._device)
        self._all_gather_flat(full)
        with torch.no_grad():
            for p, off in zip(self._params, plan["offsets"]):
                p.copy_(full[off:off + p.numel()].reshape(p.shape))
        return step

    # -- collectives ----------------------------------------------------------------------

    def _all_gather_flat(self, flat):
        """Every rank's chunk of `flat` (chunk * world elements) to every rank, in place."""
        chunk, r = self._plan_["chunk"], self._rank
        if self._dist_backend == "nccl":
            dist.all_gather_into_tensor(flat, flat[r * chunk:(r + 1) * chunk], group=self._pg)
            return
        t = flat.view(torch.uint8) if flat.dtype == torch.bfloat16 else flat  # gloo: no bf16
        c = t.numel() // self._world
        outs = list(t.split(c))
        dist.all_gather(outs, outs[r].clone(), group=self._pg)

    # -- the gradients' reduction, bucket by bucket ------------------------------------------

    def _launch_bucket(self, k, grads):
        """Copies bucket k's gradients (`grads`, or the parameters' .grad; zeros for None) into
        the flat buffer and launches its reductions. A launch of the same bucket still running
        finishes first (and the pieces it filled count no more)."""
        if k in self._works:
            self._finish_bucket(k, fill=False)
            del self._works[k]
        bk = self._buckets[k]
        flat, offs = self._flat_grad, self._plan_["offsets"]
        srcs = {}
        for t in bk["params"]:
            p = self._params[t]
            g = grads[t] if grads is not None else p.grad
            view = flat[offs[t]:offs[t] + p.numel()]
            if g is None:
                view.zero_()
                srcs[t] = None
            else:
                view.copy_(g.reshape(-1))
                srcs[t] = (g, g._version, _optim._probe(g) if g.device.type == "cpu" else None)
        for j in bk["pieces"]:
            self._filled.discard(j)
        works = [dist.reduce(flat[a:b], dst=self._dst[r], group=self._reduce_pg, async_op=True)
                 for r, a, b in bk["segs"]]
        self._works[k] = [works, srcs, False]

    def _finish_bucket(self, k, fill=True):
        """Waits for bucket k's reductions; with `fill`, hands this rank's pieces of it to the
        session."""
        w = self._works[k]
        if not w[2]:
            for work in w[0]:
                work.wait()
            w[2] = True
        if fill:
            for j in self._buckets[k]["pieces"]:
                if j not in self._filled:
                    self._fill_piece(j)

    def _poll_buckets(self):
        """Hands over the pieces of the buckets whose reductions are done (no waiting)."""
        for k, w in self._works.items():
            if not w[2] and all(work.is_completed() for work in w[0]):
                self._finish_bucket(k)

    def _fill_piece(self, j):
        """Piece j of this rank's slice, summed over the ranks, into the session's arena (an
        external fill: rounded to the grad dtype where the sum is float32, the float64 sum of
        squares of the sum from the same pass where it lives)."""
        sess = self._session
        if self._cuda_weights:
            self._cuda_setup()  # (the arena page-locked before the first copy into it)
        if self._arena is None:
            self._arena = torch.from_numpy(sess.grad_arena()).view(self._params[0].dtype)
            self._arena_offsets = sess.tensor_offsets
        _, a, b = self._plan_["pieces"][j]
        src = self._flat_grad[a:b]
        sumsq = float(src.double().square().sum())
        o = self._arena_offsets[j]
        sess.begin_fill(j)
        try:
            self._arena[o:o + (b - a)].copy_(src)
        except BaseException:
            sess.end_fill(j, None)
            raise
        sess.end_fill(j, sumsq)
        self._piece_sumsq[j] = sumsq
        self._filled.add(j)

    def _stale(self, k, grads, unscaled):
        """Whether bucket k's launch during backward no longer holds this rank's gradients
        (another tensor in .grad, one changed in place: a version bump, or the CPU probe; all
        of them after GradScaler.unscale_, which bumps no version)."""
        srcs = self._works[k][1]
        for t in self._buckets[k]["params"]:
            g, rec = grads[t], srcs.get(t)
            if g is None or rec is None:
                if (g is None) != (rec is None):
                    return True
                continue
            if unscaled or rec[0] is not g or rec[1] != g._version:
                return True
            if g.device.type == "cpu" and (rec[2] is None or rec[2] != _optim._probe(g)):
                return True
        return False

    def _reduce(self, grads, unscaled=False, fill=True):
        """Sums the flat gradient over the ranks bucket by bucket and fills this rank's pieces
        into its session's arena; returns this rank's slice of the sum. Buckets launched during
        backward (a prefix, in bucket order, of as many on each rank as its hooks got to) are
        kept unless a rank finds its gradients changed since: the ranks first agree on how far
        each got and which are stale (one all-gather), so that every rank issues the same
        reductions in the same order."""
        K = len(self._buckets)
        launched = self._launched
        if self._reduce_pg is self._bucket_pg and self._bucket_pg is not None:
            stale = [1.0 if self._stale(k, grads, unscaled) else 0.0 for k in range(launched)]
            rows = self._gather_floats([float(launched)] + stale + [0.0] * (K - launched))
            upto = int(max(r[0] for r in rows))
            redo = [k for k in range(upto) if any(r[1 + k] for r in rows)]
        else:
            upto, redo = 0, []
        for k in range(launched, upto):  # catching up with the rank that got furthest
            self._launch_bucket(k, grads)
        for k in redo:
            self._launch_bucket(k, grads)
        for k in range(upto, K):
            self._launch_bucket(k, grads)
        for k in range(K):
            self._finish_bucket(k, fill=fill)
        self._launched, self._launching = 0, False
        chunk, r = self._plan_["chunk"], self._rank
        return self._flat_grad[r * chunk:r * chunk + self._plan_["hi"] - self._plan_["lo"]]

    def _end_reduction(self):
        """After a step (or its failure): no bucket or fill carries over."""
        for k in list(self._works):
            try:
                self._finish_bucket(k, fill=False)
            except Exception:  # pylint: disable=broad-except
                pass  # (the step failed already; the next one launches again)
        self._works, self._filled, self._piece_sumsq = {}, set(), {}
        self._launched, self._launching = 0, False
        self._spec_passes, self._spec_seen, self._spec_started = 0, set(), False

    # -- gradients during backward (overlap_backward) -------------------------------------

    def _grad_ready_timed(self, p):
        """A gradient is final for this backward pass: in the step's last pass (as many passes
        as the last step had), the buckets whose gradients are all final are launched in
        bucket order, the first hook starts the update (a speculation, from the second step),
        and the pieces of the buckets done so far go into the arena."""
        if self._session is None or self._compress is not None or self._bucket_pg is None:
            return
        t = self._arena_index.get(id(p))
        g = p.grad
        if t is None or g is None or g.is_sparse or g.dtype != p.dtype or g.shape != p.shape \
                or g.device != self._device:
            return
        if t in self._spec_seen or not self._spec_passes:
            self._spec_passes += 1  # a backward pass begins
            self._spec_seen = set()
            self._ready = [0] * len(self._buckets)
            last = self._spec_last
            # One launching pass per step: the one expected last (the first if unknown).
            self._launching = self._launched == 0 and (
                last is None or self._spec_passes >= last[2])
            if self._launching and last is not None and not self._spec_started:
                self._spec_started = True
                for k in list(self._works):  # (an earlier pass's, none normally)
                    self._finish_bucket(k, fill=False)
                self._start_speculation()
        self._spec_seen.add(t)
        if not self._launching:
            return
        k = self._bucket_of[t]
        self._ready[k] += 1
        while self._launched < len(self._buckets) and \
                self._ready[self._launched] == len(self._buckets[self._launched]["params"]):
            self._launch_bucket(self._launched, None)
            self._launched += 1
        self._poll_buckets()

    def _session_hyper(self):
        """This step's hyper-parameters of the groups this rank's store holds, in its order."""
        hyper = [self._group_hyper(g) for g in self.param_groups if g["params"]]
        return [hyper[g] for g in self._plan_["groups"]]

    def _weights_out(self):
        """The session's weights_out: this rank's pieces of the flat weights (CPU); None for
        each (CUDA: the weights hook copies them from the runtime's buffer, _on_weights)."""
        plan = self._plan_
        if self._cuda_weights:
            return [None] * len(plan["pieces"])
        return self._piece_views(self._flat_weights[plan["lo"]:plan["hi"]], plan["lo"])

    # -- CUDA: the arena and the runtime's weights buffer, page-locked ---------------------

    def _cuda_setup(self):
        """CUDA parameters: the arena and the weights buffer page-locked in place (the pieces'
        device-to-host copies are DMA), the weights hook installed. Once per session."""
        if self._device.type != "cuda" or self._cuda_pinned is not None:
            return
        sess = self._session
        self._cuda_pinned = []
        if self._arena is None:
            self._arena = torch.from_numpy(sess.grad_arena()).view(self._params[0].dtype)
            self._arena_offsets = sess.tensor_offsets
        self._cuda_pinned.append(_register_host(sess.grad_arena()))
        self._h2d = torch.cuda.Stream(self._device)
        me = weakref.ref(self)
        sess.set_weights_hook(lambda begin, n: me()._on_weights(begin, n))

    def _pin_weights(self):
        """The runtime's weights buffer as a tensor, page-locked once it exists (float32
        weights: after the first step)."""
        if self._weights_buf is not None and self._weights_pinned:
            return
        buf = self._session.weights_buffer()
        if buf is None:
            return
        self._weights_buf = torch.from_numpy(buf).view(self._params[0].dtype)
        self._cuda_pinned.append(_register_host(buf))
        self._weights_pinned = True

    def _on_weights(self, begin, n):
        """The weights hook (a runtime worker, with the GIL): store elements [begin, begin + n)
        of this rank's new weights go host-to-device into its chunk of the flat weights, piece
        by piece (the store's group padding skipped)."""
        if self._weights_buf is None:  # (float32 weights, first step: not page-locked yet)
            self._weights_buf = torch.from_numpy(self._session.weights_buffer()).view(
                self._params[0].dtype)
        plan, offs = self._plan_, self._arena_offsets
        end = begin + n
        with torch.cuda.stream(self._h2d):
            for j, (_, a, b) in enumerate(plan["pieces"]):
                lo, hi = max(begin, offs[j]), min(end, offs[j] + (b - a))
                if lo < hi:
                    at = a + lo - offs[j]
                    self._flat_weights[at:at + hi - lo].copy_(self._weights_buf[lo:hi],
                                                              non_blocking=True)
                    self._bytes_sent += (hi - lo) * self._flat_weights.element_size()

    def _before_session_step(self):
        """CUDA: the weights hook's copies of this step wait for the last step's reads of the
        flat weights; the byte count starts."""
        self._bytes_sent = 0
        if not self._cuda_weights:
            return
        self._cuda_setup()
        self._pin_weights()
        if self._weights_read is not None:
            self._h2d.wait_event(self._weights_read)

    def _drop_session(self):
        if self._cuda_pinned:
            _unregister_host(self._cuda_pinned, self._device)
        self._cuda_pinned = None
        self._weights_buf, self._weights_pinned, self._weights_read = None, False, None
        self._arena = None  # (a view of the session's arena keeps it alive)
        self._works, self._filled, self._piece_sumsq = {}, set(), {}
        super()._drop_session()

    # -- the step -------------------------------------------------------------------------

    @torch.no_grad()
    def step(self, closure=None, grad_scaler=None):
        """One data-parallel step (a collective: every rank of the group calls it). Arguments
        as csdkit.torch's step(). The report (last_report) is this rank's store's, plus
        'rank', 'world_size', 'clip_coef' and, with max_grad_norm, 'grad_norm' (the global
        norm of the averaged gradient as given, equal on every rank; with compress=, of the
        averaged accumulated gradient: see _step_topk)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._check_group(group)
        self._ensure_session()
        loss_scale, found_inf, scaler_state, unscaled = None, False, None, False
        if grad_scaler is not None:
            scaler_state = grad_scaler._per_optimizer_states[id(self)]
            if scaler_state["stage"].name == "UNSCALED":
                unscaled = True
                loss_scale = 1.0
                found_inf = any(float(t.sum()) > 0
                                for t in scaler_state["found_inf_per_device"].values())
            else:
                loss_scale = float(grad_scaler._get_scale_async())
        try:
            return self._step(loss, grad_scaler, scaler_state, loss_scale, found_inf, unscaled)
        finally:
            self._end_reduction()

    def _step(self, loss, grad_scaler, scaler_state, loss_scale, found_inf, unscaled):
        plan, W = self._plan_, self._world
        grads = self._checked_grads(staged=False)
        # 1. Gradients summed over the ranks, bucket by bucket (some buckets perhaps during
        # backward), this rank's pieces of the sum in its session's arena.
        mine = self._reduce(grads, unscaled, fill=self._compress is None)
        if self._compress is not None:
            rep = self._step_topk(grads, mine, loss_scale, found_inf)
            if rep is not None:
                self._finish_step(rep, grad_scaler, scaler_state)
            return loss
        # 2. Agreement: partial sum of squares (the pieces' float64 sums, added in piece
        # order), local inf flag, and which parameters have a gradient here.
        sumsq = 0.0
        for j in range(len(plan["pieces"])):
            sumsq += self._piece_sumsq[j]
        flat = self._flat_grad
        meta = torch.empty(2 + len(grads), dtype=torch.float64, device=flat.device)
        meta[0] = sumsq
        meta[1] = 1.0 if found_inf else 0.0
        meta[2:] = torch.tensor([0.0 if g is None else 1.0 for g in grads], dtype=torch.float64)
        metas = [torch.empty_like(meta) for _ in range(W)]
        dist.all_gather(metas, meta, group=self._pg)
        metas = [m.tolist() for m in metas]
        total = 0.0
        for m in metas:  # rank order: the same float64 additions on every rank
            total += m[0]
        has = [any(m[2 + t] for m in metas) for t in range(len(grads))]
        if not any(has):
            return loss  # as torch.optim: no gradient anywhere, no step
        skip = any(m[1] for m in metas) or not math.isfinite(total)
        scale = 1.0 if loss_scale is None else loss_scale
        norm = math.sqrt(total) / W if math.isfinite(total) else float("inf")
        clip = 1.0
        if self._max_grad_norm > 0 and not skip:
            clip = min(1.0, self._max_grad_norm / (norm / scale + 1e-6))
        # 3. This rank's slice through its store, from the arena (confirming the update started
        # during backward, if it matches).
        local_has = [has[t] for t, _, _ in plan["pieces"]]
        self._before_session_step()
        t_call = time.monotonic()
        rep = self._session.step_arena(local_has, group_hyper=self._session_hyper(),
                                       weights_out=self._weights_out(), mode=self._mode,
                                       loss_scale=scale * W, found_inf=skip, clip_coef=clip)
        # The part of the runtime's step inside this call (the update may have started during
        # backward), on the report's clock.
        rep["seconds_in_step"] = min(rep["seconds"], max(
            0.0, rep["finished_at"] - max(rep["started_at"], t_call)))
        spec = rep.get("speculation")
        if spec is not None and spec != "committed":
            self._spec_skip = min(64, 1 << self._spec_misses) - 1
            self._spec_misses = min(self._spec_misses + 1, 6)
        elif spec == "committed":
            self._spec_misses = 0
        self._spec_last = (local_has, scale * W, max(self._spec_passes, 1))
        if bool(rep["skipped"]) != skip:
            # Cannot happen (the kit skips only for a non-finite value, which every rank saw in
            # the partial sums): refuse rather than let the ranks' stores diverge.
            raise RuntimeError("rank {}: the store skipped a step the ranks agreed to take "
                               "({})".format(self._rank, rep.get("skip_reason")))
        # 4. Every slice's new weights to every rank.
        if not skip:
            self._publish_weights(has)
        rep["rank"], rep["world_size"], rep["clip_coef"] = self._rank, W, clip
        rep["host_bytes"]["weights_sent"] = self._bytes_sent
        if self._max_grad_norm > 0:
            rep["grad_norm"] = norm
        self._finish_step(rep, grad_scaler, scaler_state)
        return loss

    def _publish_weights(self, has):
        """Step 4: this rank's new weights (in its chunk of the flat weights buffer: written
        there by the session (CPU) or by the weights hook (CUDA)) all-gathered, and copied into
        the parameters stepped (`has`)."""
        plan = self._plan_
        if self._cuda_weights:
            torch.cuda.current_stream(self._device).wait_stream(self._h2d)
        self._all_gather_flat(self._flat_weights)
        for p, off, h in zip(self._params, plan["offsets"], has):
            if h:
                p.copy_(self._flat_weights[off:off + p.numel()].reshape(p.shape))
        if self._cuda_weights:  # the next step's hook copies wait for these reads
            self._weights_read = torch.cuda.Event()
            self._weights_read.record(torch.cuda.current_stream(self._device))

    def _gather_floats(self, values):
        """Every rank's list of numbers (float64, all-gathered), in rank order."""
        mine = torch.tensor(values, dtype=torch.float64, device=self._device)
        out = [torch.empty_like(mine) for _ in range(self._world)]
        dist.all_gather(out, mine, group=self._pg)
        return [o.tolist() for o in out]

    # -- compression ----------------------------------------------------------------------

    def _step_topk(self, grads, mine, loss_scale, found_inf):
        """Steps 2 and 3 with compress=TopK. This rank's slice of the summed gradient (`mine`)
        is compressed and stepped exactly as csdkit.torch compresses and steps a whole model
        (the same code: _topk_accumulate, _topk_sumsq, _topk_encode, _topk_commit, over this
        rank's store and its (device, subgroup) slices) given that sum with loss scale
        world * scale: the residual is per rank, of its pieces, in the sum's units (kept at
        loss scale world * scale). Two all-gathers of a few float64 each: (a) each rank's
        GradScaler inf flag and has-gradient bits (needed before accumulating: a parameter
        without a gradient on any rank adds neither gradient nor residual, and keeps its
        residual); (b) each rank's sum of squares of its accumulated slice (with
        max_grad_norm) and whether its streams hold a non-finite value (a non-finite
        accumulated value, always kept, or a kept value that overflows the grad dtype: what
        makes the kit skip). The step is skipped everywhere if any rank's flag is set; the norm
        is sqrt(sum of the partial sums in rank order) / world: that of the averaged
        accumulated gradient (gradient + residual / world), as the one-process path clips by
        the accumulated gradient's norm, and for world = 1 the same number bit for bit.
        Returns the report, or None when no rank has a gradient (no step)."""
        plan, W = self._plan_, self._world
        rows = self._gather_floats([1.0 if found_inf else 0.0] +
                                   [0.0 if g is None else 1.0 for g in grads])
        has = [any(m[1 + t] for m in rows) for t in range(len(grads))]
        if not any(has):
            return None  # as torch.optim: no gradient anywhere, no step
        scale = 1.0 if loss_scale is None else float(loss_scale)
        kit_scale = scale * W
        lo = plan["lo"]
        src = mine.to(self._params[0].dtype)  # bf16 over gloo: the float32 sum, rounded once
        local = [v if has[t] else None
                 for v, (t, _, _) in zip(self._piece_views(src, lo), plan["pieces"])]
        acc = self._topk_accumulate(local, kit_scale, src.device)
        sumsq = self._topk_sumsq(acc) if self._max_grad_norm > 0 else 0.0
        streams = self._topk_encode(acc)  # acc is now the candidate residual
        bad = any(not bool(torch.isfinite(val).all()) for _, _, val in streams)
        rows2 = self._gather_floats([sumsq, 1.0 if bad else 0.0])
        skip = any(m[0] for m in rows) or any(m[1] for m in rows2)
        total = 0.0
        for m in rows2:  # rank order: the same float64 additions on every rank
            total += m[0]
        norm = math.sqrt(total) / W if math.isfinite(total) else float("inf")
        clip = 1.0
        if self._max_grad_norm > 0 and not skip:
            clip = min(1.0, self._max_grad_norm / (norm / scale + 1e-6))
        self._before_session_step()
        rep = self._session.step_sparse(
            streams, group_hyper=self._session_hyper(),
            weights_out=self._weights_out(), mode=self._mode, loss_scale=kit_scale,
            found_inf=skip, clip_coef=clip,
            no_grad=[j for j, g in enumerate(local) if g is None])
        if bool(rep["skipped"]) != skip:
            # Cannot happen (the kit skips only for a non-finite stream value, which every rank
            # learnt in (b)): refuse rather than let the ranks' stores diverge.
            raise RuntimeError("rank {}: the store skipped a step the ranks agreed to take "
                               "({})".format(self._rank, rep.get("skip_reason")))
        if not skip:
            self._topk_commit(acc, local, kit_scale)
            self._publish_weights(has)
        rep["rank"], rep["world_size"], rep["clip_coef"] = self._rank, W, clip
        rep["host_bytes"]["weights_sent"] = self._bytes_sent
        if self._max_grad_norm > 0:
            rep["grad_norm"] = norm
        return rep

    def _topk_residual(self, j):
        """Local layout entry j (piece (t, a, b)): its residual in self._pystate[p] of tensor t,
        1-D over the piece's elements, or None."""
        t = self._plan_["pieces"][j][0]
        st = self._pystate.get(self._params[t])
        if not st or st.get("topk_residual") is None:
            return None
        return st["topk_residual"], float(st.get("topk_residual_scale", 1.0))

    def _topk_keep(self, j, values, scale):
        t, a, b = self._plan_["pieces"][j]
        off = self._plan_["offsets"][t]
        st = self._pystate[self._params[t]]
        res = st.get("topk_residual")
        if res is None or res.device != values.device or res.numel() != b - a:
            res = torch.empty(b - a, dtype=torch.float32, device=values.device)
            st["topk_residual"] = res
        res.copy_(values)
        st["topk_residual_scale"] = scale
        st["topk_residual_range"] = (a - off, b - off)

    # -- this rank's state dict ------------------------------------------------------------

    def _partition_record(self):
        plan = self._plan_
        return dict(format=_FORMAT, world_size=self._world, rank=self._rank,
                    total_elements=plan["total"], begin=plan["lo"], end=plan["hi"],
                    fingerprint="%014x" % self._fingerprint(self._params, self._layout),
                    step=self._session.step_count)

    def state_dict(self):
        """This rank's part of the optimizer state that its store does not hold (the stores,
        committed every step, hold the weights and the optimizer's m/v: resume() restarts from
        them), in torch.optim's outer format; save one per rank. Not a collective.

          'param_groups': torch.optim's (hyper-parameters, parameter indices);
          'state': per parameter index (torch.optim's numbering) whose piece this rank owns and
              that has a compress=TopK residual: 'topk_residual' (float32 CPU, 1-D, the
              piece's elements), 'topk_residual_scale' (float64 scalar tensor: the loss scale
              it is kept at, world * the GradScaler's) and 'topk_residual_range' ([a, b]: the
              piece's elements in the flattened parameter);
          'partition': this rank's record (format, world_size, rank, total_elements, begin,
              end, fingerprint) and 'step', its store's committed step; None before the store
              is opened.

        torch.optim.X.load_state_dict cannot use it (the state is one rank's part); this
        class's load_state_dict on the same rank can."""
        sd = self._base_state_dict()
        index_of = {}
        for g, sg in zip(self.param_groups, sd["param_groups"]):
            for p, i in zip(g["params"], sg["params"]):
                index_of.setdefault(id(p), i)
        partition = self._partition_record() if self._session is not None else None
        state = {index_of[id(p)]: st for p, st in self._state_entries().items()}
        return {"state": state, "param_groups": sd["param_groups"], "partition": partition}

    def _state_entries(self, which=None, buffers=True):
        """What `state` (the read-only view) shows here: {parameter: its entry of this rank's
        state_dict()['state'] (a new dict)}, the parameters whose piece this rank owns that have
        a Top-K residual, in layout order (buffers=False: values None). The stores' buffers are
        this rank's slices, not whole parameters' state, and are not shown: a partitioned
        optimizer has no per-parameter state of torch.optim's form; resume() reads them."""
        out = {}
        if self._session is None:
            return out
        want = None if which is None else {id(p) for p in which}
        for t, _, _ in self._plan_["pieces"]:
            p = self._params[t]
            st = self._pystate.get(p) or {}
            if st.get("topk_residual") is None or (want is not None and id(p) not in want):
                continue
            out[p] = None if not buffers else {
                "topk_residual": st["topk_residual"].detach().to("cpu", copy=True),
                "topk_residual_scale": torch.tensor(float(st["topk_residual_scale"]),
                                                    dtype=torch.float64),
                "topk_residual_range": list(st["topk_residual_range"])}
        return out

    def load_state_dict(self, state_dict):
        """Loads this rank's state_dict() into this rank (not a collective), after resume()
        (or a step) has opened the stores: the param groups replace this optimizer's
        (hyper-parameters, as torch.optim does; the store gets them with the next step), and
        the Top-K residuals of this rank's pieces replace its own (pieces without one: zero).
        Checked before anything changes: 'partition' must be this rank's (format, world size,
        rank, element range, model fingerprint) and its 'step' the store's committed step
        (csdkit.StoreError otherwise: residuals belong to the step they were saved at); each
        residual must be of a piece this rank owns, with that piece's range and element count,
        finite, with a scale > 0 (ValueError). A state dict saved before the store existed
        ('partition' None) holds param groups only."""
        name = type(self).__name__
        if not isinstance(state_dict, dict) or any(
                k not in state_dict for k in ("state", "param_groups", "partition")):
            raise ValueError("state_dict: expected a rank's {}.state_dict() of "
                             "csdkit.torch.distributed (a dict with 'state', 'param_groups' and "
                             "'partition'), found {}".format(
                                 name, sorted(state_dict) if isinstance(state_dict, dict)
                                 else type(state_dict)))
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        new_groups, param_at = [], {}
        for g, sg in zip(self.param_groups, saved_groups):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
            ng = dict(g)
            ng.update({k: v for k, v in sg.items() if k != "params"})
            ng["params"] = g["params"]
            self._check_group(ng)
            new_groups.append(ng)
            for p, i in zip(g["params"], sg["params"]):
                param_at.setdefault(i, p)
        part, saved = state_dict["partition"], state_dict["state"]
        residuals = {}  # tensor index t -> (residual on the gradients' device, scale)
        if part is None:
            if saved:
                raise ValueError("state_dict: expected no 'state' in a state dict without a "
                                 "'partition' (saved before the store existed), found entries "
                                 "for parameters {}".format(sorted(saved)))
        else:
            if self._session is None:
                raise csdkit.StoreError(
                    "{}.load_state_dict: the stores under '{}' are not open; call resume() on "
                    "every rank first (the state dict belongs to a committed step of this "
                    "rank's store)".format(name, self._store_root))
            mine = self._partition_record()
            keys = ("format", "world_size", "rank", "total_elements", "begin", "end",
                    "fingerprint")
            if not isinstance(part, dict) or any(part.get(k) != mine[k] for k in keys):
                raise csdkit.StoreError(
                    "state_dict: expected the state of rank {} of {} (elements [{}, {}) of {}, "
                    "fingerprint {}), found {}".format(
                        mine["rank"], mine["world_size"], mine["begin"], mine["end"],
                        mine["total_elements"], mine["fingerprint"],
                        {k: part.get(k) for k in keys} if isinstance(part, dict) else part))
            if part.get("step") != mine["step"]:
                raise csdkit.StoreError(
                    "state_dict: expected the state of committed step {} (that of the store "
                    "'{}'), found step {}: its Top-K residuals belong to that step; load the "
                    "state dict saved at step {} (or none: the residuals restart at zero)".format(
                        mine["step"], self._store_dir, part.get("step"), mine["step"]))
            t_of = {id(p): t for t, p in enumerate(self._params)}
            piece_of = {t: (a - self._plan_["offsets"][t], b - self._plan_["offsets"][t])
                        for t, a, b in self._plan_["pieces"]}
            for i, st in saved.items():
                what = "state[{}]".format(i)
                if i not in param_at:
                    raise ValueError("{}: expected a parameter index of param_groups, found "
                                     "none".format(what))
                res = st.get("topk_residual") if isinstance(st, dict) else None
                if res is None:
                    continue
                t = t_of[id(param_at[i])]
                rng = st.get("topk_residual_range")
                rng = tuple(int(x) for x in rng) if isinstance(rng, (list, tuple)) else rng
                if piece_of.get(t) != rng:
                    raise ValueError("{}['topk_residual_range']: expected {} (this rank's "
                                     "piece of the parameter), found {!r}".format(
                                         what, list(piece_of[t]) if t in piece_of
                                         else "no piece", rng))
                n = rng[1] - rng[0]
                if not torch.is_tensor(res) or res.numel() != n:
                    raise ValueError("{}['topk_residual']: expected a tensor of {} elements "
                                     "(the piece's), found {}".format(
                                         what, n, tuple(res.shape) if torch.is_tensor(res)
                                         else type(res)))
                res = res.detach().to(device="cpu", dtype=torch.float32).reshape(-1)
                sc = _optim._residual_scale(res, st, what)
                residuals[t] = (res.to(self._device, copy=True), sc)
        self.param_groups[:] = new_groups
        if part is not None:
            for t, a, b in self._plan_["pieces"]:
                p = self._params[t]
                st = self._pystate.pop(p, None) or {}
                for k in ("topk_residual", "topk_residual_scale", "topk_residual_range"):
                    st.pop(k, None)
                if t in residuals:
                    st["topk_residual"], st["topk_residual_scale"] = residuals[t]
                    st["topk_residual_range"] = piece_of[t]
                if st:
                    self._pystate[p] = st


def _distributed(base):
    class Cls(_ZeroMixin, base):
        __doc__ = ("{} with its state partitioned over the ranks of a torch.distributed "
                   "process group (ZeRO-1/2 style); the arguments of csdkit.torch.{} plus "
                   "process_group (None: the default group). See csdkit.torch.distributed."
                   .format(base.__name__, base.__name__))

    Cls.__name__ = Cls.__qualname__ = base.__name__
    # What inspect.signature (and so IDEs and help()) shows: the base optimizer's arguments
    # plus process_group, keyword only.
    sig = inspect.signature(base.__init__)
    Cls.__signature__ = sig.replace(parameters=[
        p for p in sig.parameters.values() if p.name != "self"] + [inspect.Parameter(
            "process_group", inspect.Parameter.KEYWORD_ONLY, default=None)])
    return Cls


AdamW = _distributed(_optim.AdamW)
Adam = _distributed(_optim.Adam)
SGD = _distributed(_optim.SGD)
Adagrad = _distributed(_optim.Adagrad)
Lion = _distributed(_optim.Lion)
