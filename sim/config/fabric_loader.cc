// Fabric files (topologies/fabrics/NAME.yaml) and cluster topology files (topologies/NAME.yaml:
// a node type × a number of nodes × a fabric).

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/input_file.h"
#include "sim/base/suggest.h"
#include "sim/config/catalog.h"
#include "sim/config/loaders.h"
#include "sim/config/yaml_fields.h"

namespace sim::config {

namespace {

// "nodeN.nicK" -> (N, K), or nullopt.
std::optional<std::pair<int64_t, int64_t>> ParseNicEndpoint(const std::string& s) {
  int64_t n = 0, k = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "node%ld.nic%ld%c", &n, &k, &tail) == 2 && n >= 0 && k >= 0) {
    return std::pair{n, k};
  }
  return std::nullopt;
}

void ReadExplicit(const YAML::Node& node, const std::string& path, const FabricLimits& limits,
                  FabricSpec& f, YamlErrors& errors) {
  const YAML::Node sw = Child(node, "switches");
  if (!sw.IsDefined() || !sw.IsSequence()) {
    errors.Add(sw.IsDefined() ? sw : node, JoinPath(path, "switches"),
               "an explicit fabric needs a list of switch names");
  } else {
    for (size_t i = 0; i < sw.size(); ++i) {
      const std::string name = sw[i].IsScalar() ? sw[i].Scalar() : "";
      if (name.empty() || ParseNicEndpoint(name) ||
          std::find(f.switches.begin(), f.switches.end(), name) != f.switches.end()) {
        errors.Add(sw[i], absl::StrCat(JoinPath(path, "switches"), "[", i, "]"),
                   "switch names must be unique, non-empty and not of the form nodeN.nicK");
        continue;
      }
      f.switches.push_back(name);
    }
  }
  const YAML::Node links = Child(node, "links");
  if (!links.IsDefined() || !links.IsSequence()) {
    errors.Add(links.IsDefined() ? links : node, JoinPath(path, "links"),
               "an explicit fabric needs a list of links {a, b, bandwidth, latency}");
    return;
  }
  for (size_t i = 0; i < links.size(); ++i) {
    const std::string p = absl::StrCat(JoinPath(path, "links"), "[", i, "]");
    const YAML::Node l = links[i];
    if (!CheckMapping(l, p, {"a", "b", "bandwidth", "latency"}, errors)) continue;
    FabricLink link;
    link.latency = f.switch_latency;
    bool ok = true;
    for (const char* end : {"a", "b"}) {
      auto v = ReadString({l, end, p, true}, errors);
      if (!v) {
        ok = false;
        continue;
      }
      if (auto nic = ParseNicEndpoint(*v)) {
        if ((limits.nodes && nic->first >= *limits.nodes) ||
            (limits.nics && nic->second >= *limits.nics)) {
          errors.Add(l[end], JoinPath(p, end),
                     absl::StrCat("dangling link: '", *v, "' is not a NIC of this cluster (",
                                  limits.nodes.value_or(0), " nodes with ", limits.nics.value_or(0),
                                  " NICs each)"));
          ok = false;
        }
      } else if (std::find(f.switches.begin(), f.switches.end(), *v) == f.switches.end()) {
        errors.Add(l[end], JoinPath(p, end),
                   absl::StrCat("unknown switch '", *v, "'", DidYouMean(*v, f.switches),
                                "; endpoints are listed switches or nodeN.nicK"));
        ok = false;
      }
      (std::string(end) == "a" ? link.a : link.b) = *v;
    }
    if (auto v = ReadBandwidth({l, "bandwidth", p, true}, errors)) {
      link.bandwidth = *v;
    } else {
      ok = false;
    }
    if (auto v = ReadDuration({l, "latency", p, false}, errors)) link.latency = *v;
    if (ok) f.links.push_back(link);
  }
}

}  // namespace

std::optional<FabricSpec> ReadFabric(const YAML::Node& node, absl::string_view path,
                                     YamlErrors& errors, const FabricLimits& limits) {
  if (!CheckMapping(node, path,
                    {"schema_version", "name", "kind", "levels", "rail_optimized",
                     "oversubscription", "leaf_ports", "pod_leaves", "link_bandwidth",
                     "switch_latency", "transport", "sharp", "switches", "links", "source"},
                    errors)) {
    return std::nullopt;
  }
  FabricSpec f;
  auto req = [&](absl::string_view k) { return Key{node, k, path, true}; };
  auto opt = [&](absl::string_view k) { return Key{node, k, path, false}; };
  if (auto v = ReadString(req("name"), errors)) f.name = *v;
  if (auto v = ReadDuration(opt("switch_latency"), errors)) f.switch_latency = *v;
  if (auto v = ReadTransportName(opt("transport"), true, errors)) f.transport = *v;
  if (auto v = ReadBool(opt("sharp"), errors)) f.sharp = *v;
  // SHARP aggregates in InfiniBand switches (Quantum); NCCL's CollNet has no other transport.
  if (f.sharp && f.transport != "ib") {
    errors.Add(Child(node, "sharp"), JoinPath(path, "sharp"),
               absl::StrCat("in-network reduction (SHARP) needs an InfiniBand fabric "
                            "(transport: ib), not '",
                            f.transport, "'"));
  }
  if (auto v = ReadString(req("source"), errors)) f.source = *v;
  auto kind = ReadChoice(req("kind"), errors, {"fat_tree", "explicit"});
  if (kind && *kind == "explicit") {
    f.kind = FabricSpec::Kind::kExplicit;
    ReadExplicit(node, std::string(path), limits, f, errors);
    return f;
  }
  if (auto v = ReadInt(opt("levels"), errors, 2, 3)) f.levels = static_cast<int>(*v);
  if (auto v = ReadBool(opt("rail_optimized"), errors)) f.rail_optimized = *v;
  if (auto v = ReadDouble(opt("oversubscription"), errors, 1.0, 64.0)) f.oversubscription = *v;
  if (auto v = ReadInt(opt("leaf_ports"), errors, 2, 4096)) f.leaf_ports = *v;
  if (auto v = ReadInt(opt("pod_leaves"), errors, 1, 4096)) f.pod_leaves = *v;
  if (auto v = ReadBandwidth(req("link_bandwidth"), errors)) f.link_bandwidth = *v;
  return f;
}

std::vector<std::string> CatalogFabricNames(const DataRoot& root) {
  return YamlFilesIn(root.FabricsDir(), /*stems=*/true);
}

absl::StatusOr<FabricSpec> LoadFabric(const DataRoot& root, absl::string_view name_or_path,
                                      const FabricLimits& limits) {
  std::string file(name_or_path);
  if (!absl::StrContains(file, '/') && !absl::EndsWith(file, ".yaml")) {
    file = root.FabricsDir() + "/" + file + ".yaml";
    if (!PathExists(file)) {
      const auto names = CatalogFabricNames(root);
      return absl::NotFoundError(
          absl::StrCat("unknown fabric '", name_or_path, "'", DidYouMean(name_or_path, names),
                       "; topologies/fabrics/ has ", absl::StrJoin(names, ", ")));
    }
  }
  auto doc = LoadYamlFile(file);
  if (!doc.ok()) return doc.status();
  YamlErrors errors(file);
  CheckSchemaVersion(*doc, errors);
  auto f = ReadFabric(*doc, "", errors, limits);
  if (!errors.empty()) return errors.ToStatus();
  return *f;
}

absl::StatusOr<ClusterSpec> ResolveCluster(const DataRoot& root, absl::string_view node,
                                           int64_t nodes, std::optional<std::string> fabric) {
  auto catalogs = LoadCatalogs(root);
  if (!catalogs.ok()) return catalogs.status();
  ClusterSpec c;
  c.nodes = nodes;
  std::vector<std::string> names;
  const NodeSpec* found = nullptr;
  for (const NodeSpec& n : catalogs->nodes) {
    names.push_back(n.name);
    if (n.name == node) found = &n;
  }
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("unknown node type '", node, "'", DidYouMean(node, names)));
  }
  c.node = *found;
  auto g = FindGpu(catalogs->gpus, c.node.gpu);
  if (!g.ok()) return g.status();
  c.gpu = *g;
  if (c.gpus() > kMaxClusterGpus) {
    return absl::InvalidArgumentError(absl::StrCat("--nodes: ", nodes, " nodes of ",
                                                   c.node.gpus_per_node, " GPUs are above the ",
                                                   kMaxClusterGpus, " GPUs stepsim models"));
  }
  if (auto problem = FoldNvlinkDomain(c)) return absl::InvalidArgumentError("--nodes: " + *problem);
  if (fabric) {
    auto f = LoadFabric(root, *fabric, FabricLimits{nodes, c.node.nics_per_node});
    if (!f.ok()) return f.status();
    c.fabric = *f;
  }
  return c;
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
  if (!CheckMapping(r, "",
                    {"schema_version", "name", "node", "nodes", "fabric", "nccl_version", "source"},
                    errors)) {
    return errors.ToStatus();
  }
  ClusterTopologyFile out;
  if (auto v = ReadString({r, "name", "", true}, errors)) out.name = *v;
  if (auto v = ReadString({r, "source", "", false}, errors)) out.source = *v;
  if (auto v = ReadInt({r, "nodes", "", true}, errors, 1, int64_t{1} << 20)) out.cluster.nodes = *v;
  if (auto v = ReadNcclRelease({r, "nccl_version", "", false}, errors)) out.cluster.nccl = *v;
  if (const YAML::Node inline_node = Child(r, "node");
      inline_node.IsDefined() && inline_node.IsMap()) {
    // A node type described in the file, with the keys of topologies/nodes.yaml.
    if (auto n = ReadNodeType(inline_node, "node", catalogs->gpus, errors)) {
      out.cluster.node = *n;
      if (auto g = FindGpu(catalogs->gpus, n->gpu); g.ok()) out.cluster.gpu = *g;
    }
  } else if (auto v = ReadString({r, "node", "", true}, errors)) {
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
  if (out.cluster.gpus() > kMaxClusterGpus) {
    errors.Add(r["nodes"], "nodes",
               absl::StrCat(out.cluster.nodes, " nodes of ", out.cluster.node.gpus_per_node,
                            " GPUs are above the ", kMaxClusterGpus, " GPUs stepsim models"));
  } else if (auto problem = FoldNvlinkDomain(out.cluster)) {
    errors.Add(r["nodes"], "nodes", *problem);
  }
  const FabricLimits limits{out.cluster.nodes, out.cluster.node.nics_per_node};
  const YAML::Node f = Child(r, "fabric");
  if (!f.IsDefined()) {
    if (out.cluster.nodes > 1) {
      errors.Add(r, "fabric", "missing required key (a name in topologies/fabrics/ or a mapping)");
    }
  } else if (f.IsMap()) {
    out.cluster.fabric = ReadFabric(f, "fabric", errors, limits);
  } else if (auto v = ReadString({r, "fabric", "", true}, errors)) {
    auto fabric = LoadFabric(root, *v, limits);
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
