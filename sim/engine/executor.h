#pragma once
// Runs a task graph over streams, in simulated time.
//
// A task belongs to one stream; a stream runs its tasks one at a time, in task-index order
// (FIFO, like a CUDA stream). A task is *issued* when all its predecessors have finished (they
// may be on other streams), and *starts* when it is issued, its stream is idle and every earlier
// task of the stream has finished. Tasks of one join group (a collective across explicitly
// simulated ranks) start together, when all of them could start. The listener decides how long
// a task runs and observes issue/start/finish; the executor knows nothing about GPUs.
//
// Listener interface:
//   void     OnIssue(int32_t task, Duration now);
//   Duration OnStart(int32_t task, Duration now);   // returns the task's duration (>= 0)
//   void     OnFinish(int32_t task, Duration now);
//
// Events follow the phase ladder of event_queue.h: all finishes at time t, then one dispatch
// that issues and starts what became ready. Only finishes are queued (the dispatch of time t
// runs when the last finish at t has been popped). Cost: O(tasks · log streams) — the heap
// holds at most one finish per stream.

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/base/check.h"
#include "sim/base/units.h"
#include "sim/engine/event_queue.h"

namespace sim::engine {

struct TaskGraph {
  int32_t num_streams = 0;
  std::vector<int32_t> stream;      // per task
  std::vector<int32_t> pred_count;  // per task
  std::vector<int32_t> succ_begin;  // CSR over tasks (size tasks + 1)
  std::vector<int32_t> succ;
  // Optional: per task, the join group it must start with; join_begin/join_members is the CSR
  // of each group's tasks.
  std::vector<std::optional<int32_t>> join;
  std::vector<int32_t> join_begin;
  std::vector<int32_t> join_members;

  int32_t num_tasks() const { return static_cast<int32_t>(stream.size()); }
};

struct ExecutionStats {
  Duration makespan;
  uint64_t events = 0;
};

template <class Listener>
class Executor {
 public:
  Executor(const TaskGraph& graph, Listener& listener) : g_(graph), l_(listener) {
    const int32_t n = g_.num_tasks();
    remaining_ = g_.pred_count;
    issued_.assign(n, 0);
    arrived_.assign(n, 0);
    // Per-stream FIFO of tasks in index order (CSR).
    queue_begin_.assign(g_.num_streams + 1, 0);
    for (int32_t t = 0; t < n; ++t) queue_begin_[g_.stream[t] + 1]++;
    for (int32_t s = 0; s < g_.num_streams; ++s) queue_begin_[s + 1] += queue_begin_[s];
    queue_.resize(n);
    std::vector<int32_t> fill(queue_begin_.begin(), queue_begin_.end() - 1);
    for (int32_t t = 0; t < n; ++t) queue_[fill[g_.stream[t]]++] = t;
    head_ = std::vector<int32_t>(queue_begin_.begin(), queue_begin_.end() - 1);
    busy_.assign(g_.num_streams, 0);
    dirty_.reserve(g_.num_streams);
    is_dirty_.assign(g_.num_streams, 0);
    if (!g_.join_begin.empty()) join_arrived_.assign(g_.join_begin.size() - 1, 0);
  }

  ExecutionStats Run() {
    for (int32_t t = 0; t < g_.num_tasks(); ++t) {
      if (remaining_[t] == 0) ready_.push_back(t);
    }
    ExecutionStats stats;
    Dispatch(Duration::Zero());
    while (!q_.empty()) {
      const Event e = q_.Pop();
      stats.events++;
      Finish(static_cast<int32_t>(e.payload), e.time);
      stats.makespan = e.time;
      // The dispatch phase of time t runs once every finish at t has been applied. Only
      // finishes are queued, so the dispatch runs inline when the next event is later.
      if (q_.empty() || q_.top().time != e.time) {
        stats.events++;
        Dispatch(e.time);
      }
    }
    for (int32_t s = 0; s < g_.num_streams; ++s) {
      SIM_CHECK(head_[s] == queue_begin_[s + 1], "a stream did not drain: dependency cycle");
    }
    return stats;
  }

 private:
  void MarkDirty(int32_t s) {
    if (!is_dirty_[s]) {
      is_dirty_[s] = 1;
      dirty_.push_back(s);
    }
  }

  void Finish(int32_t t, Duration now) {
    const int32_t s = g_.stream[t];
    busy_[s] = 0;
    head_[s]++;
    MarkDirty(s);
    l_.OnFinish(t, now);
    for (int32_t i = g_.succ_begin[t]; i < g_.succ_begin[t + 1]; ++i) {
      const int32_t next = g_.succ[i];
      if (--remaining_[next] == 0) ready_.push_back(next);
    }
  }

  void Dispatch(Duration now) {
    for (int32_t t : ready_) {
      issued_[t] = 1;
      l_.OnIssue(t, now);
      MarkDirty(g_.stream[t]);
    }
    ready_.clear();
    // Streams are visited in the order they became dirty; starting a join group can dirty no
    // new stream, so one pass suffices.
    for (size_t i = 0; i < dirty_.size(); ++i) TryStart(dirty_[i], now);
    for (int32_t s : dirty_) is_dirty_[s] = 0;
    dirty_.clear();
  }

  void TryStart(int32_t s, Duration now) {
    if (busy_[s] || head_[s] == queue_begin_[s + 1]) return;
    const int32_t t = queue_[head_[s]];
    if (!issued_[t]) return;
    if (g_.join.empty() || !g_.join[t]) {
      Start(t, now);
      return;
    }
    const int32_t j = *g_.join[t];
    if (!arrived_[t]) {
      arrived_[t] = 1;
      join_arrived_[j]++;
    }
    if (join_arrived_[j] < g_.join_begin[j + 1] - g_.join_begin[j]) return;
    for (int32_t i = g_.join_begin[j]; i < g_.join_begin[j + 1]; ++i) Start(g_.join_members[i], now);
  }

  void Start(int32_t t, Duration now) {
    busy_[g_.stream[t]] = 1;
    const Duration d = l_.OnStart(t, now);
    SIM_CHECK(d >= Duration::Zero(), "negative task duration");
    q_.Schedule(now + d, Phase::kFinish, t);
  }

  const TaskGraph& g_;
  Listener& l_;
  EventQueue q_;
  std::vector<int32_t> remaining_;
  std::vector<uint8_t> issued_, arrived_;  // flags; not vector<bool>, which packs bits
  std::vector<int32_t> queue_begin_, queue_, head_;
  std::vector<uint8_t> busy_;
  std::vector<int32_t> dirty_;
  std::vector<uint8_t> is_dirty_;
  std::vector<int32_t> ready_;
  std::vector<int32_t> join_arrived_;
};

}  // namespace sim::engine
