#include "sim/cost/compute_cost.h"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "sim/base/check.h"
#include "sim/base/slot_mix.h"

namespace sim::cost {

FlopRate PeakRate(const GpuSpec& gpu, Precision precision) {
  if (precision == Precision::kFp8 && gpu.fp8) return *gpu.fp8;
  if (precision == Precision::kFp16 && gpu.fp16) return *gpu.fp16;
  if (gpu.bf16) return *gpu.bf16;
  SIM_CHECK(gpu.fp16.has_value(), "GPU without a 16-bit rate (the loader rejects these)");
  return *gpu.fp16;
}

double FlashImplFactor(FlashImpl impl, OpPass pass) {
  const bool backward = pass == OpPass::kBackward;
  switch (impl) {
    case FlashImpl::kFa2:
      return 1.0;
    case FlashImpl::kTriton:
      return backward ? 2.0 : 1.4;
    case FlashImpl::kFa3:
      return backward ? 1.0 / 1.625 : 1.0 / 1.75;
  }
  return 1.0;
}

Duration ComputeDuration(const Op& op, const GpuSpec& gpu, Precision precision, FlashImpl flash) {
  const GpuCalibration& c = gpu.calibration;
  // Only the layers' GEMMs run in fp8; attention, the LM head and elementwise kernels stay
  // 16-bit.
  const bool fp8_gemm = op.op_class == OpClass::kGemm && !op.keep_16bit;
  const Precision p = fp8_gemm                       ? precision
                      : precision == Precision::kFp8 ? Precision::kBf16
                                                     : precision;
  const double eff = fp8_gemm && p == Precision::kFp8 && gpu.fp8 ? c.Fp8GemmEfficiency()
                     : op.op_class == OpClass::kGemm             ? c.gemm_efficiency
                     : op.op_class == OpClass::kAttention        ? c.attention_efficiency
                                                                 : 1.0;
  Duration math;
  if (op.flops > Flops() && op.op_class != OpClass::kMemoryBound) {
    // Under a power limit the SMs run at GpuSpec::SustainedClock of their rated clocks.
    math = op.flops / (PeakRate(gpu, p) * (eff * gpu.SustainedClock()));
    if (op.op_class == OpClass::kGemm && op.waves > 1) {
      // Whole tiles in whole waves over the SMs (sim/workload/gemm_waves.h).
      math = Duration::FromSeconds(math.seconds() * static_cast<double>(op.waves));
    }
    if (op.op_class == OpClass::kGemm && op.inv_k > 0 && c.gemm_k_overhead > 0) {
      // Each output tile's fixed work, as gemm_k_overhead elements of K (hardware.h).
      math = Duration::FromSeconds(math.seconds() *
                                   (1.0 + c.gemm_k_overhead * static_cast<double>(op.inv_k)));
    }
    if (op.op_class == OpClass::kAttention && op.inv_k > 0 && c.attention_kv_overhead > 0) {
      // Each query block's fixed work, as attention_kv_overhead key/value positions (hardware.h).
      math = Duration::FromSeconds(math.seconds() *
                                   (1.0 + c.attention_kv_overhead * static_cast<double>(op.inv_k)));
    }
    if (op.op_class == OpClass::kAttention && flash != FlashImpl::kFa2) {
      math = Duration::FromSeconds(math.seconds() * FlashImplFactor(flash, op.pass));
    }
  }
  Duration memory;
  if (op.bytes_moved > Bytes()) {
    memory = op.bytes_moved / (gpu.hbm_bandwidth * c.memory_efficiency);
  }
  const Duration overlap_loss =
      Duration::FromSeconds(std::min(math, memory).seconds() * c.roofline_blend);
  // One launch overhead per op as fitted, plus one for each further kernel of an eager
  // decomposition (Op::kernels; a backward's count is twice its forward's).
  Duration t = std::max(math, memory) + overlap_loss + c.launch_overhead;
  if (op.kernels > 1) t += c.launch_overhead * (KernelsOf(op) - KernelsOf(op) / op.kernels);
  if (op.serial_bytes > Bytes()) {
    // FP8's cast kernels run before the GEMM, memory-bound (Op::serial_kernels of them; the
    // recipe's, sim/workload/layer_ops.cc Fp8Casts).
    t += op.serial_bytes / (gpu.hbm_bandwidth * c.memory_efficiency) +
         c.launch_overhead * op.serial_kernels;
  }
  return t;
}

int32_t KernelsOf(const Op& op) {
  const int32_t k = op.kind == OpKind::kCompute ? op.kernels : 1;
  if (op.kind == OpKind::kCompute && op.pass == OpPass::kBackward) return 2 * k;
  return k;
}

Duration HostDuration(const Op& op, const HostSpec& host, int64_t gpus_per_node) {
  const double share = 1.0 / static_cast<double>(std::max<int64_t>(gpus_per_node, 1));
  switch (op.op_class) {
    case OpClass::kPcieCopy:
      return op.bytes_moved /
             (host.PcieLink() * (kPcieEfficiency / static_cast<double>(host.gpus_per_pcie_link)));
    case OpClass::kHostCompute:
      return op.bytes_moved / (host.dram_bandwidth * (kHostMemoryEfficiency * share));
    case OpClass::kNvmeIo:
      return op.bytes_moved / (host.nvme_bandwidth * share);
    default:
      break;
  }
  return Duration::Zero();
}

Duration RooflineCostModel::Time(const Op& op) const {
  const OpCostKey key{std::bit_cast<uint64_t>(op.flops.count()),
                      op.bytes_moved.count(),
                      op.serial_bytes.count(),
                      std::bit_cast<uint32_t>(op.inv_k),
                      std::bit_cast<uint32_t>(op.waves),
                      op.kernels,
                      op.serial_kernels,
                      static_cast<uint8_t>(op.kind),
                      static_cast<uint8_t>(op.pass),
                      static_cast<uint8_t>(op.op_class),
                      op.keep_16bit};
  // The slot: a multiplicative mix of the fields that tell kernels apart.
  uint64_t mix = key.flops * kFibonacciMix;
  mix ^= static_cast<uint64_t>(key.bytes_moved) * 0xC2B2AE3D27D4EB4FULL;
  mix ^= (static_cast<uint64_t>(key.inv_k) << 32 | key.waves) * 0x165667B19E3779F9ULL;
  mix ^=
      static_cast<uint64_t>(key.serial_bytes) ^
      (static_cast<uint64_t>(key.pass) << 8 | key.op_class | static_cast<uint64_t>(key.kind) << 16);
  if (remembered_.empty()) remembered_.resize(kRemembered);
  Remembered& slot = remembered_[(mix >> 32) & (kRemembered - 1)];
  if (!slot.set || !(slot.key == key)) slot = {key, Price(op), true};
  return slot.time;
}

Duration SlowedCostModel::Time(const Op& op) const {
  const Duration t = base_.Time(op);
  if (op.stage < 0 || static_cast<size_t>(op.stage) >= slowdown_.size()) return t;
  double factor = 1;
  switch (op.op_class) {
    case OpClass::kGemm:
    case OpClass::kAttention:
      factor = slowdown_[op.stage].gemm;
      break;
    case OpClass::kMemoryBound:
      factor = slowdown_[op.stage].memory;
      break;
    default:
      break;  // the host's, PCIe's or the NVMe drive's time
  }
  // Exactly the base time at factor 1: a trial without spread is the plain replay.
  return factor == 1 ? t : Duration::FromSeconds(t.seconds() * factor);
}

Duration RooflineCostModel::Price(const Op& op) const {
  switch (op.op_class) {
    case OpClass::kPcieCopy:
    case OpClass::kHostCompute:
    case OpClass::kNvmeIo:
      SIM_CHECK(host_.has_value(), "an offload op on a node without a host entry");
      return HostDuration(op, *host_, gpus_per_node_);
    default:
      return ComputeDuration(op, gpu_, precision_, flash_);
  }
}

}  // namespace sim::cost
