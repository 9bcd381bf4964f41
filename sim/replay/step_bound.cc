#include "sim/replay/step_bound.h"

#include <algorithm>
#include <vector>

#include "sim/cost/compute_cost.h"
#include "sim/spec/stage_split.h"
#include "sim/workload/lowering.h"

namespace sim::replay {

namespace {

// One short lowering's compute-stream compute, per stage: over the whole program and over its
// first `split` micro-batches, the forward of its first micro-batch, and the backward of
// micro-batch split - 1. A micro-batch lowers to the same compute ops whatever
// the step's length (tests/step_bound_test.cc holds the first `split` micro-batches of a longer
// lowering to a lowering of `split`, stage by stage), so one lowering of 2d micro-batches gives
// what lowerings of d and 2d gave: a third less to lower for every bound of the plan.
struct StageCompute {
  std::vector<Duration> total, first_part, first_forward, part_last_backward;
};

absl::StatusOr<StageCompute> Measure(const Scenario& s, int64_t micro_batches, int64_t split,
                                     const cost::ComputeCostModel& compute) {
  auto program = Lower(s.WithMicroBatches(micro_batches));
  if (!program.ok()) return program.status();
  StageCompute c;
  const auto stages = static_cast<size_t>(program->stages);
  for (auto* v : {&c.total, &c.first_part, &c.first_forward, &c.part_last_backward}) {
    v->assign(stages, Duration::Zero());
  }
  for (const Op& op : program->ops) {
    if (op.kind != OpKind::kCompute || op.stream != StreamKind::kCompute ||
        op.pass == OpPass::kStep) {
      continue;
    }
    const Duration d = compute.Time(op);
    c.total[op.stage] += d;
    if (op.micro_batch < split) c.first_part[op.stage] += d;
    if (op.pass == OpPass::kForward && op.micro_batch == 0) c.first_forward[op.stage] += d;
    if (op.pass == OpPass::kBackward && op.micro_batch == split - 1) {
      c.part_last_backward[op.stage] += d;
    }
  }
  return c;
}

}  // namespace

absl::StatusOr<Duration> StepLowerBound(const Scenario& s) {
  const cost::RooflineCostModel compute(s.cluster.gpu, s.training.precision, s.cluster.node.host,
                                        s.cluster.node.gpus_per_node, s.training.flash_impl);
  const bool interleaved = s.parallel.pp_schedule == PipelineSchedule::kInterleaved;
  const int64_t d = interleaved ? s.parallel.pp : 1;
  const int64_t m = s.micro_batches();
  if (m == d) {
    auto one = Measure(s, d, d, compute);
    if (!one.ok()) return one.status();
    return *std::max_element(one->total.begin(), one->total.end());
  }
  // T_j(d) is the first d micro-batches of the lowering of 2d, T_j(2d) all of it.
  auto c = Measure(s, 2 * d, d, compute);
  if (!c.ok()) return c.status();
  // The fill and drain cross the stages micro-batch by micro-batch in 1F1B only.
  const bool crosses = s.parallel.pp > 1 && s.parallel.pp_schedule == PipelineSchedule::k1F1B;
  Duration bound, fill, drain;
  for (size_t j = 0; j < c->total.size(); ++j) {
    const Duration per_period = c->total[j] - c->first_part[j];
    const Duration stage =
        c->first_part[j] + Duration::FromSeconds(per_period.seconds() * static_cast<double>(m - d) /
                                                 static_cast<double>(d));
    bound = std::max(bound, (crosses ? fill + drain : Duration::Zero()) + stage);
    fill += c->first_forward[j];
    drain += c->part_last_backward[j];
  }
  return bound;
}

std::optional<Scenario> OneFOneBReading(const Scenario& s) {
  Scenario t = s;
  t.parallel.pp_schedule = PipelineSchedule::k1F1B;
  t.parallel.pp_chunks = 1;
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

absl::StatusOr<Duration> AverageStageComputeBound(const Scenario& s) {
  const cost::RooflineCostModel compute(s.cluster.gpu, s.training.precision, s.cluster.node.host,
                                        s.cluster.node.gpus_per_node, s.training.flash_impl);
  const std::optional<Scenario> t = OneFOneBReading(s);
  if (!t) return absl::InvalidArgumentError("no 1F1B split of the layers to measure compute on");
  const int64_t m = s.micro_batches();
  // The first micro-batch of a lowering of 2, and all of it (of 1 when the step has one).
  auto c = Measure(*t, m > 1 ? 2 : 1, 1, compute);
  if (!c.ok()) return c.status();
  Duration total1, total2;
  for (const Duration d : c->first_part) total1 += d;
  for (const Duration d : c->total) total2 += d;
  const double step =
      m > 1 ? total1.seconds() + (total2 - total1).seconds() * static_cast<double>(m - 1)
            : total1.seconds();
  return Duration::FromSeconds(step / static_cast<double>(c->total.size()));
}

}  // namespace sim::replay
