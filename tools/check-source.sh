#!/usr/bin/env bash
# Source checks that run before the build (tools/test.sh):
#  1. every C++ file is formatted as .clang-format says (clang-format 14, Debian 12);
#  2. no header or source in sim/ includes a layer above its own. The layers and what each may
#     include mirror the libraries' link order in sim/CMakeLists.txt (STYLE "The shape of the
#     house"), so a dependency pointing the wrong way fails here even where it would compile;
#  3. no code outside sim/workload/policy/ branches on the framework (== / != / case
#     Framework::k...): it asks the framework's traits (sim/workload/policy/framework_traits.h).
# Prints each offence and exits 1 if there is any.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0

mapfile -t sources < <(find sim tools tests -name '*.cc' -o -name '*.h' | sort)
for f in "${sources[@]}"; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "$f: not formatted (run: clang-format -i $f)"
    status=1
  fi
done

# Layer -> the layers it may include (its own included). Keep in step with sim/CMakeLists.txt.
declare -A allowed=(
  [base]="base"
  [spec]="base spec"
  [config]="base spec workload config"
  [workload]="base spec workload"
  [engine]="base engine"
  [memory]="base spec memory"
  [cluster]="base spec cluster"
  [cost]="base spec workload cluster cost"
  [replay]="base spec workload cluster cost engine memory replay"
  [report]="base spec workload cluster cost engine memory replay report"
  [explore]="base spec config workload cluster cost engine memory replay report explore"
  [validate]="base spec config workload cluster cost engine memory replay report validate"
)
for f in $(find sim -name '*.cc' -o -name '*.h' | sort); do
  layer=$(echo "$f" | cut -d/ -f2)
  [ -n "${allowed[$layer]+x}" ] || { echo "$f: layer '$layer' missing from tools/check-source.sh"; status=1; continue; }
  while IFS=: read -r line inc; do
    target=$(echo "$inc" | sed -E 's|#include "sim/([a-z_]+)/.*|\1|')
    case " ${allowed[$layer]} " in
      *" $target "*) ;;
      *) echo "$f:$line: sim/$layer includes sim/$target, a layer it may not depend on"; status=1 ;;
    esac
  done < <(grep -nE '^#include "sim/' "$f" || true)
done
while IFS= read -r hit; do
  echo "$hit: branches on the framework outside sim/workload/policy/; ask TraitsOf(framework)"
  status=1
done < <(grep -rnE '(==|!=|case) *(sim::)?Framework::k' sim tools --include='*.cc' --include='*.h' |
  grep -v '^sim/workload/policy/' | cut -d: -f1,2 || true)
exit $status
