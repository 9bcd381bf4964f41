#!/usr/bin/env python3
"""Fits one GPU type's cost-model calibration to the public validation cases of that GPU.

    python3 tools/calibrate.py A100-SXM4-80GB [--also A100-SXM4-40GB] [--write]

It runs `stepsim validate --json -` on every case in scenarios/validation/ whose scenario uses
the GPU, with candidate calibrations written into a scratch copy of topologies/gpus.yaml
($STEPSIM_DATA_DIR points stepsim at the copy), and minimises the mean absolute percentage
error of the step time by coordinate descent over physically bounded parameters:

    gemm_efficiency       fraction of dense peak that large GEMMs reach      0.50 .. 0.95
    attention_efficiency  fraction of peak of the attention kernels          0.10 .. 0.90
    memory_efficiency     fraction of HBM bandwidth of memory-bound kernels  0.50 .. 0.95
    roofline_blend        un-hidden share of a kernel's memory time          0.00 .. 1.00
    launch_overhead_us    per-op launch and framework dispatch overhead      1 .. 40 us
    comm_efficiency       achieved fraction of link bandwidth (NCCL)         0.60 .. 0.95
    overlap_slowdown      compute stretch beside a running collective        1.00 .. 1.50

`--cases FILE,FILE` restricts the fit to those case files (paths from the project root).
`--fix NAME=VALUE` pins a parameter measured elsewhere (comm_efficiency from nccl-tests bus
bandwidth over the link rate) instead of fitting it.

The same numbers then serve every case of that GPU type: no per-case knobs. With --write the
result replaces the GPU's `calibration:` entry (and those of --also GPUs, same silicon) with a
note saying how it was obtained. Needs a built stepsim (build-release/ or build/) and PyYAML.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARAMS = [  # name, low, high, initial step
    ("gemm_efficiency", 0.50, 0.95, 0.05),
    ("attention_efficiency", 0.10, 0.90, 0.05),
    ("memory_efficiency", 0.50, 0.95, 0.05),
    ("roofline_blend", 0.00, 1.00, 0.10),
    ("launch_overhead_us", 1.0, 40.0, 3.0),
    ("comm_efficiency", 0.60, 0.95, 0.05),
    ("overlap_slowdown", 1.00, 1.50, 0.05),
]


def stepsim():
    for b in ("build-release", "build-rel", "build"):
        p = os.path.join(ROOT, b, "tools", "stepsim")
        if os.access(p, os.X_OK):
            return p
    sys.exit("build stepsim first (bash tools/quickstart.sh)")


def calibration_text(c, note):
    return ("calibration: {gemm_efficiency: %.3f, attention_efficiency: %.3f, memory_efficiency: %.3f,\n"
            "                  roofline_blend: %.3f, launch_overhead: \"%.1f us\", comm_efficiency: %.3f,\n"
            "                  overlap_slowdown: %.3f,\n"
            "                  note: \"%s\"}" % (c["gemm_efficiency"], c["attention_efficiency"],
                                               c["memory_efficiency"], c["roofline_blend"],
                                               c["launch_overhead_us"], c["comm_efficiency"],
                                               c["overlap_slowdown"], note))


def calibration_span(entry):
    """(start, end) of the `calibration: {...}` mapping in a GPU entry, braces balanced."""
    start = entry.index("calibration: {")
    depth = 0
    for i in range(start + len("calibration: "), len(entry)):
        if entry[i] == "{":
            depth += 1
        elif entry[i] == "}":
            depth -= 1
            if depth == 0:
                return start, i + 1
    raise ValueError("unbalanced calibration mapping")


def kept_keys(entry):
    """The measured keys of the current calibration that a fit does not touch (NVLS and the
    nccl-tests size ramp), as text to carry into the new mapping."""
    a, b = calibration_span(entry)
    block = entry[a:b]
    kept = []
    m = re.search(r"nvls_efficiency: [0-9.]+", block)
    if m:
        kept.append(m.group(0))
    i = block.find("comm_size_efficiency: {")
    if i >= 0:
        j = block.index("}", i)
        kept.append(block[i:j + 1])
    return kept


def replace_calibration(text, gpu, block):
    # The entry of `gpu`, from its name line to the next entry.
    start = text.index(f"  - name: {gpu}\n")
    nxt = text.find("\n  - name: ", start + 1)
    end_entry = len(text) if nxt < 0 else nxt
    entry = text[start:end_entry]
    kept = kept_keys(entry)
    if kept:
        block = block.replace("\n                  note:",
                              "".join("\n                  " + k + "," for k in kept) + "\n                  note:")
    a, b = calibration_span(entry)
    new_entry = entry[:a] + block + entry[b:]
    return text[:start] + new_entry + text[end_entry:]


def main():
    args = [a for i, a in enumerate(sys.argv[1:], 1)
            if not a.startswith("--") and sys.argv[i - 1] not in ("--also", "--fix", "--cases")]
    if not args:
        sys.exit(__doc__)
    gpu = args[0]
    also = [sys.argv[i + 1] for i, a in enumerate(sys.argv) if a == "--also"]
    write = "--write" in sys.argv
    fixed = {}
    for i, a in enumerate(sys.argv):
        if a == "--fix":
            k, v = sys.argv[i + 1].split("=")
            fixed[k] = float(v)
    exe = stepsim()
    files = sorted(os.path.join(ROOT, "scenarios", "validation", f)
                   for f in os.listdir(os.path.join(ROOT, "scenarios", "validation")) if f.endswith(".yaml"))
    for i, a in enumerate(sys.argv):
        if a == "--cases":  # only these case files (the GPU's public cases)
            files = [os.path.join(ROOT, f) for f in sys.argv[i + 1].split(",")]
    scratch = tempfile.mkdtemp(prefix="stepsim-calibrate-")
    for d in ("models", "topologies"):
        shutil.copytree(os.path.join(ROOT, d), os.path.join(scratch, d))
    base_text = open(os.path.join(ROOT, "topologies", "gpus.yaml")).read()
    env = dict(os.environ, STEPSIM_DATA_DIR=scratch)
    # Only the cases of this GPU: the scenario ids of the GPU are found by a first run.
    cal = {"gemm_efficiency": 0.75, "attention_efficiency": 0.5, "memory_efficiency": 0.85,
           "roofline_blend": 0.2, "launch_overhead_us": 4.0, "comm_efficiency": 0.8,
           "overlap_slowdown": 1.1}
    cal.update(fixed)
    evaluations = 0

    def objective(c):
        nonlocal evaluations
        evaluations += 1
        text = replace_calibration(base_text, gpu, calibration_text(c, "candidate"))
        open(os.path.join(scratch, "topologies", "gpus.yaml"), "w").write(text)
        out = subprocess.run([exe, "validate", *files, "--json", "-"], env=env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(out.stderr)
        d = json.loads(out.stdout)
        errs = [abs(x["error_pct"]) for x in d["cases"] if x["metric"] == "step_s"]
        return sum(errs) / len(errs), len(errs)

    best, n = objective(cal)
    print(f"start: step-time MAPE {best:.2f}% over {n} cases")
    steps = {name: step for name, _, _, step in PARAMS}
    for _ in range(12):
        improved = False
        for name, lo, hi, _ in PARAMS:
            if name in fixed:
                continue
            for sign in (+1, -1):
                trial = dict(cal)
                trial[name] = min(hi, max(lo, cal[name] + sign * steps[name]))
                if trial[name] == cal[name]:
                    continue
                err, _ = objective(trial)
                if err < best - 1e-6:
                    best, cal, improved = err, trial, True
                    break
        if not improved:
            steps = {k: v / 2 for k, v in steps.items()}
    print(f"fit: step-time MAPE {best:.2f}% over {n} cases after {evaluations} evaluations")
    print(json.dumps(cal, indent=2))
    if write:
        pinned = "".join(f"; {k} pinned at {v}" for k, v in fixed.items())
        note = (f"fitted by tools/calibrate.py to the step times of the {n} public {gpu} cases in "
                f"scenarios/validation/ (coordinate descent, MAPE {best:.1f}%){pinned}")
        text = base_text
        for g in [gpu, *also]:
            text = replace_calibration(text, g, calibration_text(cal, note))
        open(os.path.join(ROOT, "topologies", "gpus.yaml"), "w").write(text)
        print("wrote topologies/gpus.yaml")
    shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
