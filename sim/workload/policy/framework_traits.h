#pragma once
// What each framework is, beyond how it lowers a step (policy.h): the bytes its states take, the
// ZeRO stages it has, how its gradients live, what it offloads, how its ledger names its states,
// the sharding stages `compare` tries, and the layouts and keys it refuses. Code outside
// sim/workload/policy/ asks these questions of TraitsOf(framework) and never branches on the
// framework itself; each framework's answers live in its own policy file (ddp.cc, deepspeed.cc,
// fsdp.cc, megatron.cc, torchtune.cc).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "sim/spec/scenario.h"
#include "sim/workload/static_ledger.h"

namespace sim {

// A scenario key and why its value is refused; the loader locates the key in the file.
struct KeyProblem {
  std::string key_path;
  std::string message;
};

// Whether the scenario file writes `key_path` (a key or a section), whatever its value.
using KeyWritten = std::function<bool(absl::string_view key_path)>;

// One sharding stage `compare` tries: the ZeRO stage, its row label and the keys it sets.
struct ShardingStage {
  int zero = 0;
  std::string label;
  std::vector<std::pair<std::string, std::string>> overrides;
};

class FrameworkTraits {
 public:
  virtual ~FrameworkTraits() = default;

  // Bytes per parameter of each state kind, with the optimizer's moments of `m` and `v` bytes
  // in fp32 (StateBytesPerParam).
  virtual BytesPerParam StateBytes(int64_t m, int64_t v, Precision precision) const = 0;
  // The bytes per parameter a scenario's settings change from StateBytes (Megatron's gradient
  // buffer in parallel.reduce_dtype); none by default.
  virtual void AdjustStateBytes(const Scenario& /*s*/, BytesPerParam& /*b*/) const {}
  // Whether the framework has ZeRO stage `stage` as the sharding plan reads it (ShardingPlan).
  virtual bool HasStage(int stage) const = 0;
  // Whether the 16-bit weights persist at `stage` (FSDP's FULL_SHARD keeps only the fp32 shard).
  virtual bool KeepsWeightsAt(int /*stage*/) const { return true; }
  // `parallel.zero` read as another stage, and the note that says so (none: read as written).
  virtual std::optional<std::string> ZeroNote(int64_t /*zero*/) const { return std::nullopt; }

  // .grad as a view of the reduction buckets: one fp32 copy instead of two.
  virtual bool GradientsAreBucketViews(const ParallelSpec& /*p*/) const { return false; }
  // Gradients created by the backward and dropped after the step (zero_grad(set_to_none)).
  virtual bool LazyGradients(const ParallelSpec& /*p*/) const { return false; }
  // With lazy gradients, reduction buckets that stay beside them (half the gradient bytes).
  virtual bool BucketsBesideLazyGradients(const ParallelSpec& /*p*/) const { return false; }

  // Offloaded parameters take their gradients and optimizer states with them (CPUOffload).
  virtual bool OffloadsStatesWithParams() const { return false; }
  // An offloaded optimizer keeps the fp32 gradient partition on the host (ZeRO-Offload).
  virtual bool OffloadKeepsHostGradients() const { return false; }
  // The ZeRO stage and key of a full fine-tune that offloads (compare --finetune offload).
  virtual int OffloadStage() const { return 3; }
  virtual absl::string_view OffloadKey() const { return "parallel.offload.optimizer"; }

  // Whether ZeRO-3 gathers are given in elements (DeepSpeed's stage3_* limits), not layers.
  virtual bool GathersInElements() const { return false; }
  // Whether `parallel.bucket` is read in 16-bit elements (DeepSpeed's reduce_bucket_size).
  virtual bool BucketInElements() const { return false; }
  // The ZeRO-3 layers gathered ahead by default (none where gathers count elements).
  std::optional<int64_t> DefaultPrefetch() const {
    return GathersInElements() ? std::nullopt
                               : std::optional<int64_t>(ParallelSpec::kDefaultPrefetchLayers);
  }
  // Whether parameters are sharded and gathered per layer (ZeRO-3, FSDP full or hybrid shard).
  virtual bool FullyShards(const ParallelSpec& p) const { return p.zero == 3; }

  // The ledger's label of a state kind ("weights", "gradients", "master_weights"; the moments'
  // dtype from MomentDtype).
  virtual std::string StateLabel(absl::string_view kind, Precision precision) const = 0;
  virtual absl::string_view MomentDtype() const { return "fp32"; }

  // The library whose GEMM and attention kernels the framework's layers call
  // (training.kernel_library's default).
  virtual KernelLibrary DefaultKernelLibrary() const { return KernelLibrary::kPyTorch; }
  // Whether linear layers add their weight gradients straight into the parameters' main_grad
  // buffers (Megatron's gradient_accumulation_fusion, on by default), handing autograd a
  // placeholder (TeVersion::CachesDummyWeightGradients).
  virtual bool FusesWeightGradientAccumulation() const { return false; }
  // Whether expert parallelism dispatches tokens through Megatron-Core's all-to-all token
  // dispatcher, which sorts the received copies by local expert (ActivationShape::mcore_alltoall).
  virtual bool SortsTokensByLocalExpert() const { return false; }

  // The sharding stages `compare` tries, in order.
  virtual std::vector<ShardingStage> ShardingStages() const = 0;

  // The layouts the framework does not combine (ZeRO stages with pipelines, sharding with model
  // parallelism, fp8), and its offload rules, each with the key the user would change.
  virtual void CheckLayout(const Scenario& /*s*/, std::vector<KeyProblem>& /*out*/) const {}
  virtual void CheckOffload(const Scenario& /*s*/, std::vector<KeyProblem>& /*out*/) const {}
};

const FrameworkTraits& TraitsOf(Framework framework);

// The kernel library a scenario runs (training.kernel_library, else its framework's), and its GPU
// with that library's calibration terms in force (GpuCalibration::ForLibrary): what compute is
// priced with.
KernelLibrary KernelLibraryOf(const Scenario& s);
GpuSpec CalibratedGpu(const Scenario& s);

// Bytes per element of a dtype.
int64_t DtypeBytes(Dtype d);

// Keys that belong to one framework, set under another: each refused with the key's path.
std::vector<KeyProblem> ForeignKeyProblems(const Scenario& s, const KeyWritten& written);

// Rules two frameworks share: ZeRO-2/3 refused with a pipeline (DeepSpeed's rule, which ddp and
// torchtune keep), and FSDP's CPUOffload (fsdp.cc, also torchtune's).
void CheckZeroWithPipeline(const Scenario& s, std::vector<KeyProblem>& out);
void CheckCpuOffload(const Scenario& s, std::vector<KeyProblem>& out);

// Each framework's traits (defined in its policy file).
const FrameworkTraits& DdpTraits();
const FrameworkTraits& DeepSpeedTraits();
const FrameworkTraits& FsdpTraits();
const FrameworkTraits& MegatronTraits();
const FrameworkTraits& TorchtuneTraits();

}  // namespace sim
