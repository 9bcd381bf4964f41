#include "sim/replay/step_bound.h"

#include <algorithm>
#include <vector>

#include "sim/cost/compute_cost.h"
#include "sim/spec/stage_split.h"
#include "sim/workload/lowering.h"

namespace sim::replay {

namespace {

// One short lowering's compute-stream compute, per stage: over the whole program, the forward
// of its first micro-batch and the backward of its last.
struct StageCompute {
  std::vector<Duration> total, first_forward, last_backward;
};

absl::StatusOr<StageCompute> Measure(const Scenario& s, int64_t micro_batches,
                                     const cost::ComputeCostModel& compute) {
  auto program = Lower(s.WithMicroBatches(micro_batches));
  if (!program.ok()) return program.status();
  StageCompute c;
  const auto stages = static_cast<size_t>(program->stages);
  c.total.assign(stages, Duration::Zero());
  c.first_forward.assign(stages, Duration::Zero());
  c.last_backward.assign(stages, Duration::Zero());
  for (const Op& op : program->ops) {
    if (op.kind != OpKind::kCompute || op.stream != StreamKind::kCompute ||
        op.pass == OpPass::kStep) {
      continue;
    }
    const Duration d = compute.Time(op);
    c.total[op.stage] += d;
    if (op.pass == OpPass::kForward && op.micro_batch == 0) c.first_forward[op.stage] += d;
    if (op.pass == OpPass::kBackward && op.micro_batch == micro_batches - 1) {
      c.last_backward[op.stage] += d;
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
  auto one = Measure(s, d, compute);
  if (!one.ok()) return one.status();
  if (m == d) return *std::max_element(one->total.begin(), one->total.end());
  auto two = Measure(s, 2 * d, compute);
  if (!two.ok()) return two.status();
  // The fill and drain cross the stages micro-batch by micro-batch in 1F1B only.
  const bool crosses = s.parallel.pp > 1 && s.parallel.pp_schedule == PipelineSchedule::k1F1B;
  Duration bound, fill, drain;
  for (size_t j = 0; j < one->total.size(); ++j) {
    const Duration per_period = two->total[j] - one->total[j];
    const Duration stage =
        one->total[j] + Duration::FromSeconds(per_period.seconds() * static_cast<double>(m - d) /
                                              static_cast<double>(d));
    bound = std::max(bound, (crosses ? fill + drain : Duration::Zero()) + stage);
    fill += one->first_forward[j];
    drain += one->last_backward[j];
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
  auto one = Measure(*t, 1, compute);
  if (!one.ok()) return one.status();
  const int64_t m = s.micro_batches();
  Duration total1, total2;
  for (const Duration d : one->total) total1 += d;
  if (m > 1) {
    auto two = Measure(*t, 2, compute);
    if (!two.ok()) return two.status();
    for (const Duration d : two->total) total2 += d;
  }
  const double step =
      m > 1 ? total1.seconds() + (total2 - total1).seconds() * static_cast<double>(m - 1)
            : total1.seconds();
  return Duration::FromSeconds(step / static_cast<double>(one->total.size()));
}

}  // namespace sim::replay
