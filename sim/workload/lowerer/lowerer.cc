// Construction, the step's start and copying a lowering (Fork).

#include "sim/workload/lowerer/lowerer.h"

namespace sim::lowering_internal {

Lowerer::Lowerer(const Scenario& s, std::unique_ptr<DataParallelPolicy> policy,
                 int64_t micro_batches)
    : s_(s),
      policy_(std::move(policy)),
      m_(micro_batches),
      plan_(policy_->sharding()),
      place_(s),
      shape_(ScenarioShape(s)),
      layer_ops_(WithFinetune(s, LayerForwardOps(s.model, shape_),
                              s.training.seq_len / s.parallel.cp * s.training.micro_batch)),
      dense_ops_(s.model.moe && s.model.moe_layers() < s.model.layers
                     ? LayerForwardOps(s.model, shape_, /*moe_layer=*/false)
                     : std::vector<LayerOp>()),
      layers_(static_cast<int32_t>(s.model.layers)),
      tokens_(s.training.seq_len / s.parallel.cp * s.training.micro_batch),
      rep_(s.parallel.sequence_parallel ? s.parallel.tp : 1),
      act_bytes_(Bytes::Count(kCompute * tokens_ * s.model.hidden)),
      loss_(LossTensorsOf(s.training.loss.value_or(policy_->DefaultLoss()), s.training.loss_chunks,
                          tokens_, s.model.vocab / s.parallel.tp)),
      b_(p_, static_cast<int32_t>(s.parallel.pp)) {
  // A mixed cluster: each stage's GEMMs fill its own GPU's SMs in waves.
  for (int32_t g : s.StageGroups()) stage_sms_.push_back(s.cluster.groups[g].gpu.sms);
  group_params_ = GroupParameters(s);
  group_trainable_ = GroupTrainable(s);
  group_weights_ = GroupWeightBytes(s);
  grads_allocated_.assign(group_params_.size(), false);
  grad_group_ = place_.GradientGroup();
  // Hybrid: one shard group per node, all nodes at once.
  shard_group_ = plan_.hybrid
                     ? CommGroup{plan_.shard_degree, 1, 1, s.cluster.nodes, plan_.shard_degree}
                     : grad_group_;
  tp_group_ = place_.Group(ParallelDim::kTp);
  cp_group_ = place_.Group(ParallelDim::kCp);
  ep_group_ = place_.ExpertGroup(s.parallel.expert_tp(), s.parallel.ep);
  etp_group_ = place_.ExpertTpGroup(s.parallel.expert_tp());
  edp_group_ = place_.ExpertDataGroup(s.parallel.expert_tp(), s.parallel.ep);
  // Adapters on MoE models are refused: the trained experts are the experts.
  group_experts_ = GroupExpertParameters(s);
  stage_experts_ = StageExpertParameters(s);
  gather_pending_.assign(group_params_.size(), std::nullopt);
  // Groups of each virtual stage: the embedding with the first, the head with the last.
  int32_t next = 1;
  for (int64_t n : LayersPerVirtualStage(s)) {
    vstage_groups_.push_back({next, next + static_cast<int32_t>(n) - 1});
    next += static_cast<int32_t>(n);
  }
  vstage_groups_.front().first = 0;
  vstage_groups_.back().second = NumGroups() - 1;
  // DeepSpeed refuses ZeRO-3 with pipeline parallelism: one stage, one trace.
  if (gather_rule_.elements && policy_->GathersParameters() && s.parallel.pp == 1) {
    zero3_ = MakeZero3Params();
    gather_op_.assign(zero3_.elements.size(), 0);
    coordinator_.emplace(zero3_.elements, Zero3Trace(), *gather_rule_.elements);
  }
}

OpProgram Lowerer::Run() {
  Begin(m_);
  if (s_.parallel.pp == 1) {
    for (int32_t mb = 0; mb < m_; ++mb) LowerMicroBatch(mb);
    return Finish();
  }
  Pipeline();
  return std::move(p_);
}

std::unique_ptr<Lowerer> Lowerer::Fork(int64_t micro_batches) {
  // The arrays are copied once, into their final capacity, not with the rest.
  std::vector<Op> ops = std::move(p_.ops);
  std::vector<int32_t> deps = std::move(p_.deps);
  std::vector<MemAction> mem = std::move(p_.mem);
  std::vector<CollectiveSpec> collectives = std::move(p_.collectives);
  std::unique_ptr<Lowerer> f(new Lowerer(*this));
  p_.ops = std::move(ops);
  p_.deps = std::move(deps);
  p_.mem = std::move(mem);
  p_.collectives = std::move(collectives);
  f->b_.Rebind(f->p_);
  f->m_ = micro_batches;
  f->Reserve(micro_batches);
  f->p_.ops.insert(f->p_.ops.end(), p_.ops.begin(), p_.ops.end());
  f->p_.deps.insert(f->p_.deps.end(), p_.deps.begin(), p_.deps.end());
  f->p_.mem.insert(f->p_.mem.end(), p_.mem.begin(), p_.mem.end());
  f->p_.collectives = p_.collectives;
  return f;
}

void Lowerer::Begin(int64_t micro_batches) {
  const int32_t p = static_cast<int32_t>(s_.parallel.pp);
  p_.layers = layers_;
  p_.dp = s_.dp();
  p_.stages = p;
  p_.tokens_per_micro_batch = s_.training.seq_len * s_.training.micro_batch;
  Reserve(micro_batches);
  p_.sharding = plan_;
  for (int32_t stage = 0; stage < p; ++stage) {
    p_.stage_states.push_back(PersistentStates(s_, stage));
    p_.persistent.push_back(PersistentActions(stage));
    p_.stage_gpu.push_back(place_.GpuOfStage(stage));
  }
  p_.dp_stride = place_.Stride(ParallelDim::kDp);
}

void Lowerer::Reserve(int64_t micro_batches) {
  const bool model_parallel = s_.parallel.tp > 1 || s_.parallel.cp > 1;
  const size_t groups = group_params_.size();
  const size_t per_mb =
      (3 * std::max(layer_ops_.size(), dense_ops_.size()) + (model_parallel ? 15 : 3) + 12) *
          groups +
      2 * vstage_groups_.size();
  const size_t ops = per_mb * static_cast<size_t>(micro_batches) + 16 * s_.parallel.pp + 4 * groups;
  p_.ops.reserve(ops);
  p_.deps.reserve(ops);
  p_.mem.reserve(5 * ops);  // about 4 per op with tensors freed one by one
}

}  // namespace sim::lowering_internal
