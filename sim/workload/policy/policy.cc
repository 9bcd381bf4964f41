#include "sim/workload/policy/policy.h"

#include <algorithm>

#include "sim/base/check.h"
#include "sim/workload/policy/framework_traits.h"

namespace sim {

namespace {

constexpr int64_t kCompute = 2;  // bytes per compute-dtype (bf16/fp16) element

Bytes ComputeBytes(int64_t params) { return Bytes::Count(kCompute * params); }

}  // namespace

DataParallelPolicy::DataParallelPolicy(const Scenario& s, ShardingPlan plan)
    : s_(s),
      plan_(plan),
      step_reductions_(static_cast<size_t>(s.parallel.pp)),
      backward_reductions_(static_cast<size_t>(s.parallel.pp)),
      backward_reductions_mb_(static_cast<size_t>(s.parallel.pp), -1),
      deferred_(static_cast<size_t>(s.parallel.pp)) {}

int64_t DataParallelPolicy::ReduceBytes() const {
  return s_.parallel.reduce_dtype ? DtypeBytes(*s_.parallel.reduce_dtype) : kCompute;
}

DataParallelPolicy::GatherRule DataParallelPolicy::Gathers() const {
  return {s_.parallel.prefetch.value_or(ParallelSpec::kDefaultPrefetchLayers), std::nullopt};
}

int32_t DataParallelPolicy::Buckets(Bytes b) const {
  const int64_t bytes = std::max<int64_t>(b.count(), 1);
  const int64_t bucket = std::max<int64_t>(Bucket().count(), 1);
  return static_cast<int32_t>((bytes + bucket - 1) / bucket);
}

Bytes DataParallelPolicy::TransientGradients(const DpEnv& env, int32_t g) const {
  return plan_.stage >= 2 ? ComputeBytes(env.group_params[g]) : Bytes();
}

int64_t DataParallelPolicy::OptimizerShard(StageParams p) const {
  if (plan_.stage < 1) return p.total;
  const int64_t dense = p.total - p.experts, n = plan_.shard_degree;
  const int64_t ne = ExpertShardDegree(s_, plan_);
  return (dense + n - 1) / n + (p.experts + ne - 1) / ne;
}

std::vector<DataParallelPolicy::Part> DataParallelPolicy::Parts(const DpEnv& env, int64_t params,
                                                                int64_t experts,
                                                                CommGroup dense) const {
  std::vector<Part> parts;
  if (params - experts > 0) parts.push_back({params - experts, dense, plan_.shard_degree});
  if (experts > 0) parts.push_back({experts, env.expert_group, ExpertShardDegree(s_, plan_)});
  return parts;
}

bool DataParallelPolicy::GradientsToHost() const {
  return s_.parallel.offload.optimizer != OffloadTarget::kNone ||
         s_.parallel.offload.params != OffloadTarget::kNone;
}

int32_t DataParallelPolicy::CopyGradientsToHost(DpEnv& env, int32_t after, int64_t local,
                                                std::optional<int32_t> g) {
  if (!GradientsToHost()) return after;
  Op op;
  op.name = "grads_to_host";
  op.pass = OpPass::kBackward;
  op.op_class = OpClass::kPcieCopy;
  op.stream = StreamKind::kPcie;
  op.group = g;
  op.bytes_moved = Bytes::Count(ReduceBytes() * local);
  return env.b.Add(op, {after}, {});
}

void DataParallelPolicy::BeforeForward(DpEnv&, int32_t, std::vector<int32_t>&) {}

void DataParallelPolicy::StepReduce(DpEnv& env, const std::vector<int32_t>& groups,
                                    std::optional<int32_t> g) {
  int64_t params = 0, experts = 0;
  for (int32_t group : groups) {
    params += env.group_params[group];
    experts += env.group_experts[group];
  }
  for (const Part& part : Parts(env, params, experts, env.grad_group)) {
    if (part.group.size <= 1) {  // nothing to reduce with one replica
      const ProgramBuilder::DepList anchor = env.b.AnchorDeps();
      if (GradientsToHost() && !anchor.empty()) {
        step_reductions_[env.b.stage()].push_back(
            CopyGradientsToHost(env, anchor[0], part.params, g));
      }
      continue;
    }
    const Bytes grads = Bytes::Count(ReduceBytes() * part.params);
    Op op = plan_.stage == 0
                ? env.b.Collective("all_reduce", CollectiveKind::kAllReduce, grads, part.group, g)
                : env.b.Collective("reduce_scatter", CollectiveKind::kReduceScatter, grads,
                                   part.group, g);
    env.b.Spec(op).buckets = Buckets(grads);
    const Bytes staging = StepStaging(grads);
    const int32_t id = env.b.Add(op, env.b.AnchorDeps(),
                                 {{MemWhen::kStart, MemCategory::kCommBuffers, staging},
                                  {MemWhen::kEnd, MemCategory::kCommBuffers, -staging}});
    const int64_t local =
        plan_.stage >= 1 ? (part.params + part.shard_degree - 1) / part.shard_degree : part.params;
    step_reductions_[env.b.stage()].push_back(CopyGradientsToHost(env, id, local, g));
  }
}

void DataParallelPolicy::AfterBackward(DpEnv& env, int32_t g) {
  if (plan_.stage <= 1) {
    if (!OverlapGradReduce()) {
      LeaveForStep(env, g);  // reduced at the step's end, after the last micro-batch's
    } else if (env.b.last_micro_batch()) {
      StepReduce(env, {g}, g);
    }  // else accumulated locally, reduced once per step
    return;
  }
  // Stages 2 and 3: reduce-scatter the layer's gradients in every micro-batch (an MoE layer's
  // experts over their own group); its full gradients are freed when the reduce-scatter ends.
  const ProgramBuilder::DepList deps = env.b.AnchorDeps();
  // Copied into the bucket as the backward produced them: gone when the backward ends.
  if (GradientsIntoBucket()) {
    env.b.AddMemToLast(
        {MemWhen::kEnd, MemCategory::kGradients, -ComputeBytes(env.group_params[g])});
  }
  // The layer's gradients are one allocation (the backward's, MemCategory::kGradients), however
  // many parts reduce them: an MoE layer's dense part and its experts each reduce-scatter over
  // their own group, and the whole is freed once, by the last part (the ledger matches a free to
  // an allocation of its size).
  const std::vector<Part> parts =
      Parts(env, env.group_params[g], env.group_experts[g], env.shard_group);
  const Bytes all_layer_grads = ComputeBytes(env.group_params[g]);
  for (size_t pi = 0; pi < parts.size(); ++pi) {
    const Part& part = parts[pi];
    const Bytes grads = Bytes::Count(ReduceBytes() * part.params);
    const Bytes layer_grads = ComputeBytes(part.params);
    const Bytes freed = pi + 1 == parts.size() ? all_layer_grads : Bytes();
    Op rs =
        env.b.Collective("reduce_scatter", CollectiveKind::kReduceScatter, grads, part.group, g);
    env.b.Spec(rs).buckets = LayerReduceBuckets(grads);
    // Without overlap the reduction runs on the compute stream, which waits for it (DeepSpeed
    // without overlap_comm reduces each full bucket on the current stream).
    if (!OverlapGradReduce()) rs.stream = StreamKind::kCompute;
    int32_t id = 0;
    if (CopiesAroundCollectives()) {
      // FSDP2's chunk_cat on the compute stream: reads the layer's gradients and writes the
      // reduce-scatter input in the reduce dtype, then frees the gradients; the input lives
      // until the reduce-scatter ends.
      Op copy;
      copy.name = "grad_chunk_cat";
      copy.pass = OpPass::kBackward;
      copy.op_class = OpClass::kMemoryBound;
      copy.bytes_moved = layer_grads + grads;
      copy.group = g;
      const int32_t copied = env.b.Add(copy, deps,
                                       {{MemWhen::kStart, MemCategory::kCommBuffers, grads},
                                        {MemWhen::kEnd, MemCategory::kGradients, -freed}});
      id = env.b.Add(rs, {copied}, {{MemWhen::kEnd, MemCategory::kCommBuffers, -grads}});
    } else {
      const Bytes buffer = LayerReduceBuffer(grads);
      id = env.b.Add(
          rs, deps,
          {{MemWhen::kStart, MemCategory::kCommBuffers, buffer},
           {MemWhen::kEnd, MemCategory::kCommBuffers, -buffer},
           {MemWhen::kEnd, MemCategory::kGradients, GradientsIntoBucket() ? Bytes() : -freed}});
    }
    const int64_t local = (part.params + part.shard_degree - 1) / part.shard_degree;
    if (!plan_.hybrid) {
      const int32_t done = CopyGradientsToHost(env, id, local, g);
      LeaveForStep(env, done);
      continue;
    }
    // Hybrid (dense models only): the shard is all-reduced across the node replicas, one group
    // per local rank.
    const Bytes shard = grads.CeilDiv(plan_.shard_degree);
    const int32_t ar =
        env.b.Add(env.b.Collective("all_reduce", CollectiveKind::kAllReduce, shard,
                                   CommGroup{s_.cluster.nodes, s_.cluster.nodes, plan_.shard_degree,
                                             plan_.shard_degree, 1},
                                   g),
                  {id}, {});
    const int32_t done = CopyGradientsToHost(env, ar, local, g);
    LeaveForStep(env, done);
  }
}

void DataParallelPolicy::LeaveForStep(const DpEnv& env, int32_t id) {
  const int32_t stage = env.b.stage();
  if (backward_reductions_mb_[stage] != env.b.micro_batch()) {
    backward_reductions_[stage].clear();
    backward_reductions_mb_[stage] = env.b.micro_batch();
  }
  backward_reductions_[stage].push_back(id);
  if (env.b.last_micro_batch())
    (plan_.stage >= 2 ? step_reductions_ : deferred_)[stage].push_back(id);
}

void DataParallelPolicy::MarkLastBackward(int32_t stage) {
  SIM_CHECK(LastBackwardLikeAny(), "this policy's last backward differs from the others");
  const std::vector<int32_t>& r = backward_reductions_[stage];
  std::vector<int32_t>& to = (plan_.stage >= 2 ? step_reductions_ : deferred_)[stage];
  to.insert(to.end(), r.begin(), r.end());
}

void DataParallelPolicy::BeforeOptimizer(DpEnv& env) {
  const std::vector<int32_t> deferred = deferred_[env.b.stage()];
  for (int32_t g : deferred) StepReduce(env, {g}, g);
}

std::vector<int32_t> DataParallelPolicy::TakeStepReductions(int32_t stage) {
  std::vector<int32_t> out;
  out.swap(step_reductions_[stage]);
  return out;
}

void DataParallelPolicy::AfterOptimizer(DpEnv&, int32_t, StageParams) {}

void DataParallelPolicy::GatherUpdatedParameters(DpEnv& env, int32_t optimizer, StageParams p,
                                                 std::optional<Bytes> chunk) {
  for (const Part& part : Parts(env, p.total, p.experts, env.grad_group)) {
    if (part.group.size <= 1) continue;
    const Bytes params = ComputeBytes(part.params);
    Op ag = env.b.Collective("all_gather", CollectiveKind::kAllGather, params, part.group,
                             std::nullopt);
    if (chunk) {
      const int64_t c = std::max<int64_t>(chunk->count(), 1);
      env.b.Spec(ag).buckets = static_cast<int32_t>((params.count() + c - 1) / c);
    } else {
      env.b.Spec(ag).buckets = Buckets(params);
    }
    env.b.Add(ag, {optimizer}, {});
  }
}

ShardingPlan PlanSharding(const Scenario& s) { return MakeDataParallelPolicy(s)->sharding(); }

std::unique_ptr<DataParallelPolicy> MakeDataParallelPolicy(const Scenario& s) {
  switch (s.parallel.framework) {
    case Framework::kFsdp:
      return MakeFsdpPolicy(s);
    case Framework::kMegatron:
      return MakeMegatronPolicy(s);
    case Framework::kDdp:
      return MakeDdpPolicy(s);
    case Framework::kTorchtune:
      return MakeTorchtunePolicy(s);
    case Framework::kDeepSpeed:
      break;
  }
  return MakeDeepSpeedPolicy(s);
}

}  // namespace sim
