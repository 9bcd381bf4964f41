// Fuzz target: a PyTorch profiler (Kineto) trace read for `calibrate --trace`
// (sim/validate/trace_fit.h ReadKernelTrace).
#include <string>

#include "sim/validate/trace_fit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)sim::validate::ReadKernelTrace(text, "fuzz.json");
  return 0;
}
