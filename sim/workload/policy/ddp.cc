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

}  // namespace sim
