#pragma once
// Time of a compute op on one GPU (SPEC §3.5): a roofline with calibrated efficiencies,
//   c = FLOPs / (peak × eff_class), m = bytes / (HBM bandwidth × eff_mem),
//   t = max(c, m) + blend × min(c, m) + launch overhead,
// where peak is the dense rate of the op's dtype (fp8 GEMMs when training in fp8, else the
// 16-bit rate) and eff_class is the GPU's GEMM or attention efficiency. Pure function.

#include "sim/base/units.h"
#include "sim/spec/hardware.h"
#include "sim/spec/scenario.h"
#include "sim/workload/program.h"

namespace sim::cost {

Duration ComputeDuration(const Op& op, const GpuSpec& gpu, Precision precision);

// The dense peak MFU/HFU are measured against: the 16-bit rate (bf16, or fp16 where the GPU
// has no bf16), or the fp8 rate when training in fp8.
FlopRate PeakRate(const GpuSpec& gpu, Precision precision);

}  // namespace sim::cost
