#pragma once
// A plan request's options from text, as `stepsim plan --NAME VALUE` and the Python bindings'
// `stepsim.plan(NAME=VALUE)` give them, so both accept the same values with the same errors.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/config/catalog.h"
#include "sim/explore/plan.h"

namespace sim::explore {

// The names PlanOption accepts (the command's flags, without "--"): gpu, tokens, seq-len,
// batch-tokens, max-gpus, jobs, days, budget, price, framework, finetune, lora-rank, offload,
// shard, set, search, gpus, headroom, count-gap, power-mw.
const std::vector<std::string>& PlanOptionNames();

// Sets option `name` of `req` from `value`; `shown` names the option in errors ("--tokens" on
// the command line, "tokens" in Python). `price` (GPU=USD) adds one price each call; `gpu` and
// `offload` take comma-separated lists. InvalidArgument with what was expected, or with the
// nearest option name for an unknown one.
absl::Status SetPlanOption(PlanRequest& req, absl::string_view name, absl::string_view value,
                           absl::string_view shown);
// SetPlanOption without recording the name in `req.given`.
absl::Status ApplyPlanOption(PlanRequest& req, absl::string_view name, absl::string_view value,
                             absl::string_view shown);

// The GPUs a plan searches when none is named: every GPU of the catalog that has a node type,
// in the node catalog's order.
absl::StatusOr<std::vector<std::string>> DefaultPlanGpus(const config::DataRoot& root);

}  // namespace sim::explore
