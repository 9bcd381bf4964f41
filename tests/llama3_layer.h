#pragma once
// Llama 3 8B's decoder layer for hand-worked activation and kernel counts: h 4096, 32 heads, 8 KV
// heads (kv = 1024), SwiGLU f 14336, RMSNorm, RoPE, vocabulary 128256.
#include "sim/spec/model.h"

namespace sim {

inline ModelSpec Llama3Layer() {
  ModelSpec m;
  m.name = "llama3-layer";
  m.layers = 1;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.ffn_hidden = 14336;
  m.vocab = 128256;
  m.mlp = MlpKind::kSwiglu;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kRope;
  return m;
}

}  // namespace sim
