#include "sim/workload/sharding.h"

#include <algorithm>

#include "sim/base/check.h"
#include "sim/workload/finetune.h"
#include "sim/workload/params.h"
#include "sim/workload/pipeline_schedule.h"
#include "sim/workload/placement.h"
#include "sim/workload/policy/framework_traits.h"
#include "sim/workload/policy/policy.h"

namespace sim {

std::vector<int64_t> GroupParameters(const Scenario& s) {
  const ParameterCount c = CountParameters(s.model);
  const int64_t t = s.parallel.tp;
  std::vector<int64_t> groups;
  // Vocabulary-parallel embedding; the learned position table is replicated (Megatron-LM).
  groups.push_back(c.embedding / t + c.positions);
  // Column- and row-parallel matrices (and their sharded biases) ÷ t; norms replicated.
  // Routed experts ÷ etp·ep; the router is counted with the sharded matrices (h × E,
  // replicated in Megatron-Core: < 0.01 % of a layer).
  const int64_t experts = c.expert_per_layer / (s.parallel.expert_tp() * s.parallel.ep);
  // MLA's down projection is replicated over TP.
  const int64_t replicated = c.attention_replicated_per_layer + c.norms_per_layer;
  const int64_t sharded_attention = c.attention_per_layer - c.attention_replicated_per_layer;
  for (int64_t l = 0; l < s.model.layers; ++l) {
    groups.push_back(s.model.IsMoeLayer(l)
                         ? (sharded_attention + c.mlp_per_layer - c.expert_per_layer) / t +
                               experts + replicated
                         : (sharded_attention + c.dense_mlp_per_layer) / t + replicated);
  }
  // A tied head multiplies by the embedding matrix, which must be gathered again.
  groups.push_back(c.final_norm + (s.model.tied_embeddings ? c.embedding : c.lm_head) / t);
  return groups;
}

std::vector<int64_t> GroupExpertParameters(const Scenario& s) {
  const int64_t experts =
      CountParameters(s.model).expert_per_layer / (s.parallel.expert_tp() * s.parallel.ep);
  std::vector<int64_t> groups(static_cast<size_t>(s.model.layers) + 2, 0);
  for (int64_t l = 0; l < s.model.layers; ++l) {
    if (s.model.IsMoeLayer(l)) groups[l + 1] = experts;
  }
  return groups;
}

std::vector<int64_t> GroupTrainable(const Scenario& s) {
  std::vector<int64_t> groups = GroupParameters(s);
  if (!s.training.finetune.adapters()) return groups;
  const int64_t adapters = AdapterParamsPerLayer(s);
  for (size_t g = 0; g < groups.size(); ++g) {
    groups[g] = (g == 0 || g + 1 == groups.size()) ? 0 : adapters;
  }
  return groups;
}

std::vector<Bytes> GroupWeightBytes(const Scenario& s) {
  const std::vector<int64_t> params = GroupParameters(s);
  std::vector<Bytes> bytes;
  const int64_t adapters = AdapterParamsPerLayer(s);
  int64_t linears = 0;
  for (const LayerLinear& l : LayerLinears(s.model)) linears += l.ParamsPerGpu(s.parallel.tp);
  for (size_t g = 0; g < params.size(); ++g) {
    const bool layer = g != 0 && g + 1 != params.size();
    if (layer && s.training.finetune.method == FinetuneMethod::kQlora) {
      bytes.push_back(Nf4Bytes(linears) + Bytes::Count(2 * (params[g] - linears + adapters)));
    } else {
      bytes.push_back(Bytes::Count(2 * (params[g] + (layer ? adapters : 0))));
    }
  }
  return bytes;
}

namespace {

// Sums per-group values over each pipeline stage's groups (the embedding on the first stage,
// the head on the last).
template <class T>
std::vector<T> PerStage(const Scenario& s, const std::vector<T>& groups) {
  const std::vector<int64_t> per_vstage = LayersPerVirtualStage(s);
  const int64_t p = s.parallel.pp;
  std::vector<T> stages(p, T());
  int64_t layer = 1;
  for (size_t vs = 0; vs < per_vstage.size(); ++vs) {
    for (int64_t i = 0; i < per_vstage[vs]; ++i) stages[vs % p] += groups[layer++];
  }
  stages.front() += groups.front();
  stages.back() += groups.back();
  return stages;
}

}  // namespace

std::vector<int64_t> StageExpertParameters(const Scenario& s) {
  return PerStage(s, GroupExpertParameters(s));
}

int64_t ExpertShardDegree(const Scenario& s, const ShardingPlan& plan) {
  return std::max<int64_t>(
      plan.shard_degree * s.parallel.tp / (s.parallel.expert_tp() * s.parallel.ep), 1);
}

std::vector<int64_t> StageTrainable(const Scenario& s) {
  if (!s.training.finetune.adapters()) return StageParameters(s);
  return PerStage(s, GroupTrainable(s));
}

std::vector<Bytes> StageWeightBytes(const Scenario& s) {
  std::vector<Bytes> stages = PerStage(s, GroupWeightBytes(s));
  if (s.model.tied_embeddings && s.parallel.pp == 1)
    stages.front() -= Bytes::Count(2 * CountParameters(s.model).embedding / s.parallel.tp);
  return stages;
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
  const Framework fw = s.parallel.framework;
  const FrameworkTraits& traits = TraitsOf(fw);
  BytesPerParam bpp = StateBytesPerParam(fw, s.training.optimizer, s.training.precision);
  traits.AdjustStateBytes(s, bpp);
  if (s.training.precision == Precision::kFp8) bpp.weights.bytes_per_param = 2 + 1;
  if (traits.GradientsAreBucketViews(s.parallel)) {
    bpp.gradients.bytes_per_param = 4;  // .grad is a view of the bucket: one fp32 copy
  }
  const bool adapters = s.training.finetune.adapters();
  const int64_t trained = StageTrainable(s)[stage];
  const int64_t n = plan.shard_degree;
  // fsdp shard_grad_op holds the states of full_shard: the unsharded parameters it keeps from
  // forward to backward are gathers in the replay (gathered_params), not persistent weights.
  const int64_t experts = adapters ? 0 : StageExpertParameters(s)[stage];
  auto split = PerGpuStateSplit(bpp, fw, plan.StatesStage(), trained - experts, n);
  SIM_CHECK(split.has_value(), "no persistent-state rule for this framework and stage");
  StateSplit st = *split;
  if (experts > 0) {
    const auto e =
        PerGpuStateSplit(bpp, fw, plan.StatesStage(), experts, ExpertShardDegree(s, plan));
    SIM_CHECK(e.has_value(), "no persistent-state rule for this framework and stage");
    st.weights += e->weights;
    st.gradients += e->gradients;
    st.optimizer += e->optimizer;
  }
  if (adapters) {
    // The frozen base: its 16-bit (or NF4) weights, sharded like weights at ZeRO-3.
    const Bytes base = StageWeightBytes(s)[stage] - Bytes::Count(2 * trained);
    st.adapters = st.weights;
    st.weights = plan.stage == 3 ? base.CeilDiv(n) : base;
  }
  // Lazy gradients (FrameworkTraits::LazyGradients): torchtune, and PyTorch DDP without
  // gradient_as_bucket_view. Measured on an H200 (docs/measurements/h200-2026-12-04): DDP's
  // Llama 3.2 3B step ends with parameters, buckets and Adam states (47.94 GiB), no .grad.
  st.lazy_gradients = traits.LazyGradients(s.parallel);
  st.lazy_gradient_bytes_per_param = bpp.gradients.bytes_per_param;
  if (traits.BucketsBesideLazyGradients(s.parallel)) {
    st.lazy_gradient_bytes_per_param = 4;  // the fp32 .grad; the other 4 B are the buckets
    st.kept_gradients = st.gradients / 2;
  }
  // Paged 8-bit moments live in unified memory, outside PyTorch's allocator.
  if (s.training.optimizer == OptimizerKind::kAdam8bitPaged) {
    const int64_t local = plan.stage >= 1 ? (trained + n - 1) / n : trained;
    const Bytes moments =
        Bytes::Count((bpp.optimizer_m.bytes_per_param + bpp.optimizer_v.bytes_per_param) * local);
    st.optimizer -= moments;
    st.host += moments;
  }
  const OffloadSpec& off = s.parallel.offload;
  auto move = [&](Bytes& b, OffloadTarget to) {
    (to == OffloadTarget::kNvme ? st.nvme : st.host) += b;
    b = Bytes();
  };
  if (off.params != OffloadTarget::kNone) {
    // ZeRO-Infinity / FSDP CPUOffload: the parameter shard lives off the GPU. FSDP and
    // torchtune move gradients and optimizer states with it (CPUOffload(offload_params=True)).
    move(st.weights, off.params);
    move(st.adapters, off.params);
    if (traits.OffloadsStatesWithParams()) {
      move(st.gradients, OffloadTarget::kCpu);
      move(st.optimizer, off.params);
    }
  }
  if (off.optimizer != OffloadTarget::kNone && st.optimizer > Bytes()) {
    move(st.optimizer, off.optimizer);
    if (traits.OffloadKeepsHostGradients()) {
      // From ZeRO-2 on the GPU holds no gradient partition.
      const int64_t local = plan.stage >= 1 ? (trained + n - 1) / n : trained;
      st.host += Bytes::Count(4 * local);
      if (plan.stage >= 2) st.gradients = Bytes();
    }
  }
  return st;
}

}  // namespace sim
