#pragma once
// Loading of the project's data files: models/, topologies/ and scenarios. Every function
// returns InvalidArgument (malformed input), NotFound (a name or file that does not exist) or
// FailedPrecondition (well-formed input that conflicts with the cluster), with one located line
// per problem.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/spec/hardware.h"
#include "sim/spec/model.h"
#include "sim/spec/scenario.h"
#include "sim/spec/validation_case.h"

namespace sim::config {

// A GPU's calibration from a file of its own (`stepsim calibrate --out`, read back with
// `--calibration FILE`): it replaces the catalog's calibration of that GPU.
struct CalibrationFile {
  std::string file;
  std::string gpu;  // the catalog name, as the catalog spells it
  GpuCalibration calibration;
};

// Where models/ and topologies/ live: $STEPSIM_DATA_DIR if set, else the source tree the binary
// was built from; and the calibration files that replace catalog calibrations.
struct DataRoot {
  std::string path;
  std::vector<CalibrationFile> calibrations = {};
  static DataRoot Default();
  // Default() with calibration files (`stepsim calibrate --out`) read, each replacing its GPU's
  // catalog calibration; a bad file is its located error.
  static absl::StatusOr<DataRoot> WithCalibrations(const std::vector<std::string>& files);
  // A scenario path as given, or, when that does not exist and is relative, the same path
  // under the root (so scenarios/default.yaml is found from any folder).
  std::string ResolveScenarioPath(const std::string& scenario) const;
  std::string ModelsDir() const { return path + "/models"; }
  std::string GpuCatalogFile() const { return path + "/topologies/gpus.yaml"; }
  std::string NodeCatalogFile() const { return path + "/topologies/nodes.yaml"; }
  std::string FabricsDir() const { return path + "/topologies/fabrics"; }
};

// The .yaml files of a folder, sorted: their paths, or their names without the extension.
std::vector<std::string> YamlFilesIn(const std::string& dir, bool stems);

absl::StatusOr<ModelSpec> LoadModelFile(const std::string& path);
// A catalog name ("llama2-70b") or a path to a model file ("my/model.yaml").
absl::StatusOr<ModelSpec> LoadModel(const DataRoot& root, absl::string_view name_or_path);
std::vector<std::string> CatalogModelNames(const DataRoot& root);

absl::StatusOr<std::vector<GpuSpec>> LoadGpuCatalog(const std::string& path);
// A calibration file: `schema_version: 1`, `gpu: NAME` (a GPU of the root's catalog) and
// `calibration:` with the keys of topologies/gpus.yaml's calibrations; optional `fit:` (what the
// fit rested on, written by stepsim calibrate).
absl::StatusOr<CalibrationFile> LoadCalibrationFile(const DataRoot& root, const std::string& path);
absl::StatusOr<std::vector<NodeSpec>> LoadNodeCatalog(const std::string& path,
                                                      const std::vector<GpuSpec>& gpus);
// Case-insensitive lookup by catalog name; NotFound with the nearest name.
absl::StatusOr<GpuSpec> FindGpu(const std::vector<GpuSpec>& gpus, absl::string_view name);

// What a fabric's NIC endpoints ("nodeN.nicK") may name, when the cluster is known.
struct FabricLimits {
  std::optional<int64_t> nodes, nics;
};

// A fabric by catalog name (topologies/fabrics/NAME.yaml) or path.
absl::StatusOr<FabricSpec> LoadFabric(const DataRoot& root, absl::string_view name_or_path,
                                      const FabricLimits& limits = {});
std::vector<std::string> CatalogFabricNames(const DataRoot& root);

// A cluster from a node type of the catalog, a node count and a fabric (a catalog name or a
// path; none: the non-blocking rail-optimised default), as the command line gives them.
// NotFound with the nearest name for an unknown node type or fabric.
absl::StatusOr<ClusterSpec> ResolveCluster(const DataRoot& root, absl::string_view node,
                                           int64_t nodes, std::optional<std::string> fabric);

// A cluster of nodes whose NVLink domain spans several of them (NodeSpec::nvlink_domain),
// folded so that the nodes of each domain are one priced node: the job takes ceil(nodes / k)
// domains of k = nvlink_domain / gpus_per_node nodes, split evenly, and each becomes one node
// of nodes/domains x gpus_per_node GPUs with the NICs and host of its nodes summed
// (NodeSpec::domain_nodes keeps how many). An error message when the nodes do not split
// evenly; nullopt when done or nothing to do.
std::optional<std::string> FoldNvlinkDomain(ClusterSpec& c);

// A cluster topology file (topologies/NAME.yaml): node type x nodes x fabric. The node type is
// a catalog name or a mapping with the keys of topologies/nodes.yaml; the fabric a catalog
// name, a path or a mapping, and may be left out on one node.
struct ClusterTopologyFile {
  std::string name;
  std::string source;
  ClusterSpec cluster;
};
absl::StatusOr<ClusterTopologyFile> LoadClusterTopology(const DataRoot& root,
                                                        const std::string& file);

// One --set KEY=VALUE: a dotted key path and a YAML scalar (or flow sequence/mapping) value.
struct Override {
  std::string key;
  std::string value;
};
absl::StatusOr<Override> ParseOverride(absl::string_view key_equals_value);

struct Catalogs {
  std::vector<GpuSpec> gpus;
  std::vector<NodeSpec> nodes;
};
absl::StatusOr<Catalogs> LoadCatalogs(const DataRoot& root);

// One problem found in an input: where (`file:line:column`, `--set`, or the file alone), the
// dotted key path, and what is wrong. A failed load's Status message is these, one per line, as
// "WHERE: KEY.PATH: MESSAGE"; callers that present problems their own way (stepsim plan) read
// them here instead of taking the message apart.
struct ConfigProblem {
  std::string where;
  std::string key_path;
  std::string message;
  // The same place as parts (the Python bindings' ScenarioError): the file the problem is in
  // (for a --set problem, the file it overrides) and its 1-based line and column, 0 when the
  // problem has no single position (a --set value, a cross-field check).
  std::string file = {};
  int line = 0, column = 0;
};

// A scenario file read once, loadable many times with different overrides (sweeps, plans).
// Load() is const and safe to call from several threads at once.
class ScenarioLoader {
 public:
  static absl::StatusOr<ScenarioLoader> Open(const DataRoot& root, const std::string& path);
  // A scenario held in memory as YAML text (tests); `origin` names it in error messages.
  static absl::StatusOr<ScenarioLoader> FromText(const DataRoot& root, std::string text,
                                                 const std::string& origin);
  // A scenario given as data: the keys of `base` applied to an empty document, as --set would
  // apply them (stepsim plan). `origin` names it in error messages.
  static absl::StatusOr<ScenarioLoader> FromOverrides(const DataRoot& root,
                                                      std::vector<Override> base,
                                                      const std::string& origin);
  // The scenario with `overrides` applied in order, validated. On failure, `problems` (if given)
  // receives each problem the Status message lists.
  absl::StatusOr<Scenario> Load(const std::vector<Override>& overrides,
                                std::vector<ConfigProblem>* problems = nullptr) const;
  const std::string& path() const;

 private:
  struct Impl;
  explicit ScenarioLoader(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Loads a validation case file (docs/model.md "Validation data"), every case's scenario resolved
// and validated.
absl::StatusOr<std::vector<ValidationCase>> LoadCases(const DataRoot& root,
                                                      const std::string& file);

// Loads a scenario file, applies the overrides in order, resolves catalog names and validates
// everything, reporting all problems at once.
absl::StatusOr<Scenario> LoadScenario(const DataRoot& root, const std::string& path,
                                      const std::vector<Override>& overrides);

}  // namespace sim::config
