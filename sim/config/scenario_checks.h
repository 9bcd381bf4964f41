#pragma once
// The scenario's second pass (sim/config/scenario_loader.cc): checks across sections and files on
// the scenario as read, all reported together, each at the key the user would change. The
// framework's own rules are its traits' (sim/workload/policy/framework_traits.h).

#include "sim/config/yaml_fields.h"
#include "sim/spec/scenario.h"
#include "yaml-cpp/yaml.h"

namespace sim::config {

void CheckConsistency(const YAML::Node& root, const Scenario& s, YamlErrors& errors);

}  // namespace sim::config
