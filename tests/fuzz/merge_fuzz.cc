// Fuzz target: `stepsim merge`'s shard reader: a plan or sweep report read back, merged and
// written again.
#include "nlohmann/json.hpp"
#include "sim/explore/plan_report.h"
#include "sim/explore/sweep.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(data, data + size);
  } catch (const nlohmann::json::exception&) {
    return 0;  // the command reports "not JSON"
  }
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
