#!/usr/bin/env bash
# Quick start: install what is missing, build stepsim (Release) into build-release/, and run it
# on its default scenario (scenarios/default.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release
./build-release/tools/stepsim "$@"
