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
#include "sim/base/suggest.h"
#include "sim/base/utf8.h"
#include "sim/config/catalog.h"
#include "sim/config/loaders.h"
#include "sim/config/scenario_keys.h"
#include "sim/config/yaml_fields.h"
#include "sim/spec/projections.h"
#include "sim/spec/stage_split.h"

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

constexpr int64_t kMaxCount = int64_t{1} << 40;
// Micro-batches a step may hold: folding (sim/replay/fold.h) replays a few whatever the count,
// and the fold's arithmetic stays in int64 picoseconds and bytes far below this; an unfolded
// replay is bounded by the program's size instead (sim/workload/lowering.h).
constexpr int64_t kMaxMicroBatches = int64_t{1} << 30;

// A copy of `n` built node by node, so that it has no position: positions parsed from a --set
// value would point into the value's text as if it were the scenario file. `n` is a checked
// tree (CheckYamlTree): finite and at most 64 levels deep.
YAML::Node Unplaced(const YAML::Node& n) {
  if (n.IsSequence()) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (const YAML::Node& item : n) out.push_back(Unplaced(item));
    return out;
  }
  if (n.IsMap()) {
    YAML::Node out(YAML::NodeType::Map);
    for (const auto& kv : n) out[Unplaced(kv.first)] = Unplaced(kv.second);
    return out;
  }
  if (n.IsScalar()) return YAML::Node(n.Scalar());
  return YAML::Node(YAML::NodeType::Null);
}

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
  if (auto v = ReadRegisteredInt(k("nodes"), errors)) c.nodes = *v;
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
  if (auto v = ReadEnum<KernelFusion>(k("norm_kernel"), errors)) t.norm_kernel = *v;
  if (auto v = ReadEnum<LossKernel>(k("loss"), errors)) t.loss = *v;
  if (auto v = ReadRegisteredInt(k("loss_chunks"), errors)) t.loss_chunks = *v;
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
  if (auto v = ReadRegisteredInt(k("ep"), errors)) par.ep = *v;
  if (auto v = ReadRegisteredInt(k("etp"), errors)) par.etp = *v;
  if (auto v = ReadEnum<PipelineSchedule>(k("pp_schedule"), errors)) par.pp_schedule = *v;
  if (auto v = ReadRegisteredInt(k("pp_chunks"), errors)) par.pp_chunks = *v;
  if (auto v = ReadRegisteredInt(k("first_stage_layers"), errors)) par.first_stage_layers = *v;
  if (auto v = ReadRegisteredInt(k("last_stage_layers"), errors)) par.last_stage_layers = *v;
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
}

// Pipeline layout: stages, chunks, the schedule and uneven first/last stages must agree.
template <class At>
void CheckStageLayers(const At& at, const Scenario& s, YamlErrors& errors) {
  const ParallelSpec& par = s.parallel;
  const int64_t pp = par.pp, v = par.pp_chunks, layers = s.model.layers;
  if (layers <= 0) return;
  if (v > 1 && par.pp_schedule != PipelineSchedule::kInterleaved) {
    errors.Add(at("parallel", "pp_chunks"), "parallel.pp_chunks",
               absl::StrCat("pp_chunks ", v, " needs pp_schedule: interleaved"));
  }
  if (par.pp_schedule == PipelineSchedule::kInterleaved && (v < 2 || pp < 2)) {
    errors.Add(at("parallel", "pp_schedule"), "parallel.pp_schedule",
               "the interleaved schedule needs pp >= 2 and pp_chunks >= 2");
  }
  if ((par.first_stage_layers || par.last_stage_layers) && (pp < 2 || pp * v < 3)) {
    errors.Add(at("parallel", par.first_stage_layers ? "first_stage_layers" : "last_stage_layers"),
               "parallel", "uneven first/last stages need pp >= 2 and pp x pp_chunks >= 3");
    return;
  }
  const auto split = SplitLayers(layers, pp, v, par.first_stage_layers, par.last_stage_layers);
  if (split.ok()) return;
  if (par.first_stage_layers || par.last_stage_layers) {
    errors.Add(at("parallel", par.first_stage_layers ? "first_stage_layers" : "last_stage_layers"),
               "parallel", split.status().message());
  } else {
    errors.Add(at("parallel", "pp"), "parallel.pp", split.status().message());
  }
}

// A nested key (section.sub.key), or the nearest enclosing node that exists.
YAML::Node At(const YAML::Node& root, absl::string_view section, absl::string_view sub,
              absl::string_view key) {
  const YAML::Node sec = Child(root, section);
  const YAML::Node subnode = Child(sec, sub);
  const YAML::Node k = Child(subnode, key);
  return k.IsDefined() ? k : subnode.IsDefined() ? subnode : sec.IsDefined() ? sec : root;
}

// Adapters the model can carry, ranks it can hold, and the optimizer-in-backward's conditions.
void CheckFinetune(const YAML::Node& root, const Scenario& s, int64_t dp, YamlErrors& errors) {
  const FinetuneSpec& f = s.training.finetune;
  if (f.adapters()) {
    // The default targets name every projection a Llama layer has; a GELU MLP simply has no
    // gate. Targets the user lists must exist.
    const bool listed = Child(Child(Child(root, "training"), "finetune"), "targets").IsDefined();
    for (int i = 0; i < kNumLoraTargets; ++i) {
      const LoraTarget t = static_cast<LoraTarget>(i);
      if (listed && f.targets[i] && !ModelHasTarget(s.model, t)) {
        errors.Add(At(root, "training", "finetune", "targets"), "training.finetune.targets",
                   absl::StrCat("the model '", s.model.name, "' has no '", Name(t),
                                "' projection (its MLP is gelu: fc1 is 'up', fc2 is 'down')"));
      }
    }
    int64_t smallest = std::numeric_limits<int64_t>::max();
    for (const LayerLinear& l : LayerLinears(s.model)) {
      if (f.targets[static_cast<int>(l.target)]) smallest = std::min({smallest, l.in, l.out});
    }
    if (smallest > 0 && f.rank > smallest) {
      errors.Add(At(root, "training", "finetune", "rank"), "training.finetune.rank",
                 absl::StrCat("rank ", f.rank, " exceeds the smallest targeted projection's width ",
                              smallest, ": a low-rank adapter needs r <= min(in, out)"));
    }
    if (f.method == FinetuneMethod::kQlora && s.training.precision == Precision::kFp8) {
      errors.Add(At(root, "training", "precision", ""), "training.precision",
                 "QLoRA computes in bf16 from NF4 weights; fp8 is not combined with it");
    }
  }
  if (s.training.optimizer_in_backward) {
    const int64_t m = dp > 0 ? s.training.global_batch / (s.training.micro_batch * dp) : 0;
    if (s.parallel.zero != 0 || dp != 1 || s.parallel.pp != 1 || m != 1) {
      errors.Add(At(root, "training", "optimizer_in_backward", ""),
                 "training.optimizer_in_backward",
                 absl::StrCat("modelled as torchtune's single-device recipes run it: one GPU's "
                              "worth of data parallelism (dp ",
                              dp, "), zero 0 (", s.parallel.zero, "), pp 1 (", s.parallel.pp,
                              ") and one micro-batch per step (", m,
                              "; torchtune refuses gradient accumulation with it)"));
    }
  }
}

// Offload needs a node type with a host entry (and NVMe for nvme), and a framework that offloads
// that way.
void CheckOffload(const YAML::Node& root, const Scenario& s, YamlErrors& errors) {
  const OffloadSpec& o = s.parallel.offload;
  if (!o.any()) return;
  const Framework fw = s.parallel.framework;
  auto at = [&](absl::string_view key) { return At(root, "parallel", "offload", key); };
  if (!s.cluster.node.host) {
    errors.Add(at(""), "parallel.offload",
               absl::StrCat("node type '", s.cluster.node.name,
                            "' has no host entry (DRAM, PCIe, cores) in topologies/nodes.yaml: "
                            "offload cannot be priced; add one or choose a node type that has it"));
    return;
  }
  const HostSpec& h = *s.cluster.node.host;
  const bool nvme = o.optimizer == OffloadTarget::kNvme || o.params == OffloadTarget::kNvme;
  if (nvme && h.nvme == Bytes()) {
    const char* key = o.optimizer == OffloadTarget::kNvme ? "optimizer" : "params";
    errors.Add(at(key), JoinPath("parallel.offload", key),
               absl::StrCat("node type '", s.cluster.node.name,
                            "' has no NVMe for offload (host.nvme in topologies/nodes.yaml)"));
  }
  const int64_t zero = s.parallel.zero;
  switch (fw) {
    case Framework::kDdp:
      errors.Add(at(""), "parallel.offload",
                 "ddp does not offload; use deepspeed (ZeRO-Offload), fsdp or torchtune "
                 "(CPUOffload) or megatron (optimizer)");
      break;
    case Framework::kDeepSpeed:
      if (o.optimizer != OffloadTarget::kNone && zero == 0) {
        errors.Add(at("optimizer"), "parallel.offload.optimizer",
                   "DeepSpeed offloads the optimizer from ZeRO-1 on (offload_optimizer); set "
                   "parallel.zero >= 1");
      }
      if (o.params != OffloadTarget::kNone && zero != 3) {
        errors.Add(at("params"), "parallel.offload.params",
                   "DeepSpeed offloads parameters at ZeRO-3 only (offload_param); set "
                   "parallel.zero: 3");
      }
      break;
    case Framework::kFsdp:
    case Framework::kTorchtune:
      if (o.optimizer != OffloadTarget::kNone && o.params == OffloadTarget::kNone) {
        errors.Add(at("optimizer"), "parallel.offload.optimizer",
                   "FSDP offloads parameters, gradients and optimizer states together "
                   "(CPUOffload(offload_params=True)): set parallel.offload.params: cpu instead");
      }
      if (o.params == OffloadTarget::kNvme || o.optimizer == OffloadTarget::kNvme) {
        errors.Add(at("params"), "parallel.offload.params",
                   "FSDP offloads to CPU memory only; NVMe offload is DeepSpeed's (ZeRO-Infinity)");
      }
      if (o.params != OffloadTarget::kNone && zero != 3) {
        errors.Add(at("params"), "parallel.offload.params",
                   "CPU offload is modelled for fully sharded training: set parallel.zero: 3");
      }
      break;
    case Framework::kMegatron:
      if (o.params != OffloadTarget::kNone) {
        errors.Add(at("params"), "parallel.offload.params",
                   "Megatron-LM offloads the optimizer (--optimizer-cpu-offload), not parameters");
      }
      if (o.optimizer == OffloadTarget::kNvme) {
        errors.Add(at("optimizer"), "parallel.offload.optimizer",
                   "Megatron-LM offloads the optimizer to CPU memory only");
      }
      break;
  }
  if (s.training.optimizer_in_backward &&
      (o.optimizer != OffloadTarget::kNone || o.params != OffloadTarget::kNone)) {
    errors.Add(at(""), "parallel.offload",
               "an offloaded optimizer runs on the host after the backward; not combined with "
               "training.optimizer_in_backward");
  }
  if (s.training.optimizer == OptimizerKind::kAdam8bitPaged &&
      (o.optimizer != OffloadTarget::kNone || o.params != OffloadTarget::kNone)) {
    errors.Add(at(""), "parallel.offload",
               "a paged optimizer already pages its states to the host; not combined with offload");
  }
}

// Second pass: checks across sections and files, all reported together. Each cites the key the
// user would change.
void CheckConsistency(const YAML::Node& root, const Scenario& s, YamlErrors& errors) {
  // The key the user would change, or its section, or the top of the file.
  auto at = [&](absl::string_view section, absl::string_view key) {
    const YAML::Node sec = Child(root, section);
    const YAML::Node k = Child(sec, key);
    return k.IsDefined() ? k : sec.IsDefined() ? sec : root;
  };
  const ModelSpec& m = s.model;
  const ParallelSpec& par = s.parallel;
  const int64_t tp = par.tp, pp = par.pp, cp = par.cp;
  if (m.heads > 0 && (m.heads % tp != 0 || m.kv_heads % tp != 0)) {
    errors.Add(at("parallel", "tp"), "parallel.tp",
               absl::StrCat("tp ", tp, " must divide the model's heads (", m.heads,
                            ") and kv_heads (", m.kv_heads, ")"));
  }
  if (tp > 1 && (m.ffn_hidden % tp != 0 || m.vocab % tp != 0)) {
    errors.Add(at("parallel", "tp"), "parallel.tp",
               absl::StrCat("tp ", tp, " must divide the model's ffn_hidden (", m.ffn_hidden,
                            ") and vocab (", m.vocab, "); pad the vocabulary in the model file"));
  }
  CheckStageLayers(at, s, errors);
  if (cp > 1 && s.training.seq_len % (2 * cp) != 0) {
    errors.Add(at("parallel", "cp"), "parallel.cp",
               absl::StrCat("cp ", cp, ": seq_len ", s.training.seq_len,
                            " must split into 2 x cp load-balanced chunks"));
  }
  if (Child(Child(root, "training"), "flash_impl").IsDefined() &&
      s.training.attention != AttentionKernel::kFlash) {
    errors.Add(at("training", "flash_impl"), "training.flash_impl",
               "applies to flash attention only (training.attention is eager)");
  }
  // FlashAttention-3 is written for Hopper's wgmma and TMA (Shah et al. 2024, arXiv 2407.08608;
  // the flash-attention README lists H100/H800 as its requirement): compute capability 9.x.
  if (s.training.flash_impl == FlashImpl::kFa3 && s.cluster.gpu.compute_capability &&
      (*s.cluster.gpu.compute_capability < 9.0 || *s.cluster.gpu.compute_capability >= 10.0)) {
    errors.Add(at("training", "flash_impl"), "training.flash_impl",
               absl::StrFormat("fa3 (FlashAttention-3) runs on Hopper GPUs (compute capability "
                               "9.x); %s is %.1f: use fa2",
                               s.cluster.gpu.name, *s.cluster.gpu.compute_capability));
  }
  if (cp > 1 && s.training.attention != AttentionKernel::kFlash) {
    errors.Add(at("parallel", "cp"), "parallel.cp",
               "context parallelism is modelled with flash attention only (training.attention)");
  }
  const int64_t gpus = s.cluster.gpus();
  if (gpus > 0 && gpus % (tp * pp * cp) != 0) {
    errors.Add(at("parallel", "tp"), "parallel",
               absl::StrCat("the cluster's ", gpus,
                            " GPUs are not a multiple of tp x pp x cp = ", tp * pp * cp));
    return;
  }
  const int64_t dp = gpus / (tp * pp * cp);
  if (par.ep > 1 && !m.moe) {
    errors.Add(at("parallel", "ep"), "parallel.ep",
               absl::StrCat("ep ", par.ep, ": model ", m.name,
                            " has no experts (expert parallelism needs a `moe:` model)"));
  } else if (par.etp && !m.moe) {
    errors.Add(at("parallel", "etp"), "parallel.etp",
               absl::StrCat("etp ", *par.etp, ": model ", m.name,
                            " has no experts (expert tensor parallelism needs a `moe:` model)"));
  } else if (m.moe) {
    // Megatron-Core's folding: etp x ep tiles the tp x cp x dp GPUs of a stage.
    const int64_t etp = par.expert_tp(), block = tp * cp * dp;
    if (block % (etp * par.ep) != 0 || m.moe->experts % par.ep != 0) {
      errors.Add(at("parallel", par.etp ? "etp" : "ep"), par.etp ? "parallel.etp" : "parallel.ep",
                 absl::StrCat("etp x ep = ", etp, " x ", par.ep, " must divide tp x cp x dp = ",
                              block, ", and ep the model's ", m.moe->experts, " experts"));
    } else if (m.moe->expert_ffn_hidden % etp != 0) {
      errors.Add(at("parallel", par.etp ? "etp" : "tp"), par.etp ? "parallel.etp" : "parallel.tp",
                 absl::StrCat(par.etp ? "etp " : "tp ", etp,
                              " must divide the experts' width (moe.expert_ffn_hidden ",
                              m.moe->expert_ffn_hidden, ")"));
    }
    // The expert groups are carved out of the block below PP, TP innermost (parallel_state.py).
    const ParallelDim outer = par.rank_order.back();
    const bool default_inner = par.rank_order[0] == ParallelDim::kTp &&
                               par.rank_order[1] == ParallelDim::kCp &&
                               par.rank_order[2] == ParallelDim::kDp;
    if ((par.ep > 1 || etp != tp) && (outer != ParallelDim::kPp || !default_inner)) {
      errors.Add(at("parallel", "rank_order"), "parallel.rank_order",
                 "expert parallelism is placed in Megatron-Core's rank order only: tp-cp-dp-pp");
    }
    // megatron/core/transformer/moe/moe_layer.py refuses to train MoE under TP without SP.
    if (tp > 1 && !par.sequence_parallel) {
      errors.Add(at("parallel", "sequence_parallel"), "parallel.sequence_parallel",
                 absl::StrCat("a mixture-of-experts model with tp ", tp,
                              " needs sequence_parallel: true (Megatron-Core's MoE layer "
                              "routes each TP rank's sequence shard)"));
    }
  }
  if (!m.moe && (s.training.routing.distribution != RoutingDistribution::kBalanced ||
                 s.training.routing.capacity_factor)) {
    errors.Add(At(root, "training", "routing", "distribution"), "training.routing.distribution",
               absl::StrCat("model ", m.name, " has no experts to route to"));
  }
  // MLA (model.h MlaSpec) is modelled under flash attention, without CP or adapters.
  if (m.mla && cp > 1) {
    errors.Add(at("parallel", "cp"), "parallel.cp",
               absl::StrCat("context parallelism with multi-head latent attention (", m.name,
                            ") is not modelled; use cp 1"));
  }
  if (m.mla && s.training.attention != AttentionKernel::kFlash) {
    errors.Add(at("training", "attention"), "training.attention",
               absl::StrCat("multi-head latent attention (", m.name,
                            ") is modelled with flash attention only"));
  }
  if (m.mla && s.training.finetune.adapters()) {
    errors.Add(At(root, "training", "finetune", "method"), "training.finetune.method",
               absl::StrCat("adapters on multi-head latent attention (", m.name,
                            ") are not modelled; fine-tune it fully (method: full)"));
  }
  if (m.moe && s.training.finetune.adapters()) {
    errors.Add(At(root, "training", "finetune", "method"), "training.finetune.method",
               absl::StrCat("adapters on a mixture-of-experts model (", m.name,
                            ") are not modelled; fine-tune it fully (method: full)"));
  }
  // ZeRO-3 / FULL_SHARD gathers would have to gather experts over their own data-parallel group
  // (not modelled: DeepSpeed-MoE refuses ZeRO-3, Megatron-Core uses the distributed optimizer).
  const FsdpSharding fsdp = FsdpShardingOf(par);
  const bool full_shard = par.framework == Framework::kFsdp ? fsdp == FsdpSharding::kFullShard ||
                                                                  fsdp == FsdpSharding::kHybridShard
                                                            : par.zero == 3;
  if (par.ep > 1 && full_shard) {
    errors.Add(at("parallel", "ep"), "parallel.ep",
               "expert parallelism with ZeRO-3 / FSDP full_shard is not modelled; use zero 0-2 "
               "(Megatron's distributed optimizer is zero 1)");
  }
  // Sizes stepsim counts in int64 bytes: the largest tensors of one micro-batch on one GPU
  // (eager attention scores in fp32, fp32 logits, the MLP activations) and the model's states,
  // counted here in floating point so that nothing overflows before it is refused.
  {
    const double tokens = static_cast<double>(s.training.seq_len) * s.training.micro_batch;
    const double largest =
        std::max({tokens * s.training.seq_len * static_cast<double>(m.heads) * 4,
                  tokens * static_cast<double>(m.vocab) * 8,
                  tokens * static_cast<double>(std::max(m.hidden, m.ffn_hidden)) * 64,
                  static_cast<double>(m.layers) * 16 * static_cast<double>(m.hidden) *
                      static_cast<double>(m.hidden + m.ffn_hidden) * 20});
    if (largest > 0x1p60) {
      errors.Add(at("training", "seq_len"), "training.seq_len",
                 absl::StrFormat("seq_len %d x micro_batch %d on this model makes tensors of "
                                 "%.3g bytes per GPU, beyond the 2^60 bytes stepsim counts",
                                 s.training.seq_len, s.training.micro_batch, largest));
      return;
    }
  }
  const int64_t per_step = s.training.micro_batch * dp;
  if (dp > 0 && s.training.global_batch % per_step != 0) {
    errors.Add(at("training", "global_batch"), "training.global_batch",
               absl::StrCat("global_batch ", s.training.global_batch,
                            " is not a multiple of micro_batch x dp = ", s.training.micro_batch,
                            " x ", dp, " = ", per_step));
  } else if (dp > 0 && s.training.global_batch / per_step > kMaxMicroBatches) {
    errors.Add(at("training", "global_batch"), "training.global_batch",
               absl::StrCat("global_batch ", s.training.global_batch, " makes ",
                            s.training.global_batch / per_step,
                            " micro-batches per step, above the ", kMaxMicroBatches,
                            " stepsim counts (global_batch counts sequences, not tokens; or "
                            "raise micro_batch)"));
  } else if (dp > 0 && par.pp_schedule == PipelineSchedule::kInterleaved && pp > 1 &&
             (s.training.global_batch / per_step) % pp != 0) {
    // Megatron-LM asserts this for its interleaved schedule.
    errors.Add(
        at("training", "global_batch"), "training.global_batch",
        absl::StrCat("the interleaved schedule needs the ", s.training.global_batch / per_step,
                     " micro-batches per step to be a multiple of pp = ", pp));
  }
  if (par.framework != Framework::kMegatron && par.overlap_param_gather) {
    errors.Add(at("parallel", "overlap_param_gather"), "parallel.overlap_param_gather",
               "overlap_param_gather belongs to framework megatron (its distributed optimizer)");
  }
  if (pp > 1 && par.framework != Framework::kMegatron && par.framework != Framework::kFsdp &&
      par.zero >= 2) {
    // DeepSpeed: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism".
    errors.Add(at("parallel", "zero"), "parallel.zero",
               absl::StrCat("zero ", par.zero, " with pp ", pp,
                            ": ZeRO-2/3 are not combined with pipeline parallelism (DeepSpeed "
                            "refuses it); use zero 0 or 1"));
  }
  if (pp > 1 && par.framework == Framework::kFsdp && fsdp != FsdpSharding::kNoShard) {
    // Every sharded FSDP strategy (SHARD_GRAD_OP included: zero 1 and 2) gathers per layer, which
    // the pipeline's lowering does not model yet.
    const bool named = par.sharding.has_value();
    errors.Add(at("parallel", named ? "sharding" : "zero"),
               named ? "parallel.sharding" : "parallel.zero",
               absl::StrCat("fsdp ", Name(fsdp), " with pp ", pp,
                            ": sharded FSDP is not modelled with pipeline parallelism; use "
                            "sharding no_shard (zero 0), or deepspeed or megatron at zero 1"));
  }
  if ((tp > 1 || pp > 1 || cp > 1) && par.framework == Framework::kFsdp &&
      par.sharding == FsdpSharding::kHybridShard) {
    errors.Add(at("parallel", "sharding"), "parallel.sharding",
               "hybrid_shard is modelled without tp, pp or cp");
  }
  if (s.training.precision == Precision::kFp8 && !s.cluster.gpu.fp8) {
    errors.Add(at("training", "precision"), "training.precision",
               absl::StrCat(s.cluster.gpu.name, " has no fp8 tensor cores"));
  }
  if (s.training.precision == Precision::kBf16 && !s.cluster.gpu.bf16) {
    errors.Add(at("training", "precision"), "training.precision",
               absl::StrCat(s.cluster.gpu.name, " has no bf16 tensor cores; use fp16"));
  }
  if (par.framework == Framework::kDdp &&
      (par.zero != 0 || tp > 1 || pp > 1 || cp > 1 || s.training.precision == Precision::kFp8)) {
    errors.Add(at("parallel", "framework"), "parallel.framework",
               "ddp is PyTorch DistributedDataParallel with AMP: data parallelism only (zero 0, "
               "tp, pp and cp 1) in bf16 or fp16; use deepspeed, fsdp or megatron for sharding, "
               "model parallelism or fp8");
  }
  if (Child(Child(root, "parallel"), "deepspeed").IsDefined() &&
      par.framework != Framework::kDeepSpeed) {
    errors.Add(at("parallel", "deepspeed"), "parallel.deepspeed",
               absl::StrCat("parallel.deepspeed holds DeepSpeed's settings; framework is ",
                            Name(par.framework)));
  }
  if (par.bucket &&
      Child(Child(Child(root, "parallel"), "deepspeed"), "reduce_bucket_size").IsDefined()) {
    errors.Add(at("parallel", "bucket"), "parallel.bucket",
               "parallel.bucket and parallel.deepspeed.reduce_bucket_size both size DeepSpeed's "
               "bucket (in bytes and in 16-bit elements): set one");
  }
  if (par.framework == Framework::kDeepSpeed && par.prefetch && par.deepspeed.stage3_limits_set) {
    errors.Add(at("parallel", "prefetch"), "parallel.prefetch",
               "parallel.prefetch gathers whole layers ahead, in place of DeepSpeed's element "
               "counts (parallel.deepspeed.stage3_*): set one or the other");
  }
  if (par.gradient_as_bucket_view && par.framework != Framework::kDdp) {
    errors.Add(
        at("parallel", "gradient_as_bucket_view"), "parallel.gradient_as_bucket_view",
        "gradient_as_bucket_view belongs to framework ddp (PyTorch DistributedDataParallel)");
  }
  if (s.parallel.fsdp_version != 1 && s.parallel.framework != Framework::kFsdp) {
    errors.Add(at("parallel", "fsdp_version"), "parallel.fsdp_version",
               "fsdp_version belongs to framework fsdp");
  }
  if (s.parallel.sharding && s.parallel.framework != Framework::kFsdp) {
    errors.Add(at("parallel", "sharding"), "parallel.sharding",
               "sharding strategies belong to framework fsdp");
  }
  if (s.parallel.sequence_parallel && tp == 1) {
    errors.Add(at("parallel", "sequence_parallel"), "parallel.sequence_parallel",
               "sequence parallelism needs tp > 1");
  }
  if (s.model.position == PositionKind::kLearned && s.model.max_seq_len > 0 &&
      s.training.seq_len > s.model.max_seq_len) {
    errors.Add(
        at("training", "seq_len"), "training.seq_len",
        absl::StrCat("seq_len ", s.training.seq_len, " exceeds the model's learned ",
                     "position table of ", s.model.max_seq_len, " rows (set model max_seq_len)"));
  }
  CheckFinetune(root, s, dp, errors);
  CheckOffload(root, s, errors);
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
  if (!errors.empty()) return failed();
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
