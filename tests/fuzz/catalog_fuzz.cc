// Fuzz target: the GPU catalog and the node catalog (the same input read as both; nodes
// against the shipped GPUs).
#include "sim/config/catalog.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = sim::fuzz::WriteInput(data, size, ".yaml");
  (void)sim::config::LoadGpuCatalog(path);
  static const auto gpus = sim::config::LoadGpuCatalog(sim::fuzz::Root().GpuCatalogFile());
  if (gpus.ok()) (void)sim::config::LoadNodeCatalog(path, *gpus);
  return 0;
}
