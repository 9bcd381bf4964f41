#pragma once
// Internal to sim/config: readers of one YAML node into a spec, shared by the file loaders and
// by inline definitions inside scenarios.

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/config/catalog.h"
#include "sim/config/yaml_fields.h"
#include "sim/spec/hardware.h"
#include "sim/spec/model.h"

namespace sim::config {

std::optional<ModelSpec> ReadModel(const YAML::Node& node, absl::string_view path,
                                   YamlErrors& errors);
// The model files a scenario loader has read, by the name `model:` gives: a plan or a sweep loads
// thousands of configurations of one scenario, and reading and parsing the model file each time
// took 4 % of a plan (perf, `plan llama2-70b`). Failures are not kept (they are reported, and the
// command stops). Thread-safe: the sweep's and the plan's workers share one loader.
class ModelCache {
 public:
  absl::StatusOr<ModelSpec> Load(const DataRoot& root, const std::string& name);

 private:
  std::mutex mu_;
  std::map<std::string, ModelSpec> models_;
};

// Builds and validates a scenario from parsed YAML (overrides already applied). `embedded`:
// the mapping sits inside another file (a validation case) and has no schema_version.
// `problems` (if given) receives the problems of a failed build. `models` (if given) keeps the
// model files read, by name.
absl::StatusOr<Scenario> BuildScenario(const DataRoot& data, const std::string& path,
                                       const YAML::Node& root, const Catalogs& catalogs,
                                       bool embedded,
                                       std::vector<ConfigProblem>* problems = nullptr,
                                       ModelCache* models = nullptr);

std::optional<FabricSpec> ReadFabric(const YAML::Node& node, absl::string_view path,
                                     YamlErrors& errors, const FabricLimits& limits);

// A transport name of sim/spec/transport.h's table: a network one (fabrics) or an intra-node
// one (node types); an unknown name is an error with the nearest valid one.
std::optional<std::string> ReadTransportName(const Key& key, bool network, YamlErrors& errors);

// An NCCL release, "2.27" or "2.28" with or without a patch number ("2.27.7"): the tuners
// reproduced (sim/cost/nccl_tuner.h). Another release is an error naming them.
std::optional<NcclRelease> ReadNcclRelease(const Key& key, YamlErrors& errors);

// Why `watts` cannot be g's power limit (no rated power to scale from, or outside (0, TDP]).
std::optional<std::string> PowerLimitProblem(const GpuSpec& g, double watts);

std::optional<GpuSpec> ReadGpu(const YAML::Node& node, absl::string_view path, YamlErrors& errors);

// One node type (an entry of topologies/nodes.yaml, or a cluster file's inline `node:`).
std::optional<NodeSpec> ReadNodeType(const YAML::Node& node, const std::string& path,
                                     const std::vector<GpuSpec>& gpus, YamlErrors& errors);

}  // namespace sim::config
