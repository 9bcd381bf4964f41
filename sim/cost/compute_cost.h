#pragma once
// Time of a compute op on one GPU (docs/model.md "Time"): a roofline with calibrated efficiencies,
//   c = FLOPs / (peak × eff_class) × waves × (1 + k_overhead · mean(1/K)) for GEMMs (waves the
//       time of the kernels' output tiles in whole waves over the GPU's SMs relative to their
//       FLOPs, Op::waves, sim/workload/gemm_waves.h; K the reduction length of each kernel the
//       op runs, Op::inv_k; GpuCalibration::gemm_k_overhead),
//   c = FLOPs / (peak × eff_attention) × (1 + kv_overhead · 2 / s) × FlashImplFactor(impl, pass)
//       for causal flash attention over s tokens (Op::inv_k = 2 / s;
//       GpuCalibration::attention_kv_overhead),
//   m = bytes / (HBM bandwidth × eff_mem),
//   t = max(c, m) + blend × min(c, m) + launch overhead,
// where peak is the dense rate of the op's dtype (fp8 GEMMs when training in fp8, else the
// 16-bit rate) and eff_class is the GPU's GEMM or attention efficiency. Pure function.

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "sim/base/units.h"
#include "sim/spec/hardware.h"
#include "sim/spec/scenario.h"
#include "sim/workload/program.h"

namespace sim::cost {

// How much longer than FlashAttention-2 an implementation of flash attention takes for the same
// work on the same GPU, forward (and recompute) or backward; GpuCalibration::attention_efficiency
// is FlashAttention-2's. The ratios are the kernels' authors' own benchmarks, not fitted:
//   triton: FlashAttention-2 is "around 1.3-1.5x faster than FlashAttention in Triton in the
//     forward pass and around 2x faster in the backward pass" (Dao 2023, arXiv 2307.08691,
//     §4.1, A100): 1.4 and 2.0;
//   fa3: FlashAttention-3 in 16 bits is "1.5-2.0x" faster than FlashAttention-2 in the forward
//     pass and "1.5-1.75x" in the backward on H100 SXM5 (Shah et al. 2024, arXiv 2407.08608,
//     §1 and §4.1): 1 / 1.75 and 1 / 1.625, the ranges' middles.
double FlashImplFactor(FlashImpl impl, OpPass pass);

Duration ComputeDuration(const Op& op, const GpuSpec& gpu, Precision precision,
                         FlashImpl flash = FlashImpl::kFa2);

// Offload's ops (sim/spec/hardware.h HostSpec), each GPU's process getting its share of what the
// node's GPUs use at the same time (data-parallel peers offload together):
//   PCIe copy  bytes / (link rate × kPcieEfficiency / GPUs per host uplink);
//   host work  bytes / (DRAM bandwidth × kHostMemoryEfficiency / GPUs per node);
//   NVMe I/O   bytes / (NVMe bandwidth / GPUs per node).
// kPcieEfficiency 0.8: pinned cudaMemcpy reaches 24-26 GB/s of a Gen4 x16 link's 31.5 (CUDA
// samples' bandwidthTest on A100 systems). kHostMemoryEfficiency 0.5: a first estimate, not
// fitted (no offloaded step time in the published measurements stepsim is validated on):
// DeepSpeed's CPU Adam is a streaming AVX kernel bound by DRAM bandwidth; half the STREAM-peak is
// typical of multi-socket servers.
inline constexpr double kPcieEfficiency = 0.8;
inline constexpr double kHostMemoryEfficiency = 0.5;
Duration HostDuration(const Op& op, const HostSpec& host, int64_t gpus_per_node);

// What the replay asks of compute: an op's time alone on its GPU, and the factor by which
// compute beside a running collective is slower (communication kernels take SMs and HBM
// bandwidth from it).
class ComputeCostModel {
 public:
  virtual ~ComputeCostModel() = default;
  virtual Duration Time(const Op& op) const = 0;
  virtual double OverlapSlowdown() const = 0;
  // The same for the GPUs of pipeline stage `stage` (a mixed cluster's differ).
  virtual double OverlapSlowdownOf(int32_t /*stage*/) const { return OverlapSlowdown(); }
  // Host time to issue the op's kernels (0 = issued at once).
  virtual Duration Dispatch(const Op&) const { return Duration::Zero(); }
  // False only when Dispatch is zero for every op: the replay then skips asking op by op (no
  // shipped GPU has a calibrated dispatch_overhead).
  virtual bool Dispatches() const { return true; }
};

// The kernels an op launches: Op::kernels for a forward or recompute op (one unless an eager
// decomposition, training.kernels), twice that for a backward one (the input and weight
// gradients of a GEMM, the two passes of a norm or attention backward), one per collective or
// copy.
int32_t KernelsOf(const Op& op);

// The roofline above with the GPU's calibration.
class RooflineCostModel final : public ComputeCostModel {
 public:
  RooflineCostModel(GpuSpec gpu, Precision precision, std::optional<HostSpec> host = std::nullopt,
                    int64_t gpus_per_node = 1, FlashImpl flash = FlashImpl::kFa2)
      : gpu_(std::move(gpu)),
        precision_(precision),
        host_(std::move(host)),
        gpus_per_node_(gpus_per_node),
        flash_(flash) {}
  // Remembers recent prices by the op fields they read (OpCostKey), in a direct-mapped table: a
  // step runs the same few dozen kernels once per layer and micro-batch (89 % of a sweep's
  // calls hit, each cheaper than pricing anew). Not thread-safe: one model per thread.
  Duration Time(const Op& op) const override;
  double OverlapSlowdown() const override { return gpu_.calibration.overlap_slowdown; }
  Duration Dispatch(const Op& op) const override {
    return gpu_.calibration.dispatch_overhead * KernelsOf(op);
  }
  bool Dispatches() const override { return gpu_.calibration.dispatch_overhead > Duration::Zero(); }

 private:
  // Every field of an op that ComputeDuration and HostDuration read, floating-point ones by
  // their bits (so that equal keys are the same inputs, and give the same price).
  struct OpCostKey {
    uint64_t flops = 0;
    int64_t bytes_moved = 0, serial_bytes = 0;
    uint32_t inv_k = 0, waves = 0;
    int16_t kernels = 0, serial_kernels = 0;
    uint8_t kind = 0, pass = 0, op_class = 0;
    bool keep_16bit = false;
    bool operator==(const OpCostKey&) const = default;
  };
  struct Remembered {
    OpCostKey key;
    Duration time;
    bool set = false;
  };
  static constexpr size_t kRemembered = 256;  // a power of two
  Duration Price(const Op& op) const;

  GpuSpec gpu_;
  Precision precision_;
  std::optional<HostSpec> host_;
  int64_t gpus_per_node_;
  FlashImpl flash_;
  mutable std::vector<Remembered> remembered_;  // kRemembered slots once the first op is priced
};

// How much longer a pipeline stage's kernels take than at the calibrated speed: its GEMM and
// attention kernels `gemm` times, its memory-bound ones `memory` times (sim/replay/variability.h:
// the slowest GPU of the stage's lockstep group). Host work, PCIe copies and NVMe reads are
// not the GPU's and keep their time.
struct StageSlowdown {
  double gemm = 1, memory = 1;
  auto operator<=>(const StageSlowdown&) const = default;
};

// A compute model whose ops of stage s take `slowdown[s]` times `base`'s (ops of stages past
// the list: base's time).
class SlowedCostModel final : public ComputeCostModel {
 public:
  SlowedCostModel(const ComputeCostModel& base, std::vector<StageSlowdown> slowdown)
      : base_(base), slowdown_(std::move(slowdown)) {}
  Duration Time(const Op& op) const override;
  double OverlapSlowdown() const override { return base_.OverlapSlowdown(); }
  double OverlapSlowdownOf(int32_t stage) const override { return base_.OverlapSlowdownOf(stage); }
  Duration Dispatch(const Op& op) const override { return base_.Dispatch(op); }
  bool Dispatches() const override { return base_.Dispatches(); }

 private:
  const ComputeCostModel& base_;
  std::vector<StageSlowdown> slowdown_;
};

// A mixed cluster's compute model: the ops of stage s priced by the model of its node type,
// `models[group_of_stage[s]]` (Scenario::StageGroups), with its overlap slowdown and dispatch.
class StagedCostModel final : public ComputeCostModel {
 public:
  StagedCostModel(std::vector<RooflineCostModel> models, std::vector<int32_t> group_of_stage)
      : models_(std::move(models)), group_(std::move(group_of_stage)) {}
  Duration Time(const Op& op) const override { return Of(op).Time(op); }
  double OverlapSlowdown() const override { return models_.front().OverlapSlowdown(); }
  double OverlapSlowdownOf(int32_t stage) const override {
    return models_[static_cast<size_t>(stage) < group_.size() ? group_[stage] : 0]
        .OverlapSlowdown();
  }
  Duration Dispatch(const Op& op) const override { return Of(op).Dispatch(op); }
  bool Dispatches() const override {
    for (const RooflineCostModel& m : models_) {
      if (m.Dispatches()) return true;
    }
    return false;
  }

 private:
  const RooflineCostModel& Of(const Op& op) const {
    const bool known = op.stage >= 0 && static_cast<size_t>(op.stage) < group_.size();
    return models_[known ? group_[op.stage] : 0];
  }
  std::vector<RooflineCostModel> models_;
  std::vector<int32_t> group_;
};

// The dense peak MFU/HFU are measured against: the 16-bit rate (bf16, or fp16 where the GPU
// has no bf16), or the fp8 rate when training in fp8.
FlopRate PeakRate(const GpuSpec& gpu, Precision precision);

}  // namespace sim::cost
