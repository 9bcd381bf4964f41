#include "sim/explore/runner.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "sim/base/parallel.h"
#include "sim/base/stop_request.h"
#include "sim/cost/collective_cost.h"
#include "sim/report/run_summary.h"

namespace sim::explore {

int DefaultJobs() { return std::max(1u, std::thread::hardware_concurrency()); }

namespace {

// Replays `scenario` (or keeps why it could not be loaded) into `out`; Cancelled without a
// replay once a stop is requested (sim/base/stop_request.h). Each worker keeps the
// collective models of the clusters it replayed (configurations of one cluster share them); the
// caller's thread keeps its own across calls.
void RunOne(const absl::StatusOr<Scenario>& scenario, ConfigResult& out) {
  thread_local cost::CostModelCache models;
  if (StopRequested()) {
    out.status = absl::CancelledError("interrupted");
  } else if (!scenario.ok()) {
    out.status = scenario.status();
  } else if (auto r = replay::Simulate(*scenario, {}, models); !r.ok()) {
    out.status = r.status();
  } else {
    out.summary = report::Summarize(*scenario, *r);
  }
}

}  // namespace

std::vector<ConfigResult> RunConfigs(const config::ScenarioLoader& loader,
                                     const std::vector<std::vector<config::Override>>& configs,
                                     int jobs, const Progress& progress) {
  std::vector<ConfigResult> results(configs.size());
  std::atomic<size_t> done{0};
  ParallelFor(configs.size(), jobs, [&](size_t i) {
    results[i].overrides = configs[i];
    if (StopRequested()) {  // not even loaded: its result is discarded
      results[i].status = absl::CancelledError("interrupted");
    } else {
      RunOne(loader.Load(configs[i]), results[i]);
    }
    const size_t d = ++done;
    if (progress) progress(d, configs.size());
  });
  return results;
}

std::vector<ConfigResult> RunScenarios(const std::vector<Scenario>& scenarios, int jobs,
                                       const Progress& progress) {
  std::vector<ConfigResult> results(scenarios.size());
  std::atomic<size_t> done{0};
  ParallelFor(scenarios.size(), jobs, [&](size_t i) {
    RunOne(scenarios[i], results[i]);
    const size_t d = ++done;
    if (progress) progress(d, scenarios.size());
  });
  return results;
}

}  // namespace sim::explore
