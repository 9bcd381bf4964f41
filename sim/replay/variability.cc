#include "sim/replay/variability.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <thread>
#include <utility>

#include "sim/base/parallel.h"
#include "sim/workload/layer_ops.h"
#include "sim/workload/placement.h"
#include "sim/workload/policy/framework_traits.h"

namespace sim::replay {

namespace {

// SplitMix64 (Steele, Lea and Flood 2014, "Fast splittable pseudorandom number generators"):
// one stream per trial, from the seed and the trial's index alone.
class Stream {
 public:
  Stream(int64_t seed, int64_t trial)
      : state_(static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ULL ^
               (static_cast<uint64_t>(trial) + 1) * 0xD1B54A32D192ED03ULL) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1]: 53 random bits.
  double Uniform() { return (static_cast<double>(Next() >> 11) + 1.0) * 0x1.0p-53; }
  // Standard normal by Box and Muller (1958): one of the pair, so that each draw takes the same
  // two uniforms whatever came before.
  double Normal() {
    const double r = std::sqrt(-2.0 * std::log(Uniform()));
    return r * std::cos(2.0 * M_PI * Uniform());
  }

 private:
  uint64_t state_;
};

// A relative speed of mean 1 and coefficient of variation `cv`: normal (floored at 5 % of the
// calibrated speed, the loader's lowest), or log-normal with σ² = ln(1 + cv²) and μ = −σ²/2.
double SpreadSpeed(const VariabilitySpec& v, double cv, Stream& rng) {
  const double z = rng.Normal();
  if (cv == 0) return 1;
  if (v.distribution == SpeedDistribution::kNormal) return std::max(0.05, 1 + cv * z);
  const double var = std::log1p(cv * cv);
  return std::exp(std::sqrt(var) * z - var / 2);
}

}  // namespace

GpuSpeeds DrawSpeeds(const VariabilitySpec& v, int64_t gpus, int64_t gpus_per_node, int64_t trial,
                     int64_t nics_per_node) {
  GpuSpeeds out;
  out.gemm.assign(gpus, 1.0);
  out.memory.assign(gpus, 1.0);
  out.cause.assign(gpus, SlowCause::kSpread);
  out.link.assign(gpus, 1.0);
  if (!v.Any()) return out;
  Stream rng(v.seed, trial);
  const int64_t per_node = std::max<int64_t>(gpus_per_node, 1);
  bool slow_node = false;
  for (int64_t g = 0; g < gpus; ++g) {
    // Every GPU takes the same draws in the same order, whichever apply.
    if (g % per_node == 0) slow_node = rng.Uniform() <= v.slow_node_share;
    const double gemm = SpreadSpeed(v, v.gemm_cv, rng);
    const double memory = SpreadSpeed(v, v.memory_cv, rng);
    const double u = rng.Uniform();
    const double table =
        v.speeds.empty()
            ? 1.0
            : v.speeds[std::min(v.speeds.size() - 1, static_cast<size_t>(u * v.speeds.size()))];
    const bool slow_gpu = rng.Uniform() <= v.slow_gpu_share;
    double fixed = 1;
    if (slow_node && v.slow_node_speed < 1) {
      fixed = v.slow_node_speed;
      out.cause[g] = SlowCause::kSlowNode;
    }
    if (slow_gpu && v.slow_gpu_speed < fixed) {
      fixed = v.slow_gpu_speed;
      out.cause[g] = SlowCause::kSlowGpu;
    }
    out.gemm[g] = gemm * table * fixed;
    out.memory[g] = memory * table * fixed;
  }
  // The links after every GPU's draws, so that the GPUs' speeds do not depend on them: each
  // NIC of each node in turn, then each GPU at the slowest NIC of its rail.
  if (v.SlowLinks() && nics_per_node > 0) {
    const int64_t nodes = (gpus + per_node - 1) / per_node;
    std::vector<double> nic(static_cast<size_t>(nodes * nics_per_node), 1.0);
    for (double& speed : nic) {
      if (rng.Uniform() <= v.slow_link_share) speed = v.slow_link_speed;
    }
    for (int64_t g = 0; g < gpus; ++g) {
      const int64_t node = g / per_node, local = g % per_node;
      const int64_t first = local * nics_per_node / per_node;
      const int64_t last = std::max(first + 1, (local + 1) * nics_per_node / per_node);
      for (int64_t n = first; n < last; ++n) {
        out.link[g] = std::min(out.link[g], nic[node * nics_per_node + n]);
      }
    }
  }
  return out;
}

TrialReplayer::TrialReplayer(const Scenario& s, const ReplayResult& ideal)
    : s_(s), ideal_(ideal), stages_(static_cast<int32_t>(s.parallel.pp)) {
  const Placement place(s);
  const int64_t tp = s.parallel.tp, cp = s.parallel.cp, dp = s.dp(), pp = s.parallel.pp;
  // DP ranks in one lockstep group: all of them where parameters are gathered per layer; an
  // EP group's (its ep · etp GPUs span that many TP × CP blocks); else one.
  int64_t span = 1;
  if (TraitsOf(s.parallel.framework).FullyShards(s.parallel)) {
    span = dp;
  } else if (s.model.moe && s.parallel.ep > 1) {
    const int64_t block = tp * cp;
    span = std::min(dp, (s.parallel.ep * s.parallel.expert_tp() + block - 1) / block);
  }
  pipelines_ = (dp + span - 1) / span;
  const int64_t gpus = tp * cp * dp * pp;
  stage_of_.resize(gpus);
  pipeline_of_.resize(gpus);
  for (int64_t g = 0; g < gpus; ++g) {
    stage_of_[g] = static_cast<int32_t>((g / place.Stride(ParallelDim::kPp)) % pp);
    pipeline_of_[g] = ((g / place.Stride(ParallelDim::kDp)) % dp) / span;
  }
  // Each stage's busy time split by kernel kind: the ops' prices in the program replayed (a
  // folded program holds some of the micro-batches), scaled to the stage's busy time over the
  // whole step.
  const std::unique_ptr<cost::ComputeCostModel> model = ScenarioComputeModel(s);
  const cost::ComputeCostModel& compute = *model;
  gemm_s_.assign(stages_, 0);
  memory_s_.assign(stages_, 0);
  for (const Op& op : ideal.program.ops) {
    if (op.kind != OpKind::kCompute || op.stage < 0 || op.stage >= stages_) continue;
    if (op.op_class == OpClass::kGemm || op.op_class == OpClass::kAttention) {
      gemm_s_[op.stage] += compute.Time(op).seconds();
    } else if (op.op_class == OpClass::kMemoryBound) {
      memory_s_[op.stage] += compute.Time(op).seconds();
    }
  }
  for (int32_t st = 0; st < stages_ && st < static_cast<int32_t>(ideal.stages.size()); ++st) {
    const StageTimes& t = ideal.stages[st];
    const double busy = (t.compute + t.recompute + t.optimizer).seconds();
    const double priced = gemm_s_[st] + memory_s_[st];
    if (priced > 0) {
      gemm_s_[st] *= busy / priced;
      memory_s_[st] *= busy / priced;
    }
  }
  // Where links can be slow, each stage's communication busy time across nodes, collectives
  // and sends apart: the share of its collectives' stand-alone prices that crosses nodes, of
  // the stage's communication busy time over the whole step.
  if (!s.cluster.variability.SlowLinks()) return;
  net_collective_s_.assign(stages_, 0);
  net_send_s_.assign(stages_, 0);
  cost::CostModelCache models;
  auto comm = models.For(s);
  if (!comm.ok()) return;  // the trials' replays report it
  std::vector<double> all(stages_, 0);
  for (const Op& op : ideal.program.ops) {
    if (op.kind != OpKind::kCollective || op.stage < 0 || op.stage >= stages_) continue;
    const CollectiveSpec& c = ideal.program.CollectiveOf(op);
    const double t = (*comm)->Cost(c.kind, c.tensor, c.group, c.buckets).seconds();
    all[op.stage] += t;
    if (c.group.nodes <= 1) continue;
    (c.kind == CollectiveKind::kSendRecv ? net_send_s_ : net_collective_s_)[op.stage] += t;
  }
  for (int32_t st = 0; st < stages_ && st < static_cast<int32_t>(ideal.stages.size()); ++st) {
    if (all[st] <= 0) continue;
    const double scale = ideal.stages[st].comm.seconds() / all[st];
    net_collective_s_[st] *= scale;
    net_send_s_[st] *= scale;
  }
}

absl::StatusOr<TrialStep> TrialReplayer::Step(const GpuSpeeds& speeds, cost::CostModelCache& models,
                                              int64_t replayed) const {
  // Each lockstep group's slowdowns (the slowest member's, per kernel kind), and the member
  // that slows its stage's work most.
  const size_t groups = static_cast<size_t>(pipelines_) * stages_;
  std::vector<cost::StageSlowdown> slow(groups, cost::StageSlowdown{0, 0});
  std::vector<double> worst(groups, 0);
  std::vector<int64_t> worst_gpu(groups, -1);
  for (int64_t g = 0; g < gpus(); ++g) {
    const int32_t st = stage_of_[g];
    const size_t i = static_cast<size_t>(pipeline_of_[g]) * stages_ + st;
    const double gt = 1 / speeds.gemm[g], mt = 1 / speeds.memory[g];
    slow[i].gemm = std::max(slow[i].gemm, gt);
    slow[i].memory = std::max(slow[i].memory, mt);
    const double work = gemm_s_[st] + memory_s_[st];
    const double r = work > 0 ? (gemm_s_[st] * gt + memory_s_[st] * mt) / work : gt;
    if (worst_gpu[i] < 0 || r > worst[i]) {
      worst[i] = r;
      worst_gpu[i] = g;
    }
  }
  // Degraded links: a stage's collectives across nodes at the slowest link of all its GPUs
  // (its DP groups span every replica), each pipeline's sends at the slowest of its own GPUs'
  // links in the sending stage and its neighbours (a send goes either way).
  std::vector<cost::LinkSlowdown> link(groups);
  std::vector<int64_t> collective_gpu(stages_, -1), send_gpu(groups, -1);
  if (s_.cluster.variability.SlowLinks() && !speeds.link.empty()) {
    std::vector<double> stage_min(stages_, 1.0), own(groups, 1.0);
    std::vector<int64_t> own_gpu(groups, -1);
    for (int64_t g = 0; g < gpus(); ++g) {
      const int32_t st = stage_of_[g];
      const size_t i = static_cast<size_t>(pipeline_of_[g]) * stages_ + st;
      const double l = speeds.link[g];
      if (l < stage_min[st]) {
        stage_min[st] = l;
        collective_gpu[st] = g;
      }
      if (l < own[i]) {
        own[i] = l;
        own_gpu[i] = g;
      }
    }
    for (size_t i = 0; i < groups; ++i) {
      const int32_t st = static_cast<int32_t>(i % stages_);
      link[i].collective = stage_min[st];
      link[i].send = own[i];
      send_gpu[i] = own_gpu[i];
      for (const int32_t step : {-1, 1}) {
        if (st + step < 0 || st + step >= stages_) continue;
        const size_t n = i + step;
        if (own[n] >= link[i].send) continue;
        link[i].send = own[n];
        send_gpu[i] = own_gpu[n];
      }
    }
  }
  // The extra busy seconds of stage group i: its compute at its GPUs' speeds, its transfers
  // across nodes at its links'.
  auto compute_extra = [&](size_t i) {
    const int32_t st = static_cast<int32_t>(i % stages_);
    return gemm_s_[st] * (slow[i].gemm - 1) + memory_s_[st] * (slow[i].memory - 1);
  };
  auto link_extra = [&](size_t i) {
    const int32_t st = static_cast<int32_t>(i % stages_);
    return net_collective_s_[st] * (1 / link[i].collective - 1) +
           net_send_s_[st] * (1 / link[i].send - 1);
  };
  // Each pipeline's estimated step: fill and drain through every stage, then the steady state
  // at the slowest stage's pace, over the step's micro-batches.
  const double m = static_cast<double>(std::max<int64_t>(s_.micro_batches(), 1));
  std::vector<double> estimate(pipelines_, 0);
  for (int64_t q = 0; q < pipelines_; ++q) {
    double sum = 0, most = 0;
    for (int32_t st = 0; st < stages_; ++st) {
      const size_t i = static_cast<size_t>(q) * stages_ + st;
      const cost::StageSlowdown& d = slow[i];
      double t = gemm_s_[st] * d.gemm + memory_s_[st] * d.memory;
      if (!net_collective_s_.empty()) t += link_extra(i);
      sum += t;
      most = std::max(most, t);
    }
    estimate[q] = sum / m + (m - 1) / m * most;
  }
  // The pipelines the estimate ranks slowest (ties: the lower index), replayed exactly.
  std::vector<int64_t> order(pipelines_);
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = std::clamp<int64_t>(replayed, 1, pipelines_);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
    return estimate[a] != estimate[b] ? estimate[a] > estimate[b] : a < b;
  });
  TrialStep out;
  using Slowdowns = std::pair<std::vector<cost::StageSlowdown>, std::vector<cost::LinkSlowdown>>;
  std::map<Slowdowns, Duration> known;  // this trial's replays
  int64_t slowest = -1;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t q = order[j];
    Slowdowns stage{{slow.begin() + q * stages_, slow.begin() + (q + 1) * stages_},
                    {link.begin() + q * stages_, link.begin() + (q + 1) * stages_}};
    const bool compute_slowed =
        std::any_of(stage.first.begin(), stage.first.end(),
                    [](const cost::StageSlowdown& d) { return d.gemm != 1 || d.memory != 1; });
    const bool links_slowed =
        std::any_of(stage.second.begin(), stage.second.end(),
                    [](const cost::LinkSlowdown& l) { return l.collective != 1 || l.send != 1; });
    Duration step = ideal_.step;
    if (compute_slowed || links_slowed) {
      if (auto it = known.find(stage); it != known.end()) {
        step = it->second;
      } else {
        ReplayOptions options;
        if (compute_slowed) options.stage_slowdown = stage.first;
        if (links_slowed) options.stage_link = stage.second;
        auto r = Simulate(s_, options, models);
        if (!r.ok()) return r.status();
        step = r->step;
        known.emplace(std::move(stage), step);
        ++out.replays;
      }
    }
    if (slowest < 0 || step > out.step) {
      out.step = step;
      slowest = q;
    }
  }
  // The member of the slowest pipeline that slows its stage most.
  double most = -1;
  for (int32_t st = 0; st < stages_; ++st) {
    const size_t i = static_cast<size_t>(slowest) * stages_ + st;
    if (worst_gpu[i] >= 0 && worst[i] > most) {
      most = worst[i];
      out.pacing_gpu = worst_gpu[i];
      out.pacing_stage = st;
    }
  }
  out.cause = speeds.cause[out.pacing_gpu];
  // Slow links pace the trial where they add more busy time to the slowest pipeline than its
  // GPUs' speeds do: then the GPU behind the slowest link of the stage they slow most.
  double compute_sum = 0, link_sum = 0, link_most = 0;
  int64_t link_gpu = -1;
  int32_t link_stage = 0;
  for (int32_t st = 0; st < stages_ && !net_collective_s_.empty(); ++st) {
    const size_t i = static_cast<size_t>(slowest) * stages_ + st;
    compute_sum += compute_extra(i);
    const double extra = link_extra(i);
    link_sum += extra;
    if (extra > link_most) {
      link_most = extra;
      const bool by_collectives = net_collective_s_[st] * (1 / link[i].collective - 1) >=
                                  net_send_s_[st] * (1 / link[i].send - 1);
      link_gpu = by_collectives ? collective_gpu[st] : send_gpu[i];
      link_stage = st;
    }
  }
  if (link_sum > compute_sum && link_gpu >= 0) {
    out.pacing_gpu = link_gpu;
    out.pacing_stage = link_stage;
    out.cause = SlowCause::kSlowLink;
  }
  return out;
}

absl::StatusOr<StepDistribution> SimulateTrials(const Scenario& s, const ReplayResult& ideal,
                                                int64_t trials, int jobs) {
  const TrialReplayer replayer(s, ideal);
  const VariabilitySpec& v = s.cluster.variability;
  if (jobs <= 0) jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  jobs = static_cast<int>(std::min<int64_t>(jobs, trials));
  std::vector<absl::StatusOr<TrialStep>> steps(trials, absl::UnknownError("not run"));
  // One worker per thread, each with its own collective models; trial t's slot is t's.
  ParallelFor(static_cast<size_t>(jobs), jobs, [&](size_t w) {
    cost::CostModelCache models;
    for (int64_t t = static_cast<int64_t>(w); t < trials; t += jobs) {
      const GpuSpeeds speeds = DrawSpeeds(v, replayer.gpus(), s.cluster.node.gpus_per_node, t,
                                          s.cluster.node.nics_per_node);
      steps[t] = replayer.Step(speeds, models);
    }
  });
  StepDistribution d;
  d.trials = trials;
  d.ideal = ideal.step;
  d.paced_by_stage.assign(s.parallel.pp, 0);
  double sum = 0;
  for (const auto& t : steps) {
    if (!t.ok()) return t.status();
    d.steps.push_back(t->step);
    sum += t->step.seconds();
    d.replays += t->replays;
    if (t->step > ideal.step) {
      ++d.paced_by[static_cast<int>(t->cause)];
      ++d.paced_by_stage[t->pacing_stage];
    }
  }
  std::vector<Duration> sorted = d.steps;
  std::sort(sorted.begin(), sorted.end());
  auto rank = [&](double q) {
    const auto i = static_cast<size_t>(std::ceil(q * static_cast<double>(trials)));
    return sorted[std::clamp<size_t>(i, 1, sorted.size()) - 1];
  };
  d.p50 = rank(0.50);
  d.p90 = rank(0.90);
  d.p99 = rank(0.99);
  d.mean = Duration::FromSeconds(sum / static_cast<double>(trials));
  // Exactly zero when every trial ran at the plain step.
  const bool none_slower = sorted.back() == ideal.step && sorted.front() == ideal.step;
  d.slowdown = none_slower ? 0 : sum / static_cast<double>(trials) / ideal.step.seconds() - 1;
  if (none_slower) d.mean = ideal.step;
  return d;
}

}  // namespace sim::replay
