// The plan's lower bound on a step without a replay (sim/replay/step_bound.h): never above the
// replayed step, on the golden runs' grid of layouts and on the pipelines the plan searches, and
// close to it where the step is the busiest stage's compute with the pipeline's fill and drain.
#include "sim/replay/step_bound.h"

#include <array>
#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "sim/config/catalog.h"
#include "sim/cost/compute_cost.h"
#include "sim/replay/replay.h"
#include "sim/workload/lowering.h"
#include "tests/test_scenarios.h"

namespace sim {
namespace {

// The bound and the replayed step, in seconds.
std::pair<double, double> BoundAndStep(const Scenario& s) {
  auto bound = replay::StepLowerBound(s);
  REQUIRE(bound.ok());
  auto r = replay::Simulate(s, {});
  REQUIRE(r.ok());
  return {bound->seconds(), r->step.seconds()};
}

TEST_CASE("a step's lower bound stays under its replay across the golden layouts", "[plan]") {
  int checked = 0;
  for (const GoldenCase& g : GoldenCases()) {
    // As given, and with four times the micro-batches (the bound's extrapolation).
    for (const int64_t times : {1, 4}) {
      Scenario t = g.scenario;
      t.training.global_batch *= times;
      const auto [bound, step] = BoundAndStep(t);
      INFO(g.line << " x" << times << ": bound " << bound << " s, step " << step << " s");
      CHECK(bound > 0.0);
      CHECK(bound <= step);
    }
    ++checked;
  }
  CHECK(checked >= 14);
}

// Per stage, the compute-stream compute (the optimizer's aside) of a lowering of `m`
// micro-batches: of those before `split`, the forward of micro-batch 0, the backward of
// micro-batch split - 1; in picoseconds.
std::vector<std::array<int64_t, 3>> FirstMicroBatches(const Scenario& s, int64_t m, int64_t split) {
  const cost::RooflineCostModel compute(s.cluster.gpu, s.training.precision, s.cluster.node.host,
                                        s.cluster.node.gpus_per_node, s.training.flash_impl);
  auto program = Lower(s.WithMicroBatches(m));
  REQUIRE(program.ok());
  std::vector<std::array<int64_t, 3>> out(static_cast<size_t>(program->stages), {0, 0, 0});
  for (const Op& op : program->ops) {
    if (op.kind != OpKind::kCompute || op.stream != StreamKind::kCompute ||
        op.pass == OpPass::kStep || op.micro_batch >= split) {
      continue;
    }
    const int64_t ps = compute.Time(op).picoseconds();
    out[op.stage][0] += ps;
    if (op.pass == OpPass::kForward && op.micro_batch == 0) out[op.stage][1] += ps;
    if (op.pass == OpPass::kBackward && op.micro_batch == split - 1) out[op.stage][2] += ps;
  }
  return out;
}

TEST_CASE("a lowering's first d micro-batches compute what a lowering of d does", "[plan]") {
  // The bound's premise (step_bound.h): it reads T_j(d), F_s and B_s off one lowering of 2d
  // micro-batches instead of lowering d as well. Each golden layout, d = pp for the interleaved
  // schedule and 1 otherwise; and Llama-2-70B over 8 stages as the plan lays it out, 1F1B with
  // uneven ends (7 + 6 x 11 + 7 layers) and interleaved with 2 chunks, under each recompute
  // policy.
  std::vector<std::pair<std::string, Scenario>> cases;
  for (const GoldenCase& g : GoldenCases()) cases.push_back({g.line, g.scenario});
  for (const char* recompute : {"none", "selective", "full"}) {
    for (const bool interleaved : {false, true}) {
      std::vector<config::Override> o = {{"parallel.framework", "megatron"},
                                         {"parallel.zero", "1"},
                                         {"parallel.tp", "4"},
                                         {"parallel.pp", "8"},
                                         {"parallel.sequence_parallel", "true"},
                                         {"training.recompute", recompute}};
      if (interleaved) {
        o.push_back({"parallel.pp_schedule", "interleaved"});
        o.push_back({"parallel.pp_chunks", "2"});
      } else {
        o.push_back({"parallel.first_stage_layers", "7"});
        o.push_back({"parallel.last_stage_layers", "7"});
      }
      cases.push_back({absl::StrCat(interleaved ? "interleaved " : "1f1b ", recompute),
                       Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml", o)});
    }
  }
  for (const auto& [name, s] : cases) {
    const int64_t d = s.parallel.pp_schedule == PipelineSchedule::kInterleaved ? s.parallel.pp : 1;
    INFO(name << ", d = " << d);
    const auto alone = FirstMicroBatches(s, d, d);
    const auto within = FirstMicroBatches(s, 2 * d, d);
    REQUIRE(alone.size() == within.size());
    for (size_t j = 0; j < alone.size(); ++j) {
      INFO("stage " << j);
      CHECK(alone[j][0] > 0);
      CHECK(alone[j] == within[j]);
    }
  }
}

TEST_CASE("a layout's compute profile is the same on every cluster size", "[plan]") {
  // stepsim plan measures a layout's profile once for all its cluster sizes (step_bound.h):
  // more data-parallel ranks change what a GPU communicates, not what it computes. ZeRO-3
  // without a pipeline, Megatron 1F1B with uneven ends and CP, interleaved (read as 1F1B), and
  // Mixtral with expert parallelism, each on 4 nodes and on 16.
  const std::vector<std::vector<config::Override>> layouts = {
      {{"parallel.zero", "3"}, {"training.recompute", "selective"}},
      {{"parallel.framework", "megatron"},
       {"parallel.zero", "1"},
       {"parallel.tp", "2"},
       {"parallel.cp", "2"},
       {"parallel.pp", "2"},
       {"parallel.sequence_parallel", "true"},
       {"training.recompute", "full"}},
      {{"parallel.framework", "megatron"},
       {"parallel.zero", "1"},
       {"parallel.tp", "4"},
       {"parallel.pp", "8"},
       {"parallel.sequence_parallel", "true"},
       {"parallel.first_stage_layers", "7"},
       {"parallel.last_stage_layers", "7"},
       {"training.recompute", "selective"}},
      {{"parallel.framework", "megatron"},
       {"parallel.zero", "1"},
       {"parallel.tp", "4"},
       {"parallel.pp", "4"},
       {"parallel.sequence_parallel", "true"},
       {"parallel.pp_schedule", "interleaved"},
       {"parallel.pp_chunks", "2"},
       {"training.recompute", "selective"}},
      {{"model", "mixtral-8x7b"},
       {"parallel.framework", "megatron"},
       {"parallel.zero", "1"},
       {"parallel.tp", "2"},
       {"parallel.ep", "4"},
       {"parallel.sequence_parallel", "true"},
       {"training.recompute", "selective"}},
  };
  for (const auto& layout : layouts) {
    std::vector<std::optional<replay::ComputeProfile>> profiles;
    for (const int64_t nodes : {4, 16}) {
      std::vector<config::Override> o = layout;
      o.push_back({"cluster.nodes", absl::StrCat(nodes)});
      o.push_back({"training.global_batch", absl::StrCat(64 * nodes)});
      const Scenario s = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml", o);
      auto p = s.parallel.pp_schedule == PipelineSchedule::kInterleaved
                   ? replay::AverageComputeProfile(s)
                   : replay::StepComputeProfile(s);
      REQUIRE(p.ok());
      profiles.push_back(*p);
    }
    INFO(layout.back().value << " " << layout.size() << " overrides");
    const replay::ComputeProfile &a = *profiles[0], &b = *profiles[1];
    CHECK(a.d == b.d);
    CHECK(a.crosses == b.crosses);
    CHECK(a.first_part == b.first_part);
    CHECK(a.total == b.total);
    CHECK(a.first_forward == b.first_forward);
    CHECK(a.part_last_backward == b.part_last_backward);
    CHECK(a.total[0] > a.first_part[0]);
  }
}

TEST_CASE("the bound holds a 1F1B pipeline's fill and drain", "[plan]") {
  // Llama-2-70B on 32 H100 as the plan lays it out: Megatron, TP 2 with SP, 1F1B over PP 8,
  // selective recompute, 512 micro-batches; and the same with the interleaved schedule, whose
  // bound keeps the busiest stage's compute alone.
  const std::vector<config::Override> megatron = {{"parallel.framework", "megatron"},
                                                  {"parallel.zero", "1"},
                                                  {"parallel.tp", "2"},
                                                  {"parallel.pp", "8"},
                                                  {"parallel.sequence_parallel", "true"},
                                                  {"training.recompute", "selective"}};
  const Scenario one_f_one_b = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml", megatron);
  REQUIRE(one_f_one_b.micro_batches() == 512);
  const auto [bound, step] = BoundAndStep(one_f_one_b);
  INFO("1F1B: bound " << bound << " s, step " << step << " s");
  CHECK(bound <= step);
  // What the bound leaves out here is the exposed TP and data-parallel communication and the
  // sends: a tenth of the step at most.
  CHECK(bound >= 0.9 * step);
  // At pp micro-batches the fill and drain are most of the bubble: without them the bound
  // would be m x c, about half the step.
  Scenario short_batch = one_f_one_b;
  short_batch.training.global_batch = 8 * short_batch.training.micro_batch * short_batch.dp();
  const auto [short_bound, short_step] = BoundAndStep(short_batch);
  INFO("8 micro-batches: bound " << short_bound << " s, step " << short_step << " s");
  CHECK(short_bound <= short_step);
  CHECK(short_bound >= 0.8 * short_step);

  std::vector<config::Override> interleaved = megatron;
  interleaved.push_back({"parallel.pp_schedule", "interleaved"});
  interleaved.push_back({"parallel.pp_chunks", "2"});
  const auto [i_bound, i_step] =
      BoundAndStep(Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml", interleaved));
  INFO("interleaved: bound " << i_bound << " s, step " << i_step << " s");
  CHECK(i_bound <= i_step);
  CHECK(i_bound >= 0.8 * i_step);
}

// The whole model's compute over a step: every compute-stream compute op of the lowering but
// the optimizer's.
Duration TotalCompute(const Scenario& s) {
  const cost::RooflineCostModel compute(s.cluster.gpu, s.training.precision, s.cluster.node.host,
                                        s.cluster.node.gpus_per_node, s.training.flash_impl);
  auto program = Lower(s);
  REQUIRE(program.ok());
  Duration total;
  for (const Op& op : program->ops) {
    if (op.kind == OpKind::kCompute && op.stream == StreamKind::kCompute &&
        op.pass != OpPass::kStep) {
      total += compute.Time(op);
    }
  }
  return total;
}

TEST_CASE("the average stage's compute bounds interleaved layouts, measured on them as 1F1B",
          "[plan]") {
  // Llama-2-70B's 80 layers and Llama-3-405B's 126 on DGX H100s at TP 8, one data-parallel
  // rank, 4 pp micro-batches, interleaved as the plan lays them out, evenly and with uneven
  // ends, under each recompute policy.
  struct Layout {
    const char* model;
    int64_t pp, chunks;
    std::optional<int64_t> ends;
    const char* recompute;
  };
  const std::vector<Layout> layouts = {
      {"llama2-70b", 8, 2, std::nullopt, "selective"},
      {"llama2-70b", 8, 5, std::nullopt, "full"},
      {"llama2-70b", 4, 2, 7, "none"},
      {"llama3-405b", 16, 2, 3, "full"},
      {"llama3-405b", 16, 4, 1, "selective"},
  };
  for (const Layout& l : layouts) {
    std::vector<config::Override> o = {{"model", l.model},
                                       {"cluster.nodes", absl::StrCat(l.pp)},
                                       {"parallel.framework", "megatron"},
                                       {"parallel.zero", "1"},
                                       {"parallel.tp", "8"},
                                       {"parallel.pp", absl::StrCat(l.pp)},
                                       {"parallel.sequence_parallel", "true"},
                                       {"parallel.pp_schedule", "interleaved"},
                                       {"parallel.pp_chunks", absl::StrCat(l.chunks)},
                                       {"training.recompute", l.recompute},
                                       {"training.global_batch", absl::StrCat(4 * l.pp)}};
    if (l.ends) {
      o.push_back({"parallel.first_stage_layers", absl::StrCat(*l.ends)});
      o.push_back({"parallel.last_stage_layers", absl::StrCat(*l.ends)});
    }
    const Scenario s = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml", o);
    INFO(l.model << " pp " << l.pp << " v " << l.chunks << " " << l.recompute);
    // The premise: the interleaved program computes what its 1F1B reading does, in all.
    const std::optional<Scenario> one_f_one_b = replay::OneFOneBReading(s);
    REQUIRE(one_f_one_b.has_value());
    CHECK(TotalCompute(s).picoseconds() == TotalCompute(*one_f_one_b).picoseconds());
    auto bound = replay::AverageStageComputeBound(s);
    REQUIRE(bound.ok());
    auto r = replay::Simulate(s, {});
    REQUIRE(r.ok());
    INFO("bound " << bound->seconds() << " s, step " << r->step.seconds() << " s");
    CHECK(bound->seconds() <= r->step.seconds());
    // What it leaves out: the bubble, the exposed communication and the busiest stage's excess.
    CHECK(bound->seconds() >= 0.6 * r->step.seconds());
  }
}

}  // namespace
}  // namespace sim
