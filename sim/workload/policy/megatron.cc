// Megatron-LM / Megatron-Core (megatron/core/distributed/distributed_data_parallel.py,
// param_and_grad_buffer.py, optimizer/distrib_optimizer.py):
//   - gradients accumulate in a persistent main_grad buffer and are reduced once per step in
//     its dtype (fp32 for bf16 training, which arguments.py forces; the fp16 parameters' dtype
//     for fp16 training, where --accumulate-allreduce-grads-in-fp32 defaults off): all-reduce, or
//     reduce-scatter with the distributed optimizer (parallel.zero >= 1; Megatron has no ZeRO-2/3,
//     so 2 and 3 are read as 1);
//   - without --overlap-grad-reduce the whole buffer is reduced in one collective after the
//     backward; with it, per layer as the last micro-batch's backward finishes it, in buckets of
//     max(40M, 1M x DP) elements (megatron/training/training.py's ddp_bucket_size default);
//     the buffer is reduced in place (no staging copy);
//   - the distributed optimizer all-gathers the updated bf16 parameters after the optimizer, or
//     with --overlap-param-gather beside the next forward, each layer's forward waiting for its
//     own;
//   - the backward's TP all-reduce / all-gather run asynchronously beside the weight-gradient
//     GEMM (LinearWithGradAccumulationAndAsyncCommunication, on by default since 2021).

#include "absl/strings/str_format.h"
#include "sim/workload/placement.h"
#include "sim/workload/policy/framework_traits.h"
#include "sim/workload/policy/policy.h"

namespace sim {

namespace {

class MegatronPolicy : public DataParallelPolicy {
 public:
  using DataParallelPolicy::DataParallelPolicy;
  std::unique_ptr<DataParallelPolicy> Clone() const override {
    return std::make_unique<MegatronPolicy>(*this);
  }

  // main_grad's dtype (sim/workload/static_ledger.h): fp32, or fp16 when training in fp16.
  int64_t ReduceBytes() const override {
    if (s_.parallel.reduce_dtype) return DataParallelPolicy::ReduceBytes();
    return s_.training.precision == Precision::kFp16 ? 2 : 4;
  }
  bool OverlapGradReduce() const override {
    return s_.parallel.overlap_grad_reduce.value_or(false);
  }
  Bytes Bucket() const override {
    if (s_.parallel.bucket) return *s_.parallel.bucket;
    if (!OverlapGradReduce()) return Bytes::Count(INT64_C(1) << 60);  // the whole buffer
    return Bytes::Count(std::max<int64_t>(40'000'000, 1'000'000 * s_.dp()) * ReduceBytes());
  }
  bool AsyncTpBackward() const override { return true; }
  // Megatron-Core's CPU optimizer offload copies main_grad at the step (FinishStage).
  bool GradientsToHost() const override { return false; }
  // Megatron-LM's vocab-parallel cross-entropy (fp32, in place) unless
  // --cross-entropy-fusion-impl te selects Transformer Engine's (training.loss: fused).
  LossKernel DefaultLoss() const override { return LossKernel::kVocabParallel; }

  void BeforeForward(DpEnv& env, int32_t g, std::vector<int32_t>& deps) override {
    if (!DistributedOptimizer() || !s_.parallel.overlap_param_gather || env.b.micro_batch() != 0) {
      return;
    }
    for (const Part& part : Parts(env, env.group_params[g], env.group_experts[g], env.grad_group)) {
      if (part.group.size <= 1) continue;
      const Bytes params = Bytes::Count(2 * part.params);
      Op ag =
          env.b.Collective("param_all_gather", CollectiveKind::kAllGather, params, part.group, g);
      env.b.Spec(ag).buckets = Buckets(params);
      deps.push_back(env.b.Add(ag, {}, {}));
    }
  }

  void BeforeOptimizer(DpEnv& env) override {
    const std::vector<int32_t> deferred = deferred_[env.b.stage()];
    if (!deferred.empty()) StepReduce(env, deferred, std::nullopt);  // the whole main_grad
  }

  // Megatron's step reads and writes more than the update of the shard: its fused Adam reads
  // the main_grad in its dtype g (fp32 for bf16; StepTrafficPerParam counts 2 bytes), the
  // gradient clipping's norm reads the shard's gradients once more (clip_grad 1.0 by default:
  // MixedPrecisionOptimizer.step -> get_grad_norm -> multi_tensor_l2norm,
  // megatron/core/optimizer/clip_grads.py; the rescale that follows runs only when the norm
  // exceeds the limit, left out), and each step zeroes the whole gradient buffer of the GPU's
  // parameters, not only its shard (train_step -> zero_grad_buffer -> grad_data.zero_(),
  // megatron/core/distributed/param_and_grad_buffer.py).
  Bytes StepExtraTraffic(StageParams total, int64_t local) const override {
    const int64_t g = ReduceBytes();
    return Bytes::Count((g - 2) * local + g * local + g * total.total);
  }

  void AfterOptimizer(DpEnv& env, int32_t optimizer, StageParams p) override {
    if (DistributedOptimizer() && !s_.parallel.overlap_param_gather) {
      GatherUpdatedParameters(env, optimizer, p);
    }
  }

 protected:
  Bytes StepStaging(Bytes) const override { return Bytes(); }

 private:
  bool DistributedOptimizer() const { return plan_.stage >= 1; }
};

}  // namespace

static ShardingPlan ShardingOf(const Scenario& s) {
  ShardingPlan plan;
  // The distributed optimizer is Megatron's only sharding (ZeRO-1-like), over DP × CP.
  plan.stage = s.parallel.zero >= 1 ? 1 : 0;
  plan.shard_degree = Placement(s).GradientGroup().size;
  return plan;
}

std::unique_ptr<DataParallelPolicy> MakeMegatronPolicy(const Scenario& s) {
  return std::make_unique<MegatronPolicy>(s, ShardingOf(s));
}

namespace {

class MegatronTraitsImpl final : public FrameworkTraits {
 public:
  // main_grad is fp32 for bf16 (arguments.py forces --accumulate-allreduce-grads-in-fp32 for
  // bf16: "bfloat16 requires gradient accumulation and all-reduce to be done in fp32"); in fp16
  // that flag defaults off and main_grad is the parameters' fp16.
  BytesPerParam StateBytes(int64_t m, int64_t v, Precision precision) const override {
    BytesPerParam b;
    b.weights = {"weights", 2, std::nullopt};
    b.gradients = {"gradients", precision == Precision::kFp16 ? 2 : 4, std::nullopt};
    b.master_weights = {"master_weights", 4, 1};
    b.optimizer_m = {"optimizer_m", m, 1};
    b.optimizer_v = {"optimizer_v", v, 1};
    return b;
  }
  // Megatron-Core keeps gradients in one buffer per model chunk, of grad_reduce_in_fp32 ? fp32 :
  // the parameters' dtype, and reduces them in place (distributed/param_and_grad_buffer.py);
  // NeMo's distributed_fused_adam buckets them in its grad_sync_dtype. parallel.reduce_dtype
  // names that dtype, for the buffer as for the reduction.
  // parallel.store_param_remainders: the master weights' low 16 bits only, their upper 16 being
  // the bf16 weights themselves.
  void AdjustStateBytes(const Scenario& s, BytesPerParam& b) const override {
    if (s.parallel.reduce_dtype) b.gradients.bytes_per_param = DtypeBytes(*s.parallel.reduce_dtype);
    if (s.parallel.store_param_remainders) b.master_weights.bytes_per_param = 2;
  }
  bool HasStage(int stage) const override { return stage <= 1; }
  // Megatron-Core builds its layers from Transformer Engine's modules when TE is installed
  // (megatron/core/models/gpt/gpt_layer_specs.py get_gpt_layer_with_transformer_engine_spec,
  // the spec pretrain_gpt.py uses with --transformer-impl transformer_engine, the default), and
  // NeMo's GPT models are Megatron-Core's.
  KernelLibrary DefaultKernelLibrary() const override { return KernelLibrary::kTransformerEngine; }
  // --gradient-accumulation-fusion defaults to on (megatron/training/arguments.py;
  // --no-gradient-accumulation-fusion turns it off).
  bool FusesWeightGradientAccumulation() const override { return true; }
  // MoEAlltoAllTokenDispatcher (megatron/core/transformer/moe/token_dispatcher.py), the
  // dispatcher of the alltoall --moe-token-dispatcher-type the MoE recipes use.
  bool SortsTokensByLocalExpert() const override { return true; }
  std::optional<std::string> ZeroNote(int64_t zero) const override {
    if (zero < 2) return std::nullopt;
    return absl::StrFormat(
        "megatron has no ZeRO-%d; parallel.zero %d is read as its distributed optimizer "
        "(ZeRO-1-like)",
        zero, zero);
  }
  int OffloadStage() const override { return 1; }
  void CheckLayout(const Scenario& s, std::vector<KeyProblem>& out) const override {
    const Precision p = s.training.precision;
    if (s.parallel.store_param_remainders && p != Precision::kBf16 && p != Precision::kFp8) {
      out.push_back({"parallel.store_param_remainders",
                     absl::StrCat("needs bf16 weights (the remainders complete them to fp32); "
                                  "precision is ",
                                  Name(p))});
    }
  }
  std::string StateLabel(absl::string_view kind, Precision) const override {
    if (kind == "weights") return "weights (bf16)";
    if (kind == "gradients") return "gradients (fp32 main_grad)";
    return "master weights (fp32)";
  }
  // Megatron-LM shards only the optimizer (its distributed optimizer, ZeRO-1-like).
  std::vector<ShardingStage> ShardingStages() const override {
    return {{0, "megatron", {{"parallel.zero", "0"}}},
            {1, "megatron distributed optimizer", {{"parallel.zero", "1"}}}};
  }
  void CheckOffload(const Scenario& s, std::vector<KeyProblem>& out) const override {
    const OffloadSpec& o = s.parallel.offload;
    if (o.params != OffloadTarget::kNone) {
      out.push_back({"parallel.offload.params",
                     "Megatron-LM offloads the optimizer (--optimizer-cpu-offload), not "
                     "parameters"});
    }
    if (o.optimizer == OffloadTarget::kNvme) {
      out.push_back(
          {"parallel.offload.optimizer", "Megatron-LM offloads the optimizer to CPU memory only"});
    }
  }
};

}  // namespace

const FrameworkTraits& MegatronTraits() {
  static const MegatronTraitsImpl traits;
  return traits;
}

}  // namespace sim
