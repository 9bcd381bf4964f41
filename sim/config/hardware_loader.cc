#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sim/base/quantity.h"
#include "sim/base/suggest.h"
#include "sim/config/catalog.h"
#include "sim/config/loaders.h"
#include "sim/config/yaml_fields.h"
#include "sim/spec/transport.h"

namespace sim::config {

namespace {

// A list of names under a calibration's `fit:` record (its sources or params); none where absent.
std::optional<std::vector<std::string>> ReadNames(const YAML::Node& fit, absl::string_view key,
                                                  absl::string_view fp, YamlErrors& errors) {
  const YAML::Node list = Child(fit, key);
  if (!list.IsDefined()) return std::nullopt;
  if (!list.IsSequence()) {
    errors.Add(list, JoinPath(fp, key), "expected a list of names");
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].IsScalar()) {
      errors.Add(list[i], absl::StrCat(fp, ".", key, "[", i, "]"), "expected a name");
    } else {
      out.push_back(list[i].Scalar());
    }
  }
  return out;
}

// A calibration's `fit:` record (what the fit rested on): the case files (sources) it used and
// the terms it moved (params), for cross-validation.
struct FitRecord {
  std::optional<std::vector<std::string>> sources, params;
};
FitRecord ReadFitRecord(const YAML::Node& node, absl::string_view path, YamlErrors& errors) {
  const YAML::Node fit = Child(node, "fit");
  if (!fit.IsDefined()) return {};
  const std::string fp = JoinPath(path, "fit");
  if (!CheckMapping(fit, fp, {"sources", "params", "cases", "in_sample_mape", "command"}, errors)) {
    return {};
  }
  auto fk = [&](absl::string_view name) { return Key{fit, name, fp, false}; };
  ReadInt(fk("cases"), errors, 0, 1'000'000);
  ReadDouble(fk("in_sample_mape"), errors, 0, 1e6);
  ReadString(fk("command"), errors);
  return {ReadNames(fit, "sources", fp, errors), ReadNames(fit, "params", fp, errors)};
}

void ReadCalibration(const YAML::Node& node, absl::string_view path, GpuCalibration& c,
                     YamlErrors& errors) {
  if (!CheckMapping(node, path,
                    {"gemm_efficiency", "fp8_gemm_efficiency", "attention_efficiency",
                     "memory_efficiency", "roofline_blend", "gemm_k_overhead",
                     "attention_kv_overhead", "launch_overhead", "dispatch_overhead",
                     "comm_efficiency", "nvls_efficiency", "overlap_slowdown", "fit", "note"},
                    errors)) {
    return;
  }
  FitRecord fit = ReadFitRecord(node, path, errors);
  if (fit.sources) c.fit_sources = *std::move(fit.sources);
  if (fit.params) c.fit_params = *std::move(fit.params);
  auto k = [&](absl::string_view name) { return Key{node, name, path, false}; };
  if (auto v = ReadDouble(k("gemm_efficiency"), errors, 0.01, 1.0)) c.gemm_efficiency = *v;
  if (auto v = ReadDouble(k("fp8_gemm_efficiency"), errors, 0.01, 1.0)) {
    c.fp8_gemm_efficiency = *v;
  }
  if (auto v = ReadDouble(k("attention_efficiency"), errors, 0.01, 1.0)) {
    c.attention_efficiency = *v;
  }
  if (auto v = ReadDouble(k("memory_efficiency"), errors, 0.01, 1.0)) c.memory_efficiency = *v;
  if (auto v = ReadDouble(k("roofline_blend"), errors, 0.0, 1.0)) c.roofline_blend = *v;
  if (auto v = ReadDouble(k("gemm_k_overhead"), errors, 0.0, 4096.0)) c.gemm_k_overhead = *v;
  if (auto v = ReadDouble(k("attention_kv_overhead"), errors, 0.0, 65536.0)) {
    c.attention_kv_overhead = *v;
  }
  if (auto v = ReadDuration(k("launch_overhead"), errors)) c.launch_overhead = *v;
  if (auto v = ReadDuration(k("dispatch_overhead"), errors)) c.dispatch_overhead = *v;
  if (auto v = ReadDouble(k("comm_efficiency"), errors, 0.01, 1.0)) c.comm_efficiency = *v;
  if (auto v = ReadDouble(k("nvls_efficiency"), errors, 0.01, 1.0)) c.nvls_efficiency = *v;
  if (auto v = ReadDouble(k("overlap_slowdown"), errors, 1.0, 4.0)) c.overlap_slowdown = *v;
  if (auto v = ReadString(k("note"), errors)) c.note = *v;
}

// A calibration's `libraries:` section: per kernel library, the compute terms its kernels reach
// (GpuCalibration::Library), each replacing an earlier entry for the same library.
void ReadLibraries(const YAML::Node& node, absl::string_view path, GpuCalibration& c,
                   YamlErrors& errors) {
  if (!node.IsMap()) {
    errors.Add(node, path, "expected a mapping from kernel library to its calibration terms");
    return;
  }
  for (const auto& entry : node) {
    const std::string name = entry.first.Scalar();
    const std::string lp = JoinPath(path, name);
    const auto library = EnumFromName<KernelLibrary>(name);
    if (!library) {
      errors.Add(entry.first, lp,
                 absl::StrCat("unknown kernel library '", name, "'",
                              DidYouMean(name, EnumNameList<KernelLibrary>()), " (one of ",
                              absl::StrJoin(EnumNameList<KernelLibrary>(), ", "), ")"));
      continue;
    }
    const YAML::Node terms = entry.second;
    if (!CheckMapping(terms, lp,
                      {"gemm_efficiency", "fp8_gemm_efficiency", "attention_efficiency",
                       "attention_kv_overhead", "fit", "note"},
                      errors)) {
      continue;
    }
    GpuCalibration::Library lib;
    lib.library = *library;
    auto k = [&](absl::string_view key) { return Key{terms, key, lp, false}; };
    lib.gemm_efficiency = ReadDouble(k("gemm_efficiency"), errors, 0.01, 1.0);
    lib.fp8_gemm_efficiency = ReadDouble(k("fp8_gemm_efficiency"), errors, 0.01, 1.0);
    lib.attention_efficiency = ReadDouble(k("attention_efficiency"), errors, 0.01, 1.0);
    lib.attention_kv_overhead = ReadDouble(k("attention_kv_overhead"), errors, 0.0, 65536.0);
    FitRecord fit = ReadFitRecord(terms, lp, errors);
    if (fit.sources) lib.fit_sources = *std::move(fit.sources);
    if (fit.params) lib.fit_params = *std::move(fit.params);
    if (auto v = ReadString(k("note"), errors)) lib.note = *v;
    std::erase_if(c.libraries, [&](const auto& l) { return l.library == lib.library; });
    c.libraries.push_back(std::move(lib));
  }
}

// A calibration file's parsed text, by path: the GPU catalog names one file for many GPUs (23
// entries name 2 files), and parsing each once instead of per entry took 11 of the 48 million
// instructions every command spends loading the catalogs (callgrind). The same nodes are read
// again, so every message keeps its line and column.
using ParsedFiles = std::map<std::string, absl::StatusOr<YAML::Node>>;

// A calibration file's contents over `base` (keys the file leaves out keep base's values); its
// `gpu` as written. `parsed` (when given) keeps the file's parse for the next GPU naming it.
absl::StatusOr<CalibrationFile> ReadCalibrationFile(const std::string& path,
                                                    const GpuCalibration& base,
                                                    ParsedFiles* parsed = nullptr) {
  ParsedFiles local;
  ParsedFiles& files = parsed != nullptr ? *parsed : local;
  auto it = files.find(path);
  if (it == files.end()) it = files.emplace(path, LoadYamlFile(path)).first;
  const absl::StatusOr<YAML::Node>& doc = it->second;
  if (!doc.ok()) return doc.status();
  YamlErrors errors(path);
  CheckSchemaVersion(*doc, errors);
  CheckMapping(*doc, "", {"schema_version", "gpu", "calibration", "libraries"}, errors);
  CalibrationFile f;
  f.file = path;
  f.calibration = base;
  if (auto name = ReadString({*doc, "gpu", "", /*required=*/true}, errors)) f.gpu = *name;
  // The catalog's note about this GPU stays; a file's own note replaces it only where the
  // catalog has none.
  const std::string catalog_note = base.note;
  // A file holds the GPU's own terms, a kernel library's, or both.
  const YAML::Node cal = Child(*doc, "calibration");
  const YAML::Node libraries = Child(*doc, "libraries");
  if (!cal.IsDefined() && !libraries.IsDefined()) {
    errors.Add(*doc, "calibration", "missing required key (or `libraries:`)");
  }
  if (cal.IsDefined()) ReadCalibration(cal, "calibration", f.calibration, errors);
  if (libraries.IsDefined()) ReadLibraries(libraries, "libraries", f.calibration, errors);
  if (!errors.empty()) return errors.ToStatus();
  if (cal.IsDefined()) f.calibration.fitted_gpu = f.gpu;
  if (!catalog_note.empty()) f.calibration.note = catalog_note;
  return f;
}

}  // namespace

std::optional<std::string> ReadTransportName(const Key& key, bool network, YamlErrors& errors) {
  auto v = ReadString(key, errors);
  if (!v) return std::nullopt;
  const Transport* t = FindTransport(*v);
  const std::vector<std::string> names = TransportNames(network);
  if (t == nullptr || std::find(names.begin(), names.end(), t->name) == names.end()) {
    // The in-switch rows are not transports a link runs: SHARP is a fabric's `sharp: true`.
    const std::string hint =
        t != nullptr && t->name == "sharp" ? "; SHARP is the fabric's `sharp: true` over ib" : "";
    errors.Add(
        key.map[std::string(key.name)], JoinPath(key.parent_path, key.name),
        absl::StrCat("unknown ", network ? "network" : "intra-node", " transport '", *v, "'",
                     DidYouMean(*v, names), " (one of ", absl::StrJoin(names, ", "), ")", hint));
    return std::nullopt;
  }
  return t->name;
}

std::optional<NcclRelease> ReadNcclRelease(const Key& key, YamlErrors& errors) {
  auto v = ReadString(key, errors);
  if (!v) return std::nullopt;
  const std::vector<absl::string_view> parts = absl::StrSplit(*v, '.');
  int64_t patch = 0;
  const bool patch_ok = parts.size() == 2 || (parts.size() == 3 && !parts[2].empty() &&
                                              absl::SimpleAtoi(parts[2], &patch) && patch >= 0);
  if (parts.size() >= 2 && parts[0] == "2" && patch_ok) {
    if (parts[1] == "27") return NcclRelease::k2_27;
    if (parts[1] == "28") return NcclRelease::k2_28;
  }
  errors.Add(key.map[std::string(key.name)], JoinPath(key.parent_path, key.name),
             absl::StrCat("NCCL ", *v,
                          " is not a release whose tuner stepsim reproduces: expected 2.27 or "
                          "2.28 (a patch number may follow, as in \"2.27.7\")"));
  return std::nullopt;
}

std::optional<std::string> PowerLimitProblem(const GpuSpec& g, double watts) {
  if (!g.tdp_watts) {
    return absl::StrCat(g.name,
                        " has no tdp in the catalog: its clocks under a power limit are "
                        "not modelled");
  }
  if (watts <= 0 || watts > *g.tdp_watts) {
    return absl::StrFormat("a power limit of %g W is outside (0, %g W], the part's rated power",
                           watts, *g.tdp_watts);
  }
  return std::nullopt;
}

std::optional<GpuSpec> ReadGpu(const YAML::Node& node, absl::string_view path, YamlErrors& errors) {
  if (!CheckMapping(node, path,
                    {"name", "hbm", "usable_hbm", "usable_hbm_source", "hbm_bandwidth", "dense",
                     "nvlink_bandwidth", "blas_workspace", "compute_capability", "sms",
                     "calibration", "calibration_file", "price_per_hour_usd", "price_source", "tdp",
                     "power_limit", "power_source", "source"},
                    errors)) {
    return std::nullopt;
  }
  GpuSpec g;
  auto req = [&](absl::string_view k) { return Key{node, k, path, true}; };
  auto opt = [&](absl::string_view k) { return Key{node, k, path, false}; };
  if (auto v = ReadString(req("name"), errors)) g.name = *v;
  if (auto v = ReadBytes(req("hbm"), errors)) g.hbm = *v;
  if (auto v = ReadBytes(opt("usable_hbm"), errors)) {
    if (*v > g.hbm) {
      errors.Add(node["usable_hbm"], JoinPath(path, "usable_hbm"),
                 "exceeds hbm: a process cannot get more than the part has");
    }
    g.usable_hbm = *v;
  }
  ReadString(opt("usable_hbm_source"), errors);
  if (auto v = ReadBandwidth(req("hbm_bandwidth"), errors)) g.hbm_bandwidth = *v;
  if (auto v = ReadBandwidth(req("nvlink_bandwidth"), errors)) g.nvlink_bandwidth = *v;
  if (auto v = ReadBytes(opt("blas_workspace"), errors)) g.blas_workspace = *v;
  if (auto v = ReadDouble(opt("compute_capability"), errors, 1.0, 20.0)) g.compute_capability = *v;
  if (auto v = ReadInt(opt("sms"), errors, 1, 4096)) g.sms = *v;
  if (auto v = ReadDouble(opt("price_per_hour_usd"), errors, 0.0, 1e4)) g.price_per_hour_usd = *v;
  ReadString(opt("price_source"), errors);
  if (auto v = ReadWatts(opt("tdp"), errors)) g.tdp_watts = *v;
  if (auto v = ReadWatts(opt("power_limit"), errors)) {
    if (auto problem = PowerLimitProblem(g, *v)) {
      errors.Add(node["power_limit"], JoinPath(path, "power_limit"), *problem);
    } else {
      g.power_limit_watts = *v;
    }
  }
  ReadString(opt("power_source"), errors);
  if (auto v = ReadString(req("source"), errors)) g.source = *v;
  const YAML::Node dense = node["dense"];
  const std::string dense_path = JoinPath(path, "dense");
  if (!dense) {
    errors.Add(node, dense_path, "missing required key (dense FLOP/s per dtype)");
  } else if (CheckMapping(dense, dense_path, {"fp32", "tf32", "bf16", "fp16", "fp8"}, errors)) {
    auto k = [&](absl::string_view name) { return Key{dense, name, dense_path, false}; };
    g.fp32 = ReadFlopRate(k("fp32"), errors);
    g.tf32 = ReadFlopRate(k("tf32"), errors);
    g.bf16 = ReadFlopRate(k("bf16"), errors);
    g.fp16 = ReadFlopRate(k("fp16"), errors);
    g.fp8 = ReadFlopRate(k("fp8"), errors);
    if (!dense["bf16"] && !dense["fp16"]) {
      errors.Add(dense, dense_path, "a GPU needs at least a bf16 or fp16 dense rate");
    }
  }
  if (const YAML::Node cal = node["calibration"]) {
    ReadCalibration(cal, JoinPath(path, "calibration"), g.calibration, errors);
  }
  return g;
}

// A catalog entry, with its calibration_file applied.
static std::optional<GpuSpec> ReadGpu(const YAML::Node& node, absl::string_view path,
                                      const std::string& catalog_file, ParsedFiles& calibrations,
                                      YamlErrors& errors) {
  std::optional<GpuSpec> g = ReadGpu(node, path, errors);
  // calibration_file: a file stepsim calibrate wrote, or a list of them applied in order (the
  // GPU's own fit, then a kernel library's), relative to the catalog's folder, over the inline
  // calibration (a same-silicon part may use another part's fit).
  const YAML::Node files = Child(node, "calibration_file");
  if (!g || !files.IsDefined()) return g;
  const std::string fpath = JoinPath(path, "calibration_file");
  std::vector<std::pair<YAML::Node, std::string>> named;
  if (files.IsSequence()) {
    for (size_t i = 0; i < files.size(); ++i) {
      if (files[i].IsScalar()) {
        named.emplace_back(files[i], files[i].Scalar());
      } else {
        errors.Add(files[i], absl::StrCat(fpath, "[", i, "]"),
                   "expected a calibration file's path");
      }
    }
  } else if (auto v = ReadString(Key{node, "calibration_file", path, false}, errors)) {
    named.emplace_back(files, *v);
  }
  for (const auto& [at, file] : named) {
    const std::string full =
        (std::filesystem::path(catalog_file).parent_path() / file).lexically_normal().string();
    auto f = ReadCalibrationFile(full, g->calibration, &calibrations);
    if (!f.ok()) {
      errors.Add(at, fpath, f.status().message());
      return g;
    }
    g->calibration = f->calibration;
  }
  return g;
}

absl::StatusOr<std::vector<GpuSpec>> LoadGpuCatalog(const std::string& path) {
  auto root = LoadYamlFile(path);
  if (!root.ok()) return root.status();
  YamlErrors errors(path);
  CheckSchemaVersion(*root, errors);
  CheckMapping(*root, "", {"schema_version", "gpus"}, errors);
  std::vector<GpuSpec> gpus;
  const YAML::Node list = (*root)["gpus"];
  if (!list || !list.IsSequence()) {
    errors.Add(*root, "gpus", "expected a list of GPU entries");
    return errors.ToStatus();
  }
  ParsedFiles calibrations;
  for (size_t i = 0; i < list.size(); ++i) {
    if (auto g = ReadGpu(list[i], absl::StrCat("gpus[", i, "]"), path, calibrations, errors)) {
      for (const GpuSpec& other : gpus) {
        if (absl::AsciiStrToLower(other.name) == absl::AsciiStrToLower(g->name)) {
          errors.Add(list[i]["name"], absl::StrCat("gpus[", i, "].name"),
                     absl::StrCat("duplicate GPU name '", g->name, "'"));
        }
      }
      gpus.push_back(*g);
    }
  }
  if (!errors.empty()) return errors.ToStatus();
  return gpus;
}

absl::StatusOr<CalibrationFile> LoadCalibrationFile(const DataRoot& root, const std::string& path) {
  auto gpus = LoadGpuCatalog(root.GpuCatalogFile());
  if (!gpus.ok()) return gpus.status();
  // The GPU is looked up first, so that the file applies over that GPU's catalog calibration.
  auto named = ReadCalibrationFile(path, GpuCalibration{});
  if (!named.ok()) return named.status();
  auto g = FindGpu(*gpus, named->gpu);
  if (!g.ok()) {
    return absl::NotFoundError(absl::StrCat(path, ": gpu: ", g.status().message()));
  }
  auto f = ReadCalibrationFile(path, g->calibration);
  if (!f.ok()) return f.status();
  f->gpu = g->name;
  f->calibration.fitted_gpu = g->name;
  f->calibration.note = absl::StrCat("--calibration ", path);
  return f;
}

absl::StatusOr<GpuSpec> FindGpu(const std::vector<GpuSpec>& gpus, absl::string_view name) {
  std::vector<std::string> names;
  for (const GpuSpec& g : gpus) {
    if (absl::AsciiStrToLower(g.name) == absl::AsciiStrToLower(name)) return g;
    names.push_back(g.name);
  }
  return absl::NotFoundError(absl::StrCat("unknown GPU '", name, "'", DidYouMean(name, names)));
}

namespace {

// A node type's `host:` mapping (sim/spec/hardware.h HostSpec).
std::optional<HostSpec> ReadHost(const YAML::Node& n, const std::string& p, YamlErrors& errors) {
  if (!CheckMapping(n, p,
                    {"dram", "dram_bandwidth", "cores", "pcie_gen", "pcie_lanes",
                     "gpus_per_pcie_link", "nvme", "nvme_bandwidth", "source"},
                    errors)) {
    return std::nullopt;
  }
  HostSpec h;
  auto req = [&](absl::string_view k) { return Key{n, k, p, true}; };
  auto opt = [&](absl::string_view k) { return Key{n, k, p, false}; };
  if (auto v = ReadBytes(req("dram"), errors)) h.dram = *v;
  if (auto v = ReadBandwidth(req("dram_bandwidth"), errors)) h.dram_bandwidth = *v;
  if (auto v = ReadInt(req("cores"), errors, 1, 100000)) h.cores = *v;
  if (auto v = ReadInt(req("pcie_gen"), errors, 1, 7)) h.pcie_gen = *v;
  if (auto v = ReadInt(req("pcie_lanes"), errors, 1, 32)) h.pcie_lanes = *v;
  if (auto v = ReadInt(opt("gpus_per_pcie_link"), errors, 1, 64)) h.gpus_per_pcie_link = *v;
  if (auto v = ReadBytes(opt("nvme"), errors)) h.nvme = *v;
  if (auto v = ReadBandwidth(opt("nvme_bandwidth"), errors)) h.nvme_bandwidth = *v;
  if (auto v = ReadString(req("source"), errors)) h.source = *v;
  if ((h.nvme > Bytes()) != (h.nvme_bandwidth.bytes_per_s() > 0)) {
    errors.Add(n, JoinPath(p, "nvme"), "give nvme and nvme_bandwidth together");
  }
  if (h.dram <= Bytes() || h.dram_bandwidth.bytes_per_s() <= 0) {
    errors.Add(n, JoinPath(p, "dram"), "dram and dram_bandwidth must be positive");
  }
  return h;
}

}  // namespace

std::optional<NodeSpec> ReadNodeType(const YAML::Node& n, const std::string& p,
                                     const std::vector<GpuSpec>& gpus, YamlErrors& errors) {
  if (!CheckMapping(n, p,
                    {"name", "gpu", "gpus_per_node", "intra_node_bandwidth", "nics_per_node",
                     "nic_bandwidth", "intra_node_transport", "gpu_links", "nvlink_domain",
                     "intra_node_latency", "inter_node_latency", "host", "source"},
                    errors)) {
    return std::nullopt;
  }
  NodeSpec node;
  auto req = [&](absl::string_view k) { return Key{n, k, p, true}; };
  auto opt = [&](absl::string_view k) { return Key{n, k, p, false}; };
  if (auto v = ReadString(req("name"), errors)) node.name = *v;
  if (auto v = ReadString(req("gpu"), errors)) {
    auto g = FindGpu(gpus, *v);
    if (!g.ok()) {
      errors.Add(n["gpu"], JoinPath(p, "gpu"), g.status().message());
    } else {
      node.gpu = g->name;
    }
  }
  if (auto v = ReadInt(req("gpus_per_node"), errors, 1, 1024)) node.gpus_per_node = *v;
  if (auto v = ReadBandwidth(req("intra_node_bandwidth"), errors)) {
    node.intra_node_bandwidth = *v;
  }
  if (auto v = ReadInt(req("nics_per_node"), errors, 0, 1024)) node.nics_per_node = *v;
  if (auto v = ReadBandwidth(req("nic_bandwidth"), errors)) node.nic_bandwidth = *v;
  if (auto v = ReadTransportName(opt("intra_node_transport"), false, errors)) {
    node.intra_node_transport = *v;
  }
  if (auto v = ReadChoice(opt("gpu_links"), errors, {"switch", "mesh"})) {
    node.gpu_mesh = *v == "mesh";
  }
  if (auto v = ReadInt(opt("nvlink_domain"), errors, 1, 1 << 20)) {
    if (*v % node.gpus_per_node != 0 || node.intra_node_transport != "nvlink") {
      errors.Add(n["nvlink_domain"], JoinPath(p, "nvlink_domain"),
                 absl::StrCat("an NVLink domain is whole nodes of NVLink GPUs: a multiple of "
                              "gpus_per_node (",
                              node.gpus_per_node, "), got ", *v));
    } else {
      node.nvlink_domain = *v;
    }
  }
  if (auto v = ReadDuration(opt("intra_node_latency"), errors)) node.intra_node_latency = *v;
  if (auto v = ReadDuration(opt("inter_node_latency"), errors)) node.inter_node_latency = *v;
  if (auto v = ReadString(req("source"), errors)) node.source = *v;
  if (const YAML::Node h = n["host"]; h) node.host = ReadHost(h, JoinPath(p, "host"), errors);
  return node;
}

std::optional<std::string> FoldNvlinkDomain(ClusterSpec& c) {
  NodeSpec& n = c.node;
  if (n.nvlink_domain <= n.gpus_per_node) return std::nullopt;
  if (n.nvlink_domain % n.gpus_per_node != 0) {
    return absl::StrCat("the NVLink domain of ", n.name, " (", n.nvlink_domain,
                        " GPUs) is whole nodes: gpus_per_node must divide it, got ",
                        n.gpus_per_node);
  }
  // A job is placed on as few domains as hold it, split evenly (a scheduler fills racks
  // alike: 32 trays of an NVL72 are two racks of 16): domains = ceil(nodes / k).
  const int64_t k = n.nvlink_domain / n.gpus_per_node;
  const int64_t domains = (c.nodes + k - 1) / k;
  if (c.nodes % domains != 0) {
    const int64_t below = c.nodes / domains * domains, above = (c.nodes / domains + 1) * domains;
    return absl::StrCat(c.nodes, " nodes of ", n.name, " do not split evenly over the ", domains,
                        " NVLink domains of at most ", k, " nodes (", n.nvlink_domain,
                        " GPUs) they need; use ", below, " or ", above, " nodes");
  }
  const int64_t per = c.nodes / domains;
  c.nodes = domains;
  n.gpus_per_node *= per;
  n.nics_per_node *= per;
  n.domain_nodes = per;
  if (n.host) {
    HostSpec& h = *n.host;
    h.dram = h.dram * per;
    h.dram_bandwidth = h.dram_bandwidth * static_cast<double>(per);
    h.cores *= per;
    h.nvme = h.nvme * per;
    h.nvme_bandwidth = h.nvme_bandwidth * static_cast<double>(per);
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<NodeSpec>> LoadNodeCatalog(const std::string& path,
                                                      const std::vector<GpuSpec>& gpus) {
  auto root = LoadYamlFile(path);
  if (!root.ok()) return root.status();
  YamlErrors errors(path);
  CheckSchemaVersion(*root, errors);
  CheckMapping(*root, "", {"schema_version", "nodes"}, errors);
  const YAML::Node list = (*root)["nodes"];
  if (!list || !list.IsSequence()) {
    errors.Add(*root, "nodes", "expected a list of node types");
    return errors.ToStatus();
  }
  std::vector<NodeSpec> nodes;
  for (size_t i = 0; i < list.size(); ++i) {
    if (auto node = ReadNodeType(list[i], absl::StrCat("nodes[", i, "]"), gpus, errors)) {
      nodes.push_back(*node);
    }
  }
  if (!errors.empty()) return errors.ToStatus();
  return nodes;
}

}  // namespace sim::config
