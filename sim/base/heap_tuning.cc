#include "sim/base/heap_tuning.h"

#include <cstdlib>  // defines __GLIBC__ on glibc systems
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace sim {

void KeepHeapForReplays() {
#if defined(__GLIBC__)
  constexpr int kMiB = 1 << 20;
  mallopt(M_TOP_PAD, 256 * kMiB);
  mallopt(M_TRIM_THRESHOLD, 1024 * kMiB);
  mallopt(M_MMAP_THRESHOLD, 32 * kMiB);  // glibc's maximum on 64-bit (HEAP_MAX_SIZE / 2)
#endif
}

}  // namespace sim
