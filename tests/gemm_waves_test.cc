// Tile and wave quantisation of GEMMs (sim/workload/gemm_waves.h): expected factors worked by
// hand from 128 x 128 output tiles and the SM counts of topologies/gpus.yaml.
#include "sim/workload/gemm_waves.h"

#include <catch2/catch.hpp>

#include "sim/config/loaders.h"
#include "sim/cost/compute_cost.h"
#include "sim/workload/lowering.h"

namespace sim {
namespace {

TEST_CASE("a GEMM's output tiles run in whole waves over the SMs", "[compute]") {
  // GPT-3 175B's QKV under TP 8 on an A100 (Korthikanti's rows): 2,048 tokens x 4,608 columns
  // = 16 x 36 = 576 tiles over 108 SMs: 5.33 waves, so 6, and 6 x 108 = 648 tile-times for
  // 576 tiles' work.
  CHECK(GemmWaveFactor(2048, 4608, 1, 108) == Approx(648.0 / 576));
  // Exactly one full wave: 12 x 9 = 108 tiles.
  CHECK(GemmWaveFactor(12 * 128, 9 * 128, 1, 108) == 1.0);
  // A partial tile costs a whole one: 100 rows fill 100 / 128 of it.
  CHECK(GemmWaveFactor(100, 128, 1, 1) == Approx(128.0 / 100));
  // Grouped GEMMs share the waves: 27 experts of 2 x 2 tiles fill 108 SMs once; 28 need a
  // second wave for 4 tiles.
  CHECK(GemmWaveFactor(256, 256, 27, 108) == 1.0);
  CHECK(GemmWaveFactor(256, 256, 28, 108) == Approx(216.0 / 112));
  // No SM count: no quantisation.
  CHECK(GemmWaveFactor(100, 100, 1, 0) == 1.0);
}

TEST_CASE("a linear layer's backward averages its two gradients' waves", "[compute]") {
  // (rows x inner) . (inner x cols) = (2048 x 12288) . (12288 x 4608) on 108 SMs. Forward:
  // 2048 x 4608, 648 / 576. Backward: the input gradient 2048 x 12288 = 16 x 96 = 1,536 tiles,
  // 14.2 waves, so 15: 1,620 / 1,536; the weight gradient 12288 x 4608 = 96 x 36 = 3,456 tiles,
  // exactly 32 waves: 1. Each is half the backward's FLOPs.
  CHECK(LinearWaveFactor(2048, 12288, 4608, 1, false, false, 108) == Approx(648.0 / 576));
  CHECK(LinearWaveFactor(2048, 12288, 4608, 1, true, false, 108) ==
        Approx(0.5 * 1620.0 / 1536 + 0.5));
  // A frozen weight has no weight gradient.
  CHECK(LinearWaveFactor(2048, 12288, 4608, 1, true, true, 108) == Approx(1620.0 / 1536));
}

TEST_CASE("the lowering gives each GEMM op its waves on the scenario's GPU", "[compute]") {
  // Llama-2-7B on one DGX H100 (132 SMs), 4,096-token sequences: QKV 4096 x 12288 = 32 x 96 =
  // 3,072 tiles, 23.3 waves, so 24: 24 x 132 / 3072 = 1.03125; its backward's gradients
  // 4096 x 4096 (1,024 tiles, 8 waves) and 4096 x 12288 the same ratio. The LM head 4096 x
  // 32000 = 32 x 250 = 8,000 tiles, 61 waves.
  auto s = config::LoadScenario(config::DataRoot{STEPSIM_SOURCE_DIR},
                                STEPSIM_SOURCE_DIR "/scenarios/default.yaml",
                                {{"model", "llama2-7b"},
                                 {"cluster.nodes", "1"},
                                 {"training.global_batch", "8"},
                                 {"training.recompute", "none"}});
  REQUIRE(s.ok());
  REQUIRE(s->cluster.gpu.sms == 132);
  auto p = Lower(*s);
  REQUIRE(p.ok());
  bool qkv = false, head = false, norm = false;
  for (const Op& op : p->ops) {
    if (op.name == "qkv") {
      CHECK(op.waves == Approx(24.0 * 132 / 3072));
      qkv = true;
    }
    if (op.name == "lm_head" && op.pass == OpPass::kForward) {
      CHECK(op.waves == Approx(61.0 * 132 * 128 * 128 / (4096.0 * 32000)));
      head = true;
    }
    if (op.name == "norm1") {
      CHECK(op.waves == 1);  // not a GEMM
      norm = true;
    }
  }
  CHECK((qkv && head && norm));
}

TEST_CASE("the cost model stretches a GEMM's math by its waves", "[compute]") {
  GpuSpec gpu;
  gpu.bf16 = FlopRate::PerSecond(312e12);
  gpu.hbm_bandwidth = Bandwidth::BytesPerSecond(2.0e12);
  gpu.calibration.gemm_k_overhead = 0;
  Op gemm;
  gemm.op_class = OpClass::kGemm;
  gemm.flops = Flops::Count(2.0 * 2048 * 12288 * 4608);
  const Duration launch = gpu.calibration.launch_overhead;
  const double plain = (cost::ComputeDuration(gemm, gpu, Precision::kBf16) - launch).seconds();
  CHECK(plain == Approx(gemm.flops.count() / (312e12 * gpu.calibration.gemm_efficiency)));
  gemm.waves = 1.125f;
  CHECK((cost::ComputeDuration(gemm, gpu, Precision::kBf16) - launch).seconds() ==
        Approx(1.125 * plain));
  // Attention does not take a GEMM's waves.
  gemm.op_class = OpClass::kAttention;
  CHECK((cost::ComputeDuration(gemm, gpu, Precision::kBf16) - launch).seconds() ==
        Approx(gemm.flops.count() / (312e12 * gpu.calibration.attention_efficiency)));
}

}  // namespace
}  // namespace sim
