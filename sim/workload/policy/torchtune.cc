// torchtune's recipes (recipes/full_finetune_single_device.py, full_finetune_distributed.py,
// lora_finetune_*.py at the 0.4-0.5 releases):
//   - the model is loaded and trained in bf16: parameters, gradients and the optimizer's moments
//     are bf16, with no fp32 master (sim/workload/static_ledger.cc);
//   - one GPU (parallel.zero 0) or FSDP2 fully_shard (parallel.zero 3): parameters gathered per
//     layer, gradients reduce-scattered per layer in one collective in bf16, states sharded,
//     with FSDP2's copies around each collective (fsdp.cc, fsdp_version 2);
//   - gradients are created by the backward and dropped after the step (zero_grad with
//     set_to_none), so they are not held through the forward;
//   - the loss is CEWithChunkedOutputLoss (num_output_chunks 8), compiled with the model when
//     `compile: True` (training.loss: chunked_compiled).

#include "sim/workload/placement.h"
#include "sim/workload/policy/framework_traits.h"
#include "sim/workload/policy/policy.h"

namespace sim {

namespace {

class TorchtunePolicy : public DataParallelPolicy {
 public:
  using DataParallelPolicy::DataParallelPolicy;
  std::unique_ptr<DataParallelPolicy> Clone() const override {
    return std::make_unique<TorchtunePolicy>(*this);
  }

  absl::Status Check() const override {
    if (s_.parallel.zero != 0 && s_.parallel.zero != 3) {
      return absl::FailedPreconditionError(
          "torchtune runs on one GPU (parallel.zero 0) or shards with FSDP2 (parallel.zero 3)");
    }
    return absl::OkStatus();
  }
  LossKernel DefaultLoss() const override { return LossKernel::kChunked; }

 protected:
  int32_t LayerReduceBuckets(Bytes) const override { return 1; }
  Bytes LayerReduceBuffer(Bytes grads) const override {
    return ReduceBytes() != 2 ? grads : Bytes();
  }
  // FSDP2's copies around its collectives (sim/workload/policy/fsdp.cc, fsdp_version 2).
  bool CopiesAroundCollectives() const override { return plan_.stage == 3; }
};

}  // namespace

std::unique_ptr<DataParallelPolicy> MakeTorchtunePolicy(const Scenario& s) {
  ShardingPlan plan;
  plan.stage = s.parallel.zero == 3 ? 3 : 0;
  plan.shard_degree = Placement(s).GradientGroup().size;
  return std::make_unique<TorchtunePolicy>(s, plan);
}

namespace {

class TorchtuneTraitsImpl final : public FrameworkTraits {
 public:
  // torchtune loads the model in bf16 and trains it there: no fp32 master, AdamW's moments in
  // the parameters' dtype (torch.optim keeps state like its parameter), all sharded by FSDP2
  // fully_shard (recipes/full_finetune_distributed.py); zero 0 = one GPU.
  BytesPerParam StateBytes(int64_t m, int64_t v, Precision precision) const override {
    BytesPerParam b;
    b.weights = {"weights", precision == Precision::kFp8 ? 1 : 2, 3};
    b.gradients = {"gradients", 2, 2};
    b.master_weights = {"master_weights", 0, 1};
    b.optimizer_m = {"optimizer_m", m == 4 ? 2 : m, 1};
    b.optimizer_v = {"optimizer_v", v == 4 ? 2 : v, 1};
    return b;
  }
  bool HasStage(int stage) const override { return stage == 0 || stage == 3; }
  // torchtune's optimizer step sets .grad to None: the backward creates it each step.
  bool LazyGradients(const ParallelSpec&) const override { return true; }
  bool OffloadsStatesWithParams() const override { return true; }
  absl::string_view OffloadKey() const override { return "parallel.offload.params"; }
  std::string StateLabel(absl::string_view kind, Precision) const override {
    if (kind == "weights") return "weights (bf16)";
    if (kind == "gradients") return "gradients (bf16, sharded)";
    return "master weights (none)";
  }
  absl::string_view MomentDtype() const override { return "bf16"; }
  std::vector<ShardingStage> ShardingStages() const override {
    return {{0, "torchtune", {{"parallel.zero", "0"}}},
            {3, "torchtune fsdp2", {{"parallel.zero", "3"}}}};
  }
  void CheckLayout(const Scenario& s, std::vector<KeyProblem>& out) const override {
    CheckZeroWithPipeline(s, out);
  }
  void CheckOffload(const Scenario& s, std::vector<KeyProblem>& out) const override {
    CheckCpuOffload(s, out);
  }
};

}  // namespace

const FrameworkTraits& TorchtuneTraits() {
  static const TorchtuneTraitsImpl traits;
  return traits;
}

}  // namespace sim
