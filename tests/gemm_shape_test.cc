// A GEMM's fixed per-tile work by its reduction length K (GpuCalibration::gemm_k_overhead,
// sim/cost/compute_cost.h): the lowering records the mean 1/K of each GEMM op's kernels, and the
// cost model stretches the op's math by 1 + gemm_k_overhead / K. Expected values come from the
// shapes (Llama-2-7B on one GPU: T = 4096 tokens, h = 4096, f = 11008, V = 32000).
#include <catch2/catch.hpp>

#include "sim/config/loaders.h"
#include "sim/cost/compute_cost.h"
#include "sim/workload/lowering.h"

namespace sim {
namespace {

const Op& Find(const OpProgram& p, absl::string_view name, OpPass pass) {
  for (const Op& op : p.ops) {
    if (op.name == name && op.pass == pass) return op;
  }
  FAIL("no op " << name);
  return p.ops.front();
}

TEST_CASE("each GEMM op carries the mean 1/K of its kernels", "[compute]") {
  auto s = config::LoadScenario(config::DataRoot{STEPSIM_SOURCE_DIR},
                                STEPSIM_SOURCE_DIR "/scenarios/default.yaml",
                                {{"model", "llama2-7b"},
                                 {"cluster.nodes", "1"},
                                 {"training.global_batch", "8"},
                                 {"training.recompute", "none"}});
  REQUIRE(s.ok());
  auto p = Lower(*s);
  REQUIRE(p.ok());
  const double T = 4096, h = 4096, f = 11008, V = 32000;
  // Forward: the inner dimension. Backward: dX reduces over the forward's columns, dW over the
  // tokens, each half of the FLOPs.
  CHECK(Find(*p, "qkv", OpPass::kForward).gemm_inv_k == Approx(1 / h));
  CHECK(Find(*p, "qkv", OpPass::kBackward).gemm_inv_k == Approx(0.5 / (3 * h) + 0.5 / T));
  CHECK(Find(*p, "down", OpPass::kForward).gemm_inv_k == Approx(1 / f));
  CHECK(Find(*p, "down", OpPass::kBackward).gemm_inv_k == Approx(0.5 / h + 0.5 / T));
  CHECK(Find(*p, "lm_head", OpPass::kForward).gemm_inv_k == Approx(1 / h));
  CHECK(Find(*p, "lm_head", OpPass::kBackward).gemm_inv_k == Approx(0.5 / V + 0.5 / T));
  // Attention kernels and memory-bound ops carry none.
  CHECK(Find(*p, "flash_attention", OpPass::kForward).gemm_inv_k == 0);
  CHECK(Find(*p, "norm1", OpPass::kForward).gemm_inv_k == 0);
}

TEST_CASE("gemm_k_overhead stretches a GEMM's math by 1 + overhead / K", "[compute]") {
  GpuSpec gpu;
  gpu.bf16 = FlopRate::PerSecond(312e12);
  gpu.hbm_bandwidth = Bandwidth::BytesPerSecond(2.0e12);
  Op gemm;
  gemm.op_class = OpClass::kGemm;
  gemm.flops = Flops::Count(2.0 * 4096 * 768 * 2304);  // a 125M model's qkv at 4096 tokens
  gemm.gemm_inv_k = 1.0f / 768;
  const Duration launch = gpu.calibration.launch_overhead;
  const double plain = (cost::ComputeDuration(gemm, gpu, Precision::kBf16) - launch).seconds();
  CHECK(plain == Approx(gemm.flops.count() / (312e12 * gpu.calibration.gemm_efficiency)));
  gpu.calibration.gemm_k_overhead = 256;
  const double stretched = (cost::ComputeDuration(gemm, gpu, Precision::kBf16) - launch).seconds();
  CHECK(stretched == Approx(plain * (1 + 256.0 / 768)).epsilon(1e-6));
  // Attention is not a GEMM here: untouched.
  Op attention = gemm;
  attention.op_class = OpClass::kAttention;
  const double a = (cost::ComputeDuration(attention, gpu, Precision::kBf16) - launch).seconds();
  CHECK(a == Approx(gemm.flops.count() / (312e12 * gpu.calibration.attention_efficiency)));
}

}  // namespace
}  // namespace sim
