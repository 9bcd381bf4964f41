#pragma once
// A validation case (scenarios/validation/*.yaml, SPEC §6): a scenario plus what a real run
// measured, the conventions of its source and the citation.

#include <map>
#include <optional>
#include <string>

#include "sim/spec/scenario.h"

namespace sim {

// How a source counted FLOPs for its MFU/HFU (../shared/validation/README.md).
enum class FlopConvention { kStepsim, kMegatronHw, kKorthikanti, kMosaicml, kTorchtitan };
// What a source's memory figure is.
enum class MemoryConvention { kAllocated, kReserved, kActive };

struct ValidationCase {
  std::string id;
  std::string source;
  std::string file;
  int line = 0;
  // Metric name -> measured value: step_s, mfu, hfu, tokens_per_s_per_gpu (numbers), and
  // peak_memory in bytes.
  std::map<std::string, double> measured;
  FlopConvention flops = FlopConvention::kStepsim;
  MemoryConvention memory = MemoryConvention::kAllocated;
  // Set when the case file says the run uses something stepsim does not model.
  std::optional<std::string> skip;
  Scenario scenario;
};

}  // namespace sim
