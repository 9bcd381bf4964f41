// PyTorch FSDP (torch.distributed.fsdp), its strategies mapped onto ZeRO stages:
//   no_shard       stage 0 (DDP semantics);
//   shard_grad_op  stage 3 with the forward all-gather only: the parameters stay gathered until
//                  the layer's backward ends (ZeRO-2-like memory);
//   full_shard     stage 3;
//   hybrid_shard   full_shard inside a node, the gradient shard then all-reduced across nodes.
// Each layer's gradients are reduce-scattered in one collective (FSDP's flat parameter), into a
// buffer of the reduce dtype when it differs from the compute dtype (MixedPrecision's
// reduce_dtype = fp32 upcasts first); otherwise in place. No post-optimizer all-gather: the
// next forward gathers the updated shards.
//
// fsdp_version 2 (fully_shard, FSDP2) shards each parameter instead of one flat parameter: an
// all-gather lands in a flat buffer that split_with_sizes_copy then copies into the parameters
// on the compute stream (foreach_all_gather_copy_out), and a layer's gradients are copied by
// chunk_cat into a new reduce-scatter input of the reduce dtype on the compute stream, after
// which they are freed (foreach_reduce; torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py).
// FSDP1 gathers into its flat parameter and reduces from its flat gradient in place, casting
// to the reduce dtype on its post-backward stream.

#include "absl/strings/str_cat.h"
#include "sim/workload/placement.h"
#include "sim/workload/policy/framework_traits.h"
#include "sim/workload/policy/policy.h"

namespace sim {

namespace {

// FSDP strategy -> ZeRO stage (no_shard 0, shard_grad_op and full_shard 3, hybrid 3 per node).
ShardingPlan ShardingOf(const Scenario& s);

class FsdpPolicy : public DataParallelPolicy {
 public:
  using DataParallelPolicy::DataParallelPolicy;
  std::unique_ptr<DataParallelPolicy> Clone() const override {
    return std::make_unique<FsdpPolicy>(*this);
  }

  absl::Status Check() const override {
    if (s_.parallel.zero == 1 && !s_.parallel.sharding) {
      return absl::FailedPreconditionError(
          "fsdp has no ZeRO-1 mode: use parallel.zero 0 (no_shard), 2 (shard_grad_op) or 3 "
          "(full_shard), or parallel.sharding");
    }
    return absl::OkStatus();
  }

 protected:
  // Under a pipeline (ShardingPlan::gathered_once_per_step): the reduce-scatters wait for the
  // stage's last backward to end; each layer's gather comes with its first forward of the step.
  bool OverlapGradReduce() const override {
    return !plan_.gathered_once_per_step && DataParallelPolicy::OverlapGradReduce();
  }
  void BeforeForward(DpEnv& env, int32_t g, std::vector<int32_t>& deps) override {
    if (!plan_.gathered_once_per_step || env.b.micro_batch() != 0) return;
    for (const Part& part : Parts(env, env.group_params[g], env.group_experts[g], env.grad_group)) {
      if (part.group.size <= 1) continue;
      const Bytes params = Bytes::Count(2 * part.params);  // the bf16 parameters
      Op ag = env.b.Collective("all_gather", CollectiveKind::kAllGather, params, part.group, g);
      env.b.Spec(ag).buckets = 1;
      deps.push_back(env.b.Add(ag, {}, {}));
    }
  }
  int32_t LayerReduceBuckets(Bytes) const override { return 1; }
  Bytes LayerReduceBuffer(Bytes grads) const override {
    return ReduceBytes() != 2 ? grads : Bytes();
  }
  bool CopiesAroundCollectives() const override { return s_.parallel.fsdp_version == 2; }
};

// Whether FSDP2 runs under pipeline parallelism as torchtitan runs it (ShardingPlan::
// gathered_once_per_step): torchtitan's fully_shard with reshard_after_forward = not pp_enabled
// (torchtitan/models/llama3/infra/parallelize.py apply_fsdp, "For PP, do not reshard after
// forward to avoid per-microbatch all-gathers"), and torch.distributed.pipelining's stage,
// which turns FSDP's gradient sync and backward reshard off for every micro-batch but the last
// and runs the post-backward reduce-scatters after it (pipelining/stage.py
// backward_maybe_with_nosync). FSDP2 accumulates the unsharded gradients in the reduce dtype
// (_fsdp_param.py to_accumulated_grad_if_needed).
bool GatheredOncePerStep(const Scenario& s) {
  const FsdpSharding f = FsdpShardingOf(s.parallel);
  return s.parallel.pp > 1 && (f == FsdpSharding::kFullShard || f == FsdpSharding::kShardGradOp);
}

ShardingPlan ShardingOf(const Scenario& s) {
  ShardingPlan plan;
  plan.shard_degree = Placement(s).GradientGroup().size;
  if (GatheredOncePerStep(s)) {
    plan.stage = 1;
    plan.gathered_once_per_step = true;
    return plan;
  }
  switch (FsdpShardingOf(s.parallel)) {
    case FsdpSharding::kNoShard:
      plan.stage = 0;
      break;
    case FsdpSharding::kShardGradOp:
      plan.stage = 3;
      plan.keep_params_to_backward = true;
      break;
    case FsdpSharding::kFullShard:
      plan.stage = 3;
      break;
    case FsdpSharding::kHybridShard:
      plan.stage = 3;
      plan.hybrid = s.cluster.nodes > 1;
      if (plan.hybrid) plan.shard_degree = s.cluster.node.gpus_per_node;
      break;
  }
  return plan;
}

}  // namespace

std::unique_ptr<DataParallelPolicy> MakeFsdpPolicy(const Scenario& s) {
  return std::make_unique<FsdpPolicy>(s, ShardingOf(s));
}

namespace {

// FSDP's rules (the strategy from FsdpShardingOf): ZeRO-3 is FULL_SHARD, 2 SHARD_GRAD_OP, 0
// NO_SHARD.
class FsdpTraitsImpl final : public FrameworkTraits {
 public:
  BytesPerParam StateBytes(int64_t m, int64_t v, Precision) const override {
    BytesPerParam b;
    b.weights = {"weights", 2, 3};
    b.gradients = {"gradients", 4, 2};
    b.master_weights = {"master_weights", 4, 2};
    b.optimizer_m = {"optimizer_m", m, 2};
    b.optimizer_v = {"optimizer_v", v, 2};
    return b;
  }
  bool HasStage(int stage) const override { return stage != 1; }
  // FULL_SHARD keeps no persistent bf16 weights: the fp32 shard is the parameter and the bf16
  // copy exists only while gathered (the replay's gathered_params).
  bool KeepsWeightsAt(int stage) const override { return stage != 3; }
  bool OffloadsStatesWithParams() const override { return true; }
  absl::string_view OffloadKey() const override { return "parallel.offload.params"; }
  bool FullyShards(const ParallelSpec& p) const override {
    const FsdpSharding f = FsdpShardingOf(p);
    return f == FsdpSharding::kFullShard || f == FsdpSharding::kHybridShard;
  }
  // Under a pipeline (ShardingPlan::gathered_once_per_step) the gradients accumulate unsharded,
  // in the reduce dtype, until the step's reduce-scatter.
  void AdjustStateBytes(const Scenario& s, BytesPerParam& b) const override {
    if (GatheredOncePerStep(s)) b.gradients.sharded_from_stage.reset();
  }
  std::string StateLabel(absl::string_view kind, Precision) const override {
    if (kind == "weights") return "weights (bf16)";
    if (kind == "gradients") return "gradients (fp32, sharded)";
    return "master weights (fp32)";
  }
  std::vector<ShardingStage> ShardingStages() const override {
    std::vector<ShardingStage> stages;
    for (FsdpSharding mode : {FsdpSharding::kNoShard, FsdpSharding::kShardGradOp,
                              FsdpSharding::kFullShard, FsdpSharding::kHybridShard}) {
      const int zero = mode == FsdpSharding::kNoShard       ? 0
                       : mode == FsdpSharding::kShardGradOp ? 2
                                                            : 3;
      stages.push_back({zero,
                        std::string(Name(mode)),
                        {{"parallel.zero", absl::StrCat(zero)},
                         {"parallel.sharding", std::string(Name(mode))}}});
    }
    return stages;
  }
  void CheckLayout(const Scenario& s, std::vector<KeyProblem>& out) const override {
    const ParallelSpec& par = s.parallel;
    const FsdpSharding fsdp = FsdpShardingOf(par);
    if (par.pp > 1 && fsdp != FsdpSharding::kNoShard && par.fsdp_version != 2) {
      // Sharded FSDP under a pipeline is torchtitan's: FSDP2 modules, whose gradient sync
      // torch.distributed.pipelining turns off between micro-batches (FSDP1's it does not).
      out.push_back({"parallel.fsdp_version",
                     absl::StrCat("fsdp ", Name(fsdp), " with pp ", par.pp,
                                  " is modelled as torchtitan runs it, with FSDP2: set "
                                  "parallel.fsdp_version: 2 (or sharding no_shard)")});
    }
    if ((par.tp > 1 || par.pp > 1 || par.cp > 1) && par.sharding == FsdpSharding::kHybridShard) {
      out.push_back({"parallel.sharding", "hybrid_shard is modelled without tp, pp or cp"});
    }
  }
  void CheckOffload(const Scenario& s, std::vector<KeyProblem>& out) const override {
    CheckCpuOffload(s, out);
  }
};

}  // namespace

void CheckCpuOffload(const Scenario& s, std::vector<KeyProblem>& out) {
  const OffloadSpec& o = s.parallel.offload;
  if (o.optimizer != OffloadTarget::kNone && o.params == OffloadTarget::kNone) {
    out.push_back({"parallel.offload.optimizer",
                   "FSDP offloads parameters, gradients and optimizer states together "
                   "(CPUOffload(offload_params=True)): set parallel.offload.params: cpu instead"});
  }
  if (o.params == OffloadTarget::kNvme || o.optimizer == OffloadTarget::kNvme) {
    out.push_back({"parallel.offload.params",
                   "FSDP offloads to CPU memory only; NVMe offload is DeepSpeed's "
                   "(ZeRO-Infinity)"});
  }
  if (o.params != OffloadTarget::kNone && s.parallel.zero != 3) {
    out.push_back({"parallel.offload.params",
                   "CPU offload is modelled for fully sharded training: set parallel.zero: 3"});
  }
}

const FrameworkTraits& FsdpTraits() {
  static const FsdpTraitsImpl traits;
  return traits;
}

}  // namespace sim
