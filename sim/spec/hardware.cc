#include "sim/spec/hardware.h"

namespace sim {

std::optional<FlopRate> GpuSpec::Peak(Dtype d) const {
  switch (d) {
    case Dtype::kFp32: return fp32;
    case Dtype::kTf32: return tf32;
    case Dtype::kBf16: return bf16;
    case Dtype::kFp16: return fp16;
    case Dtype::kFp8: return fp8;
  }
  return std::nullopt;
}

}  // namespace sim
