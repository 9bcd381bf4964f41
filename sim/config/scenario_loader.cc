#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sim/base/check.h"
#include "sim/base/input_file.h"
#include "sim/base/quantity.h"
#include "sim/base/suggest.h"
#include "sim/base/utf8.h"
#include "sim/config/catalog.h"
#include "sim/config/loaders.h"
#include "sim/config/scenario_checks.h"
#include "sim/config/scenario_keys.h"
#include "sim/config/yaml_fields.h"
#include "sim/spec/projections.h"
#include "sim/spec/stage_split.h"
#include "sim/workload/policy/framework_traits.h"

namespace sim::config {

DataRoot DataRoot::Default() {
  if (const char* env = std::getenv("STEPSIM_DATA_DIR"); env != nullptr && *env != '\0') {
    return DataRoot{env};
  }
  return DataRoot{STEPSIM_SOURCE_DIR};
}

absl::StatusOr<DataRoot> DataRoot::WithCalibrations(const std::vector<std::string>& files) {
  DataRoot root = Default();
  for (const std::string& file : files) {
    auto c = LoadCalibrationFile(root, file);
    if (!c.ok()) return c.status();
    root.calibrations.push_back(*std::move(c));
  }
  return root;
}

std::string DataRoot::ResolveScenarioPath(const std::string& scenario) const {
  if (!PathExists(scenario) && std::filesystem::path(scenario).is_relative() &&
      PathExists(path + "/" + scenario)) {
    return path + "/" + scenario;
  }
  return scenario;
}

absl::StatusOr<Override> ParseOverride(absl::string_view key_equals_value) {
  std::pair<std::string, std::string> kv =
      absl::StrSplit(key_equals_value, absl::MaxSplits('=', 1));
  if (kv.first.empty() || !absl::StrContains(key_equals_value, '=')) {
    return absl::InvalidArgumentError(
        absl::StrCat("--set expects KEY=VALUE with a dotted key (parallel.zero=2), got '",
                     key_equals_value, "'"));
  }
  return Override{kv.first, kv.second};
}

namespace {

// An integer key read within the range the key registry documents for it (IntegerRangeOf), so
// that `stepsim run --list-keys` and the reference state the bounds the loader enforces.
std::optional<int64_t> ReadRegisteredInt(const Key& key, YamlErrors& errors) {
  const auto range = IntegerRangeOf(JoinPath(key.parent_path, key.name));
  SIM_CHECK(range.has_value(), "an integer key without a range in the key registry");
  return ReadInt(key, errors, range->min, range->max);
}

absl::Status ApplyOverride(YAML::Node root, const Override& o) {
  // Keys and values are text that reports and JSON write back: a byte that is not UTF-8 is
  // refused here (the message quotes the text before it), not met by the JSON writer.
  for (const std::string* text : {&o.key, &o.value}) {
    if (const size_t valid = Utf8ValidPrefix(*text); valid < text->size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--set ", absl::string_view(o.key).substr(0, Utf8ValidPrefix(o.key)), ": byte 0x",
          absl::Hex(static_cast<unsigned char>((*text)[valid]), absl::kZeroPad2), " after '",
          absl::string_view(*text).substr(0, valid), "' in the ", text == &o.key ? "key" : "value",
          " is not UTF-8, the text encoding stepsim reads"));
    }
  }
  std::vector<std::string> parts = absl::StrSplit(o.key, '.');
  YAML::Node node = root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node child = node[parts[i]];
    if (child.IsScalar()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--set ", o.key, ": '", parts[i], "' holds the single value '", child.Scalar(),
          "', not a mapping; write the whole mapping in the scenario file instead"));
    }
    if (!child.IsDefined() || child.IsNull()) child = YAML::Node(YAML::NodeType::Map);
    node[parts[i]] = child;
    node.reset(node[parts[i]]);
  }
  // A node built from a string has no position, so errors about it say "--set KEY". A value in
  // YAML's flow form ([q, v] or {k: v}) is the list or mapping it writes, as in a scenario file.
  const absl::string_view value = absl::StripLeadingAsciiWhitespace(o.value);
  if (absl::StartsWith(value, "[") || absl::StartsWith(value, "{")) {
    YAML::Node flow;
    try {
      flow = YAML::Load(o.value);
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--set ", o.key, ": '", o.value, "' is not a YAML flow list or mapping: ", e.msg));
    }
    if (absl::Status st = CheckYamlTree(flow, absl::StrCat("--set ", o.key)); !st.ok()) return st;
    node[parts.back()] = Unplaced(flow);
    return absl::OkStatus();
  }
  node[parts.back()] = YAML::Node(o.value);
  return absl::OkStatus();
}

// Resolves `model:` (catalog name, path relative to the scenario or the cwd, or inline mapping).
std::optional<ModelSpec> ResolveModel(const DataRoot& root, const YAML::Node& node,
                                      const std::string& scenario_file, ModelCache* models,
                                      YamlErrors& errors) {
  if (!node) return std::nullopt;  // reported by BuildScenario, at the mapping
  if (node.IsMap()) return ReadModel(node, "model", errors);
  if (!node.IsScalar()) {
    errors.Add(node, "model", "expected a model name, a path, or an inline mapping");
    return std::nullopt;
  }
  std::string name = node.Scalar();
  if (absl::StrContains(name, '/') || absl::EndsWith(name, ".yaml")) {
    const auto beside = std::filesystem::path(scenario_file).parent_path() / name;
    if (PathExists(beside.string())) name = beside.string();
  }
  auto m = models != nullptr ? models->Load(root, name) : LoadModel(root, name);
  if (!m.ok()) {
    errors.Add(node, "model", m.status().message());
    return std::nullopt;
  }
  return *m;
}

// `cluster.nodes` as a list of {node: NAME, count: N}: a mixed cluster (ClusterSpec::groups),
// whose first group's node and GPU become the cluster's `node` and `gpu`.
void ReadNodeGroups(const YAML::Node& list, const std::vector<NodeSpec>& nodes,
                    const std::vector<GpuSpec>& gpus, bool have_node, ClusterSpec& c,
                    YamlErrors& errors) {
  const std::string path = "cluster.nodes";
  if (have_node) {
    errors.Add(list, path,
               "a list of node types makes a mixed cluster: give each type in the list, not "
               "cluster.node beside it");
    return;
  }
  if (list.size() == 0) {
    errors.Add(list, path, "expected at least one {node: NAME, count: N}");
    return;
  }
  std::vector<std::string> names;
  for (const NodeSpec& n : nodes) names.push_back(n.name);
  int64_t total = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = absl::StrCat(path, "[", i, "]");
    const YAML::Node item = list[i];
    if (!CheckMapping(item, at, {"node", "count"}, errors)) return;
    auto k = [&](absl::string_view name) { return Key{item, name, at, true}; };
    const auto name = ReadString(k("node"), errors);
    const auto count = ReadInt(k("count"), errors, 1, kMaxClusterGpus);
    if (!name || !count) return;
    NodeGroup g;
    bool found = false;
    for (const NodeSpec& n : nodes) {
      if (absl::EqualsIgnoreCase(n.name, *name)) {
        g.node = n;
        found = true;
      }
    }
    if (!found) {
      errors.Add(item["node"], JoinPath(at, "node"),
                 absl::StrCat("unknown node type '", *name, "'", DidYouMean(*name, names)));
      return;
    }
    auto gpu = FindGpu(gpus, g.node.gpu);
    if (!gpu.ok()) {
      errors.Add(item["node"], JoinPath(at, "node"), gpu.status().message());
      return;
    }
    g.gpu = *gpu;
    g.count = *count;
    if (!c.groups.empty() && g.node.gpus_per_node != c.groups.front().node.gpus_per_node) {
      errors.Add(
          item["node"], JoinPath(at, "node"),
          absl::StrCat("a mixed cluster's node types must hold as many GPUs each: '", g.node.name,
                       "' has ", g.node.gpus_per_node, ", '", c.groups.front().node.name, "' ",
                       c.groups.front().node.gpus_per_node));
      return;
    }
    total += g.count;
    c.groups.push_back(std::move(g));
  }
  c.node = c.groups.front().node;
  c.gpu = c.groups.front().gpu;
  c.nodes = total;
  if (c.groups.size() == 1) c.groups.clear();  // one type is no mix
}

// A GPU's sustained dense GEMM rate in the scenario's precision, relative units: its datasheet
// peak (fp8's when training in fp8 and it has one; else bf16's, or fp16's) times its calibrated
// GEMM efficiency and its clocks under its power limit.
double GemmRate(const GpuSpec& g, Precision p) {
  std::optional<FlopRate> peak = p == Precision::kFp8 && g.fp8 ? g.fp8 : g.bf16 ? g.bf16 : g.fp16;
  if (!peak) return 0;
  return peak->per_second() * g.calibration.gemm_efficiency * g.SustainedClock();
}

// A mixed cluster with a plain pipeline and no split given: each stage's share of the layers in
// proportion to its GPUs' GEMM rate (largest remainders, at least one each), so that stages on
// faster GPUs take more layers and the stages' times come out about even. An interleaved
// schedule, or any split the scenario gives, is left as it is.
void BalanceMixedStages(Scenario& s) {
  ParallelSpec& par = s.parallel;
  if (s.cluster.groups.empty() || par.pp < 2 || par.pp_chunks != 1 || !par.pp_layers.empty() ||
      par.first_stage_layers || par.last_stage_layers || s.cluster.gpus() % par.pp != 0 ||
      s.model.layers < par.pp) {
    return;
  }
  const std::vector<int32_t> group = s.StageGroups();
  std::vector<double> rate;
  double sum = 0;
  for (int32_t g : group) {
    rate.push_back(GemmRate(s.cluster.groups[g].gpu, s.training.precision));
    sum += rate.back();
  }
  if (sum <= 0) return;
  const int64_t spare = s.model.layers - par.pp;  // one layer per stage first
  std::vector<int64_t> layers(par.pp, 1);
  std::vector<std::pair<double, int64_t>> remainder;
  int64_t given = 0;
  for (int64_t st = 0; st < par.pp; ++st) {
    const double exact = static_cast<double>(spare) * rate[st] / sum;
    const auto whole = static_cast<int64_t>(exact);
    layers[st] += whole;
    given += whole;
    remainder.push_back({-(exact - static_cast<double>(whole)), st});
  }
  std::sort(remainder.begin(), remainder.end());
  for (int64_t i = 0; i < spare - given; ++i) ++layers[remainder[i].second];
  par.pp_layers = layers;
  par.pp_layers_balanced = true;
}

// `cluster.variability` (VariabilitySpec).
void ReadVariability(const YAML::Node& node, VariabilitySpec& v, YamlErrors& errors) {
  const std::string path = "cluster.variability";
  if (!CheckMapping(node, path, SectionKeys(path), errors)) return;
  auto k = [&](absl::string_view name) { return Key{node, name, path, false}; };
  if (auto d = ReadEnum<SpeedDistribution>(k("distribution"), errors)) v.distribution = *d;
  if (auto x = ReadDouble(k("gemm_cv"), errors, 0.0, 0.5)) v.gemm_cv = *x;
  if (auto x = ReadDouble(k("memory_cv"), errors, 0.0, 0.5)) v.memory_cv = *x;
  if (const YAML::Node t = Child(node, "speeds"); t.IsDefined()) {
    if (auto x = ReadDoubleList(t, JoinPath(path, "speeds"), 0.05, 2.0, errors)) v.speeds = *x;
  }
  if (auto x = ReadDouble(k("slow_nodes"), errors, 0.0, 1.0)) v.slow_node_share = *x;
  if (auto x = ReadDouble(k("slow_node_speed"), errors, 0.05, 1.0)) v.slow_node_speed = *x;
  if (auto x = ReadDouble(k("slow_gpus"), errors, 0.0, 1.0)) v.slow_gpu_share = *x;
  if (auto x = ReadDouble(k("slow_gpu_speed"), errors, 0.05, 1.0)) v.slow_gpu_speed = *x;
  if (auto x = ReadDouble(k("slow_links"), errors, 0.0, 1.0)) v.slow_link_share = *x;
  if (auto x = ReadDouble(k("slow_link_speed"), errors, 0.05, 1.0)) v.slow_link_speed = *x;
  if (auto x = ReadRegisteredInt(k("seed"), errors)) v.seed = *x;
}

void ReadCluster(const DataRoot& data, const YAML::Node& node, const std::vector<GpuSpec>& gpus,
                 const std::vector<NodeSpec>& nodes, ClusterSpec& c, YamlErrors& errors) {
  const std::string p = "cluster";
  if (!node) return;  // reported by BuildScenario, at the mapping
  if (!CheckMapping(node, p, SectionKeys(p), errors)) {
    return;
  }
  auto k = [&](absl::string_view name) { return Key{node, name, p, false}; };
  bool have_node = false;
  if (auto v = ReadString(k("node"), errors)) {
    std::vector<std::string> names;
    for (const NodeSpec& n : nodes) {
      names.push_back(n.name);
      if (absl::EqualsIgnoreCase(n.name, *v)) {
        c.node = n;
        have_node = true;
      }
    }
    if (!have_node) {
      errors.Add(node["node"], "cluster.node",
                 absl::StrCat("unknown node type '", *v, "'", DidYouMean(*v, names),
                              "; or describe the node inline with gpu, gpus_per_node, "
                              "intra_node_bandwidth, nics_per_node, nic_bandwidth"));
      return;
    }
  }
  if (const YAML::Node list = Child(node, "nodes"); list.IsSequence()) {
    ReadNodeGroups(list, nodes, gpus, have_node, c, errors);
    have_node = true;
  }
  std::string gpu_name = c.node.gpu;
  if (auto v = ReadString(k("gpu"), errors)) gpu_name = *v;
  if (!have_node) {
    c.node.name = "inline";
    c.node.source = "scenario";
    for (const char* required : {"gpu", "gpus_per_node", "intra_node_bandwidth"}) {
      if (!node[required]) {
        errors.Add(node, JoinPath(p, required),
                   "missing: an inline cluster (no `node:`) must give gpu, gpus_per_node and "
                   "intra_node_bandwidth");
      }
    }
  }
  if (!gpu_name.empty()) {
    auto g = FindGpu(gpus, gpu_name);
    if (!g.ok()) {
      errors.Add(node["gpu"], "cluster.gpu", g.status().message());
    } else {
      c.gpu = *g;
      c.node.gpu = g->name;
    }
  }
  if (auto v = ReadWatts(k("power_limit"), errors)) {
    if (auto problem = PowerLimitProblem(c.gpu, *v)) {
      errors.Add(node["power_limit"], "cluster.power_limit", *problem);
    } else {
      c.gpu.power_limit_watts = *v;
    }
  }
  const YAML::Node list = Child(node, "nodes");
  if (!list.IsSequence()) {
    if (auto v = ReadRegisteredInt(k("nodes"), errors)) c.nodes = *v;
  }
  if (auto v = ReadRegisteredInt(k("gpus_per_node"), errors)) c.node.gpus_per_node = *v;
  if (auto v = ReadBandwidth(k("intra_node_bandwidth"), errors)) c.node.intra_node_bandwidth = *v;
  if (auto v = ReadRegisteredInt(k("nics_per_node"), errors)) c.node.nics_per_node = *v;
  if (auto v = ReadBandwidth(k("nic_bandwidth"), errors)) c.node.nic_bandwidth = *v;
  if (auto v = ReadTransportName(k("intra_node_transport"), false, errors)) {
    c.node.intra_node_transport = *v;
  }
  if (auto v = ReadDuration(k("intra_node_latency"), errors)) c.node.intra_node_latency = *v;
  if (auto v = ReadDuration(k("inter_node_latency"), errors)) c.node.inter_node_latency = *v;
  if (auto v = ReadNcclRelease(k("nccl_version"), errors)) c.nccl = *v;
  if (const YAML::Node f = Child(node, "fabric"); f.IsDefined()) {
    const FabricLimits limits{c.nodes, c.node.nics_per_node};
    if (f.IsMap()) {
      c.fabric = ReadFabric(f, "cluster.fabric", errors, limits);
    } else if (auto v = ReadString(k("fabric"), errors)) {
      auto fabric = LoadFabric(data, *v, limits);
      if (!fabric.ok()) {
        errors.Add(f, "cluster.fabric", fabric.status().message());
      } else {
        c.fabric = *fabric;
      }
    }
  }
  if (auto v = ReadDouble(k("background_load"), errors, 0.0, 0.9)) c.background_load = *v;
  if (const YAML::Node v = Child(node, "variability"); v.IsDefined()) {
    ReadVariability(v, c.variability, errors);
  }
  if (c.gpus() > kMaxClusterGpus) {
    // The replay and the cluster graph grow with the GPUs (8 million took 17 GB).
    errors.Add(node["nodes"] ? node["nodes"] : node, "cluster.nodes",
               absl::StrCat(c.nodes, " nodes of ", c.node.gpus_per_node, " GPUs are ", c.gpus(),
                            " GPUs, above the ", kMaxClusterGpus,
                            " stepsim models (2^20: ten times the largest clusters built)"));
  } else if (auto problem = FoldNvlinkDomain(c)) {
    errors.Add(node["nodes"] ? node["nodes"] : node, "cluster.nodes", *problem);
  }
  if (c.nodes > 1 && (c.node.nics_per_node == 0 || c.node.nic_bandwidth.bytes_per_s() <= 0)) {
    errors.Add(node, "cluster.nics_per_node",
               "a cluster of more than one node needs nics_per_node and nic_bandwidth");
  }
}

// A list of E's names, or one string of names joined by commas or '+' (so that --set KEY=a,b
// works, and sweep --vary KEY=a,a+b varies whole lists): the names read, or none (with errors)
// when the list is empty or names something unknown. `what`: what one name stands for, in the
// errors.
template <typename E>
std::optional<std::vector<E>> ReadNameList(const YAML::Node& list, const std::string& path,
                                           absl::string_view what, YamlErrors& errors) {
  std::vector<std::pair<std::string, YAML::Node>> names;
  if (list.IsSequence()) {
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].IsScalar()) {
        errors.Add(list[i], absl::StrCat(path, "[", i, "]"), absl::StrCat("expected a ", what));
        continue;
      }
      names.push_back({list[i].Scalar(), list[i]});
    }
  } else if (list.IsScalar()) {
    for (absl::string_view part :
         absl::StrSplit(list.Scalar(), absl::ByAnyChar(",+"), absl::SkipEmpty())) {
      names.push_back({std::string(absl::StripAsciiWhitespace(part)), list});
    }
  }
  const std::string valid = absl::StrJoin(EnumNameList<E>(), ", ");
  if (names.empty()) {
    errors.Add(list, path, absl::StrCat("expected a non-empty list of ", what, "s (", valid, ")"));
    return std::nullopt;
  }
  std::vector<E> out;
  bool ok = true;
  for (const auto& [name, at] : names) {
    if (auto e = EnumFromName<E>(name)) {
      out.push_back(*e);
    } else {
      ok = false;
      errors.Add(at, path,
                 absl::StrCat("unknown ", what, " '", name, "'",
                              DidYouMean(name, EnumNameList<E>()), "; expected ", valid));
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

// training.finetune: {method, rank, alpha, targets}.
void ReadFinetune(const YAML::Node& node, FinetuneSpec& f, YamlErrors& errors) {
  const std::string p = "training.finetune";
  if (!node) return;
  if (!CheckMapping(node, p, SectionKeys(p), errors)) return;
  auto k = [&](absl::string_view name) { return Key{node, name, p, false}; };
  if (auto v = ReadEnum<FinetuneMethod>(k("method"), errors)) f.method = *v;
  if (auto v = ReadRegisteredInt(k("rank"), errors)) f.rank = *v;
  if (auto v = ReadDouble(k("alpha"), errors, 1e-6, 1e9)) f.alpha = *v;
  if (const YAML::Node targets = Child(node, "targets"); targets.IsDefined()) {
    if (auto list = ReadNameList<LoraTarget>(targets, p + ".targets", "projection", errors)) {
      f.targets.fill(false);
      for (LoraTarget t : *list) f.targets[static_cast<int>(t)] = true;
    }
  }
  // rank, alpha and targets stay in force but unused under method: full, so that one file can
  // be compared across methods (stepsim compare --finetune).
}

// training.routing: {distribution, skew, seed, capacity_factor, pad_to_capacity}.
void ReadRouting(const YAML::Node& node, RoutingSpec& r, YamlErrors& errors) {
  const std::string p = "training.routing";
  if (!CheckMapping(node, p, SectionKeys(p), errors)) return;
  auto k = [&](absl::string_view name) { return Key{node, name, p, false}; };
  if (auto v = ReadEnum<RoutingDistribution>(k("distribution"), errors)) r.distribution = *v;
  if (auto v = ReadDouble(k("skew"), errors, 0.0, 4.0)) r.skew = *v;
  if (auto v = ReadRegisteredInt(k("seed"), errors)) r.seed = *v;
  if (auto v = ReadDouble(k("capacity_factor"), errors, 0.01, 64.0)) r.capacity_factor = *v;
  if (auto v = ReadBool(k("pad_to_capacity"), errors)) r.pad_to_capacity = *v;
  if (r.pad_to_capacity && !r.capacity_factor) {
    errors.Add(Child(node, "pad_to_capacity"), p + ".pad_to_capacity",
               "padding to capacity needs training.routing.capacity_factor");
  }
}

// training.te_version: "MAJOR.MINOR", a patch number allowed ("2.11.0").
std::optional<TeVersion> ReadTeVersion(const Key& key, YamlErrors& errors) {
  auto v = ReadString(key, errors);
  if (!v) return std::nullopt;
  const std::vector<absl::string_view> parts = absl::StrSplit(*v, '.');
  TeVersion out;
  int64_t patch = 0;
  if ((parts.size() == 2 ||
       (parts.size() == 3 && absl::SimpleAtoi(parts[2], &patch) && patch >= 0)) &&
      absl::SimpleAtoi(parts[0], &out.major) && absl::SimpleAtoi(parts[1], &out.minor) &&
      out.major >= 0 && out.major < 100 && out.minor >= 0 && out.minor < 100) {
    return out;
  }
  errors.Add(key.map[std::string(key.name)], JoinPath(key.parent_path, key.name),
             absl::StrCat("Transformer Engine ", *v,
                          " is not a release number: expected MAJOR.MINOR, as in \"2.11\" (a "
                          "patch number may follow)"));
  return std::nullopt;
}

void ReadTraining(const YAML::Node& node, TrainingSpec& t, YamlErrors& errors) {
  const std::string p = "training";
  if (!node) return;
  if (!CheckMapping(node, p, SectionKeys(p), errors)) {
    return;
  }
  auto k = [&](absl::string_view name) { return Key{node, name, p, false}; };
  if (auto v = ReadRegisteredInt(k("seq_len"), errors)) t.seq_len = *v;
  if (auto v = ReadRegisteredInt(k("micro_batch"), errors)) t.micro_batch = *v;
  if (auto v = ReadRegisteredInt(k("global_batch"), errors)) t.global_batch = *v;
  if (auto v = ReadRegisteredInt(k("global_batch_tokens"), errors)) {
    t.global_batch_tokens = *v;
  }
  if (auto v = ReadEnum<Precision>(k("precision"), errors)) t.precision = *v;
  if (auto v = ReadEnum<OptimizerKind>(k("optimizer"), errors)) t.optimizer = *v;
  if (auto v = ReadEnum<OptimizerImpl>(k("optimizer_impl"), errors)) t.optimizer_impl = *v;
  if (auto v = ReadEnum<Recompute>(k("recompute"), errors)) t.recompute = *v;
  if (auto v = ReadRegisteredInt(k("recompute_every"), errors)) t.recompute_every = *v;
  if (auto v = ReadRegisteredInt(k("recompute_layers"), errors)) t.recompute_layers = *v;
  if (auto v = ReadEnum<RecomputeMethod>(k("recompute_method"), errors)) t.recompute_method = *v;
  if (const YAML::Node m = Child(node, "recompute_modules"); m.IsDefined()) {
    if (auto list = ReadNameList<RecomputeModule>(m, "training.recompute_modules",
                                                  "recompute module", errors)) {
      t.recompute_modules = 0;
      for (RecomputeModule r : *list) t.recompute_modules |= ModuleBit(r);
    }
    // In force under recompute: selective only, and kept under the other policies, so that one
    // file can be swept or planned across policies.
  }
  if (auto v = ReadEnum<AttentionKernel>(k("attention"), errors)) t.attention = *v;
  if (auto v = ReadEnum<FlashImpl>(k("flash_impl"), errors)) t.flash_impl = *v;
  if (auto v = ReadEnum<KernelFusion>(k("kernels"), errors)) t.kernels = *v;
  if (auto v = ReadEnum<KernelLibrary>(k("kernel_library"), errors)) t.kernel_library = *v;
  if (auto v = ReadTeVersion(k("te_version"), errors)) t.te_version = *v;
  if (auto v = ReadBool(k("fp8_params"), errors)) t.fp8_params = *v;
  if (auto v = ReadEnum<Fp8Recipe>(k("fp8_recipe"), errors)) t.fp8_recipe = *v;
  if (auto v = ReadEnum<KernelFusion>(k("norm_kernel"), errors)) t.norm_kernel = *v;
  if (auto v = ReadEnum<LossKernel>(k("loss"), errors)) t.loss = *v;
  if (auto v = ReadRegisteredInt(k("loss_chunks"), errors)) t.loss_chunks = *v;
  if (auto v = ReadRegisteredInt(k("packing"), errors)) t.packing = *v;
  if (const YAML::Node lengths = Child(node, "document_lengths"); lengths.IsDefined()) {
    if (auto v = ReadIntList(lengths, "training.document_lengths", 1, int64_t{1} << 24, errors)) {
      t.document_lengths = *v;
    }
  }
  if (auto v = ReadBool(k("optimizer_in_backward"), errors)) t.optimizer_in_backward = *v;
  if (const YAML::Node r = Child(node, "routing"); r.IsDefined()) {
    ReadRouting(r, t.routing, errors);
  }
  if (const YAML::Node f = Child(node, "finetune"); f.IsDefined()) {
    ReadFinetune(f, t.finetune, errors);
  }
  if (t.recompute == Recompute::kNone && t.recompute_every > 1) {
    errors.Add(node["recompute_every"], "training.recompute_every",
               "checkpoints every K-th layer with the recompute policy, but training.recompute "
               "is none: set it to full, selective or op");
  }
  if (t.recompute_layers && t.recompute != Recompute::kFull) {
    errors.Add(node["recompute_layers"], "training.recompute_layers",
               "Megatron-LM's --recompute-num-layers applies to full recompute only; set "
               "training.recompute: full");
  }
  if (node["recompute_method"] && !t.recompute_layers) {
    errors.Add(node["recompute_method"], "training.recompute_method",
               "needs training.recompute_layers (the N of --recompute-num-layers)");
  }
  if (t.recompute_layers && t.recompute_every > 1) {
    errors.Add(node["recompute_layers"], "training.recompute_layers",
               "give either recompute_layers (Megatron-LM) or recompute_every (torchtitan), not "
               "both");
  }
  if (node["loss_chunks"] && t.loss && *t.loss != LossKernel::kChunked &&
      *t.loss != LossKernel::kChunkedCompiled) {
    errors.Add(node["loss_chunks"], "training.loss_chunks",
               "applies to training.loss: chunked or chunked_compiled");
  }
}

// "tp-cp-dp-pp" -> the dimensions innermost first; each of the four exactly once.
std::optional<std::array<ParallelDim, 4>> ParseRankOrder(absl::string_view text) {
  const std::vector<std::string> parts = absl::StrSplit(text, '-');
  if (parts.size() != 4) return std::nullopt;
  std::array<ParallelDim, 4> order{};
  std::array<bool, 4> seen{};
  for (size_t i = 0; i < 4; ++i) {
    const std::optional<ParallelDim> d = EnumFromName<ParallelDim>(parts[i]);
    if (!d || seen[static_cast<int>(*d)]) return std::nullopt;
    seen[static_cast<int>(*d)] = true;
    order[i] = *d;
  }
  return order;
}

void ReadParallel(const YAML::Node& node, ParallelSpec& par, YamlErrors& errors) {
  const std::string p = "parallel";
  if (!node) return;
  if (!CheckMapping(node, p, SectionKeys(p), errors)) {
    return;
  }
  auto k = [&](absl::string_view name) { return Key{node, name, p, false}; };
  if (auto v = ReadEnum<Framework>(k("framework"), errors)) par.framework = *v;
  if (auto v = ReadInt(k("zero"), errors, 0, 3)) par.zero = *v;
  if (auto v = ReadRegisteredInt(k("tp"), errors)) par.tp = *v;
  if (auto v = ReadRegisteredInt(k("pp"), errors)) par.pp = *v;
  if (auto v = ReadRegisteredInt(k("cp"), errors)) par.cp = *v;
  if (auto v = ReadEnum<CpKind>(k("cp_kind"), errors)) par.cp_kind = *v;
  if (auto v = ReadRegisteredInt(k("ep"), errors)) par.ep = *v;
  if (auto v = ReadRegisteredInt(k("etp"), errors)) par.etp = *v;
  if (auto v = ReadEnum<PipelineSchedule>(k("pp_schedule"), errors)) par.pp_schedule = *v;
  if (auto v = ReadRegisteredInt(k("pp_chunks"), errors)) par.pp_chunks = *v;
  if (auto v = ReadRegisteredInt(k("first_stage_layers"), errors)) par.first_stage_layers = *v;
  if (auto v = ReadRegisteredInt(k("last_stage_layers"), errors)) par.last_stage_layers = *v;
  if (const YAML::Node layers = Child(node, "pp_layers"); layers.IsDefined()) {
    if (auto v = ReadIntList(layers, "parallel.pp_layers", 1, 100000, errors)) par.pp_layers = *v;
  }
  if (auto v = ReadBool(k("tp_comm_overlap"), errors)) par.tp_comm_overlap = *v;
  if (auto v = ReadBool(k("overlap_grad_reduce"), errors)) par.overlap_grad_reduce = *v;
  if (auto v = ReadBool(k("overlap_param_gather"), errors)) par.overlap_param_gather = *v;
  if (auto v = ReadString(k("rank_order"), errors)) {
    if (auto order = ParseRankOrder(*v)) {
      par.rank_order = *order;
    } else {
      errors.Add(node["rank_order"], "parallel.rank_order",
                 absl::StrCat("expected the four dimensions tp, cp, dp, pp joined by '-', "
                              "innermost first (e.g. tp-cp-dp-pp), got '",
                              *v, "'"));
    }
  }
  if (auto v = ReadBool(k("sequence_parallel"), errors)) par.sequence_parallel = *v;
  if (auto v = ReadRegisteredInt(k("prefetch"), errors)) par.prefetch = *v;
  if (const YAML::Node d = Child(node, "deepspeed"); d.IsDefined()) {
    const std::string dp = "parallel.deepspeed";
    if (CheckMapping(d, dp, SectionKeys(dp), errors)) {
      auto dk = [&](absl::string_view name) { return Key{d, name, dp, false}; };
      constexpr int64_t kMaxElements = int64_t{1} << 50;
      DeepSpeedSpec& ds = par.deepspeed;
      if (auto v = ReadCount(dk("reduce_bucket_size"), errors, 1, kMaxElements))
        ds.reduce_bucket_size = *v;
      if (auto v = ReadCount(dk("allgather_bucket_size"), errors, 1, kMaxElements))
        ds.allgather_bucket_size = *v;
      if (auto v = ReadCount(dk("stage3_prefetch_bucket_size"), errors, 0, kMaxElements))
        ds.stage3_prefetch_bucket_size = *v;
      if (auto v = ReadCount(dk("stage3_max_live_parameters"), errors, 0, kMaxElements))
        ds.stage3_max_live_parameters = *v;
      if (auto v = ReadCount(dk("stage3_max_reuse_distance"), errors, 0, kMaxElements))
        ds.stage3_max_reuse_distance = *v;
      if (auto v = ReadCount(dk("sub_group_size"), errors, 1, kMaxElements)) ds.sub_group_size = *v;
      if (auto v = ReadBool(dk("contiguous_gradients"), errors)) ds.contiguous_gradients = *v;
      ds.stage3_limits_set = Child(d, "stage3_prefetch_bucket_size").IsDefined() ||
                             Child(d, "stage3_max_live_parameters").IsDefined() ||
                             Child(d, "stage3_max_reuse_distance").IsDefined();
    }
  }
  if (auto v = ReadBytes(k("bucket"), errors)) par.bucket = *v;
  if (auto v = ReadEnum<FsdpSharding>(k("sharding"), errors)) par.sharding = *v;
  if (auto v = ReadInt(k("fsdp_version"), errors, 1, 2)) par.fsdp_version = *v;
  if (auto v =
          ReadEnum<Dtype>(k("reduce_dtype"), errors, {Dtype::kBf16, Dtype::kFp16, Dtype::kFp32})) {
    par.reduce_dtype = *v;
  }
  if (auto v = ReadBool(k("store_param_remainders"), errors)) par.store_param_remainders = *v;
  if (auto v = ReadEnum<CollectiveAlgorithm>(k("collective"), errors)) par.collective = *v;
  if (auto v = ReadBool(k("gradient_as_bucket_view"), errors)) par.gradient_as_bucket_view = *v;
  if (const YAML::Node o = Child(node, "offload"); o.IsDefined()) {
    const std::string op = "parallel.offload";
    if (CheckMapping(o, op, SectionKeys(op), errors)) {
      auto ok = [&](absl::string_view name) { return Key{o, name, op, false}; };
      if (auto v = ReadEnum<OffloadTarget>(ok("optimizer"), errors)) par.offload.optimizer = *v;
      if (auto v = ReadEnum<OffloadTarget>(ok("params"), errors)) par.offload.params = *v;
      if (auto v = ReadEnum<OffloadTarget>(ok("activations"), errors,
                                           {OffloadTarget::kNone, OffloadTarget::kCpu})) {
        par.offload.activations = *v == OffloadTarget::kCpu;
      }
    }
  }
}

void ReadRuntime(const YAML::Node& node, RuntimeSpec& r, YamlErrors& errors) {
  if (!node) return;
  if (!CheckMapping(node, "runtime", SectionKeys("runtime"), errors)) return;
  if (auto v = ReadBytes({node, "reserved", "runtime", false}, errors)) r.reserved = *v;
  if (auto v = ReadBool({node, "expandable_segments", "runtime", false}, errors)) {
    r.expandable_segments = *v;
  }
  if (auto v = ReadString({node, "headroom", "runtime", false}, errors)) {
    auto m = ParseMemoryMargin(*v);
    if (m.ok()) {
      r.headroom = *m;
    } else {
      errors.Add(node["headroom"], "runtime.headroom", m.status().message());
    }
  }
}

// `run:` (RunSpec): the whole run's inputs, each optional.
void ReadRun(const YAML::Node& node, RunSpec& r, YamlErrors& errors) {
  if (!node) return;
  if (!CheckMapping(node, "run", SectionKeys("run"), errors)) return;
  auto k = [&](absl::string_view name) { return Key{node, name, "run", false}; };
  if (auto v = ReadCount(k("tokens"), errors, 1, int64_t{1} << 60)) {
    r.tokens = static_cast<double>(*v);
  }
  if (auto v = ReadDuration(k("detect"), errors)) r.detect = *v;
  if (auto v = ReadDuration(k("restart"), errors)) r.restart = *v;
  if (auto v = ReadRegisteredInt(k("trials"), errors)) r.trials = *v;
  if (auto v = ReadRegisteredInt(k("seed"), errors)) r.seed = *v;
  if (const YAML::Node f = Child(node, "failures"); f.IsDefined()) {
    const std::string path = "run.failures";
    if (CheckMapping(f, path, SectionKeys(path), errors)) {
      auto fk = [&](absl::string_view name) { return Key{f, name, path, false}; };
      for (auto [name, slot] :
           {std::pair{"gpu", &r.failures.gpu}, std::pair{"hbm", &r.failures.hbm},
            std::pair{"network", &r.failures.network}, std::pair{"host", &r.failures.host},
            std::pair{"software", &r.failures.software},
            std::pair{"planned", &r.failures.planned_per_node_hour}}) {
        if (auto v = ReadDouble(fk(name), errors, 0.0, 1.0)) *slot = *v;
      }
    }
  }
  if (const YAML::Node c = Child(node, "checkpoint"); c.IsDefined()) {
    const std::string path = "run.checkpoint";
    if (CheckMapping(c, path, SectionKeys(path), errors)) {
      auto ck = [&](absl::string_view name) { return Key{c, name, path, false}; };
      const YAML::Node interval = Child(c, "interval");
      if (interval.IsDefined() && !(interval.IsScalar() && interval.Scalar() == "optimal")) {
        if (auto v = ReadDuration(ck("interval"), errors)) {
          if (*v > Duration()) {
            r.checkpoint_interval = *v;
          } else {
            errors.Add(interval, "run.checkpoint.interval", "must be longer than 0 s, or optimal");
          }
        }
      }
      if (auto v = ReadBool(ck("async"), errors)) r.checkpoint_async = *v;
    }
  }
  if (const YAML::Node st = Child(node, "storage"); st.IsDefined()) {
    const std::string path = "run.storage";
    if (CheckMapping(st, path, SectionKeys(path), errors)) {
      auto sk = [&](absl::string_view name) { return Key{st, name, path, false}; };
      for (auto [name, slot] : {std::pair{"node_bandwidth", &r.storage_node},
                                std::pair{"aggregate_bandwidth", &r.storage_aggregate}}) {
        if (auto v = ReadBandwidth(sk(name), errors)) {
          if (v->bytes_per_s() > 0) {
            *slot = *v;
          } else {
            errors.Add(Child(st, name), JoinPath(path, name), "must be more than 0 B/s");
          }
        }
      }
    }
  }
  if (const YAML::Node e = Child(node, "energy"); e.IsDefined()) {
    const std::string path = "run.energy";
    if (CheckMapping(e, path, SectionKeys(path), errors)) {
      auto ek = [&](absl::string_view name) { return Key{e, name, path, false}; };
      if (auto v = ReadDouble(ek("pue"), errors, 1.0, 10.0)) r.pue = *v;
      if (auto v = ReadWatts(ek("host_power"), errors)) r.host_watts = *v;
      if (auto v = ReadDouble(ek("idle_share"), errors, 0.0, 1.0)) r.idle_share = *v;
      if (auto v = ReadDouble(ek("comm_share"), errors, 0.0, 1.0)) r.comm_share = *v;
      if (auto v = ReadDouble(ek("grid_intensity"), errors, 0.0, 1e5)) r.grid_g_per_kwh = *v;
    }
  }
  if (const YAML::Node c = Child(node, "cost"); c.IsDefined()) {
    const std::string path = "run.cost";
    if (CheckMapping(c, path, SectionKeys(path), errors)) {
      auto ck = [&](absl::string_view name) { return Key{c, name, path, false}; };
      if (auto v = ReadDouble(ck("gpu_hour"), errors, 0.0, 1e6)) r.gpu_hour_usd = *v;
      if (auto v = ReadDouble(ck("capex_per_gpu"), errors, 0.0, 1e9)) r.capex_per_gpu_usd = *v;
      if (auto v = ReadDouble(ck("years"), errors, 0.1, 100.0)) r.years = *v;
      if (auto v = ReadDouble(ck("electricity"), errors, 0.0, 100.0)) {
        r.electricity_usd_per_kwh = *v;
      }
    }
  }
}

}  // namespace

absl::StatusOr<Scenario> BuildScenario(const DataRoot& data, const std::string& path,
                                       const YAML::Node& r, const Catalogs& catalogs, bool embedded,
                                       std::vector<ConfigProblem>* problems, ModelCache* models) {
  YamlErrors errors(path);
  // Hands the problems to the caller who asked for them, and returns the Status.
  auto failed = [&] {
    if (problems != nullptr) *problems = errors.problems();
    return errors.ToStatus();
  };
  if (!embedded) CheckSchemaVersion(r, errors);
  if (!CheckMapping(r, embedded ? "scenario" : "", SectionKeys(""), errors)) {
    return failed();
  }
  Scenario s;
  s.file = path;
  s.name = std::filesystem::path(path).stem().string();
  for (const char* required : {"model", "cluster"}) {
    if (!Child(r, required).IsDefined()) {
      errors.Add(r, embedded ? JoinPath("scenario", required) : required, "missing required key");
    }
  }
  if (auto v = ReadString({r, "name", "", false}, errors)) s.name = *v;
  if (auto m = ResolveModel(data, r["model"], path, models, errors)) s.model = *m;
  ReadCluster(data, r["cluster"], catalogs.gpus, catalogs.nodes, s.cluster, errors);
  ReadTraining(r["training"], s.training, errors);
  ReadParallel(r["parallel"], s.parallel, errors);
  ReadRuntime(r["runtime"], s.runtime, errors);
  ReadRun(r["run"], s.run, errors);
  if (!errors.empty()) return failed();
  if (!s.runtime.headroom.none()) {
    const Bytes usable = s.cluster.gpu.Usable();
    const Bytes margin = s.runtime.headroom.Of(usable);
    if (margin >= usable) {
      errors.Add(Child(Child(r, "runtime"), "headroom"), "runtime.headroom",
                 absl::StrFormat("a margin of %.2f GiB leaves nothing of the %s's %.2f GiB",
                                 margin.gib(), s.cluster.gpu.name, usable.gib()));
      return failed();
    }
    s.cluster.gpu.usable_hbm = usable - margin;
    s.runtime.headroom_taken = margin;
    for (NodeGroup& g : s.cluster.groups) {
      // The same rule on each type of a mixed cluster (its first group's GPU is the one above).
      const Bytes own = g.gpu.Usable();
      g.gpu.usable_hbm = own - std::min(own, s.runtime.headroom.Of(own));
    }
  }
  BalanceMixedStages(s);
  if (const int64_t tokens = s.training.global_batch_tokens; tokens > 0 && s.dp() > 0) {
    // The nearest whole number of steps' least batch (Megatron-LM's interleaved schedule needs
    // the micro-batches to be a multiple of pp); refused when even one overshoots by half.
    const int64_t unit =
        s.training.micro_batch * s.dp() *
        (s.parallel.pp_schedule == PipelineSchedule::kInterleaved ? s.parallel.pp : 1);
    const int64_t sequences = (tokens + s.training.seq_len / 2) / s.training.seq_len;
    const int64_t units = (sequences + unit / 2) / unit;
    if (units == 0) {
      const YAML::Node key = Child(Child(r, "training"), "global_batch_tokens");
      errors.Add(key.IsDefined() ? key : r, "training.global_batch_tokens",
                 absl::StrCat("global_batch_tokens ", tokens, " is ", sequences, " sequences of ",
                              s.training.seq_len, " tokens, less than half of one step's least, ",
                              unit, " (micro_batch x dp",
                              unit == s.training.micro_batch * s.dp() ? "" : " x pp", ")"));
      return failed();
    }
    s.training.global_batch = units * unit;
  }
  if (s.training.global_batch == 0) {
    s.training.global_batch = s.training.micro_batch * s.dp();
  }
  CheckConsistency(r, s, errors);
  if (!errors.empty()) return failed();
  return s;
}

absl::StatusOr<Catalogs> LoadCatalogs(const DataRoot& root) {
  Catalogs c;
  auto gpus = LoadGpuCatalog(root.GpuCatalogFile());
  if (!gpus.ok()) return gpus.status();
  c.gpus = *gpus;
  // Calibration files replace their GPU's calibration (LoadCalibrationFile checked the name).
  for (const CalibrationFile& f : root.calibrations) {
    for (GpuSpec& g : c.gpus) {
      if (absl::AsciiStrToLower(g.name) == absl::AsciiStrToLower(f.gpu))
        g.calibration = f.calibration;
    }
  }
  auto nodes = LoadNodeCatalog(root.NodeCatalogFile(), c.gpus);
  if (!nodes.ok()) return nodes.status();
  c.nodes = *nodes;
  return c;
}

// A scenario's text parsed once. A sweep loads one scenario per configuration: yaml-cpp's
// scanner took 1.2 million instructions per parse of scenarios/default.yaml (3.6 % of the
// 144-configuration sweep grid; callgrind), a clone of the parsed tree a small part of that.
// A clone loses the nodes' marks (yaml-cpp's NodeEvents emits none), which only error
// messages read (YamlErrors): Load builds from a clone and, when anything fails, builds again
// from a fresh parse, so that every message cites its line and column as before.
struct ParsedText {
  // None when the text does not parse (Load parses it again and reports why).
  static std::shared_ptr<const ParsedText> Of(absl::StatusOr<YAML::Node> doc) {
    if (!doc.ok()) return nullptr;
    auto p = std::make_shared<ParsedText>();
    p->root = *std::move(doc);
    return p;
  }
  // A deep copy of the tree, without marks. Serialized: yaml-cpp nodes are not safe to read
  // from several threads at once.
  YAML::Node Clone() const {
    std::lock_guard<std::mutex> lock(mu);
    return YAML::Clone(root);
  }
  YAML::Node root;
  mutable std::mutex mu;
};

struct ScenarioLoader::Impl {
  DataRoot data;
  std::string path;
  std::string text;
  std::vector<Override> base;  // applied before the caller's overrides
  Catalogs catalogs;
  // Shared by the copies of a loader; mutable as the cache it is (Load is const).
  std::shared_ptr<ModelCache> models = std::make_shared<ModelCache>();
  // `text` parsed once, when it parses (Load clones it instead of parsing it per call).
  std::shared_ptr<const ParsedText> parsed = nullptr;
};

absl::StatusOr<ModelSpec> ModelCache::Load(const DataRoot& root, const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = models_.find(name); it != models_.end()) return it->second;
  }
  auto m = LoadModel(root, name);  // outside the lock: a miss reads a file
  if (m.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    models_.emplace(name, *m);
  }
  return m;
}

absl::StatusOr<ScenarioLoader> ScenarioLoader::Open(const DataRoot& data, const std::string& path) {
  auto text = ReadInputFile(path);
  if (!text.ok()) return text.status();
  // Refuse an empty file, several documents or a top that is not a mapping now, before any
  // override is applied to it.
  auto doc = ParseYamlMapping(*text, path);
  if (!doc.ok()) return doc.status();
  auto catalogs = LoadCatalogs(data);
  if (!catalogs.ok()) return catalogs.status();
  auto impl = std::make_shared<Impl>(Impl{data, path, *std::move(text), {}, *std::move(catalogs)});
  impl->parsed = ParsedText::Of(std::move(doc));
  return ScenarioLoader(std::move(impl));
}

absl::StatusOr<ScenarioLoader> ScenarioLoader::FromText(const DataRoot& data, std::string text,
                                                        const std::string& origin) {
  auto catalogs = LoadCatalogs(data);
  if (!catalogs.ok()) return catalogs.status();
  auto impl = std::make_shared<Impl>(Impl{data, origin, std::move(text), {}, *std::move(catalogs)});
  impl->parsed = ParsedText::Of(ParseYamlMapping(impl->text, origin));
  return ScenarioLoader(std::move(impl));
}

absl::StatusOr<ScenarioLoader> ScenarioLoader::FromOverrides(const DataRoot& data,
                                                             std::vector<Override> base,
                                                             const std::string& origin) {
  auto catalogs = LoadCatalogs(data);
  if (!catalogs.ok()) return catalogs.status();
  auto impl =
      std::make_shared<Impl>(Impl{data, origin, "{}", std::move(base), *std::move(catalogs)});
  impl->parsed = ParsedText::Of(ParseYamlMapping(impl->text, origin));
  return ScenarioLoader(std::move(impl));
}

absl::StatusOr<Scenario> ScenarioLoader::Load(const std::vector<Override>& overrides,
                                              std::vector<ConfigProblem>* problems) const {
  // From the clone first; on any failure, again from a fresh parse, whose marks the messages
  // cite (ParsedText).
  auto build = [&](YAML::Node root, std::vector<ConfigProblem>* found) -> absl::StatusOr<Scenario> {
    for (const auto* list : {&impl_->base, &overrides}) {
      for (const Override& o : *list) {
        if (absl::Status st = ApplyOverride(root, o); !st.ok()) return st;
      }
    }
    return BuildScenario(impl_->data, impl_->path, root, impl_->catalogs, /*embedded=*/false, found,
                         impl_->models.get());
  };
  absl::StatusOr<Scenario> s = absl::UnknownError("not built");
  if (impl_->parsed) {
    std::vector<ConfigProblem> ignored;  // unlocated: the fresh parse below reports them
    s = build(impl_->parsed->Clone(), &ignored);
  }
  if (!s.ok()) {
    auto doc = ParseYamlMapping(impl_->text, impl_->path);
    if (!doc.ok()) return doc.status();
    s = build(*std::move(doc), problems);
  }
  if (s.ok()) {
    for (const Override& o : overrides) {
      if (o.key != "name") s->overrides.push_back(absl::StrCat(o.key, "=", o.value));
    }
  }
  return s;
}

const std::string& ScenarioLoader::path() const { return impl_->path; }

absl::StatusOr<Scenario> LoadScenario(const DataRoot& data, const std::string& path,
                                      const std::vector<Override>& overrides) {
  auto loader = ScenarioLoader::Open(data, path);
  if (!loader.ok()) return loader.status();
  return loader->Load(overrides);
}

}  // namespace sim::config
