#!/usr/bin/env bash
# Installs the Debian 12 packages stepsim needs, only those that are missing (run as root).
# Run by tools/quickstart.sh; tools/test.sh adds --test for what only the test suite needs
# (Catch2 and Google Benchmark for the suite and the benchmarks, Clang for the sanitized build,
# clang-format 14 for the format check, chromium to render the HTML report headless, pytest and
# pandas for the Python bindings' tests, Pillow to read the plot's rendering). pybind11-dev and
# python3-dev build `import stepsim`.
set -euo pipefail
packages=(g++ cmake ninja-build libboost-graph-dev libyaml-cpp-dev libabsl-dev
          nlohmann-json3-dev libtomlplusplus-dev gnuplot-nox pybind11-dev python3-dev)
if [ "${1:-}" = "--test" ]; then
  packages+=(catch2 libbenchmark-dev clang clang-format chromium python3-pytest python3-pandas
             python3-pil)
fi
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
