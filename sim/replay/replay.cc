#include "sim/replay/replay.h"

#include <algorithm>
#include <memory>

#include "sim/base/check.h"
#include "sim/cost/collective_cost.h"
#include "sim/cost/compute_cost.h"
#include "sim/cost/graph_collective.h"
#include "sim/cost/link_sharing.h"
#include "sim/engine/executor.h"
#include "sim/replay/fold.h"
#include "sim/replay/listener_state.h"
#include "sim/replay/prefix_watch.h"
#include "sim/replay/replay_listener.h"
#include "sim/replay/replay_steps.h"
#include "sim/workload/layer_ops.h"
#include "sim/workload/lowering.h"
#include "sim/workload/policy/framework_traits.h"

namespace sim::replay {

using cost::LinkClass;

namespace {

// Each stage's host issues its ops one after another in program order (the order lowering
// emitted them, which is the order the training loop launches them), each taking
// compute.Dispatch(op): an op may not start before the host has issued it. The host never waits
// for the GPU here (PyTorch launches asynchronously), so this only shows when kernels are
// shorter than their launch. No release times at all when dispatch is free.
void SetReleaseTimes(const OpProgram& p, const cost::ComputeCostModel& compute, int32_t replicas,
                     engine::TaskGraph& g, int32_t first = 0) {
  if (!compute.Dispatches()) return;
  const int32_t n = static_cast<int32_t>(p.ops.size());
  std::vector<Duration> host(static_cast<size_t>(p.stages), Duration::Zero());
  std::vector<Duration> release(n);
  bool any = false;
  for (int32_t o = 0; o < n; ++o) {
    Duration& clock = host[p.ops[o].stage];
    clock += compute.Dispatch(p.ops[o]);
    release[o] = clock;
    any = any || clock > Duration::Zero();
  }
  if (!any) return;
  const int32_t tasks = n - first;
  g.release.resize(static_cast<size_t>(tasks) * replicas);
  for (int32_t r = 0; r < replicas; ++r) {
    std::copy(release.begin() + first, release.end(),
              g.release.begin() + static_cast<int64_t>(r) * tasks);
  }
}

// The stream of replica 0 that runs `op` (BuildGraph).
int32_t StreamOf(const HotOp& op) { return StreamIndex(op.stage, op.stream); }

// Task t of the executor is op (t % ops) of DP replica (t / ops); the op runs on simulated GPU
// replica·stages + op.stage, whose streams are gpu·kNumStreams + StreamKind. Read from the
// listener's packed ops (`hot`, one per op of `p` from op `first` on), not the program's, which
// are three times larger. With a `first` op (one replica), task t is op first + t, and the
// dependencies on earlier ops are left out (TaskGraph::preds_before).
engine::TaskGraph BuildGraph(const OpProgram& p, const std::vector<HotOp>& hot, int32_t replicas,
                             int32_t first = 0) {
  SIM_CHECK(first == 0 || replicas == 1, "a graph over a program's tail is one replica's");
  const int32_t n = static_cast<int32_t>(hot.size());
  engine::TaskGraph g;
  g.num_streams = replicas * p.stages * kNumStreams;
  const int64_t tasks = static_cast<int64_t>(n) * replicas;
  g.stream.resize(tasks);
  g.pred_count.resize(tasks);
  g.succ_begin.assign(tasks + 1, 0);
  if (first > 0) g.preds_before.assign(tasks, 0);
  // Successor counts per op, shared by every replica.
  std::vector<int32_t> succ_count(n, 0);
  for (int32_t o = 0; o < n; ++o) {
    const HotOp& op = hot[o];
    for (int32_t i = op.deps_begin; i < op.deps_end; ++i) {
      const int32_t d = p.deps[i] - first;
      if (d >= 0) {
        succ_count[d]++;
        g.pred_count[o]++;
      } else {
        g.preds_before[o] = 1;
      }
    }
  }
  for (int32_t r = 0; r < replicas; ++r) {
    for (int32_t o = 0; o < n; ++o) {
      const int64_t t = static_cast<int64_t>(r) * n + o;
      const HotOp& op = hot[o];
      g.stream[t] = r * p.stages * kNumStreams + StreamOf(op);
      g.pred_count[t] = g.pred_count[o];
      g.succ_begin[t + 1] = g.succ_begin[t] + succ_count[o];
    }
  }
  g.succ.resize(g.succ_begin.back());
  std::vector<int32_t> fill(g.succ_begin.begin(), g.succ_begin.end() - 1);
  for (int32_t r = 0; r < replicas; ++r) {
    const int32_t base = r * n;
    for (int32_t o = 0; o < n; ++o) {
      const HotOp& op = hot[o];
      for (int32_t i = op.deps_begin; i < op.deps_end; ++i) {
        const int32_t d = p.deps[i] - first;
        if (d >= 0) g.succ[fill[base + d]++] = base + o;
      }
    }
  }
  if (replicas > 1) {
    // Each data-parallel collective starts on all replicas together.
    g.join.assign(tasks, std::nullopt);
    g.join_begin.push_back(0);
    for (int32_t o = 0; o < n; ++o) {
      if (hot[o].stream != StreamKind::kComm) continue;
      const int32_t j = static_cast<int32_t>(g.join_begin.size()) - 1;
      for (int32_t r = 0; r < replicas; ++r) {
        g.join[static_cast<int64_t>(r) * n + o] = j;
        g.join_members.push_back(r * n + o);
      }
      g.join_begin.push_back(static_cast<int32_t>(g.join_members.size()));
    }
  }
  return g;
}

// FLOPs per GPU per step, averaged over the pipeline stages (every stage is a GPU). A stage's
// micro-batches run the same ops, so its FLOPs are one micro-batch's (summed op by op in program
// order) times `micro_batches` (kAsLowered: as many as the program holds): the same double
// whether the program holds every micro-batch or a folded few (sim/replay/fold.h). A stage whose
// micro-batches differ is summed micro-batch by micro-batch; returns whether none did.
bool CountFlops(ReplayResult& r, int64_t micro_batches) {
  struct Work {
    Flops model, hardware, recompute;
    bool operator==(const Work& o) const {
      return model.count() == o.model.count() && hardware.count() == o.hardware.count() &&
             recompute.count() == o.recompute.count();
    }
  };
  const int32_t stages = r.program.stages;
  std::vector<std::vector<Work>> by(stages);  // [stage][micro-batch]
  int32_t last = 0;                           // the highest micro-batch index of any op
  for (const Op& op : r.program.ops) {
    last = std::max(last, op.micro_batch);
    if (op.kind == OpKind::kCollective || op.pass == OpPass::kStep) continue;
    std::vector<Work>& w = by[op.stage];
    if (static_cast<int32_t>(w.size()) <= op.micro_batch) w.resize(op.micro_batch + 1);
    Work& m = w[op.micro_batch];
    switch (op.pass) {
      case OpPass::kForward:
        m.model += op.flops;
        m.hardware += op.flops;
        break;
      case OpPass::kBackward:
        // The flash backward's recompute of QK^T and the softmax is hardware work only.
        m.model +=
            op.op_class == OpClass::kAttention ? op.flops * (2.0 / kFlashBackwardFactor) : op.flops;
        m.hardware += op.flops;
        break;
      case OpPass::kRecompute:
        m.recompute += op.flops;
        m.hardware += op.flops;
        break;
      case OpPass::kStep:
        break;  // neither model nor hardware FLOPs by convention
    }
  }
  if (micro_batches == kAsLowered) micro_batches = last + 1;
  r.model_flops = r.hardware_flops = r.recompute_flops = Flops();
  bool uniform = true;
  for (const std::vector<Work>& w : by) {
    if (w.empty()) continue;
    Work stage;
    if (std::all_of(w.begin(), w.end(), [&](const Work& x) { return x == w.front(); })) {
      const double m = static_cast<double>(micro_batches);
      stage = {w.front().model * m, w.front().hardware * m, w.front().recompute * m};
    } else {
      uniform = false;
      for (const Work& x : w) {
        stage.model += x.model;
        stage.hardware += x.hardware;
        stage.recompute += x.recompute;
      }
    }
    r.model_flops += stage.model;
    r.hardware_flops += stage.hardware;
    r.recompute_flops += stage.recompute;
  }
  if (stages > 1) {
    auto average = [&](Flops f) { return f * (1.0 / static_cast<double>(stages)); };
    r.model_flops = average(r.model_flops);
    r.hardware_flops = average(r.hardware_flops);
    r.recompute_flops = average(r.recompute_flops);
  }
  return uniform;
}

// The report's time keys come from the stage that paces the pipeline: the most busy one.
void PickTimeStage(ReplayResult& r) {
  auto busy = [](const StageTimes& t) { return t.compute + t.recompute + t.optimizer; };
  for (int32_t i = 0; i < static_cast<int32_t>(r.stages.size()); ++i) {
    if (busy(r.stages[i]) > busy(r.stages[r.time_stage])) r.time_stage = i;
  }
  r.times = r.stages[r.time_stage];
}

}  // namespace

int64_t ReplayResult::GpuOf(int32_t rank) const {
  return program.stage_gpu[StageOf(rank)] + (rank / program.stages) * program.dp_stride;
}

namespace {

// One replay in progress: its result (which the listener fills, and whose program it reads),
// task graph, listener and executor, set up as ReplayRaw does. Heap-held: the listener and
// executor keep references into it.
struct ReplayRun {
  ReplayResult r;
  engine::TaskGraph graph;
  std::optional<ReplayListener> listener;
  std::optional<engine::Executor<ReplayListener>> executor;
};

// `known`, `base`: ReplayListener's.
std::unique_ptr<ReplayRun> Prepare(OpProgram program, const cost::ComputeCostModel& compute,
                                   const cost::CollectiveCostModel& comm, Bytes capacity,
                                   const ReplayOptions& options,
                                   const ListenerState* known = nullptr, int32_t base = 0) {
  auto run = std::make_unique<ReplayRun>();
  ReplayResult& r = run->r;
  r.program = std::move(program);
  const int32_t replicas = options.replicas;
  SIM_CHECK(replicas >= 1, "at least one data-parallel replica is simulated");
  const int32_t stages = r.program.stages;
  r.simulated_ranks = replicas * stages;
  for (int32_t gpu = 0; gpu < r.simulated_ranks; ++gpu) {
    const size_t stage = static_cast<size_t>(gpu % stages);
    r.ledgers.emplace_back(
        stage < options.stage_capacity.size() ? options.stage_capacity[stage] : capacity,
        options.record_memory, options.allocator);
    for (const MemAction& a : r.program.persistent[gpu % stages]) {
      r.ledgers.back().Apply(a.category, a.bytes, Duration::Zero(), memory::MemoryLedger::kNoOp);
    }
    r.ledgers.back().MarkPersistent();
  }
  run->listener.emplace(compute, comm, options, r, known, base);
  base = run->listener->base();
  run->graph = BuildGraph(r.program, run->listener->hot(), replicas, base);
  SetReleaseTimes(r.program, compute, replicas, run->graph, base);
  run->executor.emplace(run->graph, *run->listener);
  return run;
}

// After the executor ran to its end.
ReplayResult Complete(ReplayRun& run) {
  ReplayResult& r = run.r;
  r.step = run.executor->stats().makespan;
  r.events = run.executor->stats().events;
  r.ops = static_cast<int64_t>(r.program.ops.size());
  run.listener->Close(r.step);
  for (int32_t gpu = 0; gpu < r.simulated_ranks; ++gpu) {
    SIM_CHECK(r.ledgers[gpu].Transient() == Bytes(),
              "memory did not return to the persistent level at the end of the step");
    SIM_CHECK(r.ledgers[gpu].unmatched_frees() == 0,
              "a free matched no live tensor of its category and size");
    if (r.ledgers[gpu].peak() > r.ledgers[r.peak_rank].peak()) r.peak_rank = gpu;
  }
  return std::move(r);
}

constexpr auto kToTheEnd = [](Duration) { return false; };

}  // namespace

ReplayResult ReplayRaw(OpProgram program, const cost::ComputeCostModel& compute,
                       const cost::CollectiveCostModel& comm, Bytes capacity,
                       const ReplayOptions& options) {
  auto run = Prepare(std::move(program), compute, comm, capacity, options);
  run->executor->Begin();
  run->executor->Advance(kToTheEnd);
  return Complete(*run);
}

namespace {

// Whether an op of `program` from `prefix` on has no predecessor and allocates when issued: the
// executor issues such an op at time zero, and a state adopted at `prefix` has not (see
// PrefixWatch::Make, which refuses such a fork).
bool IssuesMemoryPast(const OpProgram& program, int32_t prefix) {
  for (size_t t = static_cast<size_t>(prefix); t < program.ops.size(); ++t) {
    const Op& op = program.ops[t];
    if (op.deps_begin == op.deps_end && op.mem_begin != op.mem_start) return true;
  }
  return false;
}

// Where the next program of a fold's window will part from `longer`, guessed from where
// `shorter` (a period less) parts from it: a period later. The lowering's own count
// (StepLowering::shared) is that exactly where the last backward is lowered as any other, and
// less where it is not (it stops before the last micro-batch's backward, which matches a
// steady one's but for its reductions) or with a pipeline (0). Only a guess: a program that
// does not share that prefix, or whose executor refuses the state, goes on from an earlier
// one (ReplayAfter).
int32_t NextPrefix(int32_t parts_at, size_t shorter, size_t longer) {
  if (parts_at <= 0 || longer <= shorter) return 0;
  return static_cast<int32_t>(std::min<size_t>(parts_at + (longer - shorter), longer));
}

// A run of `program` gone on from a state (`exec`, `listener`, which must outlive the run),
// set up over the ops from the first the state has not finished only (a fork's tail: a few
// dozen of thousands; the replay of a fold's first window forks twice, and each slide goes on
// from a state); none, with the program handed back, when the executor refuses the state.
// `base`, `done_before`: the op the run's tasks start from, and each stream's ops before it.
std::unique_ptr<ReplayRun> GoOnFrom(OpProgram& program, const engine::ExecutorSnapshot& exec,
                                    const ListenerState& listener,
                                    const cost::ComputeCostModel& compute,
                                    const cost::CollectiveCostModel& comm, Bytes capacity,
                                    const ReplayOptions& options, int32_t& base,
                                    std::vector<int32_t>& done_before) {
  base = 0;
  while (base < exec.prefix && exec.finished[base]) ++base;
  auto run = Prepare(std::move(program), compute, comm, capacity, options, &listener, base);
  base = run->listener->base();
  done_before.assign(static_cast<size_t>(run->graph.num_streams), 0);
  for (int32_t o = 0; o < base; ++o) ++done_before[StreamOf(listener.hot[o])];
  run->listener->Restore(listener);
  if (!run->executor->Adopt(exec, base, &done_before)) {
    program = std::move(run->r.program);  // an executor that refused is unusable
    return nullptr;
  }
  return run;
}

// A replay of `program` on from a state (GoOnFrom); none, with the program handed back, when
// the executor refuses the state.
std::optional<ReplayResult> ReplayFrom(OpProgram& program, const engine::ExecutorSnapshot& exec,
                                       const ListenerState& listener,
                                       const cost::ComputeCostModel& compute,
                                       const cost::CollectiveCostModel& comm, Bytes capacity,
                                       const ReplayOptions& options) {
  int32_t base = 0;
  std::vector<int32_t> done_before;
  auto run = GoOnFrom(program, exec, listener, compute, comm, capacity, options, base, done_before);
  if (!run) return std::nullopt;
  run->executor->Advance(kToTheEnd);
  return Complete(*run);
}

// A run over a program's ops from `base` on, as a watch numbers them (from op 0): the ops
// before the base have started and finished (their finish times are never asked).
struct ProgramView {
  const engine::Executor<ReplayListener>& e;
  int32_t base;
  bool started(int32_t t) const { return t < base || e.started(t - base); }
  bool finished(int32_t t) const { return t < base || e.finished(t - base); }
  Duration finish_at(int32_t t) const {
    return t < base ? Duration::Zero() : e.finish_at(t - base);
  }
};

// Whether a replay's state may be handed to another program: states hold one replica's. A
// replay that records (ReplayOptions::record_ops, record_memory) and runs from the start keeps
// every record, as ReplayFamily's longest does (a fold's expansion reads them:
// sim/replay/step_records.h); one gone on from a state keeps only what it recorded itself, so
// ReplayAfter, whose result is the whole answer, goes on from one when recording only given
// the records made before it.
bool Forkable(const ReplayOptions& options) { return options.replicas == 1; }
bool Resumable(const ReplayOptions& options) {
  return Forkable(options) && !options.record_ops && !options.record_memory;
}

}  // namespace

std::vector<ReplayResult> ReplayFamily(std::vector<OpProgram> programs,
                                       const cost::ComputeCostModel& compute,
                                       const cost::CollectiveCostModel& comm, Bytes capacity,
                                       const ReplayOptions& options, int* forks,
                                       std::shared_ptr<const ReplaySnapshot>* keep,
                                       const std::vector<int32_t>* shared, int32_t next_shared,
                                       bool* deferred, std::vector<LedgerCall>* calls) {
  if (deferred) *deferred = false;
  if (!keep) deferred = nullptr;  // nothing to fork from later
  const size_t n = programs.size();
  std::vector<ReplayResult> results(n);
  auto alone = [&](size_t i) {
    results[i] = ReplayRaw(std::move(programs[i]), compute, comm, capacity, options);
  };
  if (keep) keep->reset();
  if (n == 0) return results;
  if (!Forkable(options)) {
    for (size_t i = 0; i < n; ++i) alone(i);
    return results;
  }
  // The longest runs; the others fork from it in the order of their shared prefixes.
  const size_t longest =
      static_cast<size_t>(std::max_element(programs.begin(), programs.end(),
                                           [](const OpProgram& a, const OpProgram& b) {
                                             return a.ops.size() < b.ops.size();
                                           }) -
                          programs.begin());
  std::vector<std::optional<PrefixWatch>> watches(n);
  const PrefixIndex index(programs[longest]);
  for (size_t i = 0; i < n; ++i) {
    if (i == longest) continue;
    const int32_t prefix = CommonPrefix(programs[i], programs[longest], shared ? (*shared)[i] : 0);
    if (prefix > 0) watches[i] = PrefixWatch::Make(index, programs[longest], programs[i], prefix);
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i) {
    if (i != longest && watches[i]) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return watches[a]->prefix() < watches[b]->prefix(); });
  // The state where the next longer program (not lowered yet) will part from the longest, when
  // that is past every fork: a slide's replay goes on from there instead of from the last
  // fork's state, a micro-batch later. Both where and when are guessed, a period on from the
  // last fork (NextPrefix, PrefixWatch::MakeForNext); the next program's executor checks the
  // state when it adopts it (ReplayAfter), and the last fork's is kept behind it.
  std::optional<PrefixWatch> next;
  if (keep && !order.empty()) {
    const int32_t last_fork = watches[order.back()]->prefix();
    const size_t shorter = programs[order.back()].ops.size();
    const size_t longer = programs[longest].ops.size();
    next_shared = std::max(next_shared, NextPrefix(last_fork, shorter, longer));
    if (next_shared > last_fork) {
      next = PrefixWatch::MakeForNext(index, programs[longest], next_shared,
                                      static_cast<int32_t>(longer - shorter));
    }
  }
  auto main = Prepare(std::move(programs[longest]), compute, comm, capacity, options);
  main->listener->Record(calls);
  for (size_t i : order) main->listener->Watch(&*watches[i]);
  if (next) main->listener->Watch(&*next);
  main->executor->Begin();
  bool done = false;
  for (size_t i : order) {
    const PrefixWatch& w = *watches[i];
    done = done ||
           main->executor->Advance([&](Duration next) { return w.Due(next, *main->executor); });
    std::optional<engine::ExecutorSnapshot> exec;
    if (!done) exec = main->executor->TakeSnapshot(w.prefix());
    if (!exec) {  // the longest ended first, or touched an op past the prefix: nothing to fork
      alone(i);
      continue;
    }
    ListenerState listener = main->listener->Save(w.prefix());
    if (deferred && i == order.back()) {
      results[i].program = std::move(programs[i]);  // forked later, from `keep`, if at all
      *deferred = true;
    } else if (auto r =
                   ReplayFrom(programs[i], *exec, listener, compute, comm, capacity, options)) {
      results[i] = *std::move(r);
      if (forks) ++*forks;
    } else {
      alone(i);
    }
    // The last fork's state also serves a longer program that shares the longest one's
    // prefix this far (ReplayAfter: a fold's window sliding).
    if (keep && i == order.back()) {
      *keep = std::make_shared<const ReplaySnapshot>(
          ReplaySnapshot{*std::move(exec), std::move(listener), nullptr});
    }
  }
  if (next && !done) {
    done = main->executor->Advance([&](Duration t) { return next->Due(t, *main->executor); });
    if (!done) {
      if (auto exec = main->executor->TakeSnapshot(next->prefix())) {
        *keep = std::make_shared<const ReplaySnapshot>(ReplaySnapshot{
            *std::move(exec), main->listener->Save(next->prefix()), std::move(*keep)});
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (i != longest && !watches[i]) alone(i);
  }
  if (!done) main->executor->Advance(kToTheEnd);
  results[longest] = Complete(*main);
  return results;
}

ReplayResult ReplayAfter(OpProgram program, const OpProgram& previous,
                         const cost::ComputeCostModel& compute,
                         const cost::CollectiveCostModel& comm, Bytes capacity,
                         const ReplayOptions& options,
                         std::shared_ptr<const ReplaySnapshot>& snapshot, int32_t known,
                         int32_t next_shared, int32_t* resumed_at,
                         const ReplayResult* previous_records) {
  if (resumed_at) *resumed_at = 0;
  const std::shared_ptr<const ReplaySnapshot> from = std::move(snapshot);
  snapshot.reset();
  const bool resumable = Resumable(options) || (Forkable(options) && previous_records);
  const int32_t shared = from && resumable ? CommonPrefix(program, previous, known) : 0;
  // The state to keep: where the next program will part from this one, guessed a period on
  // (as in ReplayFamily), with the state gone on from kept behind it; else where this program
  // parts from `previous`, which the next program shares.
  next_shared = std::max(next_shared, NextPrefix(shared, previous.ops.size(), program.ops.size()));
  std::optional<PrefixWatch> watch;
  bool guessed = false;
  std::optional<PrefixIndex> index;
  if (shared > 0) index.emplace(program);
  if (shared > 0 && next_shared > shared && program.ops.size() > previous.ops.size()) {
    const auto period = static_cast<int32_t>(program.ops.size() - previous.ops.size());
    watch = PrefixWatch::MakeForNext(*index, program, next_shared, period);
    guessed = watch.has_value();
  }
  if (shared > 0 && !watch) watch = PrefixWatch::Make(*index, program, previous, shared);
  // The latest state kept that this program shares and its executor takes, gone on from over
  // the ops from the first it has not finished (ReplayFrom; the state, held in `resumed`,
  // outlives the run).
  std::unique_ptr<ReplayRun> run;
  std::shared_ptr<const ReplaySnapshot> resumed;
  std::shared_ptr<const ReplaySnapshot> resumed_state;  // the same, for its record counts
  int32_t base = 0;
  std::vector<int32_t> done_before;
  for (std::shared_ptr<const ReplaySnapshot> s = from; s != nullptr; s = s->earlier) {
    if (shared < s->executor.prefix || IssuesMemoryPast(program, s->executor.prefix)) continue;
    run = GoOnFrom(program, s->executor, s->listener, compute, comm, capacity, options, base,
                   done_before);
    if (run) {
      if (resumed_at) *resumed_at = s->executor.prefix;
      resumed_state = s;
      resumed = std::move(s);
      break;
    }
  }
  if (!run) return ReplayRaw(std::move(program), compute, comm, capacity, options);
  if (watch && watch->prefix() >= base) {
    // The watch numbers ops from 0: the ops before the base have started and finished.
    const ProgramView view{*run->executor, base};
    watch->CatchUp(view);
    run->listener->Watch(&*watch);
    const bool done = run->executor->Advance([&](Duration next) { return watch->Due(next, view); });
    if (!done) {
      if (auto exec = run->executor->TakeSnapshot(watch->prefix() - base)) {
        snapshot = std::make_shared<const ReplaySnapshot>(ReplaySnapshot{
            engine::NumberedFrom(*std::move(exec), base, done_before, resumed->listener.finish),
            run->listener->Save(watch->prefix()), guessed ? std::move(resumed) : nullptr});
      }
    }
  }
  run->executor->Advance(kToTheEnd);
  ReplayResult r = Complete(*run);
  // Recording, the records made before the state gone on from (ListenerState::changes).
  if (previous_records && resumed_state) {
    const auto& timings = previous_records->timings;
    const size_t before = std::min(resumed_state->listener.timings, timings.size());
    r.timings.insert(r.timings.begin(), timings.begin(),
                     timings.begin() + static_cast<std::ptrdiff_t>(before));
    for (size_t g = 0; g < r.ledgers.size() && g < previous_records->ledgers.size(); ++g) {
      const auto& changes = previous_records->ledgers[g].changes();
      const size_t n = g < resumed_state->listener.changes.size()
                           ? std::min(resumed_state->listener.changes[g], changes.size())
                           : 0;
      r.ledgers[g].PrependChanges(changes.data(), changes.data() + n);
    }
  }
  return r;
}

ReplayResult ReplayFromState(OpProgram program, const ReplaySnapshot& state,
                             const cost::ComputeCostModel& compute,
                             const cost::CollectiveCostModel& comm, Bytes capacity,
                             const ReplayOptions& options) {
  if (auto r =
          ReplayFrom(program, state.executor, state.listener, compute, comm, capacity, options)) {
    return *std::move(r);
  }
  return ReplayRaw(std::move(program), compute, comm, capacity, options);
}

int32_t SnapshotPrefix(const ReplaySnapshot& snapshot) { return snapshot.executor.prefix; }

bool Finalize(ReplayResult& r, int64_t micro_batches) {
  const bool uniform = CountFlops(r, micro_batches);
  const int64_t stages = r.program.stages;
  if (stages > 1) {
    for (Bytes& b : r.comm_bytes_sent) b = b / stages;
    for (auto& c : r.collectives) c.time = Duration::FromSeconds(c.time.seconds() / stages);
  }
  PickTimeStage(r);
  return uniform;
}

ReplayResult Replay(OpProgram program, const cost::ComputeCostModel& compute,
                    const cost::CollectiveCostModel& comm, Bytes capacity,
                    const ReplayOptions& options) {
  ReplayResult r = ReplayRaw(std::move(program), compute, comm, capacity, options);
  Finalize(r, kAsLowered);
  return r;
}

cost::RooflineCostModel ComputeModel(const Scenario& s) {
  return cost::RooflineCostModel(CalibratedGpu(s), s.training.precision, s.cluster.node.host,
                                 s.cluster.node.gpus_per_node, s.training.flash_impl);
}

Scenario OnGroup(const Scenario& s, int32_t group) {
  Scenario on = s;
  on.cluster.node = s.cluster.groups[group].node;
  on.cluster.gpu = s.cluster.groups[group].gpu;
  on.cluster.groups.clear();
  return on;
}

cost::RooflineCostModel ComputeModel(const Scenario& s, int32_t group) {
  return ComputeModel(OnGroup(s, group));
}

std::unique_ptr<cost::ComputeCostModel> ScenarioComputeModel(const Scenario& s) {
  const std::vector<int32_t> groups = s.StageGroups();
  if (groups.empty()) return std::make_unique<cost::RooflineCostModel>(ComputeModel(s));
  std::vector<cost::RooflineCostModel> models;
  for (int32_t g = 0; g < static_cast<int32_t>(s.cluster.groups.size()); ++g) {
    models.push_back(ComputeModel(s, g));
  }
  return std::make_unique<cost::StagedCostModel>(std::move(models), groups);
}

namespace {

absl::StatusOr<ReplayResult> SimulateOnce(const Scenario& s, ReplayOptions options,
                                          cost::CostModelCache& models) {
  auto comm = models.For(s);
  const std::unique_ptr<cost::ComputeCostModel> base = ScenarioComputeModel(s);
  // A mixed cluster: each stage priced by its node type's models, its ledger at its memory.
  std::vector<std::unique_ptr<cost::CollectiveCostModel>> group_comm;
  if (const std::vector<int32_t> groups = s.StageGroups(); !groups.empty()) {
    options.stage_capacity.clear();
    options.stage_comm.clear();
    for (int32_t g = 0; g < static_cast<int32_t>(s.cluster.groups.size()); ++g) {
      // Collectives inside a stage run on its type's NVLink and NICs; a send between stages
      // of two types is priced on the sender's.
      auto m = cost::MakeCollectiveCostModel(OnGroup(s, g));
      if (!m.ok()) return m.status();
      group_comm.push_back(*std::move(m));
    }
    for (int32_t g : groups) {
      options.stage_capacity.push_back(s.cluster.groups[g].gpu.Usable());
      options.stage_comm.push_back(group_comm[g].get());
    }
  }
  // Degraded links: each stage's collectives priced through its own slowed view of its model.
  std::vector<std::unique_ptr<cost::SlowLinkCostModel>> slow_links;
  if (!options.stage_link.empty() && comm.ok()) {
    for (size_t st = 0; st < options.stage_link.size(); ++st) {
      const cost::CollectiveCostModel& of_stage =
          st < options.stage_comm.size() ? *options.stage_comm[st] : **comm;
      slow_links.push_back(
          std::make_unique<cost::SlowLinkCostModel>(of_stage, options.stage_link[st]));
    }
    options.stage_comm.clear();
    for (const auto& m : slow_links) options.stage_comm.push_back(m.get());
  }
  std::optional<cost::SlowedCostModel> slowed;
  if (!options.stage_slowdown.empty()) slowed.emplace(*base, options.stage_slowdown);
  const cost::ComputeCostModel& compute =
      slowed ? static_cast<const cost::ComputeCostModel&>(*slowed) : *base;
  if (options.explicit_ranks) options.replicas = static_cast<int32_t>(s.dp());
  options.allocator.expandable_segments = s.runtime.expandable_segments;
  if (comm.ok() && options.fold) {
    auto folded = FoldedReplay(s, compute, **comm, options);
    if (!folded.ok()) return folded.status();
    if (*folded) return **std::move(folded);
  }
  auto program = Lower(s);
  if (!program.ok()) return program.status();
  if (!comm.ok()) return comm.status();
  return Replay(*std::move(program), compute, **comm, s.cluster.gpu.Usable(), options);
}

}  // namespace

absl::StatusOr<ReplayResult> Simulate(const Scenario& s, ReplayOptions options) {
  cost::CostModelCache models;
  return Simulate(s, options, models);
}

absl::StatusOr<ReplayResult> Simulate(const Scenario& s, ReplayOptions options,
                                      cost::CostModelCache& models) {
  auto r = SimulateOnce(s, options, models);
  // Durations saturate (sim/base/units.h); a step at or past the limit ran past the clock.
  if (r.ok() && r->step >= kClockLimit) {
    return absl::OutOfRangeError(absl::StrCat(
        "the step of ", s.micro_batches(),
        " micro-batches runs past what stepsim counts (2^62 picoseconds, about 53 days): a "
        "bandwidth, rate or latency far below any real cluster's, or fewer micro-batches"));
  }
  if (!r.ok()) return r;
  // A shared fabric: the same step with this job alone on it (not for a trial's replays, which
  // compare with the plain step instead).
  if (s.cluster.background_load > 0 && options.stage_slowdown.empty() &&
      options.stage_link.empty()) {
    Scenario idle = s;
    idle.cluster.background_load = 0;
    ReplayOptions plain = options;
    plain.record_ops = plain.record_memory = false;
    auto i = SimulateOnce(idle, plain, models);
    if (!i.ok()) return i.status();
    r->idle_fabric_step = i->step;
  }
  if (!s.model.moe) return r;
  r->expert_load = ScenarioShape(s).expert_load;
  // The same step with balanced routing (the same capacity rule), when that loads the replayed
  // rank differently.
  Scenario balanced = s;
  balanced.training.routing.distribution = RoutingDistribution::kBalanced;
  if (ScenarioShape(balanced).expert_load != r->expert_load) {
    options.record_ops = options.record_memory = false;
    auto b = SimulateOnce(balanced, options, models);
    if (!b.ok()) return b.status();
    r->balanced_step = b->step;
    r->balanced_model_flops = b->model_flops;
    r->balanced_hardware_flops = b->hardware_flops;
    r->balanced_recompute_flops = b->recompute_flops;
  }
  return r;
}

}  // namespace sim::replay
