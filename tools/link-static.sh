#!/usr/bin/env bash
# The linker launcher of stepsim and replay_bench (CXX_LINKER_LAUNCHER, tools/CMakeLists.txt):
# runs the link command it is given with each shared library that the command names by path
# replaced by the static archive beside it, and the executable linked with -static when every
# one has an archive and the compiler finds glibc's and libstdc++'s archives.
#
# Why: a `stepsim run` process spent about a third of its time loading and binding 37 shared
# libraries (absl alone is 30; perf: the dynamic loader's relocations and symbol lookups, and
# the kernel's mapping and page faults), and every call into absl's hashing went through the
# PLT. `stepsim run scenarios/default.yaml`, 100 processes, on the 2-core development machine:
# 12.4 ms each linked dynamically, 9.8 with absl's and yaml-cpp's archives, 8.8 with libstdc++'s
# and libgcc's too, 7.9 fully static. Debian ships both forms of absl and yaml-cpp
# (libabsl-dev, libyaml-cpp-dev), but their CMake packages import only the shared ones, and
# the archives are built as position-independent executables' code, not shared objects': the
# Python module, a shared object linking the same libraries, must keep the shared ones. So the
# executables' link command is rewritten here rather than the imported targets changed.
#
# A library without an archive (Google Benchmark's, for replay_bench) stays shared, and then so
# do the C and C++ runtimes.
set -euo pipefail

args=()
all_archives=1
for arg in "$@"; do
  if [[ $arg =~ ^(/.*/lib[^/]+)\.so(\.[0-9]+)*$ ]]; then
    archive="${BASH_REMATCH[1]}.a"
    if [[ -f $archive ]]; then
      arg=$archive
    else
      all_archives=0
    fi
  fi
  args+=("$arg")
done

# The compiler driver is the command's first word.
has_archive() { [[ $("$1" -print-file-name="$2") == /* ]]; }
if ((all_archives)) && has_archive "$1" libc.a && has_archive "$1" libstdc++.a; then
  args=("${args[0]}" -static "${args[@]:1}")
fi
exec "${args[@]}"
