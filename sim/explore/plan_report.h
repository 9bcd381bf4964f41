#pragma once
// Renderings of a plan (PlanResult): its JSON report, its text, and the reader that turns a
// `stepsim plan --json` file back into a PlanResult (for `stepsim merge`), checking every key's
// presence, type and range so that a damaged shard is refused with the key that is wrong.

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/explore/plan.h"

namespace sim::explore {

nlohmann::ordered_json PlanJson(const PlanResult& plan);
// "ZeRO-3 mb1 full", or "megatron tp8 pp16 v2 ends 3/3 sp mb1 selective": v the model chunks
// of the interleaved schedule, ends the layers of uneven first/last (virtual) stages.
std::string ConfigLabel(const PlanConfig& c);
std::string PlanText(const PlanResult& plan);
// "GPU" or "GPU [KEY=V, ...]": a GPU type's name under one --search variant.
std::string TypeKey(const std::string& gpu, const std::string& variant);

// `origin` (the file name) prefixes every error: "FILE: key.path: what was expected".
absl::StatusOr<PlanResult> PlanFromJson(const nlohmann::ordered_json& j, const std::string& origin);

}  // namespace sim::explore
