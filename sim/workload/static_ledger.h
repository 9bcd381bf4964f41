#pragma once
// The static ledger of model states (docs/model.md "Model states"): bytes per parameter by kind and
// per-GPU model states for ZeRO 0–3 at a sharding degree N. This is the textbook arithmetic that
// the replay's first row shows; the replay allocates exactly these persistent states, then adds
// transients.

#include <array>
#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "sim/base/units.h"
#include "sim/spec/scenario.h"
#include "sim/spec/validation_case.h"

namespace sim {

// One kind of per-parameter state, and from which ZeRO stage on it is sharded over N.
struct StateKind {
  absl::string_view name;
  int64_t bytes_per_param = 0;
  // Sharded (1/N per GPU) at ZeRO stages >= this; nullopt = never sharded by data parallelism.
  std::optional<int> sharded_from_stage;
};

// What each parameter costs under a framework preset. Kinds in a fixed order:
// weights, gradients, master_weights, optimizer_m, optimizer_v.
struct BytesPerParam {
  StateKind weights, gradients, master_weights, optimizer_m, optimizer_v;
  int64_t total() const {
    return weights.bytes_per_param + gradients.bytes_per_param + master_weights.bytes_per_param +
           optimizer_m.bytes_per_param + optimizer_v.bytes_per_param;
  }
  int64_t optimizer_state() const {
    return master_weights.bytes_per_param + optimizer_m.bytes_per_param +
           optimizer_v.bytes_per_param;
  }
};

// docs/model.md "Model states" table rows, by framework:
//  deepspeed: weights 2 (fp8: 1, the textbook row), grads 2 in the compute dtype, fp32 master 4,
//             optimizer m/v: AdamW 4 + 4, SGD momentum 4 + 0, 8-bit Adam 1 + 1.
//  fsdp:      the sharded fp32 parameter is the master copy; gradients kept sharded in fp32
//             (4 B); the bf16 unsharded weights are transient (FULL_SHARD) or held from forward
//             to backward (SHARD_GRAD_OP, NO_SHARD): 2 B counted with the weights.
//  megatron:  main_grad accumulation buffer 4 B in fp32 (bf16 training), 2 B in fp16 training
//             (--accumulate-allreduce-grads-in-fp32 is forced only for bf16); the distributed
//             optimizer shards master and m/v over DP: 6 + 12/N B/param, else 18.
BytesPerParam StateBytesPerParam(Framework framework, OptimizerKind optimizer, Precision precision);

// Per-GPU model-state bytes at ZeRO `stage` for `params` parameters sharded over N GPUs:
// each kind contributes bytes × (sharded ? ceil(P / N) : P) — the flat buffers frameworks
// shard are padded to a multiple of N. nullopt when the framework has no such stage
// (fsdp ZeRO-1; megatron ZeRO-2/3). For fsdp, stage 3 = FULL_SHARD (bf16 weights transient,
// so 0 persistent), 2 = SHARD_GRAD_OP, 0 = NO_SHARD.
std::optional<Bytes> PerGpuStateBytes(const BytesPerParam& bpp, Framework framework, int stage,
                                      int64_t params, int64_t n);

// The same split by kind (weights, gradients, optimizer = master + m + v). With adapters
// (training.finetune), `weights` are the frozen base weights and `adapters` the trainable
// adapters' own weight copies; gradients and optimizer are the adapters'. What offload moves
// off the GPU is counted in `host` (DRAM) or `nvme` instead, per GPU.
struct StateSplit {
  Bytes weights, gradients, optimizer;
  Bytes adapters;
  Bytes host, nvme;
  // Gradients are allocated by the backward and freed after the optimizer step
  // (optimizer.zero_grad(set_to_none=True)), not held for the whole step: `gradients` then says
  // what they come to when all exist.
  bool lazy_gradients = false;
  // With lazy gradients: the gradient memory held for the whole step all the same (PyTorch DDP's
  // bucket tensors, which .grad is copied into), and the bytes per trained parameter of what the
  // backward allocates.
  Bytes kept_gradients;
  int64_t lazy_gradient_bytes_per_param = 0;
  Bytes total() const { return weights + adapters + gradients + optimizer; }
};
std::optional<StateSplit> PerGpuStateSplit(const BytesPerParam& bpp, Framework framework, int stage,
                                           int64_t params, int64_t n);

}  // namespace sim

namespace sim {

// DeepSpeed's own estimator of ZeRO model-state memory (deepspeed.runtime.zero.stage_1_and_2.
// estimate_zero2_model_states_mem_needs and stage3.estimate_zero3_model_states_mem_needs, as
// documented in DeepSpeed's "Memory Requirements" page), reproduced so the ledger can be checked
// against it. P total parameters, G = GPUs per node × nodes, f = 1.5 CPU buffer factor, LL the
// largest layer's parameters:
//   ZeRO-2, no offload:      GPU 4P + 16P/G            CPU P·4·gpus_per_node·f
//   ZeRO-2, optimizer→CPU:   GPU 2P                    CPU P·max(4G, 16)·f
//   ZeRO-3, no offload:      GPU 4LL + 18P/G           CPU zero_init ? LL·4·gpus_per_node·f
//                                                                    : P·4·gpus_per_node·f
//   ZeRO-3, optimizer→CPU:   GPU 4LL + 2P/G            CPU P·(zero_init ? 16/nodes
//                                                              : max(4·gpus_per_node, 16/nodes))·f
//   ZeRO-3, params+opt→CPU:  GPU 4LL                   CPU P·(zero_init ? 18/nodes
//                                                              : max(4·gpus_per_node, 18/nodes))·f
// (integer division as in the source: int(18·P/G)). The 4·LL term is the largest layer's
// fp16 parameters and gradients gathered at once.
struct DeepSpeedEstimate {
  Bytes gpu, cpu;
};
DeepSpeedEstimate EstimateDeepSpeed(const DeepSpeedEstimatorInput& in);

// LL for a model: DeepSpeed counts parameters per module, non-recursively, so the largest is
// the embedding or one MLP projection (weight and bias).
int64_t LargestModuleParams(const ModelSpec& m);

}  // namespace sim
