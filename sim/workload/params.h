#pragma once
// Parameter counts derived from the architecture (never taken from the file's nominal count).
//
// Per decoder layer, with h hidden, f FFN hidden, d = h / a head size, kv = k·d:
//   attention  Wq h·h, Wk h·kv, Wv h·kv, Wo h·h            (+ biases h + 2kv + h)
//   MLP gelu   W1 h·f, W2 f·h                               (+ biases f + h)
//   MLP swiglu Wgate h·f, Wup h·f, Wdown f·h                 (+ biases 2f + h)
//   2 norms    LayerNorm with bias 2h each, RMSNorm / bias-free LayerNorm h each
// Outside: token embedding V·h, learned positions max_seq_len·h, LM head V·h unless tied,
// final norm. For the GPT layer with biases this is 12h² + 13h per layer, Narayanan et al.
// SC21 eq. (2): P = 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h)) — which omits the final LayerNorm's 2h.
//
// A mixture-of-experts layer (ModelSpec::moe) replaces the MLP by E routed experts and S shared
// ones, each an MLP of its own width (f_e, f_s), and a router h·E (no bias); one token computes
// with its top-k routed experts and the shared ones: the active parameters. Mixtral-8x7B:
// 32 × (attention 41.9M + 8 × 176.2M + 32.8K + norms 8K) + 2 × 131.1M = 46.70B total, 12.88B
// active (Jiang et al. 2024, "Mixtral of Experts": 47B and 13B).

#include <cstdint>

#include "sim/spec/model.h"

namespace sim {

// The *_per_layer counts are an MoE layer's for MoE models (the model's layers otherwise); the
// dense layers of an MoE model (MoeSpec first_dense_layers, layer_freq) have attention, norms and
// dense_mlp_per_layer.
struct ParameterCount {
  int64_t per_layer = 0;
  int64_t attention_per_layer = 0;
  int64_t attention_replicated_per_layer = 0;  // MLA: its down projection and norms (not ÷ tp)
  int64_t mlp_per_layer = 0;                   // dense: the MLP; MoE: all experts and the router
  int64_t dense_mlp_per_layer = 0;             // the MLP of width ffn_hidden (dense layers)
  int64_t expert_per_layer = 0;      // MoE: the routed experts' parameters (what EP shards)
  int64_t active_mlp_per_layer = 0;  // what one token computes with: top-k + shared + router
  int64_t moe_layers = 0;            // layers with the MoE MLP (0 for a dense model)
  int64_t norms_per_layer = 0;
  int64_t embedding = 0;  // token embedding (shared with the LM head when tied)
  int64_t positions = 0;  // learned position table
  int64_t lm_head = 0;    // 0 when tied
  int64_t final_norm = 0;
  int64_t total = 0;
  int64_t active = 0;  // = total for a dense model
};

// One MLP of width f on the model's hidden size, in the model's MLP kind (with its biases).
int64_t MlpParameters(const ModelSpec& m, int64_t f);

ParameterCount CountParameters(const ModelSpec& m);

}  // namespace sim
