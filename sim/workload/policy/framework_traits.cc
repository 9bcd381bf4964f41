#include "sim/workload/policy/framework_traits.h"

#include "absl/strings/str_cat.h"

namespace sim {

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

const FrameworkTraits& TraitsOf(Framework framework) {
  switch (framework) {
    case Framework::kDdp:
      return DdpTraits();
    case Framework::kDeepSpeed:
      return DeepSpeedTraits();
    case Framework::kFsdp:
      return FsdpTraits();
    case Framework::kMegatron:
      return MegatronTraits();
    case Framework::kTorchtune:
      return TorchtuneTraits();
  }
  return DeepSpeedTraits();
}

KernelLibrary KernelLibraryOf(const Scenario& s) {
  return s.training.kernel_library.value_or(TraitsOf(s.parallel.framework).DefaultKernelLibrary());
}

GpuSpec CalibratedGpu(const Scenario& s) {
  GpuSpec g = s.cluster.gpu;
  g.calibration = ForLibrary(g.calibration, KernelLibraryOf(s));
  return g;
}

std::vector<KeyProblem> ForeignKeyProblems(const Scenario& s, const KeyWritten& written) {
  const ParallelSpec& par = s.parallel;
  const Framework fw = par.framework;
  std::vector<KeyProblem> out;
  if (fw != Framework::kMegatron && par.overlap_param_gather) {
    out.push_back({"parallel.overlap_param_gather",
                   "overlap_param_gather belongs to framework megatron (its distributed "
                   "optimizer)"});
  }
  if (written("parallel.deepspeed") && fw != Framework::kDeepSpeed) {
    out.push_back(
        {"parallel.deepspeed",
         absl::StrCat("parallel.deepspeed holds DeepSpeed's settings; framework is ", Name(fw))});
  }
  if (par.gradient_as_bucket_view && fw != Framework::kDdp) {
    out.push_back({"parallel.gradient_as_bucket_view",
                   "gradient_as_bucket_view belongs to framework ddp (PyTorch "
                   "DistributedDataParallel)"});
  }
  if (par.store_param_remainders && fw != Framework::kMegatron) {
    out.push_back({"parallel.store_param_remainders",
                   "store_param_remainders belongs to framework megatron (NeMo's "
                   "distributed_fused_adam, Megatron-Core's precision-aware optimizer)"});
  }
  if (s.training.fp8_params && (s.training.precision != Precision::kFp8 ||
                                KernelLibraryOf(s) != KernelLibrary::kTransformerEngine)) {
    out.push_back({"training.fp8_params",
                   absl::StrCat("fp8_params holds Transformer Engine's fp8 weights: it needs "
                                "precision fp8 and kernel_library transformer_engine (precision ",
                                Name(s.training.precision), ", kernel library ",
                                Name(KernelLibraryOf(s)), ")")});
  }
  if (par.fsdp_version != 1 && fw != Framework::kFsdp) {
    out.push_back({"parallel.fsdp_version", "fsdp_version belongs to framework fsdp"});
  }
  if (par.sharding && fw != Framework::kFsdp) {
    out.push_back({"parallel.sharding", "sharding strategies belong to framework fsdp"});
  }
  return out;
}

void CheckZeroWithPipeline(const Scenario& s, std::vector<KeyProblem>& out) {
  if (s.parallel.pp > 1 && s.parallel.zero >= 2) {
    // DeepSpeed: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism".
    out.push_back(
        {"parallel.zero", absl::StrCat("zero ", s.parallel.zero, " with pp ", s.parallel.pp,
                                       ": ZeRO-2/3 are not combined with pipeline parallelism "
                                       "(DeepSpeed refuses it); use zero 0 or 1")});
  }
}

}  // namespace sim
