#include "sim/spec/hardware.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sim {

double GpuSpec::SustainedClock() const {
  if (!tdp_watts || !power_limit_watts || *tdp_watts <= 0) return 1.0;
  return std::min(1.0, std::cbrt(*power_limit_watts / *tdp_watts));
}

std::optional<FlopRate> GpuSpec::Peak(Dtype d) const {
  switch (d) {
    case Dtype::kFp32:
      return fp32;
    case Dtype::kTf32:
      return tf32;
    case Dtype::kBf16:
      return bf16;
    case Dtype::kFp16:
      return fp16;
    case Dtype::kFp8:
      return fp8;
  }
  return std::nullopt;
}

const GpuCalibration::Library* GpuCalibration::FindLibrary(KernelLibrary l) const {
  for (const Library& lib : libraries) {
    if (lib.library == l) return &lib;
  }
  return nullptr;
}

GpuCalibration ForLibrary(const GpuCalibration& c, KernelLibrary library) {
  const GpuCalibration::Library* lib = c.FindLibrary(library);
  if (lib == nullptr) return c;
  GpuCalibration out = c;
  if (lib->gemm_efficiency) out.gemm_efficiency = *lib->gemm_efficiency;
  if (lib->fp8_gemm_efficiency) out.fp8_gemm_efficiency = *lib->fp8_gemm_efficiency;
  if (lib->attention_efficiency) out.attention_efficiency = *lib->attention_efficiency;
  if (lib->attention_kv_overhead) out.attention_kv_overhead = *lib->attention_kv_overhead;
  return out;
}

Bandwidth HostSpec::PcieLink() const {
  const double gts = pcie_gen <= 2 ? 2.5 * static_cast<double>(pcie_gen)
                                   : 8.0 * std::pow(2.0, static_cast<double>(pcie_gen - 3));
  const double coding = pcie_gen <= 2 ? 8.0 / 10.0 : 128.0 / 130.0;
  return Bandwidth::GBps(gts * coding * static_cast<double>(pcie_lanes) / 8.0);
}

std::string CalibrationBasis(const GpuSpec& g) {
  const GpuCalibration& c = g.calibration;
  const std::string sources = absl::StrJoin(c.fit_sources, ", ");
  if (c.fitted_gpu.empty()) return "datasheet only, uncalibrated (first estimates)";
  if (c.fitted_gpu == g.name) {
    return sources.empty() ? "fitted to its own measured step times"
                           : absl::StrCat("fitted to its own measured step times (", sources, ")");
  }
  return absl::StrCat("not fitted on this GPU: ", c.fitted_gpu, "'s fit",
                      sources.empty() ? "" : absl::StrCat(" (", sources, ")"));
}

}  // namespace sim
