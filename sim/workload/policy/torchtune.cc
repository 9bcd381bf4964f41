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

}  // namespace sim
