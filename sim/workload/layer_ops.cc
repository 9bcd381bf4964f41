#include "sim/workload/layer_ops.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "sim/workload/moe_routing.h"
#include "sim/workload/policy/framework_traits.h"

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
  op.fp8_input_elements = rows * inner;
  op.fp8_output_elements = rows * cols;
  op.fp8_weight_elements = inner * cols;
  op.gemm_rows = rows;
  op.gemm_inner = inner;
  op.gemm_cols = cols;
  return op;
}

// A grouped GEMM (the routed experts' GroupedMLP / TE GroupedLinear): `groups` experts, each
// with its own (inner x cols) weight, over `rows` token copies split between them. The FLOPs
// and activations are the dense GEMM's; every expert's weight is read (and cast in fp8), and
// each expert's weight gradient reduces over its own rows only: the per-kernel reduction
// length of the backward's weight-gradient GEMMs is rows / groups (Op::inv_k).
LayerOp GroupedGemm(absl::string_view name, int64_t rows, int64_t inner, int64_t cols,
                    int64_t groups) {
  LayerOp op = Gemm(name, rows, inner, cols);
  const int64_t extra = (groups - 1) * inner * cols;  // the other experts' weights
  op.bytes_moved += Bytes::Count(kAct * extra);
  op.fp8_weight_elements += extra;
  op.gemm_rows = std::max<int64_t>(rows / groups, 1);
  op.gemm_groups = groups;
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

// Ring attention's merge of its cp partial outputs (PyTorch's _SDPAMerger with convert_to_f32,
// the default): the first chunk's output upcast to fp32 (2 B read, 4 written per element of
// the GPU's q-wide output); each later one upcast too, then out − sigmoid(lse_b − lse)·(out −
// out_b) in eager kernels (the difference, the product, the update: 36 B more); the result cast
// back (4 + 2). Backward (_templated_ring_attention_backward): fp32 gradient accumulators
// zeroed (4 B), each chunk's 16-bit dQ, dK, dV added into them (2 + 4 + 4 B), the dK, dV
// accumulators packed for the next rank (torch.cat: 4 + 4 B), and the three cast back (4 + 2).
// `out` and `kv`: the GPU's q-wide and kv-wide elements; lse and the tiny sigmoid terms aside.
LayerOp RingMerge(int64_t out, int64_t kv, int64_t cp) {
  LayerOp op;
  op.name = "ring_merge";
  op.op_class = OpClass::kMemoryBound;
  op.flops = Flops::Count(4.0 * static_cast<double>(out * (cp - 1)));
  op.bytes_moved = Bytes::Count(out * (6 + 42 * (cp - 1) + 6));
  op.backward_bytes = Bytes::Count(out * (4 + 10 * cp + 6) + 2 * kv * (4 + 18 * cp + 6));
  op.kernels = static_cast<int16_t>(std::min<int64_t>(2 + 5 * (cp - 1), 1024));
  op.core = true;
  op.sac_recompute = 0;  // inside the attention call, whose outputs per-op checkpointing caches
  return op;
}

}  // namespace

NormCost NormKernelCost(const ModelSpec& m, KernelFusion kernels) {
  // Eager RMSNorm (torchtitan/models/norms.py, as Meta's reference Llama model.py):
  // `(x.float() * rsqrt(x.float().pow(2).mean(-1) + eps)).type_as(x) * weight`, per element of
  // x: the upcast reads 2 B and writes 4, pow reads and writes 4 each, mean reads 4, the
  // product reads 4 and writes 4, type_as reads 4 and writes 2, the weight product reads and
  // writes 2 each: 36 B in seven kernels over the whole tensor and two (eps, rsqrt) over one
  // value per row. Fused, and torch's native layer_norm even in eager mode: read 2, write 2.
  if (kernels == KernelFusion::kEager && m.norm == NormKind::kRmsNorm) return {36, 9};
  return {2 * kAct, 1};
}

namespace {

// A norm over `elements` (rows × h) saving its 16-bit input for the backward. Eager RMSNorm's
// backward needs instead the fp32 upcast (pow and the product save it, 4 B an element) and the
// 16-bit normalised tensor (the weight product saves it): 6 B an element, kept as the input's
// 2 B (what full and per-op checkpointing keep of the first norm: the layer input), the
// upcast's 2 B more and the normalised tensor's 2.
LayerOp Norm(absl::string_view name, int64_t elements, const ModelSpec& m, KernelFusion kernels,
             absl::string_view saved, absl::string_view saved_fp32,
             absl::string_view saved_normed) {
  LayerOp op = Elementwise(name, elements, elements, 5);
  const NormCost c = NormKernelCost(m, kernels);
  op.bytes_moved = Bytes::Count(c.bytes_per_element * elements);
  op.kernels = c.kernels;
  op.saves = {{saved, Bytes::Count(kAct * elements)}};
  if (c.kernels > 1) {
    op.saves.push_back({saved_fp32, Bytes::Count(kAct * elements)});
    op.saves.push_back({saved_normed, Bytes::Count(kAct * elements)});
  }
  return op;
}

// Rotary position embedding of q and k, `elements` = rows × (q + kv) per GPU. Fused (Megatron-LM
// fused_apply_rotary_pos_emb, Transformer Engine): one kernel for q and one for k, each reading and
// writing 16 bits. Eager (torchtitan model.py apply_rotary_emb): per tensor, the fp32 upcast (read
// 2, write 4), the complex product with freqs_cis (read 4, write 4) and type_as (read 4, write 2):
// 20 B an element in three kernels. Nothing is saved: the product's backward needs only freqs_cis.
LayerOp Rope(int64_t elements, KernelFusion kernels) {
  LayerOp op = Elementwise("rope", elements, elements, 3);
  op.kernels = 2;
  if (kernels == KernelFusion::kEager) {
    op.bytes_moved = Bytes::Count(20 * elements);
    op.kernels = 6;
  }
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
               bool tp_roles, int64_t groups, bool kernel_per_group, std::vector<LayerOp>& ops) {
  auto bytes = [](int64_t e) { return Bytes::Count(kAct * e); };
  const int16_t gemm_kernels =
      kernel_per_group ? static_cast<int16_t>(std::clamp<int64_t>(groups, 1, 1024)) : 1;
  LayerOp up = GroupedGemm(n.gate_up, rows, h, (gelu ? 1 : 2) * f, groups);
  up.kernels = gemm_kernels;
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
  LayerOp down = GroupedGemm(n.down, rows, f, h, groups);
  down.kernels = gemm_kernels;
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
  // Megatron-Core's TopKRouter multiplies in 16 or 32 bits (torch.nn.functional.linear in its
  // router dtype), outside Transformer Engine's fp8 autocast.
  router.keep_16bit = true;
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

  // Each EP rank holds E / e experts (each of them split by expert TP).
  const int64_t local_experts = std::max<int64_t>(e / shape.ep, 1);
  // Megatron-Core's chunk sort by local expert (ActivationShape::mcore_alltoall): a copy of the
  // routed tokens, its backward the inverse copy.
  auto chunk_sort = [&](absl::string_view name) {
    LayerOp sort = Elementwise(name, routed * h, routed * h, 0);
    sort.backward_bytes = sort.bytes_moved;
    return sort;
  };
  const bool sorts = shape.mcore_alltoall && local_experts > 1;
  if (sorts) ops.push_back(chunk_sort("sort_chunks"));
  AppendMlp(gelu, routed, h, fe, kExpertMlp, /*save_input=*/true, /*tp_roles=*/false, local_experts,
            shape.te_grouped_gemm, ops);
  if (sorts) ops.push_back(chunk_sort("unsort_chunks"));
  LayerOp unpermute = Elementwise("unpermute", copies * h + copies, local * h, 2);
  unpermute.saves = {{"expert_out", bytes(kAct * copies * h), false, true}};
  if (shape.ep > 1 || shape.etp > 1) unpermute.role = ParallelRole::kEpCombine;
  ops.push_back(unpermute);

  if (moe.shared_experts > 0) {
    const int64_t fs = moe.shared_experts * moe.shared_ffn_hidden / t;
    // Its input is mlp_in, saved with the router; TP-parallel as the dense MLP (with SP it
    // gathers the T tokens first).
    AppendMlp(gelu, tokens, h, fs, kSharedMlp, /*save_input=*/false, /*tp_roles=*/true,
              /*groups=*/1, /*kernel_per_group=*/false, ops);
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
                            static_cast<double>(t) / 2 / shape.packing);
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

// What Megatron-Core's selective recompute modules (RecomputeModule) re-run and drop among the
// ops from norm2 to the MLP's last, [first, last). A dense layer's MLP checkpoint (mlp) starts
// at its input, the residual stream: Transformer Engine fuses the pre-MLP norm into fc1
// (TELayerNormColumnParallelLinear), so the norm re-runs and only norm2_in is kept. An MoE
// layer's pre-MLP norm is its own TENorm (the router reads its output): layernorm discards
// that output (mlp_in) and re-runs the norm; the MoE checkpoint (moe) starts after it, keeping
// mlp_in as its input; moe_act discards the experts' activation output (expert_fc2_in,
// moe/experts.py activation_checkpoint); shared_experts checkpoints the shared experts from
// mlp_in.
void TagRecomputeModules(bool moe_layer, std::vector<LayerOp>::iterator first,
                         std::vector<LayerOp>::iterator last) {
  constexpr RecomputeModules kNorm = ModuleBit(RecomputeModule::kLayerNorm);
  constexpr RecomputeModules kMoe = ModuleBit(RecomputeModule::kMoe);
  constexpr RecomputeModules kMoeAct = ModuleBit(RecomputeModule::kMoeAct);
  constexpr RecomputeModules kShared = ModuleBit(RecomputeModule::kSharedExperts);
  for (auto it = first; it != last; ++it) {
    LayerOp& op = *it;
    const bool is_norm = it == first;
    RecomputeModules modules = ModuleBit(RecomputeModule::kMlp);
    if (moe_layer) {
      modules = is_norm ? kNorm : kMoe;
      if (absl::StartsWith(op.name, "shared_")) modules |= kShared;
      if (op.name == "expert_swiglu" || op.name == "expert_gelu") modules |= kMoeAct;
    }
    op.rerun_by |= modules;
    for (size_t i = 0; i < op.saves.size(); ++i) {
      SavedTensor& t = op.saves[i];
      if (is_norm && i == 0) continue;  // norm2_in: the residual stream, every module's input
      if (t.name == "mlp_in" && moe_layer) {
        t.dropped_by |= kNorm;  // the MoE checkpoint's input, the norm's discarded output
      } else if (t.name == "expert_fc2_in") {
        t.dropped_by |= kMoe | kMoeAct;
      } else {
        t.dropped_by |= modules & ~kMoeAct;
      }
    }
  }
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
  shape.kernels = s.training.kernels;
  shape.norm_kernels = s.training.NormKernels();
  shape.packing = s.training.AttentionPacking();
  shape.cp_ring = s.parallel.cp > 1 && s.parallel.cp_kind == CpKind::kRing;
  shape.te_fp8 = s.training.precision == Precision::kFp8 &&
                 KernelLibraryOf(s) == KernelLibrary::kTransformerEngine;
  shape.te_fp8_weight_cache =
      shape.te_fp8 && !TraitsOf(s.parallel.framework).FullyShards(s.parallel);
  shape.fp8_recipe = s.training.fp8_recipe;
  shape.fp8_transposes = !s.cluster.gpu.Fp8AnyLayoutGemm();
  shape.mcore_alltoall =
      TraitsOf(s.parallel.framework).SortsTokensByLocalExpert() && s.parallel.ep > 1;
  shape.te_grouped_gemm = KernelLibraryOf(s) == KernelLibrary::kTransformerEngine;
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
  ops.reserve(16);

  const bool eager = shape.kernels == KernelFusion::kEager;
  ops.push_back(Norm("norm1", rep_tokens * h, m, shape.norm_kernels, "norm1_in", "norm1_fp32",
                     "norm1_normed"));

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
    if (m.position == PositionKind::kRope) {
      ops.push_back(Rope(tokens * (q + kv) / t, shape.kernels));
    }
    // Eager grouped-query attention repeats K and V to every query head before SDPA
    // (torchtitan model.py repeat_kv: expand then reshape, a copy), and SDPA saves the copies
    // where k and v would be: 2·2·T·(q − kv) bytes more. Per-op checkpointing caches wv's
    // output (v, kv wide) and re-runs the repeat.
    const int64_t kv_read = eager && kv < q ? q : kv;
    if (kv_read != kv) {
      LayerOp repeat = Elementwise("repeat_kv", 2 * tokens * kv / t, 2 * tokens * q / t, 0);
      repeat.kernels = 2;
      repeat.saves = {{"kv_repeated", bytes(kAct * 2 * tokens * (q - kv) / t)}};
      ops.push_back(repeat);
    }

    // Attention core: QK^T and AV are 2·b·s²·a·d/t FLOPs each; causal masking lets flash skip half.
    const double full_core = 4.0 * static_cast<double>(b) * static_cast<double>(s) *
                             static_cast<double>(s_kv) * static_cast<double>(q) /
                             static_cast<double>(t);
    const int64_t scores = a * s * s_kv * b / t;  // elements of the score matrix per GPU
    if (shape.attention == AttentionKernel::kFlash) {
      LayerOp core;
      core.name = "flash_attention";
      core.op_class = OpClass::kAttention;
      // Causal within each of the packed documents: 1/packing of the sequence's score blocks.
      core.flops = Flops::Count(full_core / 2 / shape.packing);
      // Reads q and writes o for its own tokens, reads k and v of the whole sequence.
      core.bytes_moved = bytes(kAct * (tokens * 2 * q + s_kv * b * 2 * kv_read) / t);
      if (shape.cp > 1) core.role = ParallelRole::kCpKv;
      core.core = true;
      core.sac_recompute = 0;  // its outputs are on the save list
      core.saves = {{"q", bytes(kAct * tokens * q / t), false, /*sac_cached=*/true},
                    {"k", bytes(kAct * tokens * kv / t)},
                    {"v", bytes(kAct * tokens * kv / t), false, true},
                    {"softmax_lse", bytes(4 * a * s * b / t), /*attention_core=*/true, true}};
      ops.push_back(core);
      if (shape.cp_ring) ops.push_back(RingMerge(tokens * q / t, tokens * kv / t, shape.cp));
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

  const size_t norm2 = ops.size();
  ops.push_back(Norm("norm2", rep_tokens * h, m, shape.norm_kernels, "norm2_in", "norm2_fp32",
                     "norm2_normed"));

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
    if (eager) {
      // `silu(w1(x)) * w3(x)`: silu reads and writes the gate, the product reads silu's output
      // and up and writes; the product saves silu's output beside up.
      swiglu.bytes_moved = bytes(kAct * 5 * tokens * f / t);
      swiglu.kernels = 2;
      swiglu.saves.push_back({"silu_out", bytes(kAct * tokens * f / t)});
    }
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

  TagRecomputeModules(moe_layer && m.moe, ops.begin() + static_cast<std::ptrdiff_t>(norm2),
                      ops.end());

  LayerOp residual2 = Elementwise("mlp_residual", 2 * rep_tokens * h, rep_tokens * h, 1);
  if (dropout) residual2.saves = {{"mlp_mask", bytes(kMask * rep_tokens * h)}};
  ops.push_back(residual2);
  const bool block_scaled =
      shape.fp8_recipe == Fp8Recipe::kBlockwise || shape.fp8_recipe == Fp8Recipe::kMxfp8;
  for (LayerOp& op : ops) {
    if (op.op_class != OpClass::kGemm || op.keep_16bit) continue;
    Fp8Casts(shape, op);
    if (!shape.te_fp8) continue;
    for (SavedTensor& t : op.saves) {
      if (!t.weight_grad_input) continue;
      // The fp8 copy, 1 B per element; a block recipe keeps its column-wise scales with it (one
      // per 32 elements: an E8M0 byte per 32 under MXFP8, an fp32 per 128 under blockwise).
      const int64_t elements = t.bytes.count() / kAct;
      t.bytes = Bytes::Count(elements + (block_scaled ? elements / 32 : 0));
    }
  }
  return ops;
}

void Fp8Casts(const ActivationShape& shape, LayerOp& op) {
  const int64_t in = op.fp8_input_elements, out = op.fp8_output_elements;
  // Transformer Engine casts a cached weight once per step instead (Fp8WeightCopyOf).
  const int64_t w = shape.te_fp8_weight_cache ? 0 : op.fp8_weight_elements;
  const int16_t weight_casts = w > 0 ? 1 : 0;
  switch (shape.fp8_recipe) {
    case Fp8Recipe::kDelayed:
    case Fp8Recipe::kTensorwise: {
      // Forward: the input and the weight read in 16 bits and written in fp8 (3 B each).
      // Backward: the output gradient cast (3 B), with its transpose where the GPU's fp8 GEMMs
      // take only TN layouts (+1 B), and there the saved fp8 input and the weight transposed
      // (1 + 1 B each) for the weight- and input-gradient GEMMs.
      op.fp8_cast_fwd = Bytes::Count(3 * (in + w));
      op.fp8_cast_kernels_fwd = static_cast<int16_t>(1 + weight_casts);
      op.fp8_cast_bwd = Bytes::Count(3 * out);
      op.fp8_cast_kernels_bwd = 1;
      if (shape.fp8_transposes) {
        op.fp8_cast_bwd += Bytes::Count(out + 2 * (in + w));
        op.fp8_cast_kernels_bwd = static_cast<int16_t>(2 + weight_casts);
      }
      if (shape.fp8_recipe == Fp8Recipe::kTensorwise) {
        // Current scaling cannot fuse the amax into the cast: each cast first reads its 16-bit
        // source for the amax (nvte_compute_amax), then computes the scale
        // (nvte_compute_scale_from_amax), then casts (transformer_engine/pytorch/csrc/
        // quantizer.cpp, Float8CurrentScalingQuantizer::quantize_impl): 2 B and two kernels
        // more per cast.
        op.fp8_cast_fwd += Bytes::Count(2 * (in + w));
        op.fp8_cast_kernels_fwd =
            static_cast<int16_t>(op.fp8_cast_kernels_fwd + 2 + 2 * weight_casts);
        op.fp8_cast_bwd += Bytes::Count(2 * out);
        op.fp8_cast_kernels_bwd = static_cast<int16_t>(op.fp8_cast_kernels_bwd + 2);
      }
      return;
    }
    case Fp8Recipe::kBlockwise:
    case Fp8Recipe::kMxfp8: {
      // A block scale runs along one dimension, so one kernel writes each tensor row-wise and
      // column-wise at once, with a scale per block in each direction (Float8BlockQuantizer and
      // MXFP8Quantizer::create_tensor allocate both, transformer_engine/pytorch/csrc/
      // quantizer.cpp): 2 B read, 2 B and the scales written, and no transposes in the backward.
      // Scales: an E8M0 byte per 32 elements (MXFP8); an fp32 per 1 x 128 block of activations
      // and gradients and per 128 x 128 block of weights (blockwise).
      const bool mx = shape.fp8_recipe == Fp8Recipe::kMxfp8;
      auto cast = [](int64_t n, int64_t per_scale_byte) { return 4 * n + 2 * n / per_scale_byte; };
      op.fp8_cast_fwd = Bytes::Count(cast(in, 32) + cast(w, mx ? 32 : 4096));
      op.fp8_cast_kernels_fwd = static_cast<int16_t>(1 + weight_casts);
      op.fp8_cast_bwd = Bytes::Count(cast(out, 32));
      op.fp8_cast_kernels_bwd = 1;
      return;
    }
  }
}

Fp8WeightCopy Fp8WeightCopyOf(const ActivationShape& shape) {
  switch (shape.fp8_recipe) {
    case Fp8Recipe::kDelayed:
    case Fp8Recipe::kTensorwise: {
      // The 16-bit weight read, its fp8 copy written, and the copy's transpose where fp8 GEMMs
      // take only TN layouts; current scaling reads the weight once more for its amax, in two
      // more kernels. Kept: 1 B per element, 2 with the transpose (Transformer Engine's
      // tests/pytorch/test_cpu_offload.py, _estimate_cached_weight_size: "FP8 tensor-scaling
      // caches one byte per element", twice that where non-TN fp8 GEMMs are not supported).
      const double kept = shape.fp8_transposes ? 2 : 1;
      const bool current = shape.fp8_recipe == Fp8Recipe::kTensorwise;
      return {2 + kept + (current ? 2 : 0), kept, static_cast<int16_t>(current ? 3 : 1)};
    }
    case Fp8Recipe::kBlockwise:
      // Row-wise and column-wise copies with their scales: an fp32 per 128 x 128 block each way.
      return {4 + 8.0 / 16384, 2 + 8.0 / 16384, 1};
    case Fp8Recipe::kMxfp8:
      // "MXFP8 caches one data byte per element and one scale byte per 32 elements", each way
      // (test_cpu_offload.py, as above).
      return {2 + 2 * (1 + 1.0 / 32), 2 * (1 + 1.0 / 32), 1};
  }
  return {};
}

bool Allocated(const SavedTensor& t, Recompute policy) {
  if (t.not_saved) return false;
  return !t.sac_only || policy == Recompute::kOp;
}

bool Kept(const std::vector<LayerOp>& ops, const LayerOp& op, const SavedTensor& t,
          Recompute policy, RecomputeModules modules) {
  const bool layer_input = &op == &ops.front() && &t == &op.saves.front();
  switch (policy) {
    case Recompute::kNone:
      return !t.sac_only && !t.not_saved;
    case Recompute::kSelective: {
      const bool core = t.attention_core && (modules & ModuleBit(RecomputeModule::kCoreAttn));
      return !t.sac_only && !t.not_saved && !core && !(t.dropped_by & modules);
    }
    case Recompute::kFull:
      return layer_input;
    case Recompute::kOp:
      return layer_input || (t.sac_cached && !t.not_saved);
  }
  return true;
}

bool Reruns(const LayerOp& op, Recompute policy, RecomputeModules modules) {
  switch (policy) {
    case Recompute::kNone:
      return false;
    case Recompute::kSelective:
      return (op.core && (modules & ModuleBit(RecomputeModule::kCoreAttn))) ||
             (op.rerun_by & modules) != 0;
    case Recompute::kFull:
      return true;
    case Recompute::kOp:
      return op.sac_recompute > 0;
  }
  return true;
}

Bytes SavedActivationBytes(const std::vector<LayerOp>& ops, Recompute policy,
                           RecomputeModules modules) {
  Bytes sum;
  for (const LayerOp& op : ops) {
    for (const SavedTensor& t : op.saves) {
      if (Kept(ops, op, t, policy, modules)) sum += t.bytes;
    }
  }
  return sum;
}

Bytes LayerActivationBytes(const ModelSpec& m, const ActivationShape& shape, Recompute policy,
                           RecomputeModules modules) {
  return SavedActivationBytes(LayerForwardOps(m, shape), policy, modules);
}

}  // namespace sim
