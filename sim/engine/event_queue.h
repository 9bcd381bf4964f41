#pragma once
// The event kernel's clock and queue: integer picoseconds, a binary heap ordered by
// (time, sequence number). Nothing here knows about GPUs.
//
// What happens at equal times (the phase ladder) is the executor's (executor.h): every finish
// at time t, then one dispatch that issues and starts what became ready. Only finishes are
// queued, so the queue orders by time and then by the order events were scheduled (sequence
// number), which makes runs deterministic.
//
// No globals: each simulation owns its queue, so scenarios can run in parallel threads.

#include <cstdint>
#include <queue>
#include <vector>

#include "sim/base/units.h"

namespace sim::engine {

struct Event {
  Duration time;
  uint64_t seq;
  int64_t payload;  // whatever the scheduler needs to identify the activity
};

class EventQueue {
 public:
  void Schedule(Duration time, int64_t payload) { heap_.push(Event{time, next_seq_++, payload}); }
  bool empty() const { return heap_.empty(); }
  const Event& top() const { return heap_.top(); }
  Event Pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }
  uint64_t scheduled() const { return next_seq_; }

  // Moves every payload at or above `from` by (to - from), keeping times and order: what a copy
  // of the queue needs when the payloads above a count name something else (executor.h's
  // stream wake-ups, numbered after the tasks).
  void RenumberAbove(int64_t from, int64_t to) {
    Renumber([&](int64_t p) { return p >= from ? p + (to - from) : p; });
  }

  // Gives every event the payload `to(payload)`, keeping its time and place in the order, and
  // drops those it gives a negative one.
  template <class To>
  void Renumber(To&& to) {
    std::vector<Event> events;
    events.reserve(heap_.size());
    while (!heap_.empty()) {
      Event e = heap_.top();
      heap_.pop();
      e.payload = to(e.payload);
      if (e.payload >= 0) events.push_back(e);
    }
    for (const Event& e : events) heap_.push(e);
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.time != b.time) return a.time > b.time;
      return a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace sim::engine
