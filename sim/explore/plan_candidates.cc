#include "sim/explore/plan_candidates.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/base/check.h"
#include "sim/workload/layer_ops.h"
#include "sim/workload/params.h"
#include "sim/workload/policy/framework_traits.h"

namespace sim::explore {

namespace {

int64_t IntegerOf(absl::string_view value) {
  int64_t v = 0;
  SIM_CHECK(absl::SimpleAtoi(value, &v), "a search dimension's values are integers");
  return v;
}

}  // namespace

std::vector<SearchDimension> DataParallelDimensions() {
  return {
      {"parallel.zero",
       {"0", "1", "2", "3"},
       [](PlanConfig& c, absl::string_view v) { c.zero = static_cast<int>(IntegerOf(v)); }},
      {"training.micro_batch",
       {"1", "2", "4"},
       [](PlanConfig& c, absl::string_view v) { c.micro_batch = IntegerOf(v); }},
      {"training.recompute",
       {std::string(Name(Recompute::kNone)), std::string(Name(Recompute::kSelective)),
        std::string(Name(Recompute::kFull))},
       [](PlanConfig& c, absl::string_view v) { c.recompute = *EnumFromName<Recompute>(v); }},
  };
}

std::vector<Candidate> DataParallelCandidates(const std::string& gpu, int64_t n,
                                              Framework framework) {
  const std::vector<SearchDimension> dims = DataParallelDimensions();
  std::vector<Candidate> out;
  // The product by an odometer over the dimensions' value indices, the last fastest.
  std::vector<size_t> at(dims.size(), 0);
  while (true) {
    Candidate c{gpu, n, PlanConfig{.prefetch = TraitsOf(framework).DefaultPrefetch()}, {}};
    for (size_t d = 0; d < dims.size(); ++d) {
      const std::string& v = dims[d].values[at[d]];
      dims[d].set(c.config, v);
      c.overrides.push_back({std::string(dims[d].key), v});
    }
    out.push_back(std::move(c));
    size_t d = dims.size();
    while (d > 0 && ++at[d - 1] == dims[d - 1].values.size()) at[--d] = 0;
    if (d == 0) return out;
  }
}

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

int64_t BatchUnit(const Candidate& c) {
  return c.config.micro_batch * Replicas(c) * (c.config.pp_chunks > 1 ? c.config.pp : 1);
}

int64_t MicroBatches(const Candidate& c, int64_t global_batch) {
  return global_batch / (c.config.micro_batch * Replicas(c));
}

std::optional<std::pair<int64_t, int64_t>> ScreenSizes(const Candidate& c) {
  const int64_t pp = c.config.pp;
  const int64_t m1 = std::max<int64_t>(pp, 2),
                m2 = std::max<int64_t>(c.config.pp_chunks > 1 ? 2 * pp : pp + 2, 4);
  if (MicroBatches(c, c.global_batch) <= m1 + m2) return std::nullopt;
  return std::pair<int64_t, int64_t>{m1, m2};
}

int64_t PerNode(int64_t n, int64_t cap) {
  for (int64_t g = std::min(n, cap); g >= 1; --g) {
    if (n % g == 0) return g;
  }
  return 1;
}

Bytes StaticFloor(const Scenario& s) {
  const Bytes per_layer = LayerActivationBytes(s.model, ScenarioShape(s), s.training.recompute,
                                               s.training.recompute_modules);
  return PersistentStates(s).total() + per_layer * s.model.layers + s.runtime.reserved;
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

}  // namespace sim::explore
