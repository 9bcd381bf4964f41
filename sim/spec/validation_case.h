#pragma once
// A validation case (scenarios/validation/*.yaml, docs/model.md "Validation data"): a scenario plus
// what a real run measured, the conventions of its source and the citation.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "sim/spec/scenario.h"

namespace sim {

// The inputs of DeepSpeed's model-state memory estimator (see EstimateDeepSpeed in
// sim/workload/static_ledger.h).
struct DeepSpeedEstimatorInput {
  int stage = 3;  // 2 or 3
  int64_t params = 0;
  int64_t largest_layer_params = 0;
  int64_t gpus_per_node = 1;
  int64_t nodes = 1;
  bool offload_optimizer = false;
  bool offload_param = false;  // ZeRO-3 only; implies offload_optimizer
  bool zero_init = true;       // ZeRO-3 only
  double buffer_factor = 1.5;
};

// How a source counted FLOPs for its MFU/HFU (docs/model.md "Validation data").
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
  // A case either replays a scenario or, for the DeepSpeed-estimator rows, checks the static
  // ledger's estimator view (measured gpu_memory / cpu_memory).
  std::optional<DeepSpeedEstimatorInput> deepspeed_estimator;
  Scenario scenario;
  // An estimator row whose configuration is also replayed: its GPU peak (less the runtime
  // reserve) is reported beside the estimate as metric `replayed_gpu_memory`.
  bool replay_beside_estimator = false;
};

}  // namespace sim
