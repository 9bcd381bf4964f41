#include "sim/explore/plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/workload/layer_ops.h"
#include "sim/workload/lowering.h"
#include "sim/workload/params.h"

namespace sim::explore {

namespace {

// A candidate of the Pareto search: a layout and the overrides that make it a scenario.
struct Candidate {
  std::string gpu;
  int64_t gpus = 0;
  PlanConfig config;
  std::vector<config::Override> overrides;
};

// The model-parallel family searched beside ZeRO: Megatron-LM layouts with TP inside a node
// (1, 2, 4, 8 up to its GPUs) and PP 1, 2, 4, 8 (1F1B), the distributed optimizer, sequence
// parallelism with TP, micro-batch 1 and selective or full recompute.
std::vector<Candidate> ModelParallelCandidates(const std::string& gpu, int64_t n, int64_t gpn) {
  std::vector<Candidate> out;
  for (int64_t tp : {1, 2, 4, 8}) {
    for (int64_t pp : {1, 2, 4, 8}) {
      if (tp * pp == 1 || tp > gpn || tp * pp > n || n % (tp * pp) != 0) continue;
      for (Recompute recompute : {Recompute::kSelective, Recompute::kFull}) {
        Candidate c{gpu, n, PlanConfig{.zero = 1, .recompute = recompute, .tp = tp, .pp = pp}, {}};
        c.overrides = {{"parallel.framework", std::string(Name(Framework::kMegatron))},
                       {"parallel.zero", "1"},
                       {"parallel.tp", absl::StrCat(tp)},
                       {"parallel.pp", absl::StrCat(pp)},
                       {"parallel.sequence_parallel", tp > 1 ? "true" : "false"},
                       {"training.micro_batch", "1"},
                       {"training.recompute", std::string(Name(recompute))}};
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

// "memory category (N.NN GiB of the peak)" for the category that holds the most at the peak.
std::string Largest(const memory::Breakdown& breakdown) {
  int best = 0;
  for (int c = 1; c < kNumMemCategories; ++c) {
    if (breakdown[c] > breakdown[best]) best = c;
  }
  return absl::StrFormat("%s (%.2f GiB of the peak)", kMemCategoryNames[best],
                         breakdown[best].gib());
}

// Replaces the entry of the same GPU, or appends.
void SetMinGpus(std::vector<MinGpus>& all, MinGpus m) {
  for (MinGpus& e : all) {
    if (e.gpu == m.gpu) {
      e = std::move(m);
      return;
    }
  }
  all.push_back(std::move(m));
}

// "key.path: message; ..." of a layout the model does not admit.
std::string ProblemsText(const std::vector<config::ConfigProblem>& problems,
                         const absl::Status& status) {
  if (problems.empty()) return std::string(status.message());
  std::vector<std::string> lines;
  for (const auto& p : problems) lines.push_back(absl::StrCat(p.key_path, ": ", p.message));
  return absl::StrJoin(lines, "; ");
}

}  // namespace

absl::string_view Name(RejectionKind k) { return EnumName(k); }

absl::StatusOr<PlanResult> Plan(const config::DataRoot& root, const PlanRequest& req,
                                const Progress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  auto catalogs = config::LoadCatalogs(root);
  if (!catalogs.ok()) return catalogs.status();
  auto model = config::LoadModel(root, req.model);
  if (!model.ok()) return model.status();
  PlanResult out;
  out.model = model->name;
  out.params = CountParameters(*model).total;
  out.seq_len = req.seq_len;
  out.tokens = req.tokens;
  out.global_batch =
      std::max<int64_t>(1, (req.global_batch_tokens + req.seq_len / 2) / req.seq_len);
  const int64_t global_batch = out.global_batch;

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
  const int64_t total_units = static_cast<int64_t>(units.size());
  const Slice slice = SliceOf(req.shard, units.size());
  const auto begin = static_cast<int64_t>(slice.begin), end = static_cast<int64_t>(slice.end);
  auto mine = [&](const std::string& gpu, int64_t nodes) {
    for (int64_t i = begin; i < end; ++i) {
      if (units[i].first == gpu && units[i].second == nodes) return true;
    }
    return false;
  };
  out.shard = {begin, end, total_units};

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

    // Fine-tuning and offload apply to every candidate.
    std::vector<config::Override> tuning;
    if (req.finetune != FinetuneMethod::kFull) {
      tuning.push_back({"training.finetune.method", std::string(Name(req.finetune))});
      tuning.push_back({"training.finetune.rank", absl::StrCat(req.lora_rank)});
    }
    if (req.offload.optimizer != OffloadTarget::kNone) {
      tuning.push_back({"parallel.offload.optimizer", std::string(Name(req.offload.optimizer))});
    }
    if (req.offload.params != OffloadTarget::kNone) {
      tuning.push_back({"parallel.offload.params", std::string(Name(req.offload.params))});
    }
    if (req.offload.activations) tuning.push_back({"parallel.offload.activations", "cpu"});
    // The frugal base every candidate starts from, as data.
    auto loader = config::ScenarioLoader::FromOverrides(
        root,
        [&] {
          std::vector<config::Override> base = {
              {"schema_version", "1"},
              {"name", absl::StrCat("plan-", model->name, "-", gpu->name)},
              {"model", req.model},
              {"cluster.node", node->name},
              {"cluster.nodes", "1"},
              {"training.seq_len", absl::StrCat(req.seq_len)},
              {"training.micro_batch", "1"},
              {"training.global_batch", absl::StrCat(global_batch)},
              {"training.recompute", std::string(Name(Recompute::kFull))},
              {"parallel.framework", std::string(Name(req.framework))},
              {"parallel.zero", "3"}};
          base.insert(base.end(), tuning.begin(), tuning.end());
          return base;
        }(),
        absl::StrCat("plan:", gpu->name));
    if (!loader.ok()) return loader.status();
    const int64_t gpn = node->gpus_per_node;

    // ---- Pareto search over whole-node clusters --------------------------------------------
    std::vector<Candidate> candidates;
    std::vector<PlanRejection> rejected;
    auto reject = [&](const Candidate& c, RejectionKind kind, std::string reason,
                      std::optional<Bytes> floor = std::nullopt) {
      rejected.push_back({gpu->name, c.gpus, c.config, kind, std::move(reason), floor});
    };
    for (int64_t nodes = 1; nodes * gpn <= req.max_gpus; nodes *= 2) {
      if (!mine(gpu->name, nodes)) continue;
      const int64_t n = nodes * gpn;
      std::vector<Candidate> family;
      for (int zero = 0; zero <= 3; ++zero) {
        for (int64_t micro : {1, 2, 4}) {
          for (Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
            Candidate c{gpu->name,
                        n,
                        PlanConfig{.zero = zero,
                                   .micro_batch = micro,
                                   .recompute = recompute,
                                   .prefetch = req.framework == Framework::kDeepSpeed
                                                   ? std::nullopt
                                                   : std::optional<int64_t>(
                                                         ParallelSpec::kDefaultPrefetchLayers)},
                        {}};
            c.overrides = {{"parallel.zero", absl::StrCat(zero)},
                           {"training.micro_batch", absl::StrCat(micro)},
                           {"training.recompute", std::string(Name(recompute))}};
            family.push_back(std::move(c));
          }
        }
      }
      for (Candidate& c : ModelParallelCandidates(gpu->name, n, gpn))
        family.push_back(std::move(c));
      for (Candidate& c : family) {
        ++out.considered;
        c.overrides.insert(c.overrides.begin(), {"cluster.nodes", absl::StrCat(nodes)});
        const int64_t replicas = n / (c.config.tp * c.config.pp);
        if (global_batch % (c.config.micro_batch * replicas) != 0) {
          ++out.pruned;
          reject(c, RejectionKind::kBatch,
                 absl::StrFormat("global batch %d is not a multiple of "
                                 "micro-batch x data-parallel ranks = %d",
                                 global_batch, c.config.micro_batch * replicas));
          continue;
        }
        std::vector<config::ConfigProblem> problems;
        auto s = loader->Load(c.overrides, &problems);
        if (!s.ok()) {
          // A layout the model does not admit (TP not dividing the heads, PP the layers).
          ++out.pruned;
          reject(c, RejectionKind::kLayout, ProblemsText(problems, s.status()));
          continue;
        }
        const Bytes floor = StaticFloor(*s);
        if (floor > s->cluster.gpu.Usable()) {
          ++out.pruned;
          reject(c, RejectionKind::kStatic,
                 absl::StrFormat("static ledger: states + kept activations + reserve "
                                 "= %.1f GiB > %.1f GiB usable",
                                 floor.gib(), s->cluster.gpu.Usable().gib()),
                 floor);
          continue;
        }
        candidates.push_back(c);
      }
    }
    std::vector<std::vector<config::Override>> configs;
    for (const Candidate& c : candidates) configs.push_back(c.overrides);
    const auto results = RunConfigs(*loader, configs, req.jobs, progress);
    out.replayed += static_cast<int64_t>(results.size());
    for (size_t i = 0; i < results.size(); ++i) {
      const Candidate& c = candidates[i];
      const ConfigResult& r = results[i];
      if (!r.status.ok()) {
        reject(c, RejectionKind::kInvalid, std::string(r.status.message()));
        continue;
      }
      const report::RunSummary& run = *r.summary;
      if (!run.fits) {
        // The GPUs overflow at an op; or they fit and the node's host memory does not.
        reject(c, RejectionKind::kReplay,
               run.first_overflow
                   ? absl::StrFormat("replay: out of memory at %s by %.2f GiB (peak %.1f GiB)",
                                     run.first_overflow->op, run.first_overflow->excess.gib(),
                                     run.peak.gib())
                   : absl::StrFormat("replay: host memory %.0f GiB per node exceeds the "
                                     "node's %.0f GiB of DRAM (GPU peak %.1f GiB fits)",
                                     run.host_peak.gib(), run.host_capacity.gib(), run.peak.gib()));
        continue;
      }
      PlanFit fit{gpu->name,
                  c.gpus,
                  c.config,
                  run.step.seconds(),
                  req.tokens / run.tokens_per_s / 86400.0,
                  std::nullopt,
                  run.host_peak};
      if (price) fit.cost = fit.days * 24.0 * static_cast<double>(c.gpus) * *price;
      out.fits.push_back(fit);
    }
    for (PlanRejection& j : rejected) out.rejected.push_back(std::move(j));
    if (!mine(gpu->name, 0)) continue;

    // ---- smallest GPU count that fits -------------------------------------------------------
    // Static lower bound: 16 B/param sharded over N (ZeRO-3) plus the layer inputs of full
    // recompute plus the reserve must fit.
    auto fits_at = [&](int64_t n) -> std::optional<report::RunSummary> {
      const int64_t per_node = PerNode(n, gpn);
      std::vector<config::Override> o = {{"cluster.nodes", absl::StrCat(n / per_node)},
                                         {"cluster.gpus_per_node", absl::StrCat(per_node)},
                                         {"training.global_batch", absl::StrCat(2 * n)}};
      auto r = RunConfigs(*loader, {o}, 1, nullptr);
      ++out.replayed;
      if (!r[0].status.ok() || !r[0].summary->fits) return std::nullopt;
      return std::move(r[0].summary);
    };
    int64_t lo = 1;  // largest N known not to fit (or 1 as the floor), hi = smallest that fits
    {
      auto s = loader->Load({});
      if (!s.ok()) return s.status();
      const Bytes act = StaticFloor(*s) - PersistentStates(*s).total() - s->runtime.reserved;
      const double per_gpu_room = (s->cluster.gpu.Usable() - act - s->runtime.reserved).gb();
      const double states = static_cast<double>(PersistentStates(*s).total().count()) *
                            static_cast<double>(s->dp()) / 1e9;  // ZeRO-3 states of the model
      lo = per_gpu_room > 0 ? std::max<int64_t>(1, static_cast<int64_t>(states / per_gpu_room))
                            : req.max_gpus;
    }
    std::optional<int64_t> hi;
    std::optional<report::RunSummary> hi_run;
    for (int64_t n = std::max<int64_t>(lo, 1); n <= req.max_gpus;
         n = n < gpn ? n + 1 : (n / gpn + 1) * gpn) {
      if (auto r = fits_at(n)) {
        hi = n;
        hi_run = std::move(r);
        break;
      }
      lo = n;
    }
    if (!hi) {
      MinGpus none;
      none.gpu = gpu->name;
      none.reason = absl::StrFormat("nothing fits up to %d GPUs", req.max_gpus);
      SetMinGpus(out.min_gpus, std::move(none));
      continue;
    }
    while (*hi - lo > 1) {
      const int64_t mid = lo + (*hi - lo) / 2;
      if (auto r = fits_at(mid)) {
        hi = mid;
        hi_run = std::move(r);
      } else {
        lo = mid;
      }
    }
    SetMinGpus(out.min_gpus,
               MinGpus{gpu->name, *hi, "", PlanConfig{}, hi_run->peak, hi_run->capacity,
                       Largest(hi_run->peak_breakdown), hi_run->peak_breakdown, hi_run->host_peak});
  }

  SortRejected(out.rejected);
  out.pareto = ParetoFrontier(out.fits);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::vector<PlanFit> ParetoFrontier(const std::vector<PlanFit>& fits) {
  std::vector<const PlanFit*> sorted;
  for (const PlanFit& f : fits) {
    if (f.cost) sorted.push_back(&f);
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const PlanFit* a, const PlanFit* b) {
    if (a->days != b->days) return a->days < b->days;
    return *a->cost < *b->cost;
  });
  std::vector<PlanFit> out;
  double best_cost = 1e300;
  for (const PlanFit* f : sorted) {
    if (*f->cost >= best_cost) continue;
    best_cost = *f->cost;
    out.push_back(*f);
  }
  return out;
}

absl::StatusOr<PlanResult> MergePlans(std::vector<PlanResult> shards) {
  if (shards.empty()) return absl::InvalidArgumentError("no plan shards to merge");
  std::stable_sort(shards.begin(), shards.end(), [](const PlanResult& a, const PlanResult& b) {
    return a.shard.begin < b.shard.begin;
  });
  PlanResult merged = shards.front();
  const int64_t total = merged.shard.total;
  int64_t expect = 0;
  merged.rejected.clear();
  merged.fits.clear();
  merged.min_gpus.clear();
  merged.considered = merged.pruned = merged.replayed = 0;
  merged.seconds = 0;
  for (const PlanResult& s : shards) {
    const char* differs = s.model != merged.model                 ? "model"
                          : s.tokens != merged.tokens             ? "tokens"
                          : s.seq_len != merged.seq_len           ? "seq_len"
                          : s.global_batch != merged.global_batch ? "global_batch"
                                                                  : nullptr;
    if (differs != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("plan shards disagree on ", differs));
    }
    if (s.shard.total != total || s.shard.begin != expect) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan shards do not tile one plan: expected a shard starting at unit ",
                       expect, " of ", total));
    }
    expect = s.shard.end;
    merged.rejected.insert(merged.rejected.end(), s.rejected.begin(), s.rejected.end());
    merged.fits.insert(merged.fits.end(), s.fits.begin(), s.fits.end());
    for (const MinGpus& m : s.min_gpus) SetMinGpus(merged.min_gpus, m);
    merged.considered += s.considered;
    merged.pruned += s.pruned;
    merged.replayed += s.replayed;
    merged.seconds += s.seconds;
  }
  if (expect != total) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan shards cover ", expect, " of ", total, " work units"));
  }
  merged.shard = {0, total, total};
  SortRejected(merged.rejected);
  merged.pareto = ParetoFrontier(merged.fits);
  return merged;
}

}  // namespace sim::explore
