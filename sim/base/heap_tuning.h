#pragma once
// A replay allocates its op program, event queue and ledgers afresh, tens of megabytes for a
// long step, and frees them at its end. With glibc's defaults, blocks above the dynamic mmap
// threshold (128 KiB at first) come from mmap and go back to the kernel when freed, and the top
// of the heap is trimmed above 128 KiB: the next replay faults every page in again. Measured on
// the 2-core development machine, a virtual machine (tools/bench/replay_bench, the same
// RelWithDebInfo binary without and with this, interleaved, median of 3): the default
// scenario's folded replay 48.7 ms, a third of it in the kernel's page-fault path, and 16.4 ms
// with the heap kept; `stepsim calibrate` of the A100 fit about 26 s -> 15 s (docs/benchmarks.md).

// Defined when AddressSanitizer instruments this build, whose allocator replaces glibc's: GCC
// says so with __SANITIZE_ADDRESS__, Clang with __has_feature(address_sanitizer).
#if defined(__SANITIZE_ADDRESS__)
#define SIM_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_ADDRESS_SANITIZER 1
#endif
#endif

namespace sim {

// Keeps freed memory in the process for the next replay: large blocks from the heap instead of
// mmap (below 32 MiB), no trimming below 1 GiB free at the top, and the heap grown 256 MiB
// at a time (glibc mallopt M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, M_TOP_PAD), its first 256 MiB
// in transparent huge pages (madvise MADV_HUGEPAGE): a process that replays once still faults
// its op program and ledgers in for the first time, and on the development machine each 4 KiB
// fault costs about 9 µs (a 16 MiB memset: 4,154 faults and 51 ms, 92 and 14 ms advised).
// `stepsim run scenarios/default.yaml`: 1,735 -> 725-1,017 faults, 38.0 -> 30.0 ms (median
// of 15, interleaved). Call once at program start, before threads; a no-op without glibc (and
// under AddressSanitizer, whose allocator ignores it).
void KeepHeapForReplays();

// The same for a worker thread (ParallelFor's, sim/base/parallel.h), whose allocations glibc
// serves from an arena of its own: a heap mapped apart from the main one, which neither the
// main heap's advice nor M_TOP_PAD reaches. Its first 24 MiB are grown and advised as the main
// heap's are. `stepsim sweep --jobs 2` of the contract grid (144 configurations; perf stat, 15
// runs, two rounds alternating): 2,734-2,937 page faults -> 1,016-1,523, 269 -> 244 ms of CPU,
// 141-144 -> 136-143 ms of wall time. `plan llama2-70b` (three GPUs, 8 s) did not move.
// Call first thing in the thread; a no-op unless KeepHeapForReplays ran (a library user's
// threads keep glibc's defaults).
void KeepThreadHeapForReplays();

}  // namespace sim
