#!/usr/bin/env bash
# The generated parts of docs/reference.md: each lies between
#   <!-- generated: ARGS -->          (the output of `stepsim ARGS`, as Markdown)
#   <!-- generated (code): ARGS -->   (the same in a code block: a command's --help)
# and <!-- end generated -->. The key table, the catalog tables and every command's flags come
# from the program itself, so the reference cannot drift from it.
#
#   bash tools/gen-reference.sh check [STEPSIM]    # exit 1, with a diff, when a part has drifted
#   bash tools/gen-reference.sh update [STEPSIM]   # rewrite the parts after an intended change
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:?usage: gen-reference.sh check|update [STEPSIM]}
exe=$(realpath "${2:-$root/build/tools/stepsim}")
doc=$root/docs/reference.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Copies the document, replacing each generated part with the command's output now.
while IFS= read -r line; do
  if [[ $line =~ ^'<!-- generated'( \(code\))?': '(.*)' -->'$ ]]; then
    printf '%s\n' "$line"
    read -r -a words <<<"${BASH_REMATCH[2]}"
    [ -n "${BASH_REMATCH[1]}" ] && printf '```\n'
    (cd "$root" && STEPSIM_DATA_DIR="$root" "$exe" "${words[@]}")
    [ -n "${BASH_REMATCH[1]}" ] && printf '```\n'
    # Skip the old part up to its end marker.
    while IFS= read -r old && [ "$old" != '<!-- end generated -->' ]; do :; done
    printf '%s\n' '<!-- end generated -->'
  else
    printf '%s\n' "$line"
  fi
done <"$doc" >"$tmp/reference.md"

case "$mode" in
  check)
    if ! diff -u "$doc" "$tmp/reference.md"; then
      echo "docs/reference.md has drifted from the program: run bash tools/gen-reference.sh update"
      exit 1
    fi ;;
  update) cp "$tmp/reference.md" "$doc" ;;
  *) echo "usage: gen-reference.sh check|update [STEPSIM]"; exit 2 ;;
esac
