#include "sim/workload/pipeline_schedule.h"

#include <algorithm>

#include "sim/base/check.h"
#include "sim/spec/stage_split.h"

namespace sim {

namespace {

std::vector<PipelineUnit> GpipeOrder(int32_t m) {
  std::vector<PipelineUnit> units;
  for (int32_t mb = 0; mb < m; ++mb) units.push_back({0, mb, true});
  // Backward in reverse: the last micro-batch's gradients are the first ready (GPipe, §2.2).
  for (int32_t mb = m - 1; mb >= 0; --mb) units.push_back({0, mb, false});
  return units;
}

std::vector<PipelineUnit> OneFOneBOrder(int32_t p, int32_t s, int32_t m) {
  const int32_t warmup = std::min(p - s - 1, m);
  std::vector<PipelineUnit> units;
  for (int32_t mb = 0; mb < warmup; ++mb) units.push_back({0, mb, true});
  for (int32_t i = 0; i < m - warmup; ++i) {
    units.push_back({0, warmup + i, true});
    units.push_back({0, i, false});
  }
  for (int32_t mb = m - warmup; mb < m; ++mb) units.push_back({0, mb, false});
  return units;
}

std::vector<PipelineUnit> InterleavedOrder(int32_t p, int32_t v, int32_t s, int32_t m) {
  const int32_t total = m * v;
  const int32_t warmup = std::min((p - s - 1) * 2 + (v - 1) * p, total);
  auto unit = [&](int32_t k, bool forward) {
    const int32_t in_group = (k / p) % v;
    const int32_t chunk = forward ? in_group : v - 1 - in_group;
    return PipelineUnit{chunk, (k / (p * v)) * p + k % p, forward};
  };
  std::vector<PipelineUnit> units;
  for (int32_t k = 0; k < warmup; ++k) units.push_back(unit(k, true));
  for (int32_t i = 0; i < total - warmup; ++i) {
    units.push_back(unit(warmup + i, true));
    units.push_back(unit(i, false));
  }
  for (int32_t k = total - warmup; k < total; ++k) units.push_back(unit(k, false));
  return units;
}

}  // namespace

std::vector<std::vector<PipelineUnit>> PipelineOrder(PipelineSchedule schedule, int64_t stages,
                                                     int64_t chunks, int64_t micro_batches) {
  const auto p = static_cast<int32_t>(stages), v = static_cast<int32_t>(chunks),
             m = static_cast<int32_t>(micro_batches);
  std::vector<std::vector<PipelineUnit>> order(p);
  for (int32_t s = 0; s < p; ++s) {
    switch (schedule) {
      case PipelineSchedule::kGpipe:
        order[s] = GpipeOrder(m);
        break;
      case PipelineSchedule::k1F1B:
        order[s] = OneFOneBOrder(p, s, m);
        break;
      case PipelineSchedule::kInterleaved:
        order[s] = v > 1 ? InterleavedOrder(p, v, s, m) : OneFOneBOrder(p, s, m);
        break;
    }
  }
  return order;
}

std::vector<PipelineSlot> PipelineEmission(const std::vector<std::vector<PipelineUnit>>& order,
                                           int64_t chunks) {
  const auto p = static_cast<int32_t>(order.size());
  const auto vstages = static_cast<int32_t>(p * chunks);
  int32_t m = 0;
  for (const auto& units : order) {
    for (const PipelineUnit& u : units) m = std::max(m, u.micro_batch + 1);
  }
  // step_*[virtual stage · m + micro-batch]: the step of that forward / backward, once ranked
  // (-1: not yet). Stages are visited in turn, each as far as its receives allow.
  std::vector<int64_t> step_fwd(static_cast<size_t>(vstages) * m, -1), step_bwd = step_fwd;
  struct Ranked {
    int64_t step;
    PipelineSlot slot;
  };
  std::vector<Ranked> ranked;
  std::vector<size_t> next(p, 0);
  std::vector<int64_t> last(p, -1);  // per stage, its previous unit's step
  size_t remaining = 0;
  for (const auto& units : order) remaining += units.size();
  ranked.reserve(remaining);
  while (remaining > 0) {
    bool progress = false;
    for (int32_t stage = 0; stage < p; ++stage) {
      for (; next[stage] < order[stage].size(); ++next[stage], --remaining, progress = true) {
        const PipelineUnit& u = order[stage][next[stage]];
        const int32_t vs = u.chunk * p + stage;
        int64_t after = last[stage];
        if ((u.forward && vs > 0) || (!u.forward && vs < vstages - 1)) {
          const int64_t received = u.forward
                                       ? step_fwd[static_cast<size_t>(vs - 1) * m + u.micro_batch]
                                       : step_bwd[static_cast<size_t>(vs + 1) * m + u.micro_batch];
          if (received < 0) break;
          after = std::max(after, received);
        }
        last[stage] = after + 1;
        (u.forward ? step_fwd : step_bwd)[static_cast<size_t>(vs) * m + u.micro_batch] = after + 1;
        ranked.push_back({after + 1, {stage, static_cast<int32_t>(next[stage])}});
      }
    }
    SIM_CHECK(progress, "pipeline schedule deadlocked");
  }
  // A stage runs one unit per step, so no two units share both.
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    return a.step != b.step ? a.step < b.step : a.slot.stage < b.slot.stage;
  });
  std::vector<PipelineSlot> slots;
  slots.reserve(ranked.size());
  for (const Ranked& r : ranked) slots.push_back(r.slot);
  return slots;
}

std::vector<int64_t> LayersPerVirtualStage(const Scenario& s) {
  auto split = SplitLayers(s.model.layers, s.parallel.pp, s.parallel.pp_chunks,
                           s.parallel.first_stage_layers, s.parallel.last_stage_layers,
                           s.parallel.pp_layers);
  SIM_CHECK(split.ok(), "the scenario loader let through a pipeline split that does not work out");
  return *std::move(split);
}

}  // namespace sim
