#pragma once
// A lower bound on a scenario's step time without replaying it, for `stepsim plan` to leave
// out layouts that cannot be the fastest on their GPUs (issue 14: "a configuration whose lower
// bound on step time cannot beat the Pareto set is not replayed").
//
// A stage's compute stream runs its ops one at a time (program.h), each at least as long as
// its price alone on the GPU (the overlap slowdown and link sharing only lengthen them), so the
// step is at least the sum of one stage's compute-stream compute ops. With a 1F1B pipeline it
// is more: stage j cannot start before the forward of the first micro-batch has crossed the
// stages before it, and stage 0 cannot finish before the last micro-batch's backward has
// crossed them back, so
//
//   step >= max_j ( sum_{s<j} F_s + T_j + sum_{s<j} B_s )
//
// with T_j stage j's compute over the step, F_s the forward compute of the first micro-batch
// on stage s and B_s the backward compute (recompute left out) of the last one. The
// interleaved schedule crosses the stages chunk by chunk: its bound keeps T_j alone.
// Collectives, sends, the optimizer's step and the pipeline's bubble beyond the fill and drain
// are left out: each adds, none subtracts.
//
// T_j comes from one short lowering of 2d micro-batches (d = pp for the interleaved schedule, 1
// otherwise), read as the steps of d and 2d: T_j(M) = T_j(d) + (M - d) / d x (T_j(2d) - T_j(d)),
// exact when the micro-batches between the first and the last lower to the same ops, as folding
// relies on (sim/replay/fold.h); T_j(d), F_s and B_s are the lowering's first d micro-batches,
// which a lowering of d gives alike. tests/step_bound_test.cc holds the bound under the
// replayed step, and the first d micro-batches of a lowering of 2d to a lowering of d.

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/spec/scenario.h"

namespace sim::replay {

absl::StatusOr<Duration> StepLowerBound(const Scenario& s);

// What the bounds read off a scenario's lowering of 2d micro-batches, per stage: the compute-
// stream compute (the optimizer's aside) of its first d micro-batches (T_j(d)) and of all 2d
// (T_j(2d)), the forward of micro-batch 0 (F_j) and the backward of micro-batch d - 1 (B_j).
// It does not depend on the step's micro-batch count, nor on the data-parallel size (which
// changes what a GPU communicates, not what it computes: tests/step_bound_test.cc holds the
// profiles of the plan's layouts equal across cluster sizes), so `stepsim plan` measures it
// once per layout for all its cluster sizes.
struct ComputeProfile {
  int64_t d = 1;
  bool crosses = false;  // a 1F1B pipeline: the fill and drain count
  std::vector<Duration> first_part, total, first_forward, part_last_backward;
};
absl::StatusOr<ComputeProfile> StepComputeProfile(const Scenario& s);
// StepLowerBound at `micro_batches` micro-batches per step, from the scenario's profile.
Duration StepLowerBound(const ComputeProfile& profile, int64_t micro_batches);

// A weaker bound for any schedule, as cheap as StepLowerBound's 1F1B one: the busiest stage
// computes at least the average stage's compute, sum_j T_j / pp. The sum is the whole model's
// compute over the step, whichever stage runs which layer, so it is measured on the layout read
// as 1F1B (a lowering of 2 micro-batches, read as steps of 1 and 2, where the interleaved
// schedule's own would take pp and 2 pp). tests/step_bound_test.cc holds the interleaved lowering's
// sum equal to that reading's.
absl::StatusOr<Duration> AverageStageComputeBound(const Scenario& s);
// The same in two halves: the profile of the layout read as 1F1B (d = 1), and the bound at
// `micro_batches` micro-batches per step.
absl::StatusOr<ComputeProfile> AverageComputeProfile(const Scenario& s);
Duration AverageStageComputeBound(const ComputeProfile& profile, int64_t micro_batches);

// The layout read as 1F1B over the same stages: parallel.pp_layers summed per stage; else the
// first and last stages' layers as given where 1F1B accepts them, else split evenly, else equal
// ends around an even middle; none when no such split exists.
std::optional<Scenario> OneFOneBReading(const Scenario& s);

}  // namespace sim::replay
