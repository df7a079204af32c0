"""csdkit.torch.distributed.reshard: a set of rank stores re-split for another world size (and
device count), then resumed and continued over gloo (dist_worker.py subprocesses, as in
test_distributed.py). The continuation must equal, bit for bit, one process (csdkit.torch over
one store) given the same averaged gradients all along: the old world's before the reshard, the
new world's after it."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

import csdkit
import csdkit.torch.distributed as cdist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dist_common  # noqa: E402
from test_distributed import (assert_same, check_errors_free, reference_run,  # noqa: E402
                              run_ranks, step_reference)

torch.set_num_threads(1)


def session_reference(tmp, dtype, worlds):
    """The unsharded run as one csdkit Session over the whole model, given at step s the sum of
    the `worlds[s]` ranks' gradients (exact, dist_common) with loss_scale = worlds[s]: the 1 /
    world the ranks fold into the kit's unscale factor, so that it is bit for bit the same
    arithmetic for any world size (csdkit.torch given the average instead matches only for
    powers of two, where s / world is exact). Returns the weights before and after each step."""
    model = dist_common.make_model(dtype)
    params = list(model.parameters())
    names = [n for n, _ in model.named_parameters()]
    layout = [(n, p.numel(), 1 if n.startswith("head.") else 0) for n, p in zip(names, params)]
    hyper = [dict(lr=1e-2, weight_decay=1e-2), dict(lr=3e-3, weight_decay=0.0)]
    sess = csdkit.Session.create(str(tmp / "sref"), layout, hyper,
                                 [p.detach().reshape(-1) for p in params], optimizer="adamw")
    out = [[p.detach().clone() for p in params]]
    for s, world in enumerate(worlds):
        per = [dist_common.rank_grads(model, s, r) for r in range(world)]
        grads = [sum(g[t].float() for g in per).to(dtype).reshape(-1)
                 for t in range(len(params))]
        gh = [dict(hyper[0]), dict(hyper[1])]
        if s >= 1:
            gh[0]["lr"] = 0.5e-2
        w = [torch.empty(p.numel(), dtype=dtype) for p in params]
        sess.step(grads, group_hyper=gh, loss_scale=float(world), weights_out=w)
        with torch.no_grad():
            for p, x in zip(params, w):
                p.copy_(x.reshape(p.shape))
        out.append([p.detach().clone() for p in params])
    return out


def _tree(path):
    """Every file under `path` with its bytes (to show that a source was not written)."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            if f == "lock":
                continue
            with open(os.path.join(root, f), "rb") as fh:
                out[os.path.relpath(os.path.join(root, f), path)] = fh.read()
    return out


@pytest.mark.parametrize("old,new,dtype,devices", [
    (4, 2, "fp32", None), (2, 3, "bf16", None),
    pytest.param(4, 1, "fp32", 2, marks=pytest.mark.nightly)])
def test_reshard_then_continue_equal_to_single_process(tmp_path, old, new, dtype, devices):
    """`old` ranks take 2 steps; reshard to `new` ranks (4→1 also to 2 devices: the model's
    two param groups make two 65536-element blocks, the most devices a store of it can have);
    `new` ranks resume() at step 2 and take 2 more: every rank's weights equal the single
    process's at every step, bit for bit; the source set is unchanged byte for byte."""
    tdt = dict(fp32=torch.float32, bf16=torch.bfloat16)[dtype]
    res = run_ranks(tmp_path, "a", old, tmp_path / "old", steps=2, dtype=dtype)
    check_errors_free(res)
    before = _tree(tmp_path / "old")
    step = cdist.reshard(tmp_path / "old", tmp_path / "new", new, devices=devices)
    assert step == 2
    assert _tree(tmp_path / "old") == before
    for r in range(new):
        with open(tmp_path / "new" / ("rank-%d.json" % r)) as f:
            rec = json.load(f)
        assert (rec["world_size"], rec["rank"]) == (new, r)
        if devices:
            with open(tmp_path / "new" / ("rank-%d" % r) / "manifest.json") as f:
                assert json.load(f)["config"]["devices"] == devices
    res2 = run_ranks(tmp_path, "b", new, tmp_path / "new", steps=2, first_step=2, dtype=dtype,
                     resume=True)
    check_errors_free(res2)
    ref = session_reference(tmp_path, tdt, [old, old, new, new])
    if new & (new - 1) == 0:  # a power of two: also csdkit.torch given the averaged gradient
        model, o, ref2 = reference_run(tmp_path, old, tdt, 4)
        for s in range(2):
            ref2.append(step_reference(model, o, s, old))
        for s in range(2, 4):
            ref2.append(step_reference(model, o, s, new))
        for a, b in zip(ref, ref2):
            assert_same(a, b, "the two references")
    for r, rr in enumerate(res):
        for k in range(3):
            assert_same(rr["weights"][k], ref[k], "old rank %d after step %d" % (r, k))
    for r, rr in enumerate(res2):
        assert rr["resumed_at"] == 2
        for k in range(3):
            assert_same(rr["weights"][k], ref[2 + k], "rank %d after step %d" % (r, 2 + k))
        assert rr["reports"][-1]["step"] == 4


def test_reshard_refusals(tmp_path):
    """A non-empty destination, a missing record, records of different models, stores at
    different steps, a world size too large for the model: each refused, nothing written."""
    res = run_ranks(tmp_path, "a", 2, tmp_path / "old", steps=1)
    check_errors_free(res)
    src = tmp_path / "old"
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(csdkit.StoreError, match="exists and is not an empty directory"):
        cdist.reshard(src, tmp_path / "full", 3)
    with pytest.raises(ValueError, match="would own no element"):
        cdist.reshard(src, tmp_path / "d0", 19076)
    assert not os.path.exists(tmp_path / "d0")
    # A record naming another model.
    bad = tmp_path / "bad"
    shutil.copytree(src, bad)
    with open(bad / "rank-1.json") as f:
        rec = json.load(f)
    rec["fingerprint"] = "00000000000000"
    with open(bad / "rank-1.json", "w") as f:
        json.dump(rec, f)
    with pytest.raises(csdkit.StoreError, match="differ in fingerprint"):
        cdist.reshard(bad, tmp_path / "d1", 3)
    assert not os.path.exists(tmp_path / "d1")
    # A missing record.
    os.remove(bad / "rank-1.json")
    with pytest.raises(csdkit.StoreError, match="expected the records of ranks 0 .. 1"):
        cdist.reshard(bad, tmp_path / "d2", 3)
    # Ranges that do not follow the partition rule.
    shutil.rmtree(bad)
    shutil.copytree(src, bad)
    with open(bad / "rank-0.json") as f:
        rec = json.load(f)
    rec["end"] -= 1
    with open(bad / "rank-0.json", "w") as f:
        json.dump(rec, f)
    with pytest.raises(csdkit.StoreError, match="expected elements \\[0, 9538\\) of 19075"):
        cdist.reshard(bad, tmp_path / "d3", 3)
    # Stores at different committed steps (rank 1 one step ahead).
    shutil.rmtree(bad)
    shutil.copytree(src, bad)
    _advance(bad / "rank-1")
    with pytest.raises(csdkit.StoreError, match="different committed steps \\(rank 0: 1, "
                       "rank 1: 2\\)"):
        cdist.reshard(bad, tmp_path / "d4", 3)
    assert not os.path.exists(tmp_path / "d4")


def _advance(store_dir):
    """Commits one more step in a rank's store (zero gradients): as if that rank committed a
    step its peers did not."""
    with open(os.path.join(store_dir, "manifest.json")) as f:
        man = json.load(f)
    layout = [(t["name"], t["numel"], t["group"]) for t in man["layout"]["tensors"]]
    s = csdkit.Session.open(str(store_dir), layout)
    dt = dict(fp32=torch.float32, fp16=torch.float16, bf16=torch.bfloat16)[s.grad_dtype]
    s.step([torch.full((n,), 2.0 ** -10, dtype=dt) for _, n, _ in layout])
    del s


def test_rank_ahead_rolls_back_to_the_common_step_then_continues(tmp_path):
    """2 ranks take 2 steps; then rank 1's store commits one more step alone (as when rank 0
    died between the two ranks' commits of step 3). resume() on 2 new ranks rolls rank 1's store
    back to step 2 and the group continues: steps 3 and 4 equal the uninterrupted single
    process bit for bit. A store two steps ahead cannot roll back: refused on every rank,
    naming every rank's committed and previous step."""
    res = run_ranks(tmp_path, "a", 2, tmp_path / "store", steps=2)
    check_errors_free(res)
    bad = tmp_path / "bad"
    shutil.copytree(tmp_path / "store", bad)
    _advance(tmp_path / "store" / "rank-1")
    res2 = run_ranks(tmp_path, "b", 2, tmp_path / "store", steps=2, first_step=2, resume=True)
    check_errors_free(res2)
    model, o, ref = reference_run(tmp_path, 2, torch.float32, 4)
    for s in range(4):
        ref.append(step_reference(model, o, s, 2))
    for r, rr in enumerate(res2):
        assert rr["resumed_at"] == 2
        for k in range(3):
            assert_same(rr["weights"][k], ref[2 + k], "rank %d after step %d" % (r, 2 + k))
    # Two steps ahead: no way back.
    _advance(bad / "rank-1")
    _advance(bad / "rank-1")
    res3 = run_ranks(tmp_path, "c", 2, bad, steps=1, first_step=2, resume=True)
    for rr in res3:
        err = rr["error"]
        assert err is not None and "StoreError" in err, err
        assert "rank 0: 2 (previous 1), rank 1: 4 (previous 3)" in err, err
        assert "ranks [1] are ahead of step 2" in err, err


def _cli():
    """The built `csdkit` command: $CSDKIT_CLI, else <build>/host/csdkit beside the package's
    <build>/python root."""
    path = os.environ.get("CSDKIT_CLI") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(csdkit.__file__)))),
        "host", "csdkit")
    if not os.access(path, os.X_OK):
        pytest.skip("no csdkit command at '{}' (set CSDKIT_CLI)".format(path))
    return path


def _store_bytes(path):
    """_tree(path) with the one thing two stores of the same state differ in removed: the
    random store id (in each manifest, which also covers it by its CRC, and device.json)."""
    out = _tree(path)
    for name, data in out.items():
        base = os.path.basename(name)
        if base in ("manifest.json", "device.json"):
            j = json.loads(data)
            j.pop("store_id")
            j.pop("manifest_crc", None)
            out[name] = json.dumps(j, sort_keys=True).encode()
    return out


def test_cli_and_python_call_write_the_same_set(tmp_path):
    """`csdkit reshard` and cdist.reshard are one C++ implementation: from a set written by 2
    gloo ranks, both write the same files with the same bytes (store ids aside), for 3 ranks and
    for 1 rank on 2 devices; the command prints the step and the new partition, and refuses a
    destination it would write over with exit status 2."""
    cli = _cli()
    res = run_ranks(tmp_path, "a", 2, tmp_path / "old", steps=1)
    check_errors_free(res)
    for world, devices in [(3, None), (1, 2)]:
        py_dst, cli_dst = tmp_path / ("py%d" % world), tmp_path / ("cli%d" % world)
        assert cdist.reshard(tmp_path / "old", py_dst, world, devices=devices) == 1
        cmd = [cli, "reshard", "--from", str(tmp_path / "old"), "--to", str(cli_dst),
               "--world", str(world), "--json"] + (["--devices", str(devices)] if devices else [])
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rep = json.loads(out)
        assert rep["step"] == 1 and rep["world_size"] == world
        slices = cdist.partition(rep["total_elements"], world)
        assert [(r["begin"], r["end"]) for r in rep["ranks"]] == slices
        a, b = _store_bytes(py_dst), _store_bytes(cli_dst)
        assert sorted(a) == sorted(b)
        assert len([n for n in a if n.endswith(".bin")]) > 0
        for name in a:
            assert a[name] == b[name], name
    p = subprocess.run([cli, "reshard", "--from", str(tmp_path / "old"), "--to",
                        str(tmp_path / "py3"), "--world", "2"], capture_output=True, text=True)
    assert p.returncode == 2
    assert "exists and is not an empty directory" in p.stderr, p.stderr


def test_rank_records_are_read_under_the_kits_json_bounds(tmp_path):
    """A rank record is read as every JSON of the kit is (csdkit/platform/json_file.h): a FIFO
    named like one is refused at once instead of blocking open() forever, a directory too, and a
    record nested 80,000 arrays deep is refused by its depth (not a RecursionError); each message
    says what was expected and what was found."""
    fifo = tmp_path / "rank-0.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="expected a regular JSON file, found a FIFO"):
        cdist._read_record(str(fifo))
    d = tmp_path / "rank-1.json"
    d.mkdir()
    with pytest.raises(ValueError, match="expected a regular JSON file, found a directory"):
        cdist._read_record(str(d))
    deep = tmp_path / "rank-2.json"
    deep.write_text("[" * 80000 + "]" * 80000)
    with pytest.raises(ValueError, match="expected JSON nested at most 64 levels deep"):
        cdist._read_record(str(deep))
    flat = tmp_path / "rank-3.json"
    flat.write_text(json.dumps({"format": "x", "note": "[[[[ not nesting ]]]] \\\" [["}))
    assert cdist._read_record(str(flat))["format"] == "x"
    lst = tmp_path / "rank-4.json"
    lst.write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a JSON object"):
        cdist._read_record(str(lst))
