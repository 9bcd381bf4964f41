#include "sim/base/stop_request.h"

#include <atomic>

namespace sim {

namespace {
std::atomic<bool> stop_requested{false};
}  // namespace

void RequestStop() { stop_requested.store(true, std::memory_order_relaxed); }
void ClearStopRequest() { stop_requested.store(false, std::memory_order_relaxed); }
bool StopRequested() { return stop_requested.load(std::memory_order_relaxed); }

}  // namespace sim
