#pragma once
// Time of a compute op on one GPU (SPEC §3.5): a roofline with calibrated efficiencies,
//   c = FLOPs / (peak × eff_class), m = bytes / (HBM bandwidth × eff_mem),
//   t = max(c, m) + blend × min(c, m) + launch overhead,
// where peak is the dense rate of the op's dtype (fp8 GEMMs when training in fp8, else the
// 16-bit rate) and eff_class is the GPU's GEMM or attention efficiency. Pure function.

#include <utility>

#include "sim/base/units.h"
#include "sim/spec/hardware.h"
#include "sim/spec/scenario.h"
#include "sim/workload/program.h"

namespace sim::cost {

Duration ComputeDuration(const Op& op, const GpuSpec& gpu, Precision precision);

// What the replay asks of compute: an op's time alone on its GPU, and the factor by which
// compute beside a running collective is slower (communication kernels take SMs and HBM
// bandwidth from it).
class ComputeCostModel {
 public:
  virtual ~ComputeCostModel() = default;
  virtual Duration Time(const Op& op) const = 0;
  virtual double OverlapSlowdown() const = 0;
};

// The roofline above with the GPU's calibration.
class RooflineCostModel final : public ComputeCostModel {
 public:
  RooflineCostModel(GpuSpec gpu, Precision precision)
      : gpu_(std::move(gpu)), precision_(precision) {}
  Duration Time(const Op& op) const override { return ComputeDuration(op, gpu_, precision_); }
  double OverlapSlowdown() const override { return gpu_.calibration.overlap_slowdown; }

 private:
  GpuSpec gpu_;
  Precision precision_;
};

// The dense peak MFU/HFU are measured against: the 16-bit rate (bf16, or fp16 where the GPU
// has no bf16), or the fp8 rate when training in fp8.
FlopRate PeakRate(const GpuSpec& gpu, Precision precision);

}  // namespace sim::cost
