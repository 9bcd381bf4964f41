#include "sim/replay/state_period.h"

#include <vector>

namespace sim::replay {

namespace {

// The queued events that will still fire: a stream's wake-up (numbered after the tasks), or a
// prefix task's live finish (a rescheduled task leaves stale ones behind, which Advance skips).
std::vector<engine::Event> Live(const engine::ExecutorSnapshot& e) {
  std::vector<engine::Event> live;
  for (const engine::Event& ev : e.queue.InOrder()) {
    if (ev.payload >= e.tasks) {
      live.push_back(ev);
      continue;
    }
    const auto t = static_cast<int32_t>(ev.payload);
    if (t >= e.prefix) return {};  // not a state a fork was taken at: refused below
    if (!e.finished[t] && e.finish_at[t] == ev.time) live.push_back(ev);
  }
  return live;
}

bool Shifted(Duration a, Duration b, Duration dt) { return a + dt == b; }

}  // namespace

std::optional<Duration> StateRepeats(const OpProgram& program, const ReplaySnapshot& a,
                                     const ReplaySnapshot& b, int32_t ops, bool* allocators) {
  if (allocators) *allocators = false;
  const engine::ExecutorSnapshot &ea = a.executor, &eb = b.executor;
  const ListenerState &la = a.listener, &lb = b.listener;
  // The two may number their tasks in programs of different lengths (a fold's slide: `a` of
  // the shorter program's replay, `b` of the longer one's); the stream wake-ups queued after the
  // tasks are compared by stream.
  if (ops <= 0 || eb.prefix != ea.prefix + ops || ea.prefix <= 0 ||
      static_cast<int32_t>(program.ops.size()) != eb.tasks || la.prefix != ea.prefix ||
      lb.prefix != eb.prefix) {
    return std::nullopt;
  }
  // The events to come, in the order they fire: the same, one period on.
  const std::vector<engine::Event> qa = Live(ea), qb = Live(eb);
  if (qa.empty() || qa.size() != qb.size()) return std::nullopt;
  const Duration dt = qb.front().time - qa.front().time;
  if (dt <= Duration::Zero()) return std::nullopt;
  for (size_t i = 0; i < qa.size(); ++i) {
    const bool wake = qa[i].payload >= ea.tasks;
    const int64_t expected = wake ? qa[i].payload - ea.tasks + eb.tasks : qa[i].payload + ops;
    if (!Shifted(qa[i].time, qb[i].time, dt) || qb[i].payload != expected) return std::nullopt;
  }
  // The clocks: the last finish applied (the boundary's time).
  const Duration ta = ea.stats.makespan, tb = eb.stats.makespan;
  if (!Shifted(ta, tb, dt)) return std::nullopt;
  // Every task: b's first period has finished, and each later task is where a's was a period
  // before, running ones due a period later. A finished task's end is read again only by
  // the wait attribution of an op starting at that same moment (ReplayListener::AttributeWait):
  // those ending at the boundary must match.
  for (int32_t t = 0; t < ops; ++t) {
    if (!eb.finished[t] || lb.finish[t] == tb) return std::nullopt;
  }
  for (int32_t t = 0; t < ea.prefix; ++t) {
    const int32_t u = t + ops;
    if (ea.remaining[t] != eb.remaining[u] || ea.issued[t] != eb.issued[u] ||
        ea.started[t] != eb.started[u] || ea.finished[t] != eb.finished[u]) {
      return std::nullopt;
    }
    if (ea.finished[t]) {
      if ((la.finish[t] == ta) != (lb.finish[u] == tb)) return std::nullopt;
    } else if (ea.started[t]) {
      if (!Shifted(ea.finish_at[t], eb.finish_at[u], dt) ||
          !Shifted(la.start[t], lb.start[u], dt)) {
        return std::nullopt;
      }
    }
    // What is still to run is priced alike.
    if (!ea.finished[t] && la.hot[t].base != lb.hot[u].base) return std::nullopt;
  }
  // Streams: a period's tasks more done on each, the same busy, wake-ups a period later. By
  // the checks above, b has finished every task a had, `ops` later, and every one before the
  // first a had not (`from`) `ops` later too: a period more, the ops from `from` on — not the
  // first `ops`, which in a pipeline are its warm-up, on other streams.
  int32_t from = 0;
  while (from < ea.prefix && ea.finished[from]) ++from;
  std::vector<int32_t> period(ea.done.size(), 0);
  for (int32_t t = from; t < from + ops; ++t) {
    const Op& op = program.ops[t];
    const auto s = static_cast<size_t>(StreamIndex(op.stage, op.stream));
    if (s >= period.size()) return std::nullopt;
    ++period[s];
  }
  if (eb.done.size() != ea.done.size() || ea.busy != eb.busy ||
      ea.wake_at.size() != eb.wake_at.size()) {
    return std::nullopt;
  }
  for (size_t s = 0; s < ea.done.size(); ++s) {
    if (eb.done[s] - ea.done[s] != period[s]) return std::nullopt;
    const auto &wa = ea.wake_at[s], &wb = eb.wake_at[s];
    if (wa.has_value() != wb.has_value() || (wa && !Shifted(*wa, *wb, dt))) return std::nullopt;
  }
  // The listener: running work, free times, link sharing, host and device memory.
  if (la.comm_running != lb.comm_running || la.running.size() != lb.running.size() ||
      la.compute_free.size() != lb.compute_free.size() ||
      la.last_end.size() != lb.last_end.size() || !la.pcie.empty() || !lb.pcie.empty() ||
      la.host != lb.host || la.ledgers.size() != lb.ledgers.size() ||
      !la.sharing.SameShifted(lb.sharing, ops, dt)) {
    return std::nullopt;
  }
  for (size_t g = 0; g < la.running.size(); ++g) {
    const RunningCompute &x = la.running[g], &y = lb.running[g];
    if ((x.task < 0) != (y.task < 0)) return std::nullopt;
    if (x.task >= 0 && (y.task != x.task + ops || x.left != y.left ||
                        !Shifted(x.since, y.since, dt) || x.beside_comm != y.beside_comm)) {
      return std::nullopt;
    }
  }
  for (size_t s = 0; s < la.compute_free.size(); ++s) {
    if (!Shifted(la.compute_free[s], lb.compute_free[s], dt) ||
        !Shifted(la.last_end[s], lb.last_end[s], dt)) {
      return std::nullopt;
    }
  }
  for (size_t g = 0; g < la.ledgers.size(); ++g) {
    if (la.ledgers[g].SameFuture(lb.ledgers[g])) continue;
    if (!allocators || !la.ledgers[g].SameTensors(lb.ledgers[g])) return std::nullopt;
    *allocators = true;
  }
  return dt;
}

}  // namespace sim::replay
