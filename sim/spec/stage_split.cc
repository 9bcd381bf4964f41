#include "sim/spec/stage_split.h"

#include "absl/strings/str_cat.h"

namespace sim {

absl::StatusOr<std::vector<int64_t>> SplitLayers(int64_t layers, int64_t pp, int64_t chunks,
                                                 std::optional<int64_t> first,
                                                 std::optional<int64_t> last,
                                                 const std::vector<int64_t>& given) {
  const int64_t vstages = pp * chunks;
  if (!given.empty()) {
    if (static_cast<int64_t>(given.size()) != vstages) {
      return absl::InvalidArgumentError(
          absl::StrCat(given.size(), " counts for pp x pp_chunks = ", vstages,
                       " virtual stages: give one per virtual stage"));
    }
    int64_t sum = 0;
    for (size_t i = 0; i < given.size(); ++i) {
      if (given[i] < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("virtual stage ", i, " has ", given[i], " layers: each needs at least 1"));
      }
      sum += given[i];
    }
    if (sum != layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("the counts sum to ", sum, " layers; the model has ", layers));
    }
    return given;
  }
  if (pp > 1 && (first || last)) {
    const int64_t middle = vstages - (first ? 1 : 0) - (last ? 1 : 0);
    const int64_t rest = layers - first.value_or(0) - last.value_or(0);
    if (middle <= 0 || rest <= 0 || rest % middle != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", layers, " layers less the first/last stages' leave ", rest, " for ",
                       middle, " model chunks: not an equal split"));
    }
    std::vector<int64_t> out(vstages, rest / middle);
    if (first) out.front() = *first;
    if (last) out.back() = *last;
    return out;
  }
  if (layers % vstages != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pp x pp_chunks = ", vstages, " must divide the model's ", layers,
                     " layers (or set first_stage_layers / last_stage_layers)"));
  }
  return std::vector<int64_t>(vstages, layers / vstages);
}

}  // namespace sim
