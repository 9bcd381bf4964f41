#include "sim/validate/validate.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/parallel.h"
#include "sim/base/stop_request.h"
#include "sim/cost/compute_cost.h"
#include "sim/report/run_summary.h"
#include "sim/report/table.h"
#include "sim/workload/params.h"
#include "sim/workload/static_ledger.h"

namespace sim::validate {

namespace {

constexpr char kReplayedBesideEstimator[] = "replayed_gpu_memory";

struct Shape {
  double B, s, L, h, V, N, gpus, peak, step;
};

Shape ShapeOf(const ValidationCase& c, const report::RunSummary& r) {
  const Scenario& sc = c.scenario;
  return Shape{static_cast<double>(sc.training.global_batch),
               static_cast<double>(sc.training.seq_len),
               static_cast<double>(sc.model.layers),
               static_cast<double>(sc.model.hidden),
               static_cast<double>(sc.model.vocab),
               static_cast<double>(CountParameters(sc.model).total),
               static_cast<double>(sc.cluster.gpus()),
               cost::PeakRate(sc.cluster.gpu, sc.training.precision).per_second(),
               r.step.seconds()};
}

// FLOPs per step in the source's convention, for MFU (hardware = false) or HFU (true).
std::optional<double> ConventionFlops(const ValidationCase& c, const Shape& x, bool hardware) {
  const bool checkpointing = c.scenario.training.recompute != Recompute::kNone;
  switch (c.flops) {
    case FlopConvention::kMosaicml: {
      const double per_seq = 2 * x.N * x.s + 4 * x.L * x.h * x.s * x.s;
      return (hardware && checkpointing ? 4.0 : 3.0) * per_seq * x.B;
    }
    case FlopConvention::kTorchtitan: {
      if (hardware) return std::nullopt;
      const double per_token = 6 * (x.N - x.V * x.h) + 12 * x.L * x.h * x.s;
      return per_token * x.B * x.s;
    }
    case FlopConvention::kMegatronHw:
      return 96 * x.B * x.s * x.L * x.h * x.h * (1 + x.s / (6 * x.h) + x.V / (16 * x.L * x.h));
    case FlopConvention::kKorthikanti: {
      const bool full = c.scenario.training.recompute == Recompute::kFull;
      if (hardware && full) {
        return 96 * x.B * x.s * x.L * x.h * x.h * (1 + x.s / (6 * x.h) + x.V / (16 * x.L * x.h));
      }
      return 72 * x.B * x.s * x.L * x.h * x.h * (1 + x.s / (6 * x.h) + x.V / (12 * x.h * x.L));
    }
    case FlopConvention::kStepsim:
      return std::nullopt;  // use the replay's own counts
  }
  return std::nullopt;
}

}  // namespace

std::optional<double> Predict(const std::string& metric, const ValidationCase& c,
                              const report::RunSummary& r) {
  const Shape x = ShapeOf(c, r);
  if (metric == "step_s") return x.step;
  if (metric == "tokens_per_s_per_gpu") return x.B * x.s / x.step / x.gpus;
  if (metric == "peak_memory") {
    // torch's counters (max_memory_allocated / _reserved) exclude what the process holds
    // outside the caching allocator (the runtime reserve): so does the prediction.
    const Bytes ours = c.memory == MemoryConvention::kReserved ? r.reserved_peak : r.peak;
    return static_cast<double>((ours - r.runtime_reserved).count());
  }
  if (metric == "mfu" || metric == "hfu") {
    const bool hw = metric == "hfu";
    if (c.flops == FlopConvention::kStepsim) {
      const double per_rank = hw ? r.hardware_flops_per_gpu.count() : r.model_flops_per_gpu.count();
      return per_rank / (x.step * x.peak);
    }
    auto flops = ConventionFlops(c, x, hw);
    if (!flops) return std::nullopt;
    return *flops / (x.step * x.gpus * x.peak);
  }
  return std::nullopt;
}

std::vector<CaseResult> RunCases(const std::vector<ValidationCase>& cases, int jobs) {
  std::vector<CaseResult> out(cases.size());
  ParallelFor(cases.size(), jobs, [&](size_t i) {
    const ValidationCase& c = cases[i];
    CaseResult& res = out[i];
    res.id = c.id;
    res.source = c.source;
    res.group = std::filesystem::path(c.file).stem().string();
    if (StopRequested()) {  // sim/base/stop_request.h: results to be discarded
      res.skipped = "interrupted";
      return;
    }
    if (c.skip) {
      res.skipped = *c.skip;
      return;
    }
    if (c.deepspeed_estimator) {
      const DeepSpeedEstimate e = EstimateDeepSpeed(*c.deepspeed_estimator);
      for (const auto& [metric, measured] : c.measured) {
        const double predicted =
            static_cast<double>((metric == "gpu_memory" ? e.gpu : e.cpu).count());
        res.metrics.push_back(
            {metric, measured, predicted, 100.0 * (predicted - measured) / measured});
      }
      if (c.replay_beside_estimator) {
        // The replayed GPU peak of the same configuration, beside the estimator's model states
        // (the estimator counts no activations, buffers or transients).
        if (auto r = replay::Simulate(c.scenario, {}); r.ok()) {
          const report::RunSummary run = report::Summarize(c.scenario, *r);
          const double measured = static_cast<double>(e.gpu.count());
          const double replayed = static_cast<double>((run.peak - run.runtime_reserved).count());
          res.metrics.push_back({kReplayedBesideEstimator, measured, replayed,
                                 100.0 * (replayed - measured) / measured});
        } else {
          res.skipped = std::string(r.status().message());
        }
      }
      return;
    }
    auto r = replay::Simulate(c.scenario, {});
    if (!r.ok()) {
      res.skipped = std::string(r.status().message());
      return;
    }
    const report::RunSummary summary = report::Summarize(c.scenario, *r);
    if (!summary.gpu_fits) {
      res.not_fitting = absl::StrFormat(
          "reserved peak %.2f GiB of %.2f GiB usable per GPU%s", summary.reserved_peak.gib(),
          c.scenario.cluster.gpu.Usable().gib(),
          summary.first_overflow ? ", first exceeded at " + summary.first_overflow->op : "");
    } else if (!summary.host_fits) {
      res.not_fitting = absl::StrFormat("host memory %.0f GiB per node of the node's %.0f GiB",
                                        summary.host_peak.gib(), summary.host_capacity.gib());
    }
    for (const auto& [metric, measured] : c.measured) {
      auto predicted = Predict(metric, c, summary);
      if (!predicted) continue;
      res.metrics.push_back(
          {metric, measured, *predicted, 100.0 * (*predicted - measured) / measured});
    }
  });
  return out;
}

namespace {

// metric -> (sum of |error|, count), for the cases that ran.
std::map<std::string, std::pair<double, int>> Mape(const std::vector<CaseResult>& results,
                                                   const std::string& group) {
  std::map<std::string, std::pair<double, int>> m;
  for (const auto& r : results) {
    if (!group.empty() && r.group != group) continue;
    for (const auto& x : r.metrics) {
      // The replayed peak beside DeepSpeed's estimator compares two models, not a prediction
      // with a measurement: listed per case, never averaged into an error.
      if (x.metric == kReplayedBesideEstimator) continue;
      m[x.metric].first += std::abs(x.error_pct);
      m[x.metric].second++;
    }
  }
  return m;
}

std::vector<std::string> Groups(const std::vector<CaseResult>& results) {
  std::vector<std::string> g;
  for (const auto& r : results) {
    if (std::find(g.begin(), g.end(), r.group) == g.end()) g.push_back(r.group);
  }
  return g;
}

}  // namespace

std::map<std::string, double> MapeByMetric(const std::vector<CaseResult>& results) {
  std::map<std::string, double> out;
  for (const auto& [metric, acc] : Mape(results, "")) out[metric] = acc.first / acc.second;
  return out;
}

nlohmann::ordered_json ValidationJson(const std::vector<CaseResult>& results) {
  nlohmann::ordered_json j;
  j["schema_version"] = 1;
  j["cases"] = nlohmann::ordered_json::array();
  j["skipped"] = nlohmann::ordered_json::array();
  for (const auto& r : results) {
    if (r.skipped) {
      j["skipped"].push_back({{"id", r.id}, {"reason", *r.skipped}});
      continue;
    }
    for (const auto& m : r.metrics) {
      j["cases"].push_back({{"id", r.id},
                            {"source", r.source},
                            {"metric", m.metric},
                            {"measured", m.measured},
                            {"predicted", m.predicted},
                            {"error_pct", m.error_pct}});
    }
  }
  j["not_fitting"] = nlohmann::ordered_json::array();
  for (const auto& r : results) {
    if (r.not_fitting) j["not_fitting"].push_back({{"id", r.id}, {"reason", *r.not_fitting}});
  }
  j["mape"] = nlohmann::ordered_json::object();
  for (const auto& [metric, acc] : Mape(results, "")) j["mape"][metric] = acc.first / acc.second;
  j["mape_by_source"] = nlohmann::ordered_json::object();
  for (const std::string& g : Groups(results)) {
    nlohmann::ordered_json per;
    for (const auto& [metric, acc] : Mape(results, g)) per[metric] = acc.first / acc.second;
    if (!per.empty()) j["mape_by_source"][g] = per;
  }
  return j;
}

std::string ValidationText(const std::vector<CaseResult>& results) {
  report::Table t({"case", "metric", "measured", "predicted", "error"});
  size_t ran = 0, skipped = 0;
  for (const auto& r : results) {
    if (r.skipped) {
      ++skipped;
      continue;
    }
    ++ran;
    for (const auto& m : r.metrics) {
      const bool bytes = m.metric.find("memory") != std::string::npos;
      auto fmt = [&](double v) {
        return bytes ? absl::StrFormat("%.2f GiB", v / 1073741824.0) : absl::StrFormat("%.4g", v);
      };
      t.AddRow({r.id, m.metric, fmt(m.measured), fmt(m.predicted),
                absl::StrFormat("%+.1f%%", m.error_pct)});
    }
  }
  std::string out = t.Render(0);
  absl::StrAppendFormat(&out, "\n%d cases ran, %d skipped.\n\nMean absolute percentage error\n",
                        ran, skipped);
  report::Table mape({"source", "metric", "cases", "MAPE"});
  for (const auto& [metric, acc] : Mape(results, "")) {
    mape.AddRow({"all", metric, absl::StrCat(acc.second),
                 absl::StrFormat("%.1f%%", acc.first / acc.second)});
  }
  for (const std::string& g : Groups(results)) {
    for (const auto& [metric, acc] : Mape(results, g)) {
      mape.AddRow(
          {g, metric, absl::StrCat(acc.second), absl::StrFormat("%.1f%%", acc.first / acc.second)});
    }
  }
  absl::StrAppend(&out, mape.Render(0));
  const bool any_not_fitting = std::any_of(results.begin(), results.end(),
                                           [](const CaseResult& r) { return r.not_fitting; });
  if (any_not_fitting) {
    absl::StrAppend(&out,
                    "\nReplayed as not fitting, though the runs were measured (a memory error; "
                    "their other metrics are compared above all the same):\n");
    for (const auto& r : results) {
      if (r.not_fitting) absl::StrAppend(&out, "  ", r.id, ": ", *r.not_fitting, "\n");
    }
  }
  if (skipped > 0) {
    absl::StrAppend(&out, "\nSkipped (not dropped):\n");
    for (const auto& r : results) {
      if (r.skipped) absl::StrAppend(&out, "  ", r.id, ": ", *r.skipped, "\n");
    }
  }
  return out;
}

}  // namespace sim::validate
