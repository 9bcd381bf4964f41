#pragma once
// JSON from input files (Hugging Face configs, DeepSpeed configs, profiler traces): parsed by
// nlohmann/json, every failure a located error instead of an exception.

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace sim {

// Parses `text`; `path` names it in errors. Malformed JSON is "PATH:LINE:COLUMN: not JSON
// (...)"; a number beyond a double's range, which nlohmann/json reports as out_of_range.406
// without its place, is located by its text: "PATH:LINE:COLUMN: the number N is out of range".
absl::StatusOr<nlohmann::json> ParseJsonFile(const std::string& text, const std::string& path);

}  // namespace sim
