#pragma once
// The replay's listener (sim/replay/replay.cc): what the executor tells it as tasks start and
// finish, turned into collective prices, memory actions, link sharing and the step's times.
// Included by replay.cc only; in a header of its own so that it stays inlined into the
// executor's loop there.

#include <algorithm>
#include <memory>

#include "sim/base/check.h"
#include "sim/cost/collective_cost.h"
#include "sim/cost/compute_cost.h"
#include "sim/cost/graph_collective.h"
#include "sim/cost/link_sharing.h"
#include "sim/engine/executor.h"
#include "sim/replay/listener_state.h"
#include "sim/replay/prefix_watch.h"
#include "sim/replay/replay.h"
#include "sim/replay/replay_steps.h"

// An unnamed namespace, as the listener had inside replay.cc: internal linkage lets the compiler
// inline its handlers into the executor as it did there (an external class cost the sweep 1 % more
// instructions).
namespace sim::replay {
namespace {

using cost::LinkClass;

// Link sharing moves running collectives' finishes through the executor.
auto Moves(engine::Rescheduler& r) {
  return [&r](int32_t task, Duration finish) { r.Reschedule(task, finish); };
}

class ReplayListener {
 public:
  // `known`: the state of a replay of a program whose first `known->prefix` ops are these
  // program's (a fork, or a fold's next short replay: CommonPrefix), whose ops were priced
  // there and are taken as they are; the rest are priced here. `base` (with `known`, one
  // simulated replica): the replay goes on from `known` over the ops from `base` on only, every
  // op before it having finished there; its tasks are numbered from that op (task t is op
  // base + t), and only those ops are set up. base() says what was taken: 0 when `known`'s ops
  // do not index this program's arrays as its own (SameRanges).
  ReplayListener(const cost::ComputeCostModel& compute, const cost::CollectiveCostModel& comm,
                 const ReplayOptions& options, ReplayResult& result,
                 const ListenerState* known = nullptr, int32_t base = 0)
      : options_(options),
        comm_(comm),
        r_(result),
        p_(result.program),
        slowdown_(StageSlowdowns(compute, result.program.stages)),
        sharing_(result.simulated_ranks) {
    const size_t n = p_.ops.size();
    CollectiveTotals totals;
    if (known && SameRanges(*known)) {
      SIM_CHECK(
          base >= 0 && (base == 0 || (base <= known->prefix && r_.simulated_ranks == p_.stages)),
          "a replay of a program's tail goes on from a state of its prefix, one replica");
      base_ = base;
      early_ = known;
      hot_.reserve(n - base_);
      hot_.assign(known->hot.begin() + base_, known->hot.end());
      totals = known->totals;
      saved_ = {known->prefix, known->totals};
    } else {
      hot_.reserve(n);
    }
    for (size_t o = base_ + hot_.size(); o < n; ++o) {
      const Op& op = p_.ops[o];
      Duration d;
      if (op.kind == OpKind::kCollective) {
        const CollectiveSpec& c = p_.CollectiveOf(op);
        const cost::PricedCollective& priced =
            CommOf(op.stage).Price(c.kind, c.tensor, c.group, c.buckets);
        d = priced.time;
        totals.Add(c, priced);
      } else {
        d = compute.Time(op);
      }
      hot_.push_back(HotOp{d, op.mem_begin, op.mem_start, op.mem_finish, op.mem_end, op.deps_begin,
                           op.deps_end, op.stage, op.kind, op.pass, op.stream,
                           op.kind == OpKind::kCollective && p_.CollectiveOf(op).group.nodes > 1
                               ? LinkClass::kFabric
                               : LinkClass::kNvlink});
    }
    r_.collectives = std::move(totals.stats);
    r_.comm_bytes_sent = totals.sent;
    const int32_t gpus = r_.simulated_ranks;
    comm_running_.assign(gpus, 0);
    running_.assign(gpus, RunningCompute{});
    compute_free_.assign(p_.stages, Duration::Zero());
    last_end_.assign(p_.stages, Duration::Zero());
    finish_.assign(static_cast<size_t>(Ops()) * (gpus / p_.stages), Duration::Zero());
    start_.assign(finish_.size(), Duration::Zero());
    r_.stages.assign(p_.stages, StageTimes{});
    r_.host_activation_peak.assign(gpus, Bytes());
    host_.assign(gpus, Bytes());
  }

  // The collective model of a stage's collectives (ReplayOptions::stage_comm).
  const cost::CollectiveCostModel& CommOf(int32_t stage) const {
    const auto& per_stage = options_.stage_comm;
    return stage >= 0 && static_cast<size_t>(stage) < per_stage.size() ? *per_stage[stage] : comm_;
  }

  void OnIssue(int32_t task, Duration now) { ApplyMemory(task, MemWhen::kIssue, now); }

  // The executor starts `task` next on its stream (Executor::Start).
  void Prefetch(int32_t task) const {
    __builtin_prefetch(&hot_[Split(task).second]);
    __builtin_prefetch(&start_[task]);
  }

  Duration OnStart(int32_t task, Duration now, engine::Rescheduler& rescheduler) {
    for (PrefixWatch* w : watches_) w->Started(base_ + task);
    const auto [replica, o] = Split(task);
    const HotOp& op = hot_[o];
    const int32_t gpu = replica * p_.stages + op.stage;
    ApplyMemory(task, MemWhen::kStart, now);
    Duration d = op.base;
    const bool compute_stream = op.stream == StreamKind::kCompute;
    const bool collective = op.kind == OpKind::kCollective;
    if (SharesSms(op.stream)) {
      if (comm_running_[gpu]++ == 0) Restretch(gpu, now, /*beside_comm=*/true, rescheduler);
    } else if (compute_stream && !collective) {
      // Field by field: an aggregate built aside and copied in stalled on store forwarding.
      RunningCompute& c = running_[gpu];
      c.task = task;
      c.left = d;
      c.since = now;
      c.beside_comm = comm_running_[gpu] > 0;
      d = c.beside_comm ? Stretch(d, op.stage) : d;
    }
    if (collective && d > Duration::Zero()) {
      d = sharing_.Start(gpu, op.link_class, task, d, now, Moves(rescheduler));
    }
    if (replica == 0) {
      if (compute_stream) AttributeWait(op, now);
      // Collectives and compute-stream kernels are accounted at their end, when their time is
      // known (link sharing and overlap move it).
      if (!collective && !compute_stream) Account(op, d);
    }
    start_[task] = now;
    return d;
  }

  void OnFinish(int32_t task, Duration now, engine::Rescheduler& rescheduler) {
    for (PrefixWatch* w : watches_) w->Finished(base_ + task);
    const auto [replica, o] = Split(task);
    const HotOp& op = hot_[o];
    const int32_t gpu = replica * p_.stages + op.stage;
    if (SharesSms(op.stream) && --comm_running_[gpu] == 0) {
      Restretch(gpu, now, /*beside_comm=*/false, rescheduler);
    }
    if (running_[gpu].task == task) running_[gpu].task = -1;
    if (op.kind == OpKind::kCollective && op.base > Duration::Zero()) {
      sharing_.Finish(gpu, op.link_class, task, now, Moves(rescheduler));
    }
    finish_[task] = now;
    if (replica == 0) {
      const bool collective = op.kind == OpKind::kCollective;
      if (collective || op.stream == StreamKind::kCompute) Account(op, now - start_[task]);
      if (!collective && op.stream == StreamKind::kCompute) {
        r_.stages[op.stage].overlap_stretch += (now - start_[task]) - op.base;
      }
      if (op.stream == StreamKind::kCompute) compute_free_[op.stage] = now;
      last_end_[op.stage] = std::max(last_end_[op.stage], now);
      if (op.stream == StreamKind::kPcie) pcie_.push_back({op.stage, start_[task], now});
    }
    if (options_.record_ops) r_.timings.push_back({base_ + o, gpu, start_[task], now});
    ApplyMemory(task, MemWhen::kEnd, now);
    // Activation offload's host copies: held from the end of the copy out to the end of the
    // copy back.
    if (op.stream == StreamKind::kPcie && op.pass != OpPass::kStep) {
      const Op& copy = p_.ops[base_ + o];
      if (copy.name == "activations_to_host") {
        host_[gpu] += copy.bytes_moved;
        r_.host_activation_peak[gpu] = std::max(r_.host_activation_peak[gpu], host_[gpu]);
      } else if (copy.name == "activations_to_gpu") {
        host_[gpu] -= copy.bytes_moved;
      }
    }
  }

  // Forked replays (prefix_watch.h): the watches told of every start and finish.
  void Watch(PrefixWatch* w) { watches_.push_back(w); }
  // Every ledger change from now on is also appended to `calls` (a fold's record of the
  // allocator's work: ReplayFamily).
  void Record(std::vector<LedgerCall>* calls) { calls_ = calls; }

  // Whether `known`'s prefix ops index this program's dependency and memory arrays as they
  // index their own: CommonPrefix found the same ops with as many dependencies and actions
  // each, and an op's ranges follow the one before it (ProgramBuilder::Add), so equal ends of
  // the prefix mean equal ranges throughout.
  bool SameRanges(const ListenerState& known) const {
    const size_t k = known.hot.size();
    if (k == 0 || k > p_.ops.size() || static_cast<int32_t>(k) != known.prefix) return false;
    const HotOp &a = known.hot.front(), &b = known.hot.back();
    const Op &x = p_.ops.front(), &y = p_.ops[k - 1];
    return a.mem_begin == x.mem_begin && a.deps_begin == x.deps_begin && b.mem_end == y.mem_end &&
           b.deps_end == y.deps_end;
  }

  const std::vector<HotOp>& hot() const { return hot_; }  // from op base() on
  int32_t base() const { return base_; }

  // What this replay has done by now, over its first `prefix` ops (their finish and start
  // times, and what their collectives add to the result; the rest of the state is whole).
  // Numbered from op 0 whatever the base: the ops before it as the state this replay went on
  // from has them.
  ListenerState Save(int32_t prefix) {
    // The ledgers are copied without their recorded changes (ListenerState::changes).
    std::vector<std::vector<memory::MemoryChange>> records;
    std::vector<size_t> counts;
    for (memory::MemoryLedger& l : r_.ledgers) {
      counts.push_back(l.changes().size());
      records.push_back(l.TakeChanges());
    }
    ListenerState st = CopyState(prefix);
    st.changes = std::move(counts);
    for (size_t g = 0; g < records.size(); ++g) r_.ledgers[g].PutChanges(std::move(records[g]));
    return st;
  }
  // Save's copy of the state, the ledgers as they are (Save has taken their records out).
  ListenerState CopyState(int32_t prefix) const {
    SIM_CHECK(prefix >= base_, "a state is saved past the base");
    // On from the last Save (forks come in order of their prefixes), or the known prefix.
    if (prefix < saved_.upto) saved_ = {};
    auto add = [&](int32_t o) {
      const CollectiveSpec& c = p_.CollectiveOf(p_.ops[o]);
      saved_.totals.Add(c, CommOf(p_.ops[o].stage).Price(c.kind, c.tensor, c.group, c.buckets));
    };
    for (int32_t o = saved_.upto; o < std::min(prefix, base_); ++o) {
      if (early_->hot[o].kind == OpKind::kCollective) add(o);
    }
    for (int32_t o = std::max(saved_.upto, base_); o < prefix; ++o) {
      if (hot_[o - base_].kind == OpKind::kCollective) add(o);
    }
    saved_.upto = prefix;
    const int32_t own = prefix - base_;  // this replay's ops in the prefix
    // Before the base, as the state gone on from has them; from it, this replay's.
    auto joined = [&](const auto& before, const auto& mine) {
      std::remove_cvref_t<decltype(mine)> v;
      v.reserve(prefix);
      v.assign(before.begin(), before.begin() + base_);
      v.insert(v.end(), mine.begin(), mine.begin() + own);
      return v;
    };
    ListenerState st{
        prefix,
        base_ > 0 ? joined(early_->hot, hot_) : decltype(hot_)(hot_.begin(), hot_.begin() + own),
        saved_.totals,
        comm_running_,
        running_,
        compute_free_,
        last_end_,
        base_ > 0 ? joined(early_->finish, finish_)
                  : decltype(finish_)(finish_.begin(), finish_.begin() + own),
        base_ > 0 ? joined(early_->start, start_)
                  : decltype(start_)(start_.begin(), start_.begin() + own),
        pcie_,
        host_,
        sharing_,
        r_.stages,
        r_.host_activation_peak,
        r_.ledgers,
        {},
        calls_ ? calls_->size() : 0,
        r_.timings.size()};
    if (base_ > 0) {
      for (RunningCompute& c : st.running) {
        if (c.task >= 0) c.task += base_;
      }
      st.sharing.ShiftTasks(-base_);
    }
    return st;
  }
  // Takes over a saved state, for a program that shares its first `st.prefix` ops with the one
  // it was saved from (the executor's state goes with it: Executor::Adopt).
  void Restore(const ListenerState& st) {
    comm_running_ = st.comm_running;
    running_ = st.running;
    compute_free_ = st.compute_free;
    last_end_ = st.last_end;
    std::copy(st.finish.begin() + base_, st.finish.end(), finish_.begin());
    std::copy(st.start.begin() + base_, st.start.end(), start_.begin());
    pcie_ = st.pcie;
    host_ = st.host;
    sharing_ = st.sharing;
    if (base_ > 0) {
      // Tasks numbered from the base: what runs was started after every op before it ended.
      for (RunningCompute& c : running_) {
        SIM_CHECK(c.task < 0 || c.task >= base_, "a kernel before the base still runs");
        if (c.task >= 0) c.task -= base_;
      }
      sharing_.ShiftTasks(base_);
    }
    r_.stages = st.stages;
    r_.host_activation_peak = st.host_activation_peak;
    r_.ledgers = st.ledgers;
  }

  // After the run: each stage's bubble (waits for other stages, and the tail after its own
  // last op) and exposed communication (the rest of its non-compute time).
  void Close(Duration step) {
    // Offload copies still running after the stage's last compute op are exposed.
    for (const auto& [stage, start, end] : pcie_) {
      const Duration from = std::max(start, compute_free_[stage]);
      if (end > from) r_.stages[stage].exposed_pcie += end - from;
    }
    for (int32_t stage = 0; stage < p_.stages; ++stage) {
      CloseStage(r_.stages[stage], step, last_end_[stage]);
    }
  }

 private:
  // The ops replayed: the program's from the base on.
  int32_t Ops() const { return static_cast<int32_t>(p_.ops.size()) - base_; }
  // Task -> (DP replica, op from the base). Without explicit replicas (the usual case) every
  // task is replica 0's, and the division (several per task, in the event loop) is skipped.
  std::pair<int32_t, int32_t> Split(int32_t task) const {
    const int32_t n = Ops();
    if (task < n) return {0, task};
    return {task / n, task % n};
  }

  // Communication kernels take SMs and HBM bandwidth from the compute beside them (docs/model.md
  // "Time"): while a collective or send runs on its GPU, a compute-stream kernel progresses at 1 /
  // overlap_slowdown of its rate alone, and at its full rate the rest of its time.
  Duration Stretch(Duration alone, int32_t stage) const {
    return Duration::FromSeconds(alone.seconds() * slowdown_[stage]);
  }
  static std::vector<double> StageSlowdowns(const cost::ComputeCostModel& compute, int32_t stages) {
    std::vector<double> out;
    for (int32_t st = 0; st < stages; ++st) out.push_back(compute.OverlapSlowdownOf(st));
    return out;
  }

  // The GPU's communication started (beside_comm) or stopped: its running compute kernel keeps
  // the work it has done and finishes the rest at the new rate.
  void Restretch(int32_t gpu, Duration now, bool beside_comm, engine::Rescheduler& rescheduler) {
    RunningCompute& c = running_[gpu];
    if (c.task < 0 || c.beside_comm == beside_comm) return;
    const Duration elapsed = now - c.since;
    const int32_t stage = gpu % p_.stages;
    const Duration done =
        c.beside_comm ? Duration::FromSeconds(elapsed.seconds() / slowdown_[stage]) : elapsed;
    c.left = std::max(Duration::Zero(), c.left - done);
    c.since = now;
    c.beside_comm = beside_comm;
    rescheduler.Reschedule(c.task, now + (beside_comm ? Stretch(c.left, stage) : c.left));
  }

  // The compute stream of op's stage was idle since compute_free_: the wait is a bubble when
  // the last input to arrive was a pipeline send, exposed communication otherwise.
  void AttributeWait(const HotOp& op, Duration now) {
    const Duration gap = now - compute_free_[op.stage];
    if (gap <= Duration::Zero()) return;
    Duration latest = Duration::Zero();
    StreamKind from = StreamKind::kCompute;
    for (int32_t i = op.deps_begin; i < op.deps_end; ++i) {
      const int32_t dep = p_.deps[i];
      // An op before the base ended before the state this replay went on from.
      const bool early = dep < base_;
      const Duration end = early ? early_->finish[dep] : finish_[dep - base_];
      if (end >= latest) {
        latest = end;
        from = early ? early_->hot[dep].stream : hot_[dep - base_].stream;
      }
    }
    if (from == StreamKind::kP2p) r_.stages[op.stage].bubble += gap;
    if (from == StreamKind::kPcie) r_.stages[op.stage].exposed_pcie += gap;
  }

  void ApplyMemory(int32_t task, MemWhen when, Duration now) {
    const auto [replica, o] = Split(task);
    const HotOp& op = hot_[o];
    const int32_t begin = when == MemWhen::kIssue   ? op.mem_begin
                          : when == MemWhen::kStart ? op.mem_start
                                                    : op.mem_finish;
    const int32_t end = when == MemWhen::kIssue   ? op.mem_start
                        : when == MemWhen::kStart ? op.mem_finish
                                                  : op.mem_end;
    const int32_t gpu = replica * p_.stages + op.stage;
    memory::MemoryLedger& ledger = r_.ledgers[gpu];
    for (int32_t i = begin; i < end; ++i) {
      ledger.Apply(p_.mem[i].category, p_.mem[i].bytes, now, base_ + o,
                   static_cast<int32_t>(op.stream));
      if (calls_) {
        calls_->push_back(
            {gpu, static_cast<int32_t>(op.stream), p_.mem[i].category, p_.mem[i].bytes});
      }
    }
  }

  void Account(const HotOp& op, Duration d) {
    StageTimes& t = r_.stages[op.stage];
    if (op.kind == OpKind::kCollective) {
      t.comm += d;
      return;
    }
    // Offload I/O outside the step's end (copies, NVMe reads of parameter shards) is offload
    // time, not compute; the host's work at the step (its update, NVMe swaps) is optimizer time.
    if (op.stream == StreamKind::kPcie ||
        (op.stream == StreamKind::kHost && op.pass != OpPass::kStep)) {
      t.pcie += d;
      return;
    }
    switch (op.pass) {
      case OpPass::kForward:
      case OpPass::kBackward:
        t.compute += d;
        break;
      case OpPass::kRecompute:
        t.recompute += d;
        break;
      case OpPass::kStep:
        t.optimizer += d;
        break;
    }
  }

  const ReplayOptions& options_;
  const cost::CollectiveCostModel& comm_;
  ReplayResult& r_;
  const OpProgram& p_;
  int32_t base_ = 0;                      // the first op replayed (the constructor's `base`)
  const ListenerState* early_ = nullptr;  // with a base: the ops before it, as they ended
  std::vector<HotOp> hot_;                // per op from the base
  std::vector<double> slowdown_;          // per stage: its GPU's overlap_slowdown
  std::vector<int32_t> comm_running_;     // per simulated GPU: collectives and sends running
  std::vector<RunningCompute> running_;   // per simulated GPU
  std::vector<Duration> compute_free_;    // per stage (replica 0): when the compute stream idled
  std::vector<Duration> last_end_;        // per stage (replica 0): its latest op end
  std::vector<Duration> finish_;          // per task
  std::vector<Duration> start_;           // per task
  std::vector<Interval> pcie_;            // replica 0's offload copies
  std::vector<Bytes> host_;  // per simulated GPU: offloaded activations held on the host
  cost::LinkSharing sharing_;
  std::vector<PrefixWatch*> watches_;
  std::vector<LedgerCall>* calls_ = nullptr;  // Record
  // What the collectives of the first `upto` ops add to the result, as of the last Save.
  struct {
    int32_t upto = 0;
    CollectiveTotals totals;
  } mutable saved_;
};

}  // namespace
}  // namespace sim::replay
