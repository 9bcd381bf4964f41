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

std::vector<int64_t> LayersPerVirtualStage(const Scenario& s) {
  auto split = SplitLayers(s.model.layers, s.parallel.pp, s.parallel.pp_chunks,
                           s.parallel.first_stage_layers, s.parallel.last_stage_layers);
  SIM_CHECK(split.ok(), "the scenario loader let through a pipeline split that does not work out");
  return *std::move(split);
}

}  // namespace sim
