#!/usr/bin/env bash
# Fuzz campaigns (not part of the tests: CI replays the corpus, tests/fuzz/corpus/TARGET).
#
#   bash tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     # default 1800 s, every target
#
# Builds the libFuzzer targets of tests/fuzz/ with Clang, AddressSanitizer and
# UndefinedBehaviorSanitizer (build-fuzz/), then runs each for the given time, one job per core,
# starting from its corpus. New inputs that add coverage go to build-fuzz/corpus/TARGET (merge
# the useful ones into tests/fuzz/corpus/TARGET with -merge=1); a crash, hang (> 10 s) or
# sanitizer report stops the run and leaves the reproducer in build-fuzz/artifacts/: minimise it
# (TARGET_fuzz -minimize_crash=1 FILE), fix the cause, add it to the corpus. Prints, per target,
# the seconds run and the executions done.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-1800}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(scenario model fabric catalog cases set merge)
bash tools/install-deps.sh
command -v clang++ >/dev/null || { apt-get install -y -qq clang >/dev/null; }
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSTEPSIM_FUZZ=ON -DSTEPSIM_SANITIZE=ON -DSTEPSIM_WERROR=OFF -DSTEPSIM_BENCHMARKS=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target $(printf '%s_fuzz ' "${targets[@]}")
mkdir -p build-fuzz/artifacts
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  log="build-fuzz/$t.log"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "build-fuzz/tests/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t-" \
    "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1 || {
      echo "$t: FAILED (see $log and build-fuzz/artifacts/)"; tail -30 "$log"; exit 1; }
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  echo "$t: ${seconds} s, ${runs} executions, no crash, hang or sanitizer report"
done
