#pragma once
// `stepsim validate`: replays validation cases and compares stepsim's predictions with what real
// runs measured, each metric normalised to the source's own convention first
// (docs/model.md "Validation data"):
//
//   stepsim      MFU = model FLOPs (fwd + bwd, attention halved by flash) / (step·GPUs·peak)
//   mosaicml     per sequence 3·(2·N·s + 4·L·h·s²), N all parameters; HFU uses 4 instead of 3
//                when activations are checkpointed (llm-foundry benchmarking README)
//   torchtitan   per token 6·(N − V·h) + 12·L·h·s (embedding excluded; torchtitan train.py)
//   megatron-hw  per step 96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h)) (Narayanan et al. SC21 eq. 3)
//   korthikanti  per step 72·B·s·L·h²·(1 + s/(6h) + V/(12·h·L)) (Korthikanti et al. eq. 7);
//                HFU with full recompute uses the 96 form
// Memory: `allocated` and `active` compare with the allocated peak, `reserved` with the
// allocated peak plus the allocator-overhead estimate.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "sim/report/run_summary.h"
#include "sim/spec/validation_case.h"

namespace sim::validate {

struct MetricResult {
  std::string metric;
  double measured = 0, predicted = 0, error_pct = 0;
};

struct CaseResult {
  std::string id, source, group;  // group: the case file's name, for per-source MAPE
  std::vector<MetricResult> metrics;
  std::optional<std::string> skipped;
  // Set when the replay does not fit the GPU (or the node's host memory) although the run was
  // measured, so it fitted: a memory error stepsim makes, said beside the compared metrics.
  std::optional<std::string> not_fitting;
};

// The prediction of `metric` for a case in its source's convention; nullopt if the convention
// does not define it (e.g. HFU in torchtitan's).
std::optional<double> Predict(const std::string& metric, const ValidationCase& c,
                              const report::RunSummary& r);

// Replays every case (in parallel, results in input order). Cases marked `skip`, and cases
// whose layout the replay does not build yet, are reported as skipped with the reason.
std::vector<CaseResult> RunCases(const std::vector<ValidationCase>& cases, int jobs);

// Metric -> mean absolute percentage error over the results that ran.
std::map<std::string, double> MapeByMetric(const std::vector<CaseResult>& results);

nlohmann::ordered_json ValidationJson(const std::vector<CaseResult>& results);
std::string ValidationText(const std::vector<CaseResult>& results);

}  // namespace sim::validate
