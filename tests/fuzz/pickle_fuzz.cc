// Fuzz target: a PyTorch memory snapshot read by the restricted unpickler
// (sim/base/pickle_reader.h) and summarised (sim/report/memory_snapshot.h).
#include <string>

#include "sim/base/pickle_reader.h"
#include "sim/report/memory_snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto value = sim::ReadPickle(bytes, "fuzz.pickle");
  if (value.ok()) (void)sim::report::SummarizeSnapshot(**value, "fuzz.pickle");
  return 0;
}
