#pragma once
// What a replay's listener holds (sim/replay/replay.cc, ReplayListener): the ops as its event
// loop reads them, and its state at a boundary between dispatch rounds (ListenerState), which a
// forked replay goes on from (sim/replay/prefix_watch.h) and a fold compares one period apart
// (sim/replay/state_period.h).

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "sim/base/units.h"
#include "sim/cost/collective_cost.h"
#include "sim/cost/link_sharing.h"
#include "sim/engine/executor.h"
#include "sim/memory/ledger.h"
#include "sim/replay/replay.h"
#include "sim/workload/program.h"

namespace sim::replay {

// What the event loop reads of each op, packed (40 bytes against Op's 112, which the loop
// would otherwise pull through the cache for a handful of fields): its time alone on the GPU,
// memory-action and dependency ranges, stage, kind, pass, stream and the links a collective
// shares.
struct HotOp {
  Duration base;
  int32_t mem_begin, mem_start, mem_finish, mem_end;
  int32_t deps_begin, deps_end;
  int16_t stage;
  OpKind kind;
  OpPass pass;
  StreamKind stream;
  cost::LinkClass link_class;
};
static_assert(sizeof(HotOp) == 40, "HotOp is meant to stay small: see above");

// The compute-stream kernel running on a simulated GPU (task -1: none), its work left in time
// alone on the GPU as of `since`, and whether communication runs beside it.
struct RunningCompute {
  int32_t task = -1;
  Duration left, since;
  bool beside_comm = false;
};

// An offload copy of replica 0: its stage and when it ran.
struct Interval {
  int32_t stage;
  Duration start, end;
};

// What a program's collectives add to its result, op by op in program order (the slowest of a
// kind is the first to reach its time).
struct CollectiveTotals {
  std::array<ReplayResult::CollectiveStats, kNumCollectiveKinds> stats{};
  // Bytes each stage's GPU sends per collective kind, summed over the stages (Finalize
  // averages).
  std::array<Bytes, kNumCollectiveKinds> sent{};

  void Add(const CollectiveSpec& c, const cost::PricedCollective& priced) {
    const int kind = static_cast<int>(c.kind);
    sent[kind] += BytesSentPerGpu(c.kind, c.tensor, c.group.size);
    auto& st = stats[kind];
    st.count++;
    st.time += priced.time;
    st.by_algorithm[static_cast<int>(priced.algorithm)]++;
    st.by_protocol[static_cast<int>(priced.protocol)]++;
    if (priced.time > st.slowest) {
      st.slowest = priced.time;
      st.busiest_link = priced.busiest_link;
      st.busiest_load = priced.busiest_load;
    }
  }
};

// One change a replay booked in a simulated GPU's ledger, as MemoryLedger::Apply took it (a
// fold replays a period's changes through the ledgers alone: sim/replay/fold.cc).
struct LedgerCall {
  int32_t gpu = 0;
  int32_t stream = 0;
  MemCategory category = MemCategory::kWeights;
  Bytes bytes;
};

// What a replay has done by a boundary, over its first `prefix` ops (ReplayListener::Save,
// Restore): the listener's running state, and the result's time accounts and ledgers.
struct ListenerState {
  int32_t prefix = 0;
  std::vector<HotOp> hot;  // the prefix ops as the loop reads them, priced
  // What the prefix's collectives add to the result (ReplayResult::collectives,
  // comm_bytes_sent), in program order.
  CollectiveTotals totals;
  std::vector<int32_t> comm_running;
  std::vector<RunningCompute> running;
  std::vector<Duration> compute_free, last_end, finish, start;
  std::vector<Interval> pcie;
  std::vector<Bytes> host;
  cost::LinkSharing sharing{0};
  std::vector<StageTimes> stages;
  std::vector<Bytes> host_activation_peak;
  // Without their recorded changes (ReplayOptions::record_memory), which stay with the replay
  // that made them: `changes` counts them per ledger (a replay gone on from a state, its own).
  std::vector<memory::MemoryLedger> ledgers;
  std::vector<size_t> changes;
  // The ledger changes recorded by then (ReplayListener::Record; 0 when none are).
  size_t calls = 0;
  // The op timings this replay recorded by then (ReplayOptions::record_ops; a replay gone on
  // from a state records only its own), which a fold's expansion cuts the step's at
  // (sim/replay/step_records.h).
  size_t timings = 0;
};

// A stage's times once its step ends at `step`, its last op having ended at `last_end`: the
// tail after its last op is bubble, and what its compute, optimizer, bubble and exposed PCIe
// do not cover is exposed communication (ReplayListener::Close; a fold books the same at a
// state, sim/replay/fold.cc).
inline void CloseStage(StageTimes& t, Duration step, Duration last_end) {
  t.bubble += step - last_end;
  t.exposed_comm = step - t.compute - t.recompute - t.optimizer - t.bubble - t.exposed_pcie;
}

// A replay's state at a boundary between dispatch rounds: its executor's and its listener's.
struct ReplaySnapshot {
  engine::ExecutorSnapshot executor;
  ListenerState listener;
  // The same replay's state at a shorter prefix, tried when a program does not share this
  // one's prefix or its executor refuses this state (ReplayAfter).
  std::shared_ptr<const ReplaySnapshot> earlier;
};

}  // namespace sim::replay
