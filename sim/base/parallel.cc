#include "sim/base/parallel.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

#include "sim/base/heap_tuning.h"

namespace sim {

void ParallelFor(size_t n, int jobs, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto work = [&]() {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  const int threads = std::max(1, std::min<int>(jobs, static_cast<int>(n)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    // A thread the system cannot make (a --jobs beyond the process limit) is one fewer worker:
    // every index still runs, on the threads there are, to the same results.
    try {
      pool.emplace_back([&] {
        KeepThreadHeapForReplays();
        work();
      });
    } catch (const std::system_error&) {
      break;
    }
  }
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace sim
