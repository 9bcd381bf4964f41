#include "sim/config/yaml_fields.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sim/base/input_file.h"
#include "sim/base/quantity.h"
#include "sim/base/suggest.h"
#include "sim/base/utf8.h"

namespace sim::config {

void YamlErrors::Add(const YAML::Node& at, absl::string_view key_path, absl::string_view message) {
  if (!at.IsDefined()) {
    AddUnlocated(key_path, message);
    return;
  }
  const YAML::Mark mark = at.Mark();
  if (mark.is_null() || mark.line < 0) {
    // Nodes created by --set overrides carry no position.
    problems_.push_back({"--set", std::string(key_path), std::string(message), file_});
    return;
  }
  problems_.push_back({absl::StrCat(file_, ":", mark.line + 1, ":", mark.column + 1),
                       key_path.empty() ? "(top level)" : std::string(key_path),
                       std::string(message), file_, mark.line + 1, mark.column + 1});
}

void YamlErrors::AddUnlocated(absl::string_view key_path, absl::string_view message) {
  problems_.push_back({file_, std::string(key_path), std::string(message), file_});
}

void YamlErrors::Append(const YamlErrors& other) {
  problems_.insert(problems_.end(), other.problems_.begin(), other.problems_.end());
}

absl::Status YamlErrors::ToStatus() const {
  if (problems_.empty()) return absl::OkStatus();
  std::vector<std::string> lines;
  for (const ConfigProblem& p : problems_) {
    if (lines.size() == kMaxListed) {
      lines.push_back(
          absl::StrCat("... and ", problems_.size() - kMaxListed, " more problems in ", file_));
      break;
    }
    // "--set KEY (over FILE): message": the command line is the place, the file what it
    // overrides.
    lines.push_back(p.where == "--set"
                        ? absl::StrCat("--set ", p.key_path, " (over ", file_, "): ", p.message)
                        : absl::StrCat(p.where, ": ", p.key_path, ": ", p.message));
  }
  return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
}

YAML::Node Child(const YAML::Node& node, absl::string_view key) {
  if (!node.IsDefined() || !node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  return node[std::string(key)];
}

std::string JoinPath(absl::string_view parent, absl::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
}

bool CheckMapping(const YAML::Node& map, absl::string_view path,
                  const std::vector<std::string>& allowed, YamlErrors& errors) {
  if (!map.IsMap()) {
    errors.Add(map, path, "expected a mapping of keys to values");
    return false;
  }
  absl::flat_hash_set<std::string> seen;
  const absl::flat_hash_set<std::string> valid(allowed.begin(), allowed.end());
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) {
      errors.Add(kv.first, path, "expected a key name, got a list or mapping as a key");
      continue;
    }
    const std::string key = kv.first.Scalar();
    // YAML forbids repeated keys, but yaml-cpp keeps the first silently: say so.
    if (!seen.insert(key).second) {
      errors.Add(kv.first, JoinPath(path, key),
                 absl::StrCat("duplicate key '", key, "' (the mapping already has it)"));
    }
    if (!valid.contains(key)) {
      errors.Add(kv.first, JoinPath(path, key),
                 absl::StrCat("unknown key '", key, "'", DidYouMean(key, allowed),
                              "; valid keys: ", absl::StrJoin(allowed, ", ")));
    }
  }
  return true;
}

namespace {

// Returns the scalar text of map[name], or nullopt when absent/not a scalar (recording errors).
// A `map` that is not a mapping has no keys (Child): its own reader reports what it is, and
// yaml-cpp's operator[] on a scalar would throw (a GPU entry that is one word did).
std::optional<std::string> Scalar(const Key& key, YamlErrors& errors) {
  const YAML::Node node = Child(key.map, key.name);
  const std::string path = JoinPath(key.parent_path, key.name);
  if (!node.IsDefined() || node.IsNull()) {
    if (key.required) errors.Add(key.map, path, "missing required key");
    return std::nullopt;
  }
  if (!node.IsScalar()) {
    errors.Add(node, path, "expected a single value, not a list or mapping");
    return std::nullopt;
  }
  return node.Scalar();
}

YAML::Node At(const Key& key) { return Child(key.map, key.name); }

template <typename T, typename Parser>
std::optional<T> ReadDimensioned(const Key& key, YamlErrors& errors, Parser parse) {
  auto text = Scalar(key, errors);
  if (!text) return std::nullopt;
  auto v = parse(*text);
  if (!v.ok()) {
    errors.Add(At(key), JoinPath(key.parent_path, key.name), v.status().message());
    return std::nullopt;
  }
  return *v;
}

}  // namespace

std::optional<std::string> ReadString(const Key& key, YamlErrors& errors) {
  return Scalar(key, errors);
}

std::optional<int64_t> ReadInt(const Key& key, YamlErrors& errors, int64_t min, int64_t max) {
  auto text = Scalar(key, errors);
  if (!text) return std::nullopt;
  int64_t v = 0;
  const std::string path = JoinPath(key.parent_path, key.name);
  if (!absl::SimpleAtoi(*text, &v)) {
    errors.Add(At(key), path, absl::StrCat("expected an integer, got '", *text, "'"));
    return std::nullopt;
  }
  if (v < min || v > max) {
    errors.Add(At(key), path,
               max == std::numeric_limits<int64_t>::max()
                   ? absl::StrCat("must be at least ", min, ", got ", v)
                   : absl::StrCat("must be between ", min, " and ", max, ", got ", v));
    return std::nullopt;
  }
  return v;
}

namespace {

// The items of a list given as a YAML sequence or as one comma-separated scalar, each with the
// node it came from; none (with an error) when the list is empty or an item is not a scalar.
std::optional<std::vector<std::pair<std::string, YAML::Node>>> ListItems(const YAML::Node& list,
                                                                         const std::string& path,
                                                                         absl::string_view one,
                                                                         absl::string_view many,
                                                                         YamlErrors& errors) {
  std::vector<std::pair<std::string, YAML::Node>> items;
  if (list.IsSequence()) {
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].IsScalar()) {
        errors.Add(list[i], absl::StrCat(path, "[", i, "]"), absl::StrCat("expected ", one));
        return std::nullopt;
      }
      items.push_back({list[i].Scalar(), list[i]});
    }
  } else if (list.IsScalar()) {
    for (absl::string_view part : absl::StrSplit(list.Scalar(), ',', absl::SkipEmpty())) {
      items.push_back({std::string(absl::StripAsciiWhitespace(part)), list});
    }
  }
  if (items.empty()) {
    errors.Add(list, path, absl::StrCat("expected a non-empty list of ", many));
    return std::nullopt;
  }
  return items;
}

}  // namespace

std::optional<std::vector<int64_t>> ReadIntList(const YAML::Node& list, const std::string& path,
                                                int64_t min, int64_t max, YamlErrors& errors) {
  auto items = ListItems(list, path, "an integer", "integers", errors);
  if (!items) return std::nullopt;
  std::vector<int64_t> out;
  for (size_t i = 0; i < items->size(); ++i) {
    const auto& [text, node] = (*items)[i];
    const std::string at = absl::StrCat(path, "[", i, "]");
    int64_t v = 0;
    if (!absl::SimpleAtoi(text, &v)) {
      errors.Add(node, at, absl::StrCat("expected an integer, got '", text, "'"));
      return std::nullopt;
    }
    if (v < min || v > max) {
      errors.Add(node, at, absl::StrCat("must be between ", min, " and ", max, ", got ", v));
      return std::nullopt;
    }
    out.push_back(v);
  }
  return out;
}

std::optional<std::vector<double>> ReadDoubleList(const YAML::Node& list, const std::string& path,
                                                  double min, double max, YamlErrors& errors) {
  auto items = ListItems(list, path, "a number", "numbers", errors);
  if (!items) return std::nullopt;
  std::vector<double> out;
  for (size_t i = 0; i < items->size(); ++i) {
    const auto& [text, node] = (*items)[i];
    const std::string at = absl::StrCat(path, "[", i, "]");
    double v = 0;
    if (!absl::SimpleAtod(text, &v) || !std::isfinite(v)) {
      errors.Add(node, at, absl::StrCat("expected a number, got '", text, "'"));
      return std::nullopt;
    }
    if (v < min || v > max) {
      errors.Add(node, at, absl::StrCat("must be between ", min, " and ", max, ", got ", text));
      return std::nullopt;
    }
    out.push_back(v);
  }
  return out;
}

YAML::Node Unplaced(const YAML::Node& n) {
  if (n.IsSequence()) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (const YAML::Node& item : n) out.push_back(Unplaced(item));
    return out;
  }
  if (n.IsMap()) {
    YAML::Node out(YAML::NodeType::Map);
    for (const auto& kv : n) out[Unplaced(kv.first)] = Unplaced(kv.second);
    return out;
  }
  if (n.IsScalar()) return YAML::Node(n.Scalar());
  return YAML::Node(YAML::NodeType::Null);
}

std::optional<int64_t> ReadCount(const Key& key, YamlErrors& errors, int64_t min, int64_t max) {
  auto text = Scalar(key, errors);
  if (!text) return std::nullopt;
  const std::string path = JoinPath(key.parent_path, key.name);
  auto v = ParseCount(*text);
  if (!v.ok()) {
    errors.Add(At(key), path, v.status().message());
    return std::nullopt;
  }
  // Compared as doubles first, so that "1e30" is out of range rather than an overflow.
  if (!(*v >= static_cast<double>(min) && *v <= static_cast<double>(max)) || *v != std::floor(*v)) {
    errors.Add(
        At(key), path,
        absl::StrCat("must be a whole count between ", min, " and ", max, ", got '", *text, "'"));
    return std::nullopt;
  }
  return static_cast<int64_t>(*v);
}

std::optional<double> ReadDouble(const Key& key, YamlErrors& errors, double min, double max) {
  auto text = Scalar(key, errors);
  if (!text) return std::nullopt;
  double v = 0;
  const std::string path = JoinPath(key.parent_path, key.name);
  if (!absl::SimpleAtod(*text, &v)) {
    errors.Add(At(key), path, absl::StrCat("expected a number, got '", *text, "'"));
    return std::nullopt;
  }
  // Written so that NaN (which SimpleAtod accepts) fails it too.
  if (!(v >= min && v <= max)) {
    errors.Add(At(key), path, absl::StrCat("must be between ", min, " and ", max, ", got ", *text));
    return std::nullopt;
  }
  return v;
}

std::optional<bool> ReadBool(const Key& key, YamlErrors& errors) {
  auto text = Scalar(key, errors);
  if (!text) return std::nullopt;
  if (*text == "true") return true;
  if (*text == "false") return false;
  errors.Add(At(key), JoinPath(key.parent_path, key.name),
             absl::StrCat("expected true or false, got '", *text, "'"));
  return std::nullopt;
}

std::optional<std::string> ReadChoice(const Key& key, YamlErrors& errors,
                                      const std::vector<std::string>& choices) {
  auto text = Scalar(key, errors);
  if (!text) return std::nullopt;
  for (const std::string& c : choices) {
    if (*text == c) return text;
  }
  errors.Add(At(key), JoinPath(key.parent_path, key.name),
             absl::StrCat("'", *text, "' is not one of ", absl::StrJoin(choices, ", "),
                          DidYouMean(*text, choices)));
  return std::nullopt;
}

std::optional<Bytes> ReadBytes(const Key& key, YamlErrors& errors) {
  return ReadDimensioned<Bytes>(key, errors, ParseBytes);
}
std::optional<Bandwidth> ReadBandwidth(const Key& key, YamlErrors& errors) {
  return ReadDimensioned<Bandwidth>(key, errors, ParseBandwidth);
}
std::optional<double> ReadWatts(const Key& key, YamlErrors& errors) {
  return ReadDimensioned<double>(key, errors, ParseWatts);
}
std::optional<FlopRate> ReadFlopRate(const Key& key, YamlErrors& errors) {
  return ReadDimensioned<FlopRate>(key, errors, ParseFlopRate);
}
std::optional<Duration> ReadDuration(const Key& key, YamlErrors& errors) {
  return ReadDimensioned<Duration>(key, errors, ParseDuration);
}

void CheckSchemaVersion(const YAML::Node& root, YamlErrors& errors) {
  auto v = ReadInt({root, "schema_version", "", /*required=*/true}, errors, 1,
                   std::numeric_limits<int64_t>::max());
  if (v && *v != 1) {
    errors.Add(root["schema_version"], "schema_version",
               absl::StrCat("this stepsim reads schema_version 1, got ", *v));
  }
}

namespace {

// YAML aliases (*name) share a node: a mapping that names itself through one is a cycle, and
// aliases of aliases double at every level (a few hundred bytes expand to 2^25 nodes). Every
// reader walks the document as a tree, so a document is refused unless its tree, aliases
// expanded, is finite and of a size a stepsim file has: kMaxYamlNodes nodes, kMaxYamlDepth
// levels (the deepest stepsim key, a case's scenario's `set:`, is six).
constexpr int64_t kMaxYamlNodes = 1'000'000;
constexpr int kMaxYamlDepth = 64;

struct AliasWalk {
  const std::string& path;
  int64_t nodes = 0;
  std::vector<YAML::Node> open;  // the mappings and lists from the root to the current node

  absl::Status Visit(const YAML::Node& node) {
    const auto at = [&](const YAML::Node& n, absl::string_view what) {
      const YAML::Mark m = n.Mark();
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", m.line + 1, ":", m.column + 1, ": ", what));
    };
    if (++nodes > kMaxYamlNodes) {
      return at(node, absl::StrCat("the document, its aliases expanded, holds more than ",
                                   kMaxYamlNodes, " nodes"));
    }
    if (!node.IsMap() && !node.IsSequence()) return absl::OkStatus();
    for (const YAML::Node& o : open) {
      if (o.is(node)) return at(node, "an alias (*name) refers to a node that holds it");
    }
    if (open.size() >= kMaxYamlDepth) {
      return at(node, absl::StrCat("nested more than ", kMaxYamlDepth, " levels deep"));
    }
    open.push_back(node);
    for (const auto& child : node) {
      if (node.IsMap()) {
        if (absl::Status st = Visit(child.first); !st.ok()) return st;
        if (absl::Status st = Visit(child.second); !st.ok()) return st;
      } else if (absl::Status st = Visit(child); !st.ok()) {
        return st;
      }
    }
    open.pop_back();
    return absl::OkStatus();
  }
};

}  // namespace

absl::Status CheckYamlTree(const YAML::Node& node, const std::string& path) {
  AliasWalk walk{path, 0, {}};
  return walk.Visit(node);
}

absl::StatusOr<YAML::Node> ParseYamlMapping(const std::string& text, const std::string& path) {
  // YAML allows no C0 control character but tab, line feed and carriage return (YAML 1.2
  // §5.1); yaml-cpp 0.7 loops without end on some inputs holding NUL bytes (found by
  // tools/fuzz.sh), so such text is refused before it is parsed.
  int64_t line = 1, column = 1;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line, ":", column, ": control character 0x", absl::Hex(c, absl::kZeroPad2),
          " where YAML allows none (not a text file?)"));
    }
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  // YAML text is Unicode (YAML 1.2 §5.2), and stepsim reads it as UTF-8: a byte that is not
  // would reach the reports, whose JSON must be UTF-8, through a name or a value.
  if (const size_t valid = Utf8ValidPrefix(text); valid < text.size()) {
    const absl::string_view before(text.data(), valid);
    const size_t line_start = before.rfind('\n');
    return absl::InvalidArgumentError(absl::StrCat(
        path, ":", std::count(before.begin(), before.end(), '\n') + 1, ":",
        valid - (line_start == absl::string_view::npos ? 0 : line_start + 1) + 1, ": byte 0x",
        absl::Hex(static_cast<unsigned char>(text[valid]), absl::kZeroPad2),
        " is not UTF-8, the text encoding stepsim reads"));
  }
  // Documents are counted from their "---" lines, not with YAML::LoadAll, which loops without
  // end on some malformed input in yaml-cpp 0.7 (jbeder/yaml-cpp#1319); YAML::Load reads the
  // first document only and returns.
  int64_t separators = 0;
  bool content = false;
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    const bool separator = absl::StartsWith(l, "---") &&
                           (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    if (separator && content) ++separators;
    const absl::string_view body = absl::StripLeadingAsciiWhitespace(l);
    if (separator || (!body.empty() && body.front() != '#')) content = true;
  }
  if (separators > 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": holds ", separators + 1,
                                                   " YAML documents (separated by ---); a "
                                                   "stepsim file holds one"));
  }
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", e.mark.line + 1, ":", e.mark.column + 1, ": YAML syntax: ", e.msg));
  }
  if (!doc.IsDefined() || doc.IsNull()) {
    return absl::InvalidArgumentError(
        content ? absl::StrCat(path, ": not a YAML mapping (no document could be read from it)")
                : absl::StrCat(path, ": empty: no YAML mapping in it (only comments or nothing)"));
  }
  if (absl::Status st = CheckYamlTree(doc, path); !st.ok()) return st;
  if (!doc.IsMap()) {
    const YAML::Mark m = doc.Mark();
    return absl::InvalidArgumentError(absl::StrCat(path, ":", m.line + 1, ":", m.column + 1,
                                                   ": expected a mapping of keys to values, got ",
                                                   doc.IsScalar() ? "a single value" : "a list"));
  }
  return doc;
}

absl::StatusOr<YAML::Node> LoadYamlFile(const std::string& path) {
  auto text = ReadInputFile(path);
  if (!text.ok()) return text.status();
  return ParseYamlMapping(*text, path);
}

}  // namespace sim::config
