#!/usr/bin/env bash
# Fuzz campaigns (not part of the tests: CI replays the corpus, tests/fuzz/corpus/TARGET).
#
#   bash tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     # default 1800 s, every target
#
# Builds the libFuzzer targets of tests/fuzz/ with Clang, AddressSanitizer and
# UndefinedBehaviorSanitizer (build-fuzz/), then runs each for the given time from its corpus,
# one campaign per core (FUZZ_JOBS=N to change). New inputs that add coverage go to
# build-fuzz/corpus/TARGET (merge the useful ones into tests/fuzz/corpus/TARGET with -merge=1);
# a crash, hang (> 10 s) or sanitizer report stops that campaign and leaves the reproducer in
# build-fuzz/artifacts/: minimise it (TARGET_fuzz -minimize_crash=1 FILE), fix the cause, add it
# to the corpus. Prints, per target, the seconds run and the executions done; exits 1 if any
# campaign found something.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-1800}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(scenario model fabric catalog cases set merge writers hf_config pickle megatron_args profiler_trace)
bash tools/install-deps.sh --test
command -v clang++ >/dev/null || { apt-get install -y -qq clang >/dev/null; }
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSTEPSIM_FUZZ=ON -DSTEPSIM_SANITIZE=ON -DSTEPSIM_WERROR=OFF -DSTEPSIM_BENCHMARKS=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target $(printf '%s_fuzz ' "${targets[@]}")
mkdir -p build-fuzz/artifacts
# One campaign per core (FUZZ_JOBS overrides), at the lowest CPU priority so that the machine
# stays usable; libFuzzer's -max_total_time is wall time, so the executions reported say how much
# work each campaign really did.
jobs=${FUZZ_JOBS:-$(nproc)}
campaign() {
  local t=$1 log="build-fuzz/$1.log"
  mkdir -p "build-fuzz/corpus/$t"
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    nice -n 19 "build-fuzz/tests/${t}_fuzz" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/artifacts/$t-" "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" \
    >"$log" 2>&1; then
    local runs
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    echo "$t: ${seconds} s, ${runs} executions, no crash, hang or sanitizer report"
  else
    echo "$t: FAILED (see $log and build-fuzz/artifacts/)"
    tail -30 "$log"
    return 1
  fi
}
failed=0
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  campaign "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
exit "$failed"
