#include "sim/replay/replay.h"

#include <memory>

#include "sim/base/check.h"
#include "sim/cost/collective_cost.h"
#include "sim/cost/compute_cost.h"
#include "sim/cost/graph_collective.h"
#include "sim/engine/executor.h"
#include "sim/workload/lowering.h"

namespace sim::replay {

namespace {

// Task t of the executor is op (t % ops) of rank (t / ops); rank r's streams are
// r·kNumStreams + StreamKind.
engine::TaskGraph BuildGraph(const OpProgram& p, int32_t ranks) {
  const int32_t n = static_cast<int32_t>(p.ops.size());
  engine::TaskGraph g;
  g.num_streams = ranks * kNumStreams;
  const int64_t tasks = static_cast<int64_t>(n) * ranks;
  g.stream.resize(tasks);
  g.pred_count.resize(tasks);
  g.succ_begin.assign(tasks + 1, 0);
  // Successor counts per op, shared by every rank.
  std::vector<int32_t> succ_count(n, 0);
  for (const Op& op : p.ops) {
    for (int32_t i = op.deps_begin; i < op.deps_end; ++i) succ_count[p.deps[i]]++;
  }
  for (int32_t r = 0; r < ranks; ++r) {
    for (int32_t o = 0; o < n; ++o) {
      const int64_t t = static_cast<int64_t>(r) * n + o;
      g.stream[t] = r * kNumStreams + static_cast<int32_t>(p.ops[o].stream);
      g.pred_count[t] = p.ops[o].deps_end - p.ops[o].deps_begin;
      g.succ_begin[t + 1] = g.succ_begin[t] + succ_count[o];
    }
  }
  g.succ.resize(g.succ_begin.back());
  std::vector<int32_t> fill(g.succ_begin.begin(), g.succ_begin.end() - 1);
  for (int32_t r = 0; r < ranks; ++r) {
    const int32_t base = r * n;
    for (int32_t o = 0; o < n; ++o) {
      const Op& op = p.ops[o];
      for (int32_t i = op.deps_begin; i < op.deps_end; ++i) {
        g.succ[fill[base + p.deps[i]]++] = base + o;
      }
    }
  }
  if (ranks > 1) {
    // Each collective starts on all ranks together.
    g.join.assign(tasks, std::nullopt);
    g.join_begin.push_back(0);
    for (int32_t o = 0; o < n; ++o) {
      if (p.ops[o].stream != StreamKind::kComm) continue;
      const int32_t j = static_cast<int32_t>(g.join_begin.size()) - 1;
      for (int32_t r = 0; r < ranks; ++r) {
        g.join[static_cast<int64_t>(r) * n + o] = j;
        g.join_members.push_back(r * n + o);
      }
      g.join_begin.push_back(static_cast<int32_t>(g.join_members.size()));
    }
  }
  return g;
}

class ReplayListener {
 public:
  ReplayListener(const Scenario& s, const cost::GraphCostModel& comm,
                 const ReplayOptions& options, ReplayResult& result)
      : options_(options), r_(result), p_(result.program) {
    base_.reserve(p_.ops.size());
    stretched_.reserve(p_.ops.size());
    const double slowdown = s.cluster.gpu.calibration.overlap_slowdown;
    for (const Op& op : p_.ops) {
      Duration d;
      if (op.stream == StreamKind::kComm) {
        const CollectiveSpec& c = p_.CollectiveOf(op);
        const cost::PricedCollective priced = comm.Price(c.kind, c.tensor, c.group, c.buckets);
        d = priced.time;
        auto& st = r_.collectives[static_cast<int>(c.kind)];
        st.count++;
        st.time += d;
        st.by_algorithm[static_cast<int>(priced.algorithm)]++;
        if (d > st.slowest) {
          st.slowest = d;
          st.busiest_link = priced.busiest_link;
          st.busiest_load = priced.busiest_load;
        }
      } else {
        d = cost::ComputeDuration(op, s.cluster.gpu, s.training.precision);
      }
      base_.push_back(d);
      // Communication kernels take SMs and HBM bandwidth from the compute beside them.
      stretched_.push_back(Duration::FromSeconds(d.seconds() * slowdown));
    }
    comm_busy_.assign(r_.simulated_ranks, false);
  }

  void OnIssue(int32_t task, Duration now) { ApplyMemory(task, MemWhen::kIssue, now); }

  Duration OnStart(int32_t task, Duration now) {
    const int32_t rank = task / Ops(), o = task % Ops();
    const Op& op = p_.ops[o];
    ApplyMemory(task, MemWhen::kStart, now);
    Duration d = base_[o];
    if (op.stream == StreamKind::kComm) {
      comm_busy_[rank] = true;
    } else if (comm_busy_[rank]) {
      if (rank == 0) r_.overlap_stretch += stretched_[o] - d;
      d = stretched_[o];
    }
    if (rank == 0) Account(op, d);
    if (options_.record_ops) r_.timings.push_back({o, rank, now, now + d});
    return d;
  }

  void OnFinish(int32_t task, Duration now) {
    const int32_t rank = task / Ops();
    if (p_.ops[task % Ops()].stream == StreamKind::kComm) comm_busy_[rank] = false;
    ApplyMemory(task, MemWhen::kEnd, now);
  }

 private:
  int32_t Ops() const { return static_cast<int32_t>(p_.ops.size()); }

  void ApplyMemory(int32_t task, MemWhen when, Duration now) {
    const int32_t rank = task / Ops(), o = task % Ops();
    const Op& op = p_.ops[o];
    const int32_t begin = when == MemWhen::kIssue ? op.mem_begin
                          : when == MemWhen::kStart ? op.mem_start
                                                    : op.mem_finish;
    const int32_t end = when == MemWhen::kIssue ? op.mem_start
                        : when == MemWhen::kStart ? op.mem_finish
                                                  : op.mem_end;
    memory::MemoryLedger& ledger = r_.ledgers[rank];
    for (int32_t i = begin; i < end; ++i) {
      ledger.Apply(p_.mem[i].category, p_.mem[i].bytes, now, o);
    }
  }

  void Account(const Op& op, Duration d) {
    switch (op.phase) {
      case OpPhase::kForward:
      case OpPhase::kBackward: r_.compute += d; break;
      case OpPhase::kRecompute: r_.recompute += d; break;
      case OpPhase::kOptimizer: r_.optimizer += d; break;
      case OpPhase::kComm: r_.comm += d; break;
    }
  }

  const ReplayOptions& options_;
  ReplayResult& r_;
  const OpProgram& p_;
  std::vector<Duration> base_;       // per op, alone on the GPU
  std::vector<Duration> stretched_;  // per op, beside a running collective
  std::vector<bool> comm_busy_;
};

void CountWork(ReplayResult& r) {
  for (const Op& op : r.program.ops) {
    switch (op.phase) {
      case OpPhase::kForward:
      case OpPhase::kBackward:
        r.model_flops += op.flops;
        r.hardware_flops += op.flops;
        break;
      case OpPhase::kRecompute:
        r.recompute_flops += op.flops;
        r.hardware_flops += op.flops;
        break;
      case OpPhase::kComm: {
        const CollectiveSpec& c = r.program.CollectiveOf(op);
        r.comm_bytes_sent[static_cast<int>(c.kind)] +=
            BytesSentPerGpu(c.kind, c.tensor, c.group.size);
        break;
      }
      case OpPhase::kOptimizer: break;  // neither model nor hardware FLOPs by convention
    }
  }
}

}  // namespace

absl::StatusOr<ReplayResult> Replay(const Scenario& s, const ReplayOptions& options) {
  auto program = Lower(s);
  if (!program.ok()) return program.status();
  ReplayResult r;
  r.program = std::move(*program);
  r.simulated_ranks = options.explicit_ranks ? static_cast<int32_t>(s.dp()) : 1;
  const bool record_memory = options.record_memory;
  for (int32_t rank = 0; rank < r.simulated_ranks; ++rank) {
    r.ledgers.emplace_back(s.cluster.gpu.hbm, record_memory);
    for (const MemAction& a : r.program.persistent) {
      r.ledgers.back().Apply(a.category, a.bytes, Duration::Zero(), std::nullopt);
    }
    r.ledgers.back().MarkPersistent();
  }
  CountWork(r);
  const engine::TaskGraph graph = BuildGraph(r.program, r.simulated_ranks);
  auto comm = cost::MakeCollectiveCostModel(s);
  if (!comm.ok()) return comm.status();
  ReplayListener listener(s, **comm, options, r);
  engine::Executor<ReplayListener> executor(graph, listener);
  const engine::ExecutionStats stats = executor.Run();
  r.step = stats.makespan;
  r.events = stats.events;
  r.exposed_comm = r.step - r.compute - r.recompute - r.optimizer;
  for (int32_t rank = 0; rank < r.simulated_ranks; ++rank) {
    SIM_CHECK(r.ledgers[rank].Transient() == Bytes(),
              "memory did not return to the persistent level at the end of the step");
    if (r.ledgers[rank].peak() > r.ledgers[r.peak_rank].peak()) r.peak_rank = rank;
  }
  return r;
}

}  // namespace sim::replay
