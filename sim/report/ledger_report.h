#pragma once
// `stepsim ledger`: the static ledger (docs/model.md "Model states") and, with a model and a
// sequence length, the op-level activation bytes per layer (docs/model.md "Activations"), as a
// table for people and as JSON (docs/model.md "The report" keys: params, bytes_per_param,
// per_gpu_bytes, activation_bytes_per_layer).

#include <cstdint>
#include <optional>
#include <string>

#include "nlohmann/json.hpp"
#include "sim/spec/model.h"
#include "sim/spec/scenario.h"
#include "sim/workload/layer_ops.h"

namespace sim::report {

struct LedgerInput {
  std::optional<ModelSpec> model;
  int64_t params = 0;  // derived from the model, or given with --params
  // A mixture of experts: the parameters one token computes with (0 for a dense model).
  int64_t active_params = 0;
  int64_t gpus = 8;  // the sharding degree N
  Framework framework = Framework::kDeepSpeed;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  Precision precision = Precision::kBf16;
  std::optional<ActivationShape> activations;  // needs a model
  // What the selective row re-runs (Megatron-Core --recompute-modules).
  RecomputeModules recompute_modules = kDefaultRecomputeModules;
  std::optional<Bytes> capacity;  // a GPU's HBM, to mark what fits
  // DeepSpeed-estimator view: GPUs per node (N = gpus_per_node × nodes) and the largest single
  // module's parameters (derived from the model, or given).
  int64_t gpus_per_node = 8;
  int64_t largest_layer_params = 0;
};

nlohmann::ordered_json LedgerJson(const LedgerInput& in);
std::string LedgerText(const LedgerInput& in);

}  // namespace sim::report
