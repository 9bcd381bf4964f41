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
    assert {e["action"] for e in trace} == {"alloc", "free_requested", "free_completed"}
    for e in trace[:1000]:
        assert set(e) == {"action", "addr", "size", "stream", "time_us", "frames"}
        assert e["size"] > 0 and e["addr"] % 512 == 0
        assert set(e["frames"][0]) == {"filename", "line", "name"}
    # Every release names the address its allocation got, and the time never goes back.
    open_blocks = {}
    live = peak = 0
    last = 0
    for e in trace:
        assert e["time_us"] >= last
        last = e["time_us"]
        if e["action"] == "alloc":
            assert e["addr"] not in open_blocks
            open_blocks[e["addr"]] = e["size"]
            live += e["size"]
            peak = max(peak, live)
        elif e["action"] == "free_completed":
            assert open_blocks.pop(e["addr"]) == e["size"]
            live -= e["size"]
    # The allocated peak over the trace is the report's (the runtime reserve included, named).
    assert peak == report["memory"]["peak_bytes"]
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
