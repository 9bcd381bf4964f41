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

// Lowers Megatron's Llama-2-7B in fp8 under Transformer Engine with `recipe`, on `node`.
absl::StatusOr<OpProgram> Recipe(std::string recipe, std::string node = "dgx-h100",
                                 std::vector<config::Override> more = {}) {
  more.push_back({"training.fp8_recipe", recipe});
  more.push_back({"cluster.node", node});
  return Lower(Megatron("fp8", "transformer_engine", more));
}

TEST_CASE("each fp8 recipe casts what Transformer Engine's quantizers cast", "[fp8]") {
  // qkv of Llama-2-7B at 4,096 tokens: input I = T h, output gradient O = T 3h; TE caches the
  // weight's copy once per step, so the micro-batch casts the input (forward) and the output
  // gradient (backward) only.
  const int64_t in = 4096LL * 4096, out = 4096LL * 3 * 4096;
  struct Expect {
    std::string recipe, node;
    int64_t fwd, bwd;
    int16_t fwd_kernels, bwd_kernels;
  };
  const std::vector<Expect> cases = {
      // delayed on Hopper: cast 3 B; backward cast_transpose 4 B and the saved input's
      // transpose (1 + 1 B), two kernels.
      {"delayed", "dgx-h100", 3 * in, 4 * out + 2 * in, 1, 2},
      // Blackwell's fp8 GEMMs take any layout: no transposes.
      {"delayed", "dgx-b200", 3 * in, 3 * out, 1, 1},
      // current scaling: an amax read (2 B) and an amax and a scale kernel before each cast.
      {"tensorwise", "dgx-h100", 5 * in, 6 * out + 2 * in, 3, 4},
      {"tensorwise", "dgx-b200", 5 * in, 5 * out, 3, 3},
      // block recipes: 2 B read, row- and column-wise fp8 written (2 B) with a scale byte per
      // 32 elements each way (an fp32 per 128 under blockwise), one kernel, no transposes.
      {"blockwise", "dgx-h100", 4 * in + in / 16, 4 * out + out / 16, 1, 1},
      {"mxfp8", "dgx-b200", 4 * in + in / 16, 4 * out + out / 16, 1, 1},
  };
  for (const Expect& e : cases) {
    INFO(e.recipe << " on " << e.node);
    auto p = Recipe(e.recipe, e.node);
    REQUIRE(p.ok());
    const Op& fwd = Find(*p, "qkv", OpPass::kForward);
    const Op& bwd = Find(*p, "qkv", OpPass::kBackward);
    CHECK(fwd.serial_bytes.count() == e.fwd);
    CHECK(bwd.serial_bytes.count() == e.bwd);
    CHECK(fwd.serial_kernels == e.fwd_kernels);
    CHECK(bwd.serial_kernels == e.bwd_kernels);
  }
}

TEST_CASE("each fp8 recipe keeps and casts its own weight copy", "[fp8][memory]") {
  // Per layer: q, k, v, o (4 h^2), gate and up (2 h f), down (f h) of Llama-2-7B in four GEMMs
  // (qkv, the output projection, gate_up, down), cast on the first micro-batch into a copy kept
  // for the step (TE's test_cpu_offload.py sizes it: 1 B per
  // element, 2 B with the transpose Hopper needs; MXFP8 2 (1 + 1/32) B).
  const int64_t w = 4LL * 4096 * 4096 + 3LL * 4096 * 11008;
  auto cast_of = [](const OpProgram& p) {
    for (const Op& op : p.ops) {
      if (op.name == "fp8_weight_cast") return std::pair{op.bytes_moved.count(), op.kernels};
    }
    FAIL("no fp8_weight_cast");
    return std::pair{int64_t{0}, int16_t{0}};
  };
  auto h100 = Recipe("delayed"), b200 = Recipe("delayed", "dgx-b200"),
       current = Recipe("tensorwise"), mx = Recipe("mxfp8", "dgx-b200");
  REQUIRE((h100.ok() && b200.ok() && current.ok() && mx.ok()));
  CHECK(cast_of(*h100) == std::pair{4 * w, int16_t{4}});
  CHECK(cast_of(*b200) == std::pair{3 * w, int16_t{4}});
  CHECK(cast_of(*current) == std::pair{6 * w, int16_t{12}});
  const int64_t mx_bytes = std::llround((2 + 2 * (1 + 1.0 / 32)) * static_cast<double>(w));
  CHECK(cast_of(*mx) == std::pair{mx_bytes, int16_t{4}});
  // The copies, per GPU (32 layers, no TP or PP): the persistent workspace over bf16's.
  auto kept = [](std::string precision, std::string recipe, std::string node) {
    std::vector<config::Override> more = {{"cluster.node", node}};
    if (precision == "fp8") more.push_back({"training.fp8_recipe", recipe});
    auto p = Lower(Megatron(precision, "transformer_engine", more));
    REQUIRE(p.ok());
    Bytes b;
    for (const MemAction& a : p->persistent[0]) {
      if (a.category == MemCategory::kWorkspace) b += a.bytes;
    }
    return b.count();
  };
  const int64_t h100_bf16 = kept("bf16", "", "dgx-h100"), b200_bf16 = kept("bf16", "", "dgx-b200");
  CHECK(kept("fp8", "delayed", "dgx-h100") - h100_bf16 == 32 * 2 * w);
  CHECK(kept("fp8", "tensorwise", "dgx-h100") - h100_bf16 == 32 * 2 * w);
  CHECK(kept("fp8", "delayed", "dgx-b200") - b200_bf16 == 32 * w);
  CHECK(kept("fp8", "mxfp8", "dgx-b200") - b200_bf16 ==
        int64_t{std::llround(2 * (1 + 1.0 / 32) * static_cast<double>(32 * w))});
}

TEST_CASE("current scaling reduces a sequence-parallel input's amax over TP", "[fp8]") {
  // Each TP rank casts its shard before the fp8 all-gather with one scale for the group: an
  // all-reduce (MAX) of one fp32 comes first, per column-parallel GEMM.
  auto count = [](std::string recipe) {
    auto p =
        Recipe(recipe, "dgx-h100", {{"parallel.tp", "2"}, {"parallel.sequence_parallel", "true"}});
    REQUIRE(p.ok());
    int n = 0;
    for (const Op& op : p->ops) {
      if (op.name != "fp8_amax_all_reduce") continue;
      ++n;
      CHECK(p->CollectiveOf(op).tensor.count() == 4);
    }
    return n;
  };
  CHECK(count("delayed") == 0);
  // qkv and gate_up (column-parallel) of 32 layers, in each of the four micro-batches (dp 4).
  CHECK(count("tensorwise") == 32 * 2 * 4);
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
