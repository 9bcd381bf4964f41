// stepsim list models|gpus|nodes|fabrics|systems: what the catalogs hold, with the key figures
// of each entry and, for GPUs, what their time calibration rests on.

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "sim/base/suggest.h"
#include "sim/config/catalog.h"
#include "sim/report/json_text.h"
#include "sim/report/table.h"
#include "sim/spec/enum_names.h"
#include "sim/workload/params.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"

namespace stepsim_cli {

namespace {

using Json = nlohmann::ordered_json;

// One listing: its rows as JSON (each with "name") and as a table for people.
struct Listing {
  Json rows = Json::array();
  sim::report::Table table;
};

std::string Rate(const std::optional<sim::FlopRate>& r) {
  return r ? absl::StrFormat("%.0f", r->per_second() / 1e12) : "-";
}

// The kernel libraries with terms of their own (GpuCalibration::libraries) and what each rests
// on, e.g. "transformer_engine: nemo-dgxc-h100"; empty where there are none.
std::string LibraryBasis(const sim::GpuSpec& g) {
  std::vector<std::string> out;
  for (const sim::GpuCalibration::Library& l : g.calibration.libraries) {
    out.push_back(absl::StrCat(
        sim::Name(l.library), ": ",
        l.fit_sources.empty() ? "first estimates" : absl::StrJoin(l.fit_sources, ", ")));
  }
  return absl::StrJoin(out, "; ");
}

absl::StatusOr<Listing> Models(const sim::config::DataRoot& root) {
  Listing l{Json::array(), sim::report::Table({"model", "family", "parameters", "active", "layers",
                                               "hidden", "heads", "kv heads", "experts"})};
  for (const std::string& name : sim::config::CatalogModelNames(root)) {
    auto m = sim::config::LoadModel(root, name);
    if (!m.ok()) return m.status();
    const sim::ParameterCount p = sim::CountParameters(*m);
    const std::string experts =
        m->moe ? absl::StrCat(m->moe->experts, " (top ", m->moe->top_k, ")") : "-";
    l.rows.push_back({{"name", name},
                      {"family", m->family},
                      {"parameters", p.total},
                      {"active_parameters", p.active},
                      {"layers", m->layers},
                      {"hidden", m->hidden},
                      {"heads", m->heads},
                      {"kv_heads", m->kv_heads},
                      {"experts", m->moe ? Json(m->moe->experts) : Json(nullptr)},
                      {"source", m->source}});
    l.table.AddRow({name, m->family, absl::StrFormat("%.2f B", p.total / 1e9),
                    absl::StrFormat("%.2f B", p.active / 1e9), absl::StrCat(m->layers),
                    absl::StrCat(m->hidden), absl::StrCat(m->heads), absl::StrCat(m->kv_heads),
                    experts});
  }
  return l;
}

// Each library's terms, what they were fitted to and its note.
Json LibrariesJson(const sim::GpuCalibration& c) {
  Json out = Json::object();
  auto term = [](const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); };
  for (const sim::GpuCalibration::Library& l : c.libraries) {
    out[std::string(sim::Name(l.library))] = {
        {"gemm_efficiency", term(l.gemm_efficiency)},
        {"fp8_gemm_efficiency", term(l.fp8_gemm_efficiency)},
        {"attention_efficiency", term(l.attention_efficiency)},
        {"attention_kv_overhead", term(l.attention_kv_overhead)},
        {"fit_sources", l.fit_sources},
        {"note", l.note}};
  }
  return out;
}

// "700" (rated power), "500 of 700 (clocks 89 %)" under a limit, "-" where the catalog has none.
std::string Power(const sim::GpuSpec& g) {
  if (!g.tdp_watts) return "-";
  if (!g.power_limit_watts) return absl::StrFormat("%.0f", *g.tdp_watts);
  return absl::StrFormat("%.0f of %.0f (clocks %.0f %%)", *g.power_limit_watts, *g.tdp_watts,
                         100 * g.SustainedClock());
}

absl::StatusOr<Listing> Gpus(const sim::config::DataRoot& root) {
  auto catalogs = sim::config::LoadCatalogs(root);
  if (!catalogs.ok()) return catalogs.status();
  Listing l{Json::array(),
            sim::report::Table({"GPU", "HBM GiB", "usable GiB", "HBM TB/s", "bf16 TFLOP/s",
                                "fp8 TFLOP/s", "power W", "$/hour", "time calibration"})};
  for (const sim::GpuSpec& g : catalogs->gpus) {
    const std::string libraries = LibraryBasis(g);
    const std::string basis = libraries.empty() ? sim::CalibrationBasis(g)
                                                : absl::StrCat(sim::CalibrationBasis(g),
                                                               "; kernel libraries: ", libraries);
    l.rows.push_back(
        {{"name", g.name},
         {"hbm_bytes", g.hbm.count()},
         {"usable_bytes", g.Usable().count()},
         {"hbm_bytes_per_s", g.hbm_bandwidth.bytes_per_s()},
         {"bf16_flops_per_s", g.bf16 ? Json(g.bf16->per_second()) : Json(nullptr)},
         {"fp8_flops_per_s", g.fp8 ? Json(g.fp8->per_second()) : Json(nullptr)},
         {"price_per_hour_usd", g.price_per_hour_usd ? Json(*g.price_per_hour_usd) : Json(nullptr)},
         {"tdp_watts", g.tdp_watts ? Json(*g.tdp_watts) : Json(nullptr)},
         {"power_limit_watts", g.power_limit_watts ? Json(*g.power_limit_watts) : Json(nullptr)},
         {"sustained_clock", g.SustainedClock()},
         {"calibration", basis},
         {"calibrated_on",
          g.calibration.fitted_gpu.empty() ? Json(nullptr) : Json(g.calibration.fitted_gpu)},
         {"calibration_note", g.calibration.note},
         {"kernel_libraries", LibrariesJson(g.calibration)},
         {"source", g.source}});
    l.table.AddRow(
        {g.name, absl::StrFormat("%.0f", g.hbm.gib()), absl::StrFormat("%.1f", g.Usable().gib()),
         absl::StrFormat("%.2f", g.hbm_bandwidth.bytes_per_s() / 1e12), Rate(g.bf16), Rate(g.fp8),
         Power(g), g.price_per_hour_usd ? absl::StrFormat("%.2f", *g.price_per_hour_usd) : "-",
         basis});
  }
  return l;
}

absl::StatusOr<Listing> Nodes(const sim::config::DataRoot& root) {
  auto catalogs = sim::config::LoadCatalogs(root);
  if (!catalogs.ok()) return catalogs.status();
  Listing l{Json::array(), sim::report::Table({"node", "GPU", "GPUs", "GPU link GB/s", "NICs",
                                               "NIC Gb/s", "NVLink domain", "host (offload)"})};
  for (const sim::NodeSpec& n : catalogs->nodes) {
    l.rows.push_back({{"name", n.name},
                      {"gpu", n.gpu},
                      {"gpus_per_node", n.gpus_per_node},
                      {"intra_node_bytes_per_s", n.intra_node_bandwidth.bytes_per_s()},
                      {"nics_per_node", n.nics_per_node},
                      {"nic_bytes_per_s", n.nic_bandwidth.bytes_per_s()},
                      {"nvlink_domain", n.nvlink_domain},
                      {"host", n.host.has_value()},
                      {"source", n.source}});
    l.table.AddRow({n.name, n.gpu, absl::StrCat(n.gpus_per_node),
                    absl::StrFormat("%.0f", n.intra_node_bandwidth.bytes_per_s() / 1e9),
                    absl::StrCat(n.nics_per_node),
                    absl::StrFormat("%.0f", n.nic_bandwidth.bytes_per_s() * 8 / 1e9),
                    n.nvlink_domain > 0 ? absl::StrCat(n.nvlink_domain, " GPUs") : "-",
                    n.host ? "yes" : "-"});
  }
  return l;
}

absl::StatusOr<Listing> Fabrics(const sim::config::DataRoot& root) {
  Listing l{Json::array(), sim::report::Table({"fabric", "kind", "transport", "levels",
                                               "rail-optimised", "oversubscription", "SHARP"})};
  for (const std::string& name : sim::config::CatalogFabricNames(root)) {
    auto f = sim::config::LoadFabric(root, name, {});
    if (!f.ok()) return f.status();
    const bool fat_tree = f->kind == sim::FabricSpec::Kind::kFatTree;
    l.rows.push_back({{"name", name},
                      {"kind", fat_tree ? "fat_tree" : "explicit"},
                      {"transport", f->transport},
                      {"levels", fat_tree ? Json(f->levels) : Json(nullptr)},
                      {"rail_optimized", f->rail_optimized},
                      {"oversubscription", f->oversubscription},
                      {"sharp", f->sharp},
                      {"source", f->source}});
    l.table.AddRow({name, fat_tree ? "fat tree" : "explicit", f->transport,
                    fat_tree ? absl::StrCat(f->levels) : "-",
                    fat_tree ? (f->rail_optimized ? "yes" : "no") : "-",
                    fat_tree ? absl::StrFormat("%g:1", f->oversubscription) : "-",
                    f->sharp ? "yes" : "-"});
  }
  return l;
}

// Cluster files: topologies/*.yaml and topologies/systems/*.yaml (real systems as built).
absl::StatusOr<Listing> Systems(const sim::config::DataRoot& root) {
  Listing l{Json::array(),
            sim::report::Table({"system", "file", "node", "nodes", "GPUs", "fabric"})};
  for (const char* dir : {"/topologies", "/topologies/systems"}) {
    for (const std::string& file : sim::config::YamlFilesIn(root.path + dir, false)) {
      const std::string base = std::filesystem::path(file).filename().string();
      if (base == "gpus.yaml" || base == "nodes.yaml") continue;
      auto t = sim::config::LoadClusterTopology(root, file);
      if (!t.ok()) return t.status();
      const std::string rel = std::filesystem::path(file).lexically_relative(root.path).string();
      const std::string fabric = t->cluster.fabric ? t->cluster.fabric->name : "default";
      const int64_t nodes = t->cluster.nodes * t->cluster.node.domain_nodes;
      l.rows.push_back({{"name", t->name},
                        {"file", rel},
                        {"node", t->cluster.node.name},
                        {"nodes", nodes},
                        {"gpus", t->cluster.gpus()},
                        {"fabric", fabric},
                        {"source", t->source}});
      l.table.AddRow({t->name, rel, t->cluster.node.name, absl::StrCat(nodes),
                      absl::StrCat(t->cluster.gpus()), fabric});
    }
  }
  return l;
}

}  // namespace

int ListCommand(const std::vector<std::string>& args) {
  FlagSet flags(
      "stepsim list models|gpus|nodes|fabrics|systems [--json PATH] [--markdown]",
      "Lists what a catalog holds (models/, topologies/gpus.yaml, topologies/nodes.yaml,\n"
      "topologies/fabrics/, the cluster files of topologies/ and topologies/systems/),\n"
      "with each entry's key figures; for GPUs, what their time calibration rests on.",
      {{"json", "PATH", "write {<catalog>: [{name, ...}]} (- = standard output)"},
       {"markdown", "", "print the table as Markdown (docs/reference.md's catalog tables)"}});
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("list", st);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  const std::vector<std::string> catalogs = {"models", "gpus", "nodes", "fabrics", "systems"};
  if (flags.positional().size() != 1) {
    return Fail("list", absl::InvalidArgumentError(
                            absl::StrCat("name one catalog: ", absl::StrJoin(catalogs, ", "))));
  }
  const std::string& what = flags.positional()[0];
  const sim::config::DataRoot root = sim::config::DataRoot::Default();
  absl::StatusOr<Listing> listing;
  if (what == "models") {
    listing = Models(root);
  } else if (what == "gpus") {
    listing = Gpus(root);
  } else if (what == "nodes") {
    listing = Nodes(root);
  } else if (what == "fabrics") {
    listing = Fabrics(root);
  } else if (what == "systems") {
    listing = Systems(root);
  } else {
    return Fail("list", absl::InvalidArgumentError(absl::StrCat(
                            "unknown catalog '", what, "'", sim::DidYouMean(what, catalogs),
                            "; one of ", absl::StrJoin(catalogs, ", "))));
  }
  if (!listing.ok()) return Fail("list", listing.status());
  if (auto p = flags.Get("json")) {
    Json j;
    j[what] = listing->rows;
    if (absl::Status st = WriteOutput(*p, sim::report::JsonText(j) + "\n"); !st.ok()) {
      return Fail("list", st);
    }
    if (*p == "-") return kExitOk;
  }
  std::cout << (flags.Has("markdown") ? listing->table.Markdown() : listing->table.Render(0));
  return kExitOk;
}

}  // namespace stepsim_cli
