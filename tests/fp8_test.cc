// FP8 as Transformer Engine runs it (sim/cost/compute_cost.h, sim/workload/layer_ops.h): only the
// layers' GEMMs at the fp8 rate, each with its cast kernels; attention and the LM head in bf16.
#include <catch2/catch.hpp>

#include "sim/config/loaders.h"
#include "sim/cost/compute_cost.h"
#include "sim/workload/layer_ops.h"
#include "sim/workload/lowering.h"
#include "sim/workload/sharding.h"

namespace sim {
namespace {

Scenario Load(const std::string& precision) {
  auto s = config::LoadScenario(config::DataRoot{STEPSIM_SOURCE_DIR},
                                STEPSIM_SOURCE_DIR "/scenarios/default.yaml",
                                {{"model", "llama2-7b"},
                                 {"cluster.nodes", "1"},
                                 {"training.global_batch", "8"},
                                 {"training.precision", precision}});
  REQUIRE(s.ok());
  return *s;
}

const Op& Find(const OpProgram& p, absl::string_view name, OpPass pass) {
  for (const Op& op : p.ops) {
    if (op.name == name && op.pass == pass && op.group.value_or(0) >= 1) return op;
  }
  FAIL("no op " << name);
  return p.ops.front();
}

// Llama-2-7B under Megatron (ZeRO-1) on one 8-GPU node, 4,096-token sequences, no recompute, two
// micro-batches per step, in `precision` with `library`'s kernels, and `more` keys.
Scenario Megatron(std::string precision, std::string library,
                  std::vector<config::Override> more = {}) {
  std::vector<config::Override> keys = {{"model", "llama2-7b"},
                                        {"cluster.nodes", "1"},
                                        {"training.global_batch", "16"},
                                        {"training.recompute", "none"},
                                        {"parallel.framework", "megatron"},
                                        {"parallel.zero", "1"},
                                        {"training.precision", precision},
                                        {"training.kernel_library", library}};
  keys.insert(keys.end(), more.begin(), more.end());
  auto s = config::LoadScenario(config::DataRoot{STEPSIM_SOURCE_DIR},
                                STEPSIM_SOURCE_DIR "/scenarios/default.yaml", keys);
  REQUIRE(s.ok());
  return *s;
}

TEST_CASE("fp8 GEMMs pay their casts, attention and the LM head stay bf16", "[fp8]") {
  const Scenario s = Load("fp8");
  auto p = Lower(s);
  REQUIRE(p.ok());
  const GpuSpec& gpu = s.cluster.gpu;
  const GpuCalibration& c = gpu.calibration;
  // qkv of Llama-2-7B: T = 4096 tokens, h = 4096, 3h columns.
  const double rows = 4096, inner = 4096, cols = 3 * 4096;
  const Op& qkv = Find(*p, "qkv", OpPass::kForward);
  CHECK(qkv.serial_bytes.count() == 3 * (rows * inner + inner * cols));
  const Op& qkv_bwd = Find(*p, "qkv", OpPass::kBackward);
  CHECK(qkv_bwd.serial_bytes.count() == 4 * rows * cols + 2 * rows * inner + 2 * inner * cols);
  // The forward: math at the fp8 rate, the roofline as for bf16, then two casts at HBM speed.
  Op plain = qkv;
  plain.serial_bytes = Bytes();
  const double cast =
      qkv.serial_bytes.count() / (gpu.hbm_bandwidth.bytes_per_s() * c.memory_efficiency) +
      2 * c.launch_overhead.seconds();
  CHECK(cost::ComputeDuration(qkv, gpu, Precision::kFp8).seconds() ==
        Approx(cost::ComputeDuration(plain, gpu, Precision::kFp8).seconds() + cast));
  CHECK(cost::ComputeDuration(plain, gpu, Precision::kFp8) <
        cost::ComputeDuration(plain, gpu, Precision::kBf16));
  // The LM head and flash attention run at the bf16 rate whatever the training precision.
  const Op& head = Find(*p, "lm_head", OpPass::kForward);
  CHECK(head.keep_16bit);
  CHECK(head.serial_bytes == Bytes());
  CHECK(cost::ComputeDuration(head, gpu, Precision::kFp8) ==
        cost::ComputeDuration(head, gpu, Precision::kBf16));
  const Op& attn = Find(*p, "flash_attention", OpPass::kForward);
  CHECK(cost::ComputeDuration(attn, gpu, Precision::kFp8) ==
        cost::ComputeDuration(attn, gpu, Precision::kBf16));
  // bf16 training has no casts.
  auto b = Lower(Load("bf16"));
  REQUIRE(b.ok());
  CHECK(Find(*b, "qkv", OpPass::kForward).serial_bytes == Bytes());
}

TEST_CASE("Transformer Engine saves a linear layer's fp8 input for its weight gradient",
          "[fp8][memory]") {
  // Megatron's layers are TE's (kernel library transformer_engine): in fp8 each linear layer
  // keeps the fp8 copy of its input its GEMM read, 1 B per element; PyTorch-kernel fp8 (and
  // bf16) keep the 16-bit input. Other saved tensors (attention's, the norms') are unchanged.
  auto load = [](std::string precision, std::string library) {
    const Scenario s = Megatron(precision, library);
    return LayerForwardOps(s.model, ScenarioShape(s));
  };
  auto saved = [](const std::vector<LayerOp>& ops, absl::string_view op, absl::string_view t) {
    for (const LayerOp& o : ops) {
      for (const SavedTensor& x : o.saves) {
        if (o.name == op && x.name == t) return x.bytes.count();
      }
    }
    FAIL("no saved tensor " << t << " of " << op);
    return int64_t{0};
  };
  const auto te = load("fp8", "transformer_engine"), torch = load("fp8", "pytorch"),
             bf16 = load("bf16", "transformer_engine");
  // T = 4096 tokens, h = 4096, Llama-2-7B's ffn 11008.
  CHECK(saved(torch, "qkv", "qkv_in") == 2 * 4096 * 4096);
  CHECK(saved(bf16, "qkv", "qkv_in") == 2 * 4096 * 4096);
  CHECK(saved(te, "qkv", "qkv_in") == 4096 * 4096);
  CHECK(saved(te, "down", "fc2_in") == 4096 * 11008);
  CHECK(saved(te, "flash_attention", "q") == saved(torch, "flash_attention", "q"));
}

TEST_CASE("Transformer Engine casts each fp8 weight once per step", "[fp8]") {
  // Megatron passes is_first_microbatch: TE casts and transposes a layer's weights on the
  // step's first micro-batch and keeps the copies; every micro-batch's GEMM casts its input
  // (and, backward, its output gradient) only. PyTorch-kernel fp8 casts the weight each time.
  const Scenario te = Megatron("fp8", "transformer_engine");
  auto p = Lower(te);
  REQUIRE(p.ok());
  const double rows = 4096, inner = 4096, cols = 3 * 4096;  // qkv of Llama-2-7B
  CHECK(Find(*p, "qkv", OpPass::kForward).serial_bytes.count() == 3 * rows * inner);
  CHECK(Find(*p, "qkv", OpPass::kBackward).serial_bytes.count() ==
        4 * rows * cols + 2 * rows * inner);
  // One cast per layer, in the first micro-batch only: q, k, v, o (4 h^2), gate and up
  // (2 h f) and down (f h), 4 B per weight element (2 read, 1 + 1 written).
  int casts = 0;
  for (const Op& op : p->ops) {
    if (op.name != "fp8_weight_cast") continue;
    ++casts;
    CHECK(op.micro_batch == 0);
    CHECK(op.bytes_moved.count() == 4 * (4 * 4096 * 4096 + 3 * 4096 * 11008));
  }
  CHECK(casts == 32);
  auto torch = Lower(Megatron("fp8", "pytorch"));
  REQUIRE(torch.ok());
  CHECK(Find(*torch, "qkv", OpPass::kForward).serial_bytes.count() ==
        3 * (rows * inner + inner * cols));
  for (const Op& op : torch->ops) CHECK(op.name != "fp8_weight_cast");
}

TEST_CASE("Transformer Engine gathers a column-parallel layer's input in fp8", "[fp8]") {
  // Sequence parallelism: the norm's output is cast to fp8, then all-gathered over TP (TE's
  // _LayerNormLinear); PyTorch-kernel fp8 gathers it in 16 bits. The row-parallel layers'
  // reduce-scatters carry 16-bit outputs either way.
  auto gathered = [](std::string library, absl::string_view before) {
    auto p = Lower(
        Megatron("fp8", library, {{"parallel.tp", "2"}, {"parallel.sequence_parallel", "true"}}));
    REQUIRE(p.ok());
    // The collective issued right before the forward's `before` op of the first layer.
    const Op* last = nullptr;
    for (const Op& op : p->ops) {
      if (op.collective && op.pass == OpPass::kForward) last = &op;
      if (op.name == before && op.pass == OpPass::kForward && op.group == 1) break;
    }
    REQUIRE(last != nullptr);
    return std::pair{std::string(last->name), p->CollectiveOf(*last).tensor.count()};
  };
  // The gathered tensor: 4,096 tokens x h 4,096, 2 B each (2^25) or 1 B in fp8 (2^24).
  CHECK(gathered("pytorch", "qkv") == std::pair{std::string("tp_all_gather"), int64_t{1} << 25});
  CHECK(gathered("transformer_engine", "qkv") ==
        std::pair{std::string("tp_all_gather"), int64_t{1} << 24});
  CHECK(gathered("transformer_engine", "attn_residual") ==
        std::pair{std::string("tp_reduce_scatter"), int64_t{1} << 25});
}

TEST_CASE("store_param_remainders keeps 2 B of master weight per parameter", "[fp8][memory]") {
  // NeMo's distributed_fused_adam with a bf16 model: the fp32 master is the bf16 weight plus a
  // 16-bit remainder (12 B of optimizer state per parameter become 10).
  auto states = [](std::string remainders) {
    return PersistentStates(
        Megatron("bf16", "transformer_engine", {{"parallel.store_param_remainders", remainders}}),
        0);
  };
  const StateSplit off = states("false"), on = states("true");
  CHECK(on.weights == off.weights);
  CHECK(on.gradients == off.gradients);
  // master + m + v, sharded over the same DP group: (2 + 4 + 4) / (4 + 4 + 4).
  CHECK(static_cast<double>(on.optimizer.count()) ==
        Approx(static_cast<double>(off.optimizer.count()) * 10.0 / 12.0).epsilon(1e-6));
}

}  // namespace
}  // namespace sim
