// `stepsim plan`'s replay rounds (Planner, planner.h): by recompute policy, lightest first; the
// long layouts screened at two short batches and bounded; the estimates near the front confirmed
// by full replays.

#include <algorithm>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/parallel.h"
#include "sim/base/stop_request.h"
#include "sim/explore/planner.h"
#include "sim/replay/step_bound.h"

namespace sim::explore::plan_internal {

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

}  // namespace

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
    double busiest = (run.times.compute + run.times.recompute).seconds();
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

}  // namespace sim::explore::plan_internal
