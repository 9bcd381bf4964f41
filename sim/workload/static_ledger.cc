#include "sim/workload/static_ledger.h"

#include <algorithm>

#include "sim/workload/params.h"

namespace sim {

BytesPerParam StateBytesPerParam(Framework framework, OptimizerKind optimizer,
                                 Precision precision) {
  const bool eight_bit =
      optimizer == OptimizerKind::kAdam8bit || optimizer == OptimizerKind::kAdam8bitPaged;
  const int64_t m = eight_bit ? 1 : 4;
  const int64_t v = optimizer == OptimizerKind::kSgd ? 0 : eight_bit ? 1 : 4;
  BytesPerParam b;
  switch (framework) {
    case Framework::kDeepSpeed:
      b.weights = {"weights", precision == Precision::kFp8 ? 1 : 2, 3};
      b.gradients = {"gradients", 2, 2};
      b.master_weights = {"master_weights", 4, 1};
      b.optimizer_m = {"optimizer_m", m, 1};
      b.optimizer_v = {"optimizer_v", v, 1};
      break;
    case Framework::kFsdp:
      b.weights = {"weights", 2, 3};
      b.gradients = {"gradients", 4, 2};
      b.master_weights = {"master_weights", 4, 2};
      b.optimizer_m = {"optimizer_m", m, 2};
      b.optimizer_v = {"optimizer_v", v, 2};
      break;
    case Framework::kDdp:
      // torch.cuda.amp: the parameters are fp32 (the optimizer's too: no master copy), their
      // fp32 .grad, and DDP's flat bucket tensors holding a second copy of every gradient
      // (gradient_as_bucket_view=False, the default: torch/csrc/distributed/c10d/reducer.cpp).
      b.weights = {"weights", 4, std::nullopt};
      b.gradients = {"gradients", 8, std::nullopt};
      b.master_weights = {"master_weights", 0, std::nullopt};
      b.optimizer_m = {"optimizer_m", m, std::nullopt};
      b.optimizer_v = {"optimizer_v", v, std::nullopt};
      break;
    case Framework::kTorchtune:
      // torchtune loads the model in bf16 and trains it there: no fp32 master, AdamW's moments in
      // the parameters' dtype (torch.optim keeps state like its parameter), all sharded by FSDP2
      // fully_shard (recipes/full_finetune_distributed.py); zero 0 = one GPU.
      b.weights = {"weights", precision == Precision::kFp8 ? 1 : 2, 3};
      b.gradients = {"gradients", 2, 2};
      b.master_weights = {"master_weights", 0, 1};
      b.optimizer_m = {"optimizer_m", m == 4 ? 2 : m, 1};
      b.optimizer_v = {"optimizer_v", v == 4 ? 2 : v, 1};
      break;
    case Framework::kMegatron:
      // main_grad is fp32 for bf16 (arguments.py forces --accumulate-allreduce-grads-in-fp32
      // for bf16: "bfloat16 requires gradient accumulation and all-reduce to be done in fp32");
      // in fp16 that flag defaults off and main_grad is the parameters' fp16.
      b.weights = {"weights", 2, std::nullopt};
      b.gradients = {"gradients", precision == Precision::kFp16 ? 2 : 4, std::nullopt};
      b.master_weights = {"master_weights", 4, 1};
      b.optimizer_m = {"optimizer_m", m, 1};
      b.optimizer_v = {"optimizer_v", v, 1};
      break;
  }
  return b;
}

std::optional<StateSplit> PerGpuStateSplit(const BytesPerParam& bpp, Framework framework, int stage,
                                           int64_t params, int64_t n) {
  if (framework == Framework::kFsdp && stage == 1) return std::nullopt;
  if (framework == Framework::kMegatron && stage >= 2) return std::nullopt;
  if (framework == Framework::kDdp && stage != 0) return std::nullopt;
  if (framework == Framework::kTorchtune && stage != 0 && stage != 3) return std::nullopt;
  const int64_t shard = (params + n - 1) / n;
  auto bytes = [&](const StateKind& k) {
    const bool sharded = k.sharded_from_stage && stage >= *k.sharded_from_stage;
    return Bytes::Count(k.bytes_per_param * (sharded ? shard : params));
  };
  StateSplit s;
  // FSDP FULL_SHARD keeps no persistent bf16 weights: the fp32 shard is the parameter and the
  // bf16 copy exists only while gathered (the replay's gathered_params).
  s.weights = (framework == Framework::kFsdp && stage == 3) ? Bytes() : bytes(bpp.weights);
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
