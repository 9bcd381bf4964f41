// training.kernels (sim/workload/layer_ops.cc): a Llama layer's small kernels fused, or as
// PyTorch eager modules run them (torchtitan's Llama without torch.compile). Hand-worked bytes
// and saved tensors, and the step-time ratio torchtitan measured for torch.compile.
#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_replace.h"
#include "sim/config/catalog.h"
#include "sim/replay/replay.h"
#include "sim/report/run_summary.h"
#include "sim/workload/layer_ops.h"
#include "tests/llama3_layer.h"

namespace sim {
namespace {

ActivationShape Shape(KernelFusion k) {
  ActivationShape shape{8192, 1, 1, false, AttentionKernel::kFlash};
  shape.kernels = k;
  shape.norm_kernels = k;
  return shape;
}

const LayerOp* Find(const std::vector<LayerOp>& ops, absl::string_view name) {
  for (const LayerOp& op : ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

TEST_CASE("eager kernels move the bytes PyTorch's eager Llama modules move", "[kernels]") {
  const ModelSpec m = Llama3Layer();
  const int64_t T = 8192, h = 4096, q = 4096, kv = 1024, f = 14336;
  const std::vector<LayerOp> fused = LayerForwardOps(m, Shape(KernelFusion::kFused));
  const std::vector<LayerOp> eager = LayerForwardOps(m, Shape(KernelFusion::kEager));
  // RMSNorm: read 2 and write 2 bytes an element fused; eager, the fp32 upcast, pow, mean,
  // the product, type_as and the weight product: 6 + 8 + 4 + 8 + 6 + 4 = 36, in 9 kernels.
  CHECK(Find(fused, "norm1")->bytes_moved.count() == 4 * T * h);
  CHECK(Find(eager, "norm1")->bytes_moved.count() == 36 * T * h);
  CHECK(Find(eager, "norm2")->kernels == 9);
  // RoPE on q and k: one 16-bit pass each fused; fp32 upcast, complex product, type_as eager.
  CHECK(Find(fused, "rope")->bytes_moved.count() == 4 * T * (q + kv));
  CHECK(Find(eager, "rope")->bytes_moved.count() == 20 * T * (q + kv));
  // SwiGLU: one kernel reading gate and up and writing the product (6 B an element of f);
  // eager silu (4) then the product (6).
  CHECK(Find(fused, "swiglu")->bytes_moved.count() == 6 * T * f);
  CHECK(Find(eager, "swiglu")->bytes_moved.count() == 10 * T * f);
  // GQA: only eager SDPA needs K and V repeated to every head (read kv wide, write q wide).
  CHECK(Find(fused, "repeat_kv") == nullptr);
  CHECK(Find(eager, "repeat_kv")->bytes_moved.count() == 2 * 2 * T * (kv + q));
  // Flash attention reads the repeated K and V.
  CHECK(Find(eager, "flash_attention")->bytes_moved.count() -
            Find(fused, "flash_attention")->bytes_moved.count() ==
        2 * 2 * T * (q - kv));
}

TEST_CASE("eager kernels keep what autograd saves for them", "[kernels]") {
  const ModelSpec m = Llama3Layer();
  const int64_t T = 8192, h = 4096, q = 4096, kv = 1024, f = 14336;
  auto saved = [&](KernelFusion k, Recompute r) {
    return LayerActivationBytes(m, Shape(k), r).count();
  };
  // Without checkpointing: each norm keeps its fp32 upcast (4 B) and the normalised tensor (2)
  // instead of its 16-bit input (2), SwiGLU's product keeps silu's output besides up, and
  // SDPA keeps K and V repeated to q's width: 2·4·T·h + 2·T·f + 2·2·T·(q − kv) more.
  CHECK(saved(KernelFusion::kEager, Recompute::kNone) -
            saved(KernelFusion::kFused, Recompute::kNone) ==
        2 * 4 * T * h + 2 * T * f + 2 * 2 * T * (q - kv));
  // Checkpointed layers keep the same: the layer input (full), and the cached matmul outputs
  // and attention (per-op; the eager kernels' tensors are recomputed).
  CHECK(saved(KernelFusion::kEager, Recompute::kFull) ==
        saved(KernelFusion::kFused, Recompute::kFull));
  CHECK(saved(KernelFusion::kEager, Recompute::kOp) == saved(KernelFusion::kFused, Recompute::kOp));
}

TEST_CASE("a fused norm in an eager model keeps the fused norm's bytes", "[kernels]") {
  // torchtitan's norm_type = "fused_rmsnorm" (training.norm_kernel: fused).
  ActivationShape shape = Shape(KernelFusion::kEager);
  shape.norm_kernels = KernelFusion::kFused;
  const std::vector<LayerOp> ops = LayerForwardOps(Llama3Layer(), shape);
  CHECK(Find(ops, "norm1")->bytes_moved.count() == 4 * 8192 * 4096);
  CHECK(Find(ops, "norm2")->kernels == 1);
  CHECK(Find(ops, "swiglu")->kernels == 2);
}

TEST_CASE("LayerNorm and GELU models run the same kernels eager or fused", "[kernels]") {
  // torch's native layer_norm and gelu are single kernels even in eager mode; without RoPE or
  // GQA nothing else differs.
  ModelSpec m = Llama3Layer();
  m.norm = NormKind::kLayerNorm;
  m.mlp = MlpKind::kGelu;
  m.position = PositionKind::kLearned;
  m.kv_heads = m.heads;
  const std::vector<LayerOp> fused = LayerForwardOps(m, Shape(KernelFusion::kFused));
  const std::vector<LayerOp> eager = LayerForwardOps(m, Shape(KernelFusion::kEager));
  REQUIRE(fused.size() == eager.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    CHECK(fused[i].bytes_moved == eager[i].bytes_moved);
    CHECK(fused[i].kernels == eager[i].kernels);
  }
}

// torchtitan's H100 benchmark (benchmarks/llama3_h100_202412_torchtitan.md, Table 1: Llama 3.1
// 8B, 8 GPUs, FSDP, local batch 2, per-op checkpointing) measured 5,762 tokens/s per GPU eager
// and 6,667 with torch.compile: 1.157x. Compiling fuses the kernels training.kernels prices.
TEST_CASE("eager kernels cost what torch.compile saved torchtitan on H100", "[kernels]") {
  constexpr const char* kScenario = R"(schema_version: 1
model: llama3-8b
cluster: {node: grand-teton-h100-96gb, nodes: 1}
training: {seq_len: 8192, micro_batch: 2, global_batch: 16, recompute: op, attention: flash,
           kernels: KERNELS}
parallel: {framework: fsdp, fsdp_version: 2, zero: 3, sharding: full_shard, reduce_dtype: fp32}
)";
  auto step = [&](const char* kernels) {
    auto loader = config::ScenarioLoader::FromText(
        config::DataRoot{STEPSIM_SOURCE_DIR},
        absl::StrReplaceAll(kScenario, {{"KERNELS", kernels}}), "eager_kernels_test");
    REQUIRE(loader.ok());
    auto s = loader->Load({});
    INFO(s.status().message());
    REQUIRE(s.ok());
    auto r = replay::Simulate(*s, {});
    REQUIRE(r.ok());
    return report::Summarize(*s, *r).step.seconds();
  };
  const double ratio = step("eager") / step("fused");
  INFO("eager / fused step time " << ratio << ", measured 6667 / 5762 = " << 6667.0 / 5762);
  CHECK(ratio == Approx(6667.0 / 5762).epsilon(0.05));
}

}  // namespace
}  // namespace sim
