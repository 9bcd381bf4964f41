// The event kernel: ordering, the phase ladder, FIFO streams, cross-stream dependencies, joins.
#include <algorithm>
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/engine/event_queue.h"
#include "sim/engine/executor.h"

namespace sim::engine {
namespace {

TEST_CASE("events pop by time, then scheduling order", "[engine]") {
  EventQueue q;
  q.Schedule(Duration::Picoseconds(10), 1);
  q.Schedule(Duration::Picoseconds(10), 2);
  q.Schedule(Duration::Picoseconds(5), 3);
  q.Schedule(Duration::Picoseconds(10), 4);
  std::vector<int64_t> order;
  while (!q.empty()) order.push_back(q.Pop().payload);
  CHECK(order == std::vector<int64_t>{3, 1, 2, 4});
}

// Records what the executor asked, with fixed durations per task.
struct Recorder {
  std::vector<Duration> durations;
  std::vector<std::string> log;
  void OnIssue(int32_t t, Duration now) { log.push_back(Line("issue", t, now)); }
  Duration OnStart(int32_t t, Duration now, Rescheduler&) {
    log.push_back(Line("start", t, now));
    return durations[t];
  }
  void OnFinish(int32_t t, Duration now, Rescheduler&) { log.push_back(Line("finish", t, now)); }
  static std::string Line(const char* what, int32_t t, Duration now) {
    return std::string(what) + " " + std::to_string(t) + " @" + std::to_string(now.picoseconds());
  }
};

// Builds the CSR successor lists from per-task predecessor lists.
TaskGraph Graph(int32_t streams, std::vector<int32_t> stream,
                std::vector<std::vector<int32_t>> preds) {
  TaskGraph g;
  g.num_streams = streams;
  g.stream = stream;
  const int32_t n = static_cast<int32_t>(stream.size());
  std::vector<std::vector<int32_t>> succ(n);
  for (int32_t t = 0; t < n; ++t) {
    g.pred_count.push_back(static_cast<int32_t>(preds[t].size()));
    for (int32_t p : preds[t]) succ[p].push_back(t);
  }
  g.succ_begin.push_back(0);
  for (int32_t t = 0; t < n; ++t) {
    for (int32_t s : succ[t]) g.succ.push_back(s);
    g.succ_begin.push_back(static_cast<int32_t>(g.succ.size()));
  }
  return g;
}

Duration Ps(int64_t v) { return Duration::Picoseconds(v); }

TEST_CASE("a task waits for its release time, and a busy GPU hides it", "[engine]") {
  // Stream 0: task 0 (10 ps), then task 1 released at 25 ps (the host issues it late) and task 2
  // released at 30 ps, both 10 ps. Task 1 waits idle from 10 to 25; task 2's release has passed
  // when task 1 ends at 35, so it starts at once: host time hides behind GPU work.
  TaskGraph g = Graph(1, {0, 0, 0}, {{}, {}, {}});
  g.release = {Ps(0), Ps(25), Ps(30)};
  Recorder r{{Ps(10), Ps(10), Ps(10)}, {}};
  const ExecutionStats stats = Executor<Recorder>(g, r).Run();
  CHECK(r.log == std::vector<std::string>{"issue 0 @0", "issue 1 @0", "issue 2 @0", "start 0 @0",
                                          "finish 0 @10", "start 1 @25", "finish 1 @35",
                                          "start 2 @35", "finish 2 @45"});
  CHECK(stats.makespan == Ps(45));
}

TEST_CASE("a stream runs its tasks one at a time in order", "[engine]") {
  TaskGraph g = Graph(1, {0, 0, 0}, {{}, {}, {}});
  Recorder r{{Ps(3), Ps(4), Ps(5)}, {}};
  Executor<Recorder> ex(g, r);
  const ExecutionStats st = ex.Run();
  CHECK(st.makespan == Ps(3 + 4 + 5));
  CHECK(r.log == std::vector<std::string>{"issue 0 @0", "issue 1 @0", "issue 2 @0", "start 0 @0",
                                          "finish 0 @3", "start 1 @3", "finish 1 @7", "start 2 @7",
                                          "finish 2 @12"});
}

TEST_CASE("cross-stream dependencies and overlap", "[engine]") {
  // Stream 0: task 0 (10 ps) then task 2 (5 ps) which waits for task 1 on stream 1 (20 ps).
  TaskGraph g = Graph(2, {0, 1, 0}, {{}, {}, {1}});
  Recorder r{{Ps(10), Ps(20), Ps(5)}, {}};
  Executor<Recorder> ex(g, r);
  CHECK(ex.Run().makespan == Ps(20 + 5));
  // Task 2 is issued when task 1 finishes, at 20 ps, and starts then.
  CHECK(std::find(r.log.begin(), r.log.end(), "issue 2 @20") != r.log.end());
  CHECK(std::find(r.log.begin(), r.log.end(), "start 2 @20") != r.log.end());
}

TEST_CASE("phase ladder: every finish at t precedes the issues at t", "[engine]") {
  // Tasks 0 and 1 end at 10 ps on two streams; task 2 depends on task 0 only. Task 1's finish
  // (a free) must be seen before task 2's issue (an allocation), though task 0 ended first.
  TaskGraph g = Graph(3, {0, 1, 2}, {{}, {}, {0}});
  Recorder r{{Ps(10), Ps(10), Ps(1)}, {}};
  Executor<Recorder> ex(g, r);
  ex.Run();
  const auto at = [&](const std::string& line) {
    return std::find(r.log.begin(), r.log.end(), line) - r.log.begin();
  };
  CHECK(at("finish 1 @10") < at("issue 2 @10"));
}

TEST_CASE("a join group starts together when all members can", "[engine]") {
  // Two ranks: rank 0 reaches its collective (task 1) at 5 ps, rank 1 (task 3) at 9 ps.
  TaskGraph g = Graph(4, {0, 1, 2, 3}, {{}, {0}, {}, {2}});
  g.join = {std::nullopt, 0, std::nullopt, 0};
  g.join_begin = {0, 2};
  g.join_members = {1, 3};
  Recorder r{{Ps(5), Ps(7), Ps(9), Ps(7)}, {}};
  Executor<Recorder> ex(g, r);
  CHECK(ex.Run().makespan == Ps(9 + 7));
  CHECK(std::find(r.log.begin(), r.log.end(), "start 1 @9") != r.log.end());
  CHECK(std::find(r.log.begin(), r.log.end(), "start 3 @9") != r.log.end());
}

// Two streams; task 1 starting stretches task 0 (which is running) through Reschedule, and
// task 0 is pulled earlier again when task 1 ends: the executor finishes each once, at its
// latest time, skipping the left-behind events.
struct Sharer {
  std::vector<std::string> log;
  void OnIssue(int32_t, Duration) {}
  Duration OnStart(int32_t t, Duration now, Rescheduler& r) {
    log.push_back(Recorder::Line("start", t, now));
    if (t == 1) r.Reschedule(0, Ps(50));  // task 0: 10 -> 50
    return t == 0 ? Ps(10) : Ps(5);
  }
  void OnFinish(int32_t t, Duration now, Rescheduler& r) {
    log.push_back(Recorder::Line("finish", t, now));
    if (t == 1) r.Reschedule(0, Ps(20));  // task 0: 50 -> 20
  }
};

TEST_CASE("a running task can be rescheduled later and earlier", "[engine]") {
  TaskGraph g = Graph(2, {0, 1}, {{}, {}});
  Sharer sharer;
  Executor<Sharer> ex(g, sharer);
  const ExecutionStats st = ex.Run();
  CHECK(st.makespan == Ps(20));
  CHECK(sharer.log ==
        std::vector<std::string>{"start 0 @0", "start 1 @0", "finish 1 @5", "finish 0 @20"});
}

// Two graphs that share tasks 0 and 1 (stream 0, 10 ps each, task 1 after task 0) and part
// after them. `mine`: task 2 on stream 0 after task 1. `other`: task 2 on stream 1 waits for
// task 0 and task 3 on stream 0 has no predecessor (issued at time zero, behind tasks 0 and 1).
TaskGraph Mine() { return Graph(2, {0, 0, 0}, {{}, {0}, {1}}); }
TaskGraph Other() { return Graph(2, {0, 0, 1, 0}, {{}, {0}, {0}, {}}); }

// `graph` run with `durations`, paused at the boundary before the event at 20 ps: its state
// over tasks 0 and 1 (task 0 ended at 10 ps; task 1 runs).
ExecutorSnapshot StateBefore20(const TaskGraph& graph, std::vector<Duration> durations) {
  Recorder r{std::move(durations), {}};
  Executor<Recorder> running(graph, r);
  running.Begin();
  REQUIRE_FALSE(running.Advance([](Duration next) { return next == Ps(20); }));
  const std::optional<ExecutorSnapshot> snap = running.TakeSnapshot(2);
  REQUIRE(snap.has_value());
  return *snap;
}

TEST_CASE("a graph adopts another's state before they part and runs as it would alone",
          "[engine]") {
  const TaskGraph mine = Mine(), other = Other();
  Recorder alone{{Ps(10), Ps(10), Ps(3)}, {}};
  const ExecutionStats whole = Executor<Recorder>(mine, alone).Run();
  // Other's task 2 becomes ready when task 0 ends at 10 ps: pause at the boundary before.
  Recorder r{{Ps(10), Ps(10), Ps(7), Ps(4)}, {}};
  Executor<Recorder> running(other, r);
  running.Begin();
  REQUIRE_FALSE(running.Advance([](Duration next) { return next == Ps(10); }));
  Recorder forked{{Ps(10), Ps(10), Ps(3)}, {}};
  Executor<Recorder> fork(mine, forked);
  const std::optional<ExecutorSnapshot> snap = running.TakeSnapshot(2);
  REQUIRE(snap.has_value());
  REQUIRE(fork.Adopt(*snap));
  REQUIRE(fork.Advance([](Duration) { return false; }));
  // The fork logs from the boundary on: the tail of the replay alone, and its totals.
  REQUIRE(forked.log.size() <= alone.log.size());
  CHECK(std::equal(forked.log.begin(), forked.log.end(),
                   alone.log.end() - static_cast<std::ptrdiff_t>(forked.log.size())));
  CHECK(forked.log.front() == "finish 0 @10");
  CHECK(fork.stats().makespan == whole.makespan);
  CHECK(fork.stats().events == whole.events);
  // The running graph goes on to its own end.
  REQUIRE(running.Advance([](Duration) { return false; }));
  CHECK(running.stats().makespan == Ps(24));
}

TEST_CASE("a state in which a task past the shared prefix was touched is not adopted", "[engine]") {
  const TaskGraph mine = Mine(), other = Other();
  Recorder r{{Ps(10), Ps(10), Ps(7), Ps(4)}, {}};
  {
    // Past 10 ps the running graph's own task 2 has been issued (and started): too late for a
    // copy at 2.
    Executor<Recorder> running(other, r);
    running.Begin();
    REQUIRE_FALSE(running.Advance([](Duration next) { return next > Ps(10); }));
    CHECK_FALSE(running.TakeSnapshot(2).has_value());
  }
  {
    // Mine as the running graph, paused before task 1 ends at 20 ps: mine's own task 2 is
    // untouched, so the copy is taken, but other's task 2 became ready when task 0 ended at
    // 10 ps, and other refuses it.
    const ExecutorSnapshot snap = StateBefore20(mine, {Ps(10), Ps(10), Ps(3)});
    Executor<Recorder> fork(other, r);
    CHECK_FALSE(fork.Adopt(snap));
  }
}

// Mine's tasks 1 and 2 as a graph of their own (task t is mine's 1 + t): task 1's wait for
// task 0 is left out, as a predecessor before the base (task 0, on stream 0).
TaskGraph MineFrom1() {
  TaskGraph tail = Graph(2, {0, 0}, {{}, {0}});
  tail.preds_before = {1, 0};
  return tail;
}
const std::vector<int32_t> kDoneBefore1 = {1, 0};

// A graph that shares tasks 0 and 1 with mine and runs task 2 on the other stream, paused
// before task 1 ends at 20 ps (task 0 has finished, task 1 runs): its state over tasks 0 and 1.
ExecutorSnapshot SharedAt10() {
  return StateBefore20(Graph(2, {0, 0, 1}, {{}, {0}, {1}}), {Ps(10), Ps(10), Ps(5)});
}

TEST_CASE("a graph over the shared tasks' tail adopts a state from its base", "[engine]") {
  Recorder alone{{Ps(10), Ps(10), Ps(3)}, {}};
  const ExecutionStats whole = Executor<Recorder>(Mine(), alone).Run();
  const ExecutorSnapshot snap = SharedAt10();
  const TaskGraph tail = MineFrom1();
  Recorder forked{{Ps(10), Ps(3)}, {}};
  Executor<Recorder> fork(tail, forked);
  REQUIRE(fork.Adopt(snap, /*base=*/1, &kDoneBefore1));
  REQUIRE(fork.Advance([](Duration) { return false; }));
  CHECK(forked.log ==
        std::vector<std::string>{"finish 0 @20", "issue 1 @20", "start 1 @20", "finish 1 @23"});
  CHECK(fork.stats().makespan == whole.makespan);
  CHECK(fork.stats().events == whole.events);
  // A base the state has not reached (task 1 still runs) is refused.
  const TaskGraph one = Graph(2, {0}, {{}});
  Executor<Recorder> early(one, forked);
  CHECK_FALSE(early.Adopt(snap, /*base=*/2, &kDoneBefore1));
  // Other's tail from task 1: its task 2 waits only for task 0, which has ended, so it has been
  // touched, and the state is refused as it is by the whole graph.
  TaskGraph other_tail = Graph(2, {0, 1, 0}, {{}, {}, {}});
  other_tail.preds_before = {1, 1, 0};
  const TaskGraph mine_graph = Mine();
  Recorder m{{Ps(10), Ps(10), Ps(3)}, {}};
  Executor<Recorder> mine(mine_graph, m);
  mine.Begin();
  REQUIRE_FALSE(mine.Advance([](Duration next) { return next == Ps(20); }));
  const std::optional<ExecutorSnapshot> at = mine.TakeSnapshot(2);
  REQUIRE(at.has_value());
  Recorder o{{Ps(10), Ps(7), Ps(4)}, {}};
  Executor<Recorder> fork_other(other_tail, o);
  CHECK_FALSE(fork_other.Adopt(*at, /*base=*/1, &kDoneBefore1));
}

TEST_CASE("a tail graph's snapshot numbered as the whole graph's is adopted by the whole",
          "[engine]") {
  // Mine's tail gone on from the shared state at 10 ps and snapshot again before its next
  // event: numbered from task 0, it is mine's own state, and a graph of all of mine's tasks
  // adopts it and ends as mine does alone.
  const TaskGraph mine = Mine(), tail = MineFrom1();
  Recorder t{{Ps(10), Ps(3)}, {}};
  Executor<Recorder> fork(tail, t);
  REQUIRE(fork.Adopt(SharedAt10(), 1, &kDoneBefore1));
  REQUIRE_FALSE(fork.Advance([](Duration) { return true; }));
  std::optional<ExecutorSnapshot> snap = fork.TakeSnapshot(1);
  REQUIRE(snap.has_value());
  const ExecutorSnapshot whole = NumberedFrom(*snap, 1, kDoneBefore1, {Ps(10)});
  CHECK(whole.prefix == 2);
  CHECK(whole.tasks == 3);
  CHECK(whole.finished == std::vector<uint8_t>{1, 0});
  CHECK(whole.finish_at == std::vector<Duration>{Ps(10), Ps(20)});
  CHECK(whole.done == std::vector<int32_t>{1, 0});
  Recorder again{{Ps(10), Ps(10), Ps(3)}, {}};
  Executor<Recorder> resumed(mine, again);
  REQUIRE(resumed.Adopt(whole));
  REQUIRE(resumed.Advance([](Duration) { return false; }));
  CHECK(again.log ==
        std::vector<std::string>{"finish 1 @20", "issue 2 @20", "start 2 @20", "finish 2 @23"});
  CHECK(resumed.stats().makespan == Ps(23));
}

TEST_CASE("a queue renumbered keeps its order and drops what it numbers below zero", "[engine]") {
  EventQueue q;
  q.Schedule(Ps(5), 1);
  q.Schedule(Ps(3), 2);
  q.Schedule(Ps(5), 3);
  q.Schedule(Ps(1), 4);
  q.Renumber([](int64_t p) { return p == 2 ? -1 : p * 10; });
  std::vector<int64_t> order;
  while (!q.empty()) order.push_back(q.Pop().payload);
  CHECK(order == std::vector<int64_t>{40, 10, 30});
}

}  // namespace
}  // namespace sim::engine
