#include "sim/base/json_parse.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sim {

namespace {

// The line and column (from 1) of byte `offset` of `text`.
std::pair<int64_t, int64_t> LineColumn(const std::string& text, size_t offset) {
  int64_t line = 1, column = 1;
  for (size_t i = 0; i < std::min(offset, text.size()); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// Where `token` first stands as a whole number in `text` (not inside a longer one or a
// string's text, as far as a scan for its neighbours tells); text.size() if nowhere.
size_t NumberAt(const std::string& text, const std::string& token) {
  auto part = [](char c) {
    return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
  };
  for (size_t at = text.find(token); at != std::string::npos; at = text.find(token, at + 1)) {
    const bool starts = at == 0 || !part(text[at - 1]);
    const size_t end = at + token.size();
    if (starts && (end == text.size() || !part(text[end]))) return at;
  }
  return text.size();
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseJsonFile(const std::string& text, const std::string& path) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    const auto [line, column] = LineColumn(text, e.byte > 0 ? e.byte - 1 : 0);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", line, ":", column, ": not JSON (", e.what(), ")"));
  } catch (const nlohmann::json::exception& e) {
    // out_of_range.406: "number overflow parsing 'TOKEN'".
    const std::string what = e.what();
    const size_t open = what.find('\''), close = what.rfind('\'');
    if (e.id == 406 && open != std::string::npos && close > open) {
      const std::string token = what.substr(open + 1, close - open - 1);
      const size_t at = NumberAt(text, token);
      if (at < text.size()) {
        const auto [line, column] = LineColumn(text, at);
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line, ":", column, ": the number ", token, " is out of range"));
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(path, ": not JSON (", what, ")"));
  }
}

}  // namespace sim
