// The heap kept for replays (sim/base/heap_tuning.h): a worker thread's arena is advised for
// transparent huge pages as the main heap is. The test runner called KeepHeapForReplays
// (tests/main.cc), as stepsim does.
#include "sim/base/heap_tuning.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace sim {
namespace {

#if defined(__GLIBC__) && !defined(SIM_ADDRESS_SANITIZER)
// The VmFlags of the mapping of this process that holds `address` (/proc/self/smaps), or ""
// when none does.
std::string VmFlagsAt(uintptr_t address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t from = 0, to = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> from >> dash >> to && dash == '-' && line.find(' ') != line.npos &&
        line.find(':') > line.find('-')) {
      inside = from <= address && address < to;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}
#endif

TEST_CASE("a worker thread's heap is advised for huge pages as the main heap is", "[heap]") {
#if !defined(__GLIBC__) || defined(SIM_ADDRESS_SANITIZER)
  WARN("not glibc's allocator (AddressSanitizer's, or no glibc): the heap is not tuned");
#else
  if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0) {
    WARN("this kernel has no transparent huge pages: nothing to advise");
    return;
  }
  std::string flags;
  std::thread worker([&] {
    KeepThreadHeapForReplays();
    // From the thread's arena, over the block KeepThreadHeapForReplays grew and advised: its
    // middle lies in whole 2 MiB pages of it.
    constexpr size_t kBytes = 8 << 20;
    void* volatile block = malloc(kBytes);
    flags = VmFlagsAt(reinterpret_cast<uintptr_t>(block) + kBytes / 2);
    free(block);
  });
  worker.join();
  INFO(flags);
  REQUIRE_FALSE(flags.empty());
  CHECK(flags.find(" hg") != std::string::npos);
#endif
}

}  // namespace
}  // namespace sim
