#pragma once
// Data-parallel policies: what a framework gathers before a layer, reduces after it and does at
// the end of the step. Lowering (sim/workload/lowering.cc) asks its policy these questions and
// never branches on the framework itself; each framework is one file beside this one:
//
//   deepspeed.cc  ZeRO 0-3 (DDP at 0): bucketed reductions through a staging buffer, the
//                 post-optimizer all-gather of ZeRO-1/2.
//   fsdp.cc       FSDP strategies mapped onto ZeRO stages (no_shard, shard_grad_op, full_shard,
//                 hybrid_shard): one reduce-scatter per layer, fp32 reduce buffers.
//   torchtune.cc  bf16 states without a master copy, one GPU or FSDP2, lazy gradients.
//   megatron.cc   fp32 main_grad, one reduction per step (after the backward unless
//                 overlap_grad_reduce), the distributed optimizer's parameter all-gather (after
//                 the optimizer, or beside the next forward), asynchronous backward TP
//                 collectives.
//
// The ZeRO mechanics shared by all three (accumulate and reduce once per step at stages 0/1,
// reduce-scatter every micro-batch at 2/3, gathers at 3) live in the base class; a framework
// overrides the hooks where it differs. A new framework or offload mode is a new policy.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/spec/scenario.h"
#include "sim/workload/program_builder.h"
#include "sim/workload/sharding.h"
#include "sim/workload/zero3_coordinator.h"

namespace sim {

// What lowering hands a policy when it asks it to emit ops: the builder (positioned on the
// stage and micro-batch being lowered), the parameters per group and the groups that reduce
// and shard them.
// MoE models split each group in two: the routed experts (group_experts, part of group_params)
// are held by the expert data-parallel group and reduced, sharded and gathered over it; the
// rest over grad_group (Megatron-Core keeps expert parameters in their own buffers over
// expert_data_parallel_group: distributed_data_parallel.py's expert_parallel_buffers).
struct DpEnv {
  ProgramBuilder& b;
  const std::vector<int64_t>& group_params;   // per GPU (after TP sharding), by group
  const std::vector<int64_t>& group_experts;  // the routed experts' share of group_params
  CommGroup grad_group;                       // ranks holding the same parameters (DP × CP)
  CommGroup shard_group;                      // ranks sharing the shards (hybrid: one node)
  CommGroup expert_group;                     // ranks holding the same experts (expert DP)
};

// A stage's trained parameters per GPU and the routed experts' share of them.
struct StageParams {
  int64_t total = 0;
  int64_t experts = 0;
};

class DataParallelPolicy {
 public:
  DataParallelPolicy(const Scenario& s, ShardingPlan plan);
  virtual ~DataParallelPolicy() = default;

  // A copy with this one's state (the reductions it has left for the step's end): a lowering
  // forked mid-step goes on with it (lowering.cc StepLowering).
  virtual std::unique_ptr<DataParallelPolicy> Clone() const = 0;

  const ShardingPlan& sharding() const { return plan_; }
  // FailedPrecondition for a mode the framework does not have (checked before lowering).
  virtual absl::Status Check() const { return absl::OkStatus(); }

  // ---- facts lowering asks ----------------------------------------------------------------

  // Bytes per gradient element in reductions (parallel.reduce_dtype, or the framework's).
  virtual int64_t ReduceBytes() const;
  // Whether gradient reductions overlap the backward (parallel.overlap_grad_reduce, or the
  // framework's default).
  virtual bool OverlapGradReduce() const { return s_.parallel.overlap_grad_reduce.value_or(true); }
  // The gradient bucket: parallel.bucket, or the framework's (PyTorch DDP bucket_cap_mb 25 MB).
  virtual Bytes Bucket() const { return s_.parallel.bucket.value_or(Bytes::MB(25)); }
  // Collectives a gradient tensor of `b` bytes is reduced in.
  int32_t Buckets(Bytes b) const;

  // ZeRO-3: how parameters are gathered ahead of their use: whole layers (`layers` ahead:
  // parallel.prefetch, FSDP's forward/backward prefetch of one module), or, with `elements`,
  // DeepSpeed's parameter coordinator, which counts elements (sim/workload/zero3_coordinator.h).
  struct GatherRule {
    int64_t layers = ParallelSpec::kDefaultPrefetchLayers;
    std::optional<Zero3Limits> elements;
  };
  virtual GatherRule Gathers() const;
  // Reduction buffers outside the gradients themselves, by when they live:
  // PersistentBuffers() with the model states (DeepSpeed ZeRO-3's contiguous bucket);
  // BackwardBuffers() from a micro-batch's first backward op until its reductions end, or with
  // BackwardBuffersPerStep() from the step's first backward until its optimizer starts
  // (DeepSpeed ZeRO-1/2's contiguous buckets).
  virtual Bytes PersistentBuffers() const { return Bytes(); }
  virtual Bytes BackwardBuffers() const { return Bytes(); }
  virtual bool BackwardBuffersPerStep() const { return false; }
  // Gradients are copied into the reduce bucket as their layer's backward produces them
  // (DeepSpeed contiguous_gradients): a layer's full gradients are freed when its backward ends,
  // not when its reduction does.
  virtual bool GradientsIntoBucket() const { return false; }

  // ZeRO-3: each group's parameters are all-gathered before its forward ...
  bool GathersParameters() const { return plan_.stage == 3; }
  // ... and again before its backward, unless they were kept from the forward.
  bool RegathersForBackward() const {
    return GathersParameters() && !plan_.keep_params_to_backward;
  }
  // Bytes of a group's full gradients that live from its backward until its reduction ends
  // (stages 2 and 3); zero where gradients accumulate in a persistent buffer.
  Bytes TransientGradients(const DpEnv& env, int32_t g) const;
  // ZeRO-3 gathers land in a communication buffer that a compute-stream copy then splits into
  // the parameters, and gradients are copied into a reduction buffer on the compute stream
  // before each reduce-scatter (FSDP2's per-parameter sharding, parallel.fsdp_version 2).
  virtual bool CopiesAroundCollectives() const { return false; }
  // Backward TP collectives run beside the GEMMs they feed (Megatron-LM's asynchronous
  // all-reduce / all-gather), not on the compute stream.
  virtual bool AsyncTpBackward() const { return false; }
  // The loss kernel when the scenario names none (sim/workload/loss.h): PyTorch's cross_entropy
  // on upcast logits, as Hugging Face models under DeepSpeed and torchtitan under FSDP compute it.
  virtual LossKernel DefaultLoss() const { return LossKernel::kEager; }
  // How AdamW's update runs when the scenario does not say (training.optimizer_impl): fused, as
  // DeepSpeed's and Megatron's fused Adam, torchtune's configs (`fused: True`) and torchtitan
  // (optimizer.implementation "fused") run it.
  virtual OptimizerImpl DefaultOptimizerImpl() const { return OptimizerImpl::kFused; }
  // 16-bit working copies of `params` parameters that autocast makes when their layer runs
  // (PyTorch AMP over fp32 parameters); none where the parameters are already 16-bit.
  virtual Bytes CastCopies(int64_t) const { return Bytes(); }
  // Memory the optimizer step allocates for `local` parameters of this GPU's shard while it runs.
  virtual Bytes StepTransient(int64_t) const { return Bytes(); }
  // HBM traffic of the step beyond the optimizer's update of the `local` parameters it owns
  // (Lowerer::StepTrafficPerParam): the framework's own passes over the gradients of the
  // stage's `total` parameters on this GPU.
  virtual Bytes StepExtraTraffic(StageParams, int64_t /*local*/) const { return Bytes(); }
  // Parameters the optimizer updates on this GPU out of a stage's: the dense ones ÷ the shard
  // degree, the experts ÷ theirs (sharding.h ExpertShardDegree).
  int64_t OptimizerShard(StageParams p) const;
  // Offload (parallel.offload): the reduced gradients are copied to the host as their
  // reductions end (ZeRO-Offload's async copy into the fp32 CPU partition, FSDP CPUOffload's
  // gradient shard). Megatron-Core copies its fp32 main_grad at the step instead.
  virtual bool GradientsToHost() const;

  // ---- hooks that emit ops ----------------------------------------------------------------

  // Before group g's forward: collectives its first op waits for (appended to `deps`).
  virtual void BeforeForward(DpEnv& env, int32_t g, std::vector<int32_t>& deps);
  // After group g's backward in the current micro-batch: its gradient reduction.
  virtual void AfterBackward(DpEnv& env, int32_t g);
  // At the stage's end, before its optimizer: the reductions left for after the backward.
  virtual void BeforeOptimizer(DpEnv& env);
  // The reductions the stage's optimizer waits for (consumed).
  std::vector<int32_t> TakeStepReductions(int32_t stage);
  // Whether a micro-batch's backward emits the same ops whether or not it is the step's last:
  // at stages 2 and 3 every micro-batch reduce-scatters its gradients, and the last one only
  // has the optimizer wait for its reductions; at stages 0 and 1 without overlap the last one
  // only leaves its groups' reductions for the step's end (BeforeOptimizer). Then a step's
  // last backward may be lowered as any other and marked last after it (MarkLastBackward;
  // StepLowering). Not with overlap at stages 0 and 1: the last backward reduces as it goes.
  bool LastBackwardLikeAny() const { return plan_.stage >= 2 || !OverlapGradReduce(); }
  // The stage's backward lowered last becomes the step's last, as if it had been lowered as the
  // last: the optimizer waits for its reductions, or its groups are reduced at the step's end
  // (LastBackwardLikeAny only).
  void MarkLastBackward(int32_t stage);
  // After the stage's optimizer (op `optimizer`, over the stage's parameters `p`).
  virtual void AfterOptimizer(DpEnv& env, int32_t optimizer, StageParams p);

 protected:
  // One bucketed reduction of the accumulated gradients of `groups` (`g` labels it; none:
  // step-wide): all-reduce at stage 0, reduce-scatter at stage 1.
  void StepReduce(DpEnv& env, const std::vector<int32_t>& groups, std::optional<int32_t> g);
  // Buffer a step reduction stages its bucket through (DeepSpeed and DDP copy each bucket).
  virtual Bytes StepStaging(Bytes grads) const { return std::min(grads, Bucket()); }
  // Per-layer reduce-scatter at stages 2/3: how many collectives, through what buffer.
  virtual int32_t LayerReduceBuckets(Bytes grads) const { return Buckets(grads); }
  virtual Bytes LayerReduceBuffer(Bytes grads) const { return std::min(grads, Bucket()); }
  // The post-optimizer all-gather of the updated compute-dtype parameters, in collectives of
  // `chunk` (the gradient bucket when none).
  void GatherUpdatedParameters(DpEnv& env, int32_t optimizer, StageParams p,
                               std::optional<Bytes> chunk = std::nullopt);
  // With GradientsToHost(): the copy of `local` reduced gradients (this GPU's shard) after op
  // `after`, which the optimizer then waits for instead; `after` otherwise.
  int32_t CopyGradientsToHost(DpEnv& env, int32_t after, int64_t local, std::optional<int32_t> g);
  // A backward's reduction `done` (stages 2 and 3) or group left to reduce at the step's end
  // (0 and 1, no overlap): taken in the step's last micro-batch, or by MarkLastBackward.
  void LeaveForStep(const DpEnv& env, int32_t id);
  // The parts a collective over `params` parameters (`experts` of them routed experts) splits
  // into: the dense ones over `dense`, the experts over env.expert_group; empty parts left out.
  struct Part {
    int64_t params;
    CommGroup group;
    int64_t shard_degree;  // of this part's states
  };
  std::vector<Part> Parts(const DpEnv& env, int64_t params, int64_t experts, CommGroup dense) const;

  const Scenario& s_;
  const ShardingPlan plan_;
  std::vector<std::vector<int32_t>> step_reductions_;  // per stage
  // Per stage: what the backward lowered last leaves for the step if it is the last — its
  // reductions (stages 2 and 3) or its groups to reduce at the end (0 and 1, no overlap) — and
  // its micro-batch.
  std::vector<std::vector<int32_t>> backward_reductions_;
  std::vector<int32_t> backward_reductions_mb_;
  std::vector<std::vector<int32_t>> deferred_;  // per stage: groups reduced at the end
};

// The policy of the scenario's framework (the one place that switches on it).
// The scenario's sharding plan, by its framework's rule (the policy's sharding()).
ShardingPlan PlanSharding(const Scenario& s);

std::unique_ptr<DataParallelPolicy> MakeDataParallelPolicy(const Scenario& s);

// The frameworks' policies (one file each).
std::unique_ptr<DataParallelPolicy> MakeDeepSpeedPolicy(const Scenario& s);
std::unique_ptr<DataParallelPolicy> MakeFsdpPolicy(const Scenario& s);
std::unique_ptr<DataParallelPolicy> MakeMegatronPolicy(const Scenario& s);
std::unique_ptr<DataParallelPolicy> MakeDdpPolicy(const Scenario& s);
std::unique_ptr<DataParallelPolicy> MakeTorchtunePolicy(const Scenario& s);

}  // namespace sim
