#include "sim/workload/lowering.h"

#include <algorithm>
#include <initializer_list>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "sim/base/check.h"
#include "sim/workload/params.h"
#include "sim/workload/pipeline_schedule.h"
#include "sim/workload/placement.h"

namespace sim {

namespace {

constexpr int64_t kCompute = 2;  // bytes per compute-dtype (bf16/fp16) element

int64_t DtypeBytes(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
    case Dtype::kTf32:
      return 4;
    case Dtype::kBf16:
    case Dtype::kFp16:
      return 2;
    case Dtype::kFp8:
      return 1;
  }
  return 2;
}

// Bytes one optimizer step reads and writes per parameter of the local shard (memory-bound):
// AdamW reads grad 2, master 4, m 4, v 4 and writes master, m, v and the bf16 weight copy 2.
int64_t OptimizerTrafficPerParam(OptimizerKind o) {
  switch (o) {
    case OptimizerKind::kAdamW:
      return (2 + 4 + 4 + 4) + (4 + 4 + 4 + 2);
    case OptimizerKind::kSgd:
      return (2 + 4 + 4) + (4 + 4 + 2);
    case OptimizerKind::kAdam8bit:
      return (2 + 4 + 1 + 1) + (4 + 1 + 1 + 2);
  }
  return 0;
}

int32_t CeilDiv(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

// An op's memory actions: a handful, kept inline so that lowering allocates nothing per op.
using MemList = absl::InlinedVector<MemAction, 8>;

class Lowerer {
 public:
  explicit Lowerer(const Scenario& s)
      : s_(s),
        plan_(PlanSharding(s)),
        place_(s),
        shape_{s.training.seq_len,           s.training.micro_batch, s.parallel.tp,
               s.parallel.sequence_parallel, s.training.attention,   s.parallel.cp},
        layer_ops_(LayerForwardOps(s.model, shape_)),
        layers_(static_cast<int32_t>(s.model.layers)),
        tokens_(s.training.seq_len / s.parallel.cp * s.training.micro_batch),
        rep_(s.parallel.sequence_parallel ? s.parallel.tp : 1),
        act_bytes_(Bytes::Count(kCompute * tokens_ * s.model.hidden)),
        overlap_reduce_(
            s.parallel.overlap_grad_reduce.value_or(s.parallel.framework != Framework::kMegatron)) {
    group_params_ = GroupParameters(s);
    reduce_bytes_ = s.parallel.reduce_dtype ? DtypeBytes(*s.parallel.reduce_dtype)
                    : s.parallel.framework == Framework::kMegatron ? 4  // fp32 main_grad
                                                                   : kCompute;
    grad_group_ = place_.GradientGroup();
    // Hybrid: one shard group per node, all nodes at once.
    shard_group_ = plan_.hybrid
                       ? CommGroup{plan_.shard_degree, 1, 1, s.cluster.nodes, plan_.shard_degree}
                       : grad_group_;
    tp_group_ = place_.Group(ParallelDim::kTp);
    cp_group_ = place_.Group(ParallelDim::kCp);
    gather_pending_.assign(group_params_.size(), std::nullopt);
    // Groups of each virtual stage: the embedding with the first, the head with the last.
    int32_t next = 1;
    for (int64_t n : LayersPerVirtualStage(s)) {
      vstage_groups_.push_back({next, next + static_cast<int32_t>(n) - 1});
      next += static_cast<int32_t>(n);
    }
    vstage_groups_.front().first = 0;
    vstage_groups_.back().second = NumGroups() - 1;
  }

  OpProgram Run() {
    const int32_t p = static_cast<int32_t>(s_.parallel.pp);
    p_.layers = layers_;
    p_.dp = s_.dp();
    p_.stages = p;
    p_.tokens_per_micro_batch = s_.training.seq_len * s_.training.micro_batch;
    // Capacity for the ops of every micro-batch (forward, recompute, backward, the ZeRO
    // collectives of a group and up to 12 TP/CP collectives per layer), so that lowering
    // allocates once.
    const bool model_parallel = s_.parallel.tp > 1 || s_.parallel.cp > 1;
    const size_t per_mb =
        (3 * layer_ops_.size() + (model_parallel ? 15 : 3)) * group_params_.size() + 2 * p;
    p_.ops.reserve(per_mb * static_cast<size_t>(s_.micro_batches()) + 4 * p);
    p_.deps.reserve(p_.ops.capacity());
    p_.mem.reserve(3 * p_.ops.capacity());
    st_.assign(p, StageState{});
    for (int32_t stage = 0; stage < p; ++stage) {
      p_.persistent.push_back(PersistentActions(stage));
      p_.stage_gpu.push_back(place_.GpuOfStage(stage));
    }
    p_.dp_stride = place_.Stride(ParallelDim::kDp);
    if (p == 1) {
      const int32_t m = static_cast<int32_t>(s_.micro_batches());
      for (int32_t mb = 0; mb < m; ++mb) {
        SetMicroBatch(mb);
        Forward(0, NumGroups() - 1, {});
        Backward(NumGroups() - 1, 0, {});
      }
      FinishStage();
    } else {
      Pipeline();
    }
    return std::move(p_);
  }

 private:
  // What lowering remembers per pipeline stage (each stage is its own GPU and streams).
  struct StageState {
    std::optional<int32_t> last_compute;
    std::vector<int32_t> reduces;     // the step's last gradient reductions
    std::vector<int32_t> deferred;    // groups reduced after the whole backward
    std::vector<int32_t> overlapped;  // TP/CP ops beside the next compute op
    std::vector<int32_t> wait;        // ... which the compute op after it waits for
  };

  bool Zero3() const { return plan_.stage == 3; }
  bool Megatron() const { return s_.parallel.framework == Framework::kMegatron; }
  int32_t NumGroups() const { return static_cast<int32_t>(group_params_.size()); }
  Bytes ComputeBytes(int64_t params) const { return Bytes::Count(kCompute * params); }
  StageState& St() { return st_[stage_]; }
  void SetMicroBatch(int32_t mb) {
    mb_ = mb;
    last_micro_batch_ = mb == s_.micro_batches() - 1;
  }

  int32_t Add(Op op, absl::Span<const int32_t> deps, absl::Span<const MemAction> mem) {
    op.micro_batch = mb_;
    op.stage = static_cast<int16_t>(stage_);
    op.deps_begin = static_cast<int32_t>(p_.deps.size());
    for (int32_t d : deps) p_.deps.push_back(d);
    const bool compute = op.stream == StreamKind::kCompute && op.phase != OpPhase::kComm;
    if (compute) {
      // A compute op waits for the overlapped TP/CP collectives of the op before it, and hands
      // on those that run beside it.
      StageState& st = St();
      for (int32_t d : st.wait) p_.deps.push_back(d);
      st.wait.swap(st.overlapped);
      st.overlapped.clear();
    }
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
    if (op.stream == StreamKind::kCompute) St().last_compute = id;
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
    std::vector<int32_t> deps;
    if (const auto& last = st_[stage_].last_compute) deps.push_back(*last);
    return deps;
  }

  std::vector<MemAction> PersistentActions(int32_t stage) const {
    const StateSplit st = PersistentStates(s_, stage);
    return {{MemWhen::kIssue, MemCategory::kWeights, st.weights},
            {MemWhen::kIssue, MemCategory::kGradients, st.gradients},
            {MemWhen::kIssue, MemCategory::kOptimizer, st.optimizer},
            {MemWhen::kIssue, MemCategory::kReserved, s_.runtime.reserved}};
  }

  // ---- collectives ------------------------------------------------------------------------

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

  // A TP or CP collective around one compute op. `buffer`: its output is a transient buffer
  // (an all-gathered activation) that the compute op frees when it ends.
  struct ModelParallelComm {
    absl::string_view name;
    CollectiveKind kind;
    Bytes tensor;
    const CommGroup* group;
    bool buffer = false;
  };

  // Emits compute op `x` with the collectives that feed it (`pre`) and consume its output
  // (`post`). Without tp_comm_overlap they run on the compute stream in that order (Megatron-LM
  // waits for them); with it, or when `async`, they run on the TP stream beside `x` (chunked
  // GEMM+collective pipelining, Wang et al. 2022, ASPLOS '23: the pair costs about the longer
  // of the two), and the compute op after `x` waits for them.
  int32_t WithComms(Op x, absl::Span<const int32_t> deps, MemList mem,
                    std::initializer_list<ModelParallelComm> pre,
                    std::initializer_list<ModelParallelComm> post, bool async = false) {
    const bool overlap = s_.parallel.tp_comm_overlap || async;
    bool first = true;
    auto emit = [&](const ModelParallelComm& c) {
      if (c.group->size <= 1) return;
      Op op = Collective(c.name, c.kind, c.tensor, *c.group, x.group);
      op.stream = overlap ? StreamKind::kTpComm : StreamKind::kCompute;
      std::vector<int32_t> d;
      if (overlap) d = AnchorDeps();
      if (first) {
        for (int32_t x : deps) d.push_back(x);
      }
      first = false;
      const Bytes buffer = c.buffer ? c.tensor : Bytes();
      // Beside x, the buffer exists from launch (x may start before the collective does).
      const int32_t id =
          Add(op, d,
              {{overlap ? MemWhen::kIssue : MemWhen::kStart, MemCategory::kCommBuffers, buffer}});
      if (overlap) St().overlapped.push_back(id);
      if (c.buffer) mem.push_back({MemWhen::kEnd, MemCategory::kCommBuffers, -buffer});
    };
    for (const auto& c : pre) emit(c);
    if (overlap) {
      for (const auto& c : post) emit(c);
    }
    const int32_t id = Add(x, first || overlap ? deps : absl::Span<const int32_t>(), mem);
    if (!overlap) {
      for (const auto& c : post) emit(c);
    }
    return id;
  }

  // The collectives of a decoder-layer op (see ParallelRole), forward or backward.
  int32_t LayerOpWithComms(const LayerOp& lo, Op x, absl::Span<const int32_t> deps, MemList mem,
                           bool backward) {
    // Without TP and CP no op has collectives of its own (the common, hot case).
    if (lo.role == ParallelRole::kNone || (tp_group_.size <= 1 && cp_group_.size <= 1)) {
      return Add(x, deps, mem);
    }
    const bool sp = s_.parallel.sequence_parallel;
    const CollectiveKind reduce = sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
    const Bytes kv = Bytes::Count(kCompute * 2 * s_.training.seq_len * s_.training.micro_batch *
                                  s_.model.kv_heads * s_.model.head_dim() / s_.parallel.tp);
    const ModelParallelComm gather_in{"tp_all_gather", CollectiveKind::kAllGather, act_bytes_,
                                      &tp_group_, true};
    const ModelParallelComm reduce_out{sp ? "tp_reduce_scatter" : "tp_all_reduce", reduce,
                                       act_bytes_, &tp_group_, false};
    const ModelParallelComm gather_kv{"cp_all_gather_kv", CollectiveKind::kAllGather, kv,
                                      &cp_group_, true};
    const ModelParallelComm reduce_dkv{"cp_reduce_scatter_dkv", CollectiveKind::kReduceScatter, kv,
                                       &cp_group_, false};
    switch (lo.role) {
      case ParallelRole::kNone:
        break;
      case ParallelRole::kColumn:
        if (!backward)
          return sp ? WithComms(x, deps, mem, {gather_in}, {}) : WithComms(x, deps, mem, {}, {});
        // Backward: the input again for the weight gradient (SP), the input gradient reduced.
        // Megatron-LM launches both asynchronously beside the input- and weight-gradient GEMMs
        // (LinearWithGradAccumulationAndAsyncCommunication, on by default since 2021).
        return sp ? WithComms(x, deps, mem, {gather_in}, {reduce_out}, Megatron())
                  : WithComms(x, deps, mem, {}, {reduce_out}, Megatron());
      case ParallelRole::kRow:
        if (!backward) return WithComms(x, deps, mem, {}, {reduce_out});
        return sp ? WithComms(x, deps, mem, {gather_in}, {}) : WithComms(x, deps, mem, {}, {});
      case ParallelRole::kCpKv:
        return backward ? WithComms(x, deps, mem, {gather_kv}, {reduce_dkv})
                        : WithComms(x, deps, mem, {gather_kv}, {});
    }
    return Add(x, deps, mem);
  }

  // ---- ZeRO-3 gathers ---------------------------------------------------------------------

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

  // Megatron distributed optimizer with --overlap-param-gather: the updated parameters of a
  // group are all-gathered while the step's first forward runs, each group's forward waiting
  // for its own (in the steady state, the previous step's update).
  void ParamGatherBeforeForward(int32_t g, std::vector<int32_t>& deps) {
    if (!Megatron() || !s_.parallel.overlap_param_gather || plan_.stage < 1 || mb_ != 0) return;
    Op ag = Collective("param_all_gather", CollectiveKind::kAllGather,
                       ComputeBytes(group_params_[g]), grad_group_, g);
    Spec(ag).buckets = Buckets(ComputeBytes(group_params_[g]));
    deps.push_back(Add(ag, {}, {}));
  }

  // Collectives a gradient tensor of `b` bytes is reduced in.
  int32_t Buckets(Bytes b) const {
    return CeilDiv(std::max<int64_t>(b.count(), 1), std::max<int64_t>(Bucket().count(), 1));
  }
  Bytes Bucket() const { return s_.GradientBucket(reduce_bytes_); }

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
      case Recompute::kNone:
        return true;
      case Recompute::kSelective:
        return !t.attention_core;
      case Recompute::kFull:
        return &lo == &layer_ops_.front() && &t == &lo.saves.front();
    }
    return true;
  }

  Bytes SavedBy(const LayerOp& lo) const {
    Bytes b;
    for (const SavedTensor& t : lo.saves) b += t.bytes;
    return b;
  }

  // Layer gradients that live until their reduce-scatter (stages 2 and 3); persistent
  // accumulation buffers otherwise.
  MemList TransientGradients(int32_t g) const {
    if (plan_.stage < 2) return {};
    return {{MemWhen::kStart, MemCategory::kGradients, ComputeBytes(group_params_[g])}};
  }

  void LayerForward(int32_t g, std::vector<int32_t> first_deps, bool free_gather_at_end) {
    Bytes transient;  // tensors not kept for backward: freed when the layer's forward ends
    for (size_t i = 0; i < layer_ops_.size(); ++i) {
      const LayerOp& lo = layer_ops_[i];
      MemList mem;
      for (const SavedTensor& t : lo.saves) {
        mem.push_back({MemWhen::kStart, MemCategory::kActivations, t.bytes});
        if (!Kept(lo, t)) transient += t.bytes;
      }
      LayerOpWithComms(lo, FromLayerOp(lo, OpPhase::kForward, g),
                       i == 0 ? absl::Span<const int32_t>(first_deps) : absl::Span<const int32_t>(),
                       std::move(mem), /*backward=*/false);
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
    const MemList grads = TransientGradients(g);
    // Recompute: full re-runs the layer's forward (with its TP/CP collectives); selective
    // re-runs the attention core.
    bool grads_allocated = false;
    if (s_.training.recompute != Recompute::kNone) {
      for (const LayerOp& lo : layer_ops_) {
        MemList mem;
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
        LayerOpWithComms(lo, FromLayerOp(lo, OpPhase::kRecompute, g), deps(), std::move(mem),
                         /*backward=*/false);
      }
    }
    for (auto it = layer_ops_.rbegin(); it != layer_ops_.rend(); ++it) {
      const Bytes saved = SavedBy(*it);
      // The op's input gradient exists while it runs; its saved tensors are freed when it ends.
      MemList mem = {{MemWhen::kStart, MemCategory::kActivations, saved},
                     {MemWhen::kEnd, MemCategory::kActivations, -saved - saved}};
      if (!grads_allocated) {
        mem.insert(mem.end(), grads.begin(), grads.end());
        grads_allocated = true;
      }
      LayerOpWithComms(*it, FromLayerOp(*it, OpPhase::kBackward, g), deps(), std::move(mem),
                       /*backward=*/true);
    }
    if (free_at_end.count() != 0) {
      AddMemToLast({MemWhen::kEnd, MemCategory::kGatheredParams, -free_at_end});
    }
  }

  // ---- embedding and head -----------------------------------------------------------------
  // Vocabulary-parallel under TP (Shoeybi et al. 2019 §3): each GPU holds V/t rows of the
  // embedding and V/t columns of the head; the embedding's partial outputs are all-reduced
  // (SP: reduce-scattered); the cross-entropy reduces max, target logit and sum of exponentials
  // over the TP group (three all-reduces of T fp32 values) and never gathers the logits.

  ModelParallelComm TpReduce() const {
    const bool sp = s_.parallel.sequence_parallel;
    return {sp ? "tp_reduce_scatter" : "tp_all_reduce",
            sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, act_bytes_,
            &tp_group_, false};
  }
  ModelParallelComm TpGather() const {
    return {"tp_all_gather", CollectiveKind::kAllGather, act_bytes_, &tp_group_, true};
  }

  void EmbeddingForward(std::vector<int32_t> deps, bool free_gather) {
    const int64_t h = s_.model.hidden;
    const Bytes mask = Bytes::Count(s_.model.dropout > 0 ? tokens_ / rep_ * h : 0);
    WithComms(Compute("embedding", OpPhase::kForward, OpClass::kMemoryBound, Flops(),
                      Bytes::Count(2 * kCompute * tokens_ * h), 0),
              deps,
              {{MemWhen::kStart, MemCategory::kActivations, mask},
               {MemWhen::kEnd, MemCategory::kGatheredParams,
                free_gather ? -ComputeBytes(group_params_[0]) : Bytes()}},
              {}, {TpReduce()});
  }

  void HeadForward(std::vector<int32_t> deps, bool free_gather) {
    const int32_t g = NumGroups() - 1;
    const int64_t h = s_.model.hidden, v = s_.model.vocab / s_.parallel.tp;
    const Bytes hidden = Bytes::Count(kCompute * tokens_ / rep_ * h);
    const Bytes logits16 = Bytes::Count(kCompute * tokens_ * v);
    const Bytes logits32 = Bytes::Count(4 * tokens_ * v);
    Add(Compute("final_norm", OpPhase::kForward, OpClass::kMemoryBound,
                Flops::Count(5.0 * static_cast<double>(tokens_ / rep_ * h)), hidden * 2, g),
        deps, {{MemWhen::kStart, MemCategory::kActivations, hidden}});
    const ModelParallelComm gather = TpGather();
    const Op head = Compute("lm_head", OpPhase::kForward, OpClass::kGemm,
                            Flops::Count(2.0 * static_cast<double>(tokens_) *
                                         static_cast<double>(h) * static_cast<double>(v)),
                            Bytes::Count(kCompute * (tokens_ * h + h * v + tokens_ * v)), g);
    const MemList head_mem = {{MemWhen::kStart, MemCategory::kActivations, hidden},
                              {MemWhen::kStart, MemCategory::kLogits, logits16},
                              {MemWhen::kEnd, MemCategory::kGatheredParams,
                               free_gather ? -ComputeBytes(group_params_[g]) : Bytes()}};
    if (s_.parallel.sequence_parallel) {
      WithComms(head, {}, head_mem, {gather}, {});
    } else {
      Add(head, {}, head_mem);
    }
    // The loss upcasts the logits to fp32 and keeps them (softmax) for backward.
    WithComms(Compute("cross_entropy", OpPhase::kForward, OpClass::kMemoryBound,
                      Flops::Count(5.0 * static_cast<double>(tokens_ * v)), logits16 + logits32, g),
              {},
              {{MemWhen::kStart, MemCategory::kLogits, logits32},
               {MemWhen::kEnd, MemCategory::kLogits, -logits16}},
              {},
              {{"tp_all_reduce_loss", CollectiveKind::kAllReduce, Bytes::Count(3 * 4 * tokens_),
                &tp_group_, false}});
  }

  void HeadBackward(std::vector<int32_t> deps, Bytes free_gather) {
    const int32_t g = NumGroups() - 1;
    const int64_t h = s_.model.hidden, v = s_.model.vocab / s_.parallel.tp;
    const Bytes hidden = Bytes::Count(kCompute * tokens_ / rep_ * h);
    const Bytes logits32 = Bytes::Count(4 * tokens_ * v);
    // d(logits) in fp32 replaces the saved softmax.
    MemList ce = {{MemWhen::kStart, MemCategory::kLogits, logits32},
                  {MemWhen::kEnd, MemCategory::kLogits, -logits32}};
    for (const MemAction& a : TransientGradients(g)) ce.push_back(a);
    Add(Compute("cross_entropy", OpPhase::kBackward, OpClass::kMemoryBound,
                Flops::Count(3.0 * static_cast<double>(tokens_ * v)), logits32 * 2, g),
        deps, ce);
    const Op head = Compute("lm_head", OpPhase::kBackward, OpClass::kGemm,
                            Flops::Count(4.0 * static_cast<double>(tokens_) *
                                         static_cast<double>(h) * static_cast<double>(v)),
                            Bytes::Count(2 * kCompute * (tokens_ * h + h * v + tokens_ * v)), g);
    const MemList head_mem = {{MemWhen::kStart, MemCategory::kActivations, hidden},
                              {MemWhen::kEnd, MemCategory::kLogits, -logits32},
                              {MemWhen::kEnd, MemCategory::kActivations, -hidden - hidden}};
    if (s_.parallel.sequence_parallel) {
      WithComms(head, {}, head_mem, {TpGather()}, {TpReduce()});
    } else {
      WithComms(head, {}, head_mem, {}, {TpReduce()});
    }
    Add(Compute("final_norm", OpPhase::kBackward, OpClass::kMemoryBound,
                Flops::Count(10.0 * static_cast<double>(tokens_ / rep_ * h)), hidden * 4, g),
        {},
        {{MemWhen::kStart, MemCategory::kActivations, hidden},
         {MemWhen::kEnd, MemCategory::kActivations, -hidden - hidden},
         {MemWhen::kEnd, MemCategory::kGatheredParams, -free_gather}});
  }

  void EmbeddingBackward(std::vector<int32_t> deps, Bytes free_gather) {
    const int64_t h = s_.model.hidden;
    const Bytes mask = Bytes::Count(s_.model.dropout > 0 ? tokens_ / rep_ * h : 0);
    MemList mem = {{MemWhen::kEnd, MemCategory::kActivations, -mask},
                   {MemWhen::kEnd, MemCategory::kGatheredParams, -free_gather}};
    for (const MemAction& a : TransientGradients(0)) mem.push_back(a);
    const Op emb = Compute("embedding", OpPhase::kBackward, OpClass::kMemoryBound, Flops(),
                           Bytes::Count(3 * kCompute * tokens_ * h), 0);
    // With SP the output gradient arrives reduce-scattered: gathered again for the lookup.
    if (s_.parallel.sequence_parallel) {
      WithComms(emb, deps, mem, {TpGather()}, {});
    } else {
      Add(emb, deps, mem);
    }
  }

  // ---- passes -----------------------------------------------------------------------------

  // The forward of groups [first, last] for the current micro-batch; `entry` are the
  // dependencies of its first op (the received activations of the previous stage).
  void Forward(int32_t first, int32_t last, std::vector<int32_t> entry) {
    const int32_t pf = static_cast<int32_t>(s_.parallel.prefetch);
    const bool free_after_forward = Zero3() && !plan_.keep_params_to_backward;
    for (int32_t g = first; g <= last; ++g) {
      std::vector<int32_t> deps;
      if (g == first) deps.swap(entry);
      if (Zero3()) {
        LaunchGathers(g, g + pf, +1);
        for (int32_t d : TakeGather(g)) deps.push_back(d);
      }
      ParamGatherBeforeForward(g, deps);
      if (g == 0) {
        EmbeddingForward(deps, free_after_forward);
      } else if (g == NumGroups() - 1) {
        HeadForward(deps, free_after_forward);
      } else {
        LayerForward(g, deps, free_after_forward);
      }
    }
  }

  // Emits the step's reduction of the accumulated gradients of `groups` as one bucketed
  // collective (ZeRO-0/1 and Megatron: once per step). `g` labels it. DeepSpeed and DDP copy
  // each bucket into a staging buffer; Megatron reduces its contiguous main_grad buffer in place.
  void StepReduce(const std::vector<int32_t>& groups, int32_t g) {
    if (grad_group_.size <= 1) return;  // nothing to reduce with one replica
    int64_t params = 0;
    for (int32_t group : groups) params += group_params_[group];
    const Bytes grads = Bytes::Count(reduce_bytes_ * params);
    Op op =
        plan_.stage == 0
            ? Collective("all_reduce", CollectiveKind::kAllReduce, grads, grad_group_, g)
            : Collective("reduce_scatter", CollectiveKind::kReduceScatter, grads, grad_group_, g);
    Spec(op).buckets = Buckets(grads);
    const Bytes staging = Megatron() ? Bytes() : std::min(grads, Bucket());
    St().reduces.push_back(Add(op, AnchorDeps(),
                               {{MemWhen::kStart, MemCategory::kCommBuffers, staging},
                                {MemWhen::kEnd, MemCategory::kCommBuffers, -staging}}));
  }

  // Emits the gradient reduction of group g after its backward, per the stage's semantics.
  void Reduce(int32_t g) {
    if (plan_.stage <= 1) {
      if (!last_micro_batch_) return;  // accumulate locally; reduce once per step
      if (overlap_reduce_) {
        StepReduce({g}, g);
      } else {
        St().deferred.push_back(g);
      }
      return;
    }
    const Bytes grads = Bytes::Count(reduce_bytes_ * group_params_[g]);
    const Bytes staging = std::min(grads, Bucket());
    const std::vector<int32_t> deps = AnchorDeps();
    // Frees the layer's full gradients when it ends (stages 2 and 3).
    const Bytes layer_grads = ComputeBytes(group_params_[g]);
    Op rs = Collective("reduce_scatter", CollectiveKind::kReduceScatter, grads, shard_group_, g);
    Spec(rs).buckets = s_.parallel.framework == Framework::kFsdp ? 1 : Buckets(grads);
    const Bytes buffer = s_.parallel.framework == Framework::kFsdp
                             ? (reduce_bytes_ != kCompute ? grads : Bytes())
                             : staging;
    const int32_t id = Add(rs, deps,
                           {{MemWhen::kStart, MemCategory::kCommBuffers, buffer},
                            {MemWhen::kEnd, MemCategory::kCommBuffers, -buffer},
                            {MemWhen::kEnd, MemCategory::kGradients, -layer_grads}});
    if (!plan_.hybrid) {
      if (last_micro_batch_) St().reduces.push_back(id);
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
    if (last_micro_batch_) St().reduces.push_back(ar);
  }

  // The backward of groups [last, first] (descending) for the current micro-batch.
  void Backward(int32_t last, int32_t first, std::vector<int32_t> entry) {
    const int32_t pf = static_cast<int32_t>(s_.parallel.prefetch);
    const bool gather = Zero3() && !plan_.keep_params_to_backward;
    for (int32_t g = last; g >= first; --g) {
      std::vector<int32_t> deps;
      if (g == last) deps.swap(entry);
      if (gather) {
        LaunchGathers(g, g - pf, -1);
        for (int32_t d : TakeGather(g)) deps.push_back(d);
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

  // ---- pipeline ---------------------------------------------------------------------------

  // Sends the boundary tensor of a unit to the neighbouring stage: the activations (forward)
  // or their gradient (backward) of the unit's tokens. Every TP rank sends its 1/t share
  // (Megatron-LM's scatter-gather across the TP group, or the SP shard). Returns the op.
  int32_t Send(int32_t g) {
    std::vector<int32_t> deps = AnchorDeps();
    StageState& st = St();
    deps.insert(deps.end(), st.wait.begin(), st.wait.end());
    deps.insert(deps.end(), st.overlapped.begin(), st.overlapped.end());
    Op op =
        Collective("send_recv", CollectiveKind::kSendRecv,
                   Bytes::Count(act_bytes_.count() / s_.parallel.tp), place_.StageNeighbours(), g);
    op.stream = StreamKind::kP2p;
    return Add(op, deps, {});
  }

  // Emits every stage's units in its schedule order, interleaving stages so that a unit comes
  // after the send it receives (ops only depend on earlier ops).
  void Pipeline() {
    const int32_t p = static_cast<int32_t>(s_.parallel.pp);
    const int32_t vstages = static_cast<int32_t>(vstage_groups_.size());
    const int32_t m = static_cast<int32_t>(s_.micro_batches());
    const auto order = PipelineOrder(s_.parallel.pp_schedule, p, s_.parallel.pp_chunks, m);
    // sent[forward][virtual stage][micro-batch]: the send op that unit produced.
    std::vector<std::vector<int32_t>> sent_fwd(vstages, std::vector<int32_t>(m, -1));
    std::vector<std::vector<int32_t>> sent_bwd(vstages, std::vector<int32_t>(m, -1));
    std::vector<size_t> next(p, 0);
    size_t remaining = 0;
    for (const auto& units : order) remaining += units.size();
    while (remaining > 0) {
      bool progress = false;
      for (int32_t stage = 0; stage < p; ++stage) {
        stage_ = stage;
        while (next[stage] < order[stage].size()) {
          const PipelineUnit& u = order[stage][next[stage]];
          const int32_t vs = u.chunk * p + stage;
          int32_t recv = -1;
          if (u.forward && vs > 0) {
            recv = sent_fwd[vs - 1][u.micro_batch];
            if (recv < 0) break;
          } else if (!u.forward && vs < vstages - 1) {
            recv = sent_bwd[vs + 1][u.micro_batch];
            if (recv < 0) break;
          }
          SetMicroBatch(u.micro_batch);
          std::vector<int32_t> entry;
          if (recv >= 0) entry.push_back(recv);
          const auto [first, last] = vstage_groups_[vs];
          if (u.forward) {
            Forward(first, last, std::move(entry));
            if (vs < vstages - 1) sent_fwd[vs][u.micro_batch] = Send(last);
          } else {
            Backward(last, first, std::move(entry));
            if (vs > 0) sent_bwd[vs][u.micro_batch] = Send(first);
          }
          ++next[stage];
          --remaining;
          progress = true;
        }
        if (next[stage] == order[stage].size() && !finished_[stage]) {
          finished_[stage] = true;
          FinishStage();
        }
      }
      SIM_CHECK(progress, "pipeline schedule deadlocked");
    }
  }

  // ---- end of the step --------------------------------------------------------------------

  // Deferred gradient reductions, the optimizer and the parameter all-gather of the current
  // stage.
  void FinishStage() {
    SetMicroBatch(static_cast<int32_t>(s_.micro_batches()) - 1);
    StageState& st = St();
    const std::vector<int32_t> deferred = st.deferred;
    if (Megatron() && !deferred.empty()) {
      StepReduce(deferred, kStepWide);  // the whole main_grad buffer at once
    } else {
      for (int32_t g : deferred) StepReduce({g}, g);
    }
    const int64_t total = StageParameters(s_)[stage_];
    const int64_t local =
        plan_.stage >= 1 ? (total + plan_.shard_degree - 1) / plan_.shard_degree : total;
    std::vector<int32_t> deps = St().reduces;
    if (St().last_compute) deps.push_back(*St().last_compute);
    deps.insert(deps.end(), St().wait.begin(), St().wait.end());
    St().wait.clear();
    Op opt =
        Compute("optimizer", OpPhase::kOptimizer, OpClass::kMemoryBound,
                Flops::Count(12.0 * static_cast<double>(local)),
                Bytes::Count(OptimizerTrafficPerParam(s_.training.optimizer) * local), kStepWide);
    const int32_t id = Add(opt, deps, {});
    // ZeRO-1/2 (DeepSpeed) and Megatron's distributed optimizer: every rank gathers the updated
    // compute-dtype parameters.
    const bool deepspeed =
        (plan_.stage == 1 || plan_.stage == 2) && s_.parallel.framework == Framework::kDeepSpeed;
    const bool megatron = Megatron() && plan_.stage == 1 && !s_.parallel.overlap_param_gather;
    if ((deepspeed || megatron) && grad_group_.size > 1) {
      Op ag = Collective("all_gather", CollectiveKind::kAllGather, ComputeBytes(total), grad_group_,
                         kStepWide);
      Spec(ag).buckets = Buckets(Spec(ag).tensor);
      Add(ag, {id}, {});
    }
  }

  const Scenario& s_;
  const ShardingPlan plan_;
  const Placement place_;
  const ActivationShape shape_;
  const std::vector<LayerOp> layer_ops_;
  const int32_t layers_;
  const int64_t tokens_;   // per GPU per micro-batch (s/cp · b)
  const int64_t rep_;      // t with sequence parallelism (replicated tensors sharded), else 1
  const Bytes act_bytes_;  // one 16-bit activation of the GPU's tokens: 2·T·h
  const bool overlap_reduce_;
  std::vector<int64_t> group_params_;                       // per GPU (TP shard)
  std::vector<std::pair<int32_t, int32_t>> vstage_groups_;  // per virtual stage: [first, last]
  int64_t reduce_bytes_ = kCompute;
  CommGroup grad_group_, shard_group_, tp_group_, cp_group_;
  OpProgram p_;
  int32_t stage_ = 0;
  std::vector<StageState> st_;
  std::vector<bool> finished_ = std::vector<bool>(static_cast<size_t>(s_.parallel.pp), false);
  int32_t mb_ = 0;
  bool last_micro_batch_ = false;
  std::vector<std::optional<int32_t>> gather_pending_;
};

}  // namespace

absl::StatusOr<OpProgram> Lower(const Scenario& s) {
  if (s.parallel.framework == Framework::kFsdp && s.parallel.zero == 1 && !s.parallel.sharding) {
    return absl::FailedPreconditionError(
        "fsdp has no ZeRO-1 mode: use parallel.zero 0 (no_shard), 2 (shard_grad_op) or 3 "
        "(full_shard), or parallel.sharding");
  }
  return Lowerer(s).Run();
}

}  // namespace sim
