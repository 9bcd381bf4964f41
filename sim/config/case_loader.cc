// Validation case files (docs/model.md "Validation data"): `cases:` entries with id, source,
// measured values, the source's conventions, an optional `skip:` reason, and a scenario — inline,
// or `base: PATH` (relative to the case file) plus `set: {KEY: VALUE}` overrides.

#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "sim/config/catalog.h"
#include "sim/config/loaders.h"
#include "sim/config/yaml_fields.h"

namespace sim::config {

namespace {

// `set:` as overrides: dotted keys (`training.seq_len: 2048`) or nested mappings
// (`training: {seq_len: 2048}`), which come to the same; a list value is passed on as flow YAML
// and judged by the scenario's own checks.
bool FlattenSet(const YAML::Node& node, const std::string& prefix, const std::string& path,
                std::vector<Override>& out, YamlErrors& errors) {
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) {
      errors.Add(kv.first, path, "expected a key name, got a list or mapping as a key");
      return false;
    }
    const std::string key = prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar();
    if (kv.second.IsMap()) {
      if (!FlattenSet(kv.second, key, path, out, errors)) return false;
    } else if (kv.second.IsScalar()) {
      out.push_back({key, kv.second.Scalar()});
    } else {
      YAML::Emitter flow;
      flow << YAML::Flow << kv.second;
      out.push_back({key, flow.c_str()});
    }
  }
  return true;
}

std::optional<Scenario> ReadCaseScenario(const DataRoot& data, const std::string& file,
                                         const YAML::Node& node, const std::string& path,
                                         const Catalogs& catalogs, YamlErrors& errors) {
  if (!node || !node.IsMap()) {
    errors.Add(node.IsDefined() ? node : YAML::Node(), path,
               "expected a scenario mapping (inline, or base: PATH with set: {KEY: VALUE})");
    return std::nullopt;
  }
  absl::StatusOr<Scenario> s;
  if (node["base"]) {
    if (!CheckMapping(node, path, {"base", "set"}, errors)) return std::nullopt;
    auto base = ReadString({node, "base", path, true}, errors);
    if (!base) return std::nullopt;
    const auto full = std::filesystem::path(file).parent_path() / *base;
    auto loader = ScenarioLoader::Open(data, full.string());
    if (!loader.ok()) {
      errors.Add(node["base"], JoinPath(path, "base"), loader.status().message());
      return std::nullopt;
    }
    std::vector<Override> overrides;
    if (const YAML::Node set = node["set"]) {
      if (!set.IsMap()) {
        errors.Add(set, JoinPath(path, "set"), "expected a mapping of dotted keys to values");
        return std::nullopt;
      }
      if (!FlattenSet(set, "", JoinPath(path, "set"), overrides, errors)) return std::nullopt;
    }
    s = loader->Load(overrides);
  } else {
    s = BuildScenario(data, file, node, catalogs, /*embedded=*/true);
  }
  if (!s.ok()) {
    errors.AddUnlocated(path, absl::StrCat("scenario does not load:\n", s.status().message()));
    return std::nullopt;
  }
  return *s;
}

DeepSpeedEstimatorInput ReadEstimator(const YAML::Node& node, const std::string& path,
                                      YamlErrors& errors) {
  DeepSpeedEstimatorInput in;
  if (!CheckMapping(node, path,
                    {"stage", "params", "largest_layer_params", "gpus_per_node", "nodes",
                     "offload_optimizer", "offload_param", "zero_init"},
                    errors)) {
    return in;
  }
  auto k = [&](absl::string_view name, bool required) { return Key{node, name, path, required}; };
  if (auto v = ReadInt(k("stage", true), errors, 2, 3)) in.stage = static_cast<int>(*v);
  if (auto v = ReadDouble(k("params", true), errors, 1, 1e16)) in.params = static_cast<int64_t>(*v);
  if (auto v = ReadDouble(k("largest_layer_params", false), errors, 0, 1e16)) {
    in.largest_layer_params = static_cast<int64_t>(*v);
  }
  if (auto v = ReadInt(k("gpus_per_node", true), errors, 1, 1024)) in.gpus_per_node = *v;
  if (auto v = ReadInt(k("nodes", false), errors, 1, 1 << 20)) in.nodes = *v;
  if (auto v = ReadBool(k("offload_optimizer", false), errors)) in.offload_optimizer = *v;
  if (auto v = ReadBool(k("offload_param", false), errors)) in.offload_param = *v;
  if (auto v = ReadBool(k("zero_init", false), errors)) in.zero_init = *v;
  return in;
}

}  // namespace

absl::StatusOr<std::vector<ValidationCase>> LoadCases(const DataRoot& data,
                                                      const std::string& file) {
  auto root = LoadYamlFile(file);
  if (!root.ok()) return root.status();
  auto catalogs = LoadCatalogs(data);
  if (!catalogs.ok()) return catalogs.status();
  YamlErrors errors(file);
  CheckSchemaVersion(*root, errors);
  CheckMapping(*root, "", {"schema_version", "cases"}, errors);
  const YAML::Node list = Child(*root, "cases");
  if (!list.IsDefined() || !list.IsSequence()) {
    errors.Add(*root, "cases", "expected a list of cases");
    return errors.ToStatus();
  }
  std::vector<ValidationCase> cases;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node c = list[i];
    const std::string p = absl::StrCat("cases[", i, "]");
    if (!CheckMapping(
            c, p,
            {"id", "source", "skip", "measured", "conventions", "scenario", "deepspeed_estimator"},
            errors)) {
      continue;
    }
    ValidationCase vc;
    vc.file = file;
    vc.line = c.Mark().line + 1;
    if (auto v = ReadString({c, "id", p, true}, errors)) vc.id = *v;
    if (auto v = ReadString({c, "source", p, true}, errors)) vc.source = *v;
    if (auto v = ReadString({c, "skip", p, false}, errors)) vc.skip = *v;
    const std::string mp = JoinPath(p, "measured");
    const YAML::Node m = c["measured"];
    if (!m) {
      errors.Add(c, mp, "missing required key (what the run measured)");
    } else if (CheckMapping(m, mp,
                            {"step_s", "mfu", "hfu", "tokens_per_s_per_gpu", "peak_memory",
                             "gpu_memory", "cpu_memory"},
                            errors)) {
      for (const char* k : {"step_s", "mfu", "hfu", "tokens_per_s_per_gpu"}) {
        if (auto v =
                ReadDouble({m, k, mp, false}, errors, 1e-12, std::numeric_limits<double>::max())) {
          vc.measured[k] = *v;
        }
      }
      for (const char* k : {"peak_memory", "gpu_memory", "cpu_memory"}) {
        if (auto v = ReadBytes({m, k, mp, false}, errors)) {
          vc.measured[k] = static_cast<double>(v->count());
        }
      }
    }
    const std::string cp = JoinPath(p, "conventions");
    if (const YAML::Node conv = c["conventions"];
        conv && CheckMapping(conv, cp, {"flops", "memory"}, errors)) {
      if (auto v = ReadEnum<FlopConvention>({conv, "flops", cp, false}, errors)) vc.flops = *v;
      if (auto v = ReadEnum<MemoryConvention>({conv, "memory", cp, false}, errors)) {
        vc.memory = *v;
      }
    }
    if (const YAML::Node est = c["deepspeed_estimator"]) {
      vc.deepspeed_estimator = ReadEstimator(est, JoinPath(p, "deepspeed_estimator"), errors);
      // An estimator row may also carry the same configuration as a scenario, replayed beside.
      if (c["scenario"]) {
        if (auto s = ReadCaseScenario(data, file, c["scenario"], JoinPath(p, "scenario"), *catalogs,
                                      errors)) {
          vc.scenario = *s;
          vc.replay_beside_estimator = true;
        }
      }
    } else if (auto s = ReadCaseScenario(data, file, c["scenario"], JoinPath(p, "scenario"),
                                         *catalogs, errors)) {
      vc.scenario = *s;
    }
    cases.push_back(std::move(vc));
  }
  if (!errors.empty()) return errors.ToStatus();
  return cases;
}

}  // namespace sim::config
