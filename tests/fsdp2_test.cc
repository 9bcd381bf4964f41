// parallel.fsdp_version 2 (sim/workload/policy/fsdp.cc): FSDP2's copies around each collective
// (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py), worked by hand for Llama 3 8B.
#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_replace.h"
#include "sim/config/catalog.h"
#include "sim/explore/plan.h"
#include "sim/explore/plan_options.h"
#include "sim/replay/replay.h"
#include "sim/report/run_summary.h"
#include "sim/workload/lowering.h"

namespace sim {
namespace {

// Llama 3 8B on one 8-GPU node, FULL_SHARD, gradients reduced in fp32, two micro-batches.
constexpr const char* kScenario = R"(schema_version: 1
model: llama3-8b
cluster: {node: dgx-h100, nodes: 1}
training: {seq_len: 8192, micro_batch: 1, global_batch: 16, recompute: full, attention: flash}
parallel: {framework: fsdp, fsdp_version: VERSION, zero: 3, sharding: full_shard,
           reduce_dtype: fp32}
)";

Scenario Load(const char* version) {
  auto loader = config::ScenarioLoader::FromText(
      config::DataRoot{STEPSIM_SOURCE_DIR}, absl::StrReplaceAll(kScenario, {{"VERSION", version}}),
      "fsdp2_test");
  REQUIRE(loader.ok());
  auto s = loader->Load({});
  INFO(s.status().message());
  REQUIRE(s.ok());
  return *s;
}

// A decoder layer of Llama 3 8B: q and o 4096 x 4096, k and v 4096 x 1024, gate, up and down
// 4096 x 14336, two RMSNorm weights of 4096.
constexpr int64_t kLayerParams =
    2 * 4096LL * 4096 + 2 * 4096LL * 1024 + 3 * 4096LL * 14336 + 2 * 4096;  // 218,112,000

TEST_CASE("fsdp2 copies each gather out and each layer's gradients in, on the compute stream",
          "[fsdp]") {
  auto v2 = Lower(Load("2"));
  REQUIRE(v2.ok());
  auto v1 = Lower(Load("1"));
  REQUIRE(v1.ok());
  const int32_t layers = v2->layers;
  REQUIRE(layers == 32);
  int copies_out = 0, chunk_cats = 0;
  for (const Op& op : v2->ops) {
    if (op.name != "param_copy_out" && op.name != "grad_chunk_cat") continue;
    CHECK(op.stream == StreamKind::kCompute);
    CHECK(op.op_class == OpClass::kMemoryBound);
    const bool layer = op.group && *op.group >= 1 && *op.group <= layers;
    if (op.name == "param_copy_out") {
      ++copies_out;
      // split_with_sizes_copy reads the gathered buffer and writes the parameters: 2 + 2 B.
      if (layer) CHECK(op.bytes_moved.count() == 4 * kLayerParams);
      // The parameters are allocated as the copy starts; the gather's buffer goes when it ends.
      if (layer) {
        REQUIRE(op.mem_end - op.mem_begin == 2);
        const MemAction& in = v2->mem[op.mem_begin];
        const MemAction& out = v2->mem[op.mem_begin + 1];
        CHECK((in.when == MemWhen::kStart && in.category == MemCategory::kGatheredParams &&
               in.bytes.count() == 2 * kLayerParams));
        CHECK((out.when == MemWhen::kEnd && out.category == MemCategory::kCommBuffers &&
               out.bytes.count() == -2 * kLayerParams));
      }
    } else {
      ++chunk_cats;
      CHECK(op.pass == OpPass::kBackward);
      // chunk_cat reads the bf16 gradients and writes the fp32 reduce-scatter input: 2 + 4 B.
      if (layer) CHECK(op.bytes_moved.count() == 6 * kLayerParams);
    }
  }
  // Per micro-batch, every group (the embedding, 32 layers, the norm and head) is gathered for
  // its forward and again for its backward (FULL_SHARD reshards after the forward), and
  // reduced once: 2 x 34 copies out and 34 chunk_cats, times two micro-batches.
  CHECK(copies_out == 2 * 2 * (layers + 2));
  CHECK(chunk_cats == 2 * (layers + 2));
  // FSDP1 gathers into and reduces from its flat parameter in place: no copies.
  for (const Op& op : v1->ops) {
    CHECK(op.name != "param_copy_out");
    CHECK(op.name != "grad_chunk_cat");
  }
}

TEST_CASE("fsdp2's copies lengthen the step and return every byte", "[fsdp]") {
  const Scenario s1 = Load("1"), s2 = Load("2");
  auto r1 = replay::Simulate(s1, {});
  auto r2 = replay::Simulate(s2, {});
  REQUIRE(r1.ok());
  REQUIRE(r2.ok());
  const report::RunSummary a = report::Summarize(s1, *r1), b = report::Summarize(s2, *r2);
  // The copies run on the compute stream: per micro-batch 2 x 4 B and 6 B per parameter of
  // each of the 8 GPUs' full model, at H100 HBM speed, a few ms; the step must grow.
  CHECK(b.step > a.step);
  CHECK(b.times.compute > a.times.compute);
  for (const auto& l : r2->ledgers) CHECK(l.Transient() == Bytes());
  for (const auto& l : r2->ledgers) CHECK(l.unmatched_frees() == 0);
}

TEST_CASE("fsdp_version belongs to framework fsdp", "[fsdp]") {
  auto loader = config::ScenarioLoader::FromText(config::DataRoot{STEPSIM_SOURCE_DIR},
                                                 R"(schema_version: 1
model: llama3-8b
cluster: {node: dgx-h100, nodes: 1}
parallel: {framework: deepspeed, fsdp_version: 2, zero: 3}
)",
                                                 "fsdp2_test");
  REQUIRE(loader.ok());
  auto s = loader->Load({});
  REQUIRE_FALSE(s.ok());
  CHECK(std::string(s.status().message()).find("fsdp_version belongs to framework fsdp") !=
        std::string::npos);
}

TEST_CASE("plan --framework fsdp2 plans FSDP2, whose ZeRO layouts pay its copies", "[fsdp]") {
  auto plan = [](const char* framework) {
    explore::PlanRequest req;
    req.model = "llama3-8b";
    req.gpus = {"H100-SXM5-80GB"};
    req.max_gpus = 8;
    REQUIRE(explore::SetPlanOption(req, "framework", framework, "--framework").ok());
    auto r = explore::Plan(config::DataRoot{STEPSIM_SOURCE_DIR}, req, {});
    REQUIRE(r.ok());
    return *r;
  };
  explore::PlanRequest req;
  REQUIRE(explore::SetPlanOption(req, "framework", "fsdp2", "--framework").ok());
  CHECK(req.framework == Framework::kFsdp);
  CHECK(req.fsdp_version == 2);
  const absl::Status bad = explore::SetPlanOption(req, "framework", "fsdp3", "--framework");
  CHECK(std::string(bad.message()).find("deepspeed, fsdp, fsdp2 or torchtune") !=
        std::string::npos);
  const explore::PlanResult v1 = plan("fsdp"), v2 = plan("fsdp2");
  auto same_layout = [](int64_t gpus_a, const explore::PlanConfig& a, int64_t gpus_b,
                        const explore::PlanConfig& b) {
    return gpus_a == gpus_b && a.zero == b.zero && a.micro_batch == b.micro_batch &&
           a.recompute == b.recompute && a.tp == b.tp && a.pp == b.pp && a.cp == b.cp &&
           a.pp_chunks == b.pp_chunks;
  };
  // Every ZeRO layout that fits both ways is slower under FSDP2 (its copies run on the
  // compute stream); the Megatron layouts, which leave FSDP behind, are the same: the same
  // step where both replay them, the same lower bound where both leave them out before any
  // replay (ZeRO layouts are faster here, so most are).
  int zero_compared = 0, megatron_compared = 0;
  for (const explore::PlanRejection& a : v1.rejected) {
    for (const explore::PlanRejection& b : v2.rejected) {
      if (a.kind != explore::RejectionKind::kSlower || b.kind != a.kind ||
          !same_layout(a.gpus, a.config, b.gpus, b.config) || a.config.tp * a.config.pp == 1) {
        continue;
      }
      const auto bound = [](const std::string& reason) {
        return reason.substr(0, reason.find(", against"));
      };
      // Which bound rejects a layout (the analytical one, or a short replay's) depends on the
      // fastest fit of its size, which FSDP2's slower ZeRO layouts move: compare like with like.
      const auto kind = [&](const std::string& reason) {
        const std::string b = bound(reason);
        const size_t open = b.find('(');
        return open == std::string::npos ? b : b.substr(open);
      };
      if (kind(a.reason) != kind(b.reason)) continue;
      CHECK(bound(a.reason) == bound(b.reason));
      ++megatron_compared;
    }
  }
  for (const explore::PlanFit& a : v1.fits) {
    for (const explore::PlanFit& b : v2.fits) {
      const bool same =
          same_layout(a.gpus, a.config, b.gpus, b.config) && a.estimated == b.estimated;
      if (!same) continue;
      const bool zero_family = a.config.tp * a.config.pp * a.config.cp == 1 && a.config.zero != 1;
      if (zero_family) {
        CHECK(b.step_s > a.step_s);
        ++zero_compared;
      } else {
        CHECK(b.step_s == a.step_s);
        ++megatron_compared;
      }
    }
  }
  CHECK(zero_compared > 0);
  CHECK(megatron_compared > 0);
}

}  // namespace
}  // namespace sim
