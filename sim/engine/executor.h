#pragma once
// Runs a task graph over streams, in simulated time.
//
// A task belongs to one stream; a stream runs its tasks one at a time, in task-index order
// (FIFO, like a CUDA stream). A task is *issued* when all its predecessors have finished (they
// may be on other streams), and *starts* when it is issued, its stream is idle, every earlier
// task of the stream has finished and its release time (if the graph gives one: when the host
// has launched it) has come. Tasks of one join group (a collective across explicitly
// simulated ranks) start together, when all of them could start. The listener decides how long
// a task runs and observes issue/start/finish; the executor knows nothing about GPUs.
//
// The listener (the ExecutorListener concept below) decides how long a task runs and observes
// issue, start and finish. OnStart and OnFinish receive a Rescheduler through which the listener
// may move the finish of any running task (link sharing: a collective that starts slows those
// already running).
//
// The phase ladder at equal times: all finishes at time t (their frees apply), then one
// dispatch that issues and starts what became ready (their allocations apply), so everything
// that ends at t releases memory before anything starting at t allocates: the peak is never
// overstated by a free and an allocation that coincide. Only finishes are queued (the dispatch of
// time t runs when the last finish at t has been popped). A stream whose next task waits for its
// release time queues one wake-up at that time, which triggers the dispatch of that time like a
// finish does. Cost: O(tasks · log streams) — the heap holds at most one finish and one wake-up
// per stream.
//
// Run() goes to the end; Begin() and Advance(pause) stop at a boundary between dispatch rounds
// when asked, where TakeSnapshot copies the state over a prefix of the tasks and another
// executor, over a graph that shares that prefix, Adopts it and goes on as if it had run from
// the start (forked replays: sim/replay/prefix_watch.h).

#include <algorithm>
#include <concepts>
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
  // Optional: per task, the earliest time it may start.
  std::vector<Duration> release;
  // Optional, for a graph over the tail of a longer one (Executor::Adopt with a base): per task,
  // whether it had predecessors before the graph's first task, left out of pred_count and succ.
  std::vector<uint8_t> preds_before;

  int32_t num_tasks() const { return static_cast<int32_t>(stream.size()); }
};

struct ExecutionStats {
  Duration makespan;
  uint64_t events = 0;
};

// What a listener may do to the tasks that are running: move a finish to `finish` (>= now).
// The earlier finish event is left in the queue and skipped.
class Rescheduler {
 public:
  virtual void Reschedule(int32_t task, Duration finish) = 0;

 protected:
  ~Rescheduler() = default;
};

// An executor's state over the first tasks of its graph, at a boundary between dispatch rounds
// (Executor::TakeSnapshot, Adopt): per task of the prefix its predecessors left, whether issued,
// started, finished and when it finishes; per stream the tasks finished, whether busy, a queued
// wake-up; the event queue (stream wake-ups numbered after the graph's `tasks`) and the counts.
struct ExecutorSnapshot {
  int32_t prefix = 0, tasks = 0;
  std::vector<int32_t> remaining;
  std::vector<uint8_t> issued, started, finished;
  std::vector<Duration> finish_at;
  std::vector<int32_t> done;
  std::vector<uint8_t> busy;
  std::vector<std::optional<Duration>> wake_at;
  EventQueue queue;
  ExecutionStats stats;
};

// `tail`, a snapshot of a graph over another's tasks from `base` on (Executor::Adopt with a
// base), numbered as the other's: every task before the base finished, task t at
// finish_before[t], done_before[s] of them on stream s.
inline ExecutorSnapshot NumberedFrom(ExecutorSnapshot tail, int32_t base,
                                     const std::vector<int32_t>& done_before,
                                     const std::vector<Duration>& finish_before) {
  if (base == 0) return tail;
  auto widen = [&](auto& v, auto before) {
    v.insert(v.begin(), static_cast<size_t>(base), before);
  };
  widen(tail.remaining, 0);
  widen(tail.issued, uint8_t{1});
  widen(tail.started, uint8_t{1});
  widen(tail.finished, uint8_t{1});
  tail.finish_at.insert(tail.finish_at.begin(), finish_before.begin(),
                        finish_before.begin() + base);
  for (size_t s = 0; s < tail.done.size(); ++s) tail.done[s] += done_before[s];
  // Tasks and the stream wake-ups numbered after them both move by the base.
  tail.queue.Renumber([&](int64_t p) { return p + base; });
  tail.prefix += base;
  tail.tasks += base;
  return tail;
}

// OnStart returns the task's duration (>= 0). A listener may also have Prefetch(task), told
// which task a stream starts next when it starts one (to fetch what OnStart will read).
template <class L>
concept ExecutorListener = requires(L& l, int32_t task, Duration now, Rescheduler& r) {
  { l.OnIssue(task, now) } -> std::same_as<void>;
  { l.OnStart(task, now, r) } -> std::same_as<Duration>;
  { l.OnFinish(task, now, r) } -> std::same_as<void>;
};

template <ExecutorListener Listener>
class Executor final : private Rescheduler {
 public:
  Executor(const TaskGraph& graph, Listener& listener) : g_(graph), l_(listener) {
    const int32_t n = g_.num_tasks();
    remaining_ = g_.pred_count;
    issued_.assign(n, 0);
    started_.assign(n, 0);
    arrived_.assign(n, 0);
    finished_.assign(n, 0);
    finish_at_.assign(n, Duration::Zero());
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
    wake_at_.assign(g_.num_streams, std::nullopt);
  }

  // Runs the graph to its end.
  ExecutionStats Run() {
    Begin();
    Advance([](Duration) { return false; });
    return stats_;
  }

  // Issues and starts what is ready at time zero (once, before Advance).
  void Begin() {
    for (int32_t t = 0; t < g_.num_tasks(); ++t) {
      if (remaining_[t] == 0) ready_.push_back(t);
    }
    Dispatch(Duration::Zero());
  }

  // Runs until the graph is done (returns true) or `pause(next)` returns true (returns false).
  // pause is asked at every boundary between dispatch rounds — every finish so far applied,
  // every dispatch run, nothing ready or dirty — with the time of the next event: the state
  // there is whole, and TakeSnapshot may copy it. Advance again to go on.
  template <class Pause>
  bool Advance(Pause&& pause) {
    bool finished_at_time = false;  // a live finish was applied at the current time
    while (!q_.empty()) {
      if (!finished_at_time && pause(q_.top().time)) return false;
      const Event e = q_.Pop();
      if (e.payload >= g_.num_tasks()) {
        // A stream's next task has been released: the dispatch of this time starts it.
        const auto s = static_cast<int32_t>(e.payload - g_.num_tasks());
        wake_at_[s].reset();
        MarkDirty(s);
        finished_at_time = true;
      }
      const auto t = static_cast<int32_t>(e.payload);
      // A rescheduled task leaves its earlier finish event behind: skip it.
      if (t < g_.num_tasks() && e.time == finish_at_[t] && !finished_[t]) {
        stats_.events++;
        finished_[t] = 1;
        Finish(t, e.time);
        stats_.makespan = e.time;
        finished_at_time = true;
      }
      // The dispatch phase of time t runs once every finish at t has been applied. Only
      // finishes are queued, so the dispatch runs inline when the next event is later.
      if (finished_at_time && (q_.empty() || q_.top().time != e.time)) {
        stats_.events++;
        finished_at_time = false;
        Dispatch(e.time);
      }
    }
    for (int32_t s = 0; s < g_.num_streams; ++s) {
      SIM_CHECK(head_[s] == queue_begin_[s + 1], "a stream did not drain: dependency cycle");
    }
    return true;
  }

  const ExecutionStats& stats() const { return stats_; }
  bool started(int32_t t) const { return started_[t] != 0; }
  bool finished(int32_t t) const { return finished_[t] != 0; }
  Duration finish_at(int32_t t) const { return finish_at_[t]; }

  // A copy of this run's state over its first `prefix` tasks, paused at a boundary (Advance),
  // for a graph that shares those tasks to go on from (Adopt); none when a task from `prefix`
  // on has been touched — started, or made ready through a predecessor (tasks without
  // predecessors are issued at time zero, which changes nothing while their streams are busy
  // with earlier tasks; the caller checks that their issue allocates nothing).
  std::optional<ExecutorSnapshot> TakeSnapshot(int32_t prefix) const {
    const int32_t n = g_.num_tasks();
    if (!g_.join.empty() || prefix > n || !ready_.empty() || !dirty_.empty()) return std::nullopt;
    for (int32_t t = prefix; t < n; ++t) {
      if (started_[t] || (issued_[t] && g_.pred_count[t] > 0)) return std::nullopt;
    }
    ExecutorSnapshot snap;
    snap.prefix = prefix;
    snap.tasks = n;
    snap.remaining.assign(remaining_.begin(), remaining_.begin() + prefix);
    snap.issued.assign(issued_.begin(), issued_.begin() + prefix);
    snap.started.assign(started_.begin(), started_.begin() + prefix);
    snap.finished.assign(finished_.begin(), finished_.begin() + prefix);
    snap.finish_at.assign(finish_at_.begin(), finish_at_.begin() + prefix);
    for (int32_t s = 0; s < g_.num_streams; ++s) snap.done.push_back(head_[s] - queue_begin_[s]);
    snap.busy = busy_;
    snap.wake_at = wake_at_;
    snap.queue = q_;
    snap.stats = stats_;
    return snap;
  }

  // Takes over a snapshot (TakeSnapshot) of a graph that shares its first `prefix` tasks with
  // this one — the same streams, predecessors, successors among them and release times — and
  // differs after them. The run from here is the one this graph would have had from the start
  // when none of its own tasks from the prefix on would have been touched by then either.
  // Returns false, leaving this executor unusable, when that does not hold. Not for join groups.
  //
  // With a `base`, this graph is the other's from task `base` on (its task t is the other's
  // base + t): every task before it has finished in the snapshot, `done_before[s]` of them on
  // stream s, and the graph leaves them out (TaskGraph::preds_before). A replay of a program's
  // tail then sets up and copies only the tasks it runs.
  bool Adopt(const ExecutorSnapshot& snap, int32_t base = 0,
             const std::vector<int32_t>* done_before = nullptr) {
    const int32_t n = g_.num_tasks(), prefix = snap.prefix - base;
    if (!g_.join.empty() || static_cast<int32_t>(snap.done.size()) != g_.num_streams || base < 0 ||
        prefix < 0 || prefix > n || (base > 0 && done_before == nullptr)) {
      return false;
    }
    if (std::find(snap.finished.begin(), snap.finished.begin() + base, 0) !=
        snap.finished.begin() + base) {
      return false;
    }
    std::copy(snap.remaining.begin() + base, snap.remaining.end(), remaining_.begin());
    std::copy(snap.issued.begin() + base, snap.issued.end(), issued_.begin());
    std::copy(snap.started.begin() + base, snap.started.end(), started_.begin());
    std::copy(snap.finished.begin() + base, snap.finished.end(), finished_.begin());
    std::copy(snap.finish_at.begin() + base, snap.finish_at.end(), finish_at_.begin());
    // This graph's later tasks: what their finished predecessors leave, issued at time zero
    // when they have none.
    for (int32_t t = 0; t < prefix; ++t) {
      if (!finished_[t]) continue;
      for (int32_t i = g_.succ_begin[t]; i < g_.succ_begin[t + 1]; ++i) {
        if (g_.succ[i] >= prefix) --remaining_[g_.succ[i]];
      }
    }
    for (int32_t t = prefix; t < n; ++t) {
      const bool preds =
          g_.pred_count[t] > 0 || (!g_.preds_before.empty() && g_.preds_before[t] != 0);
      if (remaining_[t] == 0 && preds) return false;  // ready: touched
      issued_[t] = !preds;
    }
    for (int32_t s = 0; s < g_.num_streams; ++s) {
      const int32_t done = snap.done[s] - (base > 0 ? (*done_before)[s] : 0);
      if (done < 0 || done > queue_begin_[s + 1] - queue_begin_[s]) return false;
      head_[s] = queue_begin_[s] + done;
      busy_[s] = snap.busy[s];
      wake_at_[s] = snap.wake_at[s];
      if (head_[s] == queue_begin_[s + 1]) continue;
      // The stream's next task: one of the prefix, or one of this graph's later tasks that no
      // one runs yet — which must wait for a predecessor, since a stream idle with an issued
      // head would have started it.
      const int32_t next = queue_[head_[s]];
      if (next >= prefix && (busy_[s] || wake_at_[s] || issued_[next])) return false;
    }
    q_ = snap.queue;
    // Stream wake-ups follow the task count. The events left of tasks before the base are
    // stale (they have finished: Advance would skip them) and dropped.
    q_.Renumber([&](int64_t p) -> int64_t {
      if (p >= snap.tasks) return p - snap.tasks + n;
      return p - base;
    });
    stats_ = snap.stats;
    return true;
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
    l_.OnFinish(t, now, *this);
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
    if (!g_.release.empty() && now < g_.release[t]) {
      if (!wake_at_[s]) {
        wake_at_[s] = g_.release[t];
        q_.Schedule(g_.release[t], static_cast<int64_t>(g_.num_tasks()) + s);
      }
      return;
    }
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
    for (int32_t i = g_.join_begin[j]; i < g_.join_begin[j + 1]; ++i)
      Start(g_.join_members[i], now);
  }

  void Start(int32_t t, Duration now) {
    const int32_t s = g_.stream[t];
    busy_[s] = 1;
    started_[t] = 1;
    const Duration d = l_.OnStart(t, now, *this);
    SIM_CHECK(d >= Duration::Zero(), "negative task duration");
    finish_at_[t] = now + d;
    q_.Schedule(now + d, t);
    // The stream's next task starts after this one: fetch what its start reads now, while
    // other events run. In a long program those reads missed the cache (a quarter of Start's
    // cycles on the GPT-3 175B pipeline; perf).
    if (const int32_t h = head_[s] + 1; h < queue_begin_[s + 1]) {
      const int32_t next = queue_[h];
      __builtin_prefetch(&finish_at_[next]);
      if constexpr (requires { l_.Prefetch(next); }) l_.Prefetch(next);
    }
  }

  void Reschedule(int32_t t, Duration finish) override {
    SIM_CHECK(busy_[g_.stream[t]] && !finished_[t], "only a running task can be rescheduled");
    if (finish == finish_at_[t]) return;
    finish_at_[t] = finish;
    q_.Schedule(finish, t);
  }

 private:
  const TaskGraph& g_;
  Listener& l_;
  EventQueue q_;
  std::vector<int32_t> remaining_;
  std::vector<uint8_t> issued_, started_, arrived_,
      finished_;                     // flags; not vector<bool>, which packs bits
  std::vector<Duration> finish_at_;  // per task: when its live finish event is due
  std::vector<int32_t> queue_begin_, queue_, head_;
  std::vector<uint8_t> busy_;
  std::vector<int32_t> dirty_;
  std::vector<uint8_t> is_dirty_;
  std::vector<int32_t> ready_;
  std::vector<int32_t> join_arrived_;
  std::vector<std::optional<Duration>> wake_at_;  // per stream: a queued wake-up
  ExecutionStats stats_;
};

}  // namespace sim::engine
