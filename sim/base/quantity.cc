#include "sim/base/quantity.h"

#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace sim {
namespace {

struct Split {
  double value;
  std::string unit;
};

// Splits "80 GiB" / "80GiB" into 80 and "GiB". The number is the longest prefix strtod accepts.
absl::StatusOr<Split> SplitNumberUnit(absl::string_view text, absl::string_view expected) {
  std::string s(absl::StripAsciiWhitespace(text));
  if (s.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty value; expected a number with a unit (", expected, ")"));
  }
  size_t end = 0;
  while (end < s.size() &&
         (absl::ascii_isdigit(s[end]) || s[end] == '.' || s[end] == '+' || s[end] == '-' ||
          ((s[end] == 'e' || s[end] == 'E') && end > 0 && end + 1 < s.size() &&
           (absl::ascii_isdigit(s[end + 1]) || s[end + 1] == '-' || s[end + 1] == '+')))) {
    ++end;
  }
  double value = 0;
  if (end == 0 || !absl::SimpleAtod(s.substr(0, end), &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", s, "' does not start with a number; expected e.g. ", expected));
  }
  std::string unit(absl::StripAsciiWhitespace(s.substr(end)));
  if (unit.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", s, "' has no unit; expected one of ", expected));
  }
  if (value < 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", s, "' is negative"));
  }
  return Split{value, unit};
}

using UnitTable = std::vector<std::pair<absl::string_view, double>>;

absl::StatusOr<double> Scale(absl::string_view text, const UnitTable& table,
                             absl::string_view what) {
  std::vector<absl::string_view> names;
  for (const auto& [name, factor] : table) names.push_back(name);
  const std::string expected = absl::StrJoin(names, ", ");
  auto split = SplitNumberUnit(text, expected);
  if (!split.ok()) return split.status();
  for (const auto& [name, factor] : table) {
    if (split->unit != name) continue;
    // No quantity stepsim reads (a size, a bandwidth, a rate, a latency) is negative.
    if (split->value < 0) {
      return absl::InvalidArgumentError(absl::StrCat("a ", what, " cannot be negative, got '",
                                                     absl::StripAsciiWhitespace(text), "'"));
    }
    return split->value * factor;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown ", what, " unit '", split->unit, "' in '",
                                                 absl::StripAsciiWhitespace(text),
                                                 "'; expected one of ", expected));
}

const UnitTable& ByteUnits() {
  static const UnitTable t = {{"B", 1},
                              {"kB", 1e3},
                              {"KB", 1e3},
                              {"MB", 1e6},
                              {"GB", 1e9},
                              {"TB", 1e12},
                              {"PB", 1e15},
                              {"KiB", 1024.0},
                              {"MiB", 1048576.0},
                              {"GiB", 1073741824.0},
                              {"TiB", 1099511627776.0}};
  return t;
}

const UnitTable& BandwidthUnits() {
  static const UnitTable t = {{"B/s", 1},        {"kB/s", 1e3},     {"MB/s", 1e6},
                              {"GB/s", 1e9},     {"TB/s", 1e12},    {"GiB/s", 1073741824.0},
                              {"b/s", 1 / 8.0},  {"kb/s", 1e3 / 8}, {"Mb/s", 1e6 / 8},
                              {"Gb/s", 1e9 / 8}, {"Gbps", 1e9 / 8}, {"Tb/s", 1e12 / 8}};
  return t;
}

const UnitTable& FlopRateUnits() {
  static const UnitTable t = {
      {"FLOP/s", 1}, {"GFLOP/s", 1e9}, {"TFLOP/s", 1e12}, {"PFLOP/s", 1e15}};
  return t;
}

const UnitTable& TimeUnits() {
  static const UnitTable t = {{"ps", 1e-12}, {"ns", 1e-9}, {"us", 1e-6}, {"\xC2\xB5s", 1e-6},
                              {"ms", 1e-3},  {"s", 1},     {"min", 60},  {"h", 3600}};
  return t;
}

const UnitTable& PowerUnits() {
  static const UnitTable t = {{"W", 1}, {"kW", 1e3}};
  return t;
}

}  // namespace

// Sizes and times are held as int64 (bytes, picoseconds): a value beyond these bounds is an
// input error, not an overflow (found by tools/fuzz.sh: "1e50 GiB").
constexpr double kMaxBytes = 0x1p62;            // 4.6e18 B = 4 EiB
constexpr double kMaxSeconds = 0x1p62 * 1e-12;  // about 53 days in picoseconds

absl::StatusOr<Bytes> ParseBytes(absl::string_view text) {
  auto v = Scale(text, ByteUnits(), "size");
  if (!v.ok()) return v.status();
  if (*v > kMaxBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("size '", text, "' is larger than the 2^62 bytes stepsim counts"));
  }
  return Bytes::Round(*v);
}

// The slowest link and the slowest processor stepsim prices: 1 MB/s (below a 10 Mb/s Ethernet
// port) and 1 GFLOP/s (below one CPU core). Below them, one op of a real model outlasts the
// 2^63 picoseconds (106 days) the replay's clock counts, so they are refused where they are
// read; 0 stays allowed where a file means "none" (a node without NICs).
constexpr double kMinBandwidth = 1e6;
constexpr double kMinFlopRate = 1e9;

absl::StatusOr<Bandwidth> ParseBandwidth(absl::string_view text) {
  auto v = Scale(text, BandwidthUnits(), "bandwidth");
  if (!v.ok()) return v.status();
  if (*v != 0 && !(*v >= kMinBandwidth)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bandwidth '", absl::StripAsciiWhitespace(text),
                     "' is below the 1 MB/s stepsim prices (0 means none)"));
  }
  return Bandwidth::BytesPerSecond(*v);
}

absl::StatusOr<FlopRate> ParseFlopRate(absl::string_view text) {
  auto v = Scale(text, FlopRateUnits(), "FLOP rate");
  if (!v.ok()) return v.status();
  if (*v != 0 && !(*v >= kMinFlopRate)) {
    return absl::InvalidArgumentError(
        absl::StrCat("FLOP rate '", absl::StripAsciiWhitespace(text),
                     "' is below the 1 GFLOP/s stepsim prices (0 means none)"));
  }
  return FlopRate::PerSecond(*v);
}

absl::StatusOr<Duration> ParseDuration(absl::string_view text) {
  auto v = Scale(text, TimeUnits(), "time");
  if (!v.ok()) return v.status();
  if (*v > kMaxSeconds) {
    return absl::InvalidArgumentError(
        absl::StrCat("time '", text, "' is longer than the 2^62 ps (53 days) stepsim counts"));
  }
  return Duration::FromSeconds(*v);
}

absl::StatusOr<double> ParseWatts(absl::string_view text) {
  auto v = Scale(text, PowerUnits(), "power");
  if (!v.ok()) return v.status();
  if (*v > 1e6) {
    return absl::InvalidArgumentError(
        absl::StrCat("power '", text, "' is above the 1 MW stepsim reads for one GPU"));
  }
  return *v;
}

namespace {

// A count with an optional suffix from `suffixes` (text, factor; the longer first where one ends
// another); `expected` ends the error message.
absl::StatusOr<double> SuffixedCount(
    absl::string_view text, std::initializer_list<std::pair<absl::string_view, double>> suffixes,
    absl::string_view expected) {
  std::string s(absl::StripAsciiWhitespace(text));
  double factor = 1;
  for (const auto& [suffix, f] : suffixes) {
    if (absl::EndsWith(s, suffix)) {
      factor = f;
      s.resize(s.size() - suffix.size());
      break;
    }
  }
  double v = 0;
  if (s.empty() || !absl::SimpleAtod(s, &v) || !std::isfinite(v) || v < 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' ", expected));
  }
  return v * factor;
}

}  // namespace

absl::StatusOr<double> ParseCount(absl::string_view text) {
  return SuffixedCount(text,
                       {{"Ki", 1024.0},
                        {"Mi", 1048576.0},
                        {"Gi", 1073741824.0},
                        {"Ti", 1099511627776.0},
                        {"k", 1e3},
                        {"K", 1e3},
                        {"M", 1e6},
                        {"B", 1e9},
                        {"G", 1e9},
                        {"T", 1e12}},
                       "is not a count; expected e.g. 70e9, 7B, 2T, 500M (decimal) or 4Mi "
                       "(binary: 4 x 2^20)");
}

absl::StatusOr<MemoryMargin> ParseMemoryMargin(absl::string_view text) {
  const absl::string_view t = absl::StripAsciiWhitespace(text);
  if (absl::EndsWith(t, "%")) {
    double p = 0;
    if (!absl::SimpleAtod(t.substr(0, t.size() - 1), &p) || !(p >= 0 && p < 100)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "memory margin '", text, "' is not a share from 0 % to below 100 % (e.g. 5%)"));
    }
    return MemoryMargin{p / 100.0, Bytes()};
  }
  auto b = ParseBytes(t);
  if (!b.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory margin '", text, "' is neither a share (5%) nor bytes (2 GiB)"));
  }
  return MemoryMargin{0, *b};
}

std::string MemoryMarginText(const MemoryMargin& m) {
  if (m.bytes == Bytes()) return absl::StrFormat("%g%%", m.fraction * 100.0);
  if (m.fraction == 0) return absl::StrFormat("%.2f GiB", m.bytes.gib());
  return absl::StrFormat("%g%% + %.2f GiB", m.fraction * 100.0, m.bytes.gib());
}

}  // namespace sim
