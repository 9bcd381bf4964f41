"""`stepsim run --memory-snapshot` (sim/report/memory_snapshot.h) against the format of
torch.cuda.memory._snapshot() as PyTorch documents it (torch/cuda/memory.py, `_snapshot`:
a dict of `segments` and `device_traces`, trace entries with action, addr, size, stream,
time_us and frames; segments with address, total_size, allocated_size, blocks of address,
size and state), read with Python's own pickle, no PyTorch needed.
"""

import json
import os
import pickle
import pickletools
import subprocess
import tempfile

BINARY = os.environ["STEPSIM_BINARY"]


def snapshot_and_report(*args):
    with tempfile.TemporaryDirectory() as t:
        snap = os.path.join(t, "snap.pickle")
        report = os.path.join(t, "run.json")
        subprocess.run([BINARY, "run", *args, "--memory-snapshot", snap, "--json", report],
                       check=True, capture_output=True)
        raw = open(snap, "rb").read()
        return raw, pickle.loads(raw), json.load(open(report))


def test_the_snapshot_has_pytorchs_structure_and_the_reports_peak():
    raw, s, report = snapshot_and_report("scenarios/default.yaml")
    assert set(s) == {"segments", "device_traces"}
    assert len(s["device_traces"]) == 1  # one simulated device
    trace = s["device_traces"][0]
    actions = {e["action"] for e in trace}
    assert {"alloc", "free_requested", "free_completed", "segment_alloc"} <= actions
    assert actions <= {"alloc", "free_requested", "free_completed", "segment_alloc",
                       "segment_free"}  # the caching allocator keeps its segments here
    for e in trace[:1000]:
        assert set(e) == {"action", "addr", "size", "stream", "time_us", "frames"}
        assert e["size"] > 0 and e["addr"] % 512 == 0
        assert set(e["frames"][0]) == {"filename", "line", "name"}
    # Every release names the address its allocation got, and the time never goes back.
    open_blocks = {}
    live = peak = 0
    reserved = reserved_peak = 0
    last = 0
    for e in trace:
        assert e["time_us"] >= last
        last = e["time_us"]
        if e["action"] == "segment_alloc":
            reserved += e["size"]
            reserved_peak = max(reserved_peak, reserved)
        elif e["action"] == "segment_free":
            reserved -= e["size"]
        elif e["action"] == "alloc":
            assert e["addr"] not in open_blocks
            open_blocks[e["addr"]] = e["size"]
            live += e["size"]
            peak = max(peak, live)
        elif e["action"] == "free_completed":
            assert open_blocks.pop(e["addr"]) == e["size"]
            live -= e["size"]
    # The allocated peak over the trace is the report's (the runtime reserve included, named).
    assert peak == report["memory"]["peak_bytes"]
    # The segments' growth gives the reserved peak (the runtime reserve included, as there).
    assert reserved_peak == report["memory"]["reserved_peak_bytes"]
    assert any("runtime reserve" in e["frames"][0]["name"] for e in trace)
    # The segments are what is still live at the end: the persistent states.
    assert sum(seg["total_size"] for seg in s["segments"]) == live
    for seg in s["segments"]:
        assert seg["blocks"][0]["state"] == "active_allocated"
        assert seg["blocks"][0]["address"] == seg["address"]
    # Only opcodes that build data: nothing names a Python object to call.
    ops = {op.name for op, _, _ in pickletools.genops(raw)}
    assert not ops & {"GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ"}


def test_the_snapshot_names_ops_and_categories():
    _, s, _ = snapshot_and_report("scenarios/default.yaml", "--set", "training.global_batch=32")
    names = {e["frames"][0]["name"] for e in s["device_traces"][0]}
    assert any(n.startswith("mb0 L0 fwd") and n.endswith("[activations]") for n in names)
    assert "persistent states [optimizer]" in names


def run_diff(snapshot, scenario="scenarios/default.yaml"):
    return subprocess.run([BINARY, "memory-diff", snapshot, scenario], capture_output=True,
                          text=True)


def test_memory_diff_of_its_own_snapshot_agrees_everywhere():
    with tempfile.TemporaryDirectory() as t:
        snap = os.path.join(t, "snap.pickle")
        subprocess.run([BINARY, "run", "scenarios/default.yaml", "--memory-snapshot", snap],
                       check=True, capture_output=True)
        r = run_diff(snap)
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.strip().endswith("%")]
    assert len(rows) >= 5
    assert all(line.strip().endswith("+0.0 %") for line in rows), r.stdout


def test_memory_diff_reads_a_snapshot_as_python_writes_one():
    # As torch.cuda.memory._snapshot() would be pickled by Python (protocol 4, tuples, frames of
    # Python files): 2 GiB of weights before the first release, 1 GiB of activations in the
    # forward, an NCCL buffer, segments of 4 GiB.
    gib = 1 << 30

    def ev(action, addr, size, name):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": 1,
                "frames": [{"filename": "train.py", "line": 10, "name": name}]}
    trace = [ev("segment_alloc", 0, 4 * gib, ""),
             ev("alloc", 0, 2 * gib, "to"),
             ev("alloc", 2 * gib, gib // 2, "forward"),
             ev("free_requested", 2 * gib, gib // 2, "forward"),
             ev("free_completed", 2 * gib, gib // 2, "forward"),
             ev("alloc", 2 * gib, gib, "forward"),
             ev("alloc", 3 * gib, gib // 4, "all_gather_into_tensor")]
    snap = {"segments": [{"device": 0, "address": 0, "total_size": 4 * gib,
                          "segment_pool_id": (0, 0), "blocks": []}],
            "device_traces": [trace]}
    with tempfile.TemporaryDirectory() as t:
        path = os.path.join(t, "real.pickle")
        with open(path, "wb") as f:
            pickle.dump(snap, f, protocol=4)
        r = run_diff(path)
    assert r.returncode == 0, r.stderr
    line = {l.split()[0] + (" " + l.split()[1] if l.split()[0] == "allocated" else ""): l
            for l in r.stdout.splitlines() if l.strip()}
    assert "3.25" in line["allocated peak"]          # 2 + 1 + 0.25 GiB
    assert "comm_buffers" in r.stdout


def test_memory_diff_refuses_code_and_broken_files():
    class Evil:
        def __reduce__(self):
            return (os.system, ("touch /tmp/stepsim-pickle-ran",))
    if os.path.exists("/tmp/stepsim-pickle-ran"):
        os.remove("/tmp/stepsim-pickle-ran")
    with tempfile.TemporaryDirectory() as t:
        evil = os.path.join(t, "evil.pickle")
        with open(evil, "wb") as f:
            pickle.dump({"segments": [], "device_traces": [[Evil()]]}, f, protocol=2)
        r = run_diff(evil)
        assert r.returncode == 2
        assert "evil.pickle: byte " in r.stderr and "refused" in r.stderr
        assert not os.path.exists("/tmp/stepsim-pickle-ran")
        cut = os.path.join(t, "cut.pickle")
        with open(cut, "wb") as f:
            f.write(pickle.dumps({"device_traces": [[]], "segments": []}, protocol=4)[:-3])
        r = run_diff(cut)
        assert r.returncode == 2 and "cut.pickle: byte " in r.stderr
