#include "sim/workload/static_ledger.h"

#include <algorithm>

#include "sim/workload/params.h"
#include "sim/workload/policy/framework_traits.h"

namespace sim {

BytesPerParam StateBytesPerParam(Framework framework, OptimizerKind optimizer,
                                 Precision precision) {
  const bool eight_bit =
      optimizer == OptimizerKind::kAdam8bit || optimizer == OptimizerKind::kAdam8bitPaged;
  const int64_t m = eight_bit ? 1 : 4;
  const int64_t v = optimizer == OptimizerKind::kSgd ? 0 : eight_bit ? 1 : 4;
  return TraitsOf(framework).StateBytes(m, v, precision);
}

std::optional<StateSplit> PerGpuStateSplit(const BytesPerParam& bpp, Framework framework, int stage,
                                           int64_t params, int64_t n) {
  const FrameworkTraits& traits = TraitsOf(framework);
  if (!traits.HasStage(stage)) return std::nullopt;
  const int64_t shard = (params + n - 1) / n;
  auto bytes = [&](const StateKind& k) {
    const bool sharded = k.sharded_from_stage && stage >= *k.sharded_from_stage;
    return Bytes::Count(k.bytes_per_param * (sharded ? shard : params));
  };
  StateSplit s;
  s.weights = traits.KeepsWeightsAt(stage) ? bytes(bpp.weights) : Bytes();
  s.gradients = bytes(bpp.gradients);
  s.optimizer = bytes(bpp.master_weights) + bytes(bpp.optimizer_m) + bytes(bpp.optimizer_v);
  return s;
}

std::optional<Bytes> PerGpuStateBytes(const BytesPerParam& bpp, Framework framework, int stage,
                                      int64_t params, int64_t n) {
  auto s = PerGpuStateSplit(bpp, framework, stage, params, n);
  if (!s) return std::nullopt;
  return s->total();
}

}  // namespace sim

namespace sim {

DeepSpeedEstimate EstimateDeepSpeed(const DeepSpeedEstimatorInput& in) {
  const double p = static_cast<double>(in.params);
  const double ll = static_cast<double>(in.largest_layer_params);
  const double gpn = static_cast<double>(in.gpus_per_node);
  const double nodes = static_cast<double>(in.nodes);
  const double total_gpus = gpn * nodes;
  const double f = in.buffer_factor;
  // int() truncation as in DeepSpeed's Python.
  auto trunc = [](double v) { return Bytes::Count(static_cast<int64_t>(v)); };
  if (in.stage == 2) {
    if (in.offload_optimizer) {
      return {trunc(2 * p), trunc(p * std::max(4 * total_gpus, 16.0) * f)};
    }
    return {trunc(4 * p + static_cast<double>(static_cast<int64_t>(16 * p / total_gpus))),
            trunc(p * 4 * gpn * f)};
  }
  const double largest = 4 * ll;
  if (in.offload_param) {
    const double cpu = in.zero_init ? p * 18 / nodes * f : p * std::max(4 * gpn, 18 / nodes) * f;
    return {trunc(largest), trunc(cpu)};
  }
  if (in.offload_optimizer) {
    const double cpu = in.zero_init ? p * 16 / nodes * f : p * std::max(4 * gpn, 16 / nodes) * f;
    return {trunc(largest + static_cast<double>(static_cast<int64_t>(2 * p / total_gpus))),
            trunc(cpu)};
  }
  const double cpu = in.zero_init ? ll * 4 * gpn * f : p * 4 * gpn * f;
  return {trunc(largest + static_cast<double>(static_cast<int64_t>(18 * p / total_gpus))),
          trunc(cpu)};
}

int64_t LargestModuleParams(const ModelSpec& m) {
  const int64_t mlp_matrix = m.hidden * m.ffn_hidden + (m.bias ? m.ffn_hidden : 0);
  return std::max(CountParameters(m).embedding, mlp_matrix);
}

}  // namespace sim
