#include "sim/spec/projections.h"

namespace sim {

std::vector<LayerLinear> LayerLinears(const ModelSpec& m) {
  const int64_t h = m.hidden, f = m.ffn_hidden, kv = m.kv_heads * m.head_dim();
  const int64_t q = m.query_width();
  std::vector<LayerLinear> l = {{LoraTarget::kQ, h, q, true},
                                {LoraTarget::kK, h, kv, true},
                                {LoraTarget::kV, h, kv, true},
                                {LoraTarget::kO, q, h, false}};
  if (m.mlp == MlpKind::kSwiglu) l.push_back({LoraTarget::kGate, h, f, true});
  l.push_back({LoraTarget::kUp, h, f, true});
  l.push_back({LoraTarget::kDown, f, h, false});
  return l;
}

bool ModelHasTarget(const ModelSpec& m, LoraTarget t) {
  return t != LoraTarget::kGate || m.mlp == MlpKind::kSwiglu;
}

}  // namespace sim
