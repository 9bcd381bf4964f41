#pragma once
// How a model's decoder layers split over pipeline stages: pp × chunks virtual stages (virtual
// stage c·pp + s is chunk c of stage s), equal, or with the first and last virtual stage as
// given (Megatron-LM --decoder-first/last-pipeline-num-layers) and the rest equal, or every
// virtual stage's count given (parallel.pp_layers). The loader
// reports a split that does not work out; lowering uses the one that does.

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

namespace sim {

// Layers per virtual stage; InvalidArgument saying why when the layers do not split so. A
// non-empty `given` is the split itself: one count of at least 1 per virtual stage, summing to
// `layers`.
absl::StatusOr<std::vector<int64_t>> SplitLayers(int64_t layers, int64_t pp, int64_t chunks,
                                                 std::optional<int64_t> first,
                                                 std::optional<int64_t> last,
                                                 const std::vector<int64_t>& given = {});

}  // namespace sim
