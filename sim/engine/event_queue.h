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

#include <algorithm>
#include <cstdint>
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
  void Schedule(Duration time, int64_t payload) {
    heap_.push_back(Event{time, next_seq_++, payload});
    std::push_heap(heap_.begin(), heap_.end(), Later());
  }
  bool empty() const { return heap_.empty(); }
  const Event& top() const { return heap_.front(); }
  Event Pop() {
    std::pop_heap(heap_.begin(), heap_.end(), Later());
    const Event e = heap_.back();
    heap_.pop_back();
    return e;
  }
  uint64_t scheduled() const { return next_seq_; }
  // The events in the order Pop would return them (a copy): to compare two queues.
  std::vector<Event> InOrder() const {
    std::vector<Event> v = heap_;
    std::sort(v.begin(), v.end(), [](const Event& a, const Event& b) { return Later()(b, a); });
    return v;
  }

  // Gives every event the payload `to(payload)`, keeping its time and place in the order, and
  // drops those it gives a negative one. The order is by (time, sequence number) alone, so the
  // heap stands as it is unless an event is dropped.
  template <class To>
  void Renumber(To&& to) {
    bool dropped = false;
    for (Event& e : heap_) {
      e.payload = to(e.payload);
      dropped = dropped || e.payload < 0;
    }
    if (!dropped) return;
    heap_.erase(
        std::remove_if(heap_.begin(), heap_.end(), [](const Event& e) { return e.payload < 0; }),
        heap_.end());
    std::make_heap(heap_.begin(), heap_.end(), Later());
  }

 private:
  // A max-heap's order with the earliest first: by time, then by the order scheduled.
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.time != b.time) return a.time > b.time;
      return a.seq > b.seq;
    }
  };
  std::vector<Event> heap_;  // a binary heap (std::push_heap) under Later
  uint64_t next_seq_ = 0;
};

}  // namespace sim::engine
