#include "sim/explore/plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/report/table.h"
#include "sim/workload/layer_ops.h"
#include "sim/workload/lowering.h"
#include "sim/workload/params.h"

namespace sim::explore {

namespace {

constexpr double kGiB = 1073741824.0;

struct Candidate {
  std::string gpu;
  int64_t gpus = 0;
  int zero = 3;
  int64_t micro = 1;
  std::string recompute = "full";
  std::vector<config::Override> overrides;
  int64_t tp = 1, pp = 1;  // > 1: the Megatron layout family (distributed optimizer, SP)
};

nlohmann::ordered_json ConfigJson(const Candidate& c) {
  nlohmann::ordered_json j = {
      {"zero", c.zero}, {"micro_batch", c.micro}, {"recompute", c.recompute}, {"prefetch", 1}};
  if (c.tp * c.pp > 1) {
    j["framework"] = "megatron";
    j["tp"] = c.tp;
    j["pp"] = c.pp;
    j["sequence_parallel"] = c.tp > 1;
  }
  return j;
}

// The model-parallel family searched beside ZeRO: Megatron-LM layouts with TP inside a node
// (1, 2, 4, 8 up to its GPUs) and PP 1, 2, 4, 8 (1F1B), the distributed optimizer, sequence
// parallelism with TP, micro-batch 1 and selective or full recompute.
std::vector<Candidate> ModelParallelCandidates(const std::string& gpu, int64_t n, int64_t gpn) {
  std::vector<Candidate> out;
  for (int64_t tp : {1, 2, 4, 8}) {
    for (int64_t pp : {1, 2, 4, 8}) {
      if (tp * pp == 1 || tp > gpn || tp * pp > n || n % (tp * pp) != 0) continue;
      for (const char* recompute : {"selective", "full"}) {
        Candidate c{gpu, n, 1, 1, recompute, {}, tp, pp};
        c.overrides = {{"parallel.framework", "megatron"},
                       {"parallel.zero", "1"},
                       {"parallel.tp", absl::StrCat(tp)},
                       {"parallel.pp", absl::StrCat(pp)},
                       {"parallel.sequence_parallel", tp > 1 ? "true" : "false"},
                       {"training.micro_batch", "1"},
                       {"training.recompute", recompute}};
        out.push_back(std::move(c));
      }
    }
  }
  return out;
}

// Largest divisor of n not above `cap`.
int64_t PerNode(int64_t n, int64_t cap) {
  for (int64_t g = std::min(n, cap); g >= 1; --g) {
    if (n % g == 0) return g;
  }
  return 1;
}

// Static floor of a candidate's per-GPU memory: persistent states, the activations kept across
// the whole forward (all layers), the runtime reserve. The replay only adds to it.
Bytes StaticFloor(const Scenario& s) {
  const ActivationShape shape{s.training.seq_len,           s.training.micro_batch, s.parallel.tp,
                              s.parallel.sequence_parallel, s.training.attention,   s.parallel.cp};
  const Bytes per_layer = LayerActivationBytes(s.model, shape, s.training.recompute);
  return PersistentStates(s).total() + per_layer * s.model.layers + s.runtime.reserved;
}

// Rejections in a canonical order (GPU, GPU count, configuration), whatever the sharding.
void SortRejected(nlohmann::ordered_json& rejected) {
  std::vector<nlohmann::ordered_json> v(rejected.begin(), rejected.end());
  auto key = [](const nlohmann::ordered_json& r) {
    return std::make_tuple(r["gpu"].get<std::string>(), r["gpus"].get<int64_t>(),
                           r["config"].dump());
  };
  std::stable_sort(v.begin(), v.end(),
                   [&](const auto& a, const auto& b) { return key(a) < key(b); });
  rejected = nlohmann::ordered_json(v);
}

std::string Largest(const nlohmann::ordered_json& breakdown) {
  std::string best;
  int64_t most = -1;
  for (auto it = breakdown.begin(); it != breakdown.end(); ++it) {
    if (it.value().get<int64_t>() > most) {
      most = it.value().get<int64_t>();
      best = it.key();
    }
  }
  return absl::StrFormat("%s (%.2f GiB of the peak)", best, static_cast<double>(most) / kGiB);
}

// "ZeRO-3 mb1 full", or "megatron tp8 pp2 sp mb1 selective".
std::string ConfigLabel(const nlohmann::ordered_json& c) {
  if (c.contains("tp")) {
    return absl::StrFormat("megatron tp%d pp%d%s mb%d %s", c["tp"].get<int>(), c["pp"].get<int>(),
                           c["sequence_parallel"].get<bool>() ? " sp" : "",
                           c["micro_batch"].get<int>(), c["recompute"].get<std::string>());
  }
  return absl::StrFormat("ZeRO-%d mb%d %s", c["zero"].get<int>(), c["micro_batch"].get<int>(),
                         c["recompute"].get<std::string>());
}

}  // namespace

absl::StatusOr<nlohmann::ordered_json> Plan(const config::DataRoot& root, const PlanRequest& req,
                                            const Progress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  auto catalogs = config::LoadCatalogs(root);
  if (!catalogs.ok()) return catalogs.status();
  auto model = config::LoadModel(root, req.model);
  if (!model.ok()) return model.status();
  const int64_t params = CountParameters(*model).total;
  const int64_t global_batch =
      std::max<int64_t>(1, (req.global_batch_tokens + req.seq_len / 2) / req.seq_len);

  nlohmann::ordered_json out;
  out["schema_version"] = 1;
  out["model"] = model->name;
  out["params"] = params;
  out["seq_len"] = req.seq_len;
  out["tokens"] = req.tokens;
  out["global_batch"] = global_batch;
  out["min_gpus"] = nlohmann::ordered_json::object();
  out["pareto"] = nlohmann::ordered_json::array();
  out["rejected"] = nlohmann::ordered_json::array();
  int64_t considered = 0, pruned = 0, replayed = 0;
  nlohmann::ordered_json fits = nlohmann::ordered_json::array();

  // Work units in a fixed order: per GPU type, the smallest-count search, then one unit per
  // whole-node cluster size. A shard runs a contiguous slice of them.
  std::vector<std::pair<std::string, int64_t>> units;  // (GPU, nodes; 0 = smallest-count search)
  for (const std::string& gpu_name : req.gpus) {
    auto gpu = config::FindGpu(catalogs->gpus, gpu_name);
    if (!gpu.ok()) return gpu.status();
    int64_t gpn = 0;
    for (const NodeSpec& n : catalogs->nodes) {
      if (n.gpu == gpu->name && gpn == 0) gpn = n.gpus_per_node;
    }
    units.push_back({gpu->name, 0});
    for (int64_t nodes = 1; gpn > 0 && nodes * gpn <= req.max_gpus; nodes *= 2) {
      units.push_back({gpu->name, nodes});
    }
  }
  const size_t total_units = units.size();
  const size_t begin =
      total_units * static_cast<size_t>(req.shard_k - 1) / static_cast<size_t>(req.shard_n);
  const size_t end =
      total_units * static_cast<size_t>(req.shard_k) / static_cast<size_t>(req.shard_n);
  auto mine = [&](const std::string& gpu, int64_t nodes) {
    for (size_t i = begin; i < end; ++i) {
      if (units[i].first == gpu && units[i].second == nodes) return true;
    }
    return false;
  };
  out["shard"] = {{"begin", begin}, {"end", end}, {"total", total_units}};

  for (const std::string& gpu_name : req.gpus) {
    auto gpu = config::FindGpu(catalogs->gpus, gpu_name);
    if (!gpu.ok()) return gpu.status();
    const NodeSpec* node = nullptr;
    for (const NodeSpec& n : catalogs->nodes) {
      if (n.gpu == gpu->name && node == nullptr) node = &n;
    }
    if (node == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("plan: no node type in topologies/nodes.yaml holds ", gpu->name,
                       "; add one (GPUs per node, NVLink and NIC bandwidth) to plan with it"));
    }
    std::optional<double> price = gpu->price_per_hour_usd;
    if (auto it = req.prices.find(gpu->name); it != req.prices.end()) price = it->second;

    const std::string text = absl::StrFormat(
        "schema_version: 1\nname: plan-%s-%s\nmodel: %s\ncluster: {node: %s, nodes: 1}\n"
        "training: {seq_len: %d, micro_batch: 1, global_batch: %d, recompute: full}\n"
        "parallel: {framework: %s, zero: 3, prefetch: 1}\n",
        model->name, gpu->name, req.model, node->name, req.seq_len, global_batch, req.framework);
    auto loader = config::ScenarioLoader::FromText(root, text, absl::StrCat("plan:", gpu->name));
    if (!loader.ok()) return loader.status();
    const int64_t gpn = node->gpus_per_node;

    // ---- Pareto search over whole-node clusters --------------------------------------------
    std::vector<Candidate> candidates;
    std::vector<nlohmann::ordered_json> rejected;
    for (int64_t nodes = 1; nodes * gpn <= req.max_gpus; nodes *= 2) {
      if (!mine(gpu->name, nodes)) continue;
      const int64_t n = nodes * gpn;
      std::vector<Candidate> family;
      for (int zero = 0; zero <= 3; ++zero) {
        for (int64_t micro : {1, 2, 4}) {
          for (const char* recompute : {"none", "selective", "full"}) {
            Candidate c{gpu->name, n, zero, micro, recompute, {}};
            c.overrides = {{"parallel.zero", absl::StrCat(zero)},
                           {"training.micro_batch", absl::StrCat(micro)},
                           {"training.recompute", recompute}};
            family.push_back(std::move(c));
          }
        }
      }
      for (Candidate& c : ModelParallelCandidates(gpu->name, n, gpn))
        family.push_back(std::move(c));
      for (Candidate& c : family) {
        ++considered;
        c.overrides.insert(c.overrides.begin(), {"cluster.nodes", absl::StrCat(nodes)});
        const int64_t replicas = n / (c.tp * c.pp);
        if (global_batch % (c.micro * replicas) != 0) {
          ++pruned;
          rejected.push_back({{"gpu", gpu->name},
                              {"gpus", n},
                              {"config", ConfigJson(c)},
                              {"kind", "batch"},
                              {"reason", absl::StrFormat("global batch %d is not a multiple of "
                                                         "micro-batch x data-parallel ranks = %d",
                                                         global_batch, c.micro * replicas)}});
          continue;
        }
        auto s = loader->Load(c.overrides);
        if (!s.ok()) {
          // A layout the model does not admit (TP not dividing the heads, PP the layers).
          ++pruned;
          const std::string why(s.status().message());
          rejected.push_back({{"gpu", gpu->name},
                              {"gpus", n},
                              {"config", ConfigJson(c)},
                              {"kind", "layout"},
                              {"reason", why.substr(why.find(": ") + 2)}});
          continue;
        }
        const Bytes floor = StaticFloor(*s);
        if (floor > s->cluster.gpu.hbm) {
          ++pruned;
          rejected.push_back(
              {{"gpu", gpu->name},
               {"gpus", n},
               {"config", ConfigJson(c)},
               {"kind", "static"},
               {"reason", absl::StrFormat("static ledger: states + kept activations + reserve "
                                          "= %.1f GiB > %.0f GiB",
                                          floor.gib(), s->cluster.gpu.hbm.gib())},
               {"floor_bytes", floor.count()}});
          continue;
        }
        candidates.push_back(c);
      }
    }
    std::vector<std::vector<config::Override>> configs;
    for (const Candidate& c : candidates) configs.push_back(c.overrides);
    const auto results = RunConfigs(*loader, configs, req.jobs, progress);
    replayed += static_cast<int64_t>(results.size());
    for (size_t i = 0; i < results.size(); ++i) {
      const Candidate& c = candidates[i];
      const auto& r = results[i];
      if (!r.status.ok()) {
        rejected.push_back({{"gpu", gpu->name},
                            {"gpus", c.gpus},
                            {"config", ConfigJson(c)},
                            {"kind", "invalid"},
                            {"reason", std::string(r.status.message())}});
        continue;
      }
      const auto& mem = r.report["memory"];
      if (!mem["fits"].get<bool>()) {
        const auto& o = mem["first_overflow"];
        rejected.push_back(
            {{"gpu", gpu->name},
             {"gpus", c.gpus},
             {"config", ConfigJson(c)},
             {"kind", "replay"},
             {"reason",
              absl::StrFormat("replay: out of memory at %s by %.2f GiB (peak %.1f GiB)",
                              o["op"].get<std::string>(), o["excess_bytes"].get<double>() / kGiB,
                              mem["peak_bytes"].get<double>() / kGiB)}});
        continue;
      }
      const double step = r.report["time"]["step_s"].get<double>();
      const double tps = r.report["throughput"]["tokens_per_s"].get<double>();
      const double days = req.tokens / tps / 86400.0;
      nlohmann::ordered_json fit = {{"gpu", gpu->name}, {"gpus", c.gpus}, {"config", ConfigJson(c)},
                                    {"step_s", step},   {"days", days},   {"cost", nullptr}};
      if (price) fit["cost"] = days * 24.0 * static_cast<double>(c.gpus) * *price;
      fits.push_back(fit);
    }
    for (auto& j : rejected) out["rejected"].push_back(j);
    if (!mine(gpu->name, 0)) continue;

    // ---- smallest GPU count that fits -------------------------------------------------------
    // Static lower bound: 16 B/param sharded over N (ZeRO-3) plus the layer inputs of full
    // recompute plus the reserve must fit.
    const Candidate frugal{gpu->name, 0, 3, 1, "full", {}};
    auto fits_at = [&](int64_t n) -> absl::StatusOr<nlohmann::ordered_json> {
      const int64_t per_node = PerNode(n, gpn);
      std::vector<config::Override> o = {{"cluster.nodes", absl::StrCat(n / per_node)},
                                         {"cluster.gpus_per_node", absl::StrCat(per_node)},
                                         {"training.global_batch", absl::StrCat(2 * n)}};
      const auto r = RunConfigs(*loader, {o}, 1, nullptr);
      ++replayed;
      if (!r[0].status.ok()) return r[0].status;
      return r[0].report;
    };
    int64_t lo = 1;  // largest N known not to fit (or 1 as the floor), hi = smallest that fits
    {
      auto s = loader->Load({});
      if (!s.ok()) return s.status();
      const Bytes act = StaticFloor(*s) - PersistentStates(*s).total() - s->runtime.reserved;
      const double per_gpu_room = (s->cluster.gpu.hbm - act - s->runtime.reserved).gb();
      const double states = static_cast<double>(PersistentStates(*s).total().count()) *
                            static_cast<double>(s->dp()) / 1e9;  // ZeRO-3 states of the model
      lo = per_gpu_room > 0 ? std::max<int64_t>(1, static_cast<int64_t>(states / per_gpu_room))
                            : req.max_gpus;
    }
    std::optional<int64_t> hi;
    nlohmann::ordered_json hi_report;
    for (int64_t n = std::max<int64_t>(lo, 1); n <= req.max_gpus;
         n = n < gpn ? n + 1 : (n / gpn + 1) * gpn) {
      auto r = fits_at(n);
      if (r.ok() && (*r)["memory"]["fits"].get<bool>()) {
        hi = n;
        hi_report = *r;
        break;
      }
      lo = n;
    }
    if (!hi) {
      out["min_gpus"][gpu->name] = {
          {"gpus", nullptr},
          {"reason", absl::StrFormat("nothing fits up to %d GPUs", req.max_gpus)}};
      continue;
    }
    while (*hi - lo > 1) {
      const int64_t mid = lo + (*hi - lo) / 2;
      auto r = fits_at(mid);
      if (r.ok() && (*r)["memory"]["fits"].get<bool>()) {
        hi = mid;
        hi_report = *r;
      } else {
        lo = mid;
      }
    }
    const auto& mem = hi_report["memory"];
    out["min_gpus"][gpu->name] = {{"gpus", *hi},
                                  {"config", ConfigJson(frugal)},
                                  {"peak_bytes", mem["peak_bytes"]},
                                  {"capacity_bytes", mem["capacity_bytes"]},
                                  {"binding", Largest(mem["peak_breakdown_bytes"])},
                                  {"peak_breakdown_bytes", mem["peak_breakdown_bytes"]},
                                  {"one_fewer", absl::StrFormat("%d GPUs do not fit", *hi - 1)}};
  }

  SortRejected(out["rejected"]);
  out["pareto"] = ParetoFrontier(fits);
  out["fitting"] = static_cast<int64_t>(fits.size());
  out["fits"] = fits;
  out["considered"] = considered;
  out["pruned"] = pruned;
  out["replayed"] = replayed;
  out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

nlohmann::ordered_json ParetoFrontier(const nlohmann::ordered_json& fits) {
  std::vector<const nlohmann::ordered_json*> sorted;
  for (const auto& f : fits) {
    if (!f["cost"].is_null()) sorted.push_back(&f);
  }
  using Json = nlohmann::ordered_json;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Json* a, const Json* b) {
    const double da = (*a)["days"].get<double>(), db = (*b)["days"].get<double>();
    if (da != db) return da < db;
    return (*a)["cost"].get<double>() < (*b)["cost"].get<double>();
  });
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  double best_cost = 1e300;
  for (const auto* f : sorted) {
    const double cost = (*f)["cost"].get<double>();
    if (cost >= best_cost) continue;
    best_cost = cost;
    out.push_back(*f);
  }
  return out;
}

absl::StatusOr<nlohmann::ordered_json> MergePlans(std::vector<nlohmann::ordered_json> shards) {
  if (shards.empty()) return absl::InvalidArgumentError("no plan shards to merge");
  using Json = nlohmann::ordered_json;
  std::sort(shards.begin(), shards.end(), [](const Json& a, const Json& b) {
    return a["shard"]["begin"].get<size_t>() < b["shard"]["begin"].get<size_t>();
  });
  nlohmann::ordered_json merged = shards.front();
  const size_t total = merged["shard"]["total"].get<size_t>();
  size_t expect = 0;
  merged["rejected"] = nlohmann::ordered_json::array();
  merged["fits"] = nlohmann::ordered_json::array();
  merged["min_gpus"] = nlohmann::ordered_json::object();
  int64_t considered = 0, pruned = 0, replayed = 0;
  double seconds = 0;
  for (const auto& s : shards) {
    for (const char* k : {"model", "tokens", "seq_len", "global_batch"}) {
      if (s[k] != merged[k]) {
        return absl::InvalidArgumentError(absl::StrCat("plan shards disagree on ", k));
      }
    }
    if (s["shard"]["total"].get<size_t>() != total || s["shard"]["begin"].get<size_t>() != expect) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan shards do not tile one plan: expected a shard starting at unit ",
                       expect, " of ", total));
    }
    expect = s["shard"]["end"].get<size_t>();
    for (const auto& r : s["rejected"]) merged["rejected"].push_back(r);
    for (const auto& f : s["fits"]) merged["fits"].push_back(f);
    for (auto it = s["min_gpus"].begin(); it != s["min_gpus"].end(); ++it) {
      merged["min_gpus"][it.key()] = it.value();
    }
    considered += s["considered"].get<int64_t>();
    pruned += s["pruned"].get<int64_t>();
    replayed += s["replayed"].get<int64_t>();
    seconds += s["seconds"].get<double>();
  }
  if (expect != total) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan shards cover ", expect, " of ", total, " work units"));
  }
  merged["shard"] = {{"begin", 0}, {"end", total}, {"total", total}};
  SortRejected(merged["rejected"]);
  merged["pareto"] = ParetoFrontier(merged["fits"]);
  merged["fitting"] = merged["fits"].size();
  merged["considered"] = considered;
  merged["pruned"] = pruned;
  merged["replayed"] = replayed;
  merged["seconds"] = seconds;
  return merged;
}

std::string PlanText(const nlohmann::ordered_json& p) {
  std::string out = absl::StrFormat(
      "Plan for %s (%s parameters), seq_len %d, %.3g tokens, global batch %d sequences\n\n",
      p["model"].get<std::string>(), report::FormatCount(p["params"].get<double>()),
      p["seq_len"].get<int64_t>(), p["tokens"].get<double>(), p["global_batch"].get<int64_t>());
  report::Table min({"GPU", "min GPUs", "peak", "binding term"});
  for (auto it = p["min_gpus"].begin(); it != p["min_gpus"].end(); ++it) {
    const auto& v = it.value();
    if (v["gpus"].is_null()) {
      min.AddRow({it.key(), "-", "-", v["reason"].get<std::string>()});
      continue;
    }
    min.AddRow({it.key(), absl::StrCat(v["gpus"].get<int64_t>()),
                absl::StrFormat("%.1f of %.0f GiB", v["peak_bytes"].get<double>() / kGiB,
                                v["capacity_bytes"].get<double>() / kGiB),
                v["binding"].get<std::string>()});
  }
  absl::StrAppend(&out, "Smallest GPU count that fits (ZeRO-3, full recompute, micro-batch 1):\n",
                  min.Render(), "\n");
  report::Table par({"GPU", "GPUs", "config", "step s", "days", "cost USD"});
  for (const auto& f : p["pareto"]) {
    const auto& c = f["config"];
    par.AddRow({f["gpu"].get<std::string>(), absl::StrCat(f["gpus"].get<int64_t>()), ConfigLabel(c),
                absl::StrFormat("%.2f", f["step_s"].get<double>()),
                absl::StrFormat("%.1f", f["days"].get<double>()),
                absl::StrFormat("%.0f", f["cost"].get<double>())});
  }
  absl::StrAppend(&out, "Pareto set of time-to-train against cost (", p["fitting"].get<int64_t>(),
                  " fitting configurations):\n", par.Render(), "\n");
  // Rejections by kind, with the closest miss of the replayed ones.
  std::map<std::string, int> kinds;
  for (const auto& r : p["rejected"]) kinds[r["kind"].get<std::string>()]++;
  const std::map<std::string, std::string> what = {
      {"batch", "the global batch does not divide"},
      {"static", "the static ledger exceeds the HBM"},
      {"replay", "the replayed peak exceeds the HBM"},
      {"layout", "the model does not admit the layout"},
      {"invalid", "the configuration is invalid"}};
  absl::StrAppend(&out, "Rejected (each with its reason in --json):\n");
  for (const auto& [k, n] : kinds) {
    absl::StrAppendFormat(&out, "  %4d because %s\n", n, what.count(k) ? what.at(k) : k);
  }
  for (const auto& r : p["rejected"]) {
    if (r["kind"] == "replay") {
      absl::StrAppendFormat(&out, "  e.g. %d x %s %s: %s\n", r["gpus"].get<int64_t>(),
                            r["gpu"].get<std::string>(), ConfigLabel(r["config"]),
                            r["reason"].get<std::string>());
      break;
    }
  }
  // The closest miss of each family (ZeRO, model-parallel) by the static ledger: what would
  // have to shrink for the largest cluster searched.
  for (bool model_parallel : {false, true}) {
    const nlohmann::ordered_json* best = nullptr;
    for (const auto& r : p["rejected"]) {
      if (r["kind"] != "static" || r["config"].contains("tp") != model_parallel) continue;
      if (best == nullptr ||
          r["floor_bytes"].get<int64_t>() < (*best)["floor_bytes"].get<int64_t>()) {
        best = &r;
      }
    }
    if (best != nullptr) {
      absl::StrAppendFormat(&out, "  closest %s: %d x %s %s: %s\n",
                            model_parallel ? "TP/PP layout" : "ZeRO layout",
                            (*best)["gpus"].get<int64_t>(), (*best)["gpu"].get<std::string>(),
                            ConfigLabel((*best)["config"]), (*best)["reason"].get<std::string>());
    }
  }
  absl::StrAppendFormat(&out,
                        "Considered %d configurations, "
                        "pruned %d by the static ledger or the batch, replayed %d, in %.1f s.\n",
                        p["considered"].get<int64_t>(), p["pruned"].get<int64_t>(),
                        p["replayed"].get<int64_t>(), p["seconds"].get<double>());
  return out;
}

}  // namespace sim::explore
