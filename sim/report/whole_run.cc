#include "sim/report/whole_run.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_format.h"
#include "sim/report/run_summary.h"
#include "sim/workload/params.h"
#include "sim/workload/static_ledger.h"

namespace sim::report {

namespace {

// Tokens per parameter when the scenario names no budget: Hoffmann et al. 2022 (Chinchilla).
constexpr double kTokensPerParameter = 20;

// The ETTR of an interval τ (hours of training between saves), first order (whole_run.h).
double Ettr(double lambda_per_h, double restart_h, double stall_h, double tau_h) {
  const double lost = lambda_per_h * (restart_h + tau_h / 2);
  return std::max(0.0, 1.0 - lost) / (1.0 + stall_h / tau_h);
}

}  // namespace

WholeRun PriceWholeRun(const Scenario& s, const RunSummary& r) {
  const RunSpec& spec = s.run;
  WholeRun w;
  const ParameterCount params = CountParameters(s.model);
  w.tokens_default = !spec.tokens.has_value();
  w.tokens = spec.tokens.value_or(kTokensPerParameter * static_cast<double>(params.total));
  const double batch_tokens =
      static_cast<double>(s.training.global_batch) * static_cast<double>(s.training.seq_len);
  w.steps = std::ceil(w.tokens / batch_tokens);
  w.step_s = r.step.seconds();
  w.productive_days = w.steps * w.step_s / 86400.0;
  w.gpus = r.gpus;
  w.nodes = r.nodes;

  // ---- interruptions ----
  const RunSpec::Failures& f = spec.failures;
  const double gpus = static_cast<double>(r.gpus), nodes = static_cast<double>(r.nodes);
  w.interruptions_by_cause = {
      {"gpu", f.gpu * gpus * 24},           {"hbm", f.hbm * gpus * 24},
      {"network", f.network * gpus * 24},   {"host", f.host * gpus * 24},
      {"software", f.software * gpus * 24}, {"planned", f.planned_per_node_hour * nodes * 24}};
  for (const auto& [cause, per_day] : w.interruptions_by_cause) w.interruptions_per_day += per_day;
  const double lambda = w.interruptions_per_day / 24.0;  // per hour
  w.mtbf_h = lambda > 0 ? 1.0 / lambda : 0.0;

  // ---- checkpoints ----
  // The model's states saved once: the weights in their dtype and the optimizer's (fp32
  // master, moments), whatever the sharding: a distributed checkpoint (torch.distributed
  // .checkpoint, Megatron's dist_checkpointing) writes each shard once, spread over the ranks.
  const BytesPerParam bpp =
      StateBytesPerParam(s.parallel.framework, s.training.optimizer, s.training.precision);
  w.checkpoint_bytes = static_cast<double>(params.total) *
                       static_cast<double>(bpp.weights.bytes_per_param + bpp.optimizer_state());
  const double per_node_s = w.checkpoint_bytes / nodes / spec.storage_node.bytes_per_s();
  const double aggregate_s = w.checkpoint_bytes / spec.storage_aggregate.bytes_per_s();
  w.save_s = std::max(per_node_s, aggregate_s);
  w.reload_s = w.save_s;
  // Async: the step stalls for the copy of each GPU's share to host memory over its PCIe link
  // (Gen4 x16 where the node type has no host entry).
  const Bandwidth pcie =
      s.cluster.node.host ? s.cluster.node.host->PcieLink() : HostSpec{}.PcieLink();
  w.stall_s = spec.checkpoint_async ? w.checkpoint_bytes / gpus / pcie.bytes_per_s() : w.save_s;
  w.restart_s = spec.detect.seconds() + spec.restart.seconds() + w.reload_s;

  const double restart_h = w.restart_s / 3600.0, stall_h = w.stall_s / 3600.0;
  w.interval_optimal = !spec.checkpoint_interval.has_value();
  if (spec.checkpoint_interval) {
    w.interval_s = spec.checkpoint_interval->seconds();
  } else {
    // Young's optimum, no shorter than one step and no longer than the run.
    const double young_h = lambda > 0 ? std::sqrt(2.0 * stall_h / lambda) : w.productive_days * 24;
    w.interval_s =
        std::clamp(young_h * 3600.0, w.step_s, std::max(w.step_s, w.productive_days * 86400.0));
  }
  const double tau_h = w.interval_s / 3600.0;
  w.ettr = Ettr(lambda, restart_h, stall_h, tau_h);
  w.effective_days = w.ettr > 0 ? w.productive_days / w.ettr : 0.0;
  if (w.ettr > 0) {
    w.checkpoint_share = (stall_h / tau_h) / (1.0 + stall_h / tau_h);
    w.failure_share = 1.0 - w.ettr - w.checkpoint_share;
  }

  // ---- energy ----
  // Each GPU draws its power limit while computing (forward, backward, recompute, optimizer),
  // comm_share of it while only communicating, idle_share of it otherwise (the bubble, waits),
  // averaged over the pacing stage's step.
  const GpuSpec& gpu = s.cluster.gpu;
  const double limit_w = gpu.power_limit_watts.value_or(gpu.tdp_watts.value_or(0.0));
  const replay::StageTimes& t = r.times;
  const double step = std::max(w.step_s, 1e-30);
  const double busy =
      std::min(step, (t.compute + t.recompute + t.optimizer + t.overlap_stretch).seconds());
  const double comm = std::min(step - busy, t.exposed_comm.seconds());
  const double idle = std::max(0.0, step - busy - comm);
  w.gpu_watts = limit_w * (busy + spec.comm_share * comm + spec.idle_share * idle) / step;
  w.host_watts = spec.host_watts.value_or(0.4 * limit_w * static_cast<double>(r.gpus_per_node));
  w.pue = spec.pue;
  const double it_watts = w.gpu_watts * gpus + w.host_watts * nodes;
  w.step_kwh = it_watts * w.pue * w.step_s / 3.6e6;
  // Over the wall time: restarts and lost work drawn at the step's average power.
  const double wall_s = w.effective_days * 86400.0;
  w.energy_mwh = it_watts * w.pue * wall_s / 3.6e9;
  w.tokens_per_joule = w.energy_mwh > 0 ? w.tokens / (w.energy_mwh * 3.6e9) : 0.0;
  if (spec.grid_g_per_kwh) w.tco2e = w.energy_mwh * 1000.0 * *spec.grid_g_per_kwh / 1e6;

  // ---- cost ----
  const double gpu_hours = gpus * wall_s / 3600.0;
  const double productive = w.effective_days > 0 ? w.productive_days / w.effective_days : 0.0;
  if (spec.capex_per_gpu_usd) {
    const double capex = *spec.capex_per_gpu_usd * gpus * (w.effective_days / (spec.years * 365.0));
    w.cost_energy_usd = w.energy_mwh * 1000.0 * spec.electricity_usd_per_kwh;
    w.cost_usd = capex + w.cost_energy_usd;
    w.cost_compute_usd = capex * productive;
    w.cost_failures_usd = capex * (1.0 - productive);
    w.cost_basis =
        absl::StrFormat("owned: $%.0f per GPU written off over %g years, electricity $%.3f/kWh",
                        *spec.capex_per_gpu_usd, spec.years, spec.electricity_usd_per_kwh);
  } else if (const auto price = spec.gpu_hour_usd ? spec.gpu_hour_usd : gpu.price_per_hour_usd) {
    w.cost_usd = gpu_hours * *price;
    w.cost_compute_usd = *w.cost_usd * productive;
    w.cost_failures_usd = *w.cost_usd - w.cost_compute_usd;
    w.cost_basis = absl::StrFormat("rented at $%.2f per GPU-hour%s", *price,
                                   spec.gpu_hour_usd ? "" : " (the GPU catalog's)");
  } else {
    w.cost_basis = "no price: give run.cost.gpu_hour or run.cost.capex_per_gpu";
  }
  return w;
}

void MonteCarloEttr(WholeRun& w, int64_t trials, uint64_t seed) {
  w.trials = trials;
  w.seed = seed;
  const double work = w.steps * w.step_s;  // seconds of training the budget needs
  const double lambda = w.interruptions_per_day / 86400.0;
  if (work <= 0 || trials <= 0) return;
  std::mt19937_64 rng(seed);
  // Exponential gaps by the inverse CDF of a 53-bit uniform in (0, 1].
  auto gap = [&] {
    const double u = (static_cast<double>(rng() >> 11) + 1.0) * 0x1p-53;
    return lambda > 0 ? -std::log(u) / lambda : 1e300;
  };
  std::vector<double> ettr;
  ettr.reserve(static_cast<size_t>(trials));
  for (int64_t k = 0; k < trials; ++k) {
    double wall = 0, saved = 0;  // wall seconds; training seconds safely checkpointed
    double next_failure = gap();
    const double segment = w.interval_s + w.stall_s;  // an interval of training and its save
    while (saved < work) {
      // Without an interruption the rest takes its training and a save after each whole
      // interval but the last.
      const double rest = work - saved;
      const double finish = rest + (std::ceil(rest / w.interval_s) - 1) * w.stall_s;
      if (wall + finish <= next_failure) {
        wall += finish;
        break;
      }
      // The segments saved before the interruption; the one it falls in is lost.
      const double n = std::floor((next_failure - wall) / segment);
      saved += n * w.interval_s;
      // The restart; an interruption during it starts it again.
      wall = next_failure + w.restart_s;
      next_failure += gap();
      while (next_failure < wall) {
        wall = next_failure + w.restart_s;
        next_failure += gap();
      }
    }
    ettr.push_back(work / wall);
  }
  std::sort(ettr.begin(), ettr.end());
  double sum = 0;
  for (double e : ettr) sum += e;
  w.ettr_mc = sum / static_cast<double>(ettr.size());
  w.ettr_mc_p10 = ettr[static_cast<size_t>(0.1 * static_cast<double>(ettr.size() - 1))];
  w.ettr_mc_p90 = ettr[static_cast<size_t>(0.9 * static_cast<double>(ettr.size() - 1))];
}

}  // namespace sim::report
