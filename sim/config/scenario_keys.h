#pragma once
// The registry of scenario keys (docs/reference.md "Scenario files", docs/reference.md): every key
// a scenario file may hold, with its type, its default and what it means. The loader takes each
// section's allowed keys from it (unknown keys and "did you mean" use it), `stepsim run
// --list-keys` prints it, and docs/reference.md's table of scenario keys is its Markdown rendering
// (a test compares them). Defaults are read off a default-constructed Scenario
// (sim/spec/scenario.h), so each is still written once.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace sim::config {

// The values an integer key takes, both ends included.
struct IntegerRange {
  int64_t min = 0, max = 0;
};

struct ScenarioKey {
  std::string path;  // dotted: "training.seq_len"
  // What a value must be: "integer 1..1024" (an integer key's range, which the loader enforces
  // exactly: IntegerRangeOf reads it back), "bf16 | fp16 | fp8", ...
  std::string type;
  std::string default_text;  // the default, or "required", or whose default it is
  std::string meaning;
};

// Every key, sections in file order (top level, cluster, training, parallel, runtime).
const std::vector<ScenarioKey>& ScenarioKeys();

// The keys allowed directly under `section` ("" for the top level): the last path component.
std::vector<std::string> SectionKeys(absl::string_view section);

// The range of the integer key at `path` ("parallel.tp"); nullopt for any other key.
std::optional<IntegerRange> IntegerRangeOf(absl::string_view path);

// docs/reference.md's table: "| key | type | default | meaning |" and one row per key.
std::string ScenarioKeysMarkdown();

}  // namespace sim::config
