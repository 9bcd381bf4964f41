#pragma once
// Micro-batch folding (README "Folding"): the micro-batches between warm-up and cool-down run
// the same ops with the same memory actions, and the replay's state repeats from one to the
// next in integer picoseconds and bytes. Instead of lowering and replaying all M of them, the
// step is replayed at K, K + d and K + 2d micro-batches (d = 1, or pp for the interleaved
// schedule, whose micro-batches come in groups of pp); when every additive quantity grows by
// exactly the same integer from the first to the second as from the second to the third (step,
// events, ops, each stage's compute / recompute / optimizer / communication / bubble times, each
// collective kind's count, time, algorithms and protocols, bytes sent) and every
// non-additive one is the same in all three (each GPU's peak, its moment, op and breakdown, the
// reserved peak, the first overflow, category peaks, host-held activations, each kind's slowest
// collective and busiest link), the M-micro-batch step is the third replay plus
// (M − K − 2d)/d more of that increment — what the full replay gives, byte for byte
// (tests/fold_test.cc). FLOPs are one micro-batch's times M either way (replay_steps.h). When
// anything fails to repeat (GPipe's peak grows with M; a trace or timeline was asked for), the
// step is replayed in full. The first window's three replays share their first micro-batches
// and run as one, forked where they part (ReplayFamily, sim/replay/prefix_watch.h).

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

// The folded replay of `s`, or none when the step does not repeat (then replay it in full);
// InvalidArgument when the folded step overflows the picosecond clock or the byte counts.
absl::StatusOr<std::optional<ReplayResult>> FoldedReplay(const Scenario& s,
                                                         const cost::ComputeCostModel& compute,
                                                         const cost::CollectiveCostModel& comm,
                                                         const ReplayOptions& options);

}  // namespace sim::replay
