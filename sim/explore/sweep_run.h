#pragma once
// A sweep and a comparison as `stepsim sweep` / `stepsim compare` and the Python bindings
// (tools/python) run them: which configurations, in which order, and when the whole request is
// bad input rather than an answer. The callers only turn their arguments into a request and the
// outcome into tables, JSON or Python objects, so both give the same reports.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/config/catalog.h"
#include "sim/explore/grid.h"
#include "sim/explore/runner.h"
#include "sim/explore/sweep.h"

namespace sim::explore {

struct SweepRequest {
  std::vector<config::Override> sets;  // applied to every configuration, before its vary
  std::vector<Vary> varies;            // the product, the first key outermost
  std::optional<Shard> shard;          // only this slice of the product
  int jobs = 1;
};

struct SweepOutcome {
  std::vector<std::string> keys;  // the varied keys, in order
  Slice slice;                    // which configurations of the product ran
  size_t total = 0;               // configurations in the whole product
  size_t labels_from = 0;         // each result's overrides from here on are its vary
  std::vector<ConfigResult> results;
  int jobs = 1;  // the request's, for SweepJson
};

// InvalidArgument without a vary; when every configuration fails, the first one's Status (the
// sweep itself is wrong: a bad key or value). Some failing is an answer (a batch that does not
// divide), reported per row.
absl::StatusOr<SweepOutcome> RunSweep(const config::ScenarioLoader& loader,
                                      const SweepRequest& request, const Progress& progress);
// SweepJson of the outcome (`stepsim sweep --json`).
nlohmann::ordered_json SweepJson(const std::string& scenario, const SweepOutcome& outcome);
// SweepJson(...).dump(2) of the outcome, serialized on its jobs' threads (SweepJsonText).
std::string SweepJsonText(const std::string& scenario, const SweepOutcome& outcome);

struct CompareRequest {
  std::vector<config::Override> sets;
  // Empty: the framework's sharding rows (CompareStages); else the fine-tuning methods
  // (FinetuneStages: full, lora, qlora, offload).
  std::vector<std::string> finetune;
  // Non-empty: one row per expert-parallel degree instead (ExpertParallelStages).
  std::vector<std::string> ep;
  int jobs = 1;
};

struct CompareOutcome {
  Scenario base;  // the scenario with the request's sets, before any row's overrides
  std::vector<CompareStage> stages;
  std::vector<ConfigResult> results;  // one per stage, in order
};

// The base scenario's load error, an unknown fine-tuning method, or every row failing (the
// first one's Status) is an error; some rows failing is an answer.
absl::StatusOr<CompareOutcome> RunCompare(const config::ScenarioLoader& loader,
                                          const CompareRequest& request, const Progress& progress);

// Every configuration failing means the request itself is wrong: the first reason; OK when one
// ran.
absl::Status AllFailed(const std::vector<ConfigResult>& results);

}  // namespace sim::explore
