// Checkpointing policies, loss kernels and model FLOPs against hand-worked values
// (sim/workload/layer_ops.h, sim/workload/loss.h).
#include <catch2/catch.hpp>

#include "sim/config/loaders.h"
#include "sim/replay/replay.h"
#include "sim/report/run_summary.h"
#include "sim/workload/layer_ops.h"
#include "sim/workload/lowering.h"
#include "sim/workload/policy/policy.h"
#include "sim/workload/sharding.h"
#include "tests/llama3_layer.h"

namespace sim {
namespace {

Scenario Load(std::vector<config::Override> overrides) {
  overrides.insert(overrides.begin(),
                   {{"model", STEPSIM_SOURCE_DIR "/tests/golden/tiny-model.yaml"},
                    {"cluster.node", "dgx-h100"},
                    {"cluster.nodes", "1"},
                    {"training.seq_len", "1024"},
                    {"training.global_batch", "8"},
                    {"training.recompute", "none"},
                    {"parallel.framework", "fsdp"},
                    {"parallel.zero", "3"}});
  auto s = config::LoadScenario(config::DataRoot{STEPSIM_SOURCE_DIR},
                                STEPSIM_SOURCE_DIR "/scenarios/default.yaml", overrides);
  REQUIRE(s.ok());
  return *s;
}

report::RunSummary Run(const Scenario& s) {
  auto r = replay::Simulate(s, {});
  REQUIRE(r.ok());
  return report::Summarize(s, *r);
}

// Activation bytes a layer's forward leaves allocated (what it keeps for its backward).
Bytes KeptByLayer(const Scenario& s, int32_t layer) {
  auto program = Lower(s);
  REQUIRE(program.ok());
  Bytes net;
  for (const Op& op : program->ops) {
    if (op.group != layer || op.kind != OpKind::kCompute || op.pass != OpPass::kForward ||
        op.micro_batch != 0)
      continue;
    for (int32_t i = op.mem_begin; i < op.mem_end; ++i) {
      if (program->mem[i].category == MemCategory::kActivations) net += program->mem[i].bytes;
    }
  }
  return net;
}

TEST_CASE("per-op checkpointing keeps what torchtitan's policy caches", "[memory][recompute]") {
  // Llama 3 8B, s = 8192, flash: the layer input x, wq's q, wv's v, the attention output and
  // its fp32 log-sum-exp, w1's output and w2's output.
  const ModelSpec m = Llama3Layer();
  const int64_t T = 8192, h = 4096, kv = 1024, f = 14336, a = 32;
  const ActivationShape shape{T, 1, 1, false, AttentionKernel::kFlash};
  const int64_t op =
      2 * T * h + 2 * T * h + 2 * T * kv + 2 * T * h + 4 * a * T + 2 * T * f + 2 * T * h;
  CHECK(LayerActivationBytes(m, shape, Recompute::kOp).count() == op);
  CHECK(LayerActivationBytes(m, shape, Recompute::kFull).count() == 2 * T * h);
  // none: x, norm1 out, q, k, v, lse, context, the residual (norm2 in), norm2 out, gate, up,
  // the down projection input.
  const int64_t none = 2 * T * h * 6 + 2 * T * kv * 2 + 4 * a * T + 2 * T * f * 3;
  CHECK(LayerActivationBytes(m, shape, Recompute::kNone).count() == none);
  CHECK(2 * T * h < op);
  CHECK(op < none);
}

TEST_CASE("Megatron-Core recompute modules drop what each module's checkpoint discards",
          "[memory][recompute]") {
  // The Llama 3 8B layer above; what a module drops is the difference from selective recompute
  // with no module at all (= none).
  const ModelSpec m = Llama3Layer();
  const int64_t T = 8192, h = 4096, f = 14336, a = 32;
  const ActivationShape shape{T, 1, 1, false, AttentionKernel::kFlash};
  auto dropped = [&](const ModelSpec& model, RecomputeModules modules) {
    return LayerActivationBytes(model, shape, Recompute::kSelective, 0).count() -
           LayerActivationBytes(model, shape, Recompute::kSelective, modules).count();
  };
  using M = RecomputeModule;
  CHECK(LayerActivationBytes(m, shape, Recompute::kSelective, 0) ==
        LayerActivationBytes(m, shape, Recompute::kNone));
  CHECK(dropped(m, ModuleBit(M::kCoreAttn)) == 4 * a * T);  // flash: the log-sum-exp
  // mlp: norm2's output (mlp_in), gate, up and down's input; norm2_in is the checkpoint's input.
  CHECK(dropped(m, ModuleBit(M::kMlp)) == 2 * T * h + 3 * 2 * T * f);
  CHECK(dropped(m, ModuleBit(M::kMlp) | ModuleBit(M::kCoreAttn)) ==
        4 * a * T + 2 * T * h + 6 * T * f);
  // A dense layer has no separate norm (TE fuses them) and no experts.
  CHECK(dropped(m, ModuleBit(M::kLayerNorm) | ModuleBit(M::kMoeAct) | ModuleBit(M::kMoe) |
                       ModuleBit(M::kSharedExperts)) == 0);

  // An MoE layer of E = 64 experts of width fe = 1408, top 6, two shared experts of width fs
  // (no TP, no EP): R = T·k token copies.
  ModelSpec moe = m;
  moe.moe = MoeSpec{64, 6, 1408, 2, 1408};
  const int64_t E = 64, k = 6, fe = 1408, fs = 2 * 1408, R = T * k;
  CHECK(dropped(moe, ModuleBit(M::kLayerNorm)) == 2 * T * h);  // the pre-MLP norm's output
  CHECK(dropped(moe, ModuleBit(M::kMoeAct)) == 2 * R * fe);    // the activation's output
  CHECK(dropped(moe, ModuleBit(M::kSharedExperts)) == 3 * 2 * T * fs);
  // moe: everything after the norm but the checkpoint's input, mlp_in.
  const int64_t moe_layer =
      4 * T * E + 8 * T * k + 2 * R * h + 3 * 2 * R * fe + 2 * T * k * h + 3 * 2 * T * fs;
  CHECK(dropped(moe, ModuleBit(M::kMoe)) == moe_layer);
  CHECK(dropped(moe, ModuleBit(M::kMoe) | ModuleBit(M::kMoeAct) | ModuleBit(M::kSharedExperts)) ==
        moe_layer);
  CHECK(dropped(moe, ModuleBit(M::kMoe) | ModuleBit(M::kLayerNorm)) == moe_layer + 2 * T * h);
}

TEST_CASE("every K-th layer checkpointed, Megatron uniform groups keep one input",
          "[memory][recompute]") {
  const int64_t x = 2 * 1024 * 1024;  // the layer input: 2·T·h bytes
  const Scenario every = Load({{"training.recompute", "full"}, {"training.recompute_every", "2"}});
  const Bytes all = KeptByLayer(Load({}), 1);
  CHECK(KeptByLayer(every, 1) == all);  // layers 1 and 3 keep everything
  CHECK(KeptByLayer(every, 2).count() == x);
  CHECK(KeptByLayer(every, 3) == all);
  CHECK(KeptByLayer(every, 4).count() == x);

  const Scenario uniform = Load({{"parallel.framework", "megatron"},
                                 {"parallel.zero", "1"},
                                 {"training.recompute", "full"},
                                 {"training.recompute_layers", "2"}});
  CHECK(KeptByLayer(uniform, 1).count() == x);  // the group's input
  CHECK(KeptByLayer(uniform, 2).count() == 0);
  CHECK(KeptByLayer(uniform, 3).count() == x);
  const Scenario block = Load({{"parallel.framework", "megatron"},
                               {"parallel.zero", "1"},
                               {"training.recompute", "full"},
                               {"training.recompute_layers", "1"},
                               {"training.recompute_method", "block"}});
  CHECK(KeptByLayer(block, 1).count() == x);  // the first layer of the stage
  CHECK(KeptByLayer(block, 2) == all);
  // The uniform group re-runs both layers at once: more activations at the peak than one by
  // one.
  const Scenario single = Load(
      {{"parallel.framework", "megatron"}, {"parallel.zero", "1"}, {"training.recompute", "full"}});
  CHECK(Run(uniform).category_peaks[static_cast<int>(MemCategory::kActivations)] >
        Run(single).category_peaks[static_cast<int>(MemCategory::kActivations)]);
}

TEST_CASE("each loss kernel peaks at its documented multiple of T·V", "[memory][loss]") {
  // One micro-batch of 1024 tokens, V = 32000: nothing else lives in the logits category.
  const int64_t tv = 1024 * 32000;
  const std::vector<std::pair<const char*, int64_t>> kernels = {{"eager", 12 * tv},
                                                                {"vocab_parallel", 6 * tv},
                                                                {"fused", 2 * tv},
                                                                {"compiled", 4 * tv},
                                                                {"flash_attn", 4 * tv}};
  for (const auto& [kernel, bytes] : kernels) {
    INFO(kernel);
    const auto r = Run(Load({{"training.loss", kernel}}));
    CHECK(r.category_peaks[static_cast<int>(MemCategory::kLogits)].count() == bytes);
  }
  // chunked, n = 8: the bf16 logits, every chunk's fp32 log-softmax and one chunk's copy.
  const auto chunked = Run(Load({{"training.loss", "chunked"}, {"training.loss_chunks", "8"}}));
  CHECK(chunked.category_peaks[static_cast<int>(MemCategory::kLogits)].count() ==
        2 * tv + 4 * tv + 4 * tv / 8);
  // The framework presets: megatron computes its vocab-parallel kernel by default.
  const auto megatron = Run(Load({{"parallel.framework", "megatron"}, {"parallel.zero", "1"}}));
  CHECK(megatron.category_peaks[static_cast<int>(MemCategory::kLogits)].count() == 6 * tv);
}

TEST_CASE("ddp: fp32 states, a bucket copy of the gradients, autocast's 16-bit copies",
          "[memory][ddp]") {
  const Scenario s = Load({{"parallel.framework", "ddp"}, {"parallel.zero", "0"}});
  const auto r = Run(s);
  const int64_t p = r.static_states.weights.count() / 4;  // parameters per GPU
  CHECK(r.static_states.weights.count() == 4 * p);
  CHECK(r.static_states.gradients.count() == 8 * p);
  CHECK(r.static_states.optimizer.count() == 8 * p);
  // Without checkpointing every layer's 16-bit copies are saved for its backward: at the end of
  // the forward all of them (and the head's) are alive.
  int64_t layers = 0;
  for (size_t g = 1; g + 1 < GroupParameters(s).size(); ++g) layers += GroupParameters(s)[g];
  CHECK(r.category_peaks[static_cast<int>(MemCategory::kGatheredParams)].count() >= 2 * layers);
  // Checkpointed, only the running layer's.
  const auto full = Run(Load(
      {{"parallel.framework", "ddp"}, {"parallel.zero", "0"}, {"training.recompute", "full"}}));
  const int64_t head = s.model.vocab * s.model.hidden;
  CHECK(full.category_peaks[static_cast<int>(MemCategory::kGatheredParams)].count() <=
        2 * (GroupParameters(s)[1] + head));
  CHECK(full.category_peaks[static_cast<int>(MemCategory::kGatheredParams)] <
        r.category_peaks[static_cast<int>(MemCategory::kGatheredParams)]);
}

TEST_CASE("ddp with gradient_as_bucket_view holds one fp32 gradient copy", "[memory][ddp]") {
  const auto copy = Run(Load({{"parallel.framework", "ddp"}, {"parallel.zero", "0"}}));
  const auto view = Run(Load({{"parallel.framework", "ddp"},
                              {"parallel.zero", "0"},
                              {"parallel.gradient_as_bucket_view", "true"}}));
  const int64_t p = view.static_states.weights.count() / 4;
  CHECK(view.static_states.gradients.count() == 4 * p);
  CHECK(copy.static_states.gradients.count() == 8 * p);
  // The separate fp32 .grad exists from its layer's backward to the step, so at most all of it
  // is added to the peak.
  CHECK(copy.peak > view.peak);
  CHECK(copy.peak - view.peak <= Bytes::Count(4 * p));
}

// Persistent gradient memory a stage's program allocates before its first op.
Bytes PersistentGradients(const Scenario& s) {
  auto program = Lower(s);
  REQUIRE(program.ok());
  Bytes b;
  for (const MemAction& a : program->persistent[0]) {
    if (a.category == MemCategory::kGradients) b += a.bytes;
  }
  return b;
}

TEST_CASE("ddp's .grad is made by the backward and dropped at the step, its buckets stay",
          "[memory][ddp]") {
  // torch 2.0 on: zero_grad(set_to_none=True). Measured on an H200 (Llama 3.2 3B, fp32 DDP): the
  // step ends holding parameters, buckets and Adam states only (47.94 GiB = 16 B x 3.21e9).
  const Scenario s = Load({{"parallel.framework", "ddp"}, {"parallel.zero", "0"}});
  const auto r = Run(s);
  const int64_t p = r.static_states.weights.count() / 4;
  CHECK(PersistentGradients(s) == Bytes::Count(4 * p));  // the buckets
  CHECK(r.category_peaks[static_cast<int>(MemCategory::kGradients)] == Bytes::Count(8 * p));
  const Scenario view = Load({{"parallel.framework", "ddp"},
                              {"parallel.zero", "0"},
                              {"parallel.gradient_as_bucket_view", "true"}});
  CHECK(PersistentGradients(view) == Bytes::Count(4 * p));  // .grad is a view of them
}

TEST_CASE("a tied embedding has one lazy gradient", "[memory][torchtune]") {
  // GroupParameters counts the shared matrix in the embedding's group and the head's (ZeRO-3
  // gathers it for both); its gradient is made once, by the head's backward.
  const Scenario s = Load({{"model", STEPSIM_SOURCE_DIR "/models/llama3.2-3b.yaml"},
                           {"parallel.framework", "torchtune"},
                           {"parallel.zero", "0"},
                           {"training.recompute", "full"}});
  REQUIRE(s.model.tied_embeddings);
  int64_t p = 0;
  for (int64_t g : GroupTrainable(s)) p += g;
  p -= s.model.vocab * s.model.hidden;
  const auto r = Run(s);
  CHECK(r.category_peaks[static_cast<int>(MemCategory::kGradients)] == Bytes::Count(2 * p));
}

TEST_CASE("AdamW's step holds what its implementation allocates beside the states",
          "[memory][optimizer]") {
  // torch/optim/adamw.py: foreach makes _foreach_sqrt(exp_avg_sqs), a copy of every second
  // moment; loop (foreach=False) holds sqrt() and the quotient of one tensor at a time; fused
  // nothing. ddp's moments are fp32, torchtune's bf16.
  const auto opt_peak = [](const report::RunSummary& r) {
    return r.category_peaks[static_cast<int>(MemCategory::kOptimizer)];
  };
  for (const auto& [framework_name, moment] : {std::pair{"ddp", 4}, std::pair{"torchtune", 2}}) {
    const char* framework = framework_name;  // Clang before 16 captures no structured binding
    const auto with = [&](const char* impl) {
      return Run(Load({{"parallel.framework", framework},
                       {"parallel.zero", "0"},
                       {"training.optimizer_impl", impl}}));
    };
    const auto fused = with("fused"), foreach = with("foreach"), loop = with("loop");
    const Scenario s = Load({{"parallel.framework", framework}, {"parallel.zero", "0"}});
    int64_t p = 0;
    for (int64_t g : GroupTrainable(s)) p += g;
    CHECK(opt_peak(foreach) - opt_peak(fused) == Bytes::Count(moment * p));
    // The largest tensor of the tiny model: its 32000 x 1024 embedding (untied).
    CHECK(opt_peak(loop) - opt_peak(fused) == Bytes::Count(2 * moment * 32000 * 1024));
  }
  // The step's HBM traffic per updated parameter: one fused pass reads p, g, m, v and writes
  // p, m, v (7 accesses); foreach and loop make 20 (torch/optim/adamw.py's separate passes).
  // DDP's states are fp32, torchtune's bf16.
  const auto step_bytes = [](const Scenario& s) {
    auto program = Lower(s);
    REQUIRE(program.ok());
    Bytes b;
    for (const Op& op : program->ops) {
      if (op.pass == OpPass::kStep && op.kind == OpKind::kCompute) b += op.bytes_moved;
    }
    return b;
  };
  for (const auto& [framework, state] : {std::pair{"ddp", 4}, std::pair{"torchtune", 2}}) {
    const Scenario fused = Load({{"parallel.framework", framework},
                                 {"parallel.zero", "0"},
                                 {"training.optimizer_impl", "fused"}});
    const Scenario foreach = Load({{"parallel.framework", framework},
                                   {"parallel.zero", "0"},
                                   {"training.optimizer_impl", "foreach"}});
    int64_t p = 0;
    for (int64_t g : GroupTrainable(fused)) p += g;
    CHECK(step_bytes(fused) == Bytes::Count(7 * state * p));
    CHECK(step_bytes(foreach) == Bytes::Count(20 * state * p));
  }
  // Megatron's step (MegatronPolicy::StepExtraTraffic): over the fp32 master its fused Adam
  // reads the fp32 main_grad, p, m, v (16 B) and writes p, m, v and the bf16 weight (14 B) of
  // each parameter of its shard; the gradient clipping reads the shard's gradients again (4 B);
  // and the step zeroes the whole gradient buffer of the GPU's parameters (4 B each). Without
  // the distributed optimizer (zero 0) the shard is every parameter: 38 B per parameter; with
  // it over DP n, 34 B per shard parameter beside 4 B per parameter held.
  const Scenario mega0 = Load({{"parallel.framework", "megatron"}, {"parallel.zero", "0"}});
  const Scenario mega1 = Load({{"parallel.framework", "megatron"}, {"parallel.zero", "1"}});
  int64_t held = 0;
  for (int64_t g : GroupTrainable(mega0)) held += g;
  CHECK(step_bytes(mega0) == Bytes::Count(38 * held));
  const int64_t dp = mega1.dp(), shard = (held + dp - 1) / dp;
  CHECK(step_bytes(mega1) == Bytes::Count(34 * shard + 4 * held));
  // The presets: PyTorch DDP runs torch.optim.AdamW's default (foreach on CUDA tensors);
  // torchtune's configs set fused: True.
  const auto ddp = Run(Load({{"parallel.framework", "ddp"}, {"parallel.zero", "0"}}));
  const auto ddp_fused = Run(Load({{"parallel.framework", "ddp"},
                                   {"parallel.zero", "0"},
                                   {"training.optimizer_impl", "fused"}}));
  CHECK(opt_peak(ddp) > opt_peak(ddp_fused));
  const auto tune = Run(Load({{"parallel.framework", "torchtune"}, {"parallel.zero", "0"}}));
  const auto tune_fused = Run(Load({{"parallel.framework", "torchtune"},
                                    {"parallel.zero", "0"},
                                    {"training.optimizer_impl", "fused"}}));
  CHECK(opt_peak(tune) == opt_peak(tune_fused));
}

TEST_CASE("model FLOPs count the flash backward as twice its forward", "[flops]") {
  const Scenario s = Load({});
  auto r = replay::Simulate(s, {});
  REQUIRE(r.ok());
  Flops forward, flash_forward;
  for (const Op& op : r->program.ops) {
    if (op.kind != OpKind::kCompute || op.pass != OpPass::kForward) continue;
    forward += op.flops;
    if (op.op_class == OpClass::kAttention) flash_forward += op.flops;
  }
  // Without recompute the hardware FLOPs exceed the model FLOPs by the flash backward's extra
  // half forward, and by nothing else.
  CHECK(r->recompute_flops.count() == 0);
  CHECK(r->hardware_flops.count() - r->model_flops.count() ==
        Approx(0.5 * flash_forward.count()).epsilon(1e-9));
  CHECK(forward.count() > 0);
}

TEST_CASE("the reserved peak is simulated: at least the allocated peak, not a fixed ratio",
          "[memory][allocator]") {
  const auto small = Run(Load({}));
  const auto big = Run(Load({{"training.seq_len", "4096"},
                             {"training.micro_batch", "2"},
                             {"training.global_batch", "16"}}));
  CHECK(small.reserved_peak >= small.peak);
  CHECK(big.reserved_peak >= big.peak);
  CHECK(small.fragmentation != Approx(big.fragmentation).epsilon(0.01));
  // expandable segments change how blocks are laid out, not what is allocated.
  const auto expandable = Run(Load({{"runtime.expandable_segments", "true"}}));
  CHECK(expandable.peak == small.peak);
  CHECK(expandable.reserved_peak >= expandable.peak);
  CHECK(expandable.reserved_peak != small.reserved_peak);
}

}  // namespace
}  // namespace sim

namespace sim {
namespace {

// Workspace bytes a stage's program allocates before its first op.
Bytes PersistentWorkspace(const Scenario& s, int32_t stage) {
  auto program = Lower(s);
  REQUIRE(program.ok());
  Bytes b;
  for (const MemAction& a : program->persistent[static_cast<size_t>(stage)]) {
    if (a.category == MemCategory::kWorkspace) b += a.bytes;
  }
  return b;
}

Scenario MegatronTp2Pp2(std::vector<config::Override> more) {
  std::vector<config::Override> keys = {
      {"model", "llama2-7b"}, {"parallel.framework", "megatron"},
      {"parallel.zero", "1"}, {"parallel.tp", "2"},
      {"parallel.pp", "2"},   {"parallel.sequence_parallel", "true"}};
  keys.insert(keys.end(), more.begin(), more.end());
  return Load(keys);
}

TEST_CASE("Transformer Engine 2.3 on keeps one placeholder gradient per weight shape",
          "[memory][megatron]") {
  // Llama-2-7B at TP 2, bf16 placeholders (TeVersion::CachesDummyWeightGradients): qkv
  // 6144 x 4096, out_proj 4096 x 2048, gate_up 11008 x 4096, down 4096 x 5504 on both stages;
  // the output layer's 16000 x 4096 on the last. Megatron's fp32 main_grad buffers are apart.
  const int64_t layer = 6144 * 4096 + 4096 * 2048 + 11008 * 4096 + 4096 * 5504;
  const int64_t head = 16000 * 4096;
  const Scenario before = MegatronTp2Pp2({{"training.te_version", "2.2"}});
  const Scenario from = MegatronTp2Pp2({{"training.te_version", "2.3.1"}});
  CHECK(PersistentWorkspace(from, 0) - PersistentWorkspace(before, 0) == Bytes::Count(2 * layer));
  CHECK(PersistentWorkspace(from, 1) - PersistentWorkspace(before, 1) ==
        Bytes::Count(2 * (layer + head)));
  // PyTorch's kernels, or a framework without main_grad fusion, keep none.
  CHECK(PersistentWorkspace(MegatronTp2Pp2({{"training.kernel_library", "pytorch"}}), 1) ==
        PersistentWorkspace(before, 1));
  CHECK(PersistentWorkspace(before, 1) == before.cluster.gpu.blas_workspace);
  const Scenario fsdp = Load({{"model", "llama2-7b"},
                              {"parallel.framework", "fsdp"},
                              {"training.kernel_library", "transformer_engine"}});
  CHECK(PersistentWorkspace(fsdp, 0) == fsdp.cluster.gpu.blas_workspace);
}

TEST_CASE("Transformer Engine keeps each fp8 weight's fp8 copy and transpose, fp8 parameters none",
          "[memory][megatron][fp8]") {
  // Llama-2-7B at TP 2, PP 2 (16 layers a stage), TE 2.2 (no placeholder gradients): each
  // layer's fp8 GEMMs hold their weights' fp8 copies and transposes, 1 + 1 B per element of the
  // per-GPU shapes the placeholder test lists (qkv 6144 x 4096, out_proj 4096 x 2048, gate_up
  // 11008 x 4096, down 4096 x 5504). The LM head stays 16-bit (no copy), so both stages hold
  // the same. With training.fp8_params the fp8 weight is the parameter: nothing beside it.
  const int64_t layer = 6144 * 4096 + 4096 * 2048 + 11008 * 4096 + 4096 * 5504;
  const Scenario bf16 = MegatronTp2Pp2({{"training.te_version", "2.2"}});
  const Scenario fp8 =
      MegatronTp2Pp2({{"training.te_version", "2.2"}, {"training.precision", "fp8"}});
  const Scenario params = MegatronTp2Pp2({{"training.te_version", "2.2"},
                                          {"training.precision", "fp8"},
                                          {"training.fp8_params", "true"}});
  for (int32_t stage : {0, 1}) {
    INFO("stage " << stage);
    CHECK(PersistentWorkspace(fp8, stage) - PersistentWorkspace(bf16, stage) ==
          Bytes::Count(2 * 16 * layer));
    CHECK(PersistentWorkspace(params, stage) == PersistentWorkspace(bf16, stage));
  }
  // ZeRO-3-like gathering anew each micro-batch keeps no copy (ActivationShape::
  // te_fp8_weight_cache): FSDP under TE in fp8.
  const Scenario fsdp = Load({{"model", "llama2-7b"},
                              {"parallel.framework", "fsdp"},
                              {"training.precision", "fp8"},
                              {"training.kernel_library", "transformer_engine"}});
  CHECK(PersistentWorkspace(fsdp, 0) == fsdp.cluster.gpu.blas_workspace);
}

TEST_CASE("Transformer Engine's grouped experts share the placeholder cache from 2.10",
          "[memory][megatron][moe]") {
  // tiny-moe at TP 2, EP 2, expert TP 1: the shared expert's gate_up is 1024 x 1024 and its
  // down 1024 x 512; the routed experts' gate_up 2048 x 1024 and down 1024 x 1024, the shape of
  // the shared gate_up, which the cache holds once. So 2.10 adds the experts' gate_up only.
  auto moe = [](const std::string& te) {
    return Load({{"model", STEPSIM_SOURCE_DIR "/tests/golden/tiny-moe.yaml"},
                 {"parallel.framework", "megatron"},
                 {"parallel.zero", "1"},
                 {"parallel.tp", "2"},
                 {"parallel.ep", "2"},
                 {"parallel.etp", "1"},
                 {"parallel.sequence_parallel", "true"},
                 {"training.te_version", te}});
  };
  CHECK(PersistentWorkspace(moe("2.10"), 0) - PersistentWorkspace(moe("2.9"), 0) ==
        Bytes::Count(2 * 2048 * 1024));
}

}  // namespace
}  // namespace sim

namespace sim {
namespace {

TEST_CASE("FSDP2 under a pipeline gathers once per step and reduce-scatters once, as torchtitan",
          "[memory][fsdp][pipeline]") {
  // Llama-2-7B, FSDP2 full_shard, pp 2, dp 4 (no TP or CP: the only gathers and reduce-scatters
  // are data parallelism's). torchtitan keeps the gathered parameters (reshard_after_forward =
  // not pp_enabled) and reduces after the stage's last backward only: 2 B of unsharded
  // parameters, 4 B of unsharded fp32 gradient accumulators, 12/N B of sharded master and Adam
  // states per parameter; and the same traffic whatever the micro-batches.
  auto pipelined = [](const std::string& batch) {
    return Load({{"model", "llama2-7b"},
                 {"training.seq_len", "4096"},
                 {"training.global_batch", batch},
                 {"parallel.fsdp_version", "2"},
                 {"parallel.pp", "2"}});
  };
  const Scenario four = pipelined("16"), eight = pipelined("32");
  REQUIRE(four.micro_batches() == 4);
  REQUIRE(eight.micro_batches() == 8);
  REQUIRE(PlanSharding(four).gathered_once_per_step);
  for (int32_t stage : {0, 1}) {
    const StateSplit st = PersistentStates(four, stage);
    const int64_t p = st.weights.count() / 2;
    CHECK(st.gradients.count() == 4 * p);
    CHECK(st.optimizer.count() == 12 * ((p + 3) / 4));
  }
  auto sent = [](const Scenario& s, CollectiveKind k) {
    auto r = replay::Simulate(s, {});
    REQUIRE(r.ok());
    return r->comm_bytes_sent[static_cast<int>(k)].count();
  };
  CHECK(sent(four, CollectiveKind::kAllGather) > 0);
  CHECK(sent(four, CollectiveKind::kAllGather) == sent(eight, CollectiveKind::kAllGather));
  CHECK(sent(four, CollectiveKind::kReduceScatter) == sent(eight, CollectiveKind::kReduceScatter));
  // Without the pipeline FSDP2 gathers twice per micro-batch (forward and backward): the
  // traffic grows with the micro-batches.
  auto flat = [](const std::string& batch) {
    return Load({{"model", "llama2-7b"},
                 {"training.seq_len", "4096"},
                 {"training.global_batch", batch},
                 {"parallel.fsdp_version", "2"}});
  };
  CHECK(sent(flat("16"), CollectiveKind::kAllGather) > sent(flat("8"), CollectiveKind::kAllGather));
}

}  // namespace
}  // namespace sim
