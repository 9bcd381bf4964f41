#pragma once
// Runs many configurations of one scenario in parallel and returns their reports in input order
// (byte-identical whatever the thread count: each result lands in its own slot).

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/config/catalog.h"
#include "sim/replay/replay.h"
#include "sim/report/run_summary.h"

namespace sim::explore {

struct ConfigResult {
  std::vector<config::Override> overrides;
  absl::Status status;                        // why the configuration could not run
  std::optional<report::RunSummary> summary;  // the run's result when status is OK
};

// Called from worker threads with (done, total); must be thread-safe.
using Progress = std::function<void(size_t done, size_t total)>;

std::vector<ConfigResult> RunConfigs(const config::ScenarioLoader& loader,
                                     const std::vector<std::vector<config::Override>>& configs,
                                     int jobs, const Progress& progress);
// The same for scenarios already loaded (the plan's layouts, and their short screening steps:
// Scenario::WithMicroBatches), with nothing to parse again; each result's `overrides` is empty.
std::vector<ConfigResult> RunScenarios(const std::vector<Scenario>& scenarios, int jobs,
                                       const Progress& progress);

// Threads to use when the user did not say: every core.
int DefaultJobs();

}  // namespace sim::explore
