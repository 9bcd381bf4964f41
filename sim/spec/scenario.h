#pragma once
// One training job (scenarios/NAME.yaml) after loading, resolution of catalog names and
// validation. The member initialisers below are the documented defaults of every optional key
// (docs/reference.md "Scenario files" lists them); no other place in the code writes a default.

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "sim/base/quantity.h"
#include "sim/base/units.h"
#include "sim/spec/fabric.h"
#include "sim/spec/hardware.h"
#include "sim/spec/model.h"

namespace sim {

enum class Precision { kBf16, kFp16, kFp8 };
// How fp8 training scales its tensors (training.fp8_recipe; Megatron-LM --fp8-recipe, Transformer
// Engine's recipe classes in transformer_engine/common/recipe/__init__.py). delayed
// (DelayedScaling): one scale per tensor from the amax history of earlier steps, the cast fused
// with its amax. tensorwise (Float8CurrentScaling; torchao's Float8Linear default): one scale per
// tensor from the tensor itself, an amax pass and a scale kernel before every cast.
// blockwise (Float8BlockScaling, DeepSeek-V3's recipe): a scale per 1 x 128 block of activations
// and gradients and per 128 x 128 block of weights. mxfp8 (MXFP8BlockScaling, Blackwell): an
// E8M0 scale per 32 elements. The block recipes scale along one direction, so each cast writes the
// tensor twice, row-wise and column-wise (sim/workload/layer_ops.cc Fp8Casts).
enum class Fp8Recipe { kDelayed, kTensorwise, kBlockwise, kMxfp8 };
// adam8bit: block-wise 8-bit moments (bitsandbytes AdamW8bit, torchao AdamW8bit);
// adam8bit_paged: the same states in CUDA unified memory (bitsandbytes PagedAdamW8bit), outside
// PyTorch's allocator: they use free GPU memory when there is some and page to the host when
// not, so they never make a step run out of memory; the report counts them as host memory.
enum class OptimizerKind { kAdamW, kSgd, kAdam8bit, kAdam8bitPaged };
// How torch.optim.AdamW runs its update (training.optimizer_impl; torch/optim/adamw.py, adam.py):
// foreach: the multi-tensor path, PyTorch's default for CUDA tensors, whose
// _foreach_sqrt(exp_avg_sqs) makes a new tensor for every parameter of a group at once, so the
// step holds one parameter-sized copy of the second moment beside the states; loop
// (foreach=False): one parameter at a time, two copies of the largest tensor; fused (fused=True,
// and the fused Adam kernels of DeepSpeed, Megatron/Apex/Transformer Engine): in place, no copy.
// Measured on an H200 (docs/measurements/h200-2026-12-04): foreach adds 11.97 GiB to DDP's
// fp32 Llama 3.2 3B step and 5.98 GiB to torchtune's bf16 one; loop adds 2.94 GiB, twice the
// fp32 embedding.
enum class OptimizerImpl { kForeach, kLoop, kFused };
// Fine-tuning (training.finetune): every parameter trained; LoRA adapters on frozen 16-bit base
// weights (Hu et al. 2021, arXiv 2106.09685); QLoRA's adapters on NF4 base weights (Dettmers et
// al. 2023, arXiv 2305.14314).
enum class FinetuneMethod { kFull, kLora, kQlora };
// The linear projections of a decoder layer an adapter can target (torchtune's q_proj, k_proj,
// v_proj, output_proj, w1 = gate, w3 = up, w2 = down; a GELU MLP has up = fc1 and down = fc2).
enum class LoraTarget { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kNumLoraTargets = 7;
// Where the model states and activations live (parallel.offload): on the GPU, in host DRAM, or
// on the node's NVMe drives (ZeRO-Infinity).
enum class OffloadTarget { kNone, kCpu, kNvme };
// Activation checkpointing of a decoder layer: none; selective (Megatron-LM: the attention core
// is re-run); full (only the layer input is kept); op (torchtitan's per-op selective
// checkpointing: the outputs of every other matmul and of attention are kept, the rest re-run).
enum class Recompute { kNone, kSelective, kFull, kOp };
// Megatron-LM --recompute-method with --recompute-num-layers N: uniform checkpoints groups of N
// consecutive layers (their first input kept, the group re-run at once); block checkpoints the
// first N layers of each pipeline stage (model chunk) and keeps everything of the others.
enum class RecomputeMethod { kUniform, kBlock };
// Megatron-Core's selective recompute modules (--recompute-granularity selective
// --recompute-modules, training.recompute_modules; megatron/core/transformer/
// transformer_config.py, transformer_layer.py, moe/experts.py): core_attn checkpoints the
// attention core (the default); layernorm discards a norm's output once its consumer has run and
// re-runs the norm before that consumer's backward (CheckpointWithoutOutput; under Transformer
// Engine's layer spec the only separate norm is an MoE layer's pre-MLP norm: the others are fused
// into the next linear layer and are IdentityOp); mlp checkpoints a dense layer's MLP with its
// fused norm; moe checkpoints the whole MoE layer after its norm; moe_act discards the experts'
// activation output (the down projection's input) and re-runs the activation; shared_experts
// checkpoints the shared experts.
enum class RecomputeModule { kCoreAttn, kLayerNorm, kMlp, kMoe, kMoeAct, kSharedExperts };
inline constexpr int kNumRecomputeModules = 6;
// A set of RecomputeModule, bit i for module i.
using RecomputeModules = uint8_t;
constexpr RecomputeModules ModuleBit(RecomputeModule m) {
  return static_cast<RecomputeModules>(1u << static_cast<int>(m));
}
inline constexpr RecomputeModules kDefaultRecomputeModules = ModuleBit(RecomputeModule::kCoreAttn);
// How a mixture of experts' router spreads tokens over the experts (training.routing).
enum class RoutingDistribution { kBalanced, kZipf };
// How each GPU's speed is drawn around its calibrated speed (cluster.variability).
enum class SpeedDistribution { kNormal, kLognormal };
// How the loss turns logits into a gradient (sim/workload/loss.h has each kernel's tensors):
// eager PyTorch cross_entropy on fp32-upcast logits; Megatron-LM's vocab-parallel cross-entropy
// (fp32 copy, softmax and gradient in place); a fused kernel that keeps the 16-bit logits and
// writes the gradient into them (Transformer Engine parallel_cross_entropy); torch.compile'd
// cross_entropy; and chunked cross-entropy (torchtune CEWithChunkedOutputLoss), fp32 one chunk
// at a time.
// chunked_compiled: the same chunks with torch.compile on the loss (torchtune `compile: True`):
// each chunk's upcast is fused into its reductions, only the 16-bit chunk logits are kept.
// eager_16bit: PyTorch cross_entropy on the 16-bit logits themselves, after a shifted copy (a
// model cast to fp16/bf16 and run without autocast, as DeepSpeed's fp16 engine runs Hugging
// Face models before transformers 4.46 upcast the logits in its loss).
// flash_attn: flash-attention's CrossEntropyLoss with inplace_backward=False (llm-foundry's
// default loss_fn 'fused_crossentropy'): the 16-bit logits and per-row statistics are saved, the
// backward writes a new 16-bit gradient.
enum class LossKernel {
  kEager,
  kEager16,
  kVocabParallel,
  kFused,
  kCompiled,
  kChunked,
  kChunkedCompiled,
  kFlashAttn
};
enum class AttentionKernel { kFlash, kEager };
// Which implementation runs flash attention (training.flash_impl), each timed as FlashAttention-2
// on the same GPU times its published speed ratio (sim/cost/compute_cost.h FlashImplFactor):
// fa2: FlashAttention-2 (flash-attn 2.x, PyTorch SDPA's flash backend); fa3: FlashAttention-3
// (Hopper only); triton: FlashAttention in Triton (flash_attn_triton.py, the kernel of
// llm-foundry's `attn_impl: triton`).
enum class FlashImpl { kFa2, kFa3, kTriton };
// How a layer's small kernels run (training.kernels). fused: one kernel each for a norm, the
// rotary embedding and the SwiGLU product (Megatron-LM/Transformer Engine's fused kernels,
// llm-foundry's, or torch.compile's). eager: PyTorch eager modules as Meta's reference Llama and
// torchtitan write them (torchtitan/models/llama/model.py and norms.py, without torch.compile):
// RMSNorm upcast to fp32 in nine kernels, RoPE by complex multiplication in fp32, SwiGLU as
// silu then a product, and grouped-query K and V repeated to every head before SDPA
// (sim/workload/layer_ops.cc prices each).
enum class KernelFusion { kFused, kEager };
// Framework presets (sim/workload/policy/): DeepSpeed ZeRO, PyTorch FSDP, Megatron-LM,
// PyTorch DDP with torch.cuda.amp (fp32 parameters and gradients, autocast's 16-bit copies), and
// torchtune (bf16 parameters, gradients and optimizer states, no fp32 master; FSDP2 to shard).
enum class Framework { kDeepSpeed, kFsdp, kMegatron, kDdp, kTorchtune };
// FSDP sharding strategies (torch.distributed.fsdp.ShardingStrategy).
enum class FsdpSharding { kNoShard, kShardGradOp, kFullShard, kHybridShard };
// NCCL's algorithms: ring; (double binary) tree, for all-reduce; hierarchical = intra-node
// reduce-scatter, inter-node all-reduce/all-gather of the shard, intra-node all-gather;
// nvls = NVLink SHARP all-reduce inside one NVSwitch (H100 and later) node; nvls_tree = NVLS
// inside each node pipelined with an inter-node all-reduce of each rail's shard (NCCL 2.18+);
// collnet = NCCL's CollNet all-reduce, reduced in the switches of a SHARP fabric (intra-node
// reduce-scatter, the node's shards through its NICs into the switches' aggregation tree and
// back, intra-node all-gather); auto = the fastest for each collective, as NCCL's tuner picks.
enum class CollectiveAlgorithm { kRing, kTree, kHierarchical, kNvls, kNvlsTree, kCollnet, kAuto };
inline constexpr int kNumCollectiveAlgorithms = 6;  // without kAuto
// Pipeline schedules: GPipe (all forwards, then all backwards), 1F1B (PipeDream-Flush,
// Narayanan et al. SC21 §2.2.1) and interleaved 1F1B with `pp_chunks` model chunks per stage
// (Megatron-LM's virtual pipeline, SC21 §2.2.2).
enum class PipelineSchedule { kGpipe, k1F1B, kInterleaved };
// How context parallelism exchanges the sequence: all-gather of K and V (Llama 3; Megatron-Core's
// cp_comm_type allgather), or all-to-all of Q, K, V before attention and of its output after,
// each GPU attending over the whole sequence for its share of the heads (DeepSpeed-Ulysses,
// Jacobs et al. 2023, arXiv 2309.14509; Megatron-Core's cp_comm_type a2a), or a ring: each GPU
// attends over the sequence's K and V one chunk at a time, one flash call per chunk, and merges
// the partial outputs by their log-sum-exp in fp32 (ring attention, Liu et al. 2023, arXiv
// 2310.01889, as PyTorch's context_parallel runs it for torchtitan,
// torch/distributed/tensor/experimental/_attention.py _templated_ring_attention; Transformer
// Engine's cp_comm_type p2p likewise).
enum class CpKind { kAllGather, kUlysses, kRing };
// The parallel dimensions in the rank order (innermost first).
enum class ParallelDim { kTp, kCp, kDp, kPp };

// The NCCL release whose tuner picks each collective's algorithm and protocol (cluster
// `nccl_version`, sim/cost/nccl_tuner.h): 2.28's tables, or 2.27's, whose NVLS bandwidth
// formula and Blackwell tree caps differ (src/graph/tuning.cc at v2.27.7 and v2.28.3).
enum class NcclRelease { k2_27, k2_28 };

// A Transformer Engine release, MAJOR.MINOR (the patch number does not change what is modelled).
// The default is the newest release whose behaviour the model follows.
struct TeVersion {
  int32_t major = 2;
  int32_t minor = 11;
  bool AtLeast(int32_t ma, int32_t mi) const { return major > ma || (major == ma && minor >= mi); }
  // Under Megatron's gradient-accumulation fusion a TE linear adds its weight gradient into the
  // parameter's fp32 main_grad and hands autograd a placeholder of the weight's shape. From 2.3
  // the placeholder is one tensor per (shape, dtype) that TE allocates once and keeps for the
  // rest of the run (transformer_engine/pytorch/module/base.py get_dummy_wgrad, used by
  // _Linear, _LayerNormLinear and _LayerNormMLP backward); GroupedLinear uses it from 2.10.
  // Before, each backward allocated a fresh torch.empty placeholder, freed once autograd
  // passed it on (not modelled: one weight's bytes for the span of a hook).
  bool CachesDummyWeightGradients() const { return AtLeast(2, 3); }
  bool CachesGroupedDummyWeightGradients() const { return AtLeast(2, 10); }
  bool operator==(const TeVersion&) const = default;
};
std::string Name(TeVersion v);

// The most GPUs a cluster may have: 2^20, ten times the largest clusters built (about 10^5 GPUs
// in 2025). The cluster graph and the replay grow with them (8 million GPUs took 17 GB).
inline constexpr int64_t kMaxClusterGpus = int64_t{1} << 20;

// Per-GPU speed variability (`cluster.variability`; sim/replay/variability.h draws and replays
// it). Each GPU's GEMM and memory-bound kernel speeds are drawn once per trial around the
// calibrated speed (mean 1) with coefficients of variation `gemm_cv` and `memory_cv`, times a
// speed drawn uniformly from the empirical table `speeds` when one is given; a share of nodes
// (power or thermal throttling of a whole node) and a share of single GPUs run at a fixed
// reduced speed. A share of the network links (each NIC of each node, the port of one rail) runs
// at a fraction of its bandwidth. `seed` makes the draws, and so every percentile, reproducible.
struct VariabilitySpec {
  SpeedDistribution distribution = SpeedDistribution::kLognormal;
  double gemm_cv = 0, memory_cv = 0;
  std::vector<double> speeds;
  double slow_node_share = 0, slow_node_speed = 1;
  double slow_gpu_share = 0, slow_gpu_speed = 1;
  double slow_link_share = 0, slow_link_speed = 1;
  int64_t seed = 1;
  // Whether any GPU can run at other than its calibrated speed.
  bool Any() const {
    return gemm_cv > 0 || memory_cv > 0 || !speeds.empty() ||
           (slow_node_share > 0 && slow_node_speed != 1) ||
           (slow_gpu_share > 0 && slow_gpu_speed != 1) || SlowLinks();
  }
  // Whether any network link can run below its bandwidth.
  bool SlowLinks() const { return slow_link_share > 0 && slow_link_speed != 1; }
  bool operator==(const VariabilitySpec&) const = default;
};

// One node type of a mixed cluster (`cluster.nodes: [{node: NAME, count: N}, ...]`).
struct NodeGroup {
  NodeSpec node;
  GpuSpec gpu;
  int64_t count = 0;
  bool operator==(const NodeGroup&) const = default;
};

struct ClusterSpec {
  GpuSpec gpu;
  NodeSpec node;
  int64_t nodes = 1;
  // A mixed cluster: its node types in rank order (the first fills the lowest ranks), `node`
  // and `gpu` being the first's and `nodes` their sum; empty when every node is `node`.
  // Pipeline stages fill the groups in order, each stage on one type (Scenario::StageGroups).
  std::vector<NodeGroup> groups;
  // The inter-node fabric; absent = a non-blocking rail-optimised two-level fat tree of the
  // node's NICs (the DGX SuperPOD reference design).
  std::optional<FabricSpec> fabric;
  NcclRelease nccl = NcclRelease::k2_28;
  // The share of every switch-to-switch link's bandwidth (leaf to spine, spine to core, or an
  // explicit fabric's cables between switches) that other jobs' traffic holds: a shared
  // cluster. This job's flows get the rest; its NICs and their leaf ports stay its own.
  double background_load = 0;
  VariabilitySpec variability;
  int64_t gpus() const { return nodes * node.gpus_per_node; }
  bool operator==(const ClusterSpec&) const = default;
};

struct FinetuneSpec {
  FinetuneMethod method = FinetuneMethod::kFull;
  int64_t rank = 8;   // r: adapters A (in × r) and B (r × out) per targeted projection
  double alpha = 16;  // the update is scaled by alpha / r (no effect on memory or time)
  // torchtune's Llama LoRA recipes: lora_attn_modules [q_proj, v_proj, output_proj] with
  // apply_lora_to_mlp: True.
  std::array<bool, kNumLoraTargets> targets = {true, false, true, true, true, true, true};
  bool adapters() const { return method != FinetuneMethod::kFull; }
};

// training.routing: tokens per expert. balanced: every expert receives the same share; zipf:
// expert i's share ∝ 1 / i^skew (the experts' popularity ranks shuffled over the EP ranks by
// `seed`), so the EP rank holding the hottest experts receives more tokens than the others and
// paces the step (sim/workload/moe_routing.h).
//
// capacity_factor (Megatron-Core --moe-expert-capacity-factor; GShard, Switch): each expert takes
// at most capacity = T·k·capacity_factor / E of a rank's token copies; the rest are dropped
// before the all-to-all. pad_to_capacity (--moe-pad-expert-input-to-capacity): every expert
// computes a full capacity, real or padding.
struct RoutingSpec {
  RoutingDistribution distribution = RoutingDistribution::kBalanced;
  double skew = 1.0;
  int64_t seed = 0;
  std::optional<double> capacity_factor;  // absent: dropless
  bool pad_to_capacity = false;
};

struct TrainingSpec {
  int64_t seq_len = 4096;
  int64_t micro_batch = 1;   // sequences per micro-batch per data-parallel rank
  int64_t global_batch = 0;  // 0 = one micro-batch per DP rank (m = 1)
  // The batch in tokens per step (0 = global_batch sequences decide): global_batch becomes the
  // nearest whole number of micro_batch x dp sequences (x pp for the interleaved schedule) of
  // seq_len tokens each, so a sequence-length sweep keeps the tokens per step.
  int64_t global_batch_tokens = 0;
  Precision precision = Precision::kBf16;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  Recompute recompute = Recompute::kNone;
  // torchtitan's layer-frequency option: only every K-th layer (layers K, 2K, ...) gets the
  // recompute policy; the others keep everything.
  int64_t recompute_every = 1;
  // Megatron-LM --recompute-num-layers (full recompute only); absent = every layer, one at a time.
  std::optional<int64_t> recompute_layers;
  RecomputeMethod recompute_method = RecomputeMethod::kUniform;
  // What recompute: selective re-runs (Megatron-Core --recompute-modules; default core_attn).
  RecomputeModules recompute_modules = kDefaultRecomputeModules;
  AttentionKernel attention = AttentionKernel::kFlash;
  FlashImpl flash_impl = FlashImpl::kFa2;
  KernelFusion kernels = KernelFusion::kFused;
  // Whose GEMM and attention kernels run (sim/spec/hardware.h KernelLibrary); absent = the
  // framework's (FrameworkTraits::DefaultKernelLibrary).
  std::optional<KernelLibrary> kernel_library;
  // The Transformer Engine release the scenario runs (training.te_version), where the kernel
  // library is transformer_engine: what TE keeps in memory changed between releases
  // (TeVersion::CachesDummyWeightGradients).
  TeVersion te_version;
  // Transformer Engine fp8 weights as the parameters themselves (NeMo's fp8_params, Megatron-LM's
  // --fp8-param-gather): each fp8 layer's weight is held in fp8 with its cached transpose
  // (1 + 1 B) instead of 16 bits beside a cached fp8 copy and transpose (2 + 2 B).
  bool fp8_params = false;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // precision fp8: how tensors are scaled
  // The norms' kernels where they differ from the rest (torchtitan's 2024 presets ran a fused
  // Triton RMSNorm, `norm_type = "fused_rmsnorm"`, in an otherwise eager model); absent = kernels.
  std::optional<KernelFusion> norm_kernel;
  KernelFusion NormKernels() const { return norm_kernel.value_or(kernels); }
  // Absent = the framework's (its policy in sim/workload/policy/).
  std::optional<LossKernel> loss;
  int64_t loss_chunks = 8;  // chunked: torchtune's num_output_chunks default
  FinetuneSpec finetune;
  // Absent = the framework's (DataParallelPolicy::DefaultOptimizerImpl).
  std::optional<OptimizerImpl> optimizer_impl;
  // Each parameter's update runs in its gradient hook during the backward (torchtune
  // optimizer_in_bwd, PyTorch _apply_optimizer_in_backward): gradients never all live at once.
  bool optimizer_in_backward = false;
  RoutingSpec routing;  // MoE models only
  // Documents packed into each sequence, of equal length, each attending only within itself
  // (document masking: THD layout with cu_seqlens in Transformer Engine and FlashAttention's
  // varlen kernels, torchtune's packed datasets with flex attention's block mask). Flash
  // attention computes each document's causal attention, so its work is 1/packing of the
  // unpacked sequence's; eager attention computes the masked S x S scores all the same.
  int64_t packing = 1;
  // Or the lengths of the documents packed into each sequence, summing to seq_len (a pack's
  // padding tail is a document of its own under cu_seqlens): flash attention's work is
  // Σ L² / S² of the unpacked sequence's.
  std::vector<int64_t> document_lengths;
  // What document masking divides flash attention's work by: packing, or S² / Σ L² for
  // document_lengths (equal lengths give the number of documents).
  double AttentionPacking() const {
    if (document_lengths.empty()) return static_cast<double>(packing);
    double squares = 0;
    for (int64_t l : document_lengths) squares += static_cast<double>(l) * static_cast<double>(l);
    const double s = static_cast<double>(seq_len);
    return squares > 0 ? s * s / squares : 1.0;
  }
};

// parallel.offload: what moves off the GPU. optimizer: the optimizer states (and the fp32
// gradient partition) live in host DRAM or NVMe and the update runs on the CPU (ZeRO-Offload,
// Ren et al. 2021; FSDP CPUOffload); params: the parameter shards too (ZeRO-Infinity
// offload_param, FSDP CPUOffload(offload_params=True)), copied in before each gather;
// activations: the tensors saved for the backward go to host memory in the forward and come
// back before their layer's backward (torchtune enable_activation_offloading, Megatron-LM
// --cpu-offloading).
struct OffloadSpec {
  OffloadTarget optimizer = OffloadTarget::kNone;
  OffloadTarget params = OffloadTarget::kNone;
  bool activations = false;
  bool any() const {
    return optimizer != OffloadTarget::kNone || params != OffloadTarget::kNone || activations;
  }
};

// DeepSpeed's bucket and ZeRO-3 limits, in elements as its zero_optimization config counts
// them (deepspeed/runtime/zero/config.py defaults; framework deepspeed only).
struct DeepSpeedSpec {
  // The contiguous gradient bucket (ZeRO 1-3, `contiguous_gradients`: gradients are copied into
  // it as their hooks fire and reduced from it) and the stage-0 all-reduce bucket
  // (engine.allreduce_gradients, MEMORY_OPT_ALLREDUCE_SIZE = 5e8).
  int64_t reduce_bucket_size = 500'000'000;
  // ZeRO-1/2: the post-step all-gather of the updated 16-bit partitions runs in chunks of this.
  int64_t allgather_bucket_size = 500'000'000;
  // ZeRO-3's parameter coordinator (partitioned_param_coordinator.py): each fetch prefetches up
  // to this many elements of the parameters next in the trace ...
  int64_t stage3_prefetch_bucket_size = 50'000'000;
  // ... while no more than this many are gathered at once ...
  int64_t stage3_max_live_parameters = 1'000'000'000;
  // ... and a released parameter whose next use comes within this many elements of the trace
  // stays gathered.
  int64_t stage3_max_reuse_distance = 1'000'000'000;
  // ZeRO-3's optimizer step upcasts the gradients of one sub-group of this many elements at a
  // time (stage3.py _prepare_fp32_grad_for_sub_group).
  int64_t sub_group_size = 1'000'000'000;
  bool contiguous_gradients = true;
  // Which of the above the scenario wrote (prefetch in layers conflicts with the ZeRO-3 limits).
  bool stage3_limits_set = false;
};

struct ParallelSpec {
  Framework framework = Framework::kDeepSpeed;
  int64_t zero = 0;
  int64_t tp = 1;
  int64_t pp = 1;
  // Context parallelism: the sequence is split over `cp` GPUs; K and V are all-gathered over the
  // CP group before attention (Llama 3's all-gather CP, Dubey et al. 2024 §3.3.2), or Q, K, V
  // and the output exchanged by all-to-all (cp_kind ulysses).
  int64_t cp = 1;
  CpKind cp_kind = CpKind::kAllGather;
  // Expert parallelism (MoE models), placed as Megatron-Core's "MoE parallel folding" does
  // (parallel_state.py's expert rank generator, order tp-ep-dp-pp; Liu et al. 2025, arXiv
  // 2504.14960): the tp·cp·dp GPUs of a pipeline stage are re-read as expert TP (`etp`,
  // innermost) × EP (`ep`) × expert DP (the rest). Each group of `ep` GPUs splits the routed
  // experts among them, tokens reaching them by all-to-all (--expert-model-parallel-size); each
  // expert's matrices split over `etp` GPUs (--expert-tensor-parallel-size, absent = tp); the
  // expert parameters are data-parallel over tp·cp·dp / (etp·ep) GPUs (ExpertDataParallel).
  int64_t ep = 1;
  std::optional<int64_t> etp;
  int64_t expert_tp() const { return etp.value_or(tp); }
  bool sequence_parallel = false;
  // Rank order, innermost first (Megatron-LM --rank-order default tp-cp-ep-dp-pp without ep):
  // consecutive GPUs fill the TP group, then CP, then DP, then PP.
  std::array<ParallelDim, 4> rank_order = {ParallelDim::kTp, ParallelDim::kCp, ParallelDim::kDp,
                                           ParallelDim::kPp};
  PipelineSchedule pp_schedule = PipelineSchedule::k1F1B;
  int64_t pp_chunks = 1;  // model chunks per stage (v); > 1 needs the interleaved schedule
  // Decoder layers of the first and last stage when they differ from the others (Megatron-LM
  // --decoder-first/last-pipeline-num-layers; Llama 3 405B drops one layer from each); with
  // pp_chunks > 1, of the first and the last model chunk. Absent = the layers split evenly.
  std::optional<int64_t> first_stage_layers, last_stage_layers;
  // Decoder layers of each virtual stage, in virtual-stage order (chunk c of stage s is entry
  // c·pp + s), as nanotron and Megatron-LM's --pipeline-model-parallel-layout balance them by
  // cost; empty = the split above. Each at least 1, summing to the model's layers.
  std::vector<int64_t> pp_layers;
  // pp_layers was set by the loader to balance a mixed cluster's stages (not written).
  bool pp_layers_balanced = false;
  // TP collectives run beside the GEMMs they feed (Megatron-LM --tp-comm-overlap); otherwise
  // the compute stream waits for them.
  bool tp_comm_overlap = false;
  // Gradient reduction overlapped with the backward (buckets launched as layers finish);
  // absent = the framework's default: FSDP overlaps, DeepSpeed's `overlap_comm` is on at ZeRO-3
  // only (deepspeed/runtime/zero/config.py overlap_comm_valid), Megatron-LM
  // --overlap-grad-reduce is off.
  std::optional<bool> overlap_grad_reduce;
  // Megatron distributed optimizer: the parameter all-gather overlaps the next step's forward
  // (--overlap-param-gather) instead of following the optimizer.
  bool overlap_param_gather = false;
  // ZeRO-3 / FULL_SHARD layers gathered ahead of the one computing (FSDP forward_prefetch /
  // backward_prefetch: one). Absent = the framework's: one layer, except DeepSpeed, which counts
  // its prefetch in elements (deepspeed.stage3_prefetch_bucket_size); setting it there gathers
  // whole layers ahead instead.
  std::optional<int64_t> prefetch;
  static constexpr int64_t kDefaultPrefetchLayers = 1;
  // Gradient reduction bucket of PyTorch DDP / FSDP; absent = the framework's (its policy in
  // sim/workload/policy/). DeepSpeed counts its buckets in elements (`deepspeed` below).
  std::optional<Bytes> bucket;
  DeepSpeedSpec deepspeed;
  // FSDP only: the sharding strategy; when absent it follows `zero` (FsdpShardingOf).
  std::optional<FsdpSharding> sharding;
  // FSDP only: which implementation. 1: FullyShardedDataParallel (FSDP1), whose flat parameter
  // is all-gathered into and reduce-scattered from in place. 2: fully_shard (FSDP2, torchtitan),
  // whose per-parameter shards cost two copies on the compute stream per collective: after each
  // all-gather, split_with_sizes_copy into the parameters (foreach_all_gather_copy_out); before
  // each reduce-scatter, chunk_cat of the gradients into the reduce-dtype input
  // (foreach_reduce_scatter_copy_in), after which the gradients are freed
  // (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py).
  int64_t fsdp_version = 1;
  // Gradient reduction dtype; absent = the compute dtype (FSDP MixedPrecision default follows
  // param_dtype; torchtitan sets fp32).
  std::optional<Dtype> reduce_dtype;
  // megatron only: the fp32 master weights kept as their low 16 bits beside the bf16 weights,
  // which are the upper 16 (2 B/param instead of 4): NeMo's distributed_fused_adam sets
  // store_param_remainders whenever the model is bf16 and the optimizer fp32
  // (nemo/collections/nlp/models/language_modeling/megatron_base_model.py
  // setup_optimization; Apex DistributedFusedAdam), as Megatron-Core's precision-aware
  // optimizer does with TE's FusedAdam (--store-param-remainders).
  bool store_param_remainders = false;
  CollectiveAlgorithm collective = CollectiveAlgorithm::kAuto;
  OffloadSpec offload;
  // ddp only: DistributedDataParallel(gradient_as_bucket_view=True) makes each .grad a view into
  // its bucket, so the gradients exist once (4 B/param) instead of twice (8 B/param).
  bool gradient_as_bucket_view = false;
};

// FSDP's strategy for a layout: `sharding` when given, else from `zero` (0 NO_SHARD, 1 and 2
// SHARD_GRAD_OP, 3 FULL_SHARD). The loader's checks and the FSDP policy both read it here.
inline FsdpSharding FsdpShardingOf(const ParallelSpec& p) {
  return p.sharding.value_or(p.zero == 3   ? FsdpSharding::kFullShard
                             : p.zero == 0 ? FsdpSharding::kNoShard
                                           : FsdpSharding::kShardGradOp);
}

struct RuntimeSpec {
  // GPU memory the process holds outside PyTorch's caching allocator: the CUDA context, NCCL's
  // channel buffers, library handles. Counted in the peak, never in torch's own counters.
  Bytes reserved = Bytes::GiB(1);
  // PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (sim/memory/caching_allocator.h).
  bool expandable_segments = false;
  // Memory kept free below the GPU's usable memory: the loader takes it off
  // cluster.gpu.usable_hbm, so that "fits" means the reserved peak stays under usable - margin
  // (a planner's safety margin; `stepsim plan --headroom`).
  MemoryMargin headroom;
  Bytes headroom_taken;  // the margin in bytes, as the loader took it off
};

// The whole training run around the replayed step (`run:`; sim/report/whole_run.h prices it):
// its token budget, failures and restarts, checkpoints, energy and cost. Every default is cited
// in docs/model.md "The whole run".
struct RunSpec {
  // Tokens to train; none: 20 per parameter (Hoffmann et al. 2022, "Training Compute-Optimal
  // Large Language Models": the compute-optimal ratio).
  std::optional<double> tokens;
  // Unexpected interruptions per GPU-hour by cause, and planned ones (maintenance) per
  // node-hour. Defaults: Meta's Llama 3 405B run, 419 unexpected interruptions and 47 planned in
  // 54 days on 16,384 H100 in 2,048 nodes (Dubey et al. 2024, "The Llama 3 Herd of Models",
  // §3.3.4, Table 5), per GPU-hour: faulty GPU, SRAM, system processor, thermal interface and
  // silent data corruption 196; HBM3 72; network switch, cable and NIC 42; host (maintenance,
  // SSD, power supply, chassis, IO board, CPU, memory) 46; software (bugs, NCCL watchdog,
  // dependencies) 63 — each over 16,384 x 54 x 24 GPU-hours.
  struct Failures {
    double gpu = 196.0 / 21233664.0;
    double hbm = 72.0 / 21233664.0;
    double network = 42.0 / 21233664.0;
    double host = 46.0 / 21233664.0;
    double software = 63.0 / 21233664.0;
    double planned_per_node_hour = 47.0 / (2048.0 * 54 * 24);
    double PerGpuHour() const { return gpu + hbm + network + host + software; }
  } failures;
  // From an interruption to training again, before the checkpoint is read back: detection
  // (PyTorch's NCCL watchdog times a hung collective out after 10 min by default; a health
  // check finds a dead GPU sooner) and the restart (rescheduling, process launch, NCCL
  // initialisation). Assumptions: 5 min each.
  Duration detect = Duration::FromSeconds(300);
  Duration restart = Duration::FromSeconds(300);
  // Checkpoints: every `interval` of training (none: Young/Daly's optimum from the job's MTBF
  // and the stall per save); async: the step stalls only for the copy of the rank's shard to
  // host memory, the write to storage runs beside training (torch.distributed.checkpoint's
  // async_save, Megatron-LM --async-save); otherwise the step waits for the write
  // (Megatron-LM's default).
  std::optional<Duration> checkpoint_interval;
  bool checkpoint_async = false;
  // Storage the checkpoints are written to and read from: per node and for the whole cluster.
  // Defaults: Meta's Tectonic for Llama 3, 2 TB/s sustained (Dubey et al. 2024, §3.3.1); 5 GB/s
  // per node, an assumption (a 50-100 Gb/s storage NIC share).
  Bandwidth storage_node = Bandwidth::BytesPerSecond(5e9);
  Bandwidth storage_aggregate = Bandwidth::BytesPerSecond(2e12);
  // Energy: the data centre's PUE; host power per node beside the GPUs (none: 40 % of the
  // node's GPU power limit, about DGX H100's 10.2 kW maximum less its GPUs' 5.6 kW, halved for
  // a training load); GPU power as shares of its power limit when idle and when only
  // communicating (assumptions, no measurement fitted); grid carbon intensity (g CO2e per kWh,
  // none: not reported).
  double pue = 1.1;
  std::optional<double> host_watts;
  double idle_share = 0.15, comm_share = 0.5;
  std::optional<double> grid_g_per_kwh;
  // Cost: rented per GPU-hour (none: the GPU catalog's price), or owned: capex per GPU
  // (with its share of node and network) written off over `years`, plus electricity.
  std::optional<double> gpu_hour_usd;
  std::optional<double> capex_per_gpu_usd;
  double years = 4;
  double electricity_usd_per_kwh = 0.08;
  // The Monte Carlo check of the analytic ETTR: trials and seed.
  int64_t trials = 1000;
  int64_t seed = 1;
};

struct Scenario {
  std::string name;
  std::string file;  // where it was loaded from ("" for generated scenarios)
  // The caller's overrides (--set KEY=VALUE, a sweep's or compare's point), as KEY=VALUE in the
  // order applied: reports name the run "NAME with KEY=VALUE, ..." so that a header never shows
  // the file's name for a model or cluster the overrides replaced.
  std::vector<std::string> overrides;
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;
  ParallelSpec parallel;
  RuntimeSpec runtime;
  RunSpec run;

  int64_t dp() const { return cluster.gpus() / (parallel.tp * parallel.pp * parallel.cp); }
  // A mixed cluster's node group of each pipeline stage (stage s holds GPUs s·S .. (s+1)·S − 1,
  // S = gpus / pp, in the default rank order); empty when the cluster is not mixed. A stage
  // that straddles two groups takes the first (the loader refuses such a layout).
  std::vector<int32_t> StageGroups() const {
    std::vector<int32_t> out;
    if (cluster.groups.empty()) return out;
    const int64_t per_stage = cluster.gpus() / parallel.pp;
    for (int64_t st = 0; st < parallel.pp; ++st) {
      int64_t first = st * per_stage, seen = 0;
      int32_t g = 0;
      while (g + 1 < static_cast<int32_t>(cluster.groups.size()) &&
             first >= seen + cluster.groups[g].count * cluster.node.gpus_per_node) {
        seen += cluster.groups[g].count * cluster.node.gpus_per_node;
        ++g;
      }
      out.push_back(g);
    }
    return out;
  }
  int64_t micro_batches() const { return training.global_batch / (training.micro_batch * dp()); }
  // The same scenario at `m` micro-batches per step: its global batch m · micro_batch · dp.
  Scenario WithMicroBatches(int64_t m) const {
    Scenario t = *this;
    t.training.global_batch = m * training.micro_batch * dp();
    return t;
  }
  // GPUs holding the same experts (MoE with EP, see ParallelSpec::ep): tp·cp·dp / (etp·ep).
  int64_t expert_dp() const {
    return parallel.tp * parallel.cp * dp() / (parallel.expert_tp() * parallel.ep);
  }
};

absl::string_view Name(Precision p);
absl::string_view Name(Fp8Recipe r);
absl::string_view Name(OptimizerKind o);
absl::string_view Name(FinetuneMethod m);
absl::string_view Name(LoraTarget t);
absl::string_view Name(OffloadTarget t);
absl::string_view Name(Recompute r);
absl::string_view Name(RecomputeMethod m);
absl::string_view Name(RecomputeModule m);
absl::string_view Name(LossKernel l);
absl::string_view Name(AttentionKernel a);
absl::string_view Name(FlashImpl f);
absl::string_view Name(KernelFusion k);
absl::string_view Name(NcclRelease r);
absl::string_view Name(Framework f);
absl::string_view Name(FsdpSharding s);
absl::string_view Name(Dtype d);
absl::string_view Name(KernelLibrary l);
absl::string_view Name(CollectiveAlgorithm a);
absl::string_view Name(PipelineSchedule p);
absl::string_view Name(ParallelDim d);

}  // namespace sim
