#include "sim/replay/step_bound.h"

#include <algorithm>
#include <vector>

#include "sim/cost/compute_cost.h"
#include "sim/replay/replay.h"
#include "sim/spec/stage_split.h"
#include "sim/workload/lowering.h"
#include "sim/workload/policy/framework_traits.h"

namespace sim::replay {

namespace {

// One lowering of `2 d` micro-batches, read per stage (ComputeProfile). A micro-batch lowers to
// the same compute ops whatever the step's length (tests/step_bound_test.cc holds the first d
// micro-batches of a lowering of 2d to a lowering of d, stage by stage), so one lowering gives
// what lowerings of d and 2d gave: a third less to lower for every bound of the plan.
absl::StatusOr<ComputeProfile> Measure(const Scenario& s, int64_t d, bool crosses) {
  const std::unique_ptr<cost::ComputeCostModel> model = ScenarioComputeModel(s);
  const cost::ComputeCostModel& compute = *model;
  auto program = Lower(s.WithMicroBatches(2 * d));
  if (!program.ok()) return program.status();
  ComputeProfile c;
  c.d = d;
  c.crosses = crosses;
  const auto stages = static_cast<size_t>(program->stages);
  for (auto* v : {&c.total, &c.first_part, &c.first_forward, &c.part_last_backward}) {
    v->assign(stages, Duration::Zero());
  }
  for (const Op& op : program->ops) {
    if (op.kind != OpKind::kCompute || op.stream != StreamKind::kCompute ||
        op.pass == OpPass::kStep) {
      continue;
    }
    const Duration t = compute.Time(op);
    c.total[op.stage] += t;
    if (op.micro_batch < d) c.first_part[op.stage] += t;
    if (op.pass == OpPass::kForward && op.micro_batch == 0) c.first_forward[op.stage] += t;
    if (op.pass == OpPass::kBackward && op.micro_batch == d - 1) {
      c.part_last_backward[op.stage] += t;
    }
  }
  return c;
}

}  // namespace

absl::StatusOr<ComputeProfile> StepComputeProfile(const Scenario& s) {
  const bool interleaved = s.parallel.pp_schedule == PipelineSchedule::kInterleaved;
  // The fill and drain cross the stages micro-batch by micro-batch in 1F1B only.
  return Measure(s, interleaved ? s.parallel.pp : 1,
                 s.parallel.pp > 1 && s.parallel.pp_schedule == PipelineSchedule::k1F1B);
}

Duration StepLowerBound(const ComputeProfile& c, int64_t micro_batches) {
  const int64_t d = c.d, m = micro_batches;
  if (m == d) return *std::max_element(c.first_part.begin(), c.first_part.end());
  Duration bound, fill, drain;
  for (size_t j = 0; j < c.total.size(); ++j) {
    const Duration per_period = c.total[j] - c.first_part[j];  // T_j(2d) - T_j(d)
    const Duration stage =
        c.first_part[j] + Duration::FromSeconds(per_period.seconds() * static_cast<double>(m - d) /
                                                static_cast<double>(d));
    bound = std::max(bound, (c.crosses ? fill + drain : Duration::Zero()) + stage);
    fill += c.first_forward[j];
    drain += c.part_last_backward[j];
  }
  return bound;
}

absl::StatusOr<Duration> StepLowerBound(const Scenario& s) {
  auto c = StepComputeProfile(s);
  if (!c.ok()) return c.status();
  return StepLowerBound(*c, s.micro_batches());
}

std::optional<Scenario> OneFOneBReading(const Scenario& s) {
  Scenario t = s;
  t.parallel.pp_schedule = PipelineSchedule::k1F1B;
  t.parallel.pp_chunks = 1;
  if (!s.parallel.pp_layers.empty()) {
    // Each stage's layers, its chunks' together.
    const int64_t p = s.parallel.pp;
    t.parallel.pp_layers.assign(static_cast<size_t>(p), 0);
    for (size_t i = 0; i < s.parallel.pp_layers.size(); ++i) {
      t.parallel.pp_layers[i % static_cast<size_t>(p)] += s.parallel.pp_layers[i];
    }
    return t;
  }
  auto splits = [&](std::optional<int64_t> first, std::optional<int64_t> last) {
    if (!SplitLayers(s.model.layers, s.parallel.pp, 1, first, last).ok()) return false;
    t.parallel.first_stage_layers = first;
    t.parallel.last_stage_layers = last;
    return true;
  };
  bool split = splits(s.parallel.first_stage_layers, s.parallel.last_stage_layers) ||
               splits(std::nullopt, std::nullopt);
  for (int64_t ends = 1; !split && ends < s.model.layers; ++ends) split = splits(ends, ends);
  if (!split) return std::nullopt;
  return t;
}

absl::StatusOr<ComputeProfile> AverageComputeProfile(const Scenario& s) {
  const std::optional<Scenario> t = OneFOneBReading(s);
  if (!t) return absl::InvalidArgumentError("no 1F1B split of the layers to measure compute on");
  return Measure(*t, 1, /*crosses=*/false);
}

Duration AverageStageComputeBound(const ComputeProfile& c, int64_t micro_batches) {
  const int64_t m = micro_batches;
  Duration total1, total2;
  for (const Duration t : c.first_part) total1 += t;
  for (const Duration t : c.total) total2 += t;
  const double step =
      m > 1 ? total1.seconds() + (total2 - total1).seconds() * static_cast<double>(m - 1)
            : total1.seconds();
  return Duration::FromSeconds(step / static_cast<double>(c.total.size()));
}

absl::StatusOr<Duration> AverageStageComputeBound(const Scenario& s) {
  auto c = AverageComputeProfile(s);
  if (!c.ok()) return c.status();
  return AverageStageComputeBound(*c, s.micro_batches());
}

}  // namespace sim::replay
