#include "sim/base/heap_tuning.h"

#include <cstdlib>  // defines __GLIBC__ on glibc systems
#if defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#endif

namespace sim {

void KeepHeapForReplays() {
#if defined(__GLIBC__)
  constexpr int kMiB = 1 << 20;
  mallopt(M_TOP_PAD, 256 * kMiB);
  mallopt(M_TRIM_THRESHOLD, 1024 * kMiB);
  mallopt(M_MMAP_THRESHOLD, 32 * kMiB);  // glibc's maximum on 64-bit (HEAP_MAX_SIZE / 2)
  // The heap's next 256 MiB in transparent huge pages (where the kernel's THP mode is
  // `madvise`, the default on Debian 12; a no-op under `never`): grown now, by a block that is
  // freed at once (volatile: the compiler may not drop the pair), and advised.
  auto* const before = static_cast<char*>(sbrk(0));
  void* volatile grow = malloc(4 * kMiB);
  auto* const after = static_cast<char*>(sbrk(0));
  constexpr uintptr_t kHugePage = 2 * kMiB;
  const uintptr_t from = (reinterpret_cast<uintptr_t>(before) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t to = reinterpret_cast<uintptr_t>(after) & ~(kHugePage - 1);
  if (to > from) madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE);
  free(grow);
#endif
}

}  // namespace sim
