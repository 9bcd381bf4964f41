// docs/model.md "Activations": the op-level accounting of sim/workload/layer_ops reproduces
// Korthikanti et al. 2022 Table 2 to the byte, for the GPT layer, for every TP/SP/recompute row.
#include <catch2/catch.hpp>

#include "sim/workload/layer_ops.h"

namespace sim {
namespace {

// The GPT layer of the paper: LayerNorm, MHA with softmax dropout, GeLU MLP with f = 4h.
ModelSpec GptLayer(int64_t h, int64_t a) {
  ModelSpec m;
  m.name = "gpt-layer";
  m.layers = 1;
  m.hidden = h;
  m.heads = a;
  m.kv_heads = a;
  m.ffn_hidden = 4 * h;
  m.vocab = 51200;
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.dropout = 0.1;
  m.bias = true;
  return m;
}

int64_t Saved(const ModelSpec& m, int64_t s, int64_t b, int64_t t, bool sp, Recompute r,
              AttentionKernel k = AttentionKernel::kEager) {
  return LayerActivationBytes(m, ActivationShape{s, b, t, sp, k}, r).count();
}

TEST_CASE("Korthikanti Table 2, GPT-22B layer, t = 1, 2, 4, 8", "[activations]") {
  const int64_t s = 2048, b = 4, h = 6144, a = 64;
  const ModelSpec m = GptLayer(h, a);
  const int64_t sbh = s * b * h;
  const int64_t attn = 5 * a * s * s * b;  // 5·a·s²·b = sbh · 5as/h
  // No parallelism: sbh(34 + 5as/h).
  CHECK(Saved(m, s, b, 1, false, Recompute::kNone) == 34 * sbh + attn);
  for (int64_t t : {1, 2, 4, 8}) {
    INFO("t = " << t);
    // Tensor parallel: sbh(10 + 24/t + 5as/(ht)).
    CHECK(Saved(m, s, b, t, false, Recompute::kNone) == 10 * sbh + 24 * sbh / t + attn / t);
    // Tensor parallel + selective recompute: sbh(10 + 24/t).
    CHECK(Saved(m, s, b, t, false, Recompute::kSelective) == 10 * sbh + 24 * sbh / t);
    // Full recompute keeps the layer input: 2sbh.
    CHECK(Saved(m, s, b, t, false, Recompute::kFull) == 2 * sbh);
    if (t > 1) {
      // Tensor + sequence parallel: sbh(34 + 5as/h)/t.
      CHECK(Saved(m, s, b, t, true, Recompute::kNone) == (34 * sbh + attn) / t);
      // Tensor + sequence parallel + selective: 34sbh/t.
      CHECK(Saved(m, s, b, t, true, Recompute::kSelective) == 34 * sbh / t);
      // Full recompute with sequence parallelism: 2sbh/t.
      CHECK(Saved(m, s, b, t, true, Recompute::kFull) == 2 * sbh / t);
    }
  }
}

TEST_CASE("SPEC 3.2 worked numbers for the 70B layer shape", "[activations]") {
  const int64_t s = 4096, b = 1, h = 8192, a = 64, layers = 80;
  const ModelSpec m = GptLayer(h, a);
  const double none = static_cast<double>(Saved(m, s, b, 1, false, Recompute::kNone));
  const double selective = static_cast<double>(Saved(m, s, b, 1, false, Recompute::kSelective));
  const double full = static_cast<double>(Saved(m, s, b, 1, false, Recompute::kFull));
  // 6.51 GB / 1.14 GB / 67.1 MB per layer; 521 GB / 91.3 GB / 5.37 GB for 80 layers.
  CHECK(none / 1e9 == Approx(6.51).epsilon(0.001));
  CHECK(selective / 1e9 == Approx(1.14).epsilon(0.002));
  CHECK(full / 1e6 == Approx(67.1).epsilon(0.001));
  CHECK(none * layers / 1e9 == Approx(521).epsilon(0.001));
  CHECK(selective * layers / 1e9 == Approx(91.3).epsilon(0.001));
  CHECK(full * layers / 1e9 == Approx(5.37).epsilon(0.001));
}

TEST_CASE("Llama layer: RMSNorm, SwiGLU, GQA, no dropout", "[activations]") {
  ModelSpec m = GptLayer(8192, 64);
  m.kv_heads = 8;
  m.ffn_hidden = 28672;
  m.mlp = MlpKind::kSwiglu;
  m.norm = NormKind::kRmsNorm;
  m.dropout = 0;
  m.bias = false;
  const int64_t s = 4096, b = 1, h = 8192, f = 28672, a = 64;
  const int64_t kv = 8 * 128;
  const int64_t T = s * b;
  // norm1_in, qkv_in, q, k, v, context, norm2_in, mlp_in: 16-bit; gate, up, down_in: 16-bit of f.
  const int64_t common = 2 * T * h + 2 * T * h + 2 * T * (h + kv) + 2 * T * kv + 2 * T * h +
                         2 * T * h + 2 * T * h + 3 * 2 * T * f;
  // Flash keeps one fp32 log-sum-exp per row and head.
  CHECK(Saved(m, s, b, 1, false, Recompute::kNone, AttentionKernel::kFlash) ==
        common + 4 * a * s * b);
  // Eager keeps the softmax output (no dropout, so no mask and no second copy): 2·a·s²·b.
  CHECK(Saved(m, s, b, 1, false, Recompute::kNone, AttentionKernel::kEager) ==
        common + 2 * a * s * s * b);
  // Selective recompute drops the attention core; what is left is linear in s.
  CHECK(Saved(m, s, b, 1, false, Recompute::kSelective, AttentionKernel::kEager) == common);
  CHECK(Saved(m, s, b, 1, false, Recompute::kFull, AttentionKernel::kFlash) == 2 * T * h);
}

TEST_CASE("sequence-length scaling: eager quadratic, flash linear", "[activations]") {
  const ModelSpec m = GptLayer(4096, 32);
  const int64_t e1 = Saved(m, 2048, 1, 1, false, Recompute::kNone);
  const int64_t e2 = Saved(m, 4096, 1, 1, false, Recompute::kNone);
  CHECK(e2 > 2 * e1);
  const auto flash = AttentionKernel::kFlash;
  CHECK(Saved(m, 4096, 1, 1, false, Recompute::kNone, flash) ==
        2 * Saved(m, 2048, 1, 1, false, Recompute::kNone, flash));
  CHECK(Saved(m, 4096, 1, 1, false, Recompute::kFull) ==
        2 * Saved(m, 2048, 1, 1, false, Recompute::kFull));
}

}  // namespace
}  // namespace sim
