#!/usr/bin/env bash
# Replay cost as instruction counts (valgrind's callgrind): deterministic where wall time is
# not (a shared 2-core machine varies by ±20 % from run to run), so a speed change can be
# judged from one run before and after. Not part of the tests (about ten seconds).
#
#   bash tools/replay-instructions.sh [STEPSIM]   # default build-release/tools/stepsim
#
# Prints the instructions of `stepsim run scenarios/default.yaml` (loading included) and of a
# 12-configuration sweep of the default scenario (recompute × ZeRO stage, half of which
# overflow the GPU: the allocator model's worst case). Needs valgrind (apt-get install
# valgrind; not installed by tools/install-deps.sh: nothing else uses it).
set -euo pipefail
cd "$(dirname "$0")/.."
exe=${1:-build-release/tools/stepsim}
[ -x "$exe" ] || { echo "build $exe first (cmake --build build-release)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "needs valgrind: apt-get install valgrind" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

count() {  # NAME ARGS...: the instruction count of one stepsim invocation
  local name=$1; shift
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$exe" "$@" >/dev/null 2>"$tmp/err"
  local refs
  refs=$(grep -oE 'refs: +[0-9,]+' "$tmp/err" | grep -oE '[0-9,]+$')
  printf '%-44s %16s instructions\n' "$name" "$refs"
}
count "run scenarios/default.yaml" run scenarios/default.yaml
count "sweep default, recompute x zero (12 configs)" sweep scenarios/default.yaml \
  --vary training.recompute=none,selective,full --vary parallel.zero=0..3:+1 --jobs 1 \
  --json "$tmp/sweep.json"
