#include "sim/workload/lowering.h"

#include <algorithm>
#include <initializer_list>

#include "absl/types/span.h"

#include "absl/strings/str_cat.h"
#include "sim/base/check.h"
#include "sim/workload/params.h"

namespace sim {

namespace {

constexpr int64_t kCompute = 2;  // bytes per compute-dtype (bf16/fp16) element

int64_t DtypeBytes(Dtype d) {
  switch (d) {
    case Dtype::kFp32: case Dtype::kTf32: return 4;
    case Dtype::kBf16: case Dtype::kFp16: return 2;
    case Dtype::kFp8: return 1;
  }
  return 2;
}

// Bytes one optimizer step reads and writes per parameter of the local shard (memory-bound):
// AdamW reads grad 2, master 4, m 4, v 4 and writes master, m, v and the bf16 weight copy 2.
int64_t OptimizerTrafficPerParam(OptimizerKind o) {
  switch (o) {
    case OptimizerKind::kAdamW: return (2 + 4 + 4 + 4) + (4 + 4 + 4 + 2);
    case OptimizerKind::kSgd: return (2 + 4 + 4) + (4 + 4 + 2);
    case OptimizerKind::kAdam8bit: return (2 + 4 + 1 + 1) + (4 + 1 + 1 + 2);
  }
  return 0;
}

int32_t CeilDiv(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

class Lowerer {
 public:
  explicit Lowerer(const Scenario& s)
      : s_(s),
        plan_(PlanSharding(s)),
        params_(CountParameters(s.model)),
        shape_{s.training.seq_len, s.training.micro_batch, 1, false, s.training.attention},
        layer_ops_(LayerForwardOps(s.model, shape_)),
        layers_(static_cast<int32_t>(s.model.layers)),
        tokens_(s.training.seq_len * s.training.micro_batch) {
    group_params_.push_back(params_.embedding + params_.positions);
    for (int32_t l = 0; l < layers_; ++l) group_params_.push_back(params_.per_layer);
    // A tied head multiplies by the embedding matrix, which must be gathered again.
    group_params_.push_back(params_.final_norm +
                            (s.model.tied_embeddings ? params_.embedding : params_.lm_head));
    reduce_bytes_ = s.parallel.reduce_dtype ? DtypeBytes(*s.parallel.reduce_dtype) : kCompute;
    dp_group_ = CommGroup{s.dp(), s.cluster.nodes, 1, 1, 0};
    // Hybrid: one shard group per node, all nodes at once.
    shard_group_ = plan_.hybrid ? CommGroup{plan_.shard_degree, 1, 1, s.cluster.nodes,
                                            plan_.shard_degree}
                                : dp_group_;
    gather_pending_.assign(group_params_.size(), std::nullopt);
  }

  OpProgram Run() {
    p_.layers = layers_;
    p_.dp = s_.dp();
    p_.tokens_per_micro_batch = tokens_;
    // Capacity for the ops of every micro-batch (forward, recompute, backward, 3 collectives per
    // group), so that lowering allocates once.
    const size_t per_mb = (3 * layer_ops_.size() + 3) * group_params_.size();
    p_.ops.reserve(per_mb * static_cast<size_t>(s_.micro_batches()) + 4);
    p_.deps.reserve(p_.ops.capacity());
    p_.mem.reserve(3 * p_.ops.capacity());
    Persistent();
    const int32_t m = static_cast<int32_t>(s_.micro_batches());
    for (int32_t mb = 0; mb < m; ++mb) {
      mb_ = mb;
      last_micro_batch_ = mb == m - 1;
      Forward();
      Backward();
    }
    Optimizer();
    return std::move(p_);
  }

 private:
  bool Zero3() const { return plan_.stage == 3; }
  int32_t NumGroups() const { return static_cast<int32_t>(group_params_.size()); }
  Bytes ComputeBytes(int64_t params) const { return Bytes::Count(kCompute * params); }

  int32_t Add(Op op, absl::Span<const int32_t> deps, absl::Span<const MemAction> mem) {
    op.micro_batch = mb_;
    op.deps_begin = static_cast<int32_t>(p_.deps.size());
    for (int32_t d : deps) p_.deps.push_back(d);
    op.deps_end = static_cast<int32_t>(p_.deps.size());
    op.mem_begin = static_cast<int32_t>(p_.mem.size());
    for (MemWhen when : {MemWhen::kIssue, MemWhen::kStart, MemWhen::kEnd}) {
      if (when == MemWhen::kStart) op.mem_start = static_cast<int32_t>(p_.mem.size());
      if (when == MemWhen::kEnd) op.mem_finish = static_cast<int32_t>(p_.mem.size());
      for (const MemAction& a : mem) {
        if (a.when == when && a.bytes.count() != 0) p_.mem.push_back(a);
      }
    }
    op.mem_end = static_cast<int32_t>(p_.mem.size());
    p_.ops.push_back(op);
    const int32_t id = static_cast<int32_t>(p_.ops.size()) - 1;
    if (op.stream == StreamKind::kCompute) last_compute_ = id;
    return id;
  }

  // Appends an end-of-op free to the newest op (frees decided after it was emitted, e.g. the
  // last op of a layer releasing the layer's buffers). End actions come last in an op's range,
  // so appending keeps the range ordered.
  void AddMemToLast(MemAction a) {
    SIM_CHECK(!p_.ops.empty() && p_.ops.back().mem_end == static_cast<int32_t>(p_.mem.size()) &&
                  a.when == MemWhen::kEnd,
              "only end-of-op actions may be appended, and only to the newest op");
    if (a.bytes.count() == 0) return;
    p_.mem.push_back(a);
    p_.ops.back().mem_end++;
  }

  std::vector<int32_t> AnchorDeps() const {
    return last_compute_ ? std::vector<int32_t>{*last_compute_} : std::vector<int32_t>{};
  }

  void Persistent() {
    const StateSplit st = PersistentStates(s_);
    p_.persistent = {{MemWhen::kIssue, MemCategory::kWeights, st.weights},
                     {MemWhen::kIssue, MemCategory::kGradients, st.gradients},
                     {MemWhen::kIssue, MemCategory::kOptimizer, st.optimizer},
                     {MemWhen::kIssue, MemCategory::kReserved, s_.runtime.reserved}};
  }

  // ---- ZeRO-3 gathers ---------------------------------------------------------------------

  // A communication op and its collective (recorded now; `buckets` may be set through
  // Spec(op) before the op is added).
  Op Collective(absl::string_view name, CollectiveKind kind, Bytes tensor, CommGroup group,
                int32_t g) {
    Op op;
    op.name = name;
    op.phase = OpPhase::kComm;
    op.stream = StreamKind::kComm;
    op.group = g;
    op.collective = static_cast<int32_t>(p_.collectives.size());
    p_.collectives.push_back({kind, tensor, group, 1});
    return op;
  }
  CollectiveSpec& Spec(const Op& op) { return p_.collectives[op.collective]; }

  // Launches the gathers of groups [from, to] (in the direction of travel) not yet launched,
  // anchored at the compute reached so far. The buffer is allocated at launch.
  void LaunchGathers(int32_t from, int32_t to, int32_t step) {
    for (int32_t g = from; step > 0 ? g <= to : g >= to; g += step) {
      if (g < 0 || g >= NumGroups() || gather_pending_[g]) continue;
      const Bytes buffer = ComputeBytes(group_params_[g]);
      gather_pending_[g] =
          Add(Collective("all_gather", CollectiveKind::kAllGather, buffer, shard_group_, g),
              AnchorDeps(), {{MemWhen::kIssue, MemCategory::kGatheredParams, buffer}});
    }
  }

  // The gather a group's first compute op waits for (consumed: the next pass gathers anew).
  std::vector<int32_t> TakeGather(int32_t g) {
    std::vector<int32_t> deps;
    if (gather_pending_[g]) deps.push_back(*gather_pending_[g]);
    gather_pending_[g].reset();
    return deps;
  }

  // ---- compute ops ------------------------------------------------------------------------

  Op Compute(absl::string_view name, OpPhase phase, OpClass cls, Flops flops, Bytes moved,
             int32_t g) const {
    Op op;
    op.name = name;
    op.phase = phase;
    op.op_class = cls;
    op.flops = flops;
    op.bytes_moved = moved;
    op.group = g;
    return op;
  }

  Op FromLayerOp(const LayerOp& lo, OpPhase phase, int32_t g) const {
    // Backward: a GEMM's input and weight gradients are two GEMMs of the forward's size; other
    // kernels read and write about twice the forward traffic. FlashAttention's backward runs
    // five matmuls to the forward's two (it recomputes QK^T and the softmax): 2.5x (Dao 2023,
    // FlashAttention-2, arXiv 2307.08691, section 3.1.2).
    const bool flash_backward = phase == OpPhase::kBackward && lo.op_class == OpClass::kAttention &&
                                s_.training.attention == AttentionKernel::kFlash;
    const double k = flash_backward ? 2.5 : phase == OpPhase::kBackward ? 2.0 : 1.0;
    return Compute(lo.name, phase, lo.op_class, lo.flops * k,
                   Bytes::Round(static_cast<double>(lo.bytes_moved.count()) * k), g);
  }

  bool Kept(const LayerOp& lo, const SavedTensor& t) const {
    switch (s_.training.recompute) {
      case Recompute::kNone: return true;
      case Recompute::kSelective: return !t.attention_core;
      case Recompute::kFull: return &lo == &layer_ops_.front() && &t == &lo.saves.front();
    }
    return true;
  }

  Bytes SavedBy(const LayerOp& lo) const {
    Bytes b;
    for (const SavedTensor& t : lo.saves) b += t.bytes;
    return b;
  }

  void LayerForward(int32_t g, std::vector<int32_t> first_deps, bool free_gather_at_end) {
    Bytes transient;  // tensors not kept for backward: freed when the layer's forward ends
    for (size_t i = 0; i < layer_ops_.size(); ++i) {
      const LayerOp& lo = layer_ops_[i];
      std::vector<MemAction>& mem = scratch_;
      mem.clear();
      for (const SavedTensor& t : lo.saves) {
        mem.push_back({MemWhen::kStart, MemCategory::kActivations, t.bytes});
        if (!Kept(lo, t)) transient += t.bytes;
      }
      Add(FromLayerOp(lo, OpPhase::kForward, g),
          i == 0 ? absl::Span<const int32_t>(first_deps) : absl::Span<const int32_t>(), mem);
    }
    AddMemToLast({MemWhen::kEnd, MemCategory::kActivations, -transient});
    if (free_gather_at_end) {
      AddMemToLast({MemWhen::kEnd, MemCategory::kGatheredParams, -ComputeBytes(group_params_[g])});
    }
  }

  void LayerBackward(int32_t g, std::vector<int32_t> first_deps, Bytes free_at_end) {
    bool first = true;
    auto deps = [&]() {
      const absl::Span<const int32_t> d =
          first ? absl::Span<const int32_t>(first_deps) : absl::Span<const int32_t>();
      first = false;
      return d;
    };
    // The layer's full gradients, when they are not accumulated into a persistent buffer.
    std::vector<MemAction> grads;
    if (plan_.stage >= 2) {
      grads.push_back({MemWhen::kStart, MemCategory::kGradients, ComputeBytes(group_params_[g])});
    }
    // Recompute: full re-runs the layer's forward; selective re-runs the attention core.
    bool grads_allocated = false;
    if (s_.training.recompute != Recompute::kNone) {
      for (const LayerOp& lo : layer_ops_) {
        // Full recompute re-runs every forward op of the layer; selective only the ops that
        // produce attention-core tensors.
        std::vector<MemAction>& mem = scratch_;
        mem.clear();
        bool core = false;
        for (const SavedTensor& t : lo.saves) {
          core = core || t.attention_core;
          if (!Kept(lo, t)) mem.push_back({MemWhen::kStart, MemCategory::kActivations, t.bytes});
        }
        if (s_.training.recompute == Recompute::kSelective && !core) continue;
        if (!grads_allocated) {
          mem.insert(mem.end(), grads.begin(), grads.end());
          grads_allocated = true;
        }
        Add(FromLayerOp(lo, OpPhase::kRecompute, g), deps(), mem);
      }
    }
    for (auto it = layer_ops_.rbegin(); it != layer_ops_.rend(); ++it) {
      const Bytes saved = SavedBy(*it);
      // The op's input gradient exists while it runs; its saved tensors are freed when it ends.
      std::vector<MemAction>& mem = scratch_;
      mem.assign({{MemWhen::kStart, MemCategory::kActivations, saved},
                  {MemWhen::kEnd, MemCategory::kActivations, -saved - saved}});
      if (!grads_allocated) {
        mem.insert(mem.end(), grads.begin(), grads.end());
        grads_allocated = true;
      }
      Add(FromLayerOp(*it, OpPhase::kBackward, g), deps(), mem);
    }
    if (free_at_end.count() != 0) {
      AddMemToLast({MemWhen::kEnd, MemCategory::kGatheredParams, -free_at_end});
    }
  }

  // ---- embedding and head -----------------------------------------------------------------

  void EmbeddingForward(std::vector<int32_t> deps, bool free_gather) {
    const int64_t h = s_.model.hidden;
    const Bytes mask = Bytes::Count(s_.model.dropout > 0 ? tokens_ * h : 0);
    Add(Compute("embedding", OpPhase::kForward, OpClass::kMemoryBound, Flops(),
                Bytes::Count(2 * kCompute * tokens_ * h), 0),
        deps,
        {{MemWhen::kStart, MemCategory::kActivations, mask},
         {MemWhen::kEnd, MemCategory::kGatheredParams,
          free_gather ? -ComputeBytes(group_params_[0]) : Bytes()}});
  }

  void HeadForward(std::vector<int32_t> deps, bool free_gather) {
    const int32_t g = NumGroups() - 1;
    const int64_t h = s_.model.hidden, v = s_.model.vocab;
    const Bytes hidden = Bytes::Count(kCompute * tokens_ * h);
    const Bytes logits16 = Bytes::Count(kCompute * tokens_ * v);
    const Bytes logits32 = Bytes::Count(4 * tokens_ * v);
    Add(Compute("final_norm", OpPhase::kForward, OpClass::kMemoryBound,
                Flops::Count(5.0 * static_cast<double>(tokens_ * h)), hidden * 2, g),
        deps, {{MemWhen::kStart, MemCategory::kActivations, hidden}});
    Add(Compute("lm_head", OpPhase::kForward, OpClass::kGemm,
                Flops::Count(2.0 * static_cast<double>(tokens_) * static_cast<double>(h) *
                             static_cast<double>(v)),
                Bytes::Count(kCompute * (tokens_ * h + h * v + tokens_ * v)), g),
        {},
        {{MemWhen::kStart, MemCategory::kActivations, hidden},
         {MemWhen::kStart, MemCategory::kLogits, logits16},
         {MemWhen::kEnd, MemCategory::kGatheredParams,
          free_gather ? -ComputeBytes(group_params_[g]) : Bytes()}});
    // The loss upcasts the logits to fp32 and keeps them (softmax) for backward.
    Add(Compute("cross_entropy", OpPhase::kForward, OpClass::kMemoryBound,
                Flops::Count(5.0 * static_cast<double>(tokens_ * v)), logits16 + logits32, g),
        {},
        {{MemWhen::kStart, MemCategory::kLogits, logits32},
         {MemWhen::kEnd, MemCategory::kLogits, -logits16}});
  }

  void HeadBackward(std::vector<int32_t> deps, Bytes free_gather) {
    const int32_t g = NumGroups() - 1;
    const int64_t h = s_.model.hidden, v = s_.model.vocab;
    const Bytes hidden = Bytes::Count(kCompute * tokens_ * h);
    const Bytes logits32 = Bytes::Count(4 * tokens_ * v);
    std::vector<MemAction> grads;
    if (plan_.stage >= 2) {
      grads.push_back({MemWhen::kStart, MemCategory::kGradients, ComputeBytes(group_params_[g])});
    }
    // d(logits) in fp32 replaces the saved softmax.
    std::vector<MemAction> ce = {{MemWhen::kStart, MemCategory::kLogits, logits32},
                                 {MemWhen::kEnd, MemCategory::kLogits, -logits32}};
    ce.insert(ce.end(), grads.begin(), grads.end());
    Add(Compute("cross_entropy", OpPhase::kBackward, OpClass::kMemoryBound,
                Flops::Count(3.0 * static_cast<double>(tokens_ * v)), logits32 * 2, g),
        deps, ce);
    Add(Compute("lm_head", OpPhase::kBackward, OpClass::kGemm,
                Flops::Count(4.0 * static_cast<double>(tokens_) * static_cast<double>(h) *
                             static_cast<double>(v)),
                Bytes::Count(2 * kCompute * (tokens_ * h + h * v + tokens_ * v)), g),
        {},
        {{MemWhen::kStart, MemCategory::kActivations, hidden},
         {MemWhen::kEnd, MemCategory::kLogits, -logits32},
         {MemWhen::kEnd, MemCategory::kActivations, -hidden - hidden}});
    Add(Compute("final_norm", OpPhase::kBackward, OpClass::kMemoryBound,
                Flops::Count(10.0 * static_cast<double>(tokens_ * h)), hidden * 4, g),
        {},
        {{MemWhen::kStart, MemCategory::kActivations, hidden},
         {MemWhen::kEnd, MemCategory::kActivations, -hidden - hidden},
         {MemWhen::kEnd, MemCategory::kGatheredParams, -free_gather}});
  }

  void EmbeddingBackward(std::vector<int32_t> deps, Bytes free_gather) {
    const int64_t h = s_.model.hidden;
    const Bytes mask = Bytes::Count(s_.model.dropout > 0 ? tokens_ * h : 0);
    std::vector<MemAction> mem = {{MemWhen::kEnd, MemCategory::kActivations, -mask},
                                  {MemWhen::kEnd, MemCategory::kGatheredParams, -free_gather}};
    if (plan_.stage >= 2) {
      mem.push_back({MemWhen::kStart, MemCategory::kGradients, ComputeBytes(group_params_[0])});
    }
    Add(Compute("embedding", OpPhase::kBackward, OpClass::kMemoryBound, Flops(),
                Bytes::Count(3 * kCompute * tokens_ * h), 0),
        deps, mem);
  }

  // ---- passes -----------------------------------------------------------------------------

  void Forward() {
    const int32_t pf = static_cast<int32_t>(s_.parallel.prefetch);
    const bool free_after_forward = Zero3() && !plan_.keep_params_to_backward;
    for (int32_t g = 0; g < NumGroups(); ++g) {
      std::vector<int32_t> deps;
      if (Zero3()) {
        LaunchGathers(g, g + pf, +1);
        deps = TakeGather(g);
      }
      if (g == 0) {
        EmbeddingForward(deps, free_after_forward);
      } else if (g == NumGroups() - 1) {
        HeadForward(deps, free_after_forward);
      } else {
        LayerForward(g, deps, free_after_forward);
      }
    }
  }

  // Emits the gradient reduction of group g after its backward, per the stage's semantics.
  void Reduce(int32_t g) {
    const Bytes grads = Bytes::Count(reduce_bytes_ * group_params_[g]);
    const int32_t buckets = CeilDiv(std::max<int64_t>(grads.count(), 1),
                                    std::max<int64_t>(s_.parallel.bucket.count(), 1));
    const Bytes staging = std::min(grads, s_.parallel.bucket);
    const std::vector<int32_t> deps = AnchorDeps();
    // Frees the layer's full gradients when it ends (stages 2 and 3).
    const Bytes layer_grads = plan_.stage >= 2 ? ComputeBytes(group_params_[g]) : Bytes();
    if (plan_.stage <= 1) {
      if (!last_micro_batch_) return;  // accumulate locally; reduce once per step
      Op op = plan_.stage == 0
                  ? Collective("all_reduce", CollectiveKind::kAllReduce, grads, dp_group_, g)
                  : Collective("reduce_scatter", CollectiveKind::kReduceScatter, grads,
                               dp_group_, g);
      Spec(op).buckets = buckets;
      reduces_.push_back(Add(op, deps,
                             {{MemWhen::kStart, MemCategory::kCommBuffers, staging},
                              {MemWhen::kEnd, MemCategory::kCommBuffers, -staging}}));
      return;
    }
    Op rs = Collective("reduce_scatter", CollectiveKind::kReduceScatter, grads, shard_group_, g);
    Spec(rs).buckets = s_.parallel.framework == Framework::kFsdp ? 1 : buckets;
    const Bytes buffer = s_.parallel.framework == Framework::kFsdp
                             ? (reduce_bytes_ != kCompute ? grads : Bytes())
                             : staging;
    const int32_t id = Add(rs, deps,
                           {{MemWhen::kStart, MemCategory::kCommBuffers, buffer},
                            {MemWhen::kEnd, MemCategory::kCommBuffers, -buffer},
                            {MemWhen::kEnd, MemCategory::kGradients, -layer_grads}});
    if (!plan_.hybrid) {
      if (last_micro_batch_) reduces_.push_back(id);
      return;
    }
    // Hybrid: the shard is all-reduced across the node replicas.
    const Bytes shard = Bytes::Count((grads.count() + plan_.shard_degree - 1) / plan_.shard_degree);
    const int32_t ar = Add(Collective("all_reduce", CollectiveKind::kAllReduce, shard,
                                      // One group per local rank, across the nodes.
                                      CommGroup{s_.cluster.nodes, s_.cluster.nodes,
                                                plan_.shard_degree, plan_.shard_degree, 1},
                                      g),
                           {id}, {});
    if (last_micro_batch_) reduces_.push_back(ar);
  }

  void Backward() {
    const int32_t pf = static_cast<int32_t>(s_.parallel.prefetch);
    const bool gather = Zero3() && !plan_.keep_params_to_backward;
    for (int32_t g = NumGroups() - 1; g >= 0; --g) {
      std::vector<int32_t> deps;
      if (gather) {
        LaunchGathers(g, g - pf, -1);
        deps = TakeGather(g);
      }
      const Bytes free_gather = Zero3() ? ComputeBytes(group_params_[g]) : Bytes();
      if (g == NumGroups() - 1) {
        HeadBackward(deps, free_gather);
      } else if (g == 0) {
        EmbeddingBackward(deps, free_gather);
      } else {
        LayerBackward(g, deps, free_gather);
      }
      Reduce(g);
    }
  }

  void Optimizer() {
    mb_ = static_cast<int32_t>(s_.micro_batches()) - 1;
    const int64_t total = params_.total;
    const int64_t local = plan_.stage >= 1 ? (total + plan_.shard_degree - 1) / plan_.shard_degree
                                           : total;
    std::vector<int32_t> deps = reduces_;
    if (last_compute_) deps.push_back(*last_compute_);
    Op opt = Compute("optimizer", OpPhase::kOptimizer, OpClass::kMemoryBound,
                     Flops::Count(12.0 * static_cast<double>(local)),
                     Bytes::Count(OptimizerTrafficPerParam(s_.training.optimizer) * local),
                     kStepWide);
    const int32_t id = Add(opt, deps, {});
    // ZeRO-1/2 (DeepSpeed): every rank gathers the updated compute-dtype parameters.
    if ((plan_.stage == 1 || plan_.stage == 2) && s_.parallel.framework == Framework::kDeepSpeed) {
      Op ag = Collective("all_gather", CollectiveKind::kAllGather, ComputeBytes(total), dp_group_,
                         kStepWide);
      Spec(ag).buckets =
          CeilDiv(Spec(ag).tensor.count(), std::max<int64_t>(s_.parallel.bucket.count(), 1));
      Add(ag, {id}, {});
    }
  }

  const Scenario& s_;
  const ShardingPlan plan_;
  const ParameterCount params_;
  const ActivationShape shape_;
  const std::vector<LayerOp> layer_ops_;
  const int32_t layers_;
  const int64_t tokens_;
  std::vector<int64_t> group_params_;
  int64_t reduce_bytes_ = kCompute;
  CommGroup dp_group_, shard_group_;
  OpProgram p_;
  int32_t mb_ = 0;
  bool last_micro_batch_ = false;
  std::optional<int32_t> last_compute_;
  std::vector<std::optional<int32_t>> gather_pending_;
  std::vector<int32_t> reduces_;
  std::vector<MemAction> scratch_;  // reused per op: lowering allocates no vector per op
};

}  // namespace

ShardingPlan PlanSharding(const Scenario& s) {
  ShardingPlan plan;
  plan.stage = static_cast<int>(s.parallel.zero);
  plan.shard_degree = s.dp();
  if (s.parallel.framework == Framework::kFsdp) {
    const FsdpSharding mode = s.parallel.sharding.value_or(
        s.parallel.zero == 3   ? FsdpSharding::kFullShard
        : s.parallel.zero == 0 ? FsdpSharding::kNoShard
                               : FsdpSharding::kShardGradOp);
    switch (mode) {
      case FsdpSharding::kNoShard: plan.stage = 0; break;
      case FsdpSharding::kShardGradOp:
        plan.stage = 3;
        plan.keep_params_to_backward = true;
        break;
      case FsdpSharding::kFullShard: plan.stage = 3; break;
      case FsdpSharding::kHybridShard:
        plan.stage = 3;
        plan.hybrid = s.cluster.nodes > 1;
        if (plan.hybrid) plan.shard_degree = s.cluster.node.gpus_per_node;
        break;
    }
  }
  return plan;
}

StateSplit PersistentStates(const Scenario& s) {
  const ShardingPlan plan = PlanSharding(s);
  BytesPerParam bpp =
      StateBytesPerParam(s.parallel.framework, s.training.optimizer, s.training.precision);
  if (s.training.precision == Precision::kFp8) bpp.weights.bytes_per_param = 2 + 1;
  const int64_t params = CountParameters(s.model).total;
  // fsdp shard_grad_op holds the states of full_shard: the unsharded parameters it keeps from
  // forward to backward are gathers in the replay (gathered_params), not persistent weights.
  auto split = PerGpuStateSplit(bpp, s.parallel.framework, plan.stage, params, plan.shard_degree);
  SIM_CHECK(split.has_value(), "no persistent-state rule for this framework and stage");
  return *split;
}

absl::StatusOr<OpProgram> Lower(const Scenario& s) {
  if (s.parallel.tp > 1 || s.parallel.pp > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "tensor and pipeline parallelism (tp ", s.parallel.tp, ", pp ", s.parallel.pp,
        ") are not replayed yet; use parallel.tp=1 parallel.pp=1 (stepsim ledger --tp shows "
        "the TP activation rows)"));
  }
  if (s.parallel.framework == Framework::kMegatron) {
    return absl::UnimplementedError(
        "the megatron preset is replayed with tensor/pipeline parallelism (not built yet); use "
        "parallel.framework=deepspeed or fsdp");
  }
  if (s.parallel.framework == Framework::kFsdp && s.parallel.zero == 1 && !s.parallel.sharding) {
    return absl::FailedPreconditionError(
        "fsdp has no ZeRO-1 mode: use parallel.zero 0 (no_shard), 2 (shard_grad_op) or 3 "
        "(full_shard), or parallel.sharding");
  }
  return Lowerer(s).Run();
}

}  // namespace sim
