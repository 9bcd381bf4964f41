#pragma once
// The linear projections of a decoder layer (what LoRA adapters target, training.finetune), with
// their shapes: a pure function of the model, used by the loader's checks and by lowering.

#include <cstdint>
#include <vector>

#include "sim/spec/model.h"
#include "sim/spec/scenario.h"

namespace sim {

// A projection of a decoder layer, per GPU after TP sharding.
struct LayerLinear {
  LoraTarget target;
  int64_t in = 0, out = 0;  // the full (unsharded) shape
  bool column = true;       // column-parallel (q, k, v, gate, up) or row-parallel (o, down)
  int64_t ParamsPerGpu(int64_t tp) const { return in * out / tp; }
  // A (in × r) and B (r × out) on one GPU under TP.
  int64_t AdapterParamsPerGpu(int64_t rank, int64_t tp) const {
    return column ? rank * in + rank * out / tp : rank * in / tp + rank * out;
  }
};

// The projections a decoder layer of `m` has (a GELU MLP has no gate).
std::vector<LayerLinear> LayerLinears(const ModelSpec& m);
bool ModelHasTarget(const ModelSpec& m, LoraTarget t);
}  // namespace sim
