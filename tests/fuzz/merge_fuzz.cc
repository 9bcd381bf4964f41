// Fuzz target: `stepsim merge`'s shard reader: a plan or sweep report read back, merged and
// written again.
#include "nlohmann/json.hpp"
#include "sim/explore/plan_report.h"
#include "sim/explore/sweep.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = sim::explore::ParseShardJson(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  if (!parsed.ok()) return 0;  // the command reports it
  const nlohmann::ordered_json j = *std::move(parsed);
  if (j.is_object() && j.contains("pareto")) {
    auto p = sim::explore::PlanFromJson(j, "fuzz.json");
    if (!p.ok()) return 0;
    auto merged = sim::explore::MergePlans({*p});
    if (merged.ok()) (void)sim::explore::PlanJson(*merged).dump(2);
    return 0;
  }
  auto merged = sim::explore::MergeSweeps({j}, {"fuzz.json"});
  if (merged.ok()) (void)merged->dump(2);
  return 0;
}
