// Differential property over random valid layouts (issue 64): every layout the loader accepts,
// across each framework, model family (dense and mixture-of-experts) and parallelism, replays
// without an internal check firing, and its folded report (sim/replay/fold.h) is the unfolded
// one byte for byte, text and JSON — but for a step that does not fit by its tensors alone,
// whose reserved peak past capacity may differ (docs/folding.md). The generator is seeded, so a
// failure reproduces; the layout is printed with it. At least 2,000 layouts run in each CI pass.
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/config/catalog.h"
#include "sim/replay/replay.h"
#include "sim/report/run_report.h"
#include "sim/report/run_summary.h"

namespace sim {
namespace {

class LayoutGenerator {
 public:
  explicit LayoutGenerator(uint32_t seed) : rng_(seed) {}

  std::vector<config::Override> Next() {
    const std::string model = Pick({"tiny-model.yaml", "tiny-moe.yaml", "tiny-moe.yaml", "gpt2-xl",
                                    "mpt-7b", "llama3.2-3b", "qwen1.5-moe-a2.7b"});
    const bool moe = model == "tiny-moe.yaml" || model == "qwen1.5-moe-a2.7b";
    const std::string framework = Pick({"deepspeed", "fsdp", "megatron", "ddp", "torchtune"});
    const std::string tp = Pick({"1", "1", "2", "4"});
    const std::string pp = Pick({"1", "1", "2", "4"});
    std::vector<config::Override> o = {
        {"model", model},
        {"cluster.nodes", Pick({"1", "1", "2"})},
        {"cluster.gpus_per_node", Pick({"2", "4", "8", "8"})},
        {"training.seq_len", Pick({"256", "1024", "2048"})},
        {"training.micro_batch", Pick({"1", "1", "2"})},
        {"training.recompute", Pick({"none", "selective", "full", "op"})},
        {"training.attention", Pick({"flash", "flash", "eager"})},
        {"training.precision", Pick({"bf16", "bf16", "fp8"})},
        {"parallel.framework", framework},
        {"parallel.zero", Pick({"0", "1", "2", "3"})},
        {"parallel.tp", tp},
        {"parallel.pp", pp},
        {"parallel.cp", Pick({"1", "1", "1", "2"})},
        {"parallel.sequence_parallel", tp != "1" ? Pick({"true", "false"}) : "false"},
        {"parallel.prefetch", Pick({"0", "1", "2"})},
    };
    if (moe) {
      o.push_back({"parallel.ep", Pick({"1", "2", "4", "8"})});
      if (Pick({"a", "b", "c"}) == "a") o.push_back({"parallel.etp", "1"});
      if (Pick({"a", "b", "c"}) == "a") o.push_back({"training.routing.distribution", "zipf"});
    }
    if (pp != "1") {
      const std::string schedule = Pick({"1f1b", "gpipe", "interleaved"});
      o.push_back({"parallel.pp_schedule", schedule});
      if (schedule == "interleaved") o.push_back({"parallel.pp_chunks", "2"});
    }
    if (framework == "megatron") {
      o.push_back({"parallel.overlap_grad_reduce", Pick({"true", "false"})});
      o.push_back({"parallel.tp_comm_overlap", Pick({"true", "false"})});
      o.push_back({"parallel.overlap_param_gather", Pick({"true", "false"})});
    }
    if (framework == "deepspeed") {
      o.push_back({"parallel.deepspeed.contiguous_gradients", Pick({"true", "false"})});
    }
    if (framework == "fsdp") {
      o.push_back({"parallel.fsdp_version", Pick({"1", "2"})});
      const std::string sharding =
          Pick({"", "", "no_shard", "shard_grad_op", "full_shard", "hybrid_shard"});
      if (!sharding.empty()) o.push_back({"parallel.sharding", sharding});
    }
    if (Pick({"a", "b", "c", "d", "e", "f"}) == "a") {
      o.push_back({"parallel.offload.optimizer", "cpu"});
    }
    if (Pick({"a", "b", "c", "d", "e", "f"}) == "a") {
      o.push_back({"training.finetune.method", Pick({"lora", "qlora"})});
    }
    // 1 to 24 micro-batches per replica, enough for most layouts to fold (the loader rejects a
    // batch that does not divide; such draws are skipped).
    o.push_back({"training.global_batch", Pick({"16", "32", "64", "96", "128", "192"})});
    return o;
  }

 private:
  std::string Pick(std::vector<std::string> v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng_)];
  }
  std::mt19937 rng_;
};

struct Replayed {
  absl::Status status;
  std::optional<report::RunSummary> summary;
  std::string text;  // the report as `stepsim run` writes it, text and JSON
};

Replayed Replay(const Scenario& s, bool fold) {
  replay::ReplayOptions o;
  o.fold = fold;
  auto r = replay::Simulate(s, o);
  if (!r.ok()) return {r.status(), std::nullopt, ""};
  report::RunSummary summary = report::Summarize(s, *r);
  std::string text = report::RunText(summary) + report::RunJson(summary).dump(1);
  return {absl::OkStatus(), std::move(summary), std::move(text)};
}

// The draws split into kShards interleaved shards, one test case each, so that CTest runs them
// side by side: sanitized, the 2,000 layouts take about 215 s in one case.
constexpr int kLayouts = 2000, kShards = 4;

// Replays the accepted layouts whose index is `shard` modulo kShards (all shards draw the same
// seeded sequence) and checks each one folds to its unfolded report.
void ReplayShard(int shard) {
  constexpr int kShardLayouts = kLayouts / kShards;
  LayoutGenerator generator(20261206);
  auto loader = config::ScenarioLoader::Open(config::DataRoot{STEPSIM_SOURCE_DIR},
                                             STEPSIM_SOURCE_DIR "/tests/golden/zero3.yaml");
  REQUIRE(loader.ok());
  int accepted = 0, mine = 0, replayed = 0, moe = 0, past_capacity = 0;
  for (int draw = 0; accepted < kLayouts && draw < 200 * kLayouts; ++draw) {
    const std::vector<config::Override> o = generator.Next();
    auto scenario = loader->Load(o);
    if (!scenario.ok()) continue;
    if (accepted++ % kShards != shard) continue;
    ++mine;
    std::string label;
    for (const auto& kv : o) absl::StrAppend(&label, " --set ", kv.key, "=", kv.value);
    INFO("stepsim run tests/golden/zero3.yaml" << label);
    const Replayed folded = Replay(*scenario, true), unfolded = Replay(*scenario, false);
    REQUIRE(folded.status.code() == unfolded.status.code());
    if (!folded.status.ok()) {
      // A layout the replay refuses is refused with a user's error, never an internal one.
      CHECK(folded.status.code() != absl::StatusCode::kInternal);
      continue;
    }
    ++replayed;
    moe += scenario->model.moe.has_value() ? 1 : 0;
    if (folded.text == unfolded.text) continue;
    // The one documented difference (docs/folding.md): a step whose tensors exceed the GPU, where
    // the caching allocator, past its capacity, releases and reserves segments anew and its
    // reserved peak can still creep up after three short replays that agree. The verdict, the
    // allocated peak and the step are the same; the reserved peak within 1 %.
    const report::RunSummary &f = *folded.summary, &u = *unfolded.summary;
    INFO(folded.text << "\n--- unfolded ---\n" << unfolded.text);
    REQUIRE(!u.fits);
    REQUIRE(u.peak > u.capacity);
    CHECK(f.fits == u.fits);
    CHECK(f.peak == u.peak);
    CHECK(f.step == u.step);
    CHECK(std::abs((f.reserved_peak - u.reserved_peak).gib()) <= 0.01 * u.reserved_peak.gib());
    ++past_capacity;
  }
  // Past capacity the difference is rare: a handful in a thousand.
  CHECK(past_capacity <= kShardLayouts / 200);
  CHECK(accepted == kLayouts);
  CHECK(mine == kShardLayouts);
  CHECK(replayed >= kShardLayouts * 4 / 5);
  CHECK(moe >= kShardLayouts / 5);
}

TEST_CASE("random valid layouts replay, and fold to the unfolded report byte for byte (1 of 4)",
          "[property][fold]") {
  ReplayShard(0);
}
TEST_CASE("random valid layouts replay, and fold to the unfolded report byte for byte (2 of 4)",
          "[property][fold]") {
  ReplayShard(1);
}
TEST_CASE("random valid layouts replay, and fold to the unfolded report byte for byte (3 of 4)",
          "[property][fold]") {
  ReplayShard(2);
}
TEST_CASE("random valid layouts replay, and fold to the unfolded report byte for byte (4 of 4)",
          "[property][fold]") {
  ReplayShard(3);
}

}  // namespace
}  // namespace sim
