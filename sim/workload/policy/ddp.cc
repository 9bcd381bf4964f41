// PyTorch DistributedDataParallel with torch.cuda.amp (torch/nn/parallel/distributed.py,
// torch/csrc/distributed/c10d/reducer.cpp; torch/amp/autocast_mode.py):
//   - parameters, gradients and optimizer states stay fp32 (sim/workload/static_ledger.cc: 4 B
//     weights, 4 B .grad plus 4 B of bucket tensors — 4 B in all with
//     parallel.gradient_as_bucket_view —, Adam's 8 B);
//   - gradients accumulate locally under no_sync; in the last micro-batch each bucket is
//     all-reduced in fp32 as soon as its layers' gradients are ready, overlapping the backward
//     (bucket_cap_mb = 25 MiB), out of the persistent bucket tensors (no staging copy);
//   - torch.optim.AdamW with its defaults runs the foreach update on CUDA tensors
//     (torch/optim/optimizer.py _default_to_fused_or_foreach), one fp32 parameter-sized
//     temporary at the step (training.optimizer_impl);
//   - autocast casts each weight to 16 bits when a matmul uses it; the copy is saved for the
//     matmul's backward, so a layer's copies live from its forward to its backward (only while a
//     checkpointed layer runs: its forward, its recompute and its backward).

#include "sim/workload/policy/framework_traits.h"
#include "sim/workload/policy/policy.h"

namespace sim {

namespace {

class DdpPolicy : public DataParallelPolicy {
 public:
  using DataParallelPolicy::DataParallelPolicy;
  std::unique_ptr<DataParallelPolicy> Clone() const override {
    return std::make_unique<DdpPolicy>(*this);
  }

  int64_t ReduceBytes() const override {
    return s_.parallel.reduce_dtype ? DataParallelPolicy::ReduceBytes() : 4;
  }
  Bytes Bucket() const override { return s_.parallel.bucket.value_or(Bytes::MiB(25)); }
  Bytes StepStaging(Bytes) const override { return Bytes(); }
  Bytes CastCopies(int64_t params) const override { return Bytes::Count(2 * params); }
  OptimizerImpl DefaultOptimizerImpl() const override { return OptimizerImpl::kForeach; }
};

}  // namespace

std::unique_ptr<DataParallelPolicy> MakeDdpPolicy(const Scenario& s) {
  ShardingPlan plan;
  plan.stage = 0;
  plan.shard_degree = 1;
  return std::make_unique<DdpPolicy>(s, plan);
}

namespace {

class DdpTraitsImpl final : public FrameworkTraits {
 public:
  // torch.cuda.amp: the parameters are fp32 (the optimizer's too: no master copy), their fp32
  // .grad, and DDP's flat bucket tensors holding a second copy of every gradient
  // (gradient_as_bucket_view=False, the default: torch/csrc/distributed/c10d/reducer.cpp).
  BytesPerParam StateBytes(int64_t m, int64_t v, Precision) const override {
    BytesPerParam b;
    b.weights = {"weights", 4, std::nullopt};
    b.gradients = {"gradients", 8, std::nullopt};
    b.master_weights = {"master_weights", 0, std::nullopt};
    b.optimizer_m = {"optimizer_m", m, std::nullopt};
    b.optimizer_v = {"optimizer_v", v, std::nullopt};
    return b;
  }
  bool HasStage(int stage) const override { return stage == 0; }
  bool GradientsAreBucketViews(const ParallelSpec& p) const override {
    return p.gradient_as_bucket_view;
  }
  // PyTorch DDP since torch 2.0 (zero_grad's set_to_none=True default): .grad is created by
  // the backward and dropped after the step; DDP's fp32 buckets stay (reducer.cpp allocates
  // them once). With gradient_as_bucket_view .grad is a view of them, held throughout.
  bool LazyGradients(const ParallelSpec& p) const override { return !p.gradient_as_bucket_view; }
  bool BucketsBesideLazyGradients(const ParallelSpec& p) const override { return LazyGradients(p); }
  std::string StateLabel(absl::string_view kind, Precision) const override {
    if (kind == "weights") return "weights (fp32, AMP)";
    if (kind == "gradients") return "gradients (fp32 + DDP bucket copy)";
    return "master weights (fp32)";
  }
  std::vector<ShardingStage> ShardingStages() const override {
    return {{0, "ddp", {{"parallel.zero", "0"}}}};
  }
  void CheckLayout(const Scenario& s, std::vector<KeyProblem>& out) const override {
    CheckZeroWithPipeline(s, out);
    const ParallelSpec& par = s.parallel;
    if (par.zero != 0 || par.tp > 1 || par.pp > 1 || par.cp > 1 ||
        s.training.precision == Precision::kFp8) {
      out.push_back({"parallel.framework",
                     "ddp is PyTorch DistributedDataParallel with AMP: data parallelism only "
                     "(zero 0, tp, pp and cp 1) in bf16 or fp16; use deepspeed, fsdp or megatron "
                     "for sharding, model parallelism or fp8"});
    }
  }
  void CheckOffload(const Scenario&, std::vector<KeyProblem>& out) const override {
    out.push_back({"parallel.offload",
                   "ddp does not offload; use deepspeed (ZeRO-Offload), fsdp or torchtune "
                   "(CPUOffload) or megatron (optimizer)"});
  }
};

}  // namespace

const FrameworkTraits& DdpTraits() {
  static const DdpTraitsImpl traits;
  return traits;
}

}  // namespace sim
