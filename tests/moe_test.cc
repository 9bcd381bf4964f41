// Mixture-of-experts models and expert parallelism (sim/spec/model.h MoeSpec,
// sim/workload/params.h, layer_ops.h, sharding.h) against hand-worked values from the models'
// published shapes.
#include <catch2/catch.hpp>
#include <tuple>

#include "sim/base/bad_input.h"
#include "sim/config/catalog.h"
#include "sim/config/loaders.h"
#include "sim/explore/sweep_run.h"
#include "sim/replay/replay.h"
#include "sim/report/run_summary.h"
#include "sim/report/sweep_report.h"
#include "sim/workload/layer_ops.h"
#include "sim/workload/lowering.h"
#include "sim/workload/moe_routing.h"
#include "sim/workload/params.h"
#include "sim/workload/placement.h"
#include "sim/workload/sharding.h"

namespace sim {
namespace {

ModelSpec Model(const char* name) {
  auto m = config::LoadModel(config::DataRoot{STEPSIM_SOURCE_DIR}, name);
  INFO(m.status().message());
  REQUIRE(m.ok());
  return *m;
}

// Mixtral-8x7B on four DGX H100 (the default scenario's cluster), Megatron, distributed
// optimizer.
absl::StatusOr<Scenario> Load(std::vector<config::Override> overrides) {
  overrides.insert(overrides.begin(), {{"model", "mixtral-8x7b"},
                                       {"parallel.framework", "megatron"},
                                       {"parallel.zero", "1"},
                                       {"training.global_batch", "64"}});
  return config::LoadScenario(config::DataRoot{STEPSIM_SOURCE_DIR},
                              STEPSIM_SOURCE_DIR "/scenarios/default.yaml", overrides);
}

Scenario Must(std::vector<config::Override> overrides) {
  auto s = Load(std::move(overrides));
  INFO(s.status().message());
  REQUIRE(s.ok());
  return *s;
}

double Flops(const std::vector<LayerOp>& ops, absl::string_view name) {
  for (const LayerOp& op : ops) {
    if (op.name == name) return op.flops.count();
  }
  FAIL("no op " << name);
  return 0;
}

TEST_CASE("MoE parameter counts equal the published totals and active counts", "[moe]") {
  // Mixtral-8x7B per layer: attention 2·4096² + 2·4096·1024 = 41,943,040; 8 SwiGLU experts of
  // 3·4096·14336 = 176,160,768; router 4096·8; two RMSNorms 2·4096. Embedding and head
  // 2·32000·4096, final norm 4096.
  const int64_t attention = 2 * 4096 * 4096 + 2 * 4096 * 1024, expert = 3 * 4096 * 14336;
  const int64_t layer = attention + 8 * expert + 4096 * 8 + 2 * 4096;
  const ParameterCount c = CountParameters(Model("mixtral-8x7b"));
  CHECK(c.total == 32 * layer + 2 * 32000 * 4096 + 4096);
  CHECK(c.expert_per_layer == 8 * expert);
  CHECK(c.active == c.total - 32 * 6 * expert);  // two of eight experts per token
  // Published: 46.7B total, 12.9B active (Mixtral-8x7B model card; Jiang et al. 2024: 47B/13B);
  // 140.6B and 39B (Mixtral-8x22B); 14.3B and 2.7B (Qwen1.5-MoE-A2.7B, its shared expert and 60
  // fine-grained experts, top-4).
  CHECK(static_cast<double>(c.total) / 1e9 == Approx(46.7).epsilon(0.001));
  CHECK(static_cast<double>(c.active) / 1e9 == Approx(12.9).epsilon(0.005));
  const ParameterCount big = CountParameters(Model("mixtral-8x22b"));
  CHECK(static_cast<double>(big.total) / 1e9 == Approx(140.6).epsilon(0.001));
  CHECK(static_cast<double>(big.active) / 1e9 == Approx(39.0).epsilon(0.01));
  const ParameterCount qwen = CountParameters(Model("qwen1.5-moe-a2.7b"));
  CHECK(static_cast<double>(qwen.total) / 1e9 == Approx(14.3).epsilon(0.002));
  CHECK(static_cast<double>(qwen.active) / 1e9 == Approx(2.7).epsilon(0.01));
  // Qwen3 (heads 128 wide, a·d = 2·h on the 235B): per layer attention 2·h·a·d + 2·h·k·d,
  // 128 experts of 3·h·f_e, router h·128, two RMSNorms; untied embedding and head. Published
  // (Qwen3 Technical Report, Table 2): 30.5B / 3.3B and 235B / 22B.
  for (const auto& [name, layers, h, f_e, total, active] :
       {std::tuple{"qwen3-30b-a3b", 48, 2048, 768, 30.5, 3.3},
        std::tuple{"qwen3-235b-a22b", 94, 4096, 1536, 235.0, 22.0}}) {
    INFO(name);
    const ModelSpec m = Model(name);
    const int64_t q = m.heads * 128, kv = 4 * 128, e = 3 * int64_t{h} * f_e;
    const int64_t attn = 2 * int64_t{h} * q + 2 * int64_t{h} * kv;
    const int64_t rest = int64_t{h} * 128 + 2 * int64_t{h};
    const int64_t ends = 2 * int64_t{151936} * h + h;
    const ParameterCount qc = CountParameters(m);
    CHECK(qc.total == layers * (attn + 128 * e + rest) + ends);
    CHECK(qc.active == layers * (attn + 8 * e + rest) + ends);
    CHECK(static_cast<double>(qc.total) / 1e9 == Approx(total).epsilon(0.002));
    CHECK(static_cast<double>(qc.active) / 1e9 == Approx(active).epsilon(0.02));
  }
  // Its attention runs a·d = 8192 wide on h = 4096 (one 4096-token sequence, no TP).
  ActivationShape one;
  one.seq_len = 4096;
  const std::vector<LayerOp> ops = LayerForwardOps(Model("qwen3-235b-a22b"), one);
  CHECK(Flops(ops, "qkv") == Approx(2.0 * 4096 * 4096 * (8192 + 2 * 512)));
  CHECK(Flops(ops, "out_proj") == Approx(2.0 * 4096 * 8192 * 4096));
  CHECK(Flops(ops, "flash_attention") == Approx(4.0 * 4096 * 4096 * 8192 / 2));
  // A dense model is all active.
  const ParameterCount dense = CountParameters(Model("llama3-8b"));
  CHECK(dense.active == dense.total);
  CHECK(dense.expert_per_layer == 0);
}

TEST_CASE("MoE on some layers: Llama 4 Maverick alternates dense and MoE layers", "[moe]") {
  // 48 layers, MoE on 1, 3, ..., 47 (first_dense_layers 1, layer_freq 2). Attention
  // 2·5120·5120 + 2·5120·1024; a MoE layer's MLP 128 routed + 1 shared SwiGLU expert of
  // 3·5120·8192 and a router 5120·128; a dense layer's MLP 3·5120·16384; RMSNorms. Published:
  // 400B total, 17B active (Meta, The Llama 4 herd).
  const ModelSpec m = Model("llama4-maverick");
  CHECK(m.moe_layers() == 24);
  CHECK_FALSE(m.IsMoeLayer(0));
  CHECK(m.IsMoeLayer(1));
  CHECK(m.IsMoeLayer(47));
  const int64_t attn = 2 * 5120 * 5120 + 2 * 5120 * 1024, expert = 3 * 5120 * 8192;
  const int64_t norms = 2 * 5120, router = 5120 * 128, dense_mlp = 3 * 5120 * 16384;
  const int64_t ends = 2 * int64_t{202048} * 5120 + 5120;
  const ParameterCount c = CountParameters(m);
  CHECK(c.total ==
        24 * (attn + 129 * expert + router + norms) + 24 * (attn + dense_mlp + norms) + ends);
  CHECK(c.active ==
        24 * (attn + 2 * expert + router + norms) + 24 * (attn + dense_mlp + norms) + ends);
  CHECK(static_cast<double>(c.total) / 1e9 == Approx(400.0).epsilon(0.002));
  CHECK(static_cast<double>(c.active) / 1e9 == Approx(17.0).epsilon(0.011));
  // EP 8 on 32 GPUs: the experts (1/8 per GPU) only in the MoE layers' groups; the token
  // all-to-alls only around MoE layers (forward, full recompute, backward; 2 micro-batches).
  const Scenario s = Must({{"model", "llama4-maverick"}, {"parallel.ep", "8"}});
  const std::vector<int64_t> experts = GroupExpertParameters(s);
  CHECK(experts[1] == 0);  // layer 0, dense
  CHECK(experts[2] == 128 * expert / 8);
  const std::vector<int64_t> params = GroupParameters(s);
  CHECK(params[1] == attn + dense_mlp + norms);
  CHECK(params[2] == attn + expert + router + norms + 128 * expert / 8);
  auto p = Lower(s);
  REQUIRE(p.ok());
  int64_t dispatches = 0, routers = 0, dense_down = 0;
  for (const Op& op : p->ops) {
    dispatches += op.name == "ep_dispatch";
    routers += op.name == "router" && op.pass == OpPass::kForward;
    dense_down += op.name == "down" && op.pass == OpPass::kForward;
  }
  CHECK(dispatches == 3 * 24 * 2);
  CHECK(routers == 24 * 2);
  CHECK(dense_down == 24 * 2);
}

TEST_CASE("DeepSeek-V3: multi-head latent attention and three dense layers", "[moe]") {
  // Per layer MLA (h 7168, 128 heads): down 7168 × (1536 + 512 + 64), latent norms 1536 + 512,
  // q up 1536 × 128·192, kv up 512 × 128·(128 + 128), out 128·128 × 7168. Layers 0-2 dense
  // (SwiGLU 18432); 58 MoE layers of 256 routed + 1 shared SwiGLU experts of 2048 and a router
  // 7168 × 256. Published (DeepSeek-V3 Technical Report): 671B total, 37B activated.
  const ModelSpec m = Model("deepseek-v3");
  const int64_t h = 7168;
  const int64_t mla = h * 2112 + 2048 + 1536 * 128 * 192 + 512 * 128 * 256 + 128 * 128 * h;
  const int64_t expert = 3 * h * 2048, norms = 2 * h, router = h * 256;
  const int64_t dense = mla + 3 * h * 18432 + norms;
  const int64_t ends = 2 * int64_t{129280} * h + h;
  const ParameterCount c = CountParameters(m);
  CHECK(c.attention_per_layer == mla);
  CHECK(c.total == 3 * dense + 58 * (mla + 257 * expert + router + norms) + ends);
  CHECK(c.active == 3 * dense + 58 * (mla + 9 * expert + router + norms) + ends);
  CHECK(static_cast<double>(c.total) / 1e9 == Approx(671.0).epsilon(0.001));
  CHECK(static_cast<double>(c.active) / 1e9 == Approx(37.0).epsilon(0.02));
  // One 4096-token sequence on TP 2: the down projection replicated, the rest by heads; the
  // attention core over 192-wide queries and keys and 128-wide values, causal.
  ActivationShape tp2;
  tp2.seq_len = 4096;
  tp2.tp = 2;
  const std::vector<LayerOp> ops = LayerForwardOps(m, tp2, /*moe_layer=*/false);
  const double t = 4096;
  CHECK(Flops(ops, "mla_down") == Approx(2 * t * h * 2112));
  CHECK(Flops(ops, "q_up") == Approx(2 * t * 1536 * 128 * 192 / 2));
  CHECK(Flops(ops, "kv_up") == Approx(2 * t * 512 * 128 * 256 / 2));
  CHECK(Flops(ops, "flash_attention") == Approx(2 * t * t * 128 * (192 + 128) / 2 / 2));
  CHECK(Flops(ops, "out_proj") == Approx(2 * t * 128 * 128 * h / 2));
  CHECK(Flops(ops, "down") == Approx(2 * t * 18432 / 2 * h));
  // Per GPU under TP 2: the down projection and the norms whole, the rest halved.
  const Scenario s = Must(
      {{"model", "deepseek-v3"}, {"parallel.tp", "2"}, {"parallel.sequence_parallel", "true"}});
  const int64_t replicated = h * 2112 + 2048 + norms;
  CHECK(GroupParameters(s)[1] == (mla - h * 2112 - 2048 + 3 * h * 18432) / 2 + replicated);
  // What MLA is not modelled with is refused at its key.
  auto cp = Load({{"model", "deepseek-v3"}, {"parallel.cp", "2"}});
  REQUIRE_FALSE(cp.ok());
  CHECK_THAT(std::string(cp.status().message()),
             Catch::Contains("parallel.cp") && Catch::Contains("latent attention"));
  auto eager = Load({{"model", "deepseek-v3"}, {"training.attention", "eager"}});
  REQUIRE_FALSE(eager.ok());
  CHECK_THAT(std::string(eager.status().message()), Catch::Contains("training.attention"));
}

TEST_CASE("balanced routing: an MoE layer computes top-k dense MLPs of the expert width", "[moe]") {
  const ModelSpec moe = Model("qwen1.5-moe-a2.7b");
  ModelSpec dense = moe;
  dense.moe.reset();
  dense.ffn_hidden = moe.moe->expert_ffn_hidden;
  const int64_t s = 4096, b = 2, k = moe.moe->top_k, h = moe.hidden;
  for (int64_t ep : {1, 4}) {
    INFO("ep " << ep);
    const ActivationShape shape{s, b, 1, false, AttentionKernel::kFlash, 1, ep};
    const auto m = LayerForwardOps(moe, shape);
    const auto d = LayerForwardOps(dense, shape);
    // The routed experts: k times the dense MLP's gate_up and down, whatever the EP degree.
    CHECK(Flops(m, "expert_gate_up") == Approx(k * Flops(d, "gate_up")));
    CHECK(Flops(m, "expert_down") == Approx(k * Flops(d, "down")));
    // The router: one (T × h) · (h × E) GEMM.
    CHECK(Flops(m, "router") == Approx(2.0 * s * b * h * moe.moe->experts));
    // The shared expert: a dense MLP of its own width (5632) on every token.
    CHECK(Flops(m, "shared_down") == Approx(2.0 * s * b * 5632 * h));
    // Attention is untouched.
    CHECK(Flops(m, "qkv") == Flops(d, "qkv"));
  }
}

TEST_CASE("the routed experts run as grouped GEMMs: every local expert's weights, its own rows",
          "[moe]") {
  // Qwen1.5-MoE-A2.7B: 60 experts of width 1408, top 4. With EP e each rank runs 60 / e experts
  // over the T·k token copies it receives (balanced): the GEMM reads all their weights, and each
  // expert's weight gradient reduces over its T·k·e/60 rows.
  const ModelSpec m = Model("qwen1.5-moe-a2.7b");
  const int64_t s = 4096, b = 2, k = 4, h = m.hidden, fe = 1408, T = s * b;
  for (int64_t ep : {1, 4}) {
    INFO("ep " << ep);
    const int64_t local = 60 / ep;
    const ActivationShape shape{s, b, 1, false, AttentionKernel::kFlash, 1, ep};
    int found = 0;
    for (const LayerOp& op : LayerForwardOps(m, shape)) {
      if (op.name != "expert_down") continue;
      ++found;
      CHECK(op.gemm_rows == T * k / local);
      CHECK(op.gemm_inner == fe);
      CHECK(op.bytes_moved.count() == 2 * (T * k * fe + local * fe * h + T * k * h));
    }
    CHECK(found == 1);
  }
}

TEST_CASE("Megatron-Core sorts the routed tokens by local expert and TE runs a GEMM per expert",
          "[moe]") {
  // Mixtral-8x7B (top 2 of 8 experts, h 4096) on 32 GPUs, EP 4: two experts per GPU. The
  // all-to-all dispatcher's "Permutation 2" copies the T·k token copies a GPU receives (4096 ·
  // 2, balanced) once after the dispatch and once before the combine, 2 B each read and written;
  // each copy's backward is the inverse copy, not twice the traffic. TE's GroupedLinear
  // launches one GEMM per local expert.
  const int64_t copies = 4096 * 2, h = 4096;
  const Scenario s = Must({{"parallel.ep", "4"}});
  const std::vector<LayerOp> ops = LayerForwardOps(s.model, ScenarioShape(s));
  std::vector<std::string> names;
  for (const LayerOp& op : ops) names.emplace_back(op.name);
  const auto at = [&](const char* n) {
    return std::find(names.begin(), names.end(), n) - names.begin();
  };
  REQUIRE(at("sort_chunks") < static_cast<std::ptrdiff_t>(ops.size()));
  CHECK(at("permute") < at("sort_chunks"));
  CHECK(at("sort_chunks") < at("expert_gate_up"));
  CHECK(at("expert_down") < at("unsort_chunks"));
  CHECK(at("unsort_chunks") < at("unpermute"));
  for (const char* n : {"sort_chunks", "unsort_chunks"}) {
    const LayerOp& op = ops[at(n)];
    CHECK(op.bytes_moved.count() == 2 * 2 * copies * h);
    REQUIRE(op.backward_bytes.has_value());
    CHECK(*op.backward_bytes == op.bytes_moved);
  }
  CHECK(ops[at("expert_gate_up")].kernels == 2);
  CHECK(ops[at("expert_down")].kernels == 2);

  // One expert per GPU (EP 8) sorts nothing; FSDP has no such dispatcher, and PyTorch's
  // kernels run the grouped GEMM as one.
  const Scenario ep8 = Must({{"parallel.ep", "8"}});
  for (const LayerOp& op : LayerForwardOps(ep8.model, ScenarioShape(ep8))) {
    CHECK(op.name != "sort_chunks");
  }
  const Scenario fsdp = Must({{"parallel.framework", "fsdp"},
                              {"parallel.ep", "4"},
                              {"training.kernel_library", "pytorch"}});
  for (const LayerOp& op : LayerForwardOps(fsdp.model, ScenarioShape(fsdp))) {
    CHECK(op.name != "sort_chunks");
    if (op.name == "expert_down") CHECK(op.kernels == 1);
  }
}

TEST_CASE("expert parallelism shards the experts and their optimizer states", "[moe]") {
  const Scenario s = Must({{"parallel.ep", "8"}});
  const ParameterCount c = CountParameters(s.model);
  const int64_t experts = c.expert_per_layer * 32, dense = c.total - experts;
  // Each GPU holds the dense parameters and 1/8 of the experts.
  const int64_t local = dense + experts / 8;
  const StateSplit st = PersistentStates(s);
  CHECK(st.weights == Bytes::Count(2 * local));
  // Megatron: fp32 main_grad on every parameter it holds.
  CHECK(st.gradients == Bytes::Count(4 * local));
  // Distributed optimizer: fp32 master + Adam moments (12 B) over DP = 32 for the dense
  // parameters, over the expert data-parallel group (32 / 8 = 4 ranks) for the experts.
  CHECK(static_cast<double>(st.optimizer.count()) ==
        Approx(12.0 * dense / 32 + 12.0 * experts / 8 / 4).epsilon(1e-6));
  // Without EP every GPU holds every expert; the states shard over all 32.
  const StateSplit one = PersistentStates(Must({}));
  CHECK(one.weights == Bytes::Count(2 * c.total));
  CHECK(static_cast<double>(one.optimizer.count()) == Approx(12.0 * c.total / 32).epsilon(1e-6));
}

TEST_CASE("expert gradients are reduced and gathered over the expert data-parallel group",
          "[moe]") {
  // Megatron distributed optimizer over 32 GPUs, EP 8: the dense parameters' fp32 main_grad is
  // reduce-scattered over DP = 32 and the updated bf16 parameters all-gathered over it; the
  // experts' (1/8 of them on each GPU) over their expert-DP group, 32 / 8 = 4 GPUs, one per
  // node (ranks 0, 8, 16, 24). A ring moves (n - 1)/n of the tensor per GPU.
  const Scenario s = Must({{"parallel.ep", "8"}});
  const ParameterCount c = CountParameters(s.model);
  const double experts = static_cast<double>(c.expert_per_layer) * 32 / 8;
  const double dense = static_cast<double>(c.total - c.expert_per_layer * 32);
  const Placement place(s);
  const CommGroup edp = place.ExpertDataGroup(1, 8);
  CHECK(edp.size == 4);
  CHECK(edp.stride == 8);
  CHECK(edp.nodes == 4);
  auto r = replay::Simulate(s, {});
  REQUIRE(r.ok());
  const report::RunSummary sum = report::Summarize(s, *r);
  CHECK(static_cast<double>(sum.Sent(CollectiveKind::kReduceScatter).count()) ==
        Approx(4 * dense * 31 / 32 + 4 * experts * 3 / 4).epsilon(1e-6));
  CHECK(static_cast<double>(sum.Sent(CollectiveKind::kAllGather).count()) ==
        Approx(2 * dense * 31 / 32 + 2 * experts * 3 / 4).epsilon(1e-6));
}

TEST_CASE("an EP step sends the token all-to-alls and replays within memory", "[moe]") {
  // Two micro-batches per rank (64 sequences over 32 GPUs), 32 layers, 4096 tokens, top-2,
  // hidden 4096, bf16: each all-to-all's buffer is 2·4096·2·4096 B, 7/8 of it sent off-rank.
  const double buffer = 2.0 * 4096 * 2 * 4096, sent = buffer * 7 / 8;
  for (const char* recompute : {"none", "full"}) {
    INFO(recompute);
    const Scenario s = Must({{"parallel.ep", "8"}, {"training.recompute", recompute}});
    auto r = replay::Simulate(s, {});
    REQUIRE(r.ok());
    const report::RunSummary sum = report::Summarize(s, *r);
    // Dispatch and combine in the forward and in the backward; full recompute re-runs the
    // forward's two.
    const double per_layer = std::string(recompute) == "full" ? 6 : 4;
    CHECK(static_cast<double>(sum.Sent(CollectiveKind::kAllToAll).count()) ==
          Approx(per_layer * 32 * 2 * sent).epsilon(1e-9));
    // The receive buffers are freed by the ops that consume them.
    CHECK(sum.PeakOf(MemCategory::kCommBuffers) < Bytes::Count(static_cast<int64_t>(2 * buffer)));
  }
  // EP 1: no all-to-all.
  auto r = replay::Simulate(Must({}), {});
  REQUIRE(r.ok());
  CHECK(report::Summarize(Must({}), *r).Sent(CollectiveKind::kAllToAll) == Bytes());
}

TEST_CASE("under TP each rank routes its sequence shard, and expert TP gathers the copies",
          "[moe]") {
  // TP 2 with SP, EP 4 on 32 GPUs (dp 16, 4 micro-batches): each GPU routes 4096 / 2 tokens and
  // sends their 2048 · 2 copies (2 · 4096 B each) to its EP group. With etp = tp = 2 the ETP
  // all-gather then doubles the rows an expert GEMM computes at half the width; with etp = 1
  // the experts are whole and no ETP collective runs. Either way the expert FLOPs are the same.
  const std::vector<config::Override> tp2 = {
      {"parallel.tp", "2"}, {"parallel.sequence_parallel", "true"}, {"parallel.ep", "4"}};
  const double copies = 2048.0 * 2, row = 2.0 * 4096;
  double expert_flops[2] = {0, 0};
  for (int etp : {1, 2}) {
    INFO("etp " << etp);
    std::vector<config::Override> o = tp2;
    o.push_back({"parallel.etp", std::to_string(etp)});
    const Scenario s = Must(o);
    const std::vector<LayerOp> ops = LayerForwardOps(s.model, ScenarioShape(s));
    expert_flops[etp - 1] = Flops(ops, "expert_gate_up") + Flops(ops, "expert_down");
    CHECK(Flops(ops, "router") == Approx(2.0 * 2048 * 4096 * 8));
    CHECK(Flops(ops, "expert_down") == Approx(2.0 * copies * etp * (14336 / etp) * 4096));
    auto p = Lower(s);
    REQUIRE(p.ok());
    int64_t dispatches = 0, etp_gathers = 0;
    for (const Op& op : p->ops) {
      if (op.kind != OpKind::kCollective) continue;
      const CollectiveSpec& c = p->CollectiveOf(op);
      if (op.name == "ep_dispatch") {
        ++dispatches;
        CHECK(c.tensor.count() == static_cast<int64_t>(copies * row));
        CHECK(c.group.size == 4);
        CHECK(c.group.stride == etp);
      }
      if (op.name == "etp_all_gather") {
        ++etp_gathers;
        CHECK(c.tensor.count() == static_cast<int64_t>(copies * 2 * row));
        CHECK(c.group.size == 2);
      }
    }
    // Forward, its full recompute (the default scenario's) and backward; 32 layers, 4
    // micro-batches (the program lowers every one). The ETP all-gathers: after the forward's
    // and the recompute's dispatch, and after the backward's combine (toward the experts).
    CHECK(dispatches == 3 * 32 * 4);
    CHECK(etp_gathers == (etp == 2 ? 3 * 32 * 4 : 0));
  }
  CHECK(expert_flops[0] == expert_flops[1]);
}

TEST_CASE("compare --ep replays one row per expert-parallel degree", "[moe]") {
  auto loader = config::ScenarioLoader::Open(config::DataRoot{STEPSIM_SOURCE_DIR},
                                             STEPSIM_SOURCE_DIR "/scenarios/default.yaml");
  REQUIRE(loader.ok());
  explore::CompareRequest request;
  request.sets = {{"model", "mixtral-8x7b"},
                  {"parallel.framework", "megatron"},
                  {"parallel.zero", "1"},
                  {"training.global_batch", "64"}};
  request.ep = {"1", "8", "3"};
  auto out = explore::RunCompare(*loader, request, nullptr);
  REQUIRE(out.ok());
  REQUIRE(out->stages.size() == 3);
  CHECK(out->stages[1].mode == "ep 8");
  const auto& one = out->results[0];
  const auto& eight = out->results[1];
  REQUIRE(one.status.ok());
  REQUIRE(eight.status.ok());
  CHECK(one.summary->Sent(CollectiveKind::kAllToAll) == Bytes());
  CHECK(eight.summary->Sent(CollectiveKind::kAllToAll) > Bytes());
  CHECK(eight.summary->peak < one.summary->peak);
  CHECK_THAT(std::string(out->results[2].status.message()), Catch::Contains("etp x ep = 1 x 3"));
  std::vector<report::Row> rows(2);
  rows[0].labels = {"ep 1"};
  rows[0].summary = one.summary;
  rows[1].labels = {"ep 8"};
  rows[1].summary = eight.summary;
  CHECK_THAT(report::CompareTable({"mode"}, rows, report::TableFormat::kText),
             Catch::Contains("all_to_all GB"));
  // A dense model has no degree to compare.
  request.sets[0].value = "llama3-8b";
  auto dense = explore::RunCompare(*loader, request, nullptr);
  REQUIRE_FALSE(dense.ok());
  CHECK_THAT(std::string(dense.status().message()), Catch::Contains("has no experts"));
}

TEST_CASE("Zipf routing loads the rank of the popular experts", "[moe]") {
  const MoeSpec mixtral = *Model("mixtral-8x7b").moe;  // 8 experts, top-2
  const RoutingSpec balanced;
  for (double share : ExpertShares(mixtral, balanced)) CHECK(share == 0.125);
  CHECK(BusiestRankLoad(mixtral, 8, balanced) == 1.0);
  // Skew 1 over 8 experts: shares 1/(i·H8), H8 = 761/280; one expert per rank, so the busiest
  // rank holds the most popular expert: 8 · 280/761 of the balanced tokens.
  RoutingSpec zipf;
  zipf.distribution = RoutingDistribution::kZipf;
  CHECK(BusiestRankLoad(mixtral, 8, zipf) == Approx(8.0 * 280 / 761));
  double sum = 0;
  for (double share : ExpertShares(mixtral, zipf)) sum += share;
  CHECK(sum == Approx(1.0));
  // One GPU holding every expert sees no imbalance.
  CHECK(BusiestRankLoad(mixtral, 1, zipf) == 1.0);
  // A token sends one copy per chosen expert: with top-2 no expert takes more than half the
  // copies, however steep the skew.
  zipf.skew = 3;
  CHECK(BusiestRankLoad(mixtral, 8, zipf) == Approx(4.0));
  // The seed decides which rank holds which popularity rank: deterministic, and with two
  // ranks of four experts the load depends on the placement.
  const MoeSpec qwen = *Model("qwen1.5-moe-a2.7b").moe;  // 60 experts, top-4
  RoutingSpec a = zipf, b = zipf;
  a.skew = b.skew = 1.0;
  a.seed = 1;
  b.seed = 2;
  CHECK(BusiestRankLoad(qwen, 4, a) == BusiestRankLoad(qwen, 4, a));
  CHECK(BusiestRankLoad(qwen, 4, a) != BusiestRankLoad(qwen, 4, b));
  CHECK(BusiestRankLoad(qwen, 4, a) > 1.0);
  // A capacity factor of 1.25 caps each expert at 1.25/8 of the copies: skew 1 drops the two
  // most popular experts' excess, 280/761 + 140/761 - 2 · 1.25/8 = 23.9 %, and the busiest rank
  // computes 1.25x; padded, every rank computes exactly its capacity.
  RoutingSpec capped = zipf;
  capped.skew = 1;
  capped.capacity_factor = 1.25;
  CHECK(DroppedShare(mixtral, capped) == Approx(420.0 / 761 - 2 * 1.25 / 8));
  CHECK(BusiestRankLoad(mixtral, 8, capped) == Approx(1.25));
  capped.pad_to_capacity = true;
  CHECK(BusiestRankLoad(mixtral, 8, capped) == 1.25);
  CHECK(DroppedShare(mixtral, balanced) == 0);
}

TEST_CASE("skewed routing lengthens the step and the report attributes it", "[moe]") {
  const Scenario balanced = Must({{"parallel.ep", "8"}});
  const Scenario skewed = Must({{"parallel.ep", "8"},
                                {"training.routing.distribution", "zipf"},
                                {"training.routing.skew", "1"}});
  auto rb = replay::Simulate(balanced, {});
  auto rs = replay::Simulate(skewed, {});
  REQUIRE(rb.ok());
  REQUIRE(rs.ok());
  CHECK_FALSE(rb->balanced_step.has_value());
  REQUIRE(rs->balanced_step.has_value());
  // The attribution replay is the balanced step itself.
  CHECK(*rs->balanced_step == rb->step);
  CHECK(rs->step > rb->step);
  CHECK(rs->expert_load == Approx(8.0 * 280 / 761));
  // The busiest rank's expert activations and all-to-all buffers grow with its load.
  const report::RunSummary sb = report::Summarize(balanced, *rb);
  const report::RunSummary ss = report::Summarize(skewed, *rs);
  CHECK(ss.PeakOf(MemCategory::kActivations) > sb.PeakOf(MemCategory::kActivations));
  CHECK(ss.Sent(CollectiveKind::kAllToAll) > sb.Sent(CollectiveKind::kAllToAll));
  // The step's useful work is the balanced one's: MFU falls by the step's growth.
  CHECK(ss.model_flops_total == sb.model_flops_total);
  CHECK(ss.mfu == Approx(sb.mfu * rb->step.seconds() / rs->step.seconds()));
  // Routing on a dense model is refused at its key.
  auto dense = Load({{"model", "llama3-8b"}, {"training.routing.distribution", "zipf"}});
  REQUIRE_FALSE(dense.ok());
  CHECK_THAT(std::string(dense.status().message()),
             Catch::Contains("training.routing.distribution") &&
                 Catch::Contains("no experts to route to"));
}

TEST_CASE("expert parallelism that cannot apply is refused at its key", "[moe]") {
  auto dense = Load({{"model", "llama3-8b"}, {"parallel.ep", "8"}});
  REQUIRE_FALSE(dense.ok());
  CHECK_THAT(std::string(dense.status().message()),
             Catch::Contains("parallel.ep") && Catch::Contains("has no experts"));
  auto uneven = Load({{"parallel.ep", "3"}});
  REQUIRE_FALSE(uneven.ok());
  CHECK_THAT(std::string(uneven.status().message()),
             Catch::Contains("etp x ep = 1 x 3 must divide tp x cp x dp = 32, and ep the "
                             "model's 8 experts"));
  auto dense_etp = Load({{"model", "llama3-8b"}, {"parallel.etp", "2"}});
  REQUIRE_FALSE(dense_etp.ok());
  CHECK_THAT(std::string(dense_etp.status().message()),
             Catch::Contains("parallel.etp") && Catch::Contains("has no experts"));
  // Megatron-Core's MoE layer refuses TP without sequence parallelism.
  auto no_sp = Load({{"parallel.tp", "2"}});
  REQUIRE_FALSE(no_sp.ok());
  CHECK_THAT(std::string(no_sp.status().message()),
             Catch::Contains("parallel.sequence_parallel") && Catch::Contains("tp 2"));
  auto order = Load({{"parallel.ep", "8"}, {"parallel.rank_order", "cp-tp-dp-pp"}});
  REQUIRE_FALSE(order.ok());
  CHECK_THAT(std::string(order.status().message()),
             Catch::Contains("parallel.rank_order") && Catch::Contains("tp-cp-dp-pp"));
  auto zero3 =
      Load({{"parallel.ep", "8"}, {"parallel.zero", "3"}, {"parallel.framework", "deepspeed"}});
  REQUIRE_FALSE(zero3.ok());
  CHECK_THAT(std::string(zero3.status().message()), Catch::Contains("ZeRO-3"));
}

TEST_CASE("every MoE model replays under every framework and ZeRO stage the loader accepts",
          "[moe]") {
  // Each catalog model with experts, on the default cluster (32 H100), under each framework,
  // ZeRO stage (FSDP 1 and 2), with and without expert parallelism: a layout the loader accepts
  // replays to a report or is refused with a user's error, never an internal one. (Mixtral
  // under FSDP once fired the replay's ledger check: its experts reduce-scatter apart from the
  // dense part of their layer, one allocation freed twice.)
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  auto loader = config::ScenarioLoader::Open(root, STEPSIM_SOURCE_DIR "/scenarios/default.yaml");
  REQUIRE(loader.ok());
  int models = 0, replayed = 0;
  for (const std::string& name : config::CatalogModelNames(root)) {
    auto m = config::LoadModel(root, name);
    REQUIRE(m.ok());
    if (!m->moe) continue;
    ++models;
    for (const char* framework : {"deepspeed", "fsdp", "megatron", "ddp", "torchtune"}) {
      for (const char* zero : {"0", "1", "2", "3"}) {
        for (const char* version : {"1", "2"}) {
          if (std::string(version) == "2" && std::string(framework) != "fsdp") continue;
          for (const char* ep : {"1", "8"}) {
            std::vector<config::Override> o = {{"model", name},
                                               {"parallel.framework", framework},
                                               {"parallel.zero", zero},
                                               {"parallel.ep", ep}};
            if (std::string(framework) == "fsdp") o.push_back({"parallel.fsdp_version", version});
            auto s = loader->Load(o);
            if (!s.ok()) continue;
            INFO(name << " " << framework << " ZeRO-" << zero << " v" << version << " ep " << ep);
            auto r = replay::Simulate(*s, {});
            if (r.ok()) {
              ++replayed;
            } else {
              CHECK(IsBadInput(r.status()));
            }
          }
        }
      }
    }
  }
  CHECK(models >= 7);
  CHECK(replayed >= 8 * models);
}

}  // namespace
}  // namespace sim
