#include "sim/base/suggest.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sim {
namespace {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      const bool same = absl::ascii_tolower(a[i - 1]) == absl::ascii_tolower(b[j - 1]);
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<std::string> NearestName(absl::string_view wrong,
                                       const std::vector<std::string>& valid) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const std::string& name : valid) {
    const size_t d = EditDistance(wrong, name);
    if (!best || d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  // A plausible typo changes at most a third of the word (and at least one character).
  if (best && best_distance <= std::max<size_t>(2, wrong.size() / 3)) return best;
  // Or the user spelled out a name the valid one abbreviates ("step_time" for "step_s"):
  // the longest shared prefix of at least 4 characters.
  std::optional<std::string> prefix_best;
  size_t longest = 0;
  for (const std::string& name : valid) {
    size_t n = 0;
    while (n < name.size() && n < wrong.size() &&
           absl::ascii_tolower(name[n]) == absl::ascii_tolower(wrong[n])) {
      ++n;
    }
    if (n >= 4 && n > longest) {
      longest = n;
      prefix_best = name;
    }
  }
  return prefix_best;
}

std::string DidYouMean(absl::string_view wrong, const std::vector<std::string>& valid) {
  auto near = NearestName(wrong, valid);
  return near ? absl::StrCat(" (did you mean '", *near, "'?)") : std::string();
}

}  // namespace sim
