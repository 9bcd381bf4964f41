#pragma once
// The step as a distribution over per-GPU speeds (`cluster.variability`, `stepsim run --trials
// N`). Synchronous training runs at the pace of its slowest rank, so each trial draws every
// GPU's speed and replays the step at the pace of the ranks that set it:
//
//   - GPUs that meet in a collective every layer run in lockstep, each layer at the pace of the
//     slowest: a stage's TP × CP group, its EP group (the all-to-all of every MoE layer), and,
//     where parameters are gathered per layer (ZeRO-3, FSDP), the whole DP group. Such a group
//     is priced at its slowest member's GEMM and memory-bound speeds.
//   - A pipeline (one DP replica of every stage) runs its stages at their groups' paces: one
//     slow stage shifts the whole schedule's bubble, which the replay computes op by op
//     (ReplayOptions::stage_slowdown).
//   - DP replicas meet only at the gradient reduction, which waits for the slowest: the step is
//     the slowest pipeline's.
//   - A degraded network link (a NIC of one rail of one node at a share of its bandwidth)
//     paces every collective across nodes that one of its GPUs takes part in: NCCL splits a
//     call evenly over its channels, each a ring or tree as slow as its slowest link. A
//     stage's DP collectives span every replica, so one slow link among all the stage's GPUs
//     slows them in every pipeline; a pipeline's sends across nodes run at the slowest link of
//     the stage and its neighbours in that pipeline (ReplayOptions::stage_link).
//
// Replaying every pipeline of a 16,384-GPU cluster for every trial would cost thousands of
// replays; instead each pipeline's step is estimated from the ideal replay's per-stage GEMM and
// memory-bound busy time (fill and drain over every stage, the steady state at the slowest
// stage's pace), and the few pipelines the estimate ranks slowest are replayed exactly; the
// trial's step is the slowest of those. A trial whose speeds are all calibrated reuses the ideal
// replay: with no spread every percentile is the plain step, exactly.
//
// Draws are seeded by `cluster.variability.seed` and the trial's index only, so a trial's step
// does not depend on the thread count, and the percentiles are reproducible byte for byte.

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/replay/replay.h"
#include "sim/spec/scenario.h"

namespace sim::replay {

// Why a GPU runs below its calibrated speed.
enum class SlowCause : uint8_t { kSpread, kSlowGpu, kSlowNode, kSlowLink };
inline constexpr int kNumSlowCauses = 4;

// Every GPU's relative speeds (1 = calibrated) in one trial, indexed by global rank.
struct GpuSpeeds {
  std::vector<double> gemm, memory;
  std::vector<SlowCause> cause;  // the largest of its compute slowdowns' source
  // The share of their bandwidth its network links reach: the slowest of the NICs its rail
  // uses (GPU l of a node of n GPUs and c NICs uses NICs l·c/n up to (l + 1)·c/n, at least
  // one). 1 without NICs.
  std::vector<double> link;
};

// The draws of trial `trial` for a cluster of `gpus` GPUs, `gpus_per_node` to a node with
// `nics_per_node` network links (0: no link drawn, every one healthy).
GpuSpeeds DrawSpeeds(const VariabilitySpec& v, int64_t gpus, int64_t gpus_per_node, int64_t trial,
                     int64_t nics_per_node = 0);

// One trial's step and the GPU that paced it (the slowest of the slowest pipeline).
struct TrialStep {
  Duration step;
  int64_t pacing_gpu = 0;
  int32_t pacing_stage = 0;
  SlowCause cause = SlowCause::kSpread;
  int32_t replays = 0;  // exact replays this trial ran
};

// Replays trials of one scenario: built once from the scenario and its plain replay (the
// lockstep groups, each stage's GEMM and memory-bound busy time), then asked for the step at
// any speeds. Step is const and thread-safe given a CostModelCache per thread.
class TrialReplayer {
 public:
  TrialReplayer(const Scenario& s, const ReplayResult& ideal);
  // The step at `speeds`, replaying exactly the `replayed` pipelines the estimate ranks slowest
  // (all of them when at least pipelines()).
  static constexpr int64_t kReplayed = 3;
  absl::StatusOr<TrialStep> Step(const GpuSpeeds& speeds, cost::CostModelCache& models,
                                 int64_t replayed = kReplayed) const;
  int64_t gpus() const { return static_cast<int64_t>(stage_of_.size()); }
  int64_t pipelines() const { return pipelines_; }

 private:
  const Scenario& s_;
  const ReplayResult& ideal_;
  int32_t stages_ = 1;
  int64_t pipelines_ = 1;
  std::vector<int32_t> stage_of_;          // per GPU
  std::vector<int64_t> pipeline_of_;       // per GPU
  std::vector<double> gemm_s_, memory_s_;  // per stage: busy seconds of each kind in the step
  // Per stage, where links can be slow: busy seconds of its collectives and of its sends that
  // cross nodes (empty otherwise).
  std::vector<double> net_collective_s_, net_send_s_;
};

struct StepDistribution {
  int64_t trials = 0;
  Duration ideal;                                  // the plain replay's step
  std::vector<Duration> steps;                     // one per trial, in trial order
  Duration p50, p90, p99, mean;                    // nearest-rank percentiles
  double slowdown = 0;                             // mean / ideal − 1
  std::array<int64_t, kNumSlowCauses> paced_by{};  // trials by their pacing GPU's cause
  std::vector<int64_t> paced_by_stage;             // trials by their pacing GPU's stage
  int64_t replays = 0;                             // exact replays over all trials
};

// `trials` trials of `s` on up to `jobs` threads (0: all cores).
absl::StatusOr<StepDistribution> SimulateTrials(const Scenario& s, const ReplayResult& ideal,
                                                int64_t trials, int jobs = 0);

}  // namespace sim::replay
