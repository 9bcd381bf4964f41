#pragma once
// Internal to sim/config: readers of one YAML node into a spec, shared by the file loaders and
// by inline definitions inside scenarios.

#include <optional>

#include "absl/strings/string_view.h"
#include "sim/config/catalog.h"
#include "sim/config/yaml_fields.h"
#include "sim/spec/hardware.h"
#include "sim/spec/model.h"

namespace sim::config {

std::optional<ModelSpec> ReadModel(const YAML::Node& node, absl::string_view path,
                                   YamlErrors& errors);
// Builds and validates a scenario from parsed YAML (overrides already applied). `embedded`:
// the mapping sits inside another file (a validation case) and has no schema_version.
// `problems` (if given) receives the problems of a failed build.
absl::StatusOr<Scenario> BuildScenario(const DataRoot& data, const std::string& path,
                                       const YAML::Node& root, const Catalogs& catalogs,
                                       bool embedded,
                                       std::vector<ConfigProblem>* problems = nullptr);

std::optional<FabricSpec> ReadFabric(const YAML::Node& node, absl::string_view path,
                                     YamlErrors& errors, const FabricLimits& limits);

std::optional<GpuSpec> ReadGpu(const YAML::Node& node, absl::string_view path, YamlErrors& errors);

}  // namespace sim::config
