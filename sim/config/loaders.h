#pragma once
// Internal to sim/config: readers of one YAML node into a spec, shared by the file loaders and
// by inline definitions inside scenarios.

#include <optional>
#include "absl/strings/string_view.h"

#include "sim/config/yaml_fields.h"
#include "sim/spec/hardware.h"
#include "sim/spec/model.h"

namespace sim::config {

std::optional<ModelSpec> ReadModel(const YAML::Node& node, absl::string_view path,
                                   YamlErrors& errors);
std::optional<GpuSpec> ReadGpu(const YAML::Node& node, absl::string_view path, YamlErrors& errors);

}  // namespace sim::config
