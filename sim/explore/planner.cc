// `stepsim plan`'s search (sim/explore/plan.h): the Planner class, whose methods are the
// search's stages: enumerate the layouts of each cluster size, screen them statically, replay
// them in rounds by recompute policy (screening the long ones at two short batches), confirm
// the estimates near the front, and find the smallest GPU count that fits.

#include <algorithm>
#include <chrono>
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
#include "sim/explore/plan.h"
#include "sim/explore/plan_candidates.h"
#include "sim/replay/step_bound.h"
#include "sim/workload/params.h"

namespace sim::explore {

namespace {

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

// "memory category (N.NN GiB of the peak)" for the category that holds the most at the peak.
std::string Largest(const memory::Breakdown& breakdown) {
  int best = 0;
  for (int c = 1; c < kNumMemCategories; ++c) {
    if (breakdown[c] > breakdown[best]) best = c;
  }
  return absl::StrFormat("%s (%.2f GiB of the peak)", kMemCategoryNames[best],
                         breakdown[best].gib());
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

// A layout with its recompute policy left out: the layouts of one family differ only in it.
using FamilyKey =
    std::tuple<int64_t, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
FamilyKey FamilyOf(const Candidate& c) {
  const PlanConfig& k = c.config;
  return {c.gpus, k.zero, k.micro_batch, k.tp, k.pp, k.cp, k.ep, k.pp_chunks, k.first_stage_layers};
}

// A screened layout's step bounds, in seconds.
struct Bounds {
  double lower, upper;
};

// One search: Run once.
class Planner {
 public:
  Planner(const config::DataRoot& root, const PlanRequest& req, const PlanProgressFn& progress)
      : root_(root), req_(req), progress_(progress), tracker_(progress) {}

  absl::StatusOr<PlanResult> Run();

 private:
  // One GPU type's search: what the stages share.
  struct GpuSearch {
    GpuSpec gpu;
    const NodeSpec* node = nullptr;
    std::optional<double> price;
    std::optional<config::ScenarioLoader> loader;  // the frugal base, as data (BaseLoader)
    std::vector<Candidate> candidates;             // those past the static screen
    std::vector<PlanRejection> rejected;
    std::vector<std::optional<PlanFit>> fits;  // per candidate
    std::map<FamilyKey, bool> family_fits;     // a lighter recompute of the family fits
  };
  // One recompute round's screening state.
  struct Round {
    std::map<size_t, Bounds> bounds;           // per screened candidate
    std::map<size_t, ConfigResult> first_run;  // its first short replay
  };

  // The catalogs, the model, the prices and the work units (the search dimension of cluster
  // sizes: per GPU type, the smallest-count search and each whole-node size).
  absl::Status Prepare();
  bool Mine(const std::string& gpu, int64_t nodes) const;
  absl::Status PlanGpu(const std::string& gpu_name);
  absl::StatusOr<config::ScenarioLoader> BaseLoader(const GpuSearch& g) const;

  // Stage 1: each size's layouts, loaded and screened against their static floor.
  void Enumerate(GpuSearch& g, int64_t nodes);
  // Stage 2: the replay rounds, lightest recompute first.
  void ReplayRound(GpuSearch& g, Recompute round);
  void Screen(GpuSearch& g, std::vector<size_t> screened);
  void BoundFromProfiles(const GpuSearch& g, const std::vector<size_t>& screened, Round& r);
  std::vector<size_t> WithinReach(GpuSearch& g, Round& r, const std::vector<size_t>& which,
                                  const char* bound_kind);
  std::vector<size_t> FirstScreen(GpuSearch& g, Round& r, const std::vector<size_t>& which);
  void SecondScreen(GpuSearch& g, Round& r, const std::vector<size_t>& which);
  // Stage 3: the estimates near the front, replayed in full; the fits into the result.
  void Confirm(GpuSearch& g);
  // Stage 4: the smallest GPU count that fits.
  absl::Status SmallestCount(GpuSearch& g);

  void Reject(GpuSearch& g, const Candidate& c, RejectionKind kind, std::string reason,
              std::optional<Bytes> floor = std::nullopt);
  // The fit a run makes, or its rejection recorded.
  std::optional<PlanFit> FitOf(GpuSearch& g, const Candidate& c, const ConfigResult& r,
                               std::optional<double> step_s);
  // A layout's fit, set or cleared (a full replay that refutes an estimate): kept as counted.
  void SetFit(GpuSearch& g, size_t i, std::optional<PlanFit> f);
  std::vector<ConfigResult> Replay(const std::vector<Scenario>& batch,
                                   const std::vector<int64_t>& work);
  std::vector<ConfigResult> ReplayInFull(const GpuSearch& g, const std::vector<size_t>& which);

  const config::DataRoot& root_;
  const PlanRequest& req_;
  const PlanProgressFn& progress_;
  ProgressTracker tracker_;
  std::optional<config::Catalogs> catalogs_;
  std::optional<ModelSpec> model_;
  std::map<std::string, double> prices_;                // --price, keyed by the catalog's spelling
  std::vector<std::pair<std::string, int64_t>> units_;  // (GPU, nodes; 0 = smallest count)
  int64_t begin_ = 0, end_ = 0;                         // this shard's slice of units_
  int64_t types_in_slice_ = 0, type_index_ = 0;
  PlanResult out_;
};

absl::StatusOr<PlanResult> Planner::Run() {
  const auto t0 = std::chrono::steady_clock::now();
  if (absl::Status s = Prepare(); !s.ok()) return s;
  for (const std::string& gpu_name : req_.gpus) {
    if (absl::Status s = PlanGpu(gpu_name); !s.ok()) return s;
  }
  SortRejected(out_.rejected);
  out_.pareto = ParetoFrontier(out_.fits);
  out_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::move(out_);
}

absl::Status Planner::Prepare() {
  auto catalogs = config::LoadCatalogs(root_);
  if (!catalogs.ok()) return catalogs.status();
  catalogs_ = *std::move(catalogs);
  auto model = config::LoadModel(root_, req_.model);
  if (!model.ok()) return model.status();
  model_ = *std::move(model);
  out_.model = model_->name;
  out_.deadline_days = req_.deadline_days;
  out_.budget_usd = req_.budget_usd;
  out_.params = CountParameters(*model_).total;
  out_.seq_len = req_.seq_len;
  out_.tokens = req_.tokens;
  out_.global_batch =
      std::max<int64_t>(1, (req_.global_batch_tokens + req_.seq_len / 2) / req_.seq_len);

  // --price names: each a catalog GPU the plan considers (FindGpu: case-insensitive, with the
  // nearest name).
  for (const auto& [name, usd] : req_.prices) {
    auto gpu = config::FindGpu(catalogs_->gpus, name);
    if (!gpu.ok())
      return absl::InvalidArgumentError(absl::StrCat("--price: ", gpu.status().message()));
    bool considered = false;
    for (const std::string& g : req_.gpus) {
      considered = considered || absl::AsciiStrToLower(g) == absl::AsciiStrToLower(gpu->name);
    }
    if (!considered) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--price: ", gpu->name, " is not among the GPUs planned for (--gpu); add it there"));
    }
    prices_[gpu->name] = usd;
  }
  // Work units in a fixed order: per GPU type, the smallest-count search, then one unit per
  // whole-node cluster size. A shard runs a contiguous slice of them.
  for (const std::string& gpu_name : req_.gpus) {
    auto gpu = config::FindGpu(catalogs_->gpus, gpu_name);
    if (!gpu.ok()) return gpu.status();
    int64_t gpn = 0;
    for (const NodeSpec& n : catalogs_->nodes) {
      if (n.gpu == gpu->name && gpn == 0) gpn = n.gpus_per_node;
    }
    units_.push_back({gpu->name, 0});
    for (int64_t nodes = 1; gpn > 0 && nodes * gpn <= req_.max_gpus; nodes *= 2) {
      units_.push_back({gpu->name, nodes});
    }
  }
  const Slice slice = SliceOf(req_.shard, units_.size());
  begin_ = static_cast<int64_t>(slice.begin);
  end_ = static_cast<int64_t>(slice.end);
  out_.shard = {begin_, end_, static_cast<int64_t>(units_.size())};
  // The progress line numbers the GPU types with work in this slice (the units list each
  // type's together).
  for (int64_t i = begin_; i < end_; ++i) {
    if (i == begin_ || units_[i].first != units_[i - 1].first) ++types_in_slice_;
  }
  return absl::OkStatus();
}

bool Planner::Mine(const std::string& gpu, int64_t nodes) const {
  for (int64_t i = begin_; i < end_; ++i) {
    if (units_[i].first == gpu && units_[i].second == nodes) return true;
  }
  return false;
}

absl::StatusOr<config::ScenarioLoader> Planner::BaseLoader(const GpuSearch& g) const {
  std::vector<config::Override> base = {
      {"schema_version", "1"},
      {"name", absl::StrCat("plan-", model_->name, "-", g.gpu.name)},
      {"model", req_.model},
      {"cluster.node", g.node->name},
      {"cluster.nodes", "1"},
      {"training.seq_len", absl::StrCat(req_.seq_len)},
      {"training.micro_batch", "1"},
      {"training.global_batch", absl::StrCat(out_.global_batch)},
      {"training.recompute", std::string(Name(Recompute::kFull))},
      {"parallel.framework", std::string(Name(req_.framework))},
      {"parallel.zero", "3"}};
  if (req_.fsdp_version != 1) {
    base.push_back({"parallel.fsdp_version", absl::StrCat(req_.fsdp_version)});
  }
  // Fine-tuning and offload apply to every candidate.
  if (req_.finetune != FinetuneMethod::kFull) {
    base.push_back({"training.finetune.method", std::string(Name(req_.finetune))});
    base.push_back({"training.finetune.rank", absl::StrCat(req_.lora_rank)});
  }
  if (req_.offload.optimizer != OffloadTarget::kNone) {
    base.push_back({"parallel.offload.optimizer", std::string(Name(req_.offload.optimizer))});
  }
  if (req_.offload.params != OffloadTarget::kNone) {
    base.push_back({"parallel.offload.params", std::string(Name(req_.offload.params))});
  }
  if (req_.offload.activations) base.push_back({"parallel.offload.activations", "cpu"});
  return config::ScenarioLoader::FromOverrides(root_, std::move(base),
                                               absl::StrCat("plan:", g.gpu.name));
}

absl::Status Planner::PlanGpu(const std::string& gpu_name) {
  auto gpu = config::FindGpu(catalogs_->gpus, gpu_name);
  if (!gpu.ok()) return gpu.status();
  GpuSearch g;
  g.gpu = *std::move(gpu);
  for (const NodeSpec& n : catalogs_->nodes) {
    if (n.gpu == g.gpu.name && g.node == nullptr) g.node = &n;
  }
  if (g.node == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("plan: no node type in topologies/nodes.yaml holds ", g.gpu.name,
                     "; add one (GPUs per node, NVLink and NIC bandwidth) to plan with it"));
  }
  g.price = g.gpu.price_per_hour_usd;
  if (auto it = prices_.find(g.gpu.name); it != prices_.end()) g.price = it->second;
  bool in_slice = false;
  for (int64_t i = begin_; i < end_; ++i) in_slice = in_slice || units_[i].first == g.gpu.name;
  if (in_slice) {
    ++type_index_;
    tracker_.Update([&](PlanProgress& p) {
      p.gpu = g.gpu.name;
      p.gpu_index = type_index_;
      p.gpu_types = types_in_slice_;
      p.replay_layouts = p.replay_decided = 0;
    });
  }
  auto loader = BaseLoader(g);
  if (!loader.ok()) return loader.status();
  g.loader.emplace(*std::move(loader));

  // ---- Pareto search over whole-node clusters --------------------------------------------
  for (int64_t nodes = 1; nodes * g.node->gpus_per_node <= req_.max_gpus; nodes *= 2) {
    if (StopRequested()) return absl::CancelledError("interrupted");
    if (Mine(g.gpu.name, nodes)) Enumerate(g, nodes);
  }
  // Rounds by recompute policy, lightest first (none, selective, full): a layout is replayed
  // with more recompute only when the lighter policy did not fit, since recomputing less
  // takes less time on the same GPUs.
  g.fits.assign(g.candidates.size(), std::nullopt);
  for (Recompute round : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    ReplayRound(g, round);
  }
  Confirm(g);
  if (!Mine(g.gpu.name, 0)) return absl::OkStatus();
  return SmallestCount(g);
}

void Planner::Enumerate(GpuSearch& g, int64_t nodes) {
  const int64_t gpn = g.node->gpus_per_node;
  const int64_t n = nodes * gpn;
  const int64_t global_batch = out_.global_batch;
  std::vector<Candidate> family = DataParallelCandidates(g.gpu.name, n, req_.framework);
  for (Candidate& c : ModelParallelCandidates(g.gpu.name, n, gpn, model_->layers,
                                              model_->moe ? model_->moe->experts : 0)) {
    // The Megatron layouts leave FSDP's version behind (it belongs to framework fsdp).
    if (req_.fsdp_version != 1) c.overrides.push_back({"parallel.fsdp_version", "1"});
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
  tracker_.Update([&](PlanProgress& p) {
    p.loading = 0;
    p.to_load = static_cast<int64_t>(family.size());
    p.loading_gpus = n;
  });
  ParallelFor(family.size(), req_.jobs, [&](size_t k) {
    tracker_.Update([](PlanProgress& p) { ++p.loading; });
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
    l.scenario = g.loader->Load(c.overrides, &l.problems);
    if (l.scenario->ok()) l.floor = StaticFloor(**l.scenario);
  });
  tracker_.Update([](PlanProgress& p) { p.to_load = 0; }, /*report=*/false);
  for (size_t k = 0; k < family.size(); ++k) {
    Candidate& c = family[k];
    Loaded& l = loaded[k];
    ++out_.considered;
    tracker_.Update([](PlanProgress& p) { ++p.layouts; }, /*report=*/false);
    if (!l.scenario) {
      ++out_.pruned;
      Reject(g, c, RejectionKind::kBatch,
             absl::StrFormat("a batch of %d sequences is less than half of one step's "
                             "least, %d (micro-batch x data-parallel ranks%s)",
                             global_batch, BatchUnit(c), c.config.pp_chunks > 1 ? " x pp" : ""));
      continue;
    }
    absl::StatusOr<Scenario>& s = *l.scenario;
    if (!s.ok()) {
      // A layout the model does not admit (TP not dividing the heads, PP the layers).
      ++out_.pruned;
      Reject(g, c, RejectionKind::kLayout, ProblemsText(l.problems, s.status()));
      continue;
    }
    if (l.floor > s->cluster.gpu.Usable()) {
      ++out_.pruned;
      Reject(g, c, RejectionKind::kStatic,
             absl::StrFormat("static ledger: states + kept activations + reserve "
                             "= %.1f GiB > %.1f GiB usable",
                             l.floor.gib(), s->cluster.gpu.Usable().gib()),
             l.floor);
      continue;
    }
    c.scenario = std::make_shared<const Scenario>(*std::move(s));
    g.candidates.push_back(c);
    tracker_.Update([](PlanProgress& p) { ++p.replay_layouts; }, /*report=*/false);
  }
}

void Planner::Reject(GpuSearch& g, const Candidate& c, RejectionKind kind, std::string reason,
                     std::optional<Bytes> floor) {
  g.rejected.push_back({g.gpu.name, c.gpus, c.config, kind, std::move(reason), floor});
  tracker_.Update([&](PlanProgress& p) {
    ++p.rejected;
    if (AfterReplays(kind)) ++p.replay_decided;
  });
}

std::optional<PlanFit> Planner::FitOf(GpuSearch& g, const Candidate& c, const ConfigResult& r,
                                      std::optional<double> step_s) {
  if (!r.status.ok()) {
    Reject(g, c, RejectionKind::kInvalid, std::string(r.status.message()));
    return std::nullopt;
  }
  const report::RunSummary& run = *r.summary;
  if (!run.fits) {
    // The GPUs overflow at an op; or they fit and the node's host memory does not.
    Reject(g, c, RejectionKind::kReplay,
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
      static_cast<double>(c.global_batch) * static_cast<double>(req_.seq_len) / step;
  PlanFit fit{g.gpu.name,     c.gpus,        c.config,
              c.global_batch, step,          req_.tokens / tokens_per_s / 86400.0,
              std::nullopt,   run.host_peak, step_s.has_value()};
  if (g.price) fit.cost = fit.days * 24.0 * static_cast<double>(c.gpus) * *g.price;
  return fit;
}

void Planner::SetFit(GpuSearch& g, size_t i, std::optional<PlanFit> f) {
  const int64_t change = (f ? 1 : 0) - (g.fits[i] ? 1 : 0);
  g.fits[i] = std::move(f);
  tracker_.Update([&](PlanProgress& p) {
    p.kept += change;
    p.replay_decided += change;
  });
}

// The replays of one batch, reported to the progress function as the plan's running count of
// replays. They run longest first (`work`: the micro-batches each replays, at most), so that a
// long replay does not start when the other workers are nearly done and keep them waiting; the
// results come back in the batch's order.
std::vector<ConfigResult> Planner::Replay(const std::vector<Scenario>& batch,
                                          const std::vector<int64_t>& work) {
  const size_t base = static_cast<size_t>(out_.replayed);
  ProgressTracker& tracker = tracker_;
  const Progress counted = progress_ ? Progress([&tracker, base](size_t done, size_t) {
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
  std::vector<ConfigResult> ran = RunScenarios(longest_first, req_.jobs, counted);
  std::vector<ConfigResult> results(batch.size());
  for (size_t k = 0; k < order.size(); ++k) results[order[k]] = std::move(ran[k]);
  out_.replayed += static_cast<int64_t>(results.size());
  return results;
}

std::vector<ConfigResult> Planner::ReplayInFull(const GpuSearch& g,
                                                const std::vector<size_t>& which) {
  std::vector<Scenario> scenarios;
  std::vector<int64_t> work;
  for (size_t i : which) {
    scenarios.push_back(*g.candidates[i].scenario);
    work.push_back(MicroBatches(g.candidates[i], g.candidates[i].global_batch));
  }
  return Replay(scenarios, work);
}

// Screening (FirstScreen and SecondScreen): a layout with many micro-batches per step is
// replayed at two short batches and its step extrapolated; the layouts whose estimate lands
// within kConfirmMargin of the front are then replayed in full (Confirm), and only full replays
// make the front. Short layouts are replayed in full at once.
void Planner::ReplayRound(GpuSearch& g, Recompute round) {
  std::vector<size_t> todo;
  for (size_t i = 0; i < g.candidates.size(); ++i) {
    const Candidate& c = g.candidates[i];
    if (c.config.recompute != round) continue;
    if (g.family_fits[FamilyOf(c)]) {
      Reject(g, c, RejectionKind::kLighter,
             "the same layout with less recompute fits, and recomputing less is faster");
      continue;
    }
    todo.push_back(i);
  }
  // Stage A: short layouts in full, at once.
  std::vector<size_t> full_runs, screened;
  for (size_t i : todo) (ScreenSizes(g.candidates[i]) ? screened : full_runs).push_back(i);
  const auto a = ReplayInFull(g, full_runs);
  for (size_t k = 0; k < full_runs.size(); ++k) {
    const size_t i = full_runs[k];
    SetFit(g, i, FitOf(g, g.candidates[i], a[k], std::nullopt));
    if (g.fits[i]) g.family_fits[FamilyOf(g.candidates[i])] = true;
  }
  Screen(g, std::move(screened));
}

// The long layouts are screened: replayed at two short batches (ScreenSizes), the step
// extrapolated along the period they differ by. Before any replay, each gets a lower bound on
// its step (BoundFromProfiles); the first screening run tightens it. Only the fastest layout of
// a size can be on the front (the same GPUs cost the same per day), so a layout whose lower
// bound exceeds the fastest step known on its size is not replayed further.
void Planner::Screen(GpuSearch& g, std::vector<size_t> screened) {
  Round r;
  BoundFromProfiles(g, screened, r);
  // Stage B: on each size, the two layouts of lowest bound (interleaved ones aside) are
  // screened first, so that the others have a step to be measured against.
  std::stable_sort(screened.begin(), screened.end(),
                   [&](size_t x, size_t y) { return r.bounds[x].lower < r.bounds[y].lower; });
  std::vector<size_t> lead, rest;
  {
    std::map<int64_t, int> per_size;
    for (size_t i : screened) {
      const Candidate& c = g.candidates[i];
      (c.config.pp_chunks == 1 && per_size[c.gpus]++ < 2 ? lead : rest).push_back(i);
    }
  }
  SecondScreen(g, r, FirstScreen(g, r, lead));
  // Stage C: the others, as long as their bounds leave them a chance, a wave at a time
  // (kScreenWave), lowest bounds first.
  for (size_t w = 0; w < rest.size(); w += kScreenWave) {
    const std::vector<size_t> wave(
        rest.begin() + static_cast<ptrdiff_t>(w),
        rest.begin() + static_cast<ptrdiff_t>(std::min(rest.size(), w + kScreenWave)));
    const auto live = FirstScreen(g, r,
                                  WithinReach(g, r, wave,
                                              "its busiest stage's compute with the pipeline's "
                                              "fill and drain, or the average stage's compute"));
    SecondScreen(g, r, WithinReach(g, r, live, "its busiest stage's compute, from a short replay"));
  }
}

// Each screened layout's lower bound before any replay (replay::StepLowerBound: its busiest
// stage's compute with the pipeline's fill and drain, priced without a replay). The interleaved
// schedule's own bound (the busiest stage's compute alone) would take lowerings of pp and 2 pp
// micro-batches, as long as the first screening run: it gets the average stage's compute
// instead, from a lowering of its layout read as 1F1B. A layout's compute profile is the same on
// every cluster size (step_bound.h): it is measured once, for the first candidate of the layout,
// and read at each one's micro-batches.
void Planner::BoundFromProfiles(const GpuSearch& g, const std::vector<size_t>& screened, Round& r) {
  std::map<std::string, size_t> layout_of;  // by the overrides but the size's
  std::vector<size_t> layout(screened.size()), first_of_layout;
  for (size_t k = 0; k < screened.size(); ++k) {
    std::string key;
    for (const config::Override& o : g.candidates[screened[k]].overrides) {
      if (o.key != "cluster.nodes" && o.key != "training.global_batch") {
        absl::StrAppend(&key, o.key, "=", o.value, "\n");
      }
    }
    const auto [it, fresh] = layout_of.emplace(std::move(key), first_of_layout.size());
    if (fresh) first_of_layout.push_back(screened[k]);
    layout[k] = it->second;
  }
  std::vector<std::optional<replay::ComputeProfile>> profiles(first_of_layout.size());
  ParallelFor(first_of_layout.size(), req_.jobs, [&](size_t l) {
    if (StopRequested()) return;  // no profile: no lower bound, nothing pruned
    const Candidate& c = g.candidates[first_of_layout[l]];
    auto p = c.config.pp_chunks > 1 ? replay::AverageComputeProfile(*c.scenario)
                                    : replay::StepComputeProfile(*c.scenario);
    if (p.ok()) profiles[l] = *std::move(p);
  });
  for (size_t k = 0; k < screened.size(); ++k) {
    const Candidate& c = g.candidates[screened[k]];
    const std::optional<replay::ComputeProfile>& p = profiles[layout[k]];
    double lower = 0.0;
    if (p) {
      const int64_t m = c.scenario->micro_batches();
      lower = (c.config.pp_chunks > 1 ? replay::AverageStageComputeBound(*p, m)
                                      : replay::StepLowerBound(*p, m))
                  .seconds();
    }
    r.bounds[screened[k]] = {lower, std::numeric_limits<double>::infinity()};
  }
}

// Those of `which` whose lower bound is not beyond the fastest step known on their size; the
// others rejected.
std::vector<size_t> Planner::WithinReach(GpuSearch& g, Round& r, const std::vector<size_t>& which,
                                         const char* bound_kind) {
  auto best_known = [&](int64_t gpus) {
    double best = std::numeric_limits<double>::infinity();
    for (const std::optional<PlanFit>& f : g.fits) {
      if (f && f->gpus == gpus) best = std::min(best, f->step_s);
    }
    for (const auto& [i, b] : r.bounds) {
      if (g.candidates[i].gpus == gpus) best = std::min(best, b.upper);
    }
    return best;
  };
  std::vector<size_t> kept;
  for (size_t i : which) {
    const Candidate& c = g.candidates[i];
    const double best = best_known(c.gpus);
    if (r.bounds[i].lower > best * kBoundMargin) {
      Reject(g, c, RejectionKind::kSlower,
             absl::StrFormat("slower than another layout on the same GPUs: at least %.2f s "
                             "per step (%s), against %.2f s",
                             r.bounds[i].lower, bound_kind, best));
      continue;
    }
    kept.push_back(i);
  }
  return kept;
}

// The first screening run of `which`: those that fit, with their bounds tightened, with c the
// busiest stage's compute and recompute per micro-batch: below, m x c (a stage computes its
// micro-batches one after another) and the short step + (m - m1) x c (the step is linear in the
// micro-batches past pp, and each period holds at least c on that stage); above, the short
// step x m / m1 (the fixed part of the step is positive).
std::vector<size_t> Planner::FirstScreen(GpuSearch& g, Round& r, const std::vector<size_t>& which) {
  std::vector<Scenario> cfg;
  std::vector<int64_t> work;
  for (size_t i : which) {
    work.push_back(ScreenSizes(g.candidates[i])->first);
    cfg.push_back(g.candidates[i].scenario->WithMicroBatches(work.back()));
  }
  auto a = Replay(cfg, work);
  std::vector<size_t> live;
  for (size_t k = 0; k < which.size(); ++k) {
    const size_t i = which[k];
    const Candidate& c = g.candidates[i];
    const ConfigResult& run_result = r.first_run[i] = std::move(a[k]);
    if (!run_result.status.ok() || !run_result.summary->fits) {
      FitOf(g, c, run_result, std::nullopt);  // records the rejection
      continue;
    }
    const report::RunSummary& run = *run_result.summary;
    const double m1 = static_cast<double>(ScreenSizes(c)->first);
    const double m = static_cast<double>(MicroBatches(c, c.global_batch));
    double busiest = (run.compute + run.recompute).seconds();
    for (const report::StageSummary& st : run.stages) {
      busiest = std::max(busiest, (st.times.compute + st.times.recompute).seconds());
    }
    const double s1 = run.step.seconds(), per = busiest / m1;
    Bounds& b = r.bounds[i];
    b = {std::max({b.lower, m * per, s1 + (m - m1) * per}), s1 * m / m1};
    live.push_back(i);
    g.family_fits[FamilyOf(c)] = true;
  }
  return live;
}

// The second screening run, and the estimate.
void Planner::SecondScreen(GpuSearch& g, Round& r, const std::vector<size_t>& which) {
  std::vector<Scenario> cfg;
  std::vector<int64_t> work;
  for (size_t i : which) {
    work.push_back(ScreenSizes(g.candidates[i])->second);
    cfg.push_back(g.candidates[i].scenario->WithMicroBatches(work.back()));
  }
  const auto b = Replay(cfg, work);
  for (size_t k = 0; k < which.size(); ++k) {
    const size_t i = which[k];
    const Candidate& c = g.candidates[i];
    if (!b[k].status.ok() || !b[k].summary->fits) {
      // Fitted at pp micro-batches, not at the second batch: the heavier recompute gets its
      // round.
      FitOf(g, c, b[k], std::nullopt);
      g.family_fits[FamilyOf(c)] = false;
      continue;
    }
    const auto screen = *ScreenSizes(c);
    const double s1 = r.first_run[i].summary->step.seconds(), s2 = b[k].summary->step.seconds();
    const double period = (s2 - s1) / static_cast<double>(screen.second - screen.first);
    const int64_t m = MicroBatches(c, c.global_batch);
    SetFit(g, i, FitOf(g, c, b[k], s2 + period * static_cast<double>(m - screen.second)));
  }
}

// Confirm by full replay every estimate within kConfirmMargin of the fastest fit on as many GPUs
// (only the fastest of a size can be on the front: the same GPUs cost the same per day) that no
// other fit beats by that margin in both days and cost.
void Planner::Confirm(GpuSearch& g) {
  auto cost_of = [](const PlanFit& f) {
    return f.cost.value_or(f.days * static_cast<double>(f.gpus));
  };
  std::map<int64_t, double> fastest;
  for (const std::optional<PlanFit>& f : g.fits) {
    if (!f) continue;
    auto [it, fresh] = fastest.emplace(f->gpus, f->step_s);
    if (!fresh) it->second = std::min(it->second, f->step_s);
  }
  std::vector<size_t> confirm;
  for (size_t i = 0; i < g.candidates.size(); ++i) {
    if (!g.fits[i] || !g.fits[i]->estimated) continue;
    if (g.fits[i]->step_s > fastest[g.fits[i]->gpus] * kConfirmMargin) continue;
    bool dominated = false;
    for (size_t j = 0; j < g.candidates.size() && !dominated; ++j) {
      if (j == i || !g.fits[j]) continue;
      dominated = g.fits[j]->days * kConfirmMargin < g.fits[i]->days &&
                  cost_of(*g.fits[j]) * kConfirmMargin < cost_of(*g.fits[i]);
    }
    if (!dominated) confirm.push_back(i);
  }
  const auto confirmed = ReplayInFull(g, confirm);
  out_.confirmed += static_cast<int64_t>(confirmed.size());
  for (size_t k = 0; k < confirm.size(); ++k) {
    SetFit(g, confirm[k], FitOf(g, g.candidates[confirm[k]], confirmed[k], std::nullopt));
  }
  for (std::optional<PlanFit>& f : g.fits) {
    if (!f) continue;
    if (f->estimated) ++out_.estimated;
    out_.fits.push_back(std::move(*f));
  }
  for (PlanRejection& j : g.rejected) out_.rejected.push_back(std::move(j));
}

// The smallest count: a static lower bound (16 B/param sharded over N under ZeRO-3, plus the
// layer inputs of full recompute, plus the reserve, must fit), then single GPUs up to a node
// and whole nodes past it until one fits, then a bisection.
absl::Status Planner::SmallestCount(GpuSearch& g) {
  const int64_t gpn = g.node->gpus_per_node;
  auto fits_at = [&](int64_t n) -> std::optional<report::RunSummary> {
    const int64_t per_node = PerNode(n, gpn);
    std::vector<config::Override> o = {{"cluster.nodes", absl::StrCat(n / per_node)},
                                       {"cluster.gpus_per_node", absl::StrCat(per_node)},
                                       {"training.global_batch", absl::StrCat(2 * n)}};
    auto r = RunConfigs(*g.loader, {o}, 1, nullptr);
    ++out_.replayed;
    tracker_.Update([&](PlanProgress& p) { p.replayed = out_.replayed; });
    if (!r[0].status.ok() || !r[0].summary->fits) return std::nullopt;
    return std::move(r[0].summary);
  };
  int64_t lo = 1;  // largest N known not to fit (or 1 as the floor), hi = smallest that fits
  {
    // One node, ZeRO-3, the batch of the count search (whatever the request's batch in tokens).
    auto s = g.loader->Load({{"training.global_batch", absl::StrCat(2 * gpn)}});
    if (!s.ok()) return s.status();
    const Bytes act = StaticFloor(*s) - PersistentStates(*s).total() - s->runtime.reserved;
    const double per_gpu_room = (s->cluster.gpu.Usable() - act - s->runtime.reserved).gb();
    const double states = static_cast<double>(PersistentStates(*s).total().count()) *
                          static_cast<double>(s->dp()) / 1e9;  // ZeRO-3 states of the model
    lo = per_gpu_room > 0 ? std::max<int64_t>(1, static_cast<int64_t>(states / per_gpu_room))
                          : req_.max_gpus;
  }
  std::optional<int64_t> hi;
  std::optional<report::RunSummary> hi_run;
  for (int64_t n = std::max<int64_t>(lo, 1); n <= req_.max_gpus;
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
    none.gpu = g.gpu.name;
    none.reason = absl::StrFormat("nothing fits up to %d GPUs", req_.max_gpus);
    SetMinGpus(out_.min_gpus, std::move(none));
    return absl::OkStatus();
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
  SetMinGpus(out_.min_gpus,
             MinGpus{g.gpu.name, *hi, "", PlanConfig{}, hi_run->peak, hi_run->capacity,
                     Largest(hi_run->peak_breakdown), hi_run->peak_breakdown, hi_run->host_peak});
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PlanResult> Plan(const config::DataRoot& root, const PlanRequest& req,
                                const PlanProgressFn& progress) {
  return Planner(root, req, progress).Run();
}

}  // namespace sim::explore
