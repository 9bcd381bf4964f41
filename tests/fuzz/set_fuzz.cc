// Fuzz target: --set overrides, one KEY=VALUE per line, applied to the golden ZeRO-3 scenario;
// a scenario that loads is lowered too (bounded by the loader's limits).
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "sim/config/catalog.h"
#include "sim/workload/lowering.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<sim::config::Override> overrides;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    auto o = sim::config::ParseOverride(line);
    if (!o.ok()) return 0;
    overrides.push_back(*o);
  }
  static const auto loader = sim::config::ScenarioLoader::Open(
      sim::fuzz::Root(), STEPSIM_SOURCE_DIR "/tests/golden/zero3.yaml");
  if (!loader.ok()) return 0;
  auto s = loader->Load(overrides);
  if (s.ok() && s->micro_batches() * (s->model.layers + 2) <= 2000) (void)sim::Lower(*s);
  return 0;
}
