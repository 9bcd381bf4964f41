#!/usr/bin/env bash
# Regenerates the catalog's fitted calibrations (topologies/calibrations/, read through
# topologies/gpus.yaml's calibration_file) with `stepsim calibrate`, one documented invocation
# per fitted GPU type. Each fit starts from the first estimates (--from-defaults), so that the
# result depends on the cases and the catalog's microbenchmarked terms only, not on the previous
# fit. Run after a change to the cost model, then `stepsim validate` and the golden runs.
#
#   bash tools/calibrate.sh [STEPSIM]    # default build-release/tools/stepsim, else build/
set -euo pipefail
cd "$(dirname "$0")/.."
exe=${1:-}
if [ -z "$exe" ]; then
  for b in build-release build; do
    if [ -x "$b/tools/stepsim" ]; then exe=$b/tools/stepsim; break; fi
  done
fi
[ -x "$exe" ] || { echo "build stepsim first (bash tools/quickstart.sh)" >&2; exit 1; }
out=topologies/calibrations
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A100 80GB: MosaicML llm-foundry's A100 rows and torchtitan's A100 rows (FSDP); Megatron-LM's
# rows (Narayanan et al., Korthikanti et al.) stay out of the fit to judge it.
"$exe" calibrate scenarios/validation/mpt-a100.yaml scenarios/validation/torchtitan.yaml \
  --skip-other-gpus --from-defaults --gpu A100-SXM4-80GB --out "$tmp/A100-SXM4-80GB.yaml"
# H100 80GB: MosaicML llm-foundry's H100 rows alone (bf16 and fp8); other published H100 results
# are what the fit is judged on.
"$exe" calibrate scenarios/validation/mpt-h100.yaml \
  --from-defaults --gpu H100-SXM5-80GB --out "$tmp/H100-SXM5-80GB.yaml"
# B200: SimuMax's measured B200 rows (Megatron-Core + Transformer Engine, one 8 x B200 node, bf16:
# truncated Llama 3 70B at TP 1-8 / PP 2 and DeepSeek-V3 at EP 4-8). Its efficiencies are those
# of that stack's kernels (cuBLASLt GEMMs, TE/cuDNN attention); GB200 and GB300 borrow them.
"$exe" calibrate scenarios/validation/simumax-b200.yaml \
  --from-defaults --gpu B200-SXM-180GB --out "$tmp/B200-SXM-180GB.yaml"
# The files record their invocation: name the shipped path, not the scratch one, so that a
# refit that changes no number changes no byte.
sed -i "s|$tmp/|$out/|g" "$tmp"/*.yaml
mv "$tmp"/*.yaml "$out"/
# H100 under Transformer Engine (Megatron-Core and NeMo's kernel library): NVIDIA's DGX Cloud
# NeMo recipes on DGX H100 (bf16 and fp8, 8-2,304 GPUs), the library's own GEMM, FP8 GEMM and
# attention efficiencies over the H100's terms just written (the search starts there). H200
# reads the same file.
"$exe" calibrate scenarios/validation/nemo-dgxc-h100.yaml --gpu H100-SXM5-80GB \
  --library transformer_engine --out "$tmp/H100-SXM5-80GB.transformer_engine.yaml"
sed -i "s|$tmp/|$out/|g" "$tmp"/*.yaml
mv "$tmp"/*.yaml "$out"/
echo "wrote $(ls "$out" | tr '\n' ' ')"
