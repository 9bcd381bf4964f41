#pragma once
// "Did you mean" for unknown names: the valid name with the smallest edit distance
// (Levenshtein, case-insensitive), if it is close enough to be a plausible typo; else the one
// sharing the longest prefix of at least 4 characters (a spelled-out abbreviation).

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace sim {

std::optional<std::string> NearestName(absl::string_view wrong,
                                       const std::vector<std::string>& valid);

// " (did you mean 'x'?)" or "" when nothing is close; ready to append to a message.
std::string DidYouMean(absl::string_view wrong, const std::vector<std::string>& valid);

}  // namespace sim
