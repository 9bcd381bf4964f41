// Fabric files (topologies/fabrics/NAME.yaml) and cluster topology files (topologies/NAME.yaml:
// a node type × a number of nodes × a fabric).

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/suggest.h"
#include "sim/config/catalog.h"
#include "sim/config/loaders.h"
#include "sim/config/yaml_fields.h"

namespace sim::config {

std::optional<FabricSpec> ReadFabric(const YAML::Node& node, absl::string_view path,
                                     YamlErrors& errors) {
  if (!CheckMapping(node, path,
                    {"schema_version", "name", "kind", "levels", "rail_optimized",
                     "oversubscription", "leaf_ports", "pod_leaves", "link_bandwidth",
                     "switch_latency", "source"},
                    errors)) {
    return std::nullopt;
  }
  FabricSpec f;
  auto req = [&](absl::string_view k) { return Key{node, k, path, true}; };
  auto opt = [&](absl::string_view k) { return Key{node, k, path, false}; };
  if (auto v = ReadString(req("name"), errors)) f.name = *v;
  ReadChoice(req("kind"), errors, {"fat_tree"});
  if (auto v = ReadInt(opt("levels"), errors, 2, 3)) f.levels = static_cast<int>(*v);
  if (auto v = ReadBool(opt("rail_optimized"), errors)) f.rail_optimized = *v;
  if (auto v = ReadDouble(opt("oversubscription"), errors, 1.0, 64.0)) f.oversubscription = *v;
  if (auto v = ReadInt(opt("leaf_ports"), errors, 2, 4096)) f.leaf_ports = *v;
  if (auto v = ReadInt(opt("pod_leaves"), errors, 1, 4096)) f.pod_leaves = *v;
  if (auto v = ReadBandwidth(req("link_bandwidth"), errors)) f.link_bandwidth = *v;
  if (auto v = ReadDuration(opt("switch_latency"), errors)) f.switch_latency = *v;
  if (auto v = ReadString(req("source"), errors)) f.source = *v;
  return f;
}

std::vector<std::string> CatalogFabricNames(const DataRoot& root) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root.FabricsDir(), ec)) {
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<FabricSpec> LoadFabric(const DataRoot& root, absl::string_view name_or_path) {
  std::string file(name_or_path);
  if (!absl::StrContains(file, '/') && !absl::EndsWith(file, ".yaml")) {
    file = root.FabricsDir() + "/" + file + ".yaml";
    if (!std::filesystem::exists(file)) {
      const auto names = CatalogFabricNames(root);
      return absl::NotFoundError(absl::StrCat("unknown fabric '", name_or_path, "'",
                                              DidYouMean(name_or_path, names),
                                              "; topologies/fabrics/ has ",
                                              absl::StrJoin(names, ", ")));
    }
  }
  auto doc = LoadYamlFile(file);
  if (!doc.ok()) return doc.status();
  YamlErrors errors(file);
  CheckSchemaVersion(*doc, errors);
  auto f = ReadFabric(*doc, "", errors);
  if (!errors.empty()) return errors.ToStatus();
  return *f;
}

absl::StatusOr<ClusterTopologyFile> LoadClusterTopology(const DataRoot& root,
                                                        const std::string& file) {
  auto doc = LoadYamlFile(file);
  if (!doc.ok()) return doc.status();
  auto catalogs = LoadCatalogs(root);
  if (!catalogs.ok()) return catalogs.status();
  YamlErrors errors(file);
  CheckSchemaVersion(*doc, errors);
  const YAML::Node& r = *doc;
  if (!CheckMapping(r, "", {"schema_version", "name", "node", "nodes", "fabric", "source"},
                    errors)) {
    return errors.ToStatus();
  }
  ClusterTopologyFile out;
  if (auto v = ReadString({r, "name", "", true}, errors)) out.name = *v;
  if (auto v = ReadString({r, "source", "", false}, errors)) out.source = *v;
  if (auto v = ReadInt({r, "nodes", "", true}, errors, 1, int64_t{1} << 20)) out.cluster.nodes = *v;
  if (auto v = ReadString({r, "node", "", true}, errors)) {
    std::vector<std::string> names;
    bool found = false;
    for (const NodeSpec& n : catalogs->nodes) {
      names.push_back(n.name);
      if (n.name == *v) {
        out.cluster.node = n;
        found = true;
      }
    }
    if (!found) {
      errors.Add(r["node"], "node",
                 absl::StrCat("unknown node type '", *v, "'", DidYouMean(*v, names)));
    } else if (auto g = FindGpu(catalogs->gpus, out.cluster.node.gpu); g.ok()) {
      out.cluster.gpu = *g;
    }
  }
  const YAML::Node f = Child(r, "fabric");
  if (!f.IsDefined()) {
    errors.Add(r, "fabric", "missing required key (a name in topologies/fabrics/ or a mapping)");
  } else if (f.IsMap()) {
    out.cluster.fabric = ReadFabric(f, "fabric", errors);
  } else if (auto v = ReadString({r, "fabric", "", true}, errors)) {
    auto fabric = LoadFabric(root, *v);
    if (!fabric.ok()) {
      errors.Add(f, "fabric", fabric.status().message());
    } else {
      out.cluster.fabric = *fabric;
    }
  }
  if (!errors.empty()) return errors.ToStatus();
  return out;
}

}  // namespace sim::config
