// Fuzz target: a Hugging Face config.json imported as a model file (sim/config/hf_import.h).
#include <string>

#include "sim/config/hf_import.h"
#include "sim/config/loaders.h"
#include "sim/workload/params.h"
#include "yaml-cpp/yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto imported = sim::config::ImportHfConfig(text, "fuzz.json", "fuzz", {"sliding_window"});
  if (!imported.ok()) return 0;
  // What it wrote loads as a model file, and counts.
  sim::config::YamlErrors errors("fuzz.yaml");
  if (auto m = sim::config::ReadModel(YAML::Load(imported->yaml), "fuzz.yaml", errors)) {
    (void)sim::CountParameters(*m);
  }
  return 0;
}
