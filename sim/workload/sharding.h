#pragma once
// What each GPU holds of the model: the sharding the replay uses (ZeRO stage and degree per
// framework preset), the parameters per group and per pipeline stage after TP sharding, and the
// persistent states (weights, gradients, optimizer) of a stage's GPU.

#include <cstdint>
#include <vector>

#include "sim/spec/scenario.h"
#include "sim/workload/static_ledger.h"

namespace sim {

// The sharding the replay uses: ZeRO stage and sharding degree N (fsdp strategies mapped onto
// stages, megatron's distributed optimizer onto stage 1; hybrid_shard shards over the GPUs of
// one node; DP and CP ranks share the shards).
struct ShardingPlan {
  int stage = 0;
  int64_t shard_degree = 1;              // N for the persistent states and the sharded collectives
  bool hybrid = false;                   // replicate shards across nodes (fsdp hybrid_shard)
  bool keep_params_to_backward = false;  // fsdp shard_grad_op
  // FSDP2 under pipeline parallelism as torchtitan runs it (stage 1 collectives): each layer's
  // parameters gathered once, by the step's first micro-batch, and kept unsharded; gradients
  // accumulated unsharded and reduce-scattered once, after the stage's last backward. Its
  // states follow stage 2's rule with gradients unsharded (FsdpTraits::AdjustStateBytes).
  bool gathered_once_per_step = false;
  // The stage whose state-sharding rule the persistent states follow.
  int StatesStage() const { return gathered_once_per_step ? 2 : stage; }
};

// Parameters per GPU of each group (embedding, decoder layers, final norm + head), after TP
// sharding: matrices ÷ t, norms and learned positions replicated. The model's own parameters,
// without adapters.
std::vector<int64_t> GroupParameters(const Scenario& s);
// The routed experts' share of each group's parameters per GPU (MoE models): what EP shards
// (÷ etp·ep) and what is data-parallel over the expert DP group only; 0 for dense groups and
// models. StageExpertParameters sums them per pipeline stage.
std::vector<int64_t> GroupExpertParameters(const Scenario& s);
std::vector<int64_t> StageExpertParameters(const Scenario& s);
// The degree the experts' states are sharded over where `plan` shards the others over
// plan.shard_degree GPUs: the expert DP group, shard_degree · tp / (etp · ep).
int64_t ExpertShardDegree(const Scenario& s, const ShardingPlan& plan);
// The parameters of each group that are trained (have gradients and optimizer states): all of
// them, or with adapters (training.finetune) the decoder layers' adapters only.
std::vector<int64_t> GroupTrainable(const Scenario& s);
// Bytes of each group's weights as a layer computes with them (what a ZeRO-3 / FSDP gather
// assembles): 16-bit parameters and adapters, QLoRA's projections in NF4.
std::vector<Bytes> GroupWeightBytes(const Scenario& s);
// Parameters per GPU of each pipeline stage (its layers; the embedding on the first, the head
// on the last; a tied embedding is held by both when pp > 1, as Megatron-LM does).
std::vector<int64_t> StageParameters(const Scenario& s);
// The same for the trained parameters and the weight bytes.
std::vector<int64_t> StageTrainable(const Scenario& s);
std::vector<Bytes> StageWeightBytes(const Scenario& s);

// The persistent per-GPU states the replay holds on a pipeline stage (the static ledger of the
// preset). With fp8, the replay follows Transformer Engine: bf16 weights plus an fp8 copy
// (3 B/param), not the textbook's 1 B. With adapters the frozen base weights (16-bit, or NF4
// projections) are held like weights (sharded at ZeRO-3) and the states of the trainable
// adapters follow the preset's rule. Offload (parallel.offload) moves states to `host`/`nvme`:
//   optimizer  the optimizer states and, where the framework keeps it there, the fp32 gradient
//              partition (DeepSpeed ZeRO-Offload: GPU keeps the 16-bit parameters only at
//              ZeRO-2/3, Ren et al. 2021 §4; Megatron-Core: master and moments, main_grad stays);
//   params     the parameter shard too (ZeRO-Infinity offload_param; FSDP CPUOffload moves
//              parameters, gradients and optimizer states together);
// paged 8-bit Adam keeps its moments in unified memory outside the allocator (counted in host).
// MoE with expert parallelism: the routed experts' states are sharded over their own
// data-parallel group, ExpertShardDegree ranks (Megatron-Core's expert data parallel group;
// DeepSpeed-MoE's expert_data_parallel_group), the other parameters' over shard_degree.
StateSplit PersistentStates(const Scenario& s, int32_t stage = 0);

}  // namespace sim
