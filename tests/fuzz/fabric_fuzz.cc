// Fuzz target: a fabric file and a cluster topology file (the same input read as both).
#include "sim/config/catalog.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = sim::fuzz::WriteInput(data, size, ".yaml");
  (void)sim::config::LoadFabric(sim::fuzz::Root(), path);
  (void)sim::config::LoadClusterTopology(sim::fuzz::Root(), path);
  return 0;
}
