#!/usr/bin/env python3
"""Re-derive the transports' size ramps (sim/spec/transport.cc) from nccl-tests curves.

For each transport, one public all-reduce curve of the published nccl-tests runs stepsim is validated on (collectives.yaml) on a
system described in topologies/systems/, priced with the algorithm FITS names (auto: what
NCCL's tuner runs; ABCI's one curve is read as CollNet for SHARP and as a tree for InfiniBand).
At each measured size S, stepsim collective gives NCCL's latency L(S) for what runs there and
the bandwidth term B(S) at full ramp
(time less latency, times the ramp it applied). The ramp is the curve's shape beyond the
latency, relative to its largest size Smax:

    ramp(S) = [B(S) / B(Smax)] * [(t(Smax) - L(Smax)) / (t(S) - L(S))]

so the large-message level stays with the efficiencies and the ramp is 1 at Smax. Only the
sizes whose slowest phase runs on the transport count. Intra-node ramps are keyed by the size
per rank; network ones by the bytes the busiest NIC moves in the call (stepsim's ramp_bytes).
The ramp is capped at 1 but not forced to increase: where NCCL changes protocol along the curve
the measured shape dips and recovers, and the table keeps that. It is printed as transport.cc
rows at every power of two from 16 KiB; for network transports the efficiency that matches
the largest measured size is printed too. Usage: tools/fit-transport-ramps.py [--stepsim build/tools/stepsim]
"""
import argparse
import json
import math
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FITS = {
    # transport: (system file, collectives.yaml run id, algorithm)
    "nvlink": ("azure-nda100-v4", "azure_nda100v4_1n8g_allreduce", "auto"),
    "nvls": ("azure-ndh100-v5", "azure_ndh100v5_1n8g_allreduce", "auto"),
    "xgmi": ("amd-mi300x-8", "amd_mi300x_aac8_1n8g_allreduce_rccl", "auto"),
    # The one public InfiniBand curve ran CollNet (SHARP): its shape is SHARP's ramp, and, read
    # as the tree it was priced as before CollNet was modelled, InfiniBand's (no public
    # InfiniBand curve without SHARP).
    "ib": ("abci-a", "abci_a100_2n16g_allreduce_sharp", "tree"),
    "sharp": ("abci-a", "abci_a100_2n16g_allreduce_sharp", "collnet"),
    "efa": ("aws-p4de", "aws_p4de_2n16g_allreduce_awsome", "auto"),
    "efa-rdma": ("aws-p5", "aws_p5_2n16g_allreduce_awsome", "auto"),
    "tcpxo": ("gcp-a3-mega", "gcp_a3mega_2n16g_allreduce_ztan", "auto"),
}
# Transports whose large-message efficiency rests on another source than their curve: their
# ramp is fitted absolute (the measured time beyond NCCL's latency against the model's bandwidth
# term at that efficiency), not relative to the curve's largest size. efa-rdma: EFA's 0.84 of
# line rate (p4de); p5's own curve is bound by its NVLS phase from 1 GiB up, so it cannot say.
# Beyond its curve's last usable size, its ramp continues as that of the transport named here
# (fitted earlier in FITS), where that one is higher: the same EFA links, measured further.
# Which sizes are usable depends on the ramp the binary holds (a size counts where the network
# phase binds), so the fit is a fixed point: paste, rebuild and rerun until the rows stop
# changing (the table in transport.cc is one: rerunning it prints it back).
ABSOLUTE = {"efa-rdma": "efa"}
TABLE_SIZES = [1 << k for k in range(14, 31)]  # 16 KiB to 1 GiB, every power of two


def measured_rows(run):
    n = run["system"]["total_gpus"]
    rows = {}
    for r in run["rows"]:
        b = r["bytes"]
        if b < 1024 or b & (b - 1):
            continue
        if r.get("time_us"):
            t = r["time_us"] * 1e-6
        else:  # time from the bus bandwidth: busbw = algbw * 2(n-1)/n
            t = b / (r["busbw_GBps"] * 1e9 * n / (2 * (n - 1)))
        rows[b] = t
    return rows


def interpolate(points, s):
    """Log-linear in size between the fitted points; flat beyond the ends."""
    xs = sorted(points)
    if s <= xs[0]:
        return points[xs[0]]
    for a, b in zip(xs, xs[1:]):
        if s <= b:
            f = (math.log(s) - math.log(a)) / (math.log(b) - math.log(a))
            return points[a] + f * (points[b] - points[a])
    return 1.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("collectives", help="the published nccl-tests runs (collectives.yaml)")
    ap.add_argument("--stepsim", default=os.path.join(ROOT, "build", "tools", "stepsim"))
    args = ap.parse_args()
    data = yaml.safe_load(open(args.collectives))
    runs = {r["id"]: r for r in data["runs"]}
    fitted = {}
    for transport, (system, run_id, algo) in FITS.items():
        meas = measured_rows(runs[run_id])
        sizes = sorted(meas)
        out = subprocess.run(
            [args.stepsim, "collective", "all_reduce", "--cluster",
             os.path.join(ROOT, "topologies", "systems", system + ".yaml"),
             "--sizes", ",".join(str(s) for s in sizes), "--algo", algo, "--json", "-"],
            check=True, capture_output=True, text=True).stdout
        model = {r["bytes"]: r for r in json.loads(out)["rows"]}
        usable = [s for s in sizes if model[s]["transport"] == transport]
        if not usable:
            print(f"{transport}: no size of {run_id} runs on it", file=sys.stderr)
            continue
        smax = max(usable)

        def bandwidth_term(s):
            r = model[s]
            return (r["time_s"] - r["latency_s"]) * r["ramp"]

        absolute = transport in ABSOLUTE
        top = meas[smax] - model[smax]["latency_s"]
        ramp = {}
        for s in usable:
            beyond = meas[s] - model[s]["latency_s"]
            if beyond <= 0:
                ramp[s] = 1.0
            elif absolute:
                ramp[s] = min(1.0, bandwidth_term(s) / beyond)
            else:
                ramp[s] = min(1.0, bandwidth_term(s) / bandwidth_term(smax) * top / beyond)
        # Keyed by where stepsim reads the ramp (per rank, or per NIC on a network).
        ramp = {model[s]["ramp_bytes"]: v for s, v in ramp.items()}
        top_key = model[smax]["ramp_bytes"]
        rows = [(s, interpolate(ramp, s)) for s in TABLE_SIZES
                if s < top_key or (absolute and s <= top_key)]
        if absolute:
            last = rows[-1][1]
            rows += [(s, v) for s, v in fitted.get(ABSOLUTE[transport], [])
                     if s > top_key and v > last]
        fitted[transport] = rows
        print(f"{transport} ({run_id}, {len(usable)} sizes, to {smax} B):")
        print("  {" + ", ".join(f"{{{s >> 10}, {v:.3f}}}" for s, v in rows) + "}  // KiB, fraction")
        if transport in ("ib", "sharp", "efa", "tcpxo"):
            # The efficiency at which the model's largest size takes the measured time.
            eff = model[smax]["busbw_bytes_per_s"] / (
                smax / meas[smax] * 2 * (runs[run_id]["system"]["total_gpus"] - 1)
                / runs[run_id]["system"]["total_gpus"])
            print(f"  busbw model/measured at {smax} B: {eff:.3f} (scale the efficiency by 1/this)")


if __name__ == "__main__":
    main()
