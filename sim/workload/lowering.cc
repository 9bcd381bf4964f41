#include "sim/workload/lowering.h"

#include <algorithm>
#include <array>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "sim/base/check.h"
#include "sim/workload/finetune.h"
#include "sim/workload/gemm_waves.h"
#include "sim/workload/loss.h"
#include "sim/workload/params.h"
#include "sim/workload/pipeline_schedule.h"
#include "sim/workload/placement.h"
#include "sim/workload/policy/policy.h"
#include "sim/workload/program_builder.h"
#include "sim/workload/zero3_coordinator.h"

namespace sim {

namespace {

constexpr int64_t kCompute = 2;  // bytes per compute-dtype (bf16/fp16) element

// Bytes one optimizer step reads and writes per parameter of the local shard (memory-bound).
// AdamW over an fp32 master: reads grad 2, master 4, m 4, v 4 and writes master, m, v and the
// bf16 weight copy 2. Where the trained parameters themselves hold the update, with gradients
// and moments of `state` bytes (PyTorch DDP's fp32, torchtune's bf16), one fused pass reads
// parameter, gradient, m and v and writes parameter, m and v: 7 · state.
// The foreach and loop updates (torch/optim/adamw.py) run it as separate element-wise passes:
// decay p (r/w), lerp m toward g (r m, g; w m), scale v (r/w), addcmul v with g·g (r v, g; w v),
// sqrt v into t (r v; w t), divide t (r/w), add eps (r/w), addcdiv p by m / t (r p, m, t; w p):
// 20 accesses per parameter, 13 more than one fused pass, of `state` bytes each. Measured on an
// H200 (docs/measurements/h200-2026-12-04, Llama 3.2 3B): foreach − fused = 40 ms under DDP
// (52 B × 3.21e9 at 4.2 TB/s: 40 ms) and 21 ms under torchtune (26 B: 20 ms).
int64_t OptimizerTrafficPerParam(OptimizerKind o, OptimizerImpl impl, int64_t state,
                                 bool in_place) {
  switch (o) {
    case OptimizerKind::kAdamW: {
      const int64_t one_pass = in_place ? 7 * state : (2 + 4 + 4 + 4) + (4 + 4 + 4 + 2);
      return one_pass + (impl == OptimizerImpl::kFused ? 0 : 13 * state);
    }
    case OptimizerKind::kSgd:
      return (2 + 4 + 4) + (4 + 4 + 2);
    case OptimizerKind::kAdam8bit:
    case OptimizerKind::kAdam8bitPaged:
      return (2 + 4 + 1 + 1) + (4 + 1 + 1 + 2);
  }
  return 0;
}

// Host DRAM bytes an offloaded optimizer step reads and writes per parameter (DeepSpeed
// DeepSpeedCPUAdam, torch.optim on CPU tensors): fp32 gradient, parameter and moments read, the
// parameter and moments written, the 16-bit copy for the GPU written: 4·4 + 3·4 + 2.
int64_t HostOptimizerTrafficPerParam(OptimizerKind o) {
  switch (o) {
    case OptimizerKind::kAdamW:
      return 4 * 4 + 3 * 4 + 2;
    case OptimizerKind::kSgd:
      return 3 * 4 + 2 * 4 + 2;
    case OptimizerKind::kAdam8bit:
    case OptimizerKind::kAdam8bitPaged:
      return (4 + 4 + 1 + 1) + (4 + 1 + 1 + 2);
  }
  return 0;
}

// The gathered parameter buffers a group's use frees as it ends, each as it was allocated.
using GatherFrees = absl::InlinedVector<Bytes, 4>;

void FreeGathers(const GatherFrees& parts, MemList& mem) {
  for (Bytes b : parts) mem.emplace_back(MemWhen::kEnd, MemCategory::kGatheredParams, -b);
}

// The lowerer's policy, copied with it (Lowerer::Fork).
class OwnedPolicy {
 public:
  explicit OwnedPolicy(std::unique_ptr<DataParallelPolicy> p) : p_(std::move(p)) {}
  OwnedPolicy(const OwnedPolicy& o) : p_(o.p_->Clone()) {}
  OwnedPolicy& operator=(const OwnedPolicy&) = delete;
  DataParallelPolicy* operator->() const { return p_.get(); }

 private:
  std::unique_ptr<DataParallelPolicy> p_;
};

// Lowers one step of `micro_batches` micro-batches of `s`: Run all at once, or (one stage)
// Begin, LowerMicroBatch for each and Finish, forking where programs of different lengths part
// (StepLowering).
class Lowerer {
 public:
  Lowerer(const Scenario& s, std::unique_ptr<DataParallelPolicy> policy, int64_t micro_batches)
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
        loss_(LossTensorsOf(s.training.loss.value_or(policy_->DefaultLoss()),
                            s.training.loss_chunks, tokens_, s.model.vocab / s.parallel.tp)),
        b_(p_, static_cast<int32_t>(s.parallel.pp)) {
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

  Lowerer(Lowerer&&) = delete;
  Lowerer& operator=(const Lowerer&) = delete;

  OpProgram Run() {
    Begin(m_);
    if (s_.parallel.pp == 1) {
      for (int32_t mb = 0; mb < m_; ++mb) LowerMicroBatch(mb);
      return Finish();
    }
    Pipeline();
    return std::move(p_);
  }

  // One stage: micro-batch `mb`'s forward and backward (Begin first; in order). Only the
  // backward depends on whether it is the step's last (its reductions, policy AfterBackward).
  void LowerMicroBatch(int32_t mb) {
    LowerForward(mb);
    LowerBackward(mb);
  }
  void LowerForward(int32_t mb) {
    SIM_CHECK(s_.parallel.pp == 1, "a pipeline is lowered whole (Run)");
    SetMicroBatch(mb);
    Forward(0, NumGroups() - 1, {});
  }
  void LowerBackward(int32_t mb) {
    SetMicroBatch(mb);
    Backward(NumGroups() - 1, 0, {});
  }
  // One stage: the step's end after the last micro-batch; the program.
  OpProgram Finish() {
    FinishStage();
    return std::move(p_);
  }

  // A copy of this lowering so far, for a step of `micro_batches` (more than it has lowered):
  // the same program, state and policy state, its arrays with room for the rest.
  std::unique_ptr<Lowerer> Fork(int64_t micro_batches) {
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

  int32_t ops() const { return static_cast<int32_t>(p_.ops.size()); }
  // Whether the last micro-batch's backward is lowered as any other (DataParallelPolicy::
  // LastBackwardLikeAny), and marking the one lowered last as the step's last.
  bool LastBackwardLikeAny() const { return policy_->LastBackwardLikeAny(); }
  void MarkLastBackward() { policy_->MarkLastBackward(b_.stage()); }

  // The program's facts and persistent memory, its arrays sized for `micro_batches`.
  void Begin(int64_t micro_batches) {
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

 private:
  Lowerer(const Lowerer&) = default;  // Fork

  // Capacity for the ops of every micro-batch (forward, recompute, backward, the ZeRO
  // collectives and gathers of a group, up to 12 TP/CP collectives per layer, a send each
  // way per virtual stage) and each stage's end, so that lowering allocates once: an
  // estimate short by a few ops copied the whole program to grow it (544 lowerings of plan
  // llama3-405b and 1,680 of plan llama2-70b; ZeRO-3's short by 30 %, the interleaved
  // schedule's by its sends). Capacity never touched costs no memory.
  void Reserve(int64_t micro_batches) {
    const bool model_parallel = s_.parallel.tp > 1 || s_.parallel.cp > 1;
    const size_t groups = group_params_.size();
    const size_t per_mb =
        (3 * std::max(layer_ops_.size(), dense_ops_.size()) + (model_parallel ? 15 : 3) + 12) *
            groups +
        2 * vstage_groups_.size();
    const size_t ops =
        per_mb * static_cast<size_t>(micro_batches) + 16 * s_.parallel.pp + 4 * groups;
    p_.ops.reserve(ops);
    p_.deps.reserve(ops);
    p_.mem.reserve(5 * ops);  // about 4 per op with tensors freed one by one
  }

  int32_t NumGroups() const { return static_cast<int32_t>(group_params_.size()); }
  // The LM head's matrix (the embedding's when tied), which autocast casts for its matmul.
  int64_t HeadParameters() const {
    const ParameterCount c = CountParameters(s_.model);
    return (s_.model.tied_embeddings ? c.embedding : c.lm_head) / s_.parallel.tp;
  }
  Bytes ComputeBytes(int64_t params) const { return Bytes::Count(kCompute * params); }
  void SetMicroBatch(int32_t mb) { b_.SetMicroBatch(mb, mb == m_ - 1); }
  void SetStage(int32_t stage) { b_.SetStage(stage); }
  int32_t Add(const Op& op, absl::Span<const int32_t> deps, absl::Span<const MemAction> mem) {
    return b_.Add(op, deps, mem);
  }
  void AddMemToLast(MemAction a) { b_.AddMemToLast(a); }
  ProgramBuilder::DepList AnchorDeps() const { return b_.AnchorDeps(); }
  Op Collective(absl::string_view name, CollectiveKind kind, Bytes tensor, CommGroup group,
                std::optional<int32_t> g) {
    return b_.Collective(name, kind, tensor, group, g);
  }
  DpEnv Env() {
    return DpEnv{b_, group_trainable_, group_experts_, grad_group_, shard_group_, edp_group_};
  }

  std::vector<MemAction> PersistentActions(int32_t stage) const {
    const StateSplit st = PersistentStates(s_, stage);
    return {{MemWhen::kIssue, MemCategory::kWeights, st.weights + st.adapters},
            {MemWhen::kIssue, MemCategory::kGradients,
             LazyGradients() ? st.kept_gradients : st.gradients},
            {MemWhen::kIssue, MemCategory::kOptimizer, st.optimizer},
            {MemWhen::kIssue, MemCategory::kCommBuffers, policy_->PersistentBuffers()},
            {MemWhen::kIssue, MemCategory::kWorkspace, s_.cluster.gpu.blas_workspace},
            {MemWhen::kIssue, MemCategory::kReserved, s_.runtime.reserved}};
  }

  // Gradients the backward allocates and the optimizer frees (torchtune's set_to_none), or
  // that each group's update frees as soon as it is done (optimizer in backward).
  bool LazyGradients() const { return lazy_gradients_; }
  // A group's gradients as the optimizer sees them (its shard from ZeRO-2 on).
  Bytes GroupGradientBytes(int32_t g) const {
    if (p_.stage_states.empty() || p_.stage_states[b_.stage()].gradients == Bytes()) return {};
    const int64_t n = plan_.stage >= 2 ? plan_.shard_degree : 1;
    int64_t params = group_trainable_[g];
    // A tied embedding's one gradient is created by the head's backward, which runs first; the
    // embedding's backward accumulates into it (GroupParameters counts the matrix in both).
    if (g == 0 && s_.model.tied_embeddings && s_.parallel.pp == 1 &&
        !s_.training.finetune.adapters()) {
      params -= CountParameters(s_.model).embedding / s_.parallel.tp;
    }
    return Bytes::Count(p_.stage_states[b_.stage()].lazy_gradient_bytes_per_param *
                        ((params + n - 1) / n));
  }
  // With lazy gradients: what group g's first backward allocates (once per step).
  MemList FirstGradients(int32_t g) {
    if (!LazyGradients() || grads_allocated_[g]) return {};
    grads_allocated_[g] = true;
    return {{MemWhen::kStart, MemCategory::kGradients, GroupGradientBytes(g)}};
  }

  // OptimizerTrafficPerParam for this scenario: without a master copy (the ddp and torchtune
  // presets) the update runs on the parameters themselves, in their moments' dtype.
  int64_t StepTrafficPerParam() const {
    const BytesPerParam bpp =
        StateBytesPerParam(s_.parallel.framework, s_.training.optimizer, s_.training.precision);
    return OptimizerTrafficPerParam(
        s_.training.optimizer, s_.training.optimizer_impl.value_or(policy_->DefaultOptimizerImpl()),
        bpp.optimizer_m.bytes_per_param, bpp.master_weights.bytes_per_param == 0);
  }

  // What AdamW's update allocates beside the states for the `local` parameters it updates out
  // of the stage's `total` (OptimizerImpl), one entry per allocation: foreach, a copy of the
  // second moment of every parameter (torch/optim/adamw.py _multi_tensor_adamw:
  // exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs), a tensor per parameter, here one per layer
  // group, all live at once); loop, two of the largest tensor (_single_tensor_adamw, one
  // parameter at a time, whose denominator holds the root and the quotient at once: the
  // embedding or LM head on the stages holding them, else an MLP matrix, ÷ TP);
  // fused, none. Other optimizers: none.
  std::vector<Bytes> OptimizerTemporaries(StageParams total, int64_t local) const {
    if (s_.training.optimizer != OptimizerKind::kAdamW || local <= 0) return {};
    const int64_t moment =
        StateBytesPerParam(s_.parallel.framework, s_.training.optimizer, s_.training.precision)
            .optimizer_v.bytes_per_param;
    switch (s_.training.optimizer_impl.value_or(policy_->DefaultOptimizerImpl())) {
      case OptimizerImpl::kFused:
        return {};
      case OptimizerImpl::kForeach: {
        // The local share of each group's parameters, in proportion (a sharded optimizer
        // updates 1/n of each).
        std::vector<Bytes> out;
        int64_t left = local;
        for (size_t vs = b_.stage(); vs < vstage_groups_.size(); vs += s_.parallel.pp) {
          for (int32_t g = vstage_groups_[vs].first; g <= vstage_groups_[vs].second; ++g) {
            const int64_t share = std::min(
                left, static_cast<int64_t>(static_cast<double>(group_trainable_[g]) /
                                           static_cast<double>(std::max<int64_t>(1, total.total)) *
                                           static_cast<double>(local)));
            if (share > 0) out.push_back(Bytes::Count(moment * share));
            left -= share;
          }
        }
        if (left > 0) out.push_back(Bytes::Count(moment * left));
        return out;
      }
      case OptimizerImpl::kLoop: {
        if (s_.training.finetune.adapters()) return {};  // adapter matrices: negligible
        const ModelSpec& m = s_.model;
        const bool holds_vocab = b_.stage() == 0 || b_.stage() == s_.parallel.pp - 1;
        const int64_t ffn = std::max(m.ffn_hidden, m.moe ? m.moe->expert_ffn_hidden : 0);
        const int64_t largest =
            std::max(holds_vocab ? m.vocab * m.hidden : 0, std::max(ffn, m.hidden) * m.hidden) /
            s_.parallel.tp;
        // `(exp_avg_sq.sqrt() / bias_correction2_sqrt)`: the root and the quotient coexist.
        const Bytes one = Bytes::Count(moment * std::min(local, largest));
        return {one, one};
      }
    }
    return {};
  }

  // ---- collectives ------------------------------------------------------------------------

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
  int32_t WithComms(const Op& x, absl::Span<const int32_t> deps, MemList mem,
                    std::initializer_list<ModelParallelComm> pre,
                    std::initializer_list<ModelParallelComm> post, bool async = false) {
    const bool overlap = s_.parallel.tp_comm_overlap || async;
    bool first = true;
    auto emit = [&](const ModelParallelComm& c) {
      if (c.group->size <= 1) return;
      Op op = Collective(c.name, c.kind, c.tensor, *c.group, x.group);
      op.pass = x.pass;
      op.stream = overlap ? StreamKind::kTpComm : StreamKind::kCompute;
      absl::InlinedVector<int32_t, 8> d;  // AnchorDeps() and `deps`, without a heap vector
      if (overlap) {
        if (const auto anchor = b_.last_compute()) d.push_back(*anchor);
      }
      if (first) {
        for (int32_t x : deps) d.push_back(x);
      }
      first = false;
      const Bytes buffer = c.buffer ? c.tensor : Bytes();
      // Beside x, the buffer exists from launch (x may start before the collective does).
      const int32_t id =
          Add(op, d,
              {{overlap ? MemWhen::kIssue : MemWhen::kStart, MemCategory::kCommBuffers, buffer}});
      if (overlap) b_.AddOverlapped(id);
      if (c.buffer) mem.emplace_back(MemWhen::kEnd, MemCategory::kCommBuffers, -buffer);
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

  // The token exchanges of an MoE layer (layer_ops.h kEpDispatch / kEpCombine) on the compute
  // stream, as Megatron-Core's MoEAlltoAllTokenDispatcher runs them without its optional
  // overlap. Toward the experts (after the permutation; in backward after the un-permutation):
  // the all-to-all over EP of this GPU's T/rep·k token copies (2·h bytes each), then with
  // expert TP the all-gather over ETP that gives every ETP rank the group's copies
  // (gather_from_sequence_parallel_region). Back from them (before the un-permutation; in
  // backward before the permutation): the reduce-scatter over ETP, then the all-to-all, whose
  // receive buffer the consuming op frees. The busiest rank's volumes scale by its load.
  int32_t WithExpertAllToAll(const LayerOp& lo, const Op& x, absl::Span<const int32_t> deps,
                             MemList mem, bool backward) {
    const int64_t k = s_.model.moe->top_k, local = tokens_ / rep_;
    const Bytes sent = Bytes::Count(
        kCompute * s_.model.hidden *
        static_cast<int64_t>(std::llround(static_cast<double>(local * k) * shape_.expert_load)));
    const Bytes gathered =
        Bytes::Count(kCompute * s_.model.hidden * RoutedTokenCopies(shape_, local, k));
    const bool toward = (lo.role == ParallelRole::kEpDispatch) != backward;
    auto a2a = [&] {
      Op op = Collective(lo.role == ParallelRole::kEpDispatch ? "ep_dispatch" : "ep_combine",
                         CollectiveKind::kAllToAll, sent, ep_group_, x.group);
      op.pass = x.pass;
      op.stream = StreamKind::kCompute;
      return op;
    };
    auto etp = [&](absl::string_view name, CollectiveKind kind) {
      Op op = Collective(name, kind, gathered, etp_group_, x.group);
      op.pass = x.pass;
      op.stream = StreamKind::kCompute;
      return op;
    };
    if (toward) {
      const int32_t id = Add(x, deps, mem);
      if (ep_group_.size > 1) Add(a2a(), {}, {});
      if (etp_group_.size > 1) Add(etp("etp_all_gather", CollectiveKind::kAllGather), {}, {});
      return id;
    }
    std::vector<int32_t> before(deps.begin(), deps.end());
    if (etp_group_.size > 1) {
      before = {Add(etp("etp_reduce_scatter", CollectiveKind::kReduceScatter), before, {})};
    }
    if (ep_group_.size > 1) {
      Add(a2a(), before, {{MemWhen::kStart, MemCategory::kCommBuffers, sent}});
      mem.emplace_back(MemWhen::kEnd, MemCategory::kCommBuffers, -sent);
      return Add(x, {}, mem);
    }
    return Add(x, before, mem);
  }

  // The collectives of a decoder-layer op (see ParallelRole), forward or backward.
  // `x` by reference all the way to the program: an op passed by value is copied with wide
  // loads right after its fields were stored one by one, and stalled (perf).
  int32_t LayerOpWithComms(const LayerOp& lo, const Op& x, absl::Span<const int32_t> deps,
                           MemList mem, bool backward) {
    // Without TP and CP no op has collectives of its own (the common, hot case).
    if (lo.role == ParallelRole::kNone || (tp_group_.size <= 1 && cp_group_.size <= 1 &&
                                           ep_group_.size <= 1 && etp_group_.size <= 1)) {
      return Add(x, deps, mem);
    }
    if (lo.role == ParallelRole::kEpDispatch || lo.role == ParallelRole::kEpCombine) {
      return WithExpertAllToAll(lo, x, deps, std::move(mem), backward);
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
          return sp ? WithComms(x, deps, std::move(mem), {gather_in}, {})
                    : WithComms(x, deps, std::move(mem), {}, {});
        // Backward: the input again for the weight gradient (SP), the input gradient reduced.
        // Megatron-LM launches both asynchronously beside the input- and weight-gradient GEMMs
        // (LinearWithGradAccumulationAndAsyncCommunication, on by default since 2021).
        return sp ? WithComms(x, deps, std::move(mem), {gather_in}, {reduce_out},
                              policy_->AsyncTpBackward())
                  : WithComms(x, deps, std::move(mem), {}, {reduce_out},
                              policy_->AsyncTpBackward());
      case ParallelRole::kRow:
        if (!backward) return WithComms(x, deps, std::move(mem), {}, {reduce_out});
        return sp ? WithComms(x, deps, std::move(mem), {gather_in}, {})
                  : WithComms(x, deps, std::move(mem), {}, {});
      case ParallelRole::kCpKv:
        return backward ? WithComms(x, deps, std::move(mem), {gather_kv}, {reduce_dkv})
                        : WithComms(x, deps, std::move(mem), {gather_kv}, {});
      case ParallelRole::kEpDispatch:
      case ParallelRole::kEpCombine:
        break;  // above
    }
    return Add(x, deps, mem);
  }

  // ---- ZeRO-3 gathers ---------------------------------------------------------------------

  // Launches the gathers of groups [from, to] (in the direction of travel) not yet launched.
  void LaunchGathers(int32_t from, int32_t to, int32_t step) {
    for (int32_t g = from; step > 0 ? g <= to : g >= to; g += step) {
      if (g < 0 || g >= NumGroups() || gather_pending_[g]) continue;
      gather_pending_[g] = EmitGather(g, group_weights_[g]);
    }
  }

  // The all-gather of `buffer` bytes of group g's parameters, anchored at the compute reached
  // so far; the buffer is allocated at launch.
  // `buffers`: the tensors it fills, allocated at launch (one of `buffer` bytes when none).
  int32_t EmitGather(int32_t g, Bytes buffer, const MemList& buffers = {}) {
    ProgramBuilder::DepList deps = AnchorDeps();
    Bytes shard;
    if (s_.parallel.offload.params != OffloadTarget::kNone) {
      // The shard comes in from the host first (ZeRO-Infinity, FSDP CPUOffload) and is freed
      // once gathered.
      shard = buffer.CeilDiv(plan_.shard_degree);
      // ZeRO-Infinity reads an NVMe-resident shard into a pinned host buffer first.
      if (s_.parallel.offload.params == OffloadTarget::kNvme) {
        deps = {Add(HostOp("param_from_nvme", OpClass::kNvmeIo, shard, g), deps, {})};
      }
      deps = {Add(HostOp("param_to_gpu", OpClass::kPcieCopy, shard, g), deps,
                  {{MemWhen::kStart, MemCategory::kGatheredParams, shard}})};
    }
    MemList mem = buffers;
    // FSDP2 gathers into a communication buffer that TakeGather's copy splits into the
    // parameters.
    const MemCategory into = policy_->CopiesAroundCollectives() ? MemCategory::kCommBuffers
                                                                : MemCategory::kGatheredParams;
    if (buffers.empty()) mem.emplace_back(MemWhen::kIssue, into, buffer);
    mem.emplace_back(MemWhen::kEnd, MemCategory::kGatheredParams, -shard);
    return Add(Collective("all_gather", CollectiveKind::kAllGather, buffer, shard_group_, g), deps,
               mem);
  }

  // ---- DeepSpeed ZeRO-3's parameter coordinator (sim/workload/zero3_coordinator.h) -------

  // The parameters its trace holds: each decoder layer's projections, the embedding table, the
  // learned positions and an untied head. What else a group holds (norms, biases, adapters:
  // below DeepSpeed's param_persistence_threshold, or small) is folded into these by bytes, so
  // that a layer's parameters gather its group_weights_ exactly.
  struct Zero3Params {
    std::vector<int64_t> elements;
    std::vector<Bytes> bytes;
    std::vector<int32_t> group;               // by id: the group it belongs to
    std::vector<std::vector<int32_t>> layer;  // per group: ids in LayerLinears order
    // Each projection's index in LayerLinears order (-1: the model has none).
    std::array<int32_t, kNumLoraTargets> linear_of{};
    int32_t table = 0, head = 0;
    std::optional<int32_t> positions;
  };
  Zero3Params MakeZero3Params() const {
    Zero3Params z;
    const ParameterCount c = CountParameters(s_.model);
    const int64_t t = s_.parallel.tp;
    // Adds the parameters of group g with these element counts, sharing its weight bytes.
    auto add = [&](int32_t g, const std::vector<int64_t>& elements) {
      int64_t sum = 0;
      for (int64_t e : elements) sum += e;
      std::vector<int32_t> ids;
      Bytes given;
      for (size_t k = 0; k < elements.size(); ++k) {
        const Bytes share = k + 1 == elements.size()
                                ? group_weights_[g] - given
                                : Bytes::Count(static_cast<int64_t>(
                                      static_cast<__int128>(group_weights_[g].count()) *
                                      elements[k] / std::max<int64_t>(sum, 1)));
        given += share;
        ids.push_back(static_cast<int32_t>(z.elements.size()));
        z.elements.push_back(elements[k]);
        z.bytes.push_back(share);
        z.group.push_back(g);
      }
      return ids;
    };
    z.layer.resize(group_params_.size());
    const std::vector<int32_t> emb =
        c.positions > 0 ? add(0, {c.embedding / t, c.positions}) : add(0, {c.embedding / t});
    z.table = emb[0];
    if (c.positions > 0) z.positions = emb[1];
    std::vector<int64_t> projections;
    z.linear_of.fill(-1);
    for (const LayerLinear& l : LayerLinears(s_.model)) {
      int32_t& k = z.linear_of[static_cast<int>(l.target)];
      if (k < 0) k = static_cast<int32_t>(projections.size());  // the first of its target
      projections.push_back(l.ParamsPerGpu(t));
    }
    for (int32_t g = 1; g < NumGroups() - 1; ++g) z.layer[g] = add(g, projections);
    z.head = s_.model.tied_embeddings ? z.table : add(NumGroups() - 1, {c.lm_head / t})[0];
    return z;
  }

  // The module hooks an op of group g fires, in forward order (reversed in a backward): the
  // containers (the layer, the attention and MLP blocks), norms and activations fetch nothing
  // but still prefetch; each projection fetches its weight.
  // Appended to `out`; returns how many.
  int32_t ModulesOf(int32_t g, absl::string_view op, bool backward,
                    std::vector<ModuleUse>& out) const {
    const Zero3Params& z = zero3_;
    const size_t first = out.size();
    auto none = [&] { out.emplace_back(); };
    auto one = [&](int32_t param) { out.push_back(ModuleUse{{param}}); };
    auto proj = [&](LoraTarget target) {
      const int32_t k = z.linear_of[static_cast<int>(target)];
      if (k < 0) {
        none();
      } else {
        one(z.layer[g][k]);
      }
    };
    if (g == 0) {
      if (op == "embedding") {
        one(z.table);
        if (z.positions) one(*z.positions);
        if (s_.model.dropout > 0) none();
      }
    } else if (g == NumGroups() - 1) {
      if (op == "final_norm") none();
      if (op == "lm_head") one(z.head);
    } else if (op == "norm1") {
      none();
      none();
    } else if (op == "qkv") {
      none();
      proj(LoraTarget::kQ);
      proj(LoraTarget::kK);
      proj(LoraTarget::kV);
    } else if (op == "out_proj") {
      proj(LoraTarget::kO);
    } else if (op == "norm2" || op == "swiglu" || op == "gelu") {
      none();
    } else if (op == "gate_up") {
      none();
      proj(LoraTarget::kGate);
      proj(LoraTarget::kUp);
    } else if (op == "fc1") {
      none();
      proj(LoraTarget::kUp);
    } else if (op == "down" || op == "fc2") {
      proj(LoraTarget::kDown);
    }
    if (backward) std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
    return static_cast<int32_t>(out.size() - first);
  }

  // One micro-batch's hooks in the order lowering emits the ops (Forward, Backward below);
  // records in hook_ops_ which op each run of them belongs to.
  std::vector<ModuleUse> Zero3Trace() {
    std::vector<ModuleUse> trace;
    auto add = [&](int32_t g, absl::string_view op, bool backward) {
      if (const int32_t modules = ModulesOf(g, op, backward, trace); modules > 0) {
        hook_ops_.push_back({g, op, backward, modules});
      }
    };
    const int32_t head = NumGroups() - 1;
    add(0, "embedding", false);
    for (int32_t g = 1; g < head; ++g) {
      for (const LayerOp& lo : Ops(g)) add(g, lo.name, false);
    }
    add(head, "final_norm", false);
    add(head, "lm_head", false);
    add(head, "lm_head", true);
    add(head, "final_norm", true);
    for (int32_t g = head - 1; g >= 1; --g) {
      const LayerCheckpoint c = CheckpointOf(g);
      if (c.policy != Recompute::kNone && g == c.group_last) {
        for (int32_t r = c.group_first; r <= c.group_last; ++r) {
          for (const LayerOp& lo : Ops(r)) {
            if (Reruns(CheckpointOf(r), lo)) add(r, lo.name, false);
          }
        }
      }
      for (auto it = Ops(g).rbegin(); it != Ops(g).rend(); ++it) add(g, it->name, true);
    }
    add(0, "embedding", true);
    return trace;
  }

  // The hooks of an op about to be emitted: its modules fetch (the gathers are emitted here,
  // the op waits for its parameters' gathers), then release (the op frees those buffers when it
  // ends). An op that fuses modules (qkv, gate_up) holds all their parameters while it runs, so
  // its modules release after all of them fetched. Nothing without the coordinator.
  void Hooks(int32_t g, absl::string_view op, bool backward, std::vector<int32_t>& deps,
             MemList& mem) {
    if (!coordinator_ || next_hook_op_ == hook_ops_.size()) return;
    const HookOp& h = hook_ops_[next_hook_op_];
    if (h.group != g || h.op != op || h.backward != backward) return;  // an op without hooks
    ++next_hook_op_;
    const int32_t first = use_;
    for (int32_t k = 0; k < h.modules; ++k) {
      coordinator_->Fetch(use_, zero3_fetched_);
      GatherParams(zero3_fetched_.now);
      GatherParams(zero3_fetched_.ahead);
      for (int32_t p : coordinator_->trace()[use_].params) deps.push_back(gather_op_[p]);
      ++use_;
    }
    for (int32_t u = first; u < use_; ++u) {
      coordinator_->Release(u, released_);
      for (int32_t p : released_) {
        mem.emplace_back(MemWhen::kEnd, MemCategory::kGatheredParams, -zero3_.bytes[p]);
      }
    }
  }
  // One all-gather of these parameters (DeepSpeed's coalesced fetch), each its own buffer.
  void GatherParams(const std::vector<int32_t>& params) {
    if (params.empty()) return;
    MemList buffers;
    Bytes total;
    for (int32_t p : params) {
      buffers.emplace_back(MemWhen::kIssue, MemCategory::kGatheredParams, zero3_.bytes[p]);
      total += zero3_.bytes[p];
    }
    const int32_t id = EmitGather(zero3_.group[params.front()], total, buffers);
    for (int32_t p : params) gather_op_[p] = id;
  }

  // The gather a group's first compute op waits for (consumed: the next pass gathers anew).
  // FSDP2: the copy out of the gather's buffer into the parameters instead, on the compute
  // stream (split_with_sizes_copy: reads and writes the group's weights), which frees the
  // buffer when it ends.
  std::vector<int32_t> TakeGather(int32_t g) {
    std::vector<int32_t> deps;
    if (gather_pending_[g] && policy_->CopiesAroundCollectives()) {
      const Bytes w = group_weights_[g];
      ProgramBuilder::DepList after = AnchorDeps();
      after.push_back(*gather_pending_[g]);
      deps.push_back(
          Add(Compute("param_copy_out", b_.pass(), OpClass::kMemoryBound, Flops(), w + w, g), after,
              {{MemWhen::kStart, MemCategory::kGatheredParams, w},
               {MemWhen::kEnd, MemCategory::kCommBuffers, -w}}));
    } else if (gather_pending_[g]) {
      deps.push_back(*gather_pending_[g]);
    }
    gather_pending_[g].reset();
    return deps;
  }

  // ---- compute ops ------------------------------------------------------------------------

  Op Compute(absl::string_view name, OpPass pass, OpClass cls, Flops flops, Bytes moved,
             std::optional<int32_t> g) const {
    Op op;
    op.name = name;
    op.pass = pass;
    op.op_class = cls;
    op.flops = flops;
    op.bytes_moved = moved;
    op.group = g;
    return op;
  }

  // Op::inv_k of a (rows x inner) . (inner x cols) GEMM: the forward (and its recompute)
  // reduces over inner; the backward's input gradient dX = dY . W^T over cols and its weight
  // gradient dW = X^T . dY over rows (the tokens), each half of the backward's FLOPs; a frozen
  // weight has no weight gradient.
  static float GemmInvK(int64_t rows, int64_t inner, int64_t cols, OpPass pass, bool frozen) {
    if (pass != OpPass::kBackward) return static_cast<float>(1.0 / static_cast<double>(inner));
    if (frozen) return static_cast<float>(1.0 / static_cast<double>(cols));
    return static_cast<float>(0.5 / static_cast<double>(cols) + 0.5 / static_cast<double>(rows));
  }

  // The op of layer op `lo` (one of layer_ops_ or dense_ops_) in `pass`, for group g: made once
  // per layer op and pass (MakeLayerOps: every layer's are the same but for their group).
  Op FromLayerOp(const LayerOp& lo, OpPass pass, int32_t g) const {
    const std::less<const LayerOp*> before;
    const bool dense = !dense_ops_.empty() && !before(&lo, dense_ops_.data()) &&
                       before(&lo, dense_ops_.data() + dense_ops_.size());
    const std::vector<LayerOp>& from = dense ? dense_ops_ : layer_ops_;
    const auto i = static_cast<size_t>(&lo - from.data());
    SIM_CHECK(i < from.size(), "a layer op of neither of the lowering's layers");
    Op op = (dense ? dense_made_ : layer_made_)[static_cast<size_t>(pass)][i];
    op.group = g;
    return op;
  }
  std::array<std::vector<Op>, 3> MakeLayerOps(const std::vector<LayerOp>& ops) const {
    std::array<std::vector<Op>, 3> made;
    for (OpPass pass : {OpPass::kForward, OpPass::kRecompute, OpPass::kBackward}) {
      for (const LayerOp& lo : ops)
        made[static_cast<size_t>(pass)].push_back(MakeLayerOp(lo, pass));
    }
    return made;
  }
  Op MakeLayerOp(const LayerOp& lo, OpPass pass) const {
    // Backward: a GEMM's input and weight gradients are two GEMMs of the forward's size (one,
    // the input gradient, when its weights are frozen); other kernels read and write about
    // twice the forward traffic; flash attention's backward does kFlashBackwardFactor times its
    // forward. LoRA adapters add their own forward, and twice it backward.
    const bool backward = pass == OpPass::kBackward;
    const bool flash_backward = backward && lo.op_class == OpClass::kAttention &&
                                s_.training.attention == AttentionKernel::kFlash;
    const double k = flash_backward ? kFlashBackwardFactor : backward ? 2.0 : 1.0;
    const double kf = backward && lo.frozen ? 1.0 : k;
    Op op =
        Compute(lo.name, pass, lo.op_class, lo.flops * kf + lo.adapter_flops * (backward ? 2 : 1),
                lo.bytes_moved * kf, std::nullopt);
    op.keep_16bit = lo.keep_16bit;
    op.kernels = lo.kernels;
    if (lo.gemm_inner > 0) {
      op.inv_k = GemmInvK(lo.gemm_rows, lo.gemm_inner, lo.gemm_cols, pass, backward && lo.frozen);
      op.waves = static_cast<float>(LinearWaveFactor(lo.gemm_rows, lo.gemm_inner, lo.gemm_cols,
                                                     lo.gemm_groups, backward, lo.frozen,
                                                     s_.cluster.gpu.sms));
    }
    if (lo.op_class == OpClass::kAttention && s_.training.attention == AttentionKernel::kFlash) {
      // Causal: a query block visits s / 2 key/value positions on average, whole or under
      // context parallelism (its load-balanced chunks see the gathered sequence's keys).
      op.inv_k = static_cast<float>(2.0 / static_cast<double>(s_.training.seq_len));
    }
    if (s_.training.precision == Precision::kFp8 && lo.op_class == OpClass::kGemm &&
        !lo.keep_16bit) {
      // Frozen weights need no weight-gradient GEMM, but the casts stay.
      op.serial_bytes = backward ? lo.fp8_cast_bwd : lo.fp8_cast_fwd;
    }
    return op;
  }

  // The final norm over this GPU's tokens (its kernels as a layer's, NormKernelCost); the
  // backward moves twice the forward's bytes, as other memory-bound kernels do.
  Op FinalNorm(OpPass pass, int32_t g) const {
    const int64_t elements = tokens_ / rep_ * s_.model.hidden;
    const NormCost c = NormKernelCost(s_.model, s_.training.NormKernels());
    const double k = pass == OpPass::kBackward ? 2.0 : 1.0;
    Op op = Compute("final_norm", pass, OpClass::kMemoryBound,
                    Flops::Count(5.0 * k * static_cast<double>(elements)),
                    Bytes::Count(c.bytes_per_element * elements) * k, g);
    op.kernels = c.kernels;
    return op;
  }

  // An offload op: a copy over the GPU's PCIe link, or host CPU / NVMe work for this GPU.
  Op HostOp(absl::string_view name, OpClass cls, Bytes bytes, std::optional<int32_t> g) const {
    Op op = Compute(name, b_.pass(), cls, Flops(), bytes, g);
    op.stream = cls == OpClass::kPcieCopy ? StreamKind::kPcie : StreamKind::kHost;
    return op;
  }

  // QLoRA's 16-bit copy of an op's projection while it runs.
  static void Dequantized(const LayerOp& lo, MemList& mem) {
    if (lo.dequantized == Bytes()) return;
    mem.emplace_back(MemWhen::kStart, MemCategory::kWorkspace, lo.dequantized);
    mem.emplace_back(MemWhen::kEnd, MemCategory::kWorkspace, -lo.dequantized);
  }

  // How decoder layer g (1..L) is checkpointed: the recompute policy, restricted to every K-th
  // layer (torchtitan) or to N layers per model chunk (Megatron-LM block), or applied to groups
  // of N layers that keep only the group's input and are re-run together (Megatron-LM uniform).
  struct LayerCheckpoint {
    Recompute policy = Recompute::kNone;
    bool keeps_input = true;
    int32_t group_first = 0, group_last = 0;  // the uniform group (the layer alone otherwise)
  };

  LayerCheckpoint CheckpointOf(int32_t g) const {
    const TrainingSpec& t = s_.training;
    LayerCheckpoint c{t.recompute, true, g, g};
    if (t.recompute_every > 1) {
      if (g % t.recompute_every != 0) c.policy = Recompute::kNone;
      return c;
    }
    if (!t.recompute_layers) return c;
    // The decoder layers of g's model chunk.
    int32_t lo = 1, hi = layers_;
    for (const auto& [first, last] : vstage_groups_) {
      if (first <= g && g <= last) {
        lo = std::max(first, 1);
        hi = std::min(last, layers_);
      }
    }
    const int32_t n = static_cast<int32_t>(*t.recompute_layers), pos = g - lo;
    if (t.recompute_method == RecomputeMethod::kBlock) {
      if (pos >= n) c.policy = Recompute::kNone;
      return c;
    }
    c.group_first = lo + pos / n * n;
    c.group_last = std::min(hi, c.group_first + n - 1);
    c.keeps_input = g == c.group_first;
    return c;
  }

  bool Kept(int32_t g, const LayerCheckpoint& c, const LayerOp& lo, const SavedTensor& t) const {
    if (!c.keeps_input && &lo == &Ops(g).front() && &t == &lo.saves.front()) return false;
    return sim::Kept(Ops(g), lo, t, c.policy, s_.training.recompute_modules);
  }

  // Layer gradients that live until their reduce-scatter (stages 2 and 3); persistent
  // accumulation buffers otherwise. With the policy's reduction buffers when this is the
  // micro-batch's first backward op (BackwardStart).
  MemList TransientGradients(int32_t g) {
    MemList out = BackwardStart();
    const Bytes grads = policy_->TransientGradients(Env(), g);
    if (grads != Bytes()) out.emplace_back(MemWhen::kStart, MemCategory::kGradients, grads);
    return out;
  }
  // What the micro-batch's first backward op allocates besides its own tensors (consumed).
  MemList BackwardStart() {
    MemList out(backward_start_.begin(), backward_start_.end());
    backward_start_.clear();
    return out;
  }

  // The dependency list of the layer op being lowered, empty: one vector reused op after op
  // (LayerForward, RecomputeLayer, LayerBackward; none calls another while it holds the list),
  // where a vector per op was the lowering's most frequent heap allocation.
  std::vector<int32_t>& OpDeps() {
    op_deps_.clear();
    return op_deps_;
  }

  void LayerForward(int32_t g, std::vector<int32_t> first_deps, const GatherFrees& free_gather) {
    const LayerCheckpoint c = CheckpointOf(g);
    const Bytes cast = policy_->CastCopies(group_params_[g]);
    std::vector<Bytes> dropped;  // tensors not kept for backward: freed when the forward ends
    const std::vector<LayerOp>& ops = Ops(g);
    for (size_t i = 0; i < ops.size(); ++i) {
      const LayerOp& lo = ops[i];
      // The layer's autocast copies come with its first op.
      MemList mem = {{MemWhen::kStart, MemCategory::kGatheredParams, i == 0 ? cast : Bytes()}};
      for (const SavedTensor& t : lo.saves) {
        if (!Allocated(t, c.policy)) continue;
        mem.emplace_back(MemWhen::kStart, MemCategory::kActivations, t.bytes);
        if (!Kept(g, c, lo, t)) dropped.push_back(t.bytes);
      }
      Dequantized(lo, mem);
      std::vector<int32_t>& deps = OpDeps();
      if (i == 0) deps.assign(first_deps.begin(), first_deps.end());
      Hooks(g, lo.name, /*backward=*/false, deps, mem);
      LayerOpWithComms(lo, FromLayerOp(lo, OpPass::kForward, g), deps, std::move(mem),
                       /*backward=*/false);
    }
    for (Bytes b : dropped) AddMemToLast({MemWhen::kEnd, MemCategory::kActivations, -b});
    // Autocast's copies are saved for the backward only where the layer is not checkpointed.
    if (c.policy != Recompute::kNone) {
      AddMemToLast({MemWhen::kEnd, MemCategory::kGatheredParams, -cast});
    }
    for (Bytes b : free_gather) AddMemToLast({MemWhen::kEnd, MemCategory::kGatheredParams, -b});
    // Activation offload: what the layer keeps goes to the host, freed here when the copy ends.
    if (s_.parallel.offload.activations) {
      const std::vector<Bytes> kept = KeptTensors(g);
      MemList frees;
      Bytes total;
      for (Bytes b : kept) {
        frees.emplace_back(MemWhen::kEnd, MemCategory::kActivations, -b);
        total += b;
      }
      if (total > Bytes()) {
        Add(HostOp("activations_to_host", OpClass::kPcieCopy, total, g), AnchorDeps(), frees);
      }
    }
  }

  // The tensors layer g keeps from its forward to its backward.
  std::vector<Bytes> KeptTensors(int32_t g) const {
    const LayerCheckpoint c = CheckpointOf(g);
    std::vector<Bytes> kept;
    for (const LayerOp& lo : Ops(g)) {
      for (const SavedTensor& t : lo.saves) {
        if (Allocated(t, c.policy) && Kept(g, c, lo, t)) kept.push_back(t.bytes);
      }
    }
    return kept;
  }

  // Activation offload: copies layer g's kept tensors back (once per backward), allocating them
  // when the copy starts; returns the copy its backward waits for.
  std::optional<int32_t> FetchActivations(int32_t g) {
    if (!s_.parallel.offload.activations || g <= 0 || g > layers_) return std::nullopt;
    if (fetched_[g]) return fetched_[g];
    MemList mem;
    Bytes total;
    for (Bytes b : KeptTensors(g)) {
      mem.emplace_back(MemWhen::kStart, MemCategory::kActivations, b);
      total += b;
    }
    if (total == Bytes()) return std::nullopt;
    fetched_[g] =
        Add(HostOp("activations_to_gpu", OpClass::kPcieCopy, total, g), AnchorDeps(), mem);
    return fetched_[g];
  }

  // Whether a checkpointed layer's recompute re-runs `lo`: every op under full recompute, the
  // chosen modules' ops under selective, what per-op checkpointing did not cache under op.
  bool Reruns(const LayerCheckpoint& c, const LayerOp& lo) const {
    return c.policy != Recompute::kNone && sim::Reruns(lo, c.policy, s_.training.recompute_modules);
  }

  // Re-runs what layer g's checkpoint dropped, allocating those tensors again: every op (full),
  // the chosen modules' ops (selective), or the ops and op shares per-op checkpointing did not
  // cache. `first` carries the dependencies and memory of the first op emitted.
  void RecomputeLayer(int32_t g, std::vector<int32_t>& deps, MemList& first) {
    const LayerCheckpoint c = CheckpointOf(g);
    first.push_back(
        {MemWhen::kStart, MemCategory::kGatheredParams, policy_->CastCopies(group_params_[g])});
    bool emitted = false;
    for (const LayerOp& lo : Ops(g)) {
      MemList mem;
      for (const SavedTensor& t : lo.saves) {
        if (Allocated(t, c.policy) && !Kept(g, c, lo, t)) {
          mem.emplace_back(MemWhen::kStart, MemCategory::kActivations, t.bytes);
        }
      }
      if (!Reruns(c, lo)) {
        // An op that is not re-run (cached by per-op checkpointing, or outside the selective
        // modules): what it dropped is its predecessor's output (a norm's under layernorm, the
        // experts' activation's under moe_act), re-created there.
        for (const MemAction& a : mem) AddMemToLast({MemWhen::kEnd, a.category, a.bytes});
        continue;
      }
      const double share = c.policy == Recompute::kOp ? lo.sac_recompute : 1.0;
      std::vector<int32_t>& op_deps = OpDeps();
      if (!emitted) {
        mem.insert(mem.end(), first.begin(), first.end());
        first.clear();
        op_deps.assign(deps.begin(), deps.end());
        deps.clear();
      }
      Dequantized(lo, mem);
      Op x = FromLayerOp(lo, OpPass::kRecompute, g);
      x.flops = x.flops * share;
      x.bytes_moved = x.bytes_moved * share;
      Hooks(g, lo.name, /*backward=*/false, op_deps, mem);
      LayerOpWithComms(lo, x, op_deps, std::move(mem), /*backward=*/false);
      emitted = true;
    }
  }

  void LayerBackward(int32_t g, std::vector<int32_t> first_deps, const GatherFrees& free_at_end) {
    const LayerCheckpoint c = CheckpointOf(g);
    MemList grads = TransientGradients(g);
    for (const MemAction& a : FirstGradients(g)) grads.push_back(a);
    // The checkpointed layers (a uniform group at once, when its last layer is reached) re-run
    // their forward first.
    if (c.policy != Recompute::kNone && g == c.group_last) {
      for (int32_t r = c.group_first; r <= c.group_last; ++r) RecomputeLayer(r, first_deps, grads);
    }
    bool first = true;
    const std::vector<LayerOp>& ops = Ops(g);
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      // The op's input gradient (autograd's tensors' size) exists while it runs; every tensor
      // it holds is freed, one by one, when it ends.
      Bytes input_grad;
      for (const SavedTensor& t : it->saves) {
        if (!t.sac_only) input_grad += t.bytes;
      }
      MemList mem;
      mem.emplace_back(MemWhen::kStart, MemCategory::kActivations, input_grad);
      for (const SavedTensor& t : it->saves) {
        if (Allocated(t, c.policy))
          mem.emplace_back(MemWhen::kEnd, MemCategory::kActivations, -t.bytes);
      }
      mem.emplace_back(MemWhen::kEnd, MemCategory::kActivations, -input_grad);
      Dequantized(*it, mem);
      std::vector<int32_t>& deps = OpDeps();
      if (first) {
        mem.insert(mem.end(), grads.begin(), grads.end());
        grads.clear();
        deps.assign(first_deps.begin(), first_deps.end());
      }
      Hooks(g, it->name, /*backward=*/true, deps, mem);
      LayerOpWithComms(*it, FromLayerOp(*it, OpPass::kBackward, g), deps, std::move(mem),
                       /*backward=*/true);
      first = false;
    }
    AddMemToLast(
        {MemWhen::kEnd, MemCategory::kGatheredParams, -policy_->CastCopies(group_params_[g])});
    for (Bytes b : free_at_end) AddMemToLast({MemWhen::kEnd, MemCategory::kGatheredParams, -b});
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

  void EmbeddingForward(std::vector<int32_t> deps, const GatherFrees& free_gather) {
    const int64_t h = s_.model.hidden;
    const Bytes mask = Bytes::Count(s_.model.dropout > 0 ? tokens_ / rep_ * h : 0);
    MemList mem = {{MemWhen::kStart, MemCategory::kActivations, mask}};
    FreeGathers(free_gather, mem);
    Hooks(0, "embedding", /*backward=*/false, deps, mem);
    WithComms(Compute("embedding", OpPass::kForward, OpClass::kMemoryBound, Flops(),
                      Bytes::Count(2 * kCompute * tokens_ * h), 0),
              deps, mem, {}, {TpReduce()});
  }

  void HeadForward(std::vector<int32_t> deps, const GatherFrees& free_gather) {
    const int32_t g = NumGroups() - 1;
    const int64_t h = s_.model.hidden, v = s_.model.vocab / s_.parallel.tp;
    const Bytes hidden = Bytes::Count(kCompute * tokens_ / rep_ * h);
    MemList norm_mem = {{MemWhen::kStart, MemCategory::kActivations, hidden}};
    Hooks(g, "final_norm", /*backward=*/false, deps, norm_mem);
    Add(FinalNorm(OpPass::kForward, g), deps, norm_mem);
    const ModelParallelComm gather = TpGather();
    Op head = Compute("lm_head", OpPass::kForward, OpClass::kGemm,
                      Flops::Count(2.0 * static_cast<double>(tokens_) * static_cast<double>(h) *
                                   static_cast<double>(v)),
                      Bytes::Count(kCompute * (tokens_ * h + h * v + tokens_ * v)), g);
    head.keep_16bit = true;  // the LM head stays 16-bit under fp8 (Megatron-LM, Composer + TE)
    head.inv_k = GemmInvK(tokens_, h, v, OpPass::kForward, false);
    head.waves = static_cast<float>(
        LinearWaveFactor(tokens_, h, v, 1, /*backward=*/false, false, s_.cluster.gpu.sms));
    MemList head_mem = {
        {MemWhen::kStart, MemCategory::kActivations, hidden},
        {MemWhen::kStart, MemCategory::kLogits, loss_.logits16},
        {MemWhen::kStart, MemCategory::kGatheredParams, policy_->CastCopies(HeadParameters())}};
    FreeGathers(free_gather, head_mem);
    std::vector<int32_t> head_deps;
    Hooks(g, "lm_head", /*backward=*/false, head_deps, head_mem);
    if (s_.parallel.sequence_parallel) {
      WithComms(head, head_deps, head_mem, {gather}, {});
    } else {
      Add(head, head_deps, head_mem);
    }
    // The loss kernel's tensors (sim/workload/loss.h); vocabulary-parallel, it all-reduces the
    // row max, the target logit and the sum of exponentials.
    const Bytes l16 = loss_.logits16;
    WithComms(Compute("cross_entropy", OpPass::kForward, OpClass::kMemoryBound,
                      Flops::Count(5.0 * static_cast<double>(tokens_ * v)), l16 + l16 * 2, g),
              {}, MemList(loss_.forward.begin(), loss_.forward.end()), {},
              {{"tp_all_reduce_loss", CollectiveKind::kAllReduce, Bytes::Count(3 * 4 * tokens_),
                &tp_group_, false}});
  }

  void HeadBackward(std::vector<int32_t> deps, const GatherFrees& free_gather) {
    const int32_t g = NumGroups() - 1;
    const int64_t h = s_.model.hidden, v = s_.model.vocab / s_.parallel.tp;
    const Bytes hidden = Bytes::Count(kCompute * tokens_ / rep_ * h);
    const Bytes l32 = loss_.logits16 * 2;
    MemList ce(loss_.backward.begin(), loss_.backward.end());
    for (const MemAction& a : BackwardStart()) ce.push_back(a);
    // The head's weight gradient appears with its backward, which a chunked head runs inside the
    // loss's, chunk by chunk.
    MemList head_grads = TransientGradients(g);
    for (const MemAction& a : FirstGradients(g)) head_grads.push_back(a);
    if (loss_.chunked_head) {
      ce.insert(ce.end(), head_grads.begin(), head_grads.end());
      head_grads.clear();
    }
    Add(Compute("cross_entropy", OpPass::kBackward, OpClass::kMemoryBound,
                Flops::Count(3.0 * static_cast<double>(tokens_ * v)), l32 * 2, g),
        deps, ce);
    // With adapters the head is frozen: its backward computes the input gradient only.
    const double gemms = s_.training.finetune.adapters() ? 1.0 : 2.0;
    Op head = Compute(
        "lm_head", OpPass::kBackward, OpClass::kGemm,
        Flops::Count(gemms * 2.0 * static_cast<double>(tokens_) * static_cast<double>(h) *
                     static_cast<double>(v)),
        Bytes::Count(static_cast<int64_t>(gemms) * kCompute * (tokens_ * h + h * v + tokens_ * v)),
        g);
    head.keep_16bit = true;
    head.inv_k = GemmInvK(tokens_, h, v, OpPass::kBackward, s_.training.finetune.adapters());
    head.waves = static_cast<float>(LinearWaveFactor(
        tokens_, h, v, 1, /*backward=*/true, s_.training.finetune.adapters(), s_.cluster.gpu.sms));
    // The input gradient exists while it runs; the saved input and the logits gradient are
    // freed when it ends.
    MemList head_mem = {
        {MemWhen::kStart, MemCategory::kActivations, hidden},
        {MemWhen::kEnd, MemCategory::kLogits, -loss_.head_grad},
        {MemWhen::kEnd, MemCategory::kGatheredParams, -policy_->CastCopies(HeadParameters())},
        {MemWhen::kEnd, MemCategory::kActivations, -hidden},
        {MemWhen::kEnd, MemCategory::kActivations, -hidden}};
    head_mem.insert(head_mem.end(), head_grads.begin(), head_grads.end());
    std::vector<int32_t> head_deps;
    Hooks(g, "lm_head", /*backward=*/true, head_deps, head_mem);
    if (s_.parallel.sequence_parallel) {
      WithComms(head, head_deps, head_mem, {TpGather()}, {TpReduce()});
    } else {
      WithComms(head, head_deps, head_mem, {}, {TpReduce()});
    }
    MemList norm_mem = {{MemWhen::kStart, MemCategory::kActivations, hidden},
                        {MemWhen::kEnd, MemCategory::kActivations, -hidden},
                        {MemWhen::kEnd, MemCategory::kActivations, -hidden}};
    FreeGathers(free_gather, norm_mem);
    std::vector<int32_t> norm_deps;
    Hooks(g, "final_norm", /*backward=*/true, norm_deps, norm_mem);
    Add(FinalNorm(OpPass::kBackward, g), norm_deps, norm_mem);
  }

  void EmbeddingBackward(std::vector<int32_t> deps, const GatherFrees& free_gather) {
    const int64_t h = s_.model.hidden;
    const Bytes mask = Bytes::Count(s_.model.dropout > 0 ? tokens_ / rep_ * h : 0);
    MemList mem = {{MemWhen::kEnd, MemCategory::kActivations, -mask}};
    FreeGathers(free_gather, mem);
    for (const MemAction& a : TransientGradients(0)) mem.push_back(a);
    for (const MemAction& a : FirstGradients(0)) mem.push_back(a);
    Hooks(0, "embedding", /*backward=*/true, deps, mem);
    // A frozen embedding (adapters) has no gradient to scatter.
    const Op emb =
        Compute("embedding", OpPass::kBackward, OpClass::kMemoryBound, Flops(),
                Bytes::Count(s_.training.finetune.adapters() ? 0 : 3 * kCompute * tokens_ * h), 0);
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
    b_.SetPass(OpPass::kForward);
    const int32_t pf = static_cast<int32_t>(gather_rule_.layers);
    for (int32_t g = first; g <= last; ++g) {
      std::vector<int32_t> deps;
      if (g == first) deps.swap(entry);
      // The gathered parameters freed when the group's forward ends.
      GatherFrees free_gather;  // the coordinator frees per op instead (Hooks)
      if (policy_->GathersParameters() && !coordinator_) {
        LaunchGathers(g, g + pf, +1);
        for (int32_t d : TakeGather(g)) deps.push_back(d);
        if (policy_->RegathersForBackward()) free_gather = {group_weights_[g]};
      }
      DpEnv env = Env();
      policy_->BeforeForward(env, g, deps);
      if (g == 0) {
        EmbeddingForward(std::move(deps), free_gather);
      } else if (g == NumGroups() - 1) {
        HeadForward(std::move(deps), free_gather);
      } else {
        LayerForward(g, std::move(deps), free_gather);
      }
    }
  }

  // The backward of groups [last, first] (descending) for the current micro-batch.
  void Backward(int32_t last, int32_t first, std::vector<int32_t> entry) {
    b_.SetPass(OpPass::kBackward);
    const int32_t pf = static_cast<int32_t>(gather_rule_.layers);
    for (int32_t g = last; g >= first; --g) {
      std::vector<int32_t> deps;
      if (g == last) deps.swap(entry);
      GatherFrees free_gather;
      if (policy_->GathersParameters() && !coordinator_) {
        if (policy_->RegathersForBackward()) {
          LaunchGathers(g, g - pf, -1);
          for (int32_t d : TakeGather(g)) deps.push_back(d);
        }
        free_gather = {group_weights_[g]};
      }
      // The policy's reduction buffers come with the micro-batch's first backward op.
      if (!backward_buffers_live_[b_.stage()] && policy_->BackwardBuffers() > Bytes()) {
        backward_start_.push_back(
            {MemWhen::kStart, MemCategory::kCommBuffers, policy_->BackwardBuffers()});
        backward_buffers_live_[b_.stage()] = true;
      }
      // Activation offload: this layer's tensors back before its backward, the next one's
      // prefetched beside it (torchtune OffloadActivations: one layer ahead).
      if (const auto fetch = FetchActivations(g)) deps.push_back(*fetch);
      if (g - 1 >= first) FetchActivations(g - 1);
      if (g == NumGroups() - 1) {
        HeadBackward(std::move(deps), free_gather);
      } else if (g == 0) {
        EmbeddingBackward(std::move(deps), free_gather);
      } else {
        LayerBackward(g, std::move(deps), free_gather);
      }
      DpEnv env = Env();
      policy_->AfterBackward(env, g);
      // Per micro-batch, the reduction buffers go when its last reduction ends.
      if (g == 0 && backward_buffers_live_[b_.stage()] && !policy_->BackwardBuffersPerStep()) {
        AddMemToLast({MemWhen::kEnd, MemCategory::kCommBuffers, -policy_->BackwardBuffers()});
        backward_buffers_live_[b_.stage()] = false;
      }
      if (coordinator_ && g == 0) {
        SIM_CHECK(use_ == static_cast<int32_t>(coordinator_->trace().size()) &&
                      next_hook_op_ == hook_ops_.size(),
                  "lowering left DeepSpeed's trace");
        coordinator_->Reset();
        use_ = 0;
        next_hook_op_ = 0;
      }
      if (s_.parallel.offload.activations && g > 0 && g <= layers_) fetched_[g].reset();
      if (s_.training.optimizer_in_backward) {
        // The group's update runs in its gradient hook and frees its gradients.
        const int64_t params = group_trainable_[g];
        Add(Compute("optimizer", OpPass::kStep, OpClass::kMemoryBound,
                    Flops::Count(12.0 * static_cast<double>(params)),
                    Bytes::Count(StepTrafficPerParam() * params), g),
            AnchorDeps(), {{MemWhen::kEnd, MemCategory::kGradients, -GroupGradientBytes(g)}});
      }
    }
  }

  // ---- pipeline ---------------------------------------------------------------------------

  // Sends the boundary tensor of a unit to the neighbouring stage: the activations (forward)
  // or their gradient (backward) of the unit's tokens. Every TP rank sends its 1/t share
  // (Megatron-LM's scatter-gather across the TP group, or the SP shard). Returns the op.
  int32_t Send(int32_t g) {
    ProgramBuilder::DepList deps = AnchorDeps();
    deps.insert(deps.end(), b_.waits().begin(), b_.waits().end());
    deps.insert(deps.end(), b_.overlapped().begin(), b_.overlapped().end());
    Op op = Collective("send_recv", CollectiveKind::kSendRecv, act_bytes_ / s_.parallel.tp,
                       place_.StageNeighbours(), g);
    op.stream = StreamKind::kP2p;
    return Add(op, deps, {});
  }

  // Emits every stage's units in its schedule order, in the order PipelineEmission lists them
  // (each after the send it receives: ops only depend on earlier ops), and each stage's end
  // after its last unit.
  void Pipeline() {
    const int32_t p = static_cast<int32_t>(s_.parallel.pp);
    const int32_t vstages = static_cast<int32_t>(vstage_groups_.size());
    const int32_t m = static_cast<int32_t>(m_);
    const auto order = PipelineOrder(s_.parallel.pp_schedule, p, s_.parallel.pp_chunks, m);
    // sent_*[virtual stage][micro-batch]: the send op that unit produced, once emitted.
    using Sent = std::vector<std::vector<std::optional<int32_t>>>;
    Sent sent_fwd(vstages, std::vector<std::optional<int32_t>>(m));
    Sent sent_bwd(vstages, std::vector<std::optional<int32_t>>(m));
    // Megatron-LM's non-interleaved 1F1B waits for each stage's sends: its send_forward,
    // send_backward and their fused send-and-receive forms call _communicate with wait_on_reqs
    // (and batch_p2p_sync adds torch.cuda.synchronize), so a stage's next unit starts after the
    // send before it has completed, and no compute runs beside a send
    // (megatron/core/pipeline_parallel/p2p_communication.py, schedules.py
    // forward_backward_pipelining_without_interleaving). The interleaved schedule overlaps them
    // (overlap_p2p_comm): its sends run beside the next chunk.
    const bool blocking_sends = s_.parallel.pp_schedule == PipelineSchedule::k1F1B;
    std::vector<std::optional<int32_t>> last_send(p);  // per stage, when blocking_sends
    for (const PipelineSlot& slot : PipelineEmission(order, s_.parallel.pp_chunks)) {
      const int32_t stage = slot.stage;
      const PipelineUnit& u = order[stage][slot.index];
      const int32_t vs = u.chunk * p + stage;
      SetStage(stage);
      std::optional<int32_t> recv;
      if (u.forward && vs > 0) recv = sent_fwd[vs - 1][u.micro_batch];
      if (!u.forward && vs < vstages - 1) recv = sent_bwd[vs + 1][u.micro_batch];
      SIM_CHECK(recv.has_value() == (u.forward ? vs > 0 : vs < vstages - 1),
                "a pipeline unit listed before the send it receives");
      SetMicroBatch(u.micro_batch);
      std::vector<int32_t> entry;
      if (recv) entry.push_back(*recv);
      if (last_send[stage]) entry.push_back(*last_send[stage]);
      const auto [first, last] = vstage_groups_[vs];
      std::optional<int32_t> sent;
      if (u.forward) {
        Forward(first, last, std::move(entry));
        if (vs < vstages - 1) sent = sent_fwd[vs][u.micro_batch] = Send(last);
      } else {
        Backward(last, first, std::move(entry));
        if (vs > 0) sent = sent_bwd[vs][u.micro_batch] = Send(first);
      }
      if (blocking_sends) last_send[stage] = sent;
      if (static_cast<size_t>(slot.index) + 1 == order[stage].size()) FinishStage(last_send[stage]);
    }
  }

  // ---- end of the step --------------------------------------------------------------------

  // The stage's end: the reductions its policy left for after the backward, the optimizer over
  // its shard, and what the policy does after it (the parameter all-gather of ZeRO-1/2).
  // `blocking_send`: the stage's last send, which the step waits for (Pipeline).
  void FinishStage(std::optional<int32_t> blocking_send = std::nullopt) {
    SetMicroBatch(static_cast<int32_t>(m_) - 1);
    b_.SetPass(OpPass::kStep);
    DpEnv env = Env();
    policy_->BeforeOptimizer(env);
    const StageParams total{StageTrainable(s_)[b_.stage()], stage_experts_[b_.stage()]};
    const int64_t local = policy_->OptimizerShard(total);
    std::vector<int32_t> deps = policy_->TakeStepReductions(b_.stage());
    if (b_.last_compute()) deps.push_back(*b_.last_compute());
    if (blocking_send) deps.push_back(*blocking_send);
    deps.insert(deps.end(), b_.waits().begin(), b_.waits().end());
    b_.ClearWaits();
    if (s_.training.optimizer_in_backward) return;  // every update ran in the backward
    // Lazy gradients are freed, group by group, when the step ends (zero_grad(set_to_none)).
    MemList frees;
    if (backward_buffers_live_[b_.stage()]) {  // ZeRO-1's buckets: released before the step
      frees.emplace_back(MemWhen::kStart, MemCategory::kCommBuffers, -policy_->BackwardBuffers());
      backward_buffers_live_[b_.stage()] = false;
    }
    if (LazyGradients()) {
      for (size_t vs = b_.stage(); vs < vstage_groups_.size(); vs += s_.parallel.pp) {
        for (int32_t g = vstage_groups_[vs].first; g <= vstage_groups_[vs].second; ++g) {
          if (grads_allocated_[g])
            frees.emplace_back(MemWhen::kEnd, MemCategory::kGradients, -GroupGradientBytes(g));
        }
      }
    }
    const OffloadSpec& off = s_.parallel.offload;
    const StateSplit& st = p_.stage_states[b_.stage()];
    const bool on_host =
        st.optimizer == Bytes() && (st.host > Bytes() || st.nvme > Bytes()) &&
        (off.optimizer != OffloadTarget::kNone || off.params != OffloadTarget::kNone);
    if (!on_host) {
      Op opt = Compute("optimizer", OpPass::kStep, OpClass::kMemoryBound,
                       Flops::Count(12.0 * static_cast<double>(local)),
                       Bytes::Count(StepTrafficPerParam() * local), std::nullopt);
      const Bytes upcast = policy_->StepTransient(local);
      frees.emplace_back(MemWhen::kStart, MemCategory::kGradients, upcast);
      frees.emplace_back(MemWhen::kEnd, MemCategory::kGradients, -upcast);
      for (const Bytes t : OptimizerTemporaries(total, local)) {
        frees.emplace_back(MemWhen::kStart, MemCategory::kOptimizer, t);
        frees.emplace_back(MemWhen::kEnd, MemCategory::kOptimizer, -t);
      }
      const int32_t id = Add(opt, deps, frees);
      policy_->AfterOptimizer(env, id, total);
      return;
    }
    // The update runs on the host CPU (ZeRO-Offload's DeepSpeedCPUAdam, torch.optim on CPU
    // tensors): gradients that stayed on the GPU go over first (Megatron-Core's main_grad),
    // ZeRO-Infinity reads and writes the NVMe-resident states around it, and the updated 16-bit
    // parameters come back unless they live on the host.
    std::optional<int32_t> last;
    auto chain = [&](Op op, MemList mem) {
      last = Add(op, last ? std::vector<int32_t>{*last} : deps, mem);
    };
    if (!policy_->GradientsToHost()) {
      chain(HostOp("grads_to_host", OpClass::kPcieCopy, Bytes::Count(4 * local), std::nullopt), {});
    }
    if (st.nvme > Bytes()) {
      chain(HostOp("nvme_read", OpClass::kNvmeIo, st.nvme, std::nullopt), {});
    }
    chain(HostOp("optimizer", OpClass::kHostCompute,
                 Bytes::Count(HostOptimizerTrafficPerParam(s_.training.optimizer) * local),
                 std::nullopt),
          frees);
    if (st.nvme > Bytes()) {
      chain(HostOp("nvme_write", OpClass::kNvmeIo, st.nvme, std::nullopt), {});
    }
    if (off.params == OffloadTarget::kNone) {
      chain(
          HostOp("params_to_gpu", OpClass::kPcieCopy, Bytes::Count(kCompute * local), std::nullopt),
          {});
    }
    policy_->AfterOptimizer(env, *last, total);
  }

  const Scenario& s_;  // its global batch aside: m_ micro-batches
  OwnedPolicy policy_;
  int64_t m_;  // micro-batches of the step being lowered
  const ShardingPlan plan_;
  const Placement place_;
  const ActivationShape shape_;
  const std::vector<LayerOp> layer_ops_;  // a decoder layer's (an MoE model's MoE layer)
  const std::vector<LayerOp> dense_ops_;  // an MoE model's dense layers (MoeSpec layers)
  // FromLayerOp's ops of each, by pass (forward, recompute, backward), without a group.
  const std::array<std::vector<Op>, 3> layer_made_ = MakeLayerOps(layer_ops_);
  const std::array<std::vector<Op>, 3> dense_made_ = MakeLayerOps(dense_ops_);
  // The ops of group g's layer (g = 1..L).
  const std::vector<LayerOp>& Ops(int32_t g) const {
    return dense_ops_.empty() || s_.model.IsMoeLayer(g - 1) ? layer_ops_ : dense_ops_;
  }
  const int32_t layers_;
  const int64_t tokens_;   // per GPU per micro-batch (s/cp · b)
  const int64_t rep_;      // t with sequence parallelism (replicated tensors sharded), else 1
  const Bytes act_bytes_;  // one 16-bit activation of the GPU's tokens: 2·T·h
  const LossTensors loss_;
  OpProgram p_;
  ProgramBuilder b_;                                        // appends to p_
  std::vector<int64_t> group_params_;                       // per GPU (TP shard)
  std::vector<std::pair<int32_t, int32_t>> vstage_groups_;  // per virtual stage: [first, last]
  CommGroup grad_group_, shard_group_, tp_group_, cp_group_;
  CommGroup ep_group_, etp_group_, edp_group_;  // MoE: expert parallel, expert TP, expert DP
  std::vector<int64_t> group_experts_, stage_experts_;  // routed experts' parameters per GPU
  std::vector<std::optional<int32_t>> gather_pending_;
  const DataParallelPolicy::GatherRule gather_rule_ = policy_->Gathers();
  // DeepSpeed ZeRO-3's parameter coordinator, its parameters and where the lowering is in its
  // trace.
  std::optional<Zero3Coordinator> coordinator_;
  Zero3Params zero3_;
  int32_t use_ = 0;                 // the next module use of the micro-batch's trace
  std::vector<int32_t> gather_op_;  // per parameter: the all-gather that gathered it last
  // The ops whose hooks the trace holds, in order, and the next one lowering will emit.
  struct HookOp {
    int32_t group = 0;
    absl::string_view op;
    bool backward = false;
    int32_t modules = 0;
  };
  std::vector<HookOp> hook_ops_;
  size_t next_hook_op_ = 0;
  Zero3Coordinator::Fetched zero3_fetched_;  // scratch
  std::vector<int32_t> released_;            // scratch
  std::vector<int32_t> op_deps_;             // scratch: OpDeps
  // Reduction buffers (DataParallelPolicy::BackwardBuffers) allocated, per stage, and the
  // actions the next backward op carries.
  std::vector<bool> backward_buffers_live_ =
      std::vector<bool>(static_cast<size_t>(s_.parallel.pp), false);
  MemList backward_start_;
  std::vector<int64_t> group_trainable_;  // per GPU: what has gradients and optimizer states
  std::vector<Bytes> group_weights_;      // per GPU: 16-bit (or NF4) weights as gathered
  std::vector<bool> grads_allocated_;     // lazy gradients: allocated by an earlier backward
  const bool lazy_gradients_ =
      PersistentStates(s_, 0).lazy_gradients || s_.training.optimizer_in_backward;
  std::vector<std::optional<int32_t>> fetched_ =
      std::vector<std::optional<int32_t>>(static_cast<size_t>(s_.model.layers + 2));
};

}  // namespace

namespace {

// InvalidArgument when a step of `micro_batches` is too long to lower one by one.
absl::Status CheckLength(const Scenario& s, int64_t micro_batches) {
  const int64_t passes = micro_batches * (s.model.layers + 2);
  if (passes <= kMaxGroupPasses) return absl::OkStatus();
  // The program holds every micro-batch's ops (~40 per layer and micro-batch, some 6 KB).
  return absl::InvalidArgumentError(absl::StrCat(
      "training.global_batch: ", micro_batches, " micro-batches x ", s.model.layers + 2,
      " layer groups = ", passes, " to lower one by one, above the limit of ", kMaxGroupPasses,
      ": the step is replayed micro-batch by micro-batch when folding is off (--no-fold), a "
      "trace or timeline is written, or its micro-batches do not repeat (GPipe's memory grows "
      "with them); fewer micro-batches (raise training.micro_batch) or a folded run answer it"));
}

// The scenario's policy, checked.
absl::StatusOr<std::unique_ptr<DataParallelPolicy>> CheckedPolicy(const Scenario& s) {
  std::unique_ptr<DataParallelPolicy> policy = MakeDataParallelPolicy(s);
  if (absl::Status st = policy->Check(); !st.ok()) return st;
  return policy;
}

}  // namespace

absl::StatusOr<OpProgram> Lower(const Scenario& s) {
  if (absl::Status st = CheckLength(s, s.micro_batches()); !st.ok()) return st;
  auto policy = CheckedPolicy(s);
  if (!policy.ok()) return policy.status();
  return Lowerer(s, *std::move(policy), s.micro_batches()).Run();
}

// The lowering of the first `lowered` micro-batches, none of them the step's last, and of the
// next one's forward when `forward` (one stage); none with a pipeline, whose schedule depends
// on the step's length.
struct StepLowering::State {
  const Scenario& s;
  std::unique_ptr<Lowerer> main;
  int64_t lowered = 0;
  bool forward = false;
  int32_t shared = 0;  // of the last program
};

StepLowering::StepLowering(std::unique_ptr<State> state) : state_(std::move(state)) {}
StepLowering::StepLowering(StepLowering&&) noexcept = default;
StepLowering& StepLowering::operator=(StepLowering&&) noexcept = default;
StepLowering::~StepLowering() = default;

absl::StatusOr<StepLowering> StepLowering::Start(const Scenario& s) {
  auto state = std::unique_ptr<State>(new State{s, nullptr});
  if (s.parallel.pp == 1) {
    auto policy = CheckedPolicy(s);
    if (!policy.ok()) return policy.status();
    // Never the last: the step's length is each Lower's.
    state->main =
        std::make_unique<Lowerer>(s, *std::move(policy), std::numeric_limits<int64_t>::max());
    state->main->Begin(/*micro_batches=*/4);  // room for a fold's first window; grows after
  }
  return StepLowering(std::move(state));
}

bool StepLowering::incremental() const { return state_->main != nullptr; }

int32_t StepLowering::shared() const { return state_->shared; }

absl::StatusOr<OpProgram> StepLowering::Lower(int64_t micro_batches) {
  State& st = *state_;
  if (!st.main) return sim::Lower(st.s.WithMicroBatches(micro_batches));
  SIM_CHECK(micro_batches > st.lowered, "StepLowering lowers steps of increasing length");
  if (absl::Status s = CheckLength(st.s, micro_batches); !s.ok()) return s;
  if (st.main->LastBackwardLikeAny()) {
    // Every micro-batch, the last's backward included, is this step's and every longer one's:
    // lowered once, the last marked as such in a copy that ends the step.
    while (st.lowered < micro_batches) {
      const auto mb = static_cast<int32_t>(st.lowered++);
      st.main->LowerForward(mb);
      st.main->LowerBackward(mb);
    }
    std::unique_ptr<Lowerer> last = st.main->Fork(micro_batches);
    st.shared = last->ops();
    last->MarkLastBackward();
    return last->Finish();
  }
  // The shorter steps' micro-batches, and the last one's forward, are this step's too; its
  // backward is its own.
  while (st.lowered < micro_batches - 1) {
    const auto mb = static_cast<int32_t>(st.lowered++);
    if (!st.forward) st.main->LowerForward(mb);
    st.main->LowerBackward(mb);
    st.forward = false;
  }
  const auto last_mb = static_cast<int32_t>(micro_batches - 1);
  if (!st.forward) st.main->LowerForward(last_mb);
  st.forward = true;
  std::unique_ptr<Lowerer> last = st.main->Fork(micro_batches);
  st.shared = last->ops();
  last->LowerBackward(last_mb);
  return last->Finish();
}

}  // namespace sim
