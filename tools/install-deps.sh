#!/usr/bin/env bash
# Installs the Debian 12 packages stepsim needs, only those that are missing (run as root).
# Run by tools/quickstart.sh; tools/test.sh adds --test for what only the test suite needs
# (clang-format 14 for the format check, chromium to render the HTML report headless).
set -euo pipefail
packages=(g++ cmake ninja-build libboost-graph-dev libyaml-cpp-dev libabsl-dev catch2
          nlohmann-json3-dev libbenchmark-dev gnuplot-nox)
if [ "${1:-}" = "--test" ]; then packages+=(clang-format chromium); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
