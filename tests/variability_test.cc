// The step as a distribution over per-GPU speeds (sim/replay/variability.h): the draws, the
// collapse to the plain step without spread, and hand-worked slow GPUs in a data-parallel group
// and in a pipeline stage.
#include "sim/replay/variability.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "sim/config/catalog.h"
#include "sim/cost/collective_cost.h"
#include "sim/replay/replay.h"
#include "sim/workload/layer_ops.h"
#include "sim/workload/lowering.h"

namespace sim {
namespace {

// A GPT layer stack on DGX A100 GPUs with a tiny vocabulary (equal pipeline stages).
constexpr const char* kScenario = R"(schema_version: 1
name: variability
model:
  name: gpt-stack
  family: gpt
  layers: 16
  hidden: 4096
  heads: 32
  ffn_hidden: 16384
  vocab: 128
  mlp: gelu
  norm: layernorm
  position: rope
  tied_embeddings: true
  bias: false
  dropout: 0
cluster: {node: dgx-a100-80gb, nodes: 1, gpus_per_node: GPUS}
training: {seq_len: 4096, micro_batch: 1, global_batch: GLOBAL, recompute: none, attention: flash}
parallel: {framework: FRAMEWORK, zero: ZERO, tp: TP, pp: PP, pp_schedule: 1f1b}
)";

Scenario Make(int64_t gpus, int64_t tp, int64_t pp, int64_t m,
              absl::string_view framework = "megatron", int zero = 0) {
  const int64_t dp = gpus / (tp * pp);
  const std::string text = absl::StrReplaceAll(kScenario, {{"GPUS", absl::StrCat(gpus)},
                                                           {"GLOBAL", absl::StrCat(m * dp)},
                                                           {"FRAMEWORK", framework},
                                                           {"ZERO", absl::StrCat(zero)},
                                                           {"TP", absl::StrCat(tp)},
                                                           {"PP", absl::StrCat(pp)}});
  auto loader = config::ScenarioLoader::FromText(config::DataRoot{STEPSIM_SOURCE_DIR}, text,
                                                 "variability_test");
  REQUIRE(loader.ok());
  auto s = loader->Load({});
  INFO(s.status().message());
  REQUIRE(s.ok());
  return *s;
}

replay::ReplayResult Ideal(const Scenario& s) {
  auto r = replay::Simulate(s, {});
  INFO(r.status().message());
  REQUIRE(r.ok());
  return *std::move(r);
}

// Every GPU at its calibrated speed but one, at `speed`.
replay::GpuSpeeds OneSlow(int64_t gpus, int64_t slow, double speed) {
  replay::GpuSpeeds v = replay::DrawSpeeds(VariabilitySpec{}, gpus, 8, 0);
  v.gemm[slow] = v.memory[slow] = speed;
  v.cause[slow] = replay::SlowCause::kSlowGpu;
  return v;
}

TEST_CASE("with no spread every trial is the plain step, exactly", "[variability]") {
  const Scenario s = Make(8, 2, 2, 4);
  const replay::ReplayResult ideal = Ideal(s);
  auto d = replay::SimulateTrials(s, ideal, 25);
  REQUIRE(d.ok());
  CHECK(d->p50 == ideal.step);
  CHECK(d->p90 == ideal.step);
  CHECK(d->p99 == ideal.step);
  CHECK(d->mean == ideal.step);
  CHECK(d->slowdown == 0);
  CHECK(d->replays == 0);
  // A spread of zero is no spread.
  Scenario zero = s;
  zero.cluster.variability.gemm_cv = 0;
  zero.cluster.variability.slow_gpu_share = 0.5;  // at speed 1: not slow
  CHECK_FALSE(zero.cluster.variability.Any());
}

TEST_CASE("draws: reproducible per trial, with the moments and shares asked", "[variability]") {
  VariabilitySpec v;
  v.gemm_cv = 0.05;
  v.memory_cv = 0.02;
  v.slow_node_share = 0.1;
  v.slow_node_speed = 0.5;
  const int64_t gpus = 80000;
  const replay::GpuSpeeds a = replay::DrawSpeeds(v, gpus, 8, 3);
  const replay::GpuSpeeds b = replay::DrawSpeeds(v, gpus, 8, 3);
  CHECK(a.gemm == b.gemm);
  CHECK(a.memory == b.memory);
  CHECK(replay::DrawSpeeds(v, gpus, 8, 4).gemm != a.gemm);
  // Over the GPUs of nodes at full speed: mean 1, the coefficient of variation asked (the
  // standard error of a mean over ~72,000 draws of cv 0.05 is 0.0002).
  double n = 0, sum = 0, sq = 0, slow = 0;
  for (int64_t g = 0; g < gpus; g += 8) {
    const bool node_slow = a.cause[g] == replay::SlowCause::kSlowNode;
    for (int64_t i = g; i < g + 8; ++i) {
      // A slow node's GPUs are all slow, each at its own spread times the node's speed.
      CHECK((a.cause[i] == replay::SlowCause::kSlowNode) == node_slow);
      if (node_slow) continue;
      n += 1;
      sum += a.gemm[i];
      sq += a.gemm[i] * a.gemm[i];
    }
    slow += node_slow;
  }
  const double mean = sum / n;
  CHECK(mean == Approx(1.0).margin(0.001));
  CHECK(std::sqrt(sq / n - mean * mean) / mean == Approx(0.05).epsilon(0.03));
  CHECK(slow / (gpus / 8) == Approx(0.1).margin(0.01));  // 10,000 nodes: σ = 0.003
  // Normal draws: the same moments.
  v.distribution = SpeedDistribution::kNormal;
  v.slow_node_share = 0;
  const replay::GpuSpeeds c = replay::DrawSpeeds(v, gpus, 8, 3);
  sum = sq = 0;
  for (double x : c.memory) {
    sum += x;
    sq += x * x;
  }
  CHECK(sum / gpus == Approx(1.0).margin(0.001));
  CHECK(std::sqrt(sq / gpus - 1) == Approx(0.02).epsilon(0.05));
}

TEST_CASE("one GPU at 0.8 of its speed takes 1.25 times as long, alone", "[variability]") {
  // One GPU, no communication: every op of the step is its kernels, each 1/0.8 as long.
  const Scenario s = Make(1, 1, 1, 2);
  const replay::ReplayResult ideal = Ideal(s);
  const replay::TrialReplayer trials(s, ideal);
  cost::CostModelCache models;
  auto t = trials.Step(OneSlow(1, 0, 0.8), models);
  REQUIRE(t.ok());
  CHECK(t->step.seconds() == Approx(1.25 * ideal.step.seconds()).epsilon(1e-9));
  CHECK(t->replays == 1);
}

TEST_CASE("one slow GPU in a data-parallel group paces its stage", "[variability]") {
  // DP 8: the gradient all-reduce waits for the slowest replica, whose compute is 1.25 times
  // the ideal; the step is that replica's.
  const Scenario s = Make(8, 1, 1, 2);
  const replay::ReplayResult ideal = Ideal(s);
  const replay::TrialReplayer trials(s, ideal);
  CHECK(trials.pipelines() == 8);
  cost::CostModelCache models;
  auto t = trials.Step(OneSlow(8, 5, 0.8), models);
  REQUIRE(t.ok());
  CHECK(t->pacing_gpu == 5);
  CHECK(t->cause == replay::SlowCause::kSlowGpu);
  auto slowed = replay::Simulate(s, {.stage_slowdown = {{1.25, 1.25}}});
  REQUIRE(slowed.ok());
  CHECK(t->step == slowed->step);
  const auto busy = [](const replay::StageTimes& x) { return (x.compute + x.optimizer).seconds(); };
  CHECK(busy(slowed->times) == Approx(1.25 * busy(ideal.times)).epsilon(1e-9));
  // The communication does not speed up: the step grows by at least the compute's quarter
  // less what the all-reduce hid.
  CHECK(t->step > ideal.step);
  // ZeRO-3 gathers parameters every layer: the whole DP group runs in lockstep.
  const Scenario z3 = Make(8, 1, 1, 2, "deepspeed", 3);
  const replay::ReplayResult z3_ideal = Ideal(z3);
  CHECK(replay::TrialReplayer(z3, z3_ideal).pipelines() == 1);
}

TEST_CASE("one slow stage shifts the pipeline's bubble as 1F1B's order says", "[variability]") {
  // PP 4 on 4 GPUs (one pipeline, no TP collectives), m = 8 micro-batches of 1F1B over equal
  // stages, each micro-batch f forward and b backward on every stage. Stage k = 2 runs at 1/α of
  // its speed, which makes it the bottleneck. By hand, on 1F1B's order (Narayanan et al. 2021,
  // §2.2), point-to-point time left out:
  //   - it starts when stages 0..k−1 have passed micro-batch 0 forward (k·f), and the step
  //     ends when the last backward has gone back through them (k·b);
  //   - it is busy α·m·(f + b);
  //   - it idles once, in its warm-up: after its p − k − 1 warm-up forwards (α·f each) it waits
  //     for micro-batch 0's round trip through the p − k − 1 stages after it ((f + b) each);
  //     in the steady state its own α·(f + b) per micro-batch is longer than theirs.
  //   step' = k·(f + b) + α·m·(f + b) + (p − k − 1)·max(0, f + b − α·f)
  // against the balanced (p − 1 + m)·(f + b). Every other stage waits in the bubble by as much
  // as the step grows.
  const Scenario s = Make(4, 1, 4, 8);
  const replay::ReplayResult ideal = Ideal(s);
  const int64_t p = 4, m = 8, k = 2;
  double f = 0, b = 0;  // stage k's kernels of micro-batch 0
  const cost::RooflineCostModel compute = replay::ComputeModel(s);
  for (const Op& op : ideal.program.ops) {
    if (op.kind != OpKind::kCompute || op.stage != k || op.micro_batch != 0) continue;
    if (op.pass == OpPass::kForward) f += compute.Time(op).seconds();
    if (op.pass == OpPass::kBackward) b += compute.Time(op).seconds();
  }
  REQUIRE(f > 0);
  CHECK(ideal.step.seconds() == Approx((p - 1 + m) * (f + b)).epsilon(0.03));
  const replay::TrialReplayer trials(s, ideal);
  CHECK(trials.pipelines() == 1);
  cost::CostModelCache models;
  const double alpha = 1.25;
  auto t = trials.Step(OneSlow(4, /*slow=*/k, 1 / alpha), models);  // GPU k is stage k
  REQUIRE(t.ok());
  CHECK(t->pacing_stage == k);
  const double by_hand =
      k * (f + b) + alpha * m * (f + b) + (p - k - 1) * std::max(0.0, f + b - alpha * f);
  CHECK(t->step.seconds() == Approx(by_hand).epsilon(0.03));
  auto slowed = replay::Simulate(s, {.stage_slowdown = {{1, 1}, {1, 1}, {alpha, alpha}, {1, 1}}});
  REQUIRE(slowed.ok());
  CHECK(slowed->step == t->step);
  const double grown = (slowed->step - ideal.step).seconds();
  for (int st : {0, 1, 3}) {
    INFO("stage " << st);
    CHECK(slowed->stages[st].bubble.seconds() - ideal.stages[st].bubble.seconds() ==
          Approx(grown).epsilon(0.01));
  }
}

TEST_CASE("trials do not depend on the thread count", "[variability]") {
  Scenario s = Make(8, 2, 2, 4);
  s.cluster.variability.gemm_cv = 0.04;
  s.cluster.variability.slow_gpu_share = 0.05;
  s.cluster.variability.slow_gpu_speed = 0.7;
  const replay::ReplayResult ideal = Ideal(s);
  auto one = replay::SimulateTrials(s, ideal, 12, 1);
  auto two = replay::SimulateTrials(s, ideal, 12, 2);
  REQUIRE(one.ok());
  REQUIRE(two.ok());
  CHECK(one->steps == two->steps);
  CHECK(one->p50 <= one->p90);
  CHECK(one->p90 <= one->p99);
  CHECK(one->slowdown > 0);
  // Nearest rank: P99 of 12 trials is the slowest.
  CHECK(one->p99 == *std::max_element(one->steps.begin(), one->steps.end()));
}

}  // namespace
}  // namespace sim

namespace sim {
namespace {

TEST_CASE("the pipelines the estimate ranks slowest hold the slowest one", "[variability]") {
  // DP 8 × PP 2 on two nodes: 8 pipelines, of which a trial replays 3. Over trials with a
  // spread and slow GPUs, the step is the one replaying every pipeline gives.
  Scenario s = Make(8, 1, 2, 8);
  s.cluster.nodes = 2;
  s.training.global_batch = 8 * 8;
  s.cluster.variability.gemm_cv = 0.05;
  s.cluster.variability.memory_cv = 0.05;
  s.cluster.variability.slow_gpu_share = 0.05;
  s.cluster.variability.slow_gpu_speed = 0.85;
  const replay::ReplayResult ideal = Ideal(s);
  const replay::TrialReplayer trials(s, ideal);
  REQUIRE(trials.pipelines() == 8);
  cost::CostModelCache models;
  for (int64_t t = 0; t < 12; ++t) {
    INFO("trial " << t);
    const replay::GpuSpeeds v = replay::DrawSpeeds(s.cluster.variability, 16, 8, t);
    auto ranked = trials.Step(v, models);
    auto every = trials.Step(v, models, trials.pipelines());
    REQUIRE(ranked.ok());
    REQUIRE(every.ok());
    CHECK(ranked->step == every->step);
  }
}

}  // namespace
}  // namespace sim

namespace sim {
namespace {

TEST_CASE("draws: slow links are a share of the NICs, each GPU at its rail's slowest",
          "[variability]") {
  VariabilitySpec v;
  v.gemm_cv = 0.05;
  v.slow_gpu_share = 0.1;
  v.slow_gpu_speed = 0.5;
  const int64_t gpus = 80000;
  const replay::GpuSpeeds healthy = replay::DrawSpeeds(v, gpus, 8, 3, 8);
  CHECK(std::all_of(healthy.link.begin(), healthy.link.end(), [](double l) { return l == 1; }));
  v.slow_link_share = 0.2;
  v.slow_link_speed = 0.25;
  // The links are drawn after the GPUs: every GPU's speeds are the ones drawn without them.
  const replay::GpuSpeeds one = replay::DrawSpeeds(v, gpus, 8, 3, 8);
  CHECK(one.gemm == healthy.gemm);
  CHECK(one.memory == healthy.memory);
  CHECK(one.cause == healthy.cause);
  // One NIC per GPU: a fifth of the GPUs behind a slow one (80,000 draws: σ = 0.0014).
  const auto slow_share = [](const replay::GpuSpeeds& d) {
    return static_cast<double>(std::count(d.link.begin(), d.link.end(), 0.25)) /
           static_cast<double>(d.link.size());
  };
  CHECK(slow_share(one) == Approx(0.2).margin(0.007));
  // Four NICs per node: pairs of GPUs share a NIC, and are slow together.
  const replay::GpuSpeeds four = replay::DrawSpeeds(v, gpus, 8, 3, 4);
  for (int64_t g = 0; g < gpus; g += 2) CHECK(four.link[g] == four.link[g + 1]);
  CHECK(slow_share(four) == Approx(0.2).margin(0.01));
  // Four NICs per GPU (32 per node): a GPU is slow when any of its four is, 1 − 0.8⁴ = 0.59.
  CHECK(slow_share(replay::DrawSpeeds(v, gpus, 8, 3, 32)) == Approx(0.5904).margin(0.01));
  // No NICs: no link.
  const replay::GpuSpeeds none = replay::DrawSpeeds(v, gpus, 8, 3, 0);
  CHECK(std::all_of(none.link.begin(), none.link.end(), [](double l) { return l == 1; }));
}

TEST_CASE("a slow link stretches a collective across nodes by its share of bandwidth",
          "[variability]") {
  // By hand: time' = latency + (time − latency) / speed across nodes, inside a node unchanged.
  Scenario s = Make(8, 1, 1, 2);
  s.cluster.nodes = 2;
  auto base = cost::MakeCollectiveCostModel(s);
  REQUIRE(base.ok());
  const cost::SlowLinkCostModel slow(**base, {0.4, 0.5});
  const Bytes tensor = Bytes::Count(int64_t{1} << 30);
  const CommGroup across{.size = 16, .nodes = 2}, inside{.size = 8, .nodes = 1};
  for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather}) {
    const cost::PricedCollective& b = (*base)->Price(kind, tensor, across, 1);
    const Duration b_time = b.time, b_latency = b.latency;
    const cost::PricedCollective& p = slow.Price(kind, tensor, across, 1);
    CHECK(p.latency == b_latency);
    CHECK((p.time - p.latency).seconds() == Approx((b_time - b_latency).seconds() / 0.4));
    CHECK(slow.Price(kind, tensor, inside, 1).time == (*base)->Price(kind, tensor, inside, 1).time);
  }
  const CommGroup send{.size = 2, .nodes = 2};
  const cost::PricedCollective& b = (*base)->Price(CollectiveKind::kSendRecv, tensor, send, 1);
  const double bandwidth_part = (b.time - b.latency).seconds();
  CHECK((slow.Price(CollectiveKind::kSendRecv, tensor, send, 1).time - b.latency).seconds() ==
        Approx(bandwidth_part / 0.5));
}

TEST_CASE("slow links slow the step through its collectives across nodes, and only those",
          "[variability]") {
  // DP 16 over two nodes: every link slow (share 1) at half its bandwidth. Each trial is the
  // replay with every stage's collectives across nodes at half the bandwidth, paced by a link.
  Scenario s = Make(8, 1, 1, 2);
  s.cluster.nodes = 2;
  s.training.global_batch = 32;
  s.cluster.variability.slow_link_share = 1;
  s.cluster.variability.slow_link_speed = 0.5;
  const replay::ReplayResult ideal = Ideal(s);
  auto d = replay::SimulateTrials(s, ideal, 3);
  REQUIRE(d.ok());
  auto halved = replay::Simulate(s, {.stage_link = {{0.5, 0.5}}});
  REQUIRE(halved.ok());
  CHECK(halved->step > ideal.step);
  for (Duration t : d->steps) CHECK(t == halved->step);
  CHECK(d->paced_by[static_cast<int>(replay::SlowCause::kSlowLink)] == 3);
  // The collectives' busy time grows by what their bandwidth part takes at half the rate:
  // each collective across nodes, priced alone, once more its time less its latency.
  auto comm = cost::MakeCollectiveCostModel(s);
  REQUIRE(comm.ok());
  auto program = Lower(s);
  REQUIRE(program.ok());
  double extra = 0;
  for (const Op& op : program->ops) {
    if (op.kind != OpKind::kCollective) continue;
    const CollectiveSpec& c = program->CollectiveOf(op);
    REQUIRE(c.group.nodes == 2);  // DP only: every collective crosses the nodes
    const cost::PricedCollective& p = (*comm)->Price(c.kind, c.tensor, c.group, c.buckets);
    extra += (p.time - p.latency).seconds();
  }
  REQUIRE(extra > 0);
  CHECK(halved->times.comm.seconds() - ideal.times.comm.seconds() == Approx(extra).epsilon(1e-6));
  // On one node no collective crosses a link: the same links change nothing.
  Scenario one = Make(8, 1, 1, 2);
  one.cluster.variability = s.cluster.variability;
  const replay::ReplayResult one_ideal = Ideal(one);
  auto same = replay::SimulateTrials(one, one_ideal, 3);
  REQUIRE(same.ok());
  CHECK(same->p99 == one_ideal.step);
  CHECK(same->slowdown == 0);
}

TEST_CASE("a slow link on one stage's node slows that pipeline's sends", "[variability]") {
  // PP 2 over two nodes (stage 0 on node 0, stage 1 on node 1), DP 8 inside each node: one
  // slow NIC on node 1 (GPU 8 + 3's) slows pipeline 3's sends alone, both ways.
  Scenario s = Make(8, 1, 2, 4);
  s.cluster.nodes = 2;
  s.training.global_batch = 32;
  s.cluster.variability.slow_link_share = 0.01;
  s.cluster.variability.slow_link_speed = 0.25;
  const replay::ReplayResult ideal = Ideal(s);
  const replay::TrialReplayer trials(s, ideal);
  REQUIRE(trials.pipelines() == 8);
  replay::GpuSpeeds v = replay::DrawSpeeds(VariabilitySpec{}, 16, 8, 0);
  v.link[8 + 3] = 0.25;
  cost::CostModelCache models;
  auto ranked = trials.Step(v, models);
  auto every = trials.Step(v, models, trials.pipelines());
  REQUIRE(ranked.ok());
  REQUIRE(every.ok());
  CHECK(ranked->step == every->step);
  CHECK(ranked->cause == replay::SlowCause::kSlowLink);
  CHECK(ranked->pacing_gpu == 8 + 3);
  auto slowed = replay::Simulate(s, {.stage_link = {{1, 0.25}, {0.25, 0.25}}});
  REQUIRE(slowed.ok());
  CHECK(ranked->step == slowed->step);
  CHECK(ranked->step > ideal.step);
}

}  // namespace
}  // namespace sim
