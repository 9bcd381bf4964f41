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

#include "sim/workload/placement.h"
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
  int32_t LayerReduceBuckets(Bytes) const override { return 1; }
  Bytes LayerReduceBuffer(Bytes grads) const override {
    return ReduceBytes() != 2 ? grads : Bytes();
  }
  bool CopiesAroundCollectives() const override { return s_.parallel.fsdp_version == 2; }
};

ShardingPlan ShardingOf(const Scenario& s) {
  ShardingPlan plan;
  plan.shard_degree = Placement(s).GradientGroup().size;
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

}  // namespace sim
