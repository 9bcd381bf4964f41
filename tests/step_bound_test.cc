// The plan's lower bound on a step without a replay (sim/replay/step_bound.h): never above the
// replayed step, on the golden runs' grid of layouts and on the pipelines the plan searches, and
// close to it where the step is the busiest stage's compute with the pipeline's fill and drain.
#include "sim/replay/step_bound.h"

#include <catch2/catch.hpp>

#include "sim/config/catalog.h"
#include "sim/replay/replay.h"
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

}  // namespace
}  // namespace sim
