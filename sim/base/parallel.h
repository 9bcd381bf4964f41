#pragma once
// Runs fn(0) ... fn(n - 1) on up to `jobs` threads (the caller's among them). Each index runs
// exactly once; callers write results into per-index slots, so output order never depends on
// the thread count.

#include <cstddef>
#include <functional>

namespace sim {

void ParallelFor(size_t n, int jobs, const std::function<void(size_t)>& fn);

}  // namespace sim
