// DeepSpeed ZeRO (stage 0 is DDP), as its runtime does it (deepspeed/runtime/zero/
// stage_1_and_2.py, stage3.py, partitioned_param_coordinator.py, config.py; engine.py for stage
// 0):
//   0  gradients accumulate in a full buffer; one bucketed all-reduce per layer, issued as the
//      last micro-batch's backward finishes that layer, each bucket flattened into a copy
//      (allreduce_and_copy, buckets of MEMORY_OPT_ALLREDUCE_SIZE = 5e8 elements);
//   1  the same accumulation; a reduce-scatter per layer in the last micro-batch; after the
//      optimizer, an all-gather of the updated compute-dtype parameters (whole model, in
//      allgather_bucket_size chunks);
//   2  a reduce-scatter per layer in every micro-batch into the sharded accumulation buffer;
//      the post-optimizer all-gather;
//   3  DeepSpeed's parameter coordinator gathers, prefetches and releases by element counts
//      (sim/workload/zero3_coordinator.h); reduce-scatter per layer in every micro-batch.
// Buckets count elements (parallel.deepspeed). With contiguous_gradients (the default) each
// gradient is copied into a contiguous bucket of reduce_bucket_size 16-bit elements as its hook
// fires and the original freed; full buckets are reduced from it. ZeRO-1/2 allocate that bucket
// in backward() (two with overlap_comm, "double buffers to avoid data access conflict") and
// release it in the reduction epilogue (_release_ipg_buffers); ZeRO-3 allocates one at
// initialisation (__ipg_bucket_flat_buffer) and keeps it. Without overlap_comm — DeepSpeed's
// default below ZeRO-3 — reductions run on the compute stream.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sim/workload/placement.h"
#include "sim/workload/policy/framework_traits.h"
#include "sim/workload/policy/policy.h"

namespace sim {

namespace {

class DeepSpeedPolicy : public DataParallelPolicy {
 public:
  using DataParallelPolicy::DataParallelPolicy;
  std::unique_ptr<DataParallelPolicy> Clone() const override {
    return std::make_unique<DeepSpeedPolicy>(*this);
  }

  bool OverlapGradReduce() const override {
    return s_.parallel.overlap_grad_reduce.value_or(plan_.stage == 3);
  }
  Bytes Bucket() const override { return Bytes::Count(ReduceBytes() * BucketElements()); }

  GatherRule Gathers() const override {
    if (s_.parallel.prefetch) return DataParallelPolicy::Gathers();  // whole layers, as asked
    return {0, Zero3Limits{ds().stage3_prefetch_bucket_size, ds().stage3_max_live_parameters,
                           ds().stage3_max_reuse_distance}};
  }

  Bytes PersistentBuffers() const override {
    return plan_.stage == 3 && ds().contiguous_gradients ? ContiguousBucket() : Bytes();
  }
  Bytes BackwardBuffers() const override {
    // The pipeline engine runs the backward outside the ZeRO optimizer; its reduce_gradients
    // makes one bucket at the step instead (StepStaging).
    if (!ZeroOneOrTwoContiguous() || s_.parallel.pp > 1) return Bytes();
    return ContiguousBucket() * (OverlapGradReduce() ? 2 : 1);
  }
  bool BackwardBuffersPerStep() const override { return plan_.stage == 1; }
  bool GradientsIntoBucket() const override {
    return plan_.stage >= 2 && ds().contiguous_gradients;
  }

  // The step upcasts the reduced 16-bit gradients of the fp32 partition it updates
  // (deepspeed/runtime/zero/stage_1_and_2.py step(): the flattened averaged_gradients
  // .to(fp32) become single_partition_of_fp32_groups[i].grad; stage3.py
  // _prepare_fp32_grad_for_sub_group does it one sub-group, sub_group_size = 1e9 elements, at a
  // time).
  Bytes StepTransient(int64_t local) const override {
    return Bytes::Count(4 * (plan_.stage == 3 ? std::min(local, ds().sub_group_size) : local));
  }

  void AfterOptimizer(DpEnv& env, int32_t optimizer, StageParams p) override {
    // ZeRO-1/2: every rank gathers the updated parameters of the others' shards.
    if (plan_.stage == 1 || plan_.stage == 2) {
      GatherUpdatedParameters(env, optimizer, p, Bytes::Count(2 * ds().allgather_bucket_size));
    }
  }

 protected:
  // Stage 0 flattens each bucket into a copy; the ZeRO optimizer reduces from its contiguous
  // bucket (BackwardBuffers), or, under the pipeline engine, from one bucket made at the step.
  Bytes StepStaging(Bytes grads) const override {
    if (plan_.stage == 0 || !ds().contiguous_gradients) return std::min(grads, Bucket());
    return s_.parallel.pp > 1 ? std::min(grads, ContiguousBucket()) : Bytes();
  }
  Bytes LayerReduceBuffer(Bytes grads) const override {
    return ds().contiguous_gradients ? Bytes() : std::min(grads, Bucket());
  }

 private:
  const DeepSpeedSpec& ds() const { return s_.parallel.deepspeed; }
  // reduce_bucket_size, or parallel.bucket's bytes read as 16-bit elements.
  int64_t BucketElements() const {
    return s_.parallel.bucket ? s_.parallel.bucket->count() / 2 : ds().reduce_bucket_size;
  }
  // The contiguous bucket holds gradients in the parameters' 16-bit dtype.
  Bytes ContiguousBucket() const { return Bytes::Count(2 * BucketElements()); }
  bool ZeroOneOrTwoContiguous() const {
    return (plan_.stage == 1 || plan_.stage == 2) && ds().contiguous_gradients;
  }
};

}  // namespace

static ShardingPlan ShardingOf(const Scenario& s) {
  ShardingPlan plan;
  plan.stage = static_cast<int>(s.parallel.zero);
  // CP ranks hold the same parameters as their DP peers: states shard over DP × CP.
  plan.shard_degree = Placement(s).GradientGroup().size;
  return plan;
}

std::unique_ptr<DataParallelPolicy> MakeDeepSpeedPolicy(const Scenario& s) {
  return std::make_unique<DeepSpeedPolicy>(s, ShardingOf(s));
}

namespace {

class DeepSpeedTraitsImpl final : public FrameworkTraits {
 public:
  BytesPerParam StateBytes(int64_t m, int64_t v, Precision precision) const override {
    BytesPerParam b;
    b.weights = {"weights", precision == Precision::kFp8 ? 1 : 2, 3};
    b.gradients = {"gradients", 2, 2};
    b.master_weights = {"master_weights", 4, 1};
    b.optimizer_m = {"optimizer_m", m, 1};
    b.optimizer_v = {"optimizer_v", v, 1};
    return b;
  }
  bool HasStage(int) const override { return true; }
  // ZeRO-Offload keeps the fp32 gradient partition on the host; from ZeRO-2 on the GPU holds
  // no gradient partition (deepspeed/runtime/zero/stage_1_and_2.py, cpu_offload).
  bool OffloadKeepsHostGradients() const override { return true; }
  bool GathersInElements() const override { return true; }
  bool BucketInElements() const override { return true; }
  std::string StateLabel(absl::string_view kind, Precision precision) const override {
    if (kind == "weights") return precision == Precision::kFp8 ? "weights (fp8)" : "weights (bf16)";
    if (kind == "gradients") return "gradients (bf16)";
    return "master weights (fp32)";
  }
  std::vector<ShardingStage> ShardingStages() const override {
    std::vector<ShardingStage> stages;
    for (int zero = 0; zero <= 3; ++zero) {
      stages.push_back({zero, "deepspeed", {{"parallel.zero", absl::StrCat(zero)}}});
    }
    return stages;
  }
  void CheckLayout(const Scenario& s, std::vector<KeyProblem>& out) const override {
    const ParallelSpec& par = s.parallel;
    CheckZeroWithPipeline(s, out);
    if (par.prefetch && par.deepspeed.stage3_limits_set) {
      out.push_back({"parallel.prefetch",
                     "parallel.prefetch gathers whole layers ahead, in place of DeepSpeed's "
                     "element counts (parallel.deepspeed.stage3_*): set one or the other"});
    }
  }
  void CheckOffload(const Scenario& s, std::vector<KeyProblem>& out) const override {
    const OffloadSpec& o = s.parallel.offload;
    if (o.optimizer != OffloadTarget::kNone && s.parallel.zero == 0) {
      out.push_back({"parallel.offload.optimizer",
                     "DeepSpeed offloads the optimizer from ZeRO-1 on (offload_optimizer); set "
                     "parallel.zero >= 1"});
    }
    if (o.params != OffloadTarget::kNone && s.parallel.zero != 3) {
      out.push_back({"parallel.offload.params",
                     "DeepSpeed offloads parameters at ZeRO-3 only (offload_param); set "
                     "parallel.zero: 3"});
    }
  }
};

}  // namespace

const FrameworkTraits& DeepSpeedTraits() {
  static const DeepSpeedTraitsImpl traits;
  return traits;
}

}  // namespace sim
