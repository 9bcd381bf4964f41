#include "sim/workload/params.h"

namespace sim {

namespace {

int64_t NormParams(const ModelSpec& m) {
  return (m.norm == NormKind::kLayerNorm && m.bias) ? 2 * m.hidden : m.hidden;
}

}  // namespace

int64_t MlpParameters(const ModelSpec& m, int64_t f) {
  const int64_t h = m.hidden;
  return m.mlp == MlpKind::kGelu ? 2 * h * f + (m.bias ? f + h : 0)
                                 : 3 * h * f + (m.bias ? 2 * f + h : 0);
}

ParameterCount CountParameters(const ModelSpec& m) {
  const int64_t h = m.hidden, f = m.ffn_hidden;
  const int64_t kv = m.kv_heads * m.head_dim(), q = m.query_width();
  ParameterCount c;
  // wq (h × a·d), wk and wv (h × k·d), wo (a·d × h) and their biases.
  c.attention_per_layer = 2 * h * q + 2 * h * kv + (m.bias ? q + h + 2 * kv : 0);
  if (m.mla) {
    // MLA (model.h MlaSpec): the down projection and the two latent RMSNorms (replicated over
    // TP), the two up projections and the output projection.
    const MlaSpec& l = *m.mla;
    const int64_t a = m.heads;
    c.attention_replicated_per_layer = h * l.down_width() + l.q_lora_rank + l.kv_lora_rank;
    c.attention_per_layer = c.attention_replicated_per_layer + l.q_lora_rank * a * l.qk_head_dim() +
                            l.kv_lora_rank * a * (l.qk_nope_head_dim + l.v_head_dim) +
                            a * l.v_head_dim * h;
  }
  c.mlp_per_layer = MlpParameters(m, f);
  c.dense_mlp_per_layer = c.mlp_per_layer;
  c.active_mlp_per_layer = c.mlp_per_layer;
  if (m.moe) {
    const int64_t expert = MlpParameters(m, m.moe->expert_ffn_hidden);
    const int64_t shared = m.moe->shared_experts * MlpParameters(m, m.moe->shared_ffn_hidden);
    const int64_t router = h * m.moe->experts;
    c.expert_per_layer = m.moe->experts * expert;
    c.mlp_per_layer = c.expert_per_layer + shared + router;
    c.active_mlp_per_layer = m.moe->top_k * expert + shared + router;
  }
  c.norms_per_layer = 2 * NormParams(m);
  c.per_layer = c.attention_per_layer + c.mlp_per_layer + c.norms_per_layer;
  c.embedding = m.vocab * h;
  c.positions = m.position == PositionKind::kLearned ? m.max_seq_len * h : 0;
  c.lm_head = m.tied_embeddings ? 0 : m.vocab * h;
  c.final_norm = NormParams(m);
  c.moe_layers = m.moe_layers();
  const int64_t dense_layers = m.layers - c.moe_layers;
  c.total = c.moe_layers * c.per_layer +
            dense_layers * (c.attention_per_layer + c.dense_mlp_per_layer + c.norms_per_layer) +
            c.embedding + c.positions + c.lm_head + c.final_norm;
  c.active = c.total - c.moe_layers * (c.mlp_per_layer - c.active_mlp_per_layer);
  return c;
}

}  // namespace sim
