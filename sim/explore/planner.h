#pragma once
// `stepsim plan`'s search (sim/explore/plan.h): the Planner class, whose methods are the
// search's stages. planner.cc holds the enumeration, the static screen, the replays and the
// smallest count; plan_screening.cc the rounds by recompute policy, the screening of long
// layouts at two short batches, and the confirmation of estimates near the front.

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/explore/plan.h"
#include "sim/explore/plan_candidates.h"

namespace sim::explore::plan_internal {

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

// A layout with its recompute policy left out: the layouts of one family differ only in it.
using FamilyKey =
    std::tuple<int64_t, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
inline FamilyKey FamilyOf(const Candidate& c) {
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
  // The request is copied: Prepare fills in what a scenario decides where the options did not.
  Planner(const config::DataRoot& root, const PlanRequest& req, const PlanProgressFn& progress)
      : root_(root), req_(req), progress_(progress), tracker_(progress) {}

  absl::StatusOr<PlanResult> Run();

 private:
  // One GPU type's search: what the stages share.
  struct GpuSearch {
    GpuSpec gpu;
    const NodeSpec* node = nullptr;
    std::optional<double> price;
    std::optional<config::ScenarioLoader> loader;  // the model or scenario (BaseLoader)
    std::vector<config::Override> base;            // the frugal base over it, then --set
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
  // The node type planned for a GPU: the scenario's or --set cluster.node's, else the first in
  // topologies/nodes.yaml that holds it; null when none does.
  const NodeSpec* NodeFor(const std::string& gpu) const;
  absl::Status PlanGpu(const std::string& gpu_name);
  absl::Status BaseLoader(GpuSearch& g) const;
  // The model or scenario loaded with the search's base and `overrides` over it.
  absl::StatusOr<Scenario> Load(const GpuSearch& g, const std::vector<config::Override>& overrides,
                                std::vector<config::ConfigProblem>* problems = nullptr) const;
  // A scenario file as the plan's base: read with --set to take its model, node, sequence
  // length, batch and framework, then with the keys the search varies taken out.
  absl::Status PrepareScenario();
  // Whether a layout keeps every searched key the request's --set fixes.
  bool Admitted(const Candidate& c) const;

  // Stages 1-3 for some node counts of one GPU type: a search of its own, whose fits and
  // rejections join the result.
  void SearchSizes(const GpuSearch& type, const std::vector<int64_t>& node_counts);
  // The counts between the powers of two (PlanRequest::count_gap): bisection to the smallest
  // that meets the deadline, or filling the gaps in days between neighbouring counts.
  absl::Status RefineCounts(const GpuSearch& type);
  // The fastest replayed layout's days per node count of one GPU type so far; counts tried
  // without any fit map to infinity.
  std::map<int64_t, double> BestDays(const GpuSearch& type) const;

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
  PlanRequest req_;
  const PlanProgressFn& progress_;
  ProgressTracker tracker_;
  std::optional<config::Catalogs> catalogs_;
  std::optional<ModelSpec> model_;
  std::optional<config::ScenarioLoader> scenario_;      // a scenario file's, layout keys taken out
  std::map<std::string, std::string> node_of_;          // GPU -> the node type the scenario names
  std::set<int64_t> tried_;                             // node counts searched, this GPU type
  std::map<std::string, double> prices_;                // --price, keyed by the catalog's spelling
  std::vector<std::pair<std::string, int64_t>> units_;  // (GPU, nodes; 0 = smallest count)
  int64_t begin_ = 0, end_ = 0;                         // this shard's slice of units_
  int64_t types_in_slice_ = 0, type_index_ = 0;
  PlanResult out_;
};

}  // namespace sim::explore::plan_internal
