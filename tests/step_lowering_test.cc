// StepLowering (sim/workload/lowering.h): the programs of one scenario at several step lengths,
// their shared micro-batches lowered once, are the programs Lower gives at each length — op for
// op, on the golden grid of layouts (ZeRO 0-3, FSDP's shardings, FSDP2, DDP, Megatron with and
// without a pipeline, MoE) and the shipped scenarios.
#include <catch2/catch.hpp>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "sim/replay/fold.h"
#include "sim/replay/prefix_watch.h"
#include "sim/workload/lowering.h"
#include "tests/test_scenarios.h"

namespace sim {
namespace {

// Everything the replay and the reports read of a program.
void CheckSame(const OpProgram& a, const OpProgram& b) {
  REQUIRE(a.ops.size() == b.ops.size());
  CHECK(replay::CommonPrefix(a, b) == static_cast<int32_t>(a.ops.size()));
  CHECK(a.deps.size() == b.deps.size());
  CHECK(a.mem.size() == b.mem.size());
  CHECK(a.collectives.size() == b.collectives.size());
  CHECK(a.stages == b.stages);
  CHECK(a.stage_gpu == b.stage_gpu);
  CHECK(a.dp_stride == b.dp_stride);
  CHECK(a.layers == b.layers);
  CHECK(a.dp == b.dp);
  CHECK(a.tokens_per_micro_batch == b.tokens_per_micro_batch);
  CHECK(a.stage_states.size() == b.stage_states.size());
  CHECK(a.sharding.stage == b.sharding.stage);
}

// K + i·d micro-batches for each i: the lengths a fold lowers (PlanFold's K and d, read at a
// long batch; an interleaved schedule takes whole groups of pp; GPipe, never folded, 1F1B's).
std::vector<int64_t> FoldLengths(const Scenario& s, std::initializer_list<int64_t> periods) {
  const auto plan = replay::PlanFold(s.WithMicroBatches(4096 * s.parallel.pp));
  const int64_t k = plan ? plan->k : s.parallel.pp, d = plan ? plan->d : 1;
  std::vector<int64_t> out;
  for (int64_t i : periods) out.push_back(k + i * d);
  return out;
}

void CheckLengths(const Scenario& s, const std::vector<int64_t>& lengths) {
  auto lowering = StepLowering::Start(s);
  REQUIRE(lowering.ok());
  std::vector<OpProgram> programs;
  std::vector<int32_t> shared;
  for (int64_t m : lengths) {
    INFO(m << " micro-batches");
    auto forked = lowering->Lower(m);
    auto whole = Lower(s.WithMicroBatches(m));
    REQUIRE(forked.ok());
    REQUIRE(whole.ok());
    CheckSame(*forked, *whole);
    programs.push_back(*std::move(forked));
    shared.push_back(lowering->shared());
  }
  // What a program is said to share with the longer ones (the replays' forks start comparing
  // there, CommonPrefix's `known`) it does share, op for op.
  for (size_t i = 0; i < programs.size(); ++i) {
    CHECK((shared[i] > 0) == lowering->incremental());
    for (size_t j = i + 1; j < programs.size(); ++j) {
      INFO(lengths[i] << " and " << lengths[j] << " micro-batches");
      CHECK(replay::CommonPrefix(programs[i], programs[j]) >= shared[i]);
    }
  }
}

TEST_CASE("StepLowering's programs are Lower's at each length, on the golden layouts",
          "[lowering]") {
  int checked = 0;
  for (const GoldenCase& g : GoldenCases()) {
    INFO(g.line);
    // A fold's window, two slides, and a jump of several periods.
    CheckLengths(g.scenario, FoldLengths(g.scenario, {0, 1, 2, 3, 4, 8}));
    ++checked;
  }
  CHECK(checked >= 14);
}

TEST_CASE("StepLowering's programs are Lower's at each length, on the shipped scenarios",
          "[lowering]") {
  for (const char* file : {"scenarios/default.yaml", "scenarios/llama2-70b-finetune.yaml",
                           "scenarios/gpt3-175b-korthikanti.yaml"}) {
    INFO(file);
    const Scenario s = Load(std::string(STEPSIM_SOURCE_DIR "/") + file);
    CheckLengths(s, FoldLengths(s, {0, 1, 2, 5}));
  }
  // Every framework's policy, cloned mid-step with the reductions it has left for the end.
  // (The stages each framework has: DDP 0, torchtune 0 and 3, FSDP 0, 2 and 3.)
  const std::pair<const char*, const char*> layouts[] = {
      {"ddp", "0"},       {"torchtune", "0"}, {"torchtune", "3"}, {"megatron", "0"},
      {"megatron", "1"},  {"fsdp", "0"},      {"fsdp", "2"},      {"fsdp", "3"},
      {"deepspeed", "0"}, {"deepspeed", "1"}, {"deepspeed", "2"}, {"deepspeed", "3"}};
  for (const auto& [framework, zero] : layouts) {
    INFO(framework << " ZeRO-" << zero);
    const Scenario s = Load(
        STEPSIM_SOURCE_DIR "/scenarios/default.yaml",
        {{"parallel.framework", framework}, {"parallel.zero", zero}, {"training.seq_len", "1024"}});
    CheckLengths(s, {1, 2, 3, 4});
  }
}

TEST_CASE("StepLowering refuses what Lower refuses", "[lowering]") {
  const Scenario s = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml");
  auto lowering = StepLowering::Start(s);
  REQUIRE(lowering.ok());
  const int64_t too_long = kMaxGroupPasses / (s.model.layers + 2) + 1;
  auto r = lowering->Lower(too_long);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(r.status().message() == Lower(s.WithMicroBatches(too_long)).status().message());
}

}  // namespace
}  // namespace sim
