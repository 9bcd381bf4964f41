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

#include <cstdint>

#include "sim/spec/model.h"

namespace sim {

struct ParameterCount {
  int64_t per_layer = 0;
  int64_t attention_per_layer = 0;
  int64_t mlp_per_layer = 0;
  int64_t norms_per_layer = 0;
  int64_t embedding = 0;  // token embedding (shared with the LM head when tied)
  int64_t positions = 0;  // learned position table
  int64_t lm_head = 0;    // 0 when tied
  int64_t final_norm = 0;
  int64_t total = 0;
};

ParameterCount CountParameters(const ModelSpec& m);

}  // namespace sim
