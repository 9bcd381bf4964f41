#!/usr/bin/env bash
# Quick start: install what is missing, build stepsim (Release) into build-release/ with its
# Python module, make `import stepsim` work for python3, and run stepsim on its default scenario
# (scenarios/default.yaml). Only what a user runs is built: the tests, fuzz targets and
# benchmarks are built by tools/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTEPSIM_PYTHON=ON \
      -DSTEPSIM_TESTS=OFF -DSTEPSIM_BENCHMARKS=OFF -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build build-release --target stepsim stepsim_python
# A .pth file in each python3's site-packages (Debian's, and the one first on PATH when that is
# another of the same version) puts build-release/python on its path, as `pip install -e` would:
# a rebuild is picked up without reinstalling.
for py in /usr/bin/python3 "$(command -v python3 || true)"; do
  [ -x "$py" ] || continue
  [ "$("$py" -c 'import sys; print(sys.version_info[:2])')" = \
    "$(/usr/bin/python3 -c 'import sys; print(sys.version_info[:2])')" ] || continue
  site=$("$py" -c 'import site; print(site.getsitepackages()[0])')
  mkdir -p "$site" && echo "$PWD/build-release/python" > "$site/stepsim.pth"
done
./build-release/tools/stepsim "$@"
