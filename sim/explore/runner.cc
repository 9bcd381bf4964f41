#include "sim/explore/runner.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "sim/base/parallel.h"
#include "sim/cost/collective_cost.h"
#include "sim/report/run_summary.h"

namespace sim::explore {

int DefaultJobs() { return std::max(1u, std::thread::hardware_concurrency()); }

std::vector<ConfigResult> RunConfigs(const config::ScenarioLoader& loader,
                                     const std::vector<std::vector<config::Override>>& configs,
                                     int jobs, const Progress& progress) {
  std::vector<ConfigResult> results(configs.size());
  std::atomic<size_t> done{0};
  ParallelFor(configs.size(), jobs, [&](size_t i) {
    // Each worker keeps the collective models of the clusters it replayed (configurations of
    // one cluster share them); the caller's thread keeps its own across calls.
    thread_local cost::CostModelCache models;
    ConfigResult& out = results[i];
    out.overrides = configs[i];
    auto scenario = loader.Load(configs[i]);
    if (!scenario.ok()) {
      out.status = scenario.status();
    } else if (auto r = replay::Simulate(*scenario, {}, models); !r.ok()) {
      out.status = r.status();
    } else {
      out.summary = report::Summarize(*scenario, *r);
    }
    const size_t d = ++done;
    if (progress) progress(d, configs.size());
  });
  return results;
}

}  // namespace sim::explore
