#!/usr/bin/env bash
# Golden runs (STYLE "Golden runs for what users see"): whole-run outputs of small scenarios kept
# as files and compared byte for byte.
#
#   bash tools/golden.sh check STEPSIM NAME   # one case (CTest runs this per case)
#   bash tools/golden.sh update [STEPSIM]     # rewrite every golden file after an intended change
#
# Cases are listed in tests/golden/cases.txt (NAME SCENARIO ARGS...). Each case keeps
# NAME.ops.txt (`stepsim run --dump-ops`), NAME.json (`stepsim run --json -`) and NAME.txt (the
# text report of `stepsim run`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/tests/golden
mode=${1:?usage: golden.sh check STEPSIM NAME | update [STEPSIM]}
exe=$(realpath "${2:-$root/build/tools/stepsim}")

# Writes the three outputs of a case to PREFIX.ops.txt, PREFIX.json and PREFIX.txt.
produce() {
  local scenario=$1 prefix=$2; shift 2
  (cd "$dir" && "$exe" run "$scenario" "$@" --dump-ops >"$prefix.ops.txt")
  (cd "$dir" && "$exe" run "$scenario" "$@" --json - >"$prefix.json")
  (cd "$dir" && "$exe" run "$scenario" "$@" >"$prefix.txt")
}

case "$mode" in
  check)
    name=${3:?golden.sh check STEPSIM NAME}
    line=$(grep -E "^$name " "$dir/cases.txt") || { echo "no golden case $name"; exit 1; }
    read -r -a words <<<"$line"
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    produce "${words[1]}" "$tmp/$name" "${words[@]:2}"
    status=0
    for ext in ops.txt json txt; do
      diff -u "$dir/$name.$ext" "$tmp/$name.$ext" | head -40 || status=1
    done
    if [ $status -ne 0 ]; then
      echo "golden run $name changed; if intended: bash tools/golden.sh update"; exit 1
    fi
    ;;
  update)
    grep -vE '^(#|$)' "$dir/cases.txt" | while read -r -a words; do
      produce "${words[1]}" "$dir/${words[0]}" "${words[@]:2}"
      echo "updated ${words[0]}"
    done
    ;;
  *) echo "usage: golden.sh check STEPSIM NAME | update [STEPSIM]"; exit 2 ;;
esac
