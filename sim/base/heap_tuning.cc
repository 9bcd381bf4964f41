#include "sim/base/heap_tuning.h"

#include <cstdlib>  // defines __GLIBC__ on glibc systems
#if defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#endif

namespace sim {

#if defined(__GLIBC__)
namespace {

constexpr int kMiB = 1 << 20;
constexpr uintptr_t kHugePage = 2 * kMiB;
std::atomic<bool> kept{false};

// Advises transparent huge pages over the whole 2 MiB pages within [from, to).
void AdviseHugePages(uintptr_t from, uintptr_t to) {
  from = (from + kHugePage - 1) & ~(kHugePage - 1);
  to &= ~(kHugePage - 1);
  if (to > from) madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE);
}

}  // namespace
#endif

void KeepHeapForReplays() {
#if defined(__GLIBC__)
  kept = true;
  mallopt(M_TOP_PAD, 256 * kMiB);
  mallopt(M_TRIM_THRESHOLD, 1024 * kMiB);
  mallopt(M_MMAP_THRESHOLD, 32 * kMiB);  // glibc's maximum on 64-bit (HEAP_MAX_SIZE / 2)
  // The heap's next 256 MiB in transparent huge pages (where the kernel's THP mode is
  // `madvise`, the default on Debian 12; a no-op under `never`): grown now, by a block that is
  // freed at once (volatile: the compiler may not drop the pair), and advised.
  auto* const before = static_cast<char*>(sbrk(0));
  void* volatile grow = malloc(4 * kMiB);
  auto* const after = static_cast<char*>(sbrk(0));
  AdviseHugePages(reinterpret_cast<uintptr_t>(before), reinterpret_cast<uintptr_t>(after));
  free(grow);
#endif
}

void KeepThreadHeapForReplays() {
#if defined(__GLIBC__) && !defined(SIM_ADDRESS_SANITIZER)  // ASan's allocator is not glibc's
  if (!kept) return;
  // Below the mmap threshold, so from the thread's arena, whose heaps glibc maps 64 MiB at a
  // time (HEAP_MAX_SIZE): the block grows the heap, and freed it stays there as its top (the
  // trim threshold is 1 GiB), to be split by the thread's later allocations.
  constexpr size_t kBlock = 24 * kMiB;
  void* volatile grow = malloc(kBlock);
  if (grow == nullptr) return;
  const auto at = reinterpret_cast<uintptr_t>(grow);
  AdviseHugePages(at, at + kBlock);
  free(grow);
#endif
}

}  // namespace sim
