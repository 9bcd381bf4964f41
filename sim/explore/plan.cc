#include "sim/explore/plan.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/explore/plan_candidates.h"
#include "sim/report/json_text.h"

namespace sim::explore {

absl::string_view Name(RejectionKind k) { return EnumName(k); }

void SetMinGpus(std::vector<MinGpus>& all, MinGpus m) {
  for (MinGpus& e : all) {
    if (e.gpu == m.gpu && e.variant == m.variant) {
      e = std::move(m);
      return;
    }
  }
  all.push_back(std::move(m));
}

nlohmann::ordered_json PlanConfigJson(const PlanConfig& c) {
  nlohmann::ordered_json j = {{"zero", c.zero},
                              {"micro_batch", c.micro_batch},
                              {"recompute", Name(c.recompute)},
                              {"prefetch", c.prefetch ? nlohmann::ordered_json(*c.prefetch)
                                                      : nlohmann::ordered_json(nullptr)}};
  if (c.ModelParallel()) {
    j["framework"] = Name(Framework::kMegatron);
    j["tp"] = c.tp;
    j["pp"] = c.pp;
    j["cp"] = c.cp;
    if (c.ep > 1) j["ep"] = c.ep;
    j["pp_chunks"] = c.pp_chunks;
    j["first_stage_layers"] = c.first_stage_layers;
    j["last_stage_layers"] = c.last_stage_layers;
    j["sequence_parallel"] = c.SequenceParallel();
  }
  return j;
}

void SortRejected(std::vector<PlanRejection>& rejected) {
  // Each key built once, not twice per comparison: a plan rejects thousands of layouts, and
  // building their JSON inside the comparisons took 2.5 % of `plan llama2-70b --gpu
  // H100-SXM5-80GB --max-gpus 256`'s instructions, on one thread (callgrind).
  using Key = std::tuple<std::string, int64_t, std::string>;
  std::vector<std::pair<Key, size_t>> keyed;
  keyed.reserve(rejected.size());
  for (size_t i = 0; i < rejected.size(); ++i) {
    const PlanRejection& r = rejected[i];
    keyed.emplace_back(Key{r.gpu, r.gpus, report::JsonText(PlanConfigJson(r.config), -1)}, i);
  }
  // Ties keep their order (the index breaks them), as a stable sort by the key would.
  std::sort(keyed.begin(), keyed.end());
  std::vector<PlanRejection> sorted;
  sorted.reserve(rejected.size());
  for (const auto& [key, i] : keyed) sorted.push_back(std::move(rejected[i]));
  rejected = std::move(sorted);
}

namespace {

double GpuHours(const PlanFit& f) { return f.days * 24.0 * static_cast<double>(f.gpus); }

bool WithinPower(const PlanResult& plan, const PlanFit& f) {
  return !plan.power_mw || f.power_mw <= *plan.power_mw;
}

// The fewest GPUs of one GPU type (and variant) whose fastest layout meets the deadline and,
// given one, the budget: that count's fastest fit. What a buyer buys: the smallest cluster
// that trains in time.
std::optional<PlanFit> SmallestMeeting(const PlanResult& plan, const std::string& gpu,
                                       const std::string& variant) {
  std::optional<PlanFit> best;
  for (const PlanFit& f : plan.fits) {
    if (f.gpu != gpu || f.variant != variant || f.estimated) continue;
    if (f.days > *plan.deadline_days || !WithinPower(plan, f)) continue;
    if (plan.budget_usd && (!f.cost || *f.cost > *plan.budget_usd)) continue;
    if (!best || f.gpus < best->gpus || (f.gpus == best->gpus && f.days < best->days)) best = f;
  }
  return best;
}

}  // namespace

std::optional<PlanFit> PlanChoice(const PlanResult& plan) {
  if (!plan.deadline_days && !plan.budget_usd) {
    if (!plan.fixed_gpus) return std::nullopt;
    std::optional<PlanFit> fastest;
    for (const PlanFit& f : plan.fits) {
      if (!f.estimated && WithinPower(plan, f) && (!fastest || f.days < fastest->days)) {
        fastest = f;
      }
    }
    return fastest;
  }
  if (plan.deadline_days) {
    // Each type's smallest cluster that meets the deadline; of those, the cheapest (priced
    // ones first), else the fewest GPU-hours.
    std::optional<PlanFit> best;
    for (const PlanTypeRow& t : plan.types) {
      const auto f = SmallestMeeting(plan, t.gpu, t.variant);
      if (!f) continue;
      const bool better =
          !best || (f->cost.has_value() != best->cost.has_value()
                        ? f->cost.has_value()
                        : (f->cost ? *f->cost < *best->cost : GpuHours(*f) < GpuHours(*best)));
      if (better) best = f;
    }
    return best;
  }
  // A budget alone: the fastest of the Pareto set within it.
  std::optional<PlanFit> best;
  for (const PlanFit& f : plan.pareto) {
    if (*f.cost > *plan.budget_usd || !WithinPower(plan, f)) continue;
    if (!best || f.days < best->days) best = f;
  }
  return best;
}

void FillTypeRows(PlanResult& plan) {
  for (PlanTypeRow& t : plan.types) {
    t.best.reset();
    t.why.clear();
    bool any = false;
    for (const PlanFit& f : plan.fits) {
      if (f.gpu != t.gpu || f.variant != t.variant || f.estimated || !WithinPower(plan, f)) {
        continue;
      }
      any = true;
      // Without a deadline: the fewest GPU-hours; equal ones, the fewer GPUs.
      if (!t.best || GpuHours(f) < GpuHours(*t.best) ||
          (GpuHours(f) == GpuHours(*t.best) && f.gpus < t.best->gpus)) {
        t.best = f;
      }
    }
    if (plan.deadline_days) t.best = SmallestMeeting(plan, t.gpu, t.variant);
    if (!t.best) {
      t.why =
          !any ? (plan.power_mw ? absl::StrFormat("no layout fits within %g MW at the counts "
                                                  "searched",
                                                  *plan.power_mw)
                                : std::string("no layout fits at the counts searched"))
               : absl::StrFormat("no layout meets %g days%s at the counts searched",
                                 *plan.deadline_days, plan.budget_usd ? " within the budget" : "");
    }
  }
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
  merged.types.clear();
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
    for (const PlanTypeRow& t : s.types) {
      bool seen = false;
      for (const PlanTypeRow& u : merged.types)
        seen = seen || (u.gpu == t.gpu && u.variant == t.variant);
      if (!seen) merged.types.push_back(t);
    }
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
  FillTypeRows(merged);
  return merged;
}

}  // namespace sim::explore
