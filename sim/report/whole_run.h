#pragma once
// The whole training run around one replayed step (a scenario's `run:`, docs/model.md "The
// whole run"): how many steps the token budget takes, the interruptions the cluster suffers and
// what each costs (detection, restart, reloading the last checkpoint, the work since it), the
// checkpoints (bytes from the model states, written to the cluster's storage, synchronously or
// not, at the user's interval or Young/Daly's), the effective training time ratio (ETTR) and
// days, the energy of the GPUs by what they do over the step, the hosts and the facility, and
// the cost rented or owned.
//
// ETTR, first order (Daly 2006, "A higher order estimate of the optimum checkpoint interval for
// restart dumps"): with interruptions at rate λ per hour of wall time, a restart of R, saves that
// stall the step by δ every τ of training, the work lost per interruption is on average τ / 2,
// so that
//     ETTR = (1 − λ (R + τ / 2)) / (1 + δ / τ),
// and τ's optimum is Young's sqrt(2 δ / λ) (Young 1974). MonteCarloEttr checks it by drawing the
// interruptions of the run (Poisson, seeded) and replaying saves, losses and restarts.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/spec/scenario.h"

namespace sim::report {

struct RunSummary;

struct WholeRun {
  double tokens = 0;
  bool tokens_default = false;  // 20 per parameter: the scenario named none
  double steps = 0;
  double step_s = 0;
  double productive_days = 0;  // steps x step, no failure, no checkpoint
  int64_t gpus = 0, nodes = 0;

  // Interruptions per day of wall time, by cause ("gpu", "hbm", "network", "host", "software",
  // "planned"), and their sum.
  std::vector<std::pair<std::string, double>> interruptions_by_cause;
  double interruptions_per_day = 0;
  double mtbf_h = 0;  // of the whole job

  // Checkpoints.
  double checkpoint_bytes = 0;  // the whole model's states saved once (weights + optimizer)
  double save_s = 0;            // the write to storage
  double stall_s = 0;           // the step's stall per save (the copy to host when async)
  double reload_s = 0;          // reading it back after an interruption
  double interval_s = 0;        // training time between saves
  bool interval_optimal = false;
  double restart_s = 0;  // detection + restart + reload, per interruption

  double ettr = 0;
  double effective_days = 0;
  double checkpoint_share = 0;  // of wall time: stalls for saves
  double failure_share = 0;     // of wall time: restarts and lost work

  // Energy: average power per GPU over the step, host power per node, energy per step at the
  // facility (PUE included) and over the run (wall time, failures included).
  double gpu_watts = 0, host_watts = 0, pue = 1;
  double step_kwh = 0;
  double energy_mwh = 0;
  double tokens_per_joule = 0;
  std::optional<double> tco2e;

  // Cost: rented (per GPU-hour over the wall time) or owned (write-off over the wall time plus
  // electricity); none without a price.
  std::optional<double> cost_usd;
  std::string cost_basis;
  double cost_compute_usd = 0;   // the productive share
  double cost_failures_usd = 0;  // restarts, lost work and checkpoint stalls
  double cost_energy_usd = 0;    // owned: electricity (rented: in the price)

  // The Monte Carlo check (MonteCarloEttr): mean ETTR and its 10th and 90th percentiles.
  int64_t trials = 0;
  uint64_t seed = 0;
  double ettr_mc = 0, ettr_mc_p10 = 0, ettr_mc_p90 = 0;
};

// The analytic whole run of a scenario whose step the summary holds.
WholeRun PriceWholeRun(const Scenario& s, const RunSummary& r);

// Fills the Monte Carlo fields: `trials` runs of the whole budget, each drawing its
// interruptions from exponential gaps (a 64-bit Mersenne Twister seeded with `seed`, inverse
// CDF: the same draws on every platform), saving every interval of training, losing the work
// since the last completed save and the restart at each interruption.
void MonteCarloEttr(WholeRun& w, int64_t trials, uint64_t seed);

}  // namespace sim::report
