// Fuzz target: a job's Megatron-LM arguments, DeepSpeed config, torchtitan job config or NeMo
// recipe imported as a scenario (sim/config/job_import.h).
#include <string>

#include "sim/config/catalog.h"
#include "sim/config/job_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  sim::config::JobContext context;
  context.node = "dgx-h100";
  context.gpus_per_node = 8;
  context.gpus = 64;
  context.model = "llama2-7b";
  for (int reader : {0, 1, 2, 3}) {
    // The NeMo reader builds its model from the recipe (no --model), with one Hydra override.
    sim::config::JobContext recipe = context;
    recipe.model.reset();
    auto imported =
        reader == 0   ? sim::config::ImportMegatronArgs(text, "fuzz.args", context)
        : reader == 1 ? sim::config::ImportDeepSpeedConfig(text, "fuzz.json", context, 2048)
        : reader == 2
            ? sim::config::ImportTorchtitanToml(text, "fuzz.toml", context)
            : sim::config::ImportNemoRecipe(text, "fuzz.yaml", recipe, {"+model.fuzzed=1"}, 32000);
    if (!imported.ok()) continue;
    // What it wrote parses as a scenario: loaded or refused with located errors, never garbage.
    auto loader = sim::config::ScenarioLoader::FromText(sim::config::DataRoot{STEPSIM_SOURCE_DIR},
                                                        imported->yaml, "fuzz.yaml");
    if (loader.ok()) (void)loader->Load({});
  }
  return 0;
}
