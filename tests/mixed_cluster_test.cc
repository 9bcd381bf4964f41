// Clusters of mixed GPU types (`cluster.nodes: [{node, count}, ...]`): pipeline stages placed by
// node type, each priced by its own GPU and NVLink and held to its own memory, and the layer
// split that balances the stages' times on unequal GPUs.
#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "sim/config/catalog.h"
#include "sim/replay/replay.h"

namespace sim {
namespace {

// Llama 3 8B over two nodes as TP 4 × PP 4: stages 0 and 1 on the first node, 2 and 3 on the
// second.
constexpr const char* kScenario = R"(schema_version: 1
name: mixed
model: llama3-8b
cluster:
  nodes: [{node: FIRST, count: 1}, {node: SECOND, count: 1}]
training: {seq_len: 4096, micro_batch: 1, global_batch: 16, recompute: selective}
parallel: {framework: megatron, zero: 1, tp: 4, pp: 4, sequence_parallel: true LAYERS}
)";

absl::StatusOr<Scenario> Try(absl::string_view first, absl::string_view second,
                             absl::string_view layers = "") {
  const std::string text =
      absl::StrReplaceAll(kScenario, {{"FIRST", first}, {"SECOND", second}, {"LAYERS", layers}});
  auto loader =
      config::ScenarioLoader::FromText(config::DataRoot{STEPSIM_SOURCE_DIR}, text, "mixed_test");
  if (!loader.ok()) return loader.status();
  return loader->Load({});
}

Scenario Make(absl::string_view first, absl::string_view second, absl::string_view layers = "") {
  auto s = Try(first, second, layers);
  INFO(s.status().message());
  REQUIRE(s.ok());
  return *s;
}

replay::ReplayResult Replay(const Scenario& s) {
  auto r = replay::Simulate(s, {});
  INFO(r.status().message());
  REQUIRE(r.ok());
  return *std::move(r);
}

constexpr absl::string_view kEven = ", pp_layers: [8, 8, 8, 8]";

TEST_CASE("a mixed cluster prices each stage on its own node type", "[mixed]") {
  // With the same split, each stage of the A100 + H100 pipeline computes exactly as that stage
  // does on a cluster of its type alone (its roofline, calibration, overlap slowdown, and its
  // GEMMs' waves over its own SMs: 108 on the A100, 132 on the H100).
  const replay::ReplayResult mixed = Replay(Make("dgx-a100-80gb", "dgx-h100", kEven));
  const replay::ReplayResult a100 = Replay(Make("dgx-a100-80gb", "dgx-a100-80gb", kEven));
  const replay::ReplayResult h100 = Replay(Make("dgx-h100", "dgx-h100", kEven));
  REQUIRE(mixed.stages.size() == 4);
  for (int st : {0, 1}) {
    INFO("stage " << st);
    CHECK(mixed.stages[st].compute.seconds() ==
          Approx(a100.stages[st].compute.seconds()).epsilon(1e-9));
  }
  for (int st : {2, 3}) {
    INFO("stage " << st);
    CHECK(mixed.stages[st].compute.seconds() ==
          Approx(h100.stages[st].compute.seconds()).epsilon(1e-9));
  }
  // The H100's stages are the faster ones, so the A100's pace the even split.
  CHECK(mixed.stages[0].compute > mixed.stages[2].compute * 2);
  CHECK(mixed.step > h100.step);
  CHECK(mixed.step < a100.step);
}

TEST_CASE("the split balances the stages by their GPUs' GEMM rates and beats the even one",
          "[mixed]") {
  const Scenario balanced = Make("dgx-a100-80gb", "dgx-h100");
  // The H100's dense bf16 rate is 989 TFLOP/s at its calibrated GEMM efficiency against the
  // A100's 312 at its own: the later stages take the larger share of the 32 layers, the heavier
  // stages on the faster GPUs.
  const std::vector<int64_t>& layers = balanced.parallel.pp_layers;
  REQUIRE(layers.size() == 4);
  CHECK(layers[0] + layers[1] + layers[2] + layers[3] == 32);
  CHECK(layers[2] > 2 * layers[0]);
  CHECK(layers[3] > 2 * layers[1]);
  CHECK(balanced.parallel.pp_layers_balanced);
  const replay::ReplayResult even = Replay(Make("dgx-a100-80gb", "dgx-h100", kEven));
  const replay::ReplayResult fitted = Replay(balanced);
  CHECK(fitted.step.seconds() < 0.8 * even.step.seconds());
  // Either order of the types puts the larger share on the H100s.
  const Scenario reversed = Make("dgx-h100", "dgx-a100-80gb");
  CHECK(reversed.parallel.pp_layers[0] > 2 * reversed.parallel.pp_layers[2]);
}

TEST_CASE("each stage's memory is checked against its own GPU's", "[mixed]") {
  // Even layers on 40 GB A100s beside 80 GB H100s: each stage's ledger holds its own GPU's
  // usable memory, and overflows exactly when its reserved peak passes that.
  const Scenario s = Make("dgx-a100-40gb", "dgx-h100", kEven);
  const replay::ReplayResult r = Replay(s);
  const Bytes a100 = s.cluster.groups[0].gpu.Usable(), h100 = s.cluster.groups[1].gpu.Usable();
  REQUIRE(a100 < h100);
  for (int st = 0; st < 4; ++st) {
    INFO("stage " << st);
    const Bytes cap = st < 2 ? a100 : h100;
    CHECK(r.ledgers[st].capacity() == cap);
    CHECK(r.ledgers[st].first_overflow().has_value() == (r.ledgers[st].reserved_peak() > cap));
  }
}

TEST_CASE("mixed clusters refuse layouts that put a stage on two types", "[mixed]") {
  // No pipeline: the types would share every stage.
  auto flat = config::ScenarioLoader::FromText(
      config::DataRoot{STEPSIM_SOURCE_DIR},
      absl::StrReplaceAll(kScenario, {{"FIRST", "dgx-a100-80gb"},
                                      {"SECOND", "dgx-h100"},
                                      {"pp: 4", "pp: 1"},
                                      {"LAYERS", ""},
                                      {"global_batch: 16", "global_batch: 8"}}),
      "mixed_test");
  REQUIRE(flat.ok());
  auto s = flat->Load({});
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(std::string(s.status().message()),
             Catch::Contains("a mixed cluster places pipeline stages by node type"));
  // Different GPUs per node.
  auto odd = Try("dgx-a100-80gb", "gb200-nvl72");
  REQUIRE_FALSE(odd.ok());
  CHECK_THAT(std::string(odd.status().message()), Catch::Contains("must hold as many GPUs each"));
  // A node type whose GPUs are not whole stages: one A100 node and two H100 nodes as PP 2
  // make stages of 12 GPUs, and the A100 node's 8 are not one.
  auto three = config::ScenarioLoader::FromText(
      config::DataRoot{STEPSIM_SOURCE_DIR},
      absl::StrReplaceAll(kScenario, {{"FIRST", "dgx-a100-80gb"},
                                      {"SECOND", "dgx-h100"},
                                      {"count: 1}]", "count: 2}]"},
                                      {"pp: 4", "pp: 2"},
                                      {"global_batch: 16", "global_batch: 24"},
                                      {"LAYERS", ""}}),
      "mixed_test");
  REQUIRE(three.ok());
  auto t = three->Load({});
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(std::string(t.status().message()),
             Catch::Contains("not a whole number of pipeline stages of 12"));
}

}  // namespace
}  // namespace sim
