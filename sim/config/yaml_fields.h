#pragma once
// Typed, located reads from yaml-cpp nodes. This header and its .cc are the only place (with the
// loaders beside them) that include yaml-cpp; everything above sim/config sees plain specs.
//
// Every error is collected, not thrown, as "FILE:LINE:COLUMN: KEY.PATH: message", so a file with
// three mistakes reports all three at once. yaml-cpp marks are 0-based and printed 1-based; a
// missing key is reported at its parent's position; a node that came from a command-line
// override has no position and is reported as "--set KEY.PATH". Reads go through
// `const YAML::Node&` because the non-const operator[] inserts keys.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/base/units.h"
#include "sim/config/catalog.h"
#include "sim/spec/enum_names.h"
#include "yaml-cpp/yaml.h"

namespace sim::config {

class YamlErrors {
 public:
  explicit YamlErrors(std::string file) : file_(std::move(file)) {}

  // `at` is the node the problem is in (or the parent of a missing key).
  void Add(const YAML::Node& at, absl::string_view key_path, absl::string_view message);
  // A problem with no single position (cross-field checks cite the first key involved).
  void AddUnlocated(absl::string_view key_path, absl::string_view message);
  void Append(const YamlErrors& other);

  bool empty() const { return problems_.empty(); }
  const std::string& file() const { return file_; }
  const std::vector<ConfigProblem>& problems() const { return problems_; }
  // InvalidArgument with one located line per problem (the first kMaxListed, then a count of
  // the rest); OK when there were none.
  absl::Status ToStatus() const;
  static constexpr size_t kMaxListed = 30;

 private:
  std::string file_;
  std::vector<ConfigProblem> problems_;
};

// map[key] when `node` is a mapping that has it, else an undefined node (never throws).
YAML::Node Child(const YAML::Node& node, absl::string_view key);

std::string JoinPath(absl::string_view parent, absl::string_view key);

// Keys of `map` that are not in `allowed` are errors with the nearest valid key. A node that is
// not a mapping is an error too (returns false).
bool CheckMapping(const YAML::Node& map, absl::string_view path,
                  const std::vector<std::string>& allowed, YamlErrors& errors);

// The readers return nullopt when the key is absent (the caller keeps its default) and also when
// the value is malformed (the error is recorded). `required` turns absence into an error.
struct Key {
  const YAML::Node& map;
  absl::string_view name;
  absl::string_view parent_path;
  bool required = false;
};

std::optional<std::string> ReadString(const Key& key, YamlErrors& errors);
// A copy of `n` built node by node, so that it has no position: positions parsed from a --set
// value would point into the value's text as if it were the scenario file. `n` is a checked
// tree (CheckYamlTree): finite and at most 64 levels deep.
YAML::Node Unplaced(const YAML::Node& n);

std::optional<int64_t> ReadInt(const Key& key, YamlErrors& errors, int64_t min, int64_t max);
// A list of integers, each within [min, max]: a YAML sequence, or one scalar of comma-separated
// values (as --set writes it); each bad entry reported at its own position.
std::optional<std::vector<int64_t>> ReadIntList(const YAML::Node& list, const std::string& path,
                                                int64_t min, int64_t max, YamlErrors& errors);
// The same for numbers in [min, max] (finite).
std::optional<std::vector<double>> ReadDoubleList(const YAML::Node& list, const std::string& path,
                                                  double min, double max, YamlErrors& errors);
// A whole count, written plainly or as DeepSpeed's configs do ("5e8", "200M"; sim/base/quantity.h
// ParseCount).
std::optional<int64_t> ReadCount(const Key& key, YamlErrors& errors, int64_t min, int64_t max);
std::optional<double> ReadDouble(const Key& key, YamlErrors& errors, double min, double max);
std::optional<bool> ReadBool(const Key& key, YamlErrors& errors);
std::optional<std::string> ReadChoice(const Key& key, YamlErrors& errors,
                                      const std::vector<std::string>& choices);
// A value named in its enum's table (sim/spec/enum_names.h); `only` narrows the valid values
// (in the order errors list them), else every value of the table.
template <class E>
std::optional<E> ReadEnum(const Key& key, YamlErrors& errors, std::vector<E> only = {}) {
  std::vector<std::string> names;
  if (only.empty()) {
    names = EnumNameList<E>();
  } else {
    for (E e : only) names.emplace_back(EnumName(e));
  }
  auto v = ReadChoice(key, errors, names);
  if (!v) return std::nullopt;
  return EnumFromName<E>(*v);
}
std::optional<Bytes> ReadBytes(const Key& key, YamlErrors& errors);
std::optional<Bandwidth> ReadBandwidth(const Key& key, YamlErrors& errors);
std::optional<FlopRate> ReadFlopRate(const Key& key, YamlErrors& errors);
std::optional<Duration> ReadDuration(const Key& key, YamlErrors& errors);
std::optional<double> ReadWatts(const Key& key, YamlErrors& errors);

// Reads schema_version and requires it to be 1.
void CheckSchemaVersion(const YAML::Node& root, YamlErrors& errors);

// Parses a whole file (read through ReadInputFile: bounded, regular files only) that must hold
// one YAML document whose top is a mapping; anything else is a located InvalidArgument: a
// syntax error, an empty or comment-only file, several documents, a single value or a list.
absl::StatusOr<YAML::Node> LoadYamlFile(const std::string& path);
// The same for text already read; `path` names it in errors.
absl::StatusOr<YAML::Node> ParseYamlMapping(const std::string& text, const std::string& path);

// Whether `node`, its aliases expanded, is a finite tree of at most 1,000,000 nodes and 64
// levels (ParseYamlMapping checks every file so); InvalidArgument at the place, named by
// `path`, otherwise.
absl::Status CheckYamlTree(const YAML::Node& node, const std::string& path);

}  // namespace sim::config
