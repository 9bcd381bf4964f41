#include "sim/explore/plan.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/base/parallel.h"
#include "sim/base/stop_request.h"
#include "sim/replay/step_bound.h"
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
  int64_t global_batch = 0;  // sequences per step, derived from the request's tokens
  std::shared_ptr<const Scenario> scenario = nullptr;  // as loaded from the overrides
};

// The model-parallel family searched beside ZeRO: Megatron-LM layouts with TP inside a node
// (1, 2, 4, 8 up to its GPUs), PP 1 to 32, CP 1 to 8, 1F1B or the interleaved schedule with 2
// chunks, uneven first/last stages where the layers do not split evenly, the distributed
// optimizer, sequence parallelism with TP, micro-batch 1 or 2, selective or full recompute.
// For a mixture of experts (`experts` > 0) also EP 1 to 64 dividing the experts and the
// data-parallel ranks, with EP x TP inside a node (Megatron-Core's MoE guide: "Ensure the EPxTP
// communication within the NVLink domain"); EP needs the distributed optimizer, not ZeRO-3.
std::vector<Candidate> ModelParallelCandidates(const std::string& gpu, int64_t n, int64_t gpn,
                                               int64_t layers, int64_t experts) {
  std::vector<Candidate> out;
  for (int64_t tp : {1, 2, 4, 8}) {
    for (int64_t pp : {1, 2, 4, 8, 16, 32}) {
      for (int64_t cp : {1, 2, 4, 8}) {
        for (int64_t ep : {1, 2, 4, 8, 16, 32, 64}) {
          const int64_t mp = tp * pp * cp;
          if (ep > 1 && (experts == 0 || experts % ep != 0 || tp * ep > gpn || mp > n ||
                         (n / mp) % ep != 0)) {
            continue;
          }
          if ((mp == 1 && ep == 1) || tp > gpn || mp > n || n % mp != 0) continue;
          for (int64_t chunks : {1, 2}) {
            if (chunks > 1 && pp < 2) continue;
            const auto ends = UnevenEnds(layers, pp, chunks);
            if (!ends) continue;  // more virtual stages than layers
            for (int64_t micro : {1, 2}) {
              for (Recompute recompute : {Recompute::kSelective, Recompute::kFull}) {
                Candidate c{gpu,
                            n,
                            PlanConfig{.zero = 1,
                                       .micro_batch = micro,
                                       .recompute = recompute,
                                       .tp = tp,
                                       .pp = pp,
                                       .cp = cp,
                                       .ep = ep,
                                       .pp_chunks = chunks,
                                       .first_stage_layers = ends->first,
                                       .last_stage_layers = ends->second},
                            {}};
                c.overrides = {{"parallel.framework", std::string(Name(Framework::kMegatron))},
                               {"parallel.zero", "1"},
                               {"parallel.tp", absl::StrCat(tp)},
                               {"parallel.pp", absl::StrCat(pp)},
                               {"parallel.cp", absl::StrCat(cp)},
                               {"parallel.ep", absl::StrCat(ep)},
                               {"parallel.sequence_parallel", tp > 1 ? "true" : "false"},
                               {"training.micro_batch", absl::StrCat(micro)},
                               {"training.recompute", std::string(Name(recompute))}};
                if (chunks > 1) {
                  c.overrides.push_back({"parallel.pp_schedule", "interleaved"});
                  c.overrides.push_back({"parallel.pp_chunks", absl::StrCat(chunks)});
                }
                if (ends->first > 0) {
                  c.overrides.push_back({"parallel.first_stage_layers", absl::StrCat(ends->first)});
                  c.overrides.push_back({"parallel.last_stage_layers", absl::StrCat(ends->second)});
                }
                out.push_back(std::move(c));
              }
            }
          }
        }
      }
    }
  }
  return out;
}

// Data-parallel ranks of a candidate: its GPUs over the model-parallel group (TP x PP x CP).
int64_t Replicas(const Candidate& c) { return c.gpus / (c.config.tp * c.config.pp * c.config.cp); }

// The sequences a candidate's batch comes in: one micro-batch per data-parallel rank (pp of
// them for the interleaved schedule, which Megatron-LM asserts).
int64_t BatchUnit(const Candidate& c) {
  return c.config.micro_batch * Replicas(c) * (c.config.pp_chunks > 1 ? c.config.pp : 1);
}

// Micro-batches per step of a candidate at a batch of `global_batch` sequences.
int64_t MicroBatches(const Candidate& c, int64_t global_batch) {
  return global_batch / (c.config.micro_batch * Replicas(c));
}

// The two short batches (in micro-batches per step) a long candidate is screened at: pp and
// pp + 2 (at least 2 and 4); pp and 2 pp for the interleaved schedule, whose micro-batches
// come in groups of pp. The replayed step is linear in the micro-batches from there (each adds
// one steady-state period): over the 887 layouts of a 70B plan replayed both ways the
// extrapolation agreed with the full replay to the microsecond. The second batch is where the
// peak has settled: 1F1B's first stage holds pp micro-batches' activations, and its caching
// allocator reaches its largest reservation two micro-batches later (sim/replay/fold.cc), so
// pp + 2 and not 2 pp, which cost a third more for nothing: with pp + 2, plan llama2-70b and
// plan llama3-405b keep every fit, rejection and estimate (steps equal to 4e-15) and run 7 %
// and 4 % faster. None when replaying in full costs no more than the two short runs.
std::optional<std::pair<int64_t, int64_t>> ScreenSizes(const Candidate& c) {
  const int64_t pp = c.config.pp;
  const int64_t m1 = std::max<int64_t>(pp, 2),
                m2 = std::max<int64_t>(c.config.pp_chunks > 1 ? 2 * pp : pp + 2, 4);
  if (MicroBatches(c, c.global_batch) <= m1 + m2) return std::nullopt;
  return std::pair<int64_t, int64_t>{m1, m2};
}

// An estimate is replayed in full when it is within this factor of the fastest fit on as many
// GPUs and no fit beats it by the factor in both days and cost. The extrapolation agrees with
// the full replay to the microsecond (tests/explore_test.cc); the margin keeps ties honest.
constexpr double kConfirmMargin = 1.02;

// A layout is left out when its lower bound exceeds the fastest step known on as many GPUs by
// more than this factor: the bound sums picosecond prices in seconds, and a tie must not drop a
// layout.
constexpr double kBoundMargin = 1.000001;

// Stage C screens its layouts in waves of this many, in order of their lower bounds: each wave's
// estimates join the fastest steps known before the next wave is measured against them, so a
// layout whose bound cannot beat a step found in an earlier wave is not replayed. A fixed size,
// not one per --jobs, so that the plan is the same whatever the thread count. plan llama2-70b
// --gpu H100-SXM5-80GB: 1,091 replays in one wave, 761 in waves of 16, 772 of 32, 861 of 64
// (the front and the fastest step of every size unchanged); 16 keeps 2 jobs busy.
constexpr size_t kScreenWave = 16;

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
  const Bytes per_layer = LayerActivationBytes(s.model, ScenarioShape(s), s.training.recompute,
                                               s.training.recompute_modules);
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

// The search's counts for its progress line (PlanProgress). The calling thread changes them as
// it decides layouts; the workers report them as they load layouts and replay, so they are kept
// under a lock. Without a progress function nothing is counted.
class ProgressTracker {
 public:
  explicit ProgressTracker(const PlanProgressFn& report) : report_(report) {}

  // Applies `change` to the counts (on any thread), then reports them when `report` is set.
  template <class Change>
  void Update(Change&& change, bool report = true) {
    if (!report_) return;
    PlanProgress now;
    {
      std::lock_guard<std::mutex> lock(mu_);
      change(p_);
      if (!report) return;
      now = p_;
    }
    report_(now);
  }

 private:
  const PlanProgressFn& report_;
  std::mutex mu_;
  PlanProgress p_;
};

// Whether a rejection decides a layout that waited for replays (not one pruned before them).
bool AfterReplays(RejectionKind k) {
  return k != RejectionKind::kBatch && k != RejectionKind::kLayout && k != RejectionKind::kStatic;
}

}  // namespace

absl::string_view Name(RejectionKind k) { return EnumName(k); }

absl::StatusOr<PlanResult> Plan(const config::DataRoot& root, const PlanRequest& req,
                                const PlanProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  auto catalogs = config::LoadCatalogs(root);
  if (!catalogs.ok()) return catalogs.status();
  auto model = config::LoadModel(root, req.model);
  if (!model.ok()) return model.status();
  PlanResult out;
  out.model = model->name;
  out.deadline_days = req.deadline_days;
  out.budget_usd = req.budget_usd;
  out.params = CountParameters(*model).total;
  out.seq_len = req.seq_len;
  out.tokens = req.tokens;
  out.global_batch =
      std::max<int64_t>(1, (req.global_batch_tokens + req.seq_len / 2) / req.seq_len);
  const int64_t global_batch = out.global_batch;

  // Work units in a fixed order: per GPU type, the smallest-count search, then one unit per
  // whole-node cluster size. A shard runs a contiguous slice of them.
  std::vector<std::pair<std::string, int64_t>> units;  // (GPU, nodes; 0 = smallest-count search)
  // --price names: each a catalog GPU the plan considers (FindGpu: case-insensitive, with the
  // nearest name), keyed here by the catalog's spelling.
  std::map<std::string, double> prices;
  for (const auto& [name, usd] : req.prices) {
    auto gpu = config::FindGpu(catalogs->gpus, name);
    if (!gpu.ok())
      return absl::InvalidArgumentError(absl::StrCat("--price: ", gpu.status().message()));
    bool considered = false;
    for (const std::string& g : req.gpus) {
      considered = considered || absl::AsciiStrToLower(g) == absl::AsciiStrToLower(gpu->name);
    }
    if (!considered) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--price: ", gpu->name, " is not among the GPUs planned for (--gpu); add it there"));
    }
    prices[gpu->name] = usd;
  }
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
  // The progress line's counts; GPU types numbered among those with work in this slice (the
  // units list each type's together).
  ProgressTracker tracker(progress);
  int64_t types_in_slice = 0, type_index = 0;
  for (int64_t i = begin; i < end; ++i) {
    if (i == begin || units[i].first != units[i - 1].first) ++types_in_slice;
  }

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
    if (auto it = prices.find(gpu->name); it != prices.end()) price = it->second;
    bool in_slice = false;
    for (int64_t i = begin; i < end; ++i) in_slice = in_slice || units[i].first == gpu->name;
    if (in_slice) {
      ++type_index;
      tracker.Update([&](PlanProgress& p) {
        p.gpu = gpu->name;
        p.gpu_index = type_index;
        p.gpu_types = types_in_slice;
        p.replay_layouts = p.replay_decided = 0;
      });
    }

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
          if (req.fsdp_version != 1) {
            base.push_back({"parallel.fsdp_version", absl::StrCat(req.fsdp_version)});
          }
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
      tracker.Update([&](PlanProgress& p) {
        ++p.rejected;
        if (AfterReplays(kind)) ++p.replay_decided;
      });
    };
    for (int64_t nodes = 1; nodes * gpn <= req.max_gpus; nodes *= 2) {
      if (StopRequested()) return absl::CancelledError("interrupted");
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
      for (Candidate& c : ModelParallelCandidates(gpu->name, n, gpn, model->layers,
                                                  model->moe ? model->moe->experts : 0)) {
        // The Megatron layouts leave FSDP's version behind (it belongs to framework fsdp).
        if (req.fsdp_version != 1) c.overrides.push_back({"parallel.fsdp_version", "1"});
        family.push_back(std::move(c));
      }
      // Each layout loaded and its static floor taken on the workers (independently: 0.9 s of
      // plan llama2-70b, one thread, before); then kept or rejected in the family's order.
      struct Loaded {
        std::optional<absl::StatusOr<Scenario>> scenario;  // none: not one micro-batch per rank
        std::vector<config::ConfigProblem> problems;
        Bytes floor;
      };
      std::vector<Loaded> loaded(family.size());
      tracker.Update([&](PlanProgress& p) {
        p.loading = 0;
        p.to_load = static_cast<int64_t>(family.size());
        p.loading_gpus = n;
      });
      ParallelFor(family.size(), req.jobs, [&](size_t k) {
        tracker.Update([](PlanProgress& p) { ++p.loading; });
        if (StopRequested()) return;  // left unloaded, as a batch that rounds to nothing
        Candidate& c = family[k];
        c.overrides.insert(c.overrides.begin(), {"cluster.nodes", absl::StrCat(nodes)});
        // The batch in tokens, as sequences: the nearest whole number of micro-batches on every
        // data-parallel rank (a multiple of pp of them for the interleaved schedule, which
        // Megatron-LM asserts); refused when even one per rank overshoots it by half.
        const int64_t units = (global_batch + BatchUnit(c) / 2) / BatchUnit(c);
        if (units == 0) return;
        c.global_batch = units * BatchUnit(c);
        c.overrides.push_back({"training.global_batch", absl::StrCat(c.global_batch)});
        Loaded& l = loaded[k];
        l.scenario = loader->Load(c.overrides, &l.problems);
        if (l.scenario->ok()) l.floor = StaticFloor(**l.scenario);
      });
      tracker.Update([](PlanProgress& p) { p.to_load = 0; }, /*report=*/false);
      for (size_t k = 0; k < family.size(); ++k) {
        Candidate& c = family[k];
        Loaded& l = loaded[k];
        ++out.considered;
        tracker.Update([](PlanProgress& p) { ++p.layouts; }, /*report=*/false);
        if (!l.scenario) {
          ++out.pruned;
          reject(
              c, RejectionKind::kBatch,
              absl::StrFormat("a batch of %d sequences is less than half of one step's "
                              "least, %d (micro-batch x data-parallel ranks%s)",
                              global_batch, BatchUnit(c), c.config.pp_chunks > 1 ? " x pp" : ""));
          continue;
        }
        absl::StatusOr<Scenario>& s = *l.scenario;
        if (!s.ok()) {
          // A layout the model does not admit (TP not dividing the heads, PP the layers).
          ++out.pruned;
          reject(c, RejectionKind::kLayout, ProblemsText(l.problems, s.status()));
          continue;
        }
        if (l.floor > s->cluster.gpu.Usable()) {
          ++out.pruned;
          reject(c, RejectionKind::kStatic,
                 absl::StrFormat("static ledger: states + kept activations + reserve "
                                 "= %.1f GiB > %.1f GiB usable",
                                 l.floor.gib(), s->cluster.gpu.Usable().gib()),
                 l.floor);
          continue;
        }
        c.scenario = std::make_shared<const Scenario>(*std::move(s));
        candidates.push_back(c);
        tracker.Update([](PlanProgress& p) { ++p.replay_layouts; }, /*report=*/false);
      }
    }
    // Rounds by recompute policy, lightest first (none, selective, full): a layout is replayed
    // with more recompute only when the lighter policy did not fit, since recomputing less
    // takes less time on the same GPUs.
    //
    // Screening (stages B and C below): a layout with many micro-batches per step is replayed
    // at two short batches and its step extrapolated; the layouts whose estimate lands within
    // kConfirmMargin of the front are then replayed in full, and only full replays make the
    // front. Short layouts are replayed in full at once.
    //
    // The fit a run makes, or its rejection recorded.
    auto FitOf = [&](const Candidate& c, const ConfigResult& r,
                     std::optional<double> step_s) -> std::optional<PlanFit> {
      if (!r.status.ok()) {
        reject(c, RejectionKind::kInvalid, std::string(r.status.message()));
        return std::nullopt;
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
        return std::nullopt;
      }
      const double step = step_s.value_or(run.step.seconds());
      const double tokens_per_s =
          static_cast<double>(c.global_batch) * static_cast<double>(req.seq_len) / step;
      PlanFit fit{gpu->name,      c.gpus,        c.config,
                  c.global_batch, step,          req.tokens / tokens_per_s / 86400.0,
                  std::nullopt,   run.host_peak, step_s.has_value()};
      if (price) fit.cost = fit.days * 24.0 * static_cast<double>(c.gpus) * *price;
      return fit;
    };
    auto Fits = [](const ConfigResult& r) { return r.status.ok() && r.summary->fits; };
    // The replays of one batch, reported to `progress` as the plan's running count of replays.
    // They run longest first (`work`: the micro-batches each replays, at most), so that a long
    // replay does not start when the other workers are nearly done and keep them waiting; the
    // results come back in the batch's order.
    auto Replay = [&](const std::vector<Scenario>& batch, const std::vector<int64_t>& work) {
      const size_t base = static_cast<size_t>(out.replayed);
      const Progress counted = progress ? Progress([&tracker, base](size_t done, size_t) {
        // Workers report in any order: the count only grows.
        tracker.Update([&](PlanProgress& p) {
          p.replayed = std::max(p.replayed, static_cast<int64_t>(base + done));
        });
      })
                                        : Progress();
      std::vector<size_t> order(batch.size());
      std::iota(order.begin(), order.end(), size_t{0});
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t x, size_t y) { return work[x] > work[y]; });
      std::vector<Scenario> longest_first;
      for (size_t k : order) longest_first.push_back(batch[k]);
      std::vector<ConfigResult> ran = RunScenarios(longest_first, req.jobs, counted);
      std::vector<ConfigResult> results(batch.size());
      for (size_t k = 0; k < order.size(); ++k) results[order[k]] = std::move(ran[k]);
      return results;
    };
    // The candidates `which` replayed at their whole step.
    auto ReplayInFull = [&](const std::vector<size_t>& which) {
      std::vector<Scenario> scenarios;
      std::vector<int64_t> work;
      for (size_t i : which) {
        scenarios.push_back(*candidates[i].scenario);
        work.push_back(MicroBatches(candidates[i], candidates[i].global_batch));
      }
      return Replay(scenarios, work);
    };
    std::vector<std::optional<PlanFit>> fits(candidates.size());
    // A layout's fit, set or cleared (a full replay that refutes an estimate): kept as counted.
    auto set_fit = [&](size_t i, std::optional<PlanFit> f) {
      const int64_t change = (f ? 1 : 0) - (fits[i] ? 1 : 0);
      fits[i] = std::move(f);
      tracker.Update([&](PlanProgress& p) {
        p.kept += change;
        p.replay_decided += change;
      });
    };
    auto family_of = [&](const Candidate& c) {
      PlanConfig k = c.config;
      k.recompute = Recompute::kNone;
      return std::make_tuple(c.gpus, k.zero, k.micro_batch, k.tp, k.pp, k.cp, k.ep, k.pp_chunks,
                             k.first_stage_layers);
    };
    std::map<decltype(family_of(candidates.front())), bool> family_fits;
    for (Recompute round : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      std::vector<size_t> todo;
      for (size_t i = 0; i < candidates.size(); ++i) {
        const Candidate& c = candidates[i];
        if (c.config.recompute != round) continue;
        if (family_fits[family_of(c)]) {
          reject(c, RejectionKind::kLighter,
                 "the same layout with less recompute fits, and recomputing less is faster");
          continue;
        }
        todo.push_back(i);
      }
      // Stage A: short layouts in full, at once.
      std::vector<size_t> full_runs, screened;
      for (size_t i : todo) (ScreenSizes(candidates[i]) ? screened : full_runs).push_back(i);
      {
        const auto a = ReplayInFull(full_runs);
        out.replayed += static_cast<int64_t>(a.size());
        for (size_t k = 0; k < full_runs.size(); ++k) {
          const size_t i = full_runs[k];
          set_fit(i, FitOf(candidates[i], a[k], std::nullopt));
          if (fits[i]) family_fits[family_of(candidates[i])] = true;
        }
      }
      // The long layouts are screened: replayed at two short batches (ScreenSizes), the step
      // extrapolated along the period they differ by. Before any replay, each gets a lower
      // bound on its step (replay::StepLowerBound: its busiest stage's compute with the
      // pipeline's fill and drain, priced without a replay); the first screening run tightens
      // it, with c the busiest stage's compute and recompute per micro-batch: below, m x c (a
      // stage computes its micro-batches one after another) and the short step + (m - m1) x c
      // (the step is linear in the micro-batches past pp, and each period holds at least c on
      // that stage); above, the short step x m / m1 (the fixed part of the step is positive).
      // Only the fastest layout of a size can be on the front (the same GPUs cost the same per
      // day), so a layout whose lower bound exceeds the fastest step known on its size is not
      // replayed further.
      struct Bounds {
        double lower, upper;
      };
      std::map<size_t, Bounds> bounds;
      {
        // The interleaved schedule's own bound (the busiest stage's compute alone) would take
        // lowerings of pp and 2 pp micro-batches, as long as the first screening run: it gets
        // the average stage's compute instead, from a lowering of its layout read as 1F1B.
        // A layout's compute profile is the same on every cluster size (step_bound.h): it is
        // measured once, for the first candidate of the layout, and read at each one's
        // micro-batches.
        std::map<std::string, size_t> layout_of;  // by the overrides but the size's
        std::vector<size_t> layout(screened.size()), first_of_layout;
        for (size_t k = 0; k < screened.size(); ++k) {
          std::string key;
          for (const config::Override& o : candidates[screened[k]].overrides) {
            if (o.key != "cluster.nodes" && o.key != "training.global_batch") {
              absl::StrAppend(&key, o.key, "=", o.value, "\n");
            }
          }
          const auto [it, fresh] = layout_of.emplace(std::move(key), first_of_layout.size());
          if (fresh) first_of_layout.push_back(screened[k]);
          layout[k] = it->second;
        }
        std::vector<std::optional<replay::ComputeProfile>> profiles(first_of_layout.size());
        ParallelFor(first_of_layout.size(), req.jobs, [&](size_t l) {
          if (StopRequested()) return;  // no profile: no lower bound, nothing pruned
          const Candidate& c = candidates[first_of_layout[l]];
          auto p = c.config.pp_chunks > 1 ? replay::AverageComputeProfile(*c.scenario)
                                          : replay::StepComputeProfile(*c.scenario);
          if (p.ok()) profiles[l] = *std::move(p);
        });
        for (size_t k = 0; k < screened.size(); ++k) {
          const Candidate& c = candidates[screened[k]];
          const std::optional<replay::ComputeProfile>& p = profiles[layout[k]];
          double lower = 0.0;
          if (p) {
            const int64_t m = c.scenario->micro_batches();
            lower = (c.config.pp_chunks > 1 ? replay::AverageStageComputeBound(*p, m)
                                            : replay::StepLowerBound(*p, m))
                        .seconds();
          }
          bounds[screened[k]] = {lower, std::numeric_limits<double>::infinity()};
        }
      }
      auto best_known = [&](int64_t gpus) {
        double best = std::numeric_limits<double>::infinity();
        for (const std::optional<PlanFit>& f : fits) {
          if (f && f->gpus == gpus) best = std::min(best, f->step_s);
        }
        for (const auto& [i, b] : bounds) {
          if (candidates[i].gpus == gpus) best = std::min(best, b.upper);
        }
        return best;
      };
      // Those whose lower bound is beyond the fastest known on their size, rejected.
      auto within_reach = [&](const std::vector<size_t>& which, const char* bound_kind) {
        std::vector<size_t> kept;
        for (size_t i : which) {
          const Candidate& c = candidates[i];
          const double best = best_known(c.gpus);
          if (bounds[i].lower > best * kBoundMargin) {
            reject(c, RejectionKind::kSlower,
                   absl::StrFormat("slower than another layout on the same GPUs: at least %.2f s "
                                   "per step (%s), against %.2f s",
                                   bounds[i].lower, bound_kind, best));
            continue;
          }
          kept.push_back(i);
        }
        return kept;
      };
      std::map<size_t, ConfigResult> first_run;
      // The first screening run of `which`: those that fit, with their bounds tightened.
      auto first = [&](const std::vector<size_t>& which) {
        std::vector<Scenario> cfg;
        std::vector<int64_t> work;
        for (size_t i : which) {
          work.push_back(ScreenSizes(candidates[i])->first);
          cfg.push_back(candidates[i].scenario->WithMicroBatches(work.back()));
        }
        auto a = Replay(cfg, work);
        out.replayed += static_cast<int64_t>(a.size());
        std::vector<size_t> live;
        for (size_t k = 0; k < which.size(); ++k) {
          const size_t i = which[k];
          const Candidate& c = candidates[i];
          const ConfigResult& r = first_run[i] = std::move(a[k]);
          if (!Fits(r)) {
            FitOf(c, r, std::nullopt);  // records the rejection
            continue;
          }
          const report::RunSummary& run = *r.summary;
          const double m1 = static_cast<double>(ScreenSizes(c)->first);
          const double m = static_cast<double>(MicroBatches(c, c.global_batch));
          double busiest = (run.compute + run.recompute).seconds();
          for (const report::StageSummary& st : run.stages) {
            busiest = std::max(busiest, (st.times.compute + st.times.recompute).seconds());
          }
          const double s1 = run.step.seconds(), per = busiest / m1;
          Bounds& b = bounds[i];
          b = {std::max({b.lower, m * per, s1 + (m - m1) * per}), s1 * m / m1};
          live.push_back(i);
          family_fits[family_of(c)] = true;
        }
        return live;
      };
      // The second screening run, and the estimate.
      auto second = [&](const std::vector<size_t>& which) {
        std::vector<Scenario> cfg;
        std::vector<int64_t> work;
        for (size_t i : which) {
          work.push_back(ScreenSizes(candidates[i])->second);
          cfg.push_back(candidates[i].scenario->WithMicroBatches(work.back()));
        }
        const auto b = Replay(cfg, work);
        out.replayed += static_cast<int64_t>(b.size());
        for (size_t k = 0; k < which.size(); ++k) {
          const size_t i = which[k];
          const Candidate& c = candidates[i];
          if (!Fits(b[k])) {
            // Fitted at pp micro-batches, not at the second batch: the heavier recompute gets
            // its round.
            FitOf(c, b[k], std::nullopt);
            family_fits[family_of(c)] = false;
            continue;
          }
          const auto screen = *ScreenSizes(c);
          const double s1 = first_run[i].summary->step.seconds(), s2 = b[k].summary->step.seconds();
          const double period = (s2 - s1) / static_cast<double>(screen.second - screen.first);
          const int64_t m = MicroBatches(c, c.global_batch);
          set_fit(i, FitOf(c, b[k], s2 + period * static_cast<double>(m - screen.second)));
        }
      };
      // Stage B: on each size, the two layouts of lowest bound (interleaved ones aside) are
      // screened first, so that the others have a step to be measured against.
      std::stable_sort(screened.begin(), screened.end(),
                       [&](size_t x, size_t y) { return bounds[x].lower < bounds[y].lower; });
      std::vector<size_t> lead, rest;
      {
        std::map<int64_t, int> per_size;
        for (size_t i : screened) {
          const Candidate& c = candidates[i];
          (c.config.pp_chunks == 1 && per_size[c.gpus]++ < 2 ? lead : rest).push_back(i);
        }
      }
      second(first(lead));
      // Stage C: the others, as long as their bounds leave them a chance, a wave at a time
      // (kScreenWave), lowest bounds first.
      for (size_t w = 0; w < rest.size(); w += kScreenWave) {
        const std::vector<size_t> wave(
            rest.begin() + static_cast<ptrdiff_t>(w),
            rest.begin() + static_cast<ptrdiff_t>(std::min(rest.size(), w + kScreenWave)));
        const auto live = first(within_reach(wave,
                                             "its busiest stage's compute with the pipeline's "
                                             "fill and drain, or the average stage's compute"));
        second(within_reach(live, "its busiest stage's compute, from a short replay"));
      }
    }
    // Confirm by full replay every estimate within kConfirmMargin of the fastest fit on as many
    // GPUs (only the fastest of a size can be on the front: the same GPUs cost the same per
    // day) that no other fit beats by that margin in both days and cost.
    auto cost_of = [](const PlanFit& f) {
      return f.cost.value_or(f.days * static_cast<double>(f.gpus));
    };
    std::map<int64_t, double> fastest;
    for (const std::optional<PlanFit>& f : fits) {
      if (!f) continue;
      auto [it, fresh] = fastest.emplace(f->gpus, f->step_s);
      if (!fresh) it->second = std::min(it->second, f->step_s);
    }
    std::vector<size_t> confirm;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!fits[i] || !fits[i]->estimated) continue;
      if (fits[i]->step_s > fastest[fits[i]->gpus] * kConfirmMargin) continue;
      bool dominated = false;
      for (size_t j = 0; j < candidates.size() && !dominated; ++j) {
        if (j == i || !fits[j]) continue;
        dominated = fits[j]->days * kConfirmMargin < fits[i]->days &&
                    cost_of(*fits[j]) * kConfirmMargin < cost_of(*fits[i]);
      }
      if (!dominated) confirm.push_back(i);
    }
    const auto confirmed = ReplayInFull(confirm);
    out.replayed += static_cast<int64_t>(confirmed.size());
    out.confirmed += static_cast<int64_t>(confirmed.size());
    for (size_t k = 0; k < confirm.size(); ++k) {
      set_fit(confirm[k], FitOf(candidates[confirm[k]], confirmed[k], std::nullopt));
    }
    for (std::optional<PlanFit>& f : fits) {
      if (!f) continue;
      if (f->estimated) ++out.estimated;
      out.fits.push_back(std::move(*f));
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
      tracker.Update([&](PlanProgress& p) { p.replayed = out.replayed; });
      if (!r[0].status.ok() || !r[0].summary->fits) return std::nullopt;
      return std::move(r[0].summary);
    };
    int64_t lo = 1;  // largest N known not to fit (or 1 as the floor), hi = smallest that fits
    {
      // One node, ZeRO-3, the batch of the count search (whatever the request's batch in tokens).
      auto s = loader->Load({{"training.global_batch", absl::StrCat(2 * gpn)}});
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
      if (StopRequested()) return absl::CancelledError("interrupted");
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
      if (StopRequested()) return absl::CancelledError("interrupted");
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

std::optional<std::pair<int64_t, int64_t>> UnevenEnds(int64_t layers, int64_t pp, int64_t chunks) {
  const int64_t stages = pp * chunks;
  if (stages <= 0 || layers < stages) return std::nullopt;
  if (layers % stages == 0) return std::pair<int64_t, int64_t>{0, 0};
  if (stages < 3) return std::nullopt;  // no middle stage to hold the rest
  const int64_t middle = (layers + stages - 1) / stages;
  const int64_t rest = layers - (stages - 2) * middle;
  const int64_t first = rest / 2, last = rest - first;
  if (first < 1 || last > middle) return std::nullopt;
  return std::pair<int64_t, int64_t>{first, last};
}

std::optional<PlanFit> PlanChoice(const PlanResult& plan) {
  if (!plan.deadline_days && !plan.budget_usd) return std::nullopt;
  std::optional<PlanFit> best;
  for (const PlanFit& f : plan.pareto) {
    if (plan.deadline_days && f.days > *plan.deadline_days) continue;
    if (plan.budget_usd && *f.cost > *plan.budget_usd) continue;
    // With a deadline the cheapest that meets it; with a budget alone the fastest.
    const bool better = !best || (plan.deadline_days ? *f.cost < *best->cost : f.days < best->days);
    if (better) best = f;
  }
  return best;
}

std::vector<PlanFit> ParetoFrontier(const std::vector<PlanFit>& fits) {
  std::vector<const PlanFit*> sorted;
  for (const PlanFit& f : fits) {
    if (f.cost && !f.estimated) sorted.push_back(&f);
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
  merged.estimated = merged.confirmed = 0;
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
    merged.estimated += s.estimated;
    merged.confirmed += s.confirmed;
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
