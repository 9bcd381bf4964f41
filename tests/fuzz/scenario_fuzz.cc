// Fuzz target: a scenario file, loaded and validated (errors are answers; crashes are not).
#include "sim/config/catalog.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = sim::fuzz::WriteInput(data, size, ".yaml");
  (void)sim::config::LoadScenario(sim::fuzz::Root(), path, {});
  return 0;
}
