#pragma once
// The lowerer of one step (sim/workload/lowering.h): its class, shared by the files of this
// folder, each defining one part of it.

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

namespace sim::lowering_internal {

inline constexpr int64_t kCompute = 2;  // bytes per compute-dtype (bf16/fp16) element

// The gathered parameter buffers a group's use frees as it ends, each as it was allocated.
using GatherFrees = absl::InlinedVector<Bytes, 4>;

inline void FreeGathers(const GatherFrees& parts, MemList& mem) {
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
  Lowerer(const Scenario& s, std::unique_ptr<DataParallelPolicy> policy, int64_t micro_batches);

  Lowerer(Lowerer&&) = delete;
  Lowerer& operator=(const Lowerer&) = delete;

  OpProgram Run();

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
  std::unique_ptr<Lowerer> Fork(int64_t micro_batches);

  int32_t ops() const { return static_cast<int32_t>(p_.ops.size()); }
  // Whether the last micro-batch's backward is lowered as any other (DataParallelPolicy::
  // LastBackwardLikeAny), and marking the one lowered last as the step's last.
  bool LastBackwardLikeAny() const { return policy_->LastBackwardLikeAny(); }
  void MarkLastBackward() { policy_->MarkLastBackward(b_.stage()); }

  // The program's facts and persistent memory, its arrays sized for `micro_batches`.
  void Begin(int64_t micro_batches);

 private:
  Lowerer(const Lowerer&) = default;  // Fork

  // Capacity for the ops of every micro-batch (forward, recompute, backward, the ZeRO
  // collectives and gathers of a group, up to 12 TP/CP collectives per layer, a send each
  // way per virtual stage) and each stage's end, so that lowering allocates once: an
  // estimate short by a few ops copied the whole program to grow it (544 lowerings of plan
  // llama3-405b and 1,680 of plan llama2-70b; ZeRO-3's short by 30 %, the interleaved
  // schedule's by its sends). Capacity never touched costs no memory.
  void Reserve(int64_t micro_batches);

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

  std::vector<MemAction> PersistentActions(int32_t stage) const;
  // Transformer Engine's cached placeholder weight gradients on a stage (TeVersion::
  // CachesDummyWeightGradients), held from the first backward on: in a steady step, throughout.
  Bytes TeDummyWeightGradients(int32_t stage) const;
  // The fp8 copies and transposes of a stage's weights that Transformer Engine caches (fp8
  // under TE, weights not gathered per micro-batch).
  Bytes TeFp8WeightCopies(int32_t stage) const;

  // Gradients the backward allocates and the optimizer frees (torchtune's set_to_none), or
  // that each group's update frees as soon as it is done (optimizer in backward).
  bool LazyGradients() const { return lazy_gradients_; }
  // A group's gradients as the optimizer sees them (its shard from ZeRO-2 on).
  Bytes GroupGradientBytes(int32_t g) const;
  // With lazy gradients: what group g's first backward allocates (once per step).
  MemList FirstGradients(int32_t g) {
    if (!LazyGradients() || grads_allocated_[g]) return {};
    grads_allocated_[g] = true;
    return {{MemWhen::kStart, MemCategory::kGradients, GroupGradientBytes(g)}};
  }

  // OptimizerTrafficPerParam for this scenario: without a master copy (the ddp and torchtune
  // presets) the update runs on the parameters themselves, in their moments' dtype.
  int64_t StepTrafficPerParam() const;

  // What AdamW's update allocates beside the states for the `local` parameters it updates out
  // of the stage's `total` (OptimizerImpl), one entry per allocation: foreach, a copy of the
  // second moment of every parameter (torch/optim/adamw.py _multi_tensor_adamw:
  // exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs), a tensor per parameter, here one per layer
  // group, all live at once); loop, two of the largest tensor (_single_tensor_adamw, one
  // parameter at a time, whose denominator holds the root and the quotient at once: the
  // embedding or LM head on the stages holding them, else an MLP matrix, ÷ TP);
  // fused, none. Other optimizers: none.
  std::vector<Bytes> OptimizerTemporaries(StageParams total, int64_t local) const;

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
  int32_t WithComms(const Op& x, absl::Span<const int32_t> deps, MemList&& mem,
                    std::initializer_list<ModelParallelComm> pre,
                    std::initializer_list<ModelParallelComm> post, bool async = false);

  // The token exchanges of an MoE layer (layer_ops.h kEpDispatch / kEpCombine) on the compute
  // stream, as Megatron-Core's MoEAlltoAllTokenDispatcher runs them without its optional
  // overlap. Toward the experts (after the permutation; in backward after the un-permutation):
  // the all-to-all over EP of this GPU's T/rep·k token copies (2·h bytes each), then with
  // expert TP the all-gather over ETP that gives every ETP rank the group's copies
  // (gather_from_sequence_parallel_region). Back from them (before the un-permutation; in
  // backward before the permutation): the reduce-scatter over ETP, then the all-to-all, whose
  // receive buffer the consuming op frees. The busiest rank's volumes scale by its load.
  int32_t WithExpertAllToAll(const LayerOp& lo, const Op& x, absl::Span<const int32_t> deps,
                             MemList&& mem, bool backward);

  // The collectives of a decoder-layer op (see ParallelRole), forward or backward.
  // `x` by reference all the way to the program: an op passed by value is copied with wide
  // loads right after its fields were stored one by one, and stalled (perf).
  int32_t LayerOpWithComms(const LayerOp& lo, const Op& x, absl::Span<const int32_t> deps,
                           MemList&& mem, bool backward);

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
  int32_t EmitGather(int32_t g, Bytes buffer, const MemList& buffers = {});

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
  Zero3Params MakeZero3Params() const;

  // The module hooks an op of group g fires, in forward order (reversed in a backward): the
  // containers (the layer, the attention and MLP blocks), norms and activations fetch nothing
  // but still prefetch; each projection fetches its weight.
  // Appended to `out`; returns how many.
  int32_t ModulesOf(int32_t g, absl::string_view op, bool backward,
                    std::vector<ModuleUse>& out) const;

  // One micro-batch's hooks in the order lowering emits the ops (Forward, Backward below);
  // records in hook_ops_ which op each run of them belongs to.
  std::vector<ModuleUse> Zero3Trace();

  // The hooks of an op about to be emitted: its modules fetch (the gathers are emitted here,
  // the op waits for its parameters' gathers), then release (the op frees those buffers when it
  // ends). An op that fuses modules (qkv, gate_up) holds all their parameters while it runs, so
  // its modules release after all of them fetched. Nothing without the coordinator.
  void Hooks(int32_t g, absl::string_view op, bool backward, std::vector<int32_t>& deps,
             MemList& mem);
  // One all-gather of these parameters (DeepSpeed's coalesced fetch), each its own buffer.
  void GatherParams(const std::vector<int32_t>& params);

  // The gather a group's first compute op waits for (consumed: the next pass gathers anew).
  // FSDP2: the copy out of the gather's buffer into the parameters instead, on the compute
  // stream (split_with_sizes_copy: reads and writes the group's weights), which frees the
  // buffer when it ends.
  std::vector<int32_t> TakeGather(int32_t g);

  // ---- compute ops ------------------------------------------------------------------------

  Op Compute(absl::string_view name, OpPass pass, OpClass cls, Flops flops, Bytes moved,
             std::optional<int32_t> g) const;

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
  Op FromLayerOp(const LayerOp& lo, OpPass pass, int32_t g) const;
  std::array<std::vector<Op>, 3> MakeLayerOps(const std::vector<LayerOp>& ops) const;
  Op MakeLayerOp(const LayerOp& lo, OpPass pass) const;

  // The final norm over this GPU's tokens (its kernels as a layer's, NormKernelCost); the
  // backward moves twice the forward's bytes, as other memory-bound kernels do.
  // The once-per-step fp8 cast and transpose of group g's layer weights under Transformer
  // Engine's weight cache (ActivationShape::te_fp8_weight_cache).
  Op Fp8WeightCache(const std::vector<LayerOp>& ops, int32_t g) const;
  Op FinalNorm(OpPass pass, int32_t g) const;

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

  LayerCheckpoint CheckpointOf(int32_t g) const;

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

  void LayerForward(int32_t g, std::vector<int32_t> first_deps, const GatherFrees& free_gather);

  // The tensors layer g keeps from its forward to its backward.
  std::vector<Bytes> KeptTensors(int32_t g) const;

  // Activation offload: copies layer g's kept tensors back (once per backward), allocating them
  // when the copy starts; returns the copy its backward waits for.
  std::optional<int32_t> FetchActivations(int32_t g);

  // Whether a checkpointed layer's recompute re-runs `lo`: every op under full recompute, the
  // chosen modules' ops under selective, what per-op checkpointing did not cache under op.
  bool Reruns(const LayerCheckpoint& c, const LayerOp& lo) const {
    return c.policy != Recompute::kNone && sim::Reruns(lo, c.policy, s_.training.recompute_modules);
  }

  // Re-runs what layer g's checkpoint dropped, allocating those tensors again: every op (full),
  // the chosen modules' ops (selective), or the ops and op shares per-op checkpointing did not
  // cache. `first` carries the dependencies and memory of the first op emitted.
  void RecomputeLayer(int32_t g, std::vector<int32_t>& deps, MemList& first);

  void LayerBackward(int32_t g, std::vector<int32_t> first_deps, const GatherFrees& free_at_end);

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

  void EmbeddingForward(std::vector<int32_t> deps, const GatherFrees& free_gather);

  void HeadForward(std::vector<int32_t> deps, const GatherFrees& free_gather);

  void HeadBackward(std::vector<int32_t> deps, const GatherFrees& free_gather);

  void EmbeddingBackward(std::vector<int32_t> deps, const GatherFrees& free_gather);

  // ---- passes -----------------------------------------------------------------------------

  // The forward of groups [first, last] for the current micro-batch; `entry` are the
  // dependencies of its first op (the received activations of the previous stage).
  void Forward(int32_t first, int32_t last, std::vector<int32_t> entry);

  // The backward of groups [last, first] (descending) for the current micro-batch.
  void Backward(int32_t last, int32_t first, std::vector<int32_t> entry);

  // ---- pipeline ---------------------------------------------------------------------------

  // Sends the boundary tensor of a unit to the neighbouring stage: the activations (forward)
  // or their gradient (backward) of the unit's tokens. Every TP rank sends its 1/t share
  // (Megatron-LM's scatter-gather across the TP group, or the SP shard). Returns the op.
  int32_t Send(int32_t g);

  // Emits every stage's units in its schedule order, in the order PipelineEmission lists them
  // (each after the send it receives: ops only depend on earlier ops), and each stage's end
  // after its last unit.
  void Pipeline();

  // ---- end of the step --------------------------------------------------------------------

  // The stage's end: the reductions its policy left for after the backward, the optimizer over
  // its shard, and what the policy does after it (the parameter all-gather of ZeRO-1/2).
  // `blocking_send`: the stage's last send, which the step waits for (Pipeline).
  void FinishStage(std::optional<int32_t> blocking_send = std::nullopt);

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
  // Per stage, its GPU's SMs (a mixed cluster's types differ); empty: the cluster's GPU's.
  std::vector<int64_t> stage_sms_;
  int64_t Sms() const { return stage_sms_.empty() ? s_.cluster.gpu.sms : stage_sms_[b_.stage()]; }
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

// Inline: it runs for every op lowered, and a copy of the Op returned from another file cost
// the default sweep 0.8 % more instructions.
inline Op Lowerer::FromLayerOp(const LayerOp& lo, OpPass pass, int32_t g) const {
  const std::less<const LayerOp*> before;
  const bool dense = !dense_ops_.empty() && !before(&lo, dense_ops_.data()) &&
                     before(&lo, dense_ops_.data() + dense_ops_.size());
  const std::vector<LayerOp>& from = dense ? dense_ops_ : layer_ops_;
  const auto i = static_cast<size_t>(&lo - from.data());
  SIM_CHECK(i < from.size(), "a layer op of neither of the lowering's layers");
  Op op = (dense ? dense_made_ : layer_made_)[static_cast<size_t>(pass)][i];
  op.group = g;
  if (!stage_sms_.empty() && lo.gemm_inner > 0 && Sms() != s_.cluster.gpu.sms) {
    // Made over the first type's SMs: this stage's GPU has its own.
    const bool backward = pass == OpPass::kBackward;
    op.waves = static_cast<float>(LinearWaveFactor(lo.gemm_rows, lo.gemm_inner, lo.gemm_cols,
                                                   lo.gemm_groups, backward, lo.frozen, Sms()));
  }
  return op;
}

}  // namespace sim::lowering_internal
