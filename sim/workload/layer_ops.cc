#include "sim/workload/layer_ops.h"

#include <cmath>

#include "sim/workload/moe_routing.h"

namespace sim {

namespace {

constexpr int64_t kAct = 2;   // bytes per 16-bit activation element
constexpr int64_t kMask = 1;  // bytes per dropout-mask element

// A GEMM of (rows × inner) · (inner × cols): 2·rows·inner·cols FLOPs, reads both operands and
// writes the product once (16-bit).
LayerOp Gemm(absl::string_view name, int64_t rows, int64_t inner, int64_t cols) {
  LayerOp op;
  op.name = name;
  op.op_class = OpClass::kGemm;
  op.flops = Flops::Count(2.0 * static_cast<double>(rows) * static_cast<double>(inner) *
                          static_cast<double>(cols));
  op.bytes_moved = Bytes::Count(kAct * (rows * inner + inner * cols + rows * cols));
  op.fp8_cast_fwd = Bytes::Count(3 * (rows * inner + inner * cols));
  op.fp8_cast_bwd = Bytes::Count(4 * rows * cols + 2 * rows * inner + 2 * inner * cols);
  op.gemm_rows = rows;
  op.gemm_inner = inner;
  op.gemm_cols = cols;
  return op;
}

// An elementwise or normalisation kernel reading `reads` and writing `writes` elements.
LayerOp Elementwise(absl::string_view name, int64_t reads, int64_t writes, double flops_per_elem) {
  LayerOp op;
  op.name = name;
  op.op_class = OpClass::kMemoryBound;
  op.flops = Flops::Count(flops_per_elem * static_cast<double>(writes));
  op.bytes_moved = Bytes::Count(kAct * (reads + writes));
  return op;
}

// The names of an MLP's ops and saved tensors (static text, as LayerOp names are).
struct MlpNames {
  absl::string_view gate_up, gelu, swiglu, input, gelu_in, gate, up, down, down_in;
};
constexpr MlpNames kExpertMlp{"expert_gate_up", "expert_gelu",    "expert_swiglu",
                              "expert_in",      "expert_gelu_in", "expert_gate",
                              "expert_up",      "expert_down",    "expert_fc2_in"};
constexpr MlpNames kSharedMlp{"shared_gate_up", "shared_gelu",    "shared_swiglu",
                              "shared_in",      "shared_gelu_in", "shared_gate",
                              "shared_up",      "shared_down",    "shared_fc2_in"};

// An MLP of width f (per GPU) on `rows` tokens, as the dense layer's: the up (or gate and up)
// GEMM, its activation and the down GEMM, cached by per-op checkpointing as the dense MLP's are.
// `save_input`: the up GEMM saves its input (otherwise another op already holds it).
// `tp_roles`: column- and row-parallel over TP with its collectives (the shared experts); the
// routed experts' expert-TP collectives go with the dispatch and combine instead.
void AppendMlp(bool gelu, int64_t rows, int64_t h, int64_t f, const MlpNames& n, bool save_input,
               bool tp_roles, std::vector<LayerOp>& ops) {
  auto bytes = [](int64_t e) { return Bytes::Count(kAct * e); };
  LayerOp up = Gemm(n.gate_up, rows, h, (gelu ? 1 : 2) * f);
  if (save_input) {
    up.saves = {{n.input, bytes(rows * h)}};
    up.saves[0].weight_grad_input = true;
  }
  if (tp_roles) up.role = ParallelRole::kColumn;
  up.sac_recompute = gelu ? 0 : 0.5;
  ops.push_back(up);
  LayerOp act = gelu ? Elementwise(n.gelu, rows * f, rows * f, 8)
                     : Elementwise(n.swiglu, 2 * rows * f, rows * f, 6);
  if (gelu) {
    act.saves = {{n.gelu_in, bytes(rows * f), false, true}};
  } else {
    act.saves = {{n.gate, bytes(rows * f), false, true}, {n.up, bytes(rows * f)}};
  }
  ops.push_back(act);
  LayerOp down = Gemm(n.down, rows, f, h);
  down.saves = {{n.down_in, bytes(rows * f)}};
  down.saves[0].weight_grad_input = true;
  if (tp_roles) down.role = ParallelRole::kRow;
  down.sac_recompute = 0;
  ops.push_back(down);
}

// The MLP of a mixture-of-experts layer (layer_ops.h): router, permutation, the routed experts
// as grouped GEMMs over the token copies this GPU's experts receive, the un-permutation, and
// the shared experts. `local`: the tokens this GPU routes (its sequence shard under SP).
void MoeMlpOps(const ModelSpec& m, const ActivationShape& shape, int64_t tokens, int64_t local,
               std::vector<LayerOp>& ops) {
  const MoeSpec& moe = *m.moe;
  const int64_t t = shape.tp, h = m.hidden, k = moe.top_k, e = moe.experts;
  const int64_t copies = local * k;  // this GPU's own token copies, sent out and back
  const int64_t routed = RoutedTokenCopies(shape, local, k);
  const int64_t fe = moe.expert_ffn_hidden / shape.etp;
  const bool gelu = m.mlp == MlpKind::kGelu;
  auto bytes = [](int64_t n) { return Bytes::Count(n); };

  LayerOp router = Gemm("router", local, h, e);
  router.saves = {{"mlp_in", bytes(kAct * local * h)}};
  router.saves[0].weight_grad_input = true;
  router.sac_recompute = 0;
  ops.push_back(router);
  LayerOp topk = Elementwise("router_topk", local * e, local * e, 5);
  topk.saves = {{"router_probs", bytes(4 * local * e), false, true}};
  ops.push_back(topk);
  LayerOp permute = Elementwise("permute", local * h, copies * h, 1);
  permute.saves = {{"permute_indices", bytes(8 * copies), false, true}};
  if (shape.ep > 1 || shape.etp > 1) permute.role = ParallelRole::kEpDispatch;
  ops.push_back(permute);

  AppendMlp(gelu, routed, h, fe, kExpertMlp, /*save_input=*/true, /*tp_roles=*/false, ops);
  LayerOp unpermute = Elementwise("unpermute", copies * h + copies, local * h, 2);
  unpermute.saves = {{"expert_out", bytes(kAct * copies * h), false, true}};
  if (shape.ep > 1 || shape.etp > 1) unpermute.role = ParallelRole::kEpCombine;
  ops.push_back(unpermute);

  if (moe.shared_experts > 0) {
    const int64_t fs = moe.shared_experts * moe.shared_ffn_hidden / t;
    // Its input is mlp_in, saved with the router; TP-parallel as the dense MLP (with SP it
    // gathers the T tokens first).
    AppendMlp(gelu, tokens, h, fs, kSharedMlp, /*save_input=*/false, /*tp_roles=*/true, ops);
  }
}

// Multi-head latent attention (model.h MlaSpec), from the layer input's norm to the output
// projection, under flash attention. TP splits the heads; the down projection and its norms
// are replicated: every TP rank computes them on the T tokens (with SP the layer input is
// gathered first, as for a column-parallel GEMM). Approximation: the backward reduces the
// layer input's gradient (h wide) over TP, where Megatron-Core all-reduces the latents'
// (q_lora + kv_lora + qk_rope wide) before the replicated down projection.
void MlaAttentionOps(const ModelSpec& m, const ActivationShape& shape, int64_t tokens,
                     int64_t rep_tokens, std::vector<LayerOp>& ops) {
  const MlaSpec& l = *m.mla;
  const int64_t t = shape.tp, h = m.hidden, a = m.heads, b = shape.micro_batch;
  const int64_t s = shape.seq_len / shape.cp, s_kv = shape.seq_len;
  const int64_t qk = a * l.qk_head_dim(), v = a * l.v_head_dim;  // all heads' widths
  auto bytes = [](int64_t n) { return Bytes::Count(n); };

  LayerOp down = Gemm("mla_down", tokens, h, l.down_width());
  down.saves = {{"qkv_in", bytes(kAct * rep_tokens * h)}};
  down.saves[0].weight_grad_input = true;
  down.role = ParallelRole::kColumn;
  ops.push_back(down);
  const int64_t latent = l.q_lora_rank + l.kv_lora_rank;
  LayerOp norms = Elementwise("mla_norms", tokens * l.down_width(), tokens * latent, 5);
  norms.saves = {{"mla_down_out", bytes(kAct * tokens * l.down_width())}};
  ops.push_back(norms);
  LayerOp q_up = Gemm("q_up", tokens, l.q_lora_rank, qk / t);
  q_up.saves = {{"q_latent", bytes(kAct * tokens * l.q_lora_rank)}};
  q_up.saves[0].weight_grad_input = true;
  ops.push_back(q_up);
  LayerOp kv_up =
      Gemm("kv_up", tokens, l.kv_lora_rank, a * (l.qk_nope_head_dim + l.v_head_dim) / t);
  kv_up.saves = {{"kv_latent", bytes(kAct * tokens * l.kv_lora_rank)}};
  kv_up.saves[0].weight_grad_input = true;
  ops.push_back(kv_up);

  // QK^T over qk_nope + qk_rope per head, PV over v_head; causal masking lets flash skip half.
  LayerOp core;
  core.name = "flash_attention";
  core.op_class = OpClass::kAttention;
  core.flops = Flops::Count(2.0 * static_cast<double>(b) * static_cast<double>(s) *
                            static_cast<double>(s_kv) * static_cast<double>(qk + v) /
                            static_cast<double>(t) / 2);
  core.bytes_moved = bytes(kAct * (tokens * (qk + v) + s_kv * b * (qk + v)) / t);
  core.core = true;
  core.sac_recompute = 0;
  core.saves = {{"q", bytes(kAct * tokens * qk / t), false, /*sac_cached=*/true},
                {"k", bytes(kAct * tokens * qk / t)},
                {"v", bytes(kAct * tokens * v / t), false, true},
                {"softmax_lse", bytes(4 * a * s * b / t), /*attention_core=*/true, true}};
  ops.push_back(core);

  LayerOp proj = Gemm("out_proj", tokens, v / t, h);
  proj.saves = {{"context", bytes(kAct * tokens * v / t), false, true}};
  proj.role = ParallelRole::kRow;
  ops.push_back(proj);
}

}  // namespace

int64_t RoutedTokenCopies(const ActivationShape& shape, int64_t local, int64_t top_k) {
  return static_cast<int64_t>(
      std::llround(static_cast<double>(local * top_k * shape.etp) * shape.expert_load));
}

ActivationShape ScenarioShape(const Scenario& s) {
  ActivationShape shape{
      s.training.seq_len,   s.training.micro_batch, s.parallel.tp, s.parallel.sequence_parallel,
      s.training.attention, s.parallel.cp,          s.parallel.ep, s.parallel.expert_tp()};
  if (s.model.moe) {
    shape.expert_load = BusiestRankLoad(*s.model.moe, s.parallel.ep, s.training.routing);
  }
  return shape;
}

std::vector<LayerOp> LayerForwardOps(const ModelSpec& m, const ActivationShape& shape) {
  return LayerForwardOps(m, shape, m.moe.has_value());
}

std::vector<LayerOp> LayerForwardOps(const ModelSpec& m, const ActivationShape& shape,
                                     bool moe_layer) {
  const int64_t t = shape.tp;
  // s: the tokens of this GPU's share of a sequence; s_kv: the keys each query attends to.
  const int64_t s_kv = shape.seq_len, s = shape.seq_len / shape.cp, b = shape.micro_batch;
  const int64_t tokens = s * b;
  const int64_t h = m.hidden, f = m.ffn_hidden, a = m.heads;
  const int64_t kv = m.kv_heads * m.head_dim(), q = m.query_width();  // q = h unless head_dim
  // Tensors replicated across the TP group, unless sequence parallelism shards them along s.
  const int64_t rep = shape.sequence_parallel ? t : 1;
  const int64_t rep_tokens = tokens / rep;
  const bool dropout = m.dropout > 0;
  auto bytes = [](int64_t n) { return Bytes::Count(n); };

  std::vector<LayerOp> ops;
  ops.reserve(14);

  LayerOp norm1 = Elementwise("norm1", rep_tokens * h, rep_tokens * h, 5);
  norm1.saves = {{"norm1_in", bytes(kAct * rep_tokens * h)}};
  ops.push_back(norm1);

  if (m.mla) {
    MlaAttentionOps(m, shape, tokens, rep_tokens, ops);
  } else {
    LayerOp qkv = Gemm("qkv", tokens, h, (q + 2 * kv) / t);
    qkv.saves = {{"qkv_in", bytes(kAct * rep_tokens * h)}};
    qkv.saves[0].weight_grad_input = true;
    qkv.role = ParallelRole::kColumn;
    // Per-op checkpointing caches wq's and wv's outputs (matmuls 1 and 3) and re-runs wk (2).
    qkv.sac_recompute = static_cast<double>(kv) / static_cast<double>(q + 2 * kv);
    ops.push_back(qkv);

    // Attention core: QK^T and AV are 2·b·s²·a·d/t FLOPs each; causal masking lets flash skip half.
    const double full_core = 4.0 * static_cast<double>(b) * static_cast<double>(s) *
                             static_cast<double>(s_kv) * static_cast<double>(q) /
                             static_cast<double>(t);
    const int64_t scores = a * s * s_kv * b / t;  // elements of the score matrix per GPU
    if (shape.attention == AttentionKernel::kFlash) {
      LayerOp core;
      core.name = "flash_attention";
      core.op_class = OpClass::kAttention;
      core.flops = Flops::Count(full_core / 2);
      // Reads q and writes o for its own tokens, reads k and v of the whole sequence.
      core.bytes_moved = bytes(kAct * (tokens * 2 * q + s_kv * b * 2 * kv) / t);
      if (shape.cp > 1) core.role = ParallelRole::kCpKv;
      core.core = true;
      core.sac_recompute = 0;  // its outputs are on the save list
      core.saves = {{"q", bytes(kAct * tokens * q / t), false, /*sac_cached=*/true},
                    {"k", bytes(kAct * tokens * kv / t)},
                    {"v", bytes(kAct * tokens * kv / t), false, true},
                    {"softmax_lse", bytes(4 * a * s * b / t), /*attention_core=*/true, true}};
      ops.push_back(core);
    } else {
      // Eager attention: Q·K^T and P·V are cuBLAS batched GEMMs (Megatron-LM's core attention),
      // priced as GEMMs; the fused-attention efficiency belongs to flash kernels.
      LayerOp qk;
      qk.name = "attention_scores";
      qk.op_class = OpClass::kGemm;
      qk.flops = Flops::Count(full_core / 2);
      qk.bytes_moved = bytes(kAct * (tokens * (q + kv) / t + scores));
      qk.core = true;
      qk.keep_16bit = true;
      qk.saves = {{"q", bytes(kAct * tokens * q / t), false, true},
                  {"k", bytes(kAct * tokens * kv / t)}};
      ops.push_back(qk);
      LayerOp softmax = Elementwise("softmax", scores, scores, 5);
      softmax.core = true;
      softmax.saves = {{"softmax_out", bytes(kAct * scores), true}};
      ops.push_back(softmax);
      if (dropout) {
        LayerOp drop = Elementwise("softmax_dropout", scores, scores, 2);
        drop.core = true;
        drop.bytes_moved += bytes(kMask * scores);
        drop.saves = {{"softmax_mask", bytes(kMask * scores), true},
                      {"probs_dropped", bytes(kAct * scores), true}};
        ops.push_back(drop);
      }
      LayerOp av;
      av.name = "attention_values";
      av.op_class = OpClass::kGemm;
      av.flops = Flops::Count(full_core / 2);
      av.bytes_moved = bytes(kAct * (scores + tokens * kv / t + tokens * q / t));
      av.core = true;
      av.keep_16bit = true;
      av.saves = {{"v", bytes(kAct * tokens * kv / t), false, true}};
      ops.push_back(av);
    }

    LayerOp proj = Gemm("out_proj", tokens, q / t, h);
    // The context is the flash kernel's output (cached); eager attention's comes from a bmm.
    proj.saves = {{"context", bytes(kAct * tokens * q / t), false,
                   shape.attention == AttentionKernel::kFlash}};
    // Flash attention saves its output for its own backward; eager attention's AV backward needs P
    // and V, so the context serves only the projection's weight gradient.
    proj.saves[0].weight_grad_input = shape.attention == AttentionKernel::kEager;
    proj.role = ParallelRole::kRow;
    ops.push_back(proj);
  }

  LayerOp residual1 = Elementwise("attn_residual", 2 * rep_tokens * h, rep_tokens * h, 1);
  if (dropout) residual1.saves = {{"attn_mask", bytes(kMask * rep_tokens * h)}};
  ops.push_back(residual1);

  LayerOp norm2 = Elementwise("norm2", rep_tokens * h, rep_tokens * h, 5);
  norm2.saves = {{"norm2_in", bytes(kAct * rep_tokens * h)}};
  ops.push_back(norm2);

  if (moe_layer && m.moe) {
    MoeMlpOps(m, shape, tokens, rep_tokens, ops);
  } else if (m.mlp == MlpKind::kGelu) {
    LayerOp fc1 = Gemm("fc1", tokens, h, f / t);
    fc1.saves = {{"mlp_in", bytes(kAct * rep_tokens * h)}};
    fc1.saves[0].weight_grad_input = true;
    fc1.role = ParallelRole::kColumn;
    fc1.sac_recompute = 0;  // matmul 5 (after wq, wk, wv, wo): cached
    ops.push_back(fc1);
    LayerOp gelu = Elementwise("gelu", tokens * f / t, tokens * f / t, 8);
    gelu.saves = {{"gelu_in", bytes(kAct * tokens * f / t), false, true}};
    ops.push_back(gelu);
  } else {
    LayerOp gate_up = Gemm("gate_up", tokens, h, 2 * f / t);
    gate_up.saves = {{"mlp_in", bytes(kAct * rep_tokens * h)}};
    gate_up.saves[0].weight_grad_input = true;
    gate_up.role = ParallelRole::kColumn;
    gate_up.sac_recompute = 0.5;  // w1 (matmul 5) cached, w3 (6) re-run
    ops.push_back(gate_up);
    LayerOp swiglu = Elementwise("swiglu", 2 * tokens * f / t, tokens * f / t, 6);
    swiglu.saves = {{"gate", bytes(kAct * tokens * f / t), false, true},
                    {"up", bytes(kAct * tokens * f / t)}};
    ops.push_back(swiglu);
  }
  if (!(moe_layer && m.moe)) {
    LayerOp fc2 = Gemm(m.mlp == MlpKind::kGelu ? "fc2" : "down", tokens, f / t, h);
    fc2.saves = {{"fc2_in", bytes(kAct * tokens * f / t)}};
    // GELU's backward needs its input (gelu_in), not its output: fc2_in serves fc2's weight
    // gradient only, as the SwiGLU product serves down's.
    fc2.saves[0].weight_grad_input = true;
    fc2.role = ParallelRole::kRow;
    // SwiGLU: w2 is matmul 7, cached (its output too, though no backward needs it); GELU: fc2 is
    // matmul 6, re-run.
    if (m.mlp != MlpKind::kGelu) {
      fc2.sac_recompute = 0;
      fc2.saves.push_back({"down_out", bytes(kAct * tokens * h), false, true, /*sac_only=*/true});
    }
    ops.push_back(fc2);
  }

  LayerOp residual2 = Elementwise("mlp_residual", 2 * rep_tokens * h, rep_tokens * h, 1);
  if (dropout) residual2.saves = {{"mlp_mask", bytes(kMask * rep_tokens * h)}};
  ops.push_back(residual2);
  return ops;
}

bool Allocated(const SavedTensor& t, Recompute policy) {
  if (t.not_saved) return false;
  return !t.sac_only || policy == Recompute::kOp;
}

bool Kept(const std::vector<LayerOp>& ops, const LayerOp& op, const SavedTensor& t,
          Recompute policy) {
  const bool layer_input = &op == &ops.front() && &t == &op.saves.front();
  switch (policy) {
    case Recompute::kNone:
      return !t.sac_only && !t.not_saved;
    case Recompute::kSelective:
      return !t.sac_only && !t.not_saved && !t.attention_core;
    case Recompute::kFull:
      return layer_input;
    case Recompute::kOp:
      return layer_input || (t.sac_cached && !t.not_saved);
  }
  return true;
}

Bytes SavedActivationBytes(const std::vector<LayerOp>& ops, Recompute policy) {
  Bytes sum;
  for (const LayerOp& op : ops) {
    for (const SavedTensor& t : op.saves) {
      if (Kept(ops, op, t, policy)) sum += t.bytes;
    }
  }
  return sum;
}

Bytes LayerActivationBytes(const ModelSpec& m, const ActivationShape& shape, Recompute policy) {
  return SavedActivationBytes(LayerForwardOps(m, shape), policy);
}

}  // namespace sim
