// Ops made from the layer's op list: compute, host copies, the final norm, checkpointing.

#include <cmath>

#include "sim/workload/lowerer/lowerer.h"

namespace sim::lowering_internal {

Op Lowerer::Compute(absl::string_view name, OpPass pass, OpClass cls, Flops flops, Bytes moved,
                    std::optional<int32_t> g) const {
  Op op;
  op.name = name;
  op.pass = pass;
  op.op_class = cls;
  op.flops = flops;
  op.bytes_moved = moved;
  op.group = g;
  return op;
}

std::array<std::vector<Op>, 3> Lowerer::MakeLayerOps(const std::vector<LayerOp>& ops) const {
  std::array<std::vector<Op>, 3> made;
  for (OpPass pass : {OpPass::kForward, OpPass::kRecompute, OpPass::kBackward}) {
    for (const LayerOp& lo : ops) made[static_cast<size_t>(pass)].push_back(MakeLayerOp(lo, pass));
  }
  return made;
}

Op Lowerer::MakeLayerOp(const LayerOp& lo, OpPass pass) const {
  // Backward: a GEMM's input and weight gradients are two GEMMs of the forward's size (one,
  // the input gradient, when its weights are frozen); other kernels read and write about
  // twice the forward traffic; flash attention's backward does kFlashBackwardFactor times its
  // forward. LoRA adapters add their own forward, and twice it backward.
  const bool backward = pass == OpPass::kBackward;
  const bool flash_backward = backward && lo.op_class == OpClass::kAttention &&
                              s_.training.attention == AttentionKernel::kFlash;
  const double k = flash_backward ? kFlashBackwardFactor : backward ? 2.0 : 1.0;
  const double kf = backward && lo.frozen ? 1.0 : k;
  Op op = Compute(lo.name, pass, lo.op_class, lo.flops * kf + lo.adapter_flops * (backward ? 2 : 1),
                  backward && lo.backward_bytes ? *lo.backward_bytes : lo.bytes_moved * kf,
                  std::nullopt);
  op.keep_16bit = lo.keep_16bit;
  op.kernels = lo.kernels;
  if (lo.gemm_inner > 0) {
    op.inv_k = GemmInvK(lo.gemm_rows, lo.gemm_inner, lo.gemm_cols, pass, backward && lo.frozen);
    op.waves = static_cast<float>(LinearWaveFactor(lo.gemm_rows, lo.gemm_inner, lo.gemm_cols,
                                                   lo.gemm_groups, backward, lo.frozen,
                                                   s_.cluster.gpu.sms));
  }
  if (lo.op_class == OpClass::kAttention && s_.training.attention == AttentionKernel::kFlash) {
    // Causal: a query block visits s / 2 key/value positions on average, whole or under
    // context parallelism (its load-balanced chunks see the gathered sequence's keys); of its own
    // document's, packed.
    op.inv_k = static_cast<float>(2.0 * s_.training.AttentionPacking() /
                                  static_cast<double>(s_.training.seq_len));
    if (shape_.cp_ring) {
      // A ring runs one flash call per K, V chunk: each query block visits 1/cp of the keys in
      // a call, and pays its fixed work cp times.
      op.inv_k *= static_cast<float>(s_.parallel.cp);
      op.kernels = static_cast<int16_t>(std::min<int64_t>(s_.parallel.cp, 1024));
    }
  }
  if (s_.training.precision == Precision::kFp8 && lo.op_class == OpClass::kGemm && !lo.keep_16bit) {
    // Frozen weights need no weight-gradient GEMM, but the casts stay.
    op.serial_bytes = backward ? lo.fp8_cast_bwd : lo.fp8_cast_fwd;
    op.serial_kernels = backward ? lo.fp8_cast_kernels_bwd : lo.fp8_cast_kernels_fwd;
  }
  return op;
}

Op Lowerer::Fp8WeightCache(const std::vector<LayerOp>& ops, int32_t g) const {
  // TE's cast of each fp8 GEMM's weight to the copy it keeps for the step, the recipe's bytes
  // and kernels per weight (Fp8WeightCopyOf; delayed scaling on Hopper: the fused cast_transpose,
  // the 16-bit weight read, its fp8 copy and the copy's transpose written, 2 + 1 + 1 B).
  const Fp8WeightCopy copy = Fp8WeightCopyOf(shape_);
  int64_t elements = 0;
  int16_t kernels = 0;
  for (const LayerOp& lo : ops) {
    if (lo.op_class != OpClass::kGemm || lo.keep_16bit || lo.fp8_weight_elements == 0) continue;
    elements += lo.fp8_weight_elements;
    ++kernels;
  }
  Op op = Compute(
      "fp8_weight_cast", OpPass::kForward, OpClass::kMemoryBound, Flops(),
      Bytes::Count(std::llround(copy.cast_bytes_per_element * static_cast<double>(elements))), g);
  op.kernels = static_cast<int16_t>(std::max(kernels * copy.kernels_per_weight, 1));
  return op;
}

Op Lowerer::FinalNorm(OpPass pass, int32_t g) const {
  const int64_t elements = tokens_ / rep_ * s_.model.hidden;
  const NormCost c = NormKernelCost(s_.model, s_.training.NormKernels());
  const double k = pass == OpPass::kBackward ? 2.0 : 1.0;
  Op op = Compute("final_norm", pass, OpClass::kMemoryBound,
                  Flops::Count(5.0 * k * static_cast<double>(elements)),
                  Bytes::Count(c.bytes_per_element * elements) * k, g);
  op.kernels = c.kernels;
  return op;
}

Lowerer::LayerCheckpoint Lowerer::CheckpointOf(int32_t g) const {
  const TrainingSpec& t = s_.training;
  LayerCheckpoint c{t.recompute, true, g, g};
  if (t.recompute_every > 1) {
    if (g % t.recompute_every != 0) c.policy = Recompute::kNone;
    return c;
  }
  if (!t.recompute_layers) return c;
  // The decoder layers of g's model chunk.
  int32_t lo = 1, hi = layers_;
  for (const auto& [first, last] : vstage_groups_) {
    if (first <= g && g <= last) {
      lo = std::max(first, 1);
      hi = std::min(last, layers_);
    }
  }
  const int32_t n = static_cast<int32_t>(*t.recompute_layers), pos = g - lo;
  if (t.recompute_method == RecomputeMethod::kBlock) {
    if (pos >= n) c.policy = Recompute::kNone;
    return c;
  }
  c.group_first = lo + pos / n * n;
  c.group_last = std::min(hi, c.group_first + n - 1);
  c.keeps_input = g == c.group_first;
  return c;
}

}  // namespace sim::lowering_internal
