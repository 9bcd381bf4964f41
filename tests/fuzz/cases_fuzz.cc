// Fuzz target: a validation case file (its scenarios resolved, not replayed).
#include "sim/config/catalog.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = sim::fuzz::WriteInput(data, size, ".yaml");
  (void)sim::config::LoadCases(sim::fuzz::Root(), path);
  return 0;
}
