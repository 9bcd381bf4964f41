#pragma once
// The event kernel's clock and queue: integer picoseconds, a binary heap ordered by
// (time, phase, sequence number). Nothing here knows about GPUs.
//
// Phase ladder at equal times (lower runs first):
//   kFinish   — an activity ends: its stream becomes free and its end-of-activity effects
//               (memory frees) apply;
//   kDispatch — ready activities are issued and started (their allocations apply).
// (The task executor queues only finishes and runs the dispatch of time t inline once the last
// finish at t is popped — the same ladder with half the heap traffic.)
// So everything that ends at time t releases memory before anything starting at t allocates:
// the peak is never overstated by a free and an allocation that coincide. Within a phase, events
// run in the order they were scheduled (sequence number), which makes runs deterministic.
//
// No globals: each simulation owns its queue, so scenarios can run in parallel threads.

#include <cstdint>
#include <queue>
#include <vector>

#include "sim/base/units.h"

namespace sim::engine {

enum class Phase : uint8_t { kFinish = 0, kDispatch = 1 };

struct Event {
  Duration time;
  Phase phase;
  uint64_t seq;
  int64_t payload;  // whatever the scheduler needs to identify the activity
};

class EventQueue {
 public:
  void Schedule(Duration time, Phase phase, int64_t payload) {
    heap_.push(Event{time, phase, next_seq_++, payload});
  }
  bool empty() const { return heap_.empty(); }
  const Event& top() const { return heap_.top(); }
  Event Pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }
  uint64_t scheduled() const { return next_seq_; }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.time != b.time) return a.time > b.time;
      if (a.phase != b.phase) return a.phase > b.phase;
      return a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace sim::engine
