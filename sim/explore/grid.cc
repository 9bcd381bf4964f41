#include "sim/explore/grid.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sim::explore {

namespace {

constexpr size_t kMaxValues = 100'000;

// Expands "a..b:xK" / "a..b:+K" / "a..b"; returns false when `item` is not a range.
absl::StatusOr<bool> ExpandRange(absl::string_view item, std::vector<std::string>& out) {
  const size_t dots = item.find("..");
  if (dots == absl::string_view::npos) return false;
  absl::string_view from_text = item.substr(0, dots);
  absl::string_view rest = item.substr(dots + 2);
  absl::string_view step_text = "+1";
  if (const size_t colon = rest.find(':'); colon != absl::string_view::npos) {
    step_text = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
  }
  int64_t from = 0, to = 0, step = 0;
  const bool geometric = absl::StartsWith(step_text, "x");
  if (!absl::SimpleAtoi(from_text, &from) || !absl::SimpleAtoi(rest, &to) ||
      !(absl::StartsWith(step_text, "x") || absl::StartsWith(step_text, "+")) ||
      !absl::SimpleAtoi(step_text.substr(1), &step)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "range '", item, "' is not FROM..TO, FROM..TO:+STEP or FROM..TO:xFACTOR (integers)"));
  }
  if (from > to || (geometric ? (step < 2 || from < 1) : step < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("range '", item,
                     "' is empty or does not advance (need FROM <= TO, +STEP >= 1, xFACTOR >= 2)"));
  }
  for (int64_t v = from; v <= to; v = geometric ? v * step : v + step) {
    if (out.size() >= kMaxValues) {
      return absl::InvalidArgumentError(absl::StrCat("range '", item, "' has too many values"));
    }
    out.push_back(absl::StrCat(v));
  }
  return true;
}

}  // namespace

absl::StatusOr<Vary> ParseVary(absl::string_view key_equals_values) {
  const size_t eq = key_equals_values.find('=');
  if (eq == absl::string_view::npos || eq == 0 || eq + 1 == key_equals_values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--vary expects KEY=V1,V2,... (e.g. training.seq_len=2048,4096 or cluster.nodes=2..64:x2), "
        "got '",
        key_equals_values, "'"));
  }
  Vary v;
  v.key = std::string(key_equals_values.substr(0, eq));
  for (absl::string_view item : absl::StrSplit(key_equals_values.substr(eq + 1), ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--vary ", v.key, ": empty value"));
    }
    auto range = ExpandRange(item, v.values);
    if (!range.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("--vary ", v.key, ": ", range.status().message()));
    if (!*range) v.values.push_back(std::string(item));
  }
  return v;
}

absl::StatusOr<size_t> ProductSize(const std::vector<Vary>& varies) {
  size_t n = 1;
  for (const Vary& v : varies) {
    if (v.values.empty()) return size_t{0};
  }
  for (const Vary& v : varies) {
    if (n > kMaxSweepConfigurations / v.values.size()) {
      std::vector<std::string> counts;
      for (const Vary& w : varies) counts.push_back(absl::StrCat(w.values.size()));
      return absl::InvalidArgumentError(absl::StrCat(
          "--vary: ", absl::StrJoin(counts, " x "), " values make more than the ",
          kMaxSweepConfigurations, " configurations one sweep runs; vary fewer values"));
    }
    n *= v.values.size();
  }
  return n;
}

std::vector<std::vector<config::Override>> Product(const std::vector<Vary>& varies) {
  std::vector<std::vector<config::Override>> out = {{}};
  for (const Vary& v : varies) {
    std::vector<std::vector<config::Override>> next;
    next.reserve(out.size() * v.values.size());
    for (const auto& prefix : out) {
      for (const std::string& value : v.values) {
        auto combo = prefix;
        combo.push_back({v.key, value});
        next.push_back(std::move(combo));
      }
    }
    out = std::move(next);
  }
  return out;
}

absl::StatusOr<Shard> ParseShard(absl::string_view k_slash_n) {
  std::vector<std::string> parts = absl::StrSplit(k_slash_n, '/');
  Shard s;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &s.k) || !absl::SimpleAtoi(parts[1], &s.n) ||
      s.n < 1 || s.k < 1 || s.k > s.n || s.n > 1'000'000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--shard expects K/N with 1 <= K <= N <= 1000000 (e.g. 3/16), got '", k_slash_n, "'"));
  }
  return s;
}

Slice SliceOf(const Shard& s, size_t total) {
  const size_t k = static_cast<size_t>(s.k), n = static_cast<size_t>(s.n);
  return Slice{total * (k - 1) / n, total * k / n};
}

}  // namespace sim::explore
