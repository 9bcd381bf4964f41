// DeepSpeed ZeRO (stage 0 is DDP), as its runtime does it (deepspeed/runtime/zero/
// stage_1_and_2.py, stage3.py; torch.nn.parallel.DistributedDataParallel for stage 0):
//   0  gradients accumulate in a full buffer; one bucketed all-reduce per layer, issued as the
//      last micro-batch's backward finishes that layer;
//   1  the same accumulation; a reduce-scatter per layer in the last micro-batch; after the
//      optimizer, an all-gather of the updated compute-dtype parameters (whole model, bucketed);
//   2  a reduce-scatter per layer in every micro-batch into the sharded accumulation buffer,
//      the layer's full gradients living until it ends; the post-optimizer all-gather;
//   3  all-gather before each layer's forward and again before its backward, `prefetch` layers
//      ahead; reduce-scatter per layer in every micro-batch.
// Buckets are `reduce_bucket_size` / DDP's bucket_cap_mb (25 MB) and each is copied into a
// staging buffer of that size before its collective.

#include <algorithm>

#include "sim/workload/placement.h"
#include "sim/workload/policy/policy.h"

namespace sim {

namespace {

class DeepSpeedPolicy : public DataParallelPolicy {
 public:
  using DataParallelPolicy::DataParallelPolicy;

  // The step upcasts the reduced 16-bit gradients of the fp32 partition it updates
  // (deepspeed/runtime/zero/stage_1_and_2.py step(): the flattened averaged_gradients
  // .to(fp32) become single_partition_of_fp32_groups[i].grad; stage3.py
  // _prepare_fp32_grad_for_sub_group does it one sub-group, sub_group_size = 1e9 elements, at a
  // time).
  Bytes StepTransient(int64_t local) const override {
    constexpr int64_t kSubGroup = 1'000'000'000;
    return Bytes::Count(4 * (plan_.stage == 3 ? std::min(local, kSubGroup) : local));
  }

  void AfterOptimizer(DpEnv& env, int32_t optimizer, int64_t total) override {
    // ZeRO-1/2: every rank gathers the updated parameters of the others' shards.
    if (plan_.stage == 1 || plan_.stage == 2) GatherUpdatedParameters(env, optimizer, total);
  }
};

}  // namespace

static ShardingPlan ShardingOf(const Scenario& s) {
  ShardingPlan plan;
  plan.stage = static_cast<int>(s.parallel.zero);
  // CP ranks hold the same parameters as their DP peers: states shard over DP × CP.
  plan.shard_degree = Placement(s).GradientGroup().size;
  return plan;
}

std::unique_ptr<DataParallelPolicy> MakeDeepSpeedPolicy(const Scenario& s) {
  return std::make_unique<DeepSpeedPolicy>(s, ShardingOf(s));
}

}  // namespace sim
