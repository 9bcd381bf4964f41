#pragma once
// Micro-batch folding (docs/folding.md): the micro-batches between warm-up and cool-down run
// the same ops with the same memory actions, and the replay's state repeats from one to the
// next in integer picoseconds and bytes. Instead of lowering and replaying all M of them, the
// step is replayed at a few lengths K, K + d, K + 2d, ... (d = 1, or pp for the interleaved
// schedule, whose micro-batches come in groups of pp) and folded one of two ways:
//   - by state (sim/replay/state_period.h): the replay of K + d micro-batches passes the state
//     where K's program parts from it and, a period later, the one where K + 2d's would. When
//     the later is the earlier a period on — every running op, queued event and free time,
//     every ledger and allocator alike — and the programs go on from them alike, every further
//     period adds what the replay added between the two, and the step is K + d's replay plus
//     (M − K − d)/d such periods;
//   - by results: when every additive quantity grows by exactly the same integer from the
//     first of three short replays to the second as from the second to the third (step,
//     events, ops, each stage's compute / recompute / optimizer / communication / bubble times,
//     each collective kind's count, time, algorithms and protocols, bytes sent) and every
//     non-additive one is the same in all three (each GPU's peak, its moment, op and breakdown,
//     the reserved peak, the first overflow, category peaks, host-held activations, each kind's
//     slowest collective and busiest link), the step is the third replay plus as many more of
//     that increment.
// Either gives what the full replay gives, byte for byte (tests/fold_test.cc). FLOPs are one
// micro-batch's times M either way (replay_steps.h). When anything fails to repeat (GPipe's
// peak grows with M), the step is replayed in full. Recording (ReplayOptions::record_ops,
// record_memory), a step folds only on states: those of a pair whose longer replay ran from the
// step's start and holds every record, with how they expand to the step's (FoldedRecords,
// sim/replay/step_records.h); or it goes on from its first pair, or is replayed in full. The
// first two short replays share their first micro-batches and run as one, forked where they
// part (ReplayFamily, sim/replay/prefix_watch.h).

#include <optional>

#include "absl/status/statusor.h"
#include "sim/cost/collective_cost.h"
#include "sim/cost/compute_cost.h"
#include "sim/replay/replay.h"
#include "sim/spec/scenario.h"

namespace sim::replay {

// The micro-batch counts a fold replays (K, K + d, K + 2d), and whether M is folded at all: M
// must exceed K + 2d by a whole number of d.
struct FoldPlan {
  int64_t k = 0, d = 1;
};
std::optional<FoldPlan> PlanFold(const Scenario& s);

// How a fold went (tests, benchmarks): the short replays it took, the micro-batches of the last,
// and whether their states decided it (StateFold) or three replays' results did (Repeats).
struct FoldTrace {
  int replays = 0;
  int64_t last = 0;
  bool by_state = false;
  bool allocator_alone = false;  // by state, the reserved peaks from the allocators replayed alone
  int allocator_periods = 0;     // the most periods a GPU's allocator was replayed alone
  // A step too short for three short replays whose first pair's states did not repeat: the
  // whole step went on from the pair's state, not folded (FoldedReplay).
  bool went_on = false;
};

// The folded replay of `s`, or none when the step does not repeat (then replay it in full);
// for a step too short for three short replays, the whole step's replay gone on from the first
// pair's state when that pair's states do not repeat (FoldTrace::went_on);
// InvalidArgument when the folded step overflows the picosecond clock or the byte counts.
// `trace` (optional) receives how it went.
absl::StatusOr<std::optional<ReplayResult>> FoldedReplay(const Scenario& s,
                                                         const cost::ComputeCostModel& compute,
                                                         const cost::CollectiveCostModel& comm,
                                                         const ReplayOptions& options,
                                                         FoldTrace* trace = nullptr);

}  // namespace sim::replay
