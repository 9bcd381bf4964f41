#pragma once
// The forward ops of one decoder layer, each with its FLOPs, the bytes it moves through HBM and
// the tensors it saves for the backward pass. This op-level accounting is the single source of
// activation memory: `stepsim ledger` sums it, and the replay allocates and frees exactly these
// tensors. Shapes are per GPU: TP t shards heads and FFN columns; sequence parallelism (SP)
// additionally shards the tensors that are replicated across the TP group by t along s.
//
// Saved tensors (16-bit activations, 2 B/element; dropout masks 1 B; T = s·b tokens):
//
//   op             tensor            bytes                  TP t, no SP   with SP
//   norm1          norm1_in          2·T·h                  replicated    ÷t   (the layer input)
//   qkv            qkv_in            2·T·h                  replicated    ÷t
//   attention      q, k              2·T·h + 2·T·kv         ÷t            ÷t
//     eager        softmax_out       2·a·s²·b               ÷t            ÷t   (core)
//     eager+drop   softmax_mask      1·a·s²·b               ÷t            ÷t   (core)
//     eager+drop   probs_dropped     2·a·s²·b               ÷t            ÷t   (core)
//     flash        softmax_lse       4·a·s·b (fp32/row)     ÷t            ÷t   (core)
//                  v                 2·T·kv                 ÷t            ÷t
//   out_proj       context           2·T·h                  ÷t            ÷t
//   attn_dropout   attn_mask         1·T·h  (dropout > 0)   replicated    ÷t
//   norm2          norm2_in          2·T·h                  replicated    ÷t
//   fc1 / gate_up  mlp_in            2·T·h                  replicated    ÷t
//   gelu           gelu_in           2·T·f                  ÷t            ÷t
//   swiglu         gate, up          2·T·f + 2·T·f          ÷t            ÷t
//   fc2 / down     fc2_in            2·T·f                  ÷t            ÷t
//   mlp_dropout    mlp_mask          1·T·h  (dropout > 0)   replicated    ÷t
//
// For the GPT layer of Korthikanti et al. 2022 (f = 4h, MHA, dropout, eager) this sums to
// s·b·h·(10 + 24/t) replicated-plus-sharded bytes and 5·a·s²·b/t for the core — exactly Table 2:
// 34·s·b·h + 5·a·s²·b without parallelism. "core" marks what selective recompute drops (the
// attention core is re-run in backward). Full recompute keeps only norm1_in, the layer input.
//
// Heads wider than h / a (ModelSpec::head_dim_override, Qwen3) make q, the context and the
// attention core a·d wide where the table says h.
//
// Llama-style layers (RMSNorm, SwiGLU, GQA, no dropout) keep the same structure without masks:
// the SwiGLU backward needs gate and up (for silu(gate)·up) and the down-projection input, so
// 6·T·f/t for the MLP; GQA shrinks k and v to kv = kv_heads·d columns. Flash attention never
// materialises the s² scores and keeps q, k, v, its output (= context) and a fp32 log-sum-exp per
// row and head (Dao et al. 2022, FlashAttention, Algorithm 2 outputs O and L).
//
// Rotary embeddings (PositionKind::kRope) add a `rope` kernel on q and k after the projection,
// saving nothing. training.kernels: eager (PyTorch eager modules, torchtitan's Llama without
// torch.compile) prices RMSNorm, RoPE and SwiGLU as their eager decompositions and adds
// `repeat_kv` for grouped-query attention; autograd then keeps more (N = T·h per norm):
//
//   norm1, norm2   norm*_fp32, norm*_normed   2·N + 2·N       the fp32 upcast (4 B, 2 of them
//                                                             counted by norm*_in) and the
//                                                             normalised 16-bit tensor
//   swiglu         silu_out                   2·T·f/t         silu's output, kept by the product
//   repeat_kv      kv_repeated                4·T·(q − kv)/t  SDPA keeps K and V at q's width
//
// none of them cached by per-op checkpointing (the matmul outputs it caches are the same).
//
// A mixture-of-experts layer (ModelSpec::moe) replaces norm2's MLP by Megatron-Core's MoELayer
// with its all-to-all token dispatcher (megatron/core/transformer/moe/: router.py TopKRouter,
// token_dispatcher.py MoEAlltoAllTokenDispatcher, experts.py GroupedMLP), E experts, top-k,
// expert width f_e, EP e, expert TP r (ParallelSpec::etp). Each GPU routes its own tokens,
// L = T/t under SP (Megatron-Core refuses MoE with TP but without SP), T without TP; the
// experts compute R = L·k·r token copies (the EP all-to-all brings L·k, the ETP all-gather
// multiplies by r):
//
//   op             tensor            bytes                  note
//   router         mlp_in            2·L·h                  h × E GEMM on L rows
//   router_topk    router_probs      4·L·E                  fp32 scores (softmax or sigmoid)
//   permute        permute_indices   8·L·k                  int64 sort indices; a2a, ETP gather
//   expert_gate_up expert_in         2·R·h                  grouped GEMM over R rows
//   expert_swiglu  expert_gate, up   2·R·f_e/r each
//   expert_down    expert_fc2_in     2·R·f_e/r
//   unpermute      expert_out        2·L·k·h                ETP reduce-scatter, a2a in; sum
//   shared_*       as the dense MLP, width S·f_s/t, on the T tokens (input = mlp_in; TP
//                  column/row-parallel with its SP gather and reduce-scatter)
//
// With balanced routing each of the e ranks of an EP group receives L·k token copies (e·L·k
// copies over E experts, E/e experts per rank), so a GPU's expert FLOPs (R rows at width
// f_e/r) are those of k dense MLPs of width f_e over its L tokens whatever e and r are; the
// all-to-alls move 2·L·k·h bytes per GPU, (e − 1)/e of it off-rank.

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "sim/base/units.h"
#include "sim/spec/model.h"
#include "sim/spec/scenario.h"

namespace sim {

// What prices an op (sim/cost/compute_cost.h): GEMMs, attention kernels and memory-bound
// kernels on the GPU; offload's copies over the GPU's PCIe link (bytes_moved), the host CPU's
// memory-bound work such as an offloaded optimizer step (bytes_moved of host DRAM traffic), and
// NVMe reads or writes (bytes_moved).
enum class OpClass { kGemm, kAttention, kMemoryBound, kPcieCopy, kHostCompute, kNvmeIo };

// FlashAttention's backward runs five matmuls to the forward's two (it recomputes QK^T and the
// softmax): 2.5 times the forward's FLOPs (Dao 2023, FlashAttention-2, arXiv 2307.08691, section
// 3.1.2). Model FLOPs count a backward as twice the forward (docs/model.md "Conventions"): the
// other half forward is hardware FLOPs only.
inline constexpr double kFlashBackwardFactor = 2.5;

// Where a layer op meets tensor and context parallelism (Megatron-LM, Shoeybi et al. 2019 §3;
// Korthikanti et al. 2022 §4.2.2):
//   kColumn  column-parallel GEMM (qkv, fc1 / gate_up): its input is the full activation (with
//            SP all-gathered before it, and again in backward for the weight gradient); its
//            input gradient is all-reduced (SP: reduce-scattered).
//   kRow     row-parallel GEMM (out_proj, fc2 / down): its partial outputs are all-reduced
//            (SP: reduce-scattered); with SP its output gradient is all-gathered in backward.
//   kCpKv    the attention core under context parallelism: K and V of the whole sequence are
//            all-gathered over the CP group before it (and in backward, whose dK, dV are
//            reduce-scattered).
//   kEpDispatch  the routed tokens' permutation under expert parallelism: its output (each
//            token once per chosen expert) goes to the experts' ranks by an all-to-all over the
//            EP group after it; in backward the gradients come back by one before it.
//   kEpCombine   the un-permutation: the experts' outputs come back by an all-to-all before it
//            (and their gradients go out by one after its backward).
enum class ParallelRole { kNone, kColumn, kRow, kCpKv, kEpDispatch, kEpCombine };

struct SavedTensor {
  absl::string_view name;
  Bytes bytes;
  bool attention_core = false;  // dropped (recomputed) under selective recompute
  // Per-op selective checkpointing (Recompute::kOp): torchtitan caches the outputs of the ops on
  // its save list — every odd-numbered matmul of a layer (wq, wv, w1, w2 of a Llama layer: the
  // policy counts aten.mm calls and recomputes every second one) and the attention kernel —
  // besides the layer input that the checkpoint keeps (torchtitan
  // torchtitan/distributed/activation_checkpoint.py, _custom_policy, at the 2024-25 releases).
  bool sac_cached = false;
  // Held only under per-op checkpointing: an op output that autograd itself never saves (w2's
  // output, on the save list, but needed by no backward).
  bool sac_only = false;
  // The input of a GEMM that autograd saves only for the GEMM's weight gradient (its input
  // gradient needs the weight, not the input): not saved when the weight is frozen and carries
  // no adapter (sim/workload/finetune.h).
  bool weight_grad_input = false;
  // Not saved at all (a frozen projection's input, see above): it still sizes the input gradient
  // the op's backward produces.
  bool not_saved = false;
  // The selective recompute modules (training.recompute_modules) whose checkpoint drops it,
  // core_attn's being attention_core.
  RecomputeModules dropped_by = 0;
};

struct LayerOp {
  absl::string_view name;
  OpClass op_class = OpClass::kMemoryBound;
  Flops flops;        // forward, one GPU, one micro-batch
  Bytes bytes_moved;  // HBM traffic of the forward kernel(s)
  std::vector<SavedTensor> saves;
  ParallelRole role = ParallelRole::kNone;
  // Part of the attention core (QK^T, softmax, dropout, AV; or the flash kernel): what selective
  // recompute (module core_attn) re-runs in the backward.
  bool core = false;
  // The other selective recompute modules that re-run it (layer_ops.cc tags them;
  // docs/reference.md "Activation checkpointing").
  RecomputeModules rerun_by = 0;
  // The fraction of the op that per-op checkpointing re-runs: 0 for the cached matmuls and
  // attention, the recomputed matmuls' share of a fused GEMM (wk of qkv, w3 of gate_up), 1 for
  // the kernels it never caches (norms, rotary, activations, residual adds).
  double sac_recompute = 1.0;
  // Fine-tuning (sim/workload/finetune.h): the op's weights are frozen (its backward computes
  // the input gradient only), the FLOPs its LoRA adapters add to the forward (twice that in the
  // backward), and QLoRA's 16-bit copy of its projection while it runs.
  bool frozen = false;
  Flops adapter_flops;
  Bytes dequantized;
  // FP8 training: the HBM traffic of the casts around a GEMM, which run as their own kernels
  // before it, and those kernels, under the scenario's recipe (Fp8Casts in layer_ops.cc; under
  // delayed scaling on Hopper: forward, the input (rows × inner) and the weight (inner × cols)
  // read in 16 bits and written in fp8, 3 B per element; backward, the output gradient cast and
  // transposed, 2 B read and 2 B written per rows × cols element, the saved fp8 input and the fp8
  // weight transposed, 1 + 1 B each). Zero for ops that stay 16-bit.
  Bytes fp8_cast_fwd, fp8_cast_bwd;
  int16_t fp8_cast_kernels_fwd = 0, fp8_cast_kernels_bwd = 0;
  // The elements those casts read: the input (rows × inner), the output gradient (rows × cols)
  // and the weight (inner × cols, every expert's for a grouped GEMM). Transformer Engine casts
  // the weights once per step instead (ActivationShape::te_fp8_weight_cache).
  int64_t fp8_input_elements = 0, fp8_output_elements = 0, fp8_weight_elements = 0;
  // A GEMM-class kernel that runs in 16 bits even in fp8 training (eager attention's batched
  // QK^T and PV).
  bool keep_16bit = false;
  // A GEMM's per-GPU shape (rows x inner) . (inner x cols), rows the tokens; 0 where the op is
  // not a linear layer's GEMM.
  int64_t gemm_rows = 0, gemm_inner = 0, gemm_cols = 0;
  // A grouped GEMM's groups (experts), each (gemm_rows x inner) . (inner x cols); 1 otherwise.
  int64_t gemm_groups = 1;
  // Kernels the forward launches (each pays the GPU's launch overhead and the host's dispatch;
  // the backward twice as many): 1 for a fused kernel, more for an eager decomposition.
  int16_t kernels = 1;
  // The backward's HBM traffic where it is not twice the forward's (ring attention's merge).
  std::optional<Bytes> backward_bytes;
};

struct ActivationShape {
  int64_t seq_len = 0;
  int64_t micro_batch = 1;
  int64_t tp = 1;
  bool sequence_parallel = false;
  AttentionKernel attention = AttentionKernel::kFlash;
  // Context parallelism: each GPU holds seq_len / cp tokens of every sequence; its queries
  // attend to the whole (gathered) sequence.
  int64_t cp = 1;
  int64_t ep = 1;   // expert parallelism (MoE models)
  int64_t etp = 1;  // expert tensor parallelism (ParallelSpec::expert_tp)
  // The replayed GPU's routed token copies over the balanced T·k (sim/workload/moe_routing.h):
  // > 1 on the busiest EP rank of a skewed routing.
  double expert_load = 1.0;
  KernelFusion kernels = KernelFusion::kFused;       // TrainingSpec::kernels
  KernelFusion norm_kernels = KernelFusion::kFused;  // TrainingSpec::NormKernels()
  // What document masking divides flash attention's work by (TrainingSpec::AttentionPacking:
  // the documents per sequence, or S² / Σ L² for given lengths).
  double packing = 1;
  // FP8 GEMMs through Transformer Engine (precision fp8 under kernel library
  // transformer_engine): a linear layer saves for its weight gradient the fp8 copy of its input
  // that its GEMM read, 1 B per element instead of 2 (TE's _Linear, _LayerNormLinear and
  // _LayerNormMLP forward save inputmat / ln_out in fp8 when fp8 is on:
  // transformer_engine/pytorch/module/linear.py, "saved_inputmat = inputmat"). And it casts
  // each weight to fp8 with its transpose once per step, on the first micro-batch, keeping the
  // copy for the others: Megatron-Core's TE wrappers pass is_first_microbatch unless
  // disable_parameter_transpose_cache (megatron/core/extensions/transformer_engine.py,
  // TELinear.forward), and TE's docstring of it says "during FP8 training, it allows caching of
  // the FP8 versions of the weights". Not where the weights are gathered anew for every
  // micro-batch (ZeRO-3, FSDP's full shard).
  bool te_fp8 = false;
  bool te_fp8_weight_cache = false;
  // Precision fp8: the recipe (TrainingSpec::fp8_recipe), and whether the GPU's fp8 GEMMs take
  // only TN layouts, so that a tensor-scaled operand needs a transposed copy
  // (GpuSpec::Fp8AnyLayoutGemm).
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;
  bool fp8_transposes = true;
  // Ring context parallelism (CpKind::kRing): attention as one flash call per K, V chunk, the
  // partial outputs merged (RingMerge in layer_ops.cc).
  bool cp_ring = false;
  // Megatron-Core's all-to-all token dispatcher (framework megatron, EP > 1): with several
  // experts per GPU it sorts the received token copies by local expert after the dispatch and
  // back before the combine ("Permutation 2", sort_chunks_by_idxs, or a view/transpose/contiguous
  // of the padded tokens under --moe-pad-expert-input-to-capacity: MoEAlltoAllTokenDispatcher in
  // megatron/core/transformer/moe/token_dispatcher.py), one copy of the routed tokens each way.
  bool mcore_alltoall = false;
  // Transformer Engine's GroupedLinear (Megatron-Core's TEGroupedMLP) runs a grouped GEMM as one
  // cuBLAS GEMM per expert over TE's compute streams (general_grouped_gemm ->
  // nvte_multi_stream_cublas_gemm, transformer_engine/common/gemm/cublaslt_gemm.cu): a kernel per
  // local expert, twice that backward (input and weight gradients), each with its fixed cost.
  bool te_grouped_gemm = false;
};

// A norm's forward HBM traffic per element of its input and the kernels it launches
// (training.norm_kernel, else training.kernels; eager RMSNorm upcasts to fp32 in nine
// kernels, layer_ops.cc).
struct NormCost {
  int64_t bytes_per_element = 4;
  int16_t kernels = 1;
};
NormCost NormKernelCost(const ModelSpec& m, KernelFusion kernels);

// The shape a scenario's layers run at on the replayed GPU (the busiest EP rank's load).
ActivationShape ScenarioShape(const Scenario& s);
// The token copies a GPU's experts compute per micro-batch when each GPU routes `local`
// tokens: local·k·etp when balanced (the EP all-to-all brings local·k, the expert-TP all-gather
// multiplies by etp), times the load on the busiest rank of a skewed routing
// (sim/workload/moe_routing.h).
int64_t RoutedTokenCopies(const ActivationShape& shape, int64_t local, int64_t top_k);

// An MoE model's MoE layer (ModelSpec::IsMoeLayer), or with moe_layer = false its dense layers
// (the dense MLP of width ffn_hidden).
std::vector<LayerOp> LayerForwardOps(const ModelSpec& m, const ActivationShape& shape);
std::vector<LayerOp> LayerForwardOps(const ModelSpec& m, const ActivationShape& shape,
                                     bool moe_layer);

// Sets a GEMM's fp8 casts (LayerOp::fp8_cast_*) under the shape's recipe: their HBM bytes and
// kernels in the forward and the backward.
void Fp8Casts(const ActivationShape& shape, LayerOp& op);

// Transformer Engine's per-step fp8 copy of a weight (ActivationShape::te_fp8_weight_cache)
// under the shape's recipe: the HBM bytes its cast moves and the bytes the copy keeps, per
// weight element, and the kernels that make it, per weight.
struct Fp8WeightCopy {
  double cast_bytes_per_element = 0;
  double kept_bytes_per_element = 0;
  int16_t kernels_per_weight = 1;
};
Fp8WeightCopy Fp8WeightCopyOf(const ActivationShape& shape);

// Whether a layer under `policy` allocates `t` in its forward (sac_only tensors: only under op),
// keeps it to its backward, and needs it in its backward; `modules`: what selective recompute
// re-runs (TrainingSpec::recompute_modules).
bool Allocated(const SavedTensor& t, Recompute policy);
bool Kept(const std::vector<LayerOp>& ops, const LayerOp& op, const SavedTensor& t,
          Recompute policy, RecomputeModules modules = kDefaultRecomputeModules);
// Whether a checkpointed layer's recompute re-runs `op` (in full, or its sac_recompute share).
bool Reruns(const LayerOp& op, Recompute policy, RecomputeModules modules);

// Bytes one layer keeps from its forward to its backward under a recompute policy.
Bytes SavedActivationBytes(const std::vector<LayerOp>& ops, Recompute policy,
                           RecomputeModules modules = kDefaultRecomputeModules);
Bytes LayerActivationBytes(const ModelSpec& m, const ActivationShape& shape, Recompute policy,
                           RecomputeModules modules = kDefaultRecomputeModules);

}  // namespace sim
