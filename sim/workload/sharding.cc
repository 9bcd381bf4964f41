#include "sim/workload/sharding.h"

#include "sim/base/check.h"
#include "sim/workload/params.h"
#include "sim/workload/pipeline_schedule.h"
#include "sim/workload/placement.h"

namespace sim {

std::vector<int64_t> GroupParameters(const Scenario& s) {
  const ParameterCount c = CountParameters(s.model);
  const int64_t t = s.parallel.tp;
  std::vector<int64_t> groups;
  // Vocabulary-parallel embedding; the learned position table is replicated (Megatron-LM).
  groups.push_back(c.embedding / t + c.positions);
  // Column- and row-parallel matrices (and their sharded biases) ÷ t; norms replicated.
  for (int64_t l = 0; l < s.model.layers; ++l) {
    groups.push_back((c.attention_per_layer + c.mlp_per_layer) / t + c.norms_per_layer);
  }
  // A tied head multiplies by the embedding matrix, which must be gathered again.
  groups.push_back(c.final_norm + (s.model.tied_embeddings ? c.embedding : c.lm_head) / t);
  return groups;
}

std::vector<int64_t> StageParameters(const Scenario& s) {
  const std::vector<int64_t> groups = GroupParameters(s);
  const std::vector<int64_t> per_vstage = LayersPerVirtualStage(s);
  const int64_t p = s.parallel.pp;
  std::vector<int64_t> stages(p, 0);
  int64_t layer = 1;
  for (size_t vs = 0; vs < per_vstage.size(); ++vs) {
    for (int64_t i = 0; i < per_vstage[vs]; ++i) stages[vs % p] += groups[layer++];
  }
  stages.front() += groups.front();
  stages.back() += groups.back();
  // Tied embeddings: one matrix when embedding and head share the GPU; with pp > 1 the last
  // stage keeps its own copy (Megatron-LM's word-embedding group).
  if (s.model.tied_embeddings && p == 1)
    stages.front() -= CountParameters(s.model).embedding / s.parallel.tp;
  return stages;
}

StateSplit PersistentStates(const Scenario& s, int32_t stage) {
  const ShardingPlan plan = PlanSharding(s);
  BytesPerParam bpp =
      StateBytesPerParam(s.parallel.framework, s.training.optimizer, s.training.precision);
  if (s.training.precision == Precision::kFp8) bpp.weights.bytes_per_param = 2 + 1;
  const int64_t params = StageParameters(s)[stage];
  // fsdp shard_grad_op holds the states of full_shard: the unsharded parameters it keeps from
  // forward to backward are gathers in the replay (gathered_params), not persistent weights.
  auto split = PerGpuStateSplit(bpp, s.parallel.framework, plan.stage, params, plan.shard_degree);
  SIM_CHECK(split.has_value(), "no persistent-state rule for this framework and stage");
  return *split;
}

}  // namespace sim
