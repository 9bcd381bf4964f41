#include "sim/config/scenario_keys.h"

#include <bit>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "sim/spec/enum_names.h"
#include "sim/spec/scenario.h"

namespace sim::config {

namespace {

template <class E>
std::string OneOf() {
  return absl::StrJoin(EnumNameList<E>(), " | ");
}

// "1 GiB", "25 MB", or the byte count: the unit a default is written in.
std::string BytesText(Bytes b) {
  const int64_t n = b.count();
  if (n != 0 && n % (int64_t{1} << 30) == 0) return absl::StrCat(n >> 30, " GiB");
  if (n != 0 && n % 1'000'000 == 0) return absl::StrCat(n / 1'000'000, " MB");
  return absl::StrCat(n, " B");
}

std::string Bool(bool b) { return b ? "true" : "false"; }

// One end of an integer range: decimal, or 2^N for powers of two from 2^20 up.
std::string RangeEnd(int64_t v) {
  if (v >= (int64_t{1} << 20) && (v & (v - 1)) == 0)
    return absl::StrCat("2^", std::countr_zero(static_cast<uint64_t>(v)));
  return absl::StrCat(v);
}

std::optional<int64_t> ParseRangeEnd(absl::string_view text) {
  int64_t v = 0;
  if (absl::ConsumePrefix(&text, "2^")) {
    if (!absl::SimpleAtoi(text, &v) || v < 0 || v > 62) return std::nullopt;
    return int64_t{1} << v;
  }
  if (!absl::SimpleAtoi(text, &v)) return std::nullopt;
  return v;
}

// An integer key's type: its range, both ends included (IntegerRangeOf reads it back).
std::string Integer(int64_t min, int64_t max) {
  return absl::StrCat("integer ", RangeEnd(min), "..", RangeEnd(max));
}

// An element count as DeepSpeed's configs write it: "5e8", "1e9".
std::string Count(int64_t n) {
  int exponent = 0;
  int64_t mantissa = n;
  while (mantissa != 0 && mantissa % 10 == 0) {
    mantissa /= 10;
    ++exponent;
  }
  return exponent >= 3 ? absl::StrCat(mantissa, "e", exponent) : absl::StrCat(n);
}

std::vector<ScenarioKey> Build() {
  const Scenario d;  // the defaults
  const ParallelSpec& p = d.parallel;
  const TrainingSpec& t = d.training;
  std::string rank_order;
  for (ParallelDim dim : p.rank_order)
    absl::StrAppend(&rank_order, rank_order.empty() ? "" : "-", Name(dim));
  return {
      {"schema_version", "1", "required", "the file format's version"},
      {"name", "text", "file name", "the scenario's name in reports"},
      {"model", "name | path | mapping", "required",
       "a name in `models/`, a path, or an inline mapping"},
      {"cluster", "mapping", "required", "the cluster: a node type and a count, or a node inline"},
      {"cluster.node", "name", "—",
       "a node type of `topologies/nodes.yaml`; or describe it inline"},
      {"cluster.nodes", Integer(1, kMaxClusterGpus), absl::StrCat(d.cluster.nodes),
       "nodes in the cluster; or a list [{node: NAME, count: N}, ...] of node types in rank "
       "order: a mixed cluster, pipeline stages placed by type"},
      {"cluster.gpu", "name", "the node type's", "a GPU of `topologies/gpus.yaml`"},
      {"cluster.gpus_per_node", Integer(1, 1024), "the node type's", "GPUs per node"},
      {"cluster.intra_node_bandwidth", "bandwidth", "the node type's",
       "NVLink bandwidth per GPU, one direction"},
      {"cluster.nics_per_node", Integer(0, 1024), "the node type's", "NICs per node"},
      {"cluster.nic_bandwidth", "bandwidth", "the node type's", "bandwidth of each NIC"},
      {"cluster.intra_node_transport", "nvlink | xgmi | pcie", "the node type's",
       "how the node's GPUs reach each other (NCCL's intra-node latencies and ramp)"},
      {"cluster.intra_node_latency", "duration", "0",
       "added to NCCL's latency of each intra-node step"},
      {"cluster.inter_node_latency", "duration", "0",
       "added to NCCL's latency of each inter-node step"},
      {"cluster.power_limit", "power", "the GPU's (its TDP unless the catalog caps it)",
       "the GPUs' board power limit (nvidia-smi -pl): compute clocks at (limit / TDP)^(1/3)"},
      {"cluster.nccl_version", "2.27 | 2.28", "2.28",
       "the NCCL release whose tuner picks algorithms (2.27: its NVLS formula and Blackwell "
       "tree caps)"},
      {"cluster.fabric", "name | path | mapping", "non-blocking rail-optimised fat tree",
       "a fabric in `topologies/fabrics/`, a path, or an inline mapping"},
      {"cluster.background_load", "0..0.9", "0",
       "share of every switch-to-switch link's bandwidth that other jobs' traffic holds (a "
       "shared fabric); `run` then also reports the step on an idle fabric"},
      {"cluster.variability", "mapping", "none (every GPU at its calibrated speed)",
       "per-GPU speed spread, slow nodes, GPUs and links: step percentiles with `run --trials N`"},
      {"cluster.variability.distribution", "normal | lognormal", "lognormal",
       "how a GPU's speed spreads around the calibrated one (mean 1)"},
      {"cluster.variability.gemm_cv", "0..0.5", "0",
       "coefficient of variation of each GPU's GEMM and attention speed"},
      {"cluster.variability.memory_cv", "0..0.5", "0",
       "coefficient of variation of each GPU's memory-bound kernel speed"},
      {"cluster.variability.speeds", "list of speeds 0.05..2", "none",
       "an empirical table: each GPU runs at one of these relative speeds, drawn uniformly"},
      {"cluster.variability.slow_nodes", "0..1", "0",
       "share of nodes whose GPUs all run at slow_node_speed (power, thermal throttling)"},
      {"cluster.variability.slow_node_speed", "0.05..1", "1", "their relative speed"},
      {"cluster.variability.slow_gpus", "0..1", "0",
       "share of single GPUs running at slow_gpu_speed"},
      {"cluster.variability.slow_gpu_speed", "0.05..1", "1", "their relative speed"},
      {"cluster.variability.slow_links", "0..1", "0",
       "share of network links (each node's NICs, one per rail) running at slow_link_speed of "
       "their bandwidth (a link trained down, a degraded optic or cable)"},
      {"cluster.variability.slow_link_speed", "0.05..1", "1",
       "their bandwidth, relative to a healthy link's"},
      {"cluster.variability.seed", Integer(0, int64_t{1} << 62), "1", "the draws' seed"},
      {"training", "mapping", "all defaults", "the job"},
      {"training.seq_len", Integer(1, int64_t{1} << 24), absl::StrCat(t.seq_len),
       "tokens per sequence"},
      {"training.micro_batch", Integer(1, int64_t{1} << 20), absl::StrCat(t.micro_batch),
       "sequences per micro-batch per data-parallel rank"},
      {"training.global_batch", Integer(1, int64_t{1} << 40), "micro_batch × dp",
       "sequences per optimizer step; m = global / (micro × dp)"},
      {"training.global_batch_tokens", Integer(1, int64_t{1} << 40), "none (global_batch decides)",
       "tokens per optimizer step; sets global_batch to the nearest multiple of micro × dp "
       "(× pp interleaved) of seq_len-token sequences, over any global_batch given"},
      {"training.precision", OneOf<Precision>(), std::string(Name(t.precision)),
       "compute dtype of the GEMMs"},
      {"training.optimizer", OneOf<OptimizerKind>(), std::string(Name(t.optimizer)),
       "optimizer whose states are held"},
      {"training.recompute", OneOf<Recompute>(), std::string(Name(t.recompute)),
       "activation checkpointing (op: torchtitan's per-op selective checkpointing)"},
      {"training.recompute_every", Integer(1, 4096), absl::StrCat(t.recompute_every),
       "only every K-th layer checkpointed (torchtitan `selective_ac_option: K`)"},
      {"training.recompute_layers", Integer(1, 4096), "every layer",
       "full recompute of N layers (Megatron-LM `--recompute-num-layers`)"},
      {"training.recompute_method", OneOf<RecomputeMethod>(), std::string(Name(t.recompute_method)),
       "uniform: groups of N layers re-run at once; block: the first N of each stage"},
      {"training.recompute_modules", "list of " + OneOf<RecomputeModule>(), "core_attn",
       "what selective recompute re-runs (Megatron-Core `--recompute-modules`; layernorm: an "
       "MoE layer's pre-MLP norm, the others being fused into linear layers; a list, or names "
       "joined by commas or +)"},
      {"training.attention", OneOf<AttentionKernel>(), std::string(Name(t.attention)),
       "attention kernel"},
      {"training.flash_impl", OneOf<FlashImpl>(), std::string(Name(t.flash_impl)),
       "implementation of flash attention (fa2: FlashAttention-2 / PyTorch SDPA; fa3: "
       "FlashAttention-3, Hopper only; triton: llm-foundry's attn_impl: triton)"},
      {"training.kernels", OneOf<KernelFusion>(), std::string(Name(t.kernels)),
       "small kernels (fused: Megatron/TE, llm-foundry, torch.compile; eager: PyTorch eager "
       "modules as torchtitan's Llama without compile: fp32 RMSNorm, complex RoPE, repeated KV)"},
      {"training.kernel_library", OneOf<KernelLibrary>(), "framework's",
       "whose GEMM and attention kernels run, each priced by its own calibration terms where the "
       "GPU has them (pytorch: cuBLAS and flash-attn/SDPA; transformer_engine: Megatron-Core and "
       "NeMo's TE modules, cuDNN attention, TE FP8; megatron implies transformer_engine)"},
      {"training.te_version", "MAJOR.MINOR", Name(t.te_version),
       "the Transformer Engine release (transformer_engine kernels): from 2.3 each trained "
       "weight shape keeps a 16-bit placeholder gradient under megatron (workspace)"},
      {"training.fp8_params", "true | false", Bool(t.fp8_params),
       "fp8 under transformer_engine: the fp8 layers' weights held as fp8 parameters (NeMo "
       "fp8_params, Megatron-LM --fp8-param-gather), without TE's cached fp8 copies beside them"},
      {"training.fp8_recipe", OneOf<Fp8Recipe>(), std::string(EnumName(t.fp8_recipe)),
       "fp8 scaling (Megatron-LM --fp8-recipe): delayed (amax history), tensorwise (current "
       "scaling: an amax pass before each cast), blockwise (1x128 / 128x128 blocks), mxfp8 "
       "(32-element blocks, Blackwell); the block recipes cast row- and column-wise at once"},
      {"training.norm_kernel", OneOf<KernelFusion>(), "training.kernels",
       "the norms' kernels where they differ (torchtitan norm_type fused_rmsnorm: fused)"},
      {"training.optimizer_impl", OneOf<OptimizerImpl>(), "framework's",
       "how AdamW's update runs (ddp: foreach, PyTorch's default, one parameter-sized temporary "
       "at the step; loop: two of the largest tensor; others: fused, none)"},
      {"training.loss", OneOf<LossKernel>(), "framework's",
       "cross-entropy kernel (deepspeed, fsdp, ddp: eager; megatron: vocab_parallel; torchtune: "
       "chunked; llm-foundry's fused_crossentropy: flash_attn)"},
      {"training.loss_chunks", Integer(1, 1024), absl::StrCat(t.loss_chunks),
       "chunks of the chunked losses (torchtune `num_output_chunks`)"},
      {"training.packing", Integer(1, int64_t{1} << 20), absl::StrCat(t.packing),
       "documents of equal length packed per sequence, attending within themselves (flash: "
       "each document's attention only)"},
      {"training.document_lengths", "list of integers 1..16777216", "none (training.packing)",
       "the lengths of the documents packed into each sequence, summing to seq_len (flash: "
       "attention work Σ L² / S² of the unpacked sequence's)"},
      {"training.routing", "mapping", "balanced", "MoE models: tokens per expert"},
      {"training.routing.distribution", OneOf<RoutingDistribution>(), "balanced",
       "balanced: equal shares; zipf: expert i gets a share ∝ 1 / i^skew"},
      {"training.routing.skew", "number 0..4", "1", "the Zipf exponent"},
      {"training.routing.seed", Integer(0, int64_t{1} << 40), "0",
       "shuffles which EP rank holds which popularity rank"},
      {"training.routing.capacity_factor", "number 0.01..64", "dropless",
       "each expert takes at most T·k·cf / E token copies; the rest are dropped"},
      {"training.routing.pad_to_capacity", "true | false", "false",
       "every expert computes a full capacity (needs capacity_factor)"},
      {"training.optimizer_in_backward", "true | false", Bool(t.optimizer_in_backward),
       "each update runs in its gradient hook (torchtune `optimizer_in_bwd`); one GPU, no "
       "accumulation"},
      {"training.finetune", "mapping", "full fine-tuning", "adapters on frozen weights"},
      {"training.finetune.method", OneOf<FinetuneMethod>(), std::string(Name(t.finetune.method)),
       "full: every weight trained; lora: adapters on 16-bit frozen weights; qlora: on NF4 "
       "weights"},
      {"training.finetune.rank", Integer(1, 65536), absl::StrCat(t.finetune.rank),
       "adapter rank r"},
      {"training.finetune.alpha", "number", absl::StrFormat("%g", t.finetune.alpha),
       "adapter scale numerator (alpha / r; no effect on memory or time)"},
      {"training.finetune.targets", "list of " + OneOf<LoraTarget>(), "q, v, o, gate, up, down",
       "projections with adapters (a list, or names joined by commas or +)"},
      {"parallel", "mapping", "all defaults", "the parallel layout and framework"},
      {"parallel.framework", OneOf<Framework>(), std::string(Name(p.framework)),
       "the framework preset (sim/workload/policy/)"},
      {"parallel.zero", "0 | 1 | 2 | 3", absl::StrCat(p.zero), "ZeRO stage"},
      {"parallel.tp", Integer(1, 1024), absl::StrCat(p.tp), "tensor-parallel degree"},
      {"parallel.pp", Integer(1, 1024), absl::StrCat(p.pp), "pipeline-parallel degree"},
      {"parallel.cp", Integer(1, 1024), absl::StrCat(p.cp),
       "context-parallel degree; dp = GPUs / (tp × pp × cp)"},
      {"parallel.cp_kind", OneOf<CpKind>(), std::string(EnumName(p.cp_kind)),
       "how CP exchanges the sequence: all-gather K, V; ulysses, all-to-all of Q, K, V and "
       "the output (heads and KV heads per TP rank divisible by cp); or ring, one flash call per "
       "K, V chunk merged in fp32, the chunks passed beside them (PyTorch's context_parallel, "
       "TE's p2p)"},
      {"parallel.ep", Integer(1, 65536), absl::StrCat(p.ep),
       "expert-parallel degree (MoE models): etp × ep divides tp × cp × dp; ep the experts"},
      {"parallel.etp", Integer(1, 1024), "tp",
       "expert tensor-parallel degree (MoE models): splits each expert's matrices"},
      {"parallel.sequence_parallel", "true | false", Bool(p.sequence_parallel),
       "sequence parallelism; needs tp > 1"},
      {"parallel.rank_order", "tp, cp, dp, pp joined by -", rank_order,
       "placement, innermost first"},
      {"parallel.pp_schedule", OneOf<PipelineSchedule>(), std::string(Name(p.pp_schedule)),
       "pipeline schedule"},
      {"parallel.pp_chunks", Integer(1, 64), absl::StrCat(p.pp_chunks),
       "model chunks per stage (interleaved needs ≥ 2 and m a multiple of pp)"},
      {"parallel.first_stage_layers", Integer(0, 100000), "even split",
       "decoder layers of the first stage (or first model chunk); pp × pp_chunks ≥ 3"},
      {"parallel.last_stage_layers", Integer(0, 100000), "even split",
       "decoder layers of the last stage (or last model chunk); pp × pp_chunks ≥ 3"},
      {"parallel.pp_layers", "list of integers 1..100000", "even split",
       "decoder layers of each virtual stage (chunk c of stage s: entry c·pp + s), summing to the "
       "model's"},
      {"parallel.tp_comm_overlap", "true | false", Bool(p.tp_comm_overlap),
       "TP/CP collectives beside the GEMMs they feed (Megatron-LM `--tp-comm-overlap`)"},
      {"parallel.overlap_grad_reduce", "true | false", "framework's",
       "fsdp: true; deepspeed `overlap_comm`: true at ZeRO-3 only; megatron: false "
       "(`--overlap-grad-reduce`)"},
      {"parallel.overlap_param_gather", "true | false", Bool(p.overlap_param_gather),
       "megatron distributed optimizer: all-gather beside the next forward"},
      {"parallel.prefetch", Integer(0, 64), "framework's",
       absl::StrCat("ZeRO-3 layers gathered ahead (fsdp: ", ParallelSpec::kDefaultPrefetchLayers,
                    "; deepspeed counts elements, `parallel.deepspeed`, unless this is set)")},
      {"parallel.bucket", "bytes", "framework's",
       "gradient reduction bucket (fsdp: 25 MB, PyTorch DDP `bucket_cap_mb`; deepspeed: "
       "`parallel.deepspeed.reduce_bucket_size` 16-bit elements)"},
      {"parallel.deepspeed", "mapping", "DeepSpeed's defaults",
       "framework deepspeed: its zero_optimization buckets and limits, in elements"},
      {"parallel.deepspeed.reduce_bucket_size", "count (5e8, 200M, ...)",
       Count(p.deepspeed.reduce_bucket_size),
       "contiguous gradient bucket (ZeRO 1-3) and stage-0 all-reduce bucket, elements"},
      {"parallel.deepspeed.allgather_bucket_size", "count",
       Count(p.deepspeed.allgather_bucket_size), "ZeRO-1/2 post-step all-gather chunk, elements"},
      {"parallel.deepspeed.stage3_prefetch_bucket_size", "count",
       Count(p.deepspeed.stage3_prefetch_bucket_size),
       "ZeRO-3: elements each fetch prefetches of the parameters next in the trace"},
      {"parallel.deepspeed.stage3_max_live_parameters", "count",
       Count(p.deepspeed.stage3_max_live_parameters),
       "ZeRO-3: elements gathered at most (prefetch stops there)"},
      {"parallel.deepspeed.stage3_max_reuse_distance", "count",
       Count(p.deepspeed.stage3_max_reuse_distance),
       "ZeRO-3: a parameter used again within this many trace elements stays gathered"},
      {"parallel.deepspeed.sub_group_size", "count", Count(p.deepspeed.sub_group_size),
       "ZeRO-3: elements the optimizer step upcasts to fp32 at a time"},
      {"parallel.deepspeed.contiguous_gradients", "true | false",
       Bool(p.deepspeed.contiguous_gradients),
       "gradients copied into the reduce bucket as they are produced"},
      {"parallel.sharding", OneOf<FsdpSharding>(), "from `zero`", "fsdp only: the strategy"},
      {"parallel.fsdp_version", "1 | 2", absl::StrCat(p.fsdp_version),
       "fsdp only: 1 FullyShardedDataParallel (flat parameters, in place); 2 fully_shard "
       "(torchtitan: copies after each all-gather and before each reduce-scatter)"},
      {"parallel.reduce_dtype", "bf16 | fp16 | fp32", "framework's",
       "gradient reduction dtype (the compute dtype; megatron: fp32, and its gradient buffer's)"},
      {"parallel.store_param_remainders", "true | false", Bool(p.store_param_remainders),
       "megatron only: fp32 master weights kept as 16-bit remainders beside the bf16 weights "
       "(NeMo's distributed_fused_adam; 2 B/param instead of 4)"},
      {"parallel.collective", OneOf<CollectiveAlgorithm>(), std::string(Name(p.collective)),
       "collective algorithm (auto: what NCCL's tuner runs per collective)"},
      {"parallel.gradient_as_bucket_view", "true | false", Bool(p.gradient_as_bucket_view),
       "ddp only: .grad views into DDP's buckets, one fp32 gradient copy instead of two"},
      {"parallel.offload", "mapping", "nothing offloaded",
       "what lives off the GPU (needs a node type with `host`)"},
      {"parallel.offload.optimizer", OneOf<OffloadTarget>(), "none",
       "optimizer states (and fp32 gradients) on the host, updated by the CPU (ZeRO-Offload)"},
      {"parallel.offload.params", OneOf<OffloadTarget>(), "none",
       "parameter shards on the host (ZeRO-Infinity; fsdp/torchtune: with gradients and "
       "optimizer)"},
      {"parallel.offload.activations", "none | cpu", "none",
       "saved activations to host memory and back (torchtune, Megatron-LM)"},
      {"runtime", "mapping", "all defaults", "what the process holds besides the model"},
      {"runtime.reserved", "bytes", BytesText(d.runtime.reserved),
       "GPU memory outside PyTorch's allocator (CUDA context, NCCL buffers) per GPU"},
      {"runtime.expandable_segments", "true | false", Bool(d.runtime.expandable_segments),
       "PyTorch's `expandable_segments` allocator option"},
      {"run", "mapping", "all defaults",
       "the whole run around the step: tokens, failures, checkpoints, energy, cost"},
      {"run.tokens", "count (15.6T, 300B, ...)", "20 per parameter",
       "tokens to train (default: Chinchilla's compute-optimal 20 per parameter)"},
      {"run.failures", "mapping", "Llama 3 405B's rates",
       "unexpected interruptions per GPU-hour by cause; planned ones per node-hour"},
      {"run.failures.gpu", "per GPU-hour", "9.23e-06", "faulty GPU, SRAM, GSP, thermal, SDC"},
      {"run.failures.hbm", "per GPU-hour", "3.39e-06", "HBM"},
      {"run.failures.network", "per GPU-hour", "1.98e-06", "switches, cables, NICs"},
      {"run.failures.host", "per GPU-hour", "2.17e-06", "host maintenance, SSD, PSU, CPU, DRAM"},
      {"run.failures.software", "per GPU-hour", "2.97e-06", "bugs, NCCL watchdog, dependencies"},
      {"run.failures.planned", "per node-hour", "1.77e-05", "planned maintenance"},
      {"run.detect", "time", "300 s", "from an interruption to its detection"},
      {"run.restart", "time", "300 s", "rescheduling, launch and NCCL init, before the reload"},
      {"run.checkpoint", "mapping", "Young/Daly interval, synchronous", "checkpointing"},
      {"run.checkpoint.interval", "time | optimal", "optimal",
       "training time between saves (optimal: Young/Daly from MTBF and the stall per save)"},
      {"run.checkpoint.async", "true | false", "false",
       "the step stalls only for the copy to host memory; the write runs beside training"},
      {"run.storage", "mapping", "5 GB/s per node, 2 TB/s in all", "checkpoint storage"},
      {"run.storage.node_bandwidth", "bandwidth", "5 GB/s", "per node, write and read"},
      {"run.storage.aggregate_bandwidth", "bandwidth", "2 TB/s", "for the whole cluster"},
      {"run.energy", "mapping", "PUE 1.1", "power beside the GPUs"},
      {"run.energy.pue", "number >= 1", "1.1", "facility power over IT power"},
      {"run.energy.host_power", "power", "40 % of the node's GPU power limit",
       "per node beside its GPUs (CPUs, memory, NICs, fans)"},
      {"run.energy.idle_share", "0..1", "0.15", "GPU power when idle, of its power limit"},
      {"run.energy.comm_share", "0..1", "0.5",
       "GPU power when only communicating, of its power limit"},
      {"run.energy.grid_intensity", "g CO2e per kWh", "none", "reports tCO2e when given"},
      {"run.cost", "mapping", "rented at the catalog's price", "what the run costs"},
      {"run.cost.gpu_hour", "USD", "the GPU catalog's", "rental price per GPU-hour"},
      {"run.cost.capex_per_gpu", "USD", "none (rented)",
       "owned: purchase per GPU with its share of node and network"},
      {"run.cost.years", "number", "4", "owned: years the purchase is written off over"},
      {"run.cost.electricity", "USD per kWh", "0.08", "owned: electricity"},
      {"run.trials", Integer(1, 100000), "1000", "Monte Carlo trials that check the ETTR"},
      {"run.seed", Integer(0, int64_t{1} << 62), "1", "the Monte Carlo's seed"},
      {"runtime.headroom", "P% | bytes", "none",
       "memory kept free: taken off the GPU's usable memory before \"fits\" is decided"},
  };
}

}  // namespace

const std::vector<ScenarioKey>& ScenarioKeys() {
  static const std::vector<ScenarioKey>* const keys = new std::vector<ScenarioKey>(Build());
  return *keys;
}

std::vector<std::string> SectionKeys(absl::string_view section) {
  std::vector<std::string> out;
  const std::string prefix = section.empty() ? "" : absl::StrCat(section, ".");
  for (const ScenarioKey& k : ScenarioKeys()) {
    if (!absl::StartsWith(k.path, prefix)) continue;
    const absl::string_view rest = absl::string_view(k.path).substr(prefix.size());
    if (!absl::StrContains(rest, '.')) out.emplace_back(rest);
  }
  return out;
}

std::string ScenarioKeysMarkdown() {
  std::string out = "| key | type | default | meaning |\n| --- | --- | --- | --- |\n";
  // A '|' inside a cell is escaped, as Markdown tables need.
  auto cell = [](const std::string& s) { return absl::StrReplaceAll(s, {{"|", "\\|"}}); };
  for (const ScenarioKey& k : ScenarioKeys()) {
    absl::StrAppend(&out, "| `", k.path, "` | ", cell(k.type), " | ", cell(k.default_text), " | ",
                    cell(k.meaning), " |\n");
  }
  return out;
}

std::optional<IntegerRange> IntegerRangeOf(absl::string_view path) {
  for (const ScenarioKey& k : ScenarioKeys()) {
    if (k.path != path) continue;
    absl::string_view type = k.type;
    if (!absl::ConsumePrefix(&type, "integer ")) return std::nullopt;
    const size_t dots = type.find("..");
    if (dots == absl::string_view::npos) return std::nullopt;
    auto min = ParseRangeEnd(type.substr(0, dots)), max = ParseRangeEnd(type.substr(dots + 2));
    if (!min || !max) return std::nullopt;
    return IntegerRange{*min, *max};
  }
  return std::nullopt;
}

}  // namespace sim::config
