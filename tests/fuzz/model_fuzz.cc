// Fuzz target: a model file.
#include "sim/config/catalog.h"
#include "sim/workload/params.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = sim::fuzz::WriteInput(data, size, ".yaml");
  if (auto m = sim::config::LoadModelFile(path); m.ok()) (void)sim::CountParameters(*m);
  return 0;
}
