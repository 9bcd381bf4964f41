#include "sim/explore/sweep_run.h"

namespace sim::explore {

absl::Status AllFailed(const std::vector<ConfigResult>& results) {
  for (const auto& r : results) {
    if (r.status.ok()) return absl::OkStatus();
  }
  return results.empty() ? absl::InvalidArgumentError("nothing to run") : results.front().status;
}

absl::StatusOr<SweepOutcome> RunSweep(const config::ScenarioLoader& loader,
                                      const SweepRequest& request, const Progress& progress) {
  if (request.varies.empty()) return absl::InvalidArgumentError("give at least one --vary");
  SweepOutcome out;
  for (const Vary& v : request.varies) out.keys.push_back(v.key);
  if (auto size = ProductSize(request.varies); !size.ok()) return size.status();
  const std::vector<std::vector<config::Override>> product = Product(request.varies);
  out.total = product.size();
  out.slice = request.shard ? SliceOf(*request.shard, out.total) : Slice{0, out.total};
  out.labels_from = request.sets.size();
  out.jobs = request.jobs;
  std::vector<std::vector<config::Override>> configs;
  for (size_t i = out.slice.begin; i < out.slice.end; ++i) {
    std::vector<config::Override> c = request.sets;
    c.insert(c.end(), product[i].begin(), product[i].end());
    configs.push_back(std::move(c));
  }
  out.results = RunConfigs(loader, configs, request.jobs, progress);
  // A shard answers with its rows, failed ones included (each with its error), so that `merge`
  // can finish the sweep; a whole sweep in which nothing ran is the user's mistake (exit 2).
  if (!request.shard) {
    if (absl::Status st = AllFailed(out.results); !st.ok()) return st;
  }
  return out;
}

nlohmann::ordered_json SweepJson(const std::string& scenario, const SweepOutcome& outcome) {
  return SweepJson(scenario, outcome.keys, outcome.slice, outcome.total, outcome.results,
                   outcome.labels_from, outcome.jobs);
}

std::string SweepJsonText(const std::string& scenario, const SweepOutcome& outcome) {
  return SweepJsonText(scenario, outcome.keys, outcome.slice, outcome.total, outcome.results,
                       outcome.labels_from, outcome.jobs);
}

absl::StatusOr<CompareOutcome> RunCompare(const config::ScenarioLoader& loader,
                                          const CompareRequest& request, const Progress& progress) {
  auto base = loader.Load(request.sets);
  if (!base.ok()) return base.status();
  CompareOutcome out{*std::move(base), {}, {}};
  if (!request.ep.empty()) {
    auto ep = ExpertParallelStages(out.base, request.ep);
    if (!ep.ok()) return ep.status();
    out.stages = *std::move(ep);
  } else if (request.finetune.empty()) {
    out.stages = CompareStages(out.base);
  } else {
    auto ft = FinetuneStages(out.base, request.finetune);
    if (!ft.ok()) return ft.status();
    out.stages = *std::move(ft);
  }
  std::vector<std::vector<config::Override>> configs;
  for (const CompareStage& st : out.stages) {
    std::vector<config::Override> c = request.sets;
    c.insert(c.end(), st.overrides.begin(), st.overrides.end());
    configs.push_back(std::move(c));
  }
  out.results = RunConfigs(loader, configs, request.jobs, progress);
  if (absl::Status st = AllFailed(out.results); !st.ok()) return st;
  return out;
}

}  // namespace sim::explore
