// A GEMM's fixed per-tile work by its reduction length K (GpuCalibration::gemm_k_overhead,
// sim/cost/compute_cost.h): the lowering records the mean 1/K of each GEMM op's kernels, and the
// cost model stretches the op's math by 1 + gemm_k_overhead / K. Flash attention's fixed work
// per query block the same way by the key/value positions a block visits, s / 2 under the causal
// mask (attention_kv_overhead). Expected values come from the shapes (Llama-2-7B on one GPU:
// T = s = 4096 tokens, h = 4096, f = 11008, V = 32000). Flash attention's implementations
// (training.flash_impl) scale FlashAttention-2's time by their authors' published ratios.
#include <catch2/catch.hpp>
#include <vector>

#include "absl/strings/match.h"
#include "sim/config/loaders.h"
#include "sim/cost/compute_cost.h"
#include "sim/replay/replay.h"
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

// A GPU of the given dense 16-bit peak and HBM bandwidth, with the default calibration.
GpuSpec TestGpu(double peak, double hbm) {
  GpuSpec gpu;
  gpu.bf16 = FlopRate::PerSecond(peak);
  gpu.hbm_bandwidth = Bandwidth::BytesPerSecond(hbm);
  return gpu;
}

// Llama-2-7B on one GPU, 4,096-token sequences, without recompute, attention as given, and
// `more` keys.
OpProgram LowerLlama2(const char* attention, const char* packing = "1",
                      std::vector<config::Override> more = {}) {
  std::vector<config::Override> keys = {{"model", "llama2-7b"},
                                        {"cluster.nodes", "1"},
                                        {"training.global_batch", "8"},
                                        {"training.recompute", "none"},
                                        {"training.attention", attention},
                                        {"training.packing", packing}};
  keys.insert(keys.end(), more.begin(), more.end());
  auto s = config::LoadScenario(config::DataRoot{STEPSIM_SOURCE_DIR},
                                STEPSIM_SOURCE_DIR "/scenarios/default.yaml", keys);
  REQUIRE(s.ok());
  auto p = Lower(*s);
  REQUIRE(p.ok());
  return *std::move(p);
}

TEST_CASE("each GEMM op carries the mean 1/K of its kernels", "[compute]") {
  const OpProgram p = LowerLlama2("flash");
  const double T = 4096, h = 4096, f = 11008, V = 32000;
  // Forward: the inner dimension. Backward: dX reduces over the forward's columns, dW over the
  // tokens, each half of the FLOPs.
  CHECK(Find(p, "qkv", OpPass::kForward).inv_k == Approx(1 / h));
  CHECK(Find(p, "qkv", OpPass::kBackward).inv_k == Approx(0.5 / (3 * h) + 0.5 / T));
  CHECK(Find(p, "down", OpPass::kForward).inv_k == Approx(1 / f));
  CHECK(Find(p, "down", OpPass::kBackward).inv_k == Approx(0.5 / h + 0.5 / T));
  CHECK(Find(p, "lm_head", OpPass::kForward).inv_k == Approx(1 / h));
  CHECK(Find(p, "lm_head", OpPass::kBackward).inv_k == Approx(0.5 / V + 0.5 / T));
  // Causal flash attention: a query block visits s / 2 key/value positions on average (and a
  // key/value block s / 2 query positions in the backward). Memory-bound ops carry none.
  CHECK(Find(p, "flash_attention", OpPass::kForward).inv_k == Approx(2 / T));
  CHECK(Find(p, "flash_attention", OpPass::kBackward).inv_k == Approx(2 / T));
  CHECK(Find(p, "norm1", OpPass::kForward).inv_k == 0);
  // Eager attention's batched matmuls carry none either: their K is the head dimension or the
  // sequence, and they are priced as plain GEMMs.
  const OpProgram eager = LowerLlama2("eager");
  CHECK(Find(eager, "attention_scores", OpPass::kForward).inv_k == 0);
  CHECK(Find(eager, "attention_values", OpPass::kBackward).inv_k == 0);
}

TEST_CASE("packed documents: flash attention computes each document's causal attention",
          "[compute]") {
  // 4,096-token sequences of 8 documents of 512 (document masking, THD): each query attends to
  // its own document's keys, so the score blocks are 8 x 512^2 of the 4,096^2 (1/8), and a
  // query block visits 256 key/value positions on average, not 2,048.
  const OpProgram whole = LowerLlama2("flash"), packed = LowerLlama2("flash", "8");
  for (OpPass pass : {OpPass::kForward, OpPass::kBackward}) {
    CHECK(Find(packed, "flash_attention", pass).flops.count() ==
          Approx(Find(whole, "flash_attention", pass).flops.count() / 8));
    CHECK(Find(packed, "flash_attention", pass).inv_k == Approx(2.0 / 512));
    // The GEMMs around it are the tokens', packed or not.
    CHECK(Find(packed, "qkv", pass).flops == Find(whole, "qkv", pass).flops);
  }
  // Eager attention computes the masked 4,096^2 scores all the same.
  CHECK(Find(LowerLlama2("eager", "8"), "attention_scores", OpPass::kForward).flops ==
        Find(LowerLlama2("eager"), "attention_scores", OpPass::kForward).flops);
}

TEST_CASE("packed documents of given lengths: attention over the sum of their squares",
          "[compute]") {
  // One 2,048-token document and two of 1,024 in a 4,096-token sequence: the causal score
  // blocks are (2048² + 2 · 1024²) / 4096² = 3/8 of the sequence's, and a query visits on
  // average Σ L · L/2 / S = 768 keys. Four of 1,024 are packing 4 exactly.
  auto lowered = [](const char* lengths) {
    return LowerLlama2("flash", "1", {{"training.document_lengths", lengths}});
  };
  const OpProgram whole = LowerLlama2("flash"), mixed = lowered("2048, 1024, 1024");
  const OpProgram equal = lowered("1024, 1024, 1024, 1024"), four = LowerLlama2("flash", "4");
  for (OpPass pass : {OpPass::kForward, OpPass::kBackward}) {
    CHECK(Find(mixed, "flash_attention", pass).flops.count() ==
          Approx(Find(whole, "flash_attention", pass).flops.count() * 3 / 8));
    CHECK(Find(mixed, "flash_attention", pass).inv_k == Approx(1.0 / 768));
    CHECK(Find(equal, "flash_attention", pass).flops == Find(four, "flash_attention", pass).flops);
    CHECK(Find(equal, "flash_attention", pass).inv_k == Find(four, "flash_attention", pass).inv_k);
  }
}

TEST_CASE("gemm_k_overhead stretches a GEMM's math by 1 + overhead / K", "[compute]") {
  GpuSpec gpu = TestGpu(312e12, 2.0e12);
  Op gemm;
  gemm.op_class = OpClass::kGemm;
  gemm.flops = Flops::Count(2.0 * 4096 * 768 * 2304);  // a 125M model's qkv at 4096 tokens
  gemm.inv_k = 1.0f / 768;
  const Duration launch = gpu.calibration.launch_overhead;
  CHECK(gpu.calibration.gemm_k_overhead == 128);  // the tile's estimate (hardware.h)
  gpu.calibration.gemm_k_overhead = 0;
  const double plain = (cost::ComputeDuration(gemm, gpu, Precision::kBf16) - launch).seconds();
  CHECK(plain == Approx(gemm.flops.count() / (312e12 * gpu.calibration.gemm_efficiency)));
  gpu.calibration.gemm_k_overhead = 256;
  const double stretched = (cost::ComputeDuration(gemm, gpu, Precision::kBf16) - launch).seconds();
  CHECK(stretched == Approx(plain * (1 + 256.0 / 768)).epsilon(1e-6));
  // Attention is not a GEMM: gemm_k_overhead leaves it alone.
  Op attention = gemm;
  attention.op_class = OpClass::kAttention;
  const double a = (cost::ComputeDuration(attention, gpu, Precision::kBf16) - launch).seconds();
  CHECK(a == Approx(gemm.flops.count() / (312e12 * gpu.calibration.attention_efficiency)));
}

TEST_CASE("attention_kv_overhead stretches flash attention by 1 + overhead / (s / 2)",
          "[compute]") {
  GpuSpec gpu = TestGpu(312e12, 2.0e12);
  gpu.calibration.attention_efficiency = 0.5;
  Op core;
  core.op_class = OpClass::kAttention;
  core.flops = Flops::Count(2.0 * 128 * 512.0 * 512 * 768);  // causal, 128 x 512 tokens, h 768
  core.inv_k = 2.0f / 512;
  const Duration launch = gpu.calibration.launch_overhead;
  auto math = [&](FlashImpl impl) {
    return (cost::ComputeDuration(core, gpu, Precision::kBf16, impl) - launch).seconds();
  };
  const double plain = core.flops.count() / (312e12 * 0.5);
  CHECK(math(FlashImpl::kFa2) == Approx(plain));  // the default: no such term
  // 256 positions of fixed work per block against 256 visited: twice the time at s = 512, and
  // 1 + 256 / 4096 at s = 8192.
  gpu.calibration.attention_kv_overhead = 256;
  CHECK(math(FlashImpl::kFa2) == Approx(2 * plain).epsilon(1e-6));
  core.inv_k = 2.0f / 8192;
  CHECK(math(FlashImpl::kFa2) == Approx(plain * (1 + 256.0 / 4096)).epsilon(1e-6));
  // It composes with the implementation's ratio to FlashAttention-2.
  CHECK(math(FlashImpl::kTriton) == Approx(1.4 * plain * (1 + 256.0 / 4096)).epsilon(1e-6));
  // GEMMs do not take it.
  Op gemm = core;
  gemm.op_class = OpClass::kGemm;
  gpu.calibration.gemm_k_overhead = 0;
  CHECK((cost::ComputeDuration(gemm, gpu, Precision::kBf16) - launch).seconds() ==
        Approx(core.flops.count() / (312e12 * gpu.calibration.gemm_efficiency)));
}

TEST_CASE("flash attention implementations run at their published speed ratios to FA2",
          "[compute]") {
  GpuSpec gpu = TestGpu(989e12, 3.35e12);
  gpu.calibration.attention_efficiency = 0.35;
  Op core;
  core.op_class = OpClass::kAttention;
  core.flops = Flops::Count(2.0 * 8 * 4096.0 * 4096 * 4096);  // causal, 8 x 4096 tokens, h 4096
  const Duration launch = gpu.calibration.launch_overhead;
  auto math = [&](OpPass pass, FlashImpl impl) {
    Op op = core;
    op.pass = pass;
    return (cost::ComputeDuration(op, gpu, Precision::kBf16, impl) - launch).seconds();
  };
  // FlashAttention-2 is the calibrated kernel: FLOPs / (peak x attention_efficiency).
  const double fa2 = core.flops.count() / (989e12 * 0.35);
  CHECK(math(OpPass::kForward, FlashImpl::kFa2) == Approx(fa2));
  CHECK(math(OpPass::kBackward, FlashImpl::kFa2) == Approx(fa2));
  // Triton: FA2 is 1.3-1.5x faster forward, 2x backward (Dao 2023 §4.1); recompute is a forward.
  CHECK(math(OpPass::kForward, FlashImpl::kTriton) == Approx(1.4 * fa2));
  CHECK(math(OpPass::kRecompute, FlashImpl::kTriton) == Approx(1.4 * fa2));
  CHECK(math(OpPass::kBackward, FlashImpl::kTriton) == Approx(2.0 * fa2));
  // FA3: 1.5-2.0x faster forward, 1.5-1.75x backward than FA2 on H100 (Shah et al. 2024).
  CHECK(math(OpPass::kForward, FlashImpl::kFa3) == Approx(fa2 / 1.75));
  CHECK(math(OpPass::kBackward, FlashImpl::kFa3) == Approx(fa2 / 1.625));
  // GEMMs do not care which attention kernel runs.
  Op gemm = core;
  gemm.op_class = OpClass::kGemm;
  CHECK(cost::ComputeDuration(gemm, gpu, Precision::kBf16, FlashImpl::kTriton) ==
        cost::ComputeDuration(gemm, gpu, Precision::kBf16, FlashImpl::kFa2));
}

TEST_CASE("training.flash_impl reaches the replay: triton attention makes the step longer",
          "[compute]") {
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  const std::string file = STEPSIM_SOURCE_DIR "/scenarios/default.yaml";
  auto fa2 = config::LoadScenario(root, file, {{"training.global_batch", "32"}});
  auto triton = config::LoadScenario(
      root, file, {{"training.global_batch", "32"}, {"training.flash_impl", "triton"}});
  auto fa3 = config::LoadScenario(
      root, file, {{"training.global_batch", "32"}, {"training.flash_impl", "fa3"}});
  REQUIRE(fa2.ok());
  REQUIRE(triton.ok());
  REQUIRE(fa3.ok());
  CHECK(triton->training.flash_impl == FlashImpl::kTriton);
  // FlashAttention-3 is Hopper's only: refused on Blackwell as on Ampere, at its key.
  auto blackwell = config::LoadScenario(
      root, file, {{"cluster.node", "dgx-b200"}, {"training.flash_impl", "fa3"}});
  REQUIRE_FALSE(blackwell.ok());
  CHECK(absl::StrContains(blackwell.status().message(),
                          "fa3 (FlashAttention-3) runs on Hopper GPUs (compute capability "
                          "9.x); B200-SXM-180GB is 10.0: use fa2"));
  auto a = replay::Simulate(*fa2, {});
  auto b = replay::Simulate(*triton, {});
  auto c = replay::Simulate(*fa3, {});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  CHECK(b->step > a->step);
  CHECK(c->step < a->step);
  // Same work: the FLOPs and the memory do not depend on the kernel's speed.
  CHECK(b->hardware_flops.count() == a->hardware_flops.count());
  CHECK(b->ledgers[0].peak() == a->ledgers[0].peak());
}

}  // namespace
}  // namespace sim
