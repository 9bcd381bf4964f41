#include "sim/config/scenario_checks.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "sim/spec/projections.h"
#include "sim/spec/stage_split.h"
#include "sim/workload/policy/framework_traits.h"

namespace sim::config {

namespace {

// Micro-batches a step may hold: folding (sim/replay/fold.h) replays a few whatever the count,
// and the fold's arithmetic stays in int64 picoseconds and bytes far below this; an unfolded
// replay is bounded by the program's size instead (sim/workload/lowering.h).
constexpr int64_t kMaxMicroBatches = int64_t{1} << 30;

// Pipeline layout: stages, chunks, the schedule and uneven first/last stages must agree.
template <class At>
void CheckStageLayers(const At& at, const Scenario& s, YamlErrors& errors) {
  const ParallelSpec& par = s.parallel;
  const int64_t pp = par.pp, v = par.pp_chunks, layers = s.model.layers;
  if (layers <= 0) return;
  if (v > 1 && par.pp_schedule != PipelineSchedule::kInterleaved) {
    errors.Add(at("parallel", "pp_chunks"), "parallel.pp_chunks",
               absl::StrCat("pp_chunks ", v, " needs pp_schedule: interleaved"));
  }
  if (par.pp_schedule == PipelineSchedule::kInterleaved && (v < 2 || pp < 2)) {
    errors.Add(at("parallel", "pp_schedule"), "parallel.pp_schedule",
               "the interleaved schedule needs pp >= 2 and pp_chunks >= 2");
  }
  if (!par.pp_layers.empty()) {
    if (par.first_stage_layers || par.last_stage_layers) {
      errors.Add(at("parallel", "pp_layers"), "parallel.pp_layers",
                 "pp_layers gives every stage's layers: not combined with first_stage_layers / "
                 "last_stage_layers");
      return;
    }
    if (pp < 2) {
      errors.Add(at("parallel", "pp_layers"), "parallel.pp_layers",
                 "pp_layers splits the layers over pipeline stages: needs pp >= 2");
      return;
    }
    const auto given = SplitLayers(layers, pp, v, std::nullopt, std::nullopt, par.pp_layers);
    if (!given.ok()) {
      errors.Add(at("parallel", "pp_layers"), "parallel.pp_layers", given.status().message());
    }
    return;
  }
  if ((par.first_stage_layers || par.last_stage_layers) && (pp < 2 || pp * v < 3)) {
    errors.Add(at("parallel", par.first_stage_layers ? "first_stage_layers" : "last_stage_layers"),
               "parallel", "uneven first/last stages need pp >= 2 and pp x pp_chunks >= 3");
    return;
  }
  const auto split = SplitLayers(layers, pp, v, par.first_stage_layers, par.last_stage_layers);
  if (split.ok()) return;
  if (par.first_stage_layers || par.last_stage_layers) {
    errors.Add(at("parallel", par.first_stage_layers ? "first_stage_layers" : "last_stage_layers"),
               "parallel", split.status().message());
  } else {
    errors.Add(at("parallel", "pp"), "parallel.pp", split.status().message());
  }
}

// The node at a dotted key path: with `exact`, that node (undefined when absent); otherwise the
// deepest one written along it, or the root, where an error about the key is located.
YAML::Node NodeAtPath(const YAML::Node& root, absl::string_view path, bool exact = false) {
  YAML::Node at = root;
  for (absl::string_view key : absl::StrSplit(path, '.')) {
    const YAML::Node next = Child(at, key);
    if (!next.IsDefined()) return exact ? next : at;
    at.reset(next);  // rebinds; assignment would copy next's content into the tree
  }
  return at;
}

// A nested key (section.sub.key), or the nearest enclosing node that exists.
YAML::Node At(const YAML::Node& root, absl::string_view section, absl::string_view sub,
              absl::string_view key) {
  return NodeAtPath(root, absl::StrCat(section, ".", sub, ".", key));
}

// Adapters the model can carry, ranks it can hold, and the optimizer-in-backward's conditions.
void CheckFinetune(const YAML::Node& root, const Scenario& s, int64_t dp, YamlErrors& errors) {
  const FinetuneSpec& f = s.training.finetune;
  if (f.adapters()) {
    // The default targets name every projection a Llama layer has; a GELU MLP simply has no
    // gate. Targets the user lists must exist.
    const bool listed = Child(Child(Child(root, "training"), "finetune"), "targets").IsDefined();
    for (int i = 0; i < kNumLoraTargets; ++i) {
      const LoraTarget t = static_cast<LoraTarget>(i);
      if (listed && f.targets[i] && !ModelHasTarget(s.model, t)) {
        errors.Add(At(root, "training", "finetune", "targets"), "training.finetune.targets",
                   absl::StrCat("the model '", s.model.name, "' has no '", Name(t),
                                "' projection (its MLP is gelu: fc1 is 'up', fc2 is 'down')"));
      }
    }
    int64_t smallest = std::numeric_limits<int64_t>::max();
    for (const LayerLinear& l : LayerLinears(s.model)) {
      if (f.targets[static_cast<int>(l.target)]) smallest = std::min({smallest, l.in, l.out});
    }
    if (smallest > 0 && f.rank > smallest) {
      errors.Add(At(root, "training", "finetune", "rank"), "training.finetune.rank",
                 absl::StrCat("rank ", f.rank, " exceeds the smallest targeted projection's width ",
                              smallest, ": a low-rank adapter needs r <= min(in, out)"));
    }
    if (f.method == FinetuneMethod::kQlora && s.training.precision == Precision::kFp8) {
      errors.Add(At(root, "training", "precision", ""), "training.precision",
                 "QLoRA computes in bf16 from NF4 weights; fp8 is not combined with it");
    }
  }
  if (s.training.optimizer_in_backward) {
    const int64_t m = dp > 0 ? s.training.global_batch / (s.training.micro_batch * dp) : 0;
    if (s.parallel.zero != 0 || dp != 1 || s.parallel.pp != 1 || m != 1) {
      errors.Add(At(root, "training", "optimizer_in_backward", ""),
                 "training.optimizer_in_backward",
                 absl::StrCat("modelled as torchtune's single-device recipes run it: one GPU's "
                              "worth of data parallelism (dp ",
                              dp, "), zero 0 (", s.parallel.zero, "), pp 1 (", s.parallel.pp,
                              ") and one micro-batch per step (", m,
                              "; torchtune refuses gradient accumulation with it)"));
    }
  }
}

// Offload needs a node type with a host entry (and NVMe for nvme), and a framework that offloads
// that way.
void CheckOffload(const YAML::Node& root, const Scenario& s, YamlErrors& errors) {
  const OffloadSpec& o = s.parallel.offload;
  if (!o.any()) return;
  const Framework fw = s.parallel.framework;
  auto at = [&](absl::string_view key) { return At(root, "parallel", "offload", key); };
  if (!s.cluster.node.host) {
    errors.Add(at(""), "parallel.offload",
               absl::StrCat("node type '", s.cluster.node.name,
                            "' has no host entry (DRAM, PCIe, cores) in topologies/nodes.yaml: "
                            "offload cannot be priced; add one or choose a node type that has it"));
    return;
  }
  const HostSpec& h = *s.cluster.node.host;
  const bool nvme = o.optimizer == OffloadTarget::kNvme || o.params == OffloadTarget::kNvme;
  if (nvme && h.nvme == Bytes()) {
    const char* key = o.optimizer == OffloadTarget::kNvme ? "optimizer" : "params";
    errors.Add(at(key), JoinPath("parallel.offload", key),
               absl::StrCat("node type '", s.cluster.node.name,
                            "' has no NVMe for offload (host.nvme in topologies/nodes.yaml)"));
  }
  std::vector<KeyProblem> problems;
  TraitsOf(fw).CheckOffload(s, problems);
  for (const KeyProblem& p : problems) {
    errors.Add(NodeAtPath(root, p.key_path), p.key_path, p.message);
  }
  if (s.training.optimizer_in_backward &&
      (o.optimizer != OffloadTarget::kNone || o.params != OffloadTarget::kNone)) {
    errors.Add(at(""), "parallel.offload",
               "an offloaded optimizer runs on the host after the backward; not combined with "
               "training.optimizer_in_backward");
  }
  if (s.training.optimizer == OptimizerKind::kAdam8bitPaged &&
      (o.optimizer != OffloadTarget::kNone || o.params != OffloadTarget::kNone)) {
    errors.Add(at(""), "parallel.offload",
               "a paged optimizer already pages its states to the host; not combined with offload");
  }
}

// The key the user would change, or its section, or the top of the file.
YAML::Node KeyAt(const YAML::Node& root, absl::string_view section, absl::string_view key) {
  return NodeAtPath(root, absl::StrCat(section, ".", key));
}

// What the layout must divide (heads, widths, layers, the sequence, the GPUs) and the kernels it
// needs; the data-parallel degree, or none when the GPUs do not split into it.
std::optional<int64_t> CheckShapes(const YAML::Node& root, const Scenario& s, YamlErrors& errors) {
  const ModelSpec& m = s.model;
  const ParallelSpec& par = s.parallel;
  const int64_t tp = par.tp, pp = par.pp, cp = par.cp;
  if (m.heads > 0 && (m.heads % tp != 0 || m.kv_heads % tp != 0)) {
    errors.Add(KeyAt(root, "parallel", "tp"), "parallel.tp",
               absl::StrCat("tp ", tp, " must divide the model's heads (", m.heads,
                            ") and kv_heads (", m.kv_heads, ")"));
  }
  if (tp > 1 && (m.ffn_hidden % tp != 0 || m.vocab % tp != 0)) {
    errors.Add(KeyAt(root, "parallel", "tp"), "parallel.tp",
               absl::StrCat("tp ", tp, " must divide the model's ffn_hidden (", m.ffn_hidden,
                            ") and vocab (", m.vocab, "); pad the vocabulary in the model file"));
  }
  CheckStageLayers(
      [&](absl::string_view section, absl::string_view key) { return KeyAt(root, section, key); },
      s, errors);
  if (cp > 1 && s.training.seq_len % (2 * cp) != 0) {
    errors.Add(KeyAt(root, "parallel", "cp"), "parallel.cp",
               absl::StrCat("cp ", cp, ": seq_len ", s.training.seq_len,
                            " must split into 2 x cp load-balanced chunks"));
  }
  if (!s.training.document_lengths.empty()) {
    int64_t sum = 0;
    for (int64_t l : s.training.document_lengths) sum += l;
    if (s.training.packing > 1) {
      errors.Add(KeyAt(root, "training", "document_lengths"), "training.document_lengths",
                 "give the documents' lengths or their number (training.packing), not both");
    } else if (sum != s.training.seq_len) {
      errors.Add(KeyAt(root, "training", "document_lengths"), "training.document_lengths",
                 absl::StrCat("the documents' lengths sum to ", sum, " tokens, not seq_len ",
                              s.training.seq_len, " (a padding tail is a document of its own)"));
    }
  }
  if (s.training.packing > s.training.seq_len) {
    errors.Add(KeyAt(root, "training", "packing"), "training.packing",
               absl::StrCat("packing ", s.training.packing, " documents into ", s.training.seq_len,
                            " tokens: each document needs at least one token"));
  }
  if (Child(Child(root, "training"), "flash_impl").IsDefined() &&
      s.training.attention != AttentionKernel::kFlash) {
    errors.Add(KeyAt(root, "training", "flash_impl"), "training.flash_impl",
               "applies to flash attention only (training.attention is eager)");
  }
  // FlashAttention-3 is written for Hopper's wgmma and TMA (Shah et al. 2024, arXiv 2407.08608;
  // the flash-attention README lists H100/H800 as its requirement): compute capability 9.x.
  if (s.training.flash_impl == FlashImpl::kFa3 && s.cluster.gpu.compute_capability &&
      (*s.cluster.gpu.compute_capability < 9.0 || *s.cluster.gpu.compute_capability >= 10.0)) {
    errors.Add(KeyAt(root, "training", "flash_impl"), "training.flash_impl",
               absl::StrFormat("fa3 (FlashAttention-3) runs on Hopper GPUs (compute capability "
                               "9.x); %s is %.1f: use fa2",
                               s.cluster.gpu.name, *s.cluster.gpu.compute_capability));
  }
  if (cp > 1 && s.parallel.cp_kind == CpKind::kUlysses &&
      (m.heads / tp % cp != 0 || m.kv_heads / tp % cp != 0)) {
    errors.Add(KeyAt(root, "parallel", "cp_kind"), "parallel.cp_kind",
               absl::StrCat("ulysses splits the heads over cp: the ", m.heads / tp, " heads and ",
                            m.kv_heads / tp, " KV heads per TP rank must divide by cp ", cp));
  }
  if (cp > 1 && s.training.attention != AttentionKernel::kFlash) {
    errors.Add(KeyAt(root, "parallel", "cp"), "parallel.cp",
               "context parallelism is modelled with flash attention only (training.attention)");
  }
  const int64_t gpus = s.cluster.gpus();
  if (gpus > 0 && gpus % (tp * pp * cp) != 0) {
    errors.Add(KeyAt(root, "parallel", "tp"), "parallel",
               absl::StrCat("the cluster's ", gpus,
                            " GPUs are not a multiple of tp x pp x cp = ", tp * pp * cp));
    return std::nullopt;
  }
  return gpus / (tp * pp * cp);
}

// Experts and their parallelism, routing, and multi-head latent attention.
void CheckExperts(const YAML::Node& root, const Scenario& s, int64_t dp, YamlErrors& errors) {
  const ModelSpec& m = s.model;
  const ParallelSpec& par = s.parallel;
  const int64_t tp = par.tp, cp = par.cp;
  if (par.ep > 1 && !m.moe) {
    errors.Add(KeyAt(root, "parallel", "ep"), "parallel.ep",
               absl::StrCat("ep ", par.ep, ": model ", m.name,
                            " has no experts (expert parallelism needs a `moe:` model)"));
  } else if (par.etp && !m.moe) {
    errors.Add(KeyAt(root, "parallel", "etp"), "parallel.etp",
               absl::StrCat("etp ", *par.etp, ": model ", m.name,
                            " has no experts (expert tensor parallelism needs a `moe:` model)"));
  } else if (m.moe) {
    // Megatron-Core's folding: etp x ep tiles the tp x cp x dp GPUs of a stage.
    const int64_t etp = par.expert_tp(), block = tp * cp * dp;
    if (block % (etp * par.ep) != 0 || m.moe->experts % par.ep != 0) {
      errors.Add(
          KeyAt(root, "parallel", par.etp ? "etp" : "ep"), par.etp ? "parallel.etp" : "parallel.ep",
          absl::StrCat("etp x ep = ", etp, " x ", par.ep, " must divide tp x cp x dp = ", block,
                       ", and ep the model's ", m.moe->experts, " experts"));
    } else if (m.moe->expert_ffn_hidden % etp != 0) {
      errors.Add(KeyAt(root, "parallel", par.etp ? "etp" : "tp"),
                 par.etp ? "parallel.etp" : "parallel.tp",
                 absl::StrCat(par.etp ? "etp " : "tp ", etp,
                              " must divide the experts' width (moe.expert_ffn_hidden ",
                              m.moe->expert_ffn_hidden, ")"));
    }
    // The expert groups are carved out of the block below PP, TP innermost (parallel_state.py).
    const ParallelDim outer = par.rank_order.back();
    const bool default_inner = par.rank_order[0] == ParallelDim::kTp &&
                               par.rank_order[1] == ParallelDim::kCp &&
                               par.rank_order[2] == ParallelDim::kDp;
    if ((par.ep > 1 || etp != tp) && (outer != ParallelDim::kPp || !default_inner)) {
      errors.Add(KeyAt(root, "parallel", "rank_order"), "parallel.rank_order",
                 "expert parallelism is placed in Megatron-Core's rank order only: tp-cp-dp-pp");
    }
    // megatron/core/transformer/moe/moe_layer.py refuses to train MoE under TP without SP.
    if (tp > 1 && !par.sequence_parallel) {
      errors.Add(KeyAt(root, "parallel", "sequence_parallel"), "parallel.sequence_parallel",
                 absl::StrCat("a mixture-of-experts model with tp ", tp,
                              " needs sequence_parallel: true (Megatron-Core's MoE layer "
                              "routes each TP rank's sequence shard)"));
    }
  }
  if (!m.moe && (s.training.routing.distribution != RoutingDistribution::kBalanced ||
                 s.training.routing.capacity_factor)) {
    errors.Add(At(root, "training", "routing", "distribution"), "training.routing.distribution",
               absl::StrCat("model ", m.name, " has no experts to route to"));
  }
  // MLA (model.h MlaSpec) is modelled under flash attention, without CP or adapters.
  if (m.mla && cp > 1) {
    errors.Add(KeyAt(root, "parallel", "cp"), "parallel.cp",
               absl::StrCat("context parallelism with multi-head latent attention (", m.name,
                            ") is not modelled; use cp 1"));
  }
  if (m.mla && s.training.attention != AttentionKernel::kFlash) {
    errors.Add(KeyAt(root, "training", "attention"), "training.attention",
               absl::StrCat("multi-head latent attention (", m.name,
                            ") is modelled with flash attention only"));
  }
  if (m.mla && s.training.finetune.adapters()) {
    errors.Add(At(root, "training", "finetune", "method"), "training.finetune.method",
               absl::StrCat("adapters on multi-head latent attention (", m.name,
                            ") are not modelled; fine-tune it fully (method: full)"));
  }
  if (m.moe && s.training.finetune.adapters()) {
    errors.Add(At(root, "training", "finetune", "method"), "training.finetune.method",
               absl::StrCat("adapters on a mixture-of-experts model (", m.name,
                            ") are not modelled; fine-tune it fully (method: full)"));
  }
  // ZeRO-3 / FULL_SHARD gathers would have to gather experts over their own data-parallel group
  // (not modelled: DeepSpeed-MoE refuses ZeRO-3, Megatron-Core uses the distributed optimizer).
  if (par.ep > 1 && TraitsOf(par.framework).FullyShards(par)) {
    errors.Add(KeyAt(root, "parallel", "ep"), "parallel.ep",
               "expert parallelism with ZeRO-3 / FSDP full_shard is not modelled; use zero 0-2 "
               "(Megatron's distributed optimizer is zero 1)");
  }
}

// Sizes stepsim counts, and the batch in micro-batches; false when the sizes overflow.
bool CheckSizes(const YAML::Node& root, const Scenario& s, int64_t dp, YamlErrors& errors) {
  const ModelSpec& m = s.model;
  const ParallelSpec& par = s.parallel;
  const int64_t pp = par.pp;
  // Sizes stepsim counts in int64 bytes: the largest tensors of one micro-batch on one GPU
  // (eager attention scores in fp32, fp32 logits, the MLP activations) and the model's states,
  // counted here in floating point so that nothing overflows before it is refused.
  {
    const double tokens = static_cast<double>(s.training.seq_len) * s.training.micro_batch;
    const double largest =
        std::max({tokens * s.training.seq_len * static_cast<double>(m.heads) * 4,
                  tokens * static_cast<double>(m.vocab) * 8,
                  tokens * static_cast<double>(std::max(m.hidden, m.ffn_hidden)) * 64,
                  static_cast<double>(m.layers) * 16 * static_cast<double>(m.hidden) *
                      static_cast<double>(m.hidden + m.ffn_hidden) * 20});
    if (largest > 0x1p60) {
      errors.Add(KeyAt(root, "training", "seq_len"), "training.seq_len",
                 absl::StrFormat("seq_len %d x micro_batch %d on this model makes tensors of "
                                 "%.3g bytes per GPU, beyond the 2^60 bytes stepsim counts",
                                 s.training.seq_len, s.training.micro_batch, largest));
      return false;
    }
  }
  const int64_t per_step = s.training.micro_batch * dp;
  if (dp > 0 && s.training.global_batch % per_step != 0) {
    errors.Add(KeyAt(root, "training", "global_batch"), "training.global_batch",
               absl::StrCat("global_batch ", s.training.global_batch,
                            " is not a multiple of micro_batch x dp = ", s.training.micro_batch,
                            " x ", dp, " = ", per_step));
  } else if (dp > 0 && s.training.global_batch / per_step > kMaxMicroBatches) {
    errors.Add(KeyAt(root, "training", "global_batch"), "training.global_batch",
               absl::StrCat("global_batch ", s.training.global_batch, " makes ",
                            s.training.global_batch / per_step,
                            " micro-batches per step, above the ", kMaxMicroBatches,
                            " stepsim counts (global_batch counts sequences, not tokens; or "
                            "raise micro_batch)"));
  } else if (dp > 0 && par.pp_schedule == PipelineSchedule::kInterleaved && pp > 1 &&
             (s.training.global_batch / per_step) % pp != 0) {
    // Megatron-LM asserts this for its interleaved schedule.
    errors.Add(
        KeyAt(root, "training", "global_batch"), "training.global_batch",
        absl::StrCat("the interleaved schedule needs the ", s.training.global_batch / per_step,
                     " micro-batches per step to be a multiple of pp = ", pp));
  }
  return true;
}

// training.fp8_recipe: a recipe other than delayed needs fp8 training; the block recipes need
// their kernels (Float8BlockScaling is Transformer Engine's, from Hopper on; MXFP8 needs
// Blackwell's block-scaled tensor cores).
void CheckFp8Recipe(const YAML::Node& root, const Scenario& s, YamlErrors& errors) {
  const Fp8Recipe r = s.training.fp8_recipe;
  if (r == Fp8Recipe::kDelayed) return;
  auto refuse = [&](std::string why) {
    errors.Add(KeyAt(root, "training", "fp8_recipe"), "training.fp8_recipe", std::move(why));
  };
  const GpuSpec& gpu = s.cluster.gpu;
  if (s.training.precision != Precision::kFp8) {
    refuse(absl::StrCat("fp8_recipe ", Name(r),
                        " scales fp8 tensors: it needs precision fp8 "
                        "(precision ",
                        Name(s.training.precision), ")"));
  } else if (r == Fp8Recipe::kMxfp8 && !gpu.HasMxfp8()) {
    refuse(
        absl::StrCat("mxfp8 needs Blackwell's block-scaled tensor cores (compute capability "
                     "10.0 on); ",
                     gpu.name, " has none: use delayed, tensorwise or blockwise"));
  } else if (r == Fp8Recipe::kBlockwise &&
             KernelLibraryOf(s) != KernelLibrary::kTransformerEngine) {
    refuse(
        absl::StrCat("blockwise is Transformer Engine's Float8BlockScaling: it needs "
                     "kernel_library transformer_engine (kernel library ",
                     Name(KernelLibraryOf(s)), ")"));
  } else if (r == Fp8Recipe::kBlockwise && gpu.compute_capability.value_or(0) < 9.0) {
    refuse(absl::StrCat("blockwise fp8 GEMMs run from Hopper on (compute capability 9.0); ",
                        gpu.name, " has none"));
  }
}

// The GPU's number formats, the framework's refusals and keys, sequence parallelism and the
// position table.
void CheckKeys(const YAML::Node& root, const Scenario& s, YamlErrors& errors) {
  const ParallelSpec& par = s.parallel;
  const int64_t tp = par.tp;
  if (s.training.precision == Precision::kFp8 && !s.cluster.gpu.fp8) {
    errors.Add(KeyAt(root, "training", "precision"), "training.precision",
               absl::StrCat(s.cluster.gpu.name, " has no fp8 tensor cores"));
  }
  CheckFp8Recipe(root, s, errors);
  if (s.training.precision == Precision::kBf16 && !s.cluster.gpu.bf16) {
    errors.Add(KeyAt(root, "training", "precision"), "training.precision",
               absl::StrCat(s.cluster.gpu.name, " has no bf16 tensor cores; use fp16"));
  }
  if (par.bucket &&
      Child(Child(Child(root, "parallel"), "deepspeed"), "reduce_bucket_size").IsDefined()) {
    errors.Add(KeyAt(root, "parallel", "bucket"), "parallel.bucket",
               "parallel.bucket and parallel.deepspeed.reduce_bucket_size both size DeepSpeed's "
               "bucket (in bytes and in 16-bit elements): set one");
  }
  // Keys that belong to another framework, then the framework's own refusals.
  std::vector<KeyProblem> problems = ForeignKeyProblems(
      s, [&](absl::string_view path) { return NodeAtPath(root, path, true).IsDefined(); });
  TraitsOf(par.framework).CheckLayout(s, problems);
  for (const KeyProblem& p : problems) {
    errors.Add(NodeAtPath(root, p.key_path), p.key_path, p.message);
  }
  if (s.parallel.sequence_parallel && tp == 1) {
    errors.Add(KeyAt(root, "parallel", "sequence_parallel"), "parallel.sequence_parallel",
               "sequence parallelism needs tp > 1");
  }
  if (s.model.position == PositionKind::kLearned && s.model.max_seq_len > 0 &&
      s.training.seq_len > s.model.max_seq_len) {
    errors.Add(
        KeyAt(root, "training", "seq_len"), "training.seq_len",
        absl::StrCat("seq_len ", s.training.seq_len, " exceeds the model's learned ",
                     "position table of ", s.model.max_seq_len, " rows (set model max_seq_len)"));
  }
}

}  // namespace

// A mixed cluster places pipeline stages by node type: each stage's GPUs on one type, which
// needs a pipeline, the pipeline outermost in the rank order, and each type's GPUs a whole
// number of stages.
void CheckMixedCluster(const YAML::Node& root, const Scenario& s, YamlErrors& errors) {
  const ClusterSpec& c = s.cluster;
  if (c.groups.empty()) return;
  const YAML::Node at = KeyAt(root, "cluster", "nodes");
  for (const char* key : {"gpu", "gpus_per_node"}) {
    if (NodeAtPath(root, absl::StrCat("cluster.", key), /*exact=*/true).IsDefined()) {
      errors.Add(KeyAt(root, "cluster", key), absl::StrCat("cluster.", key),
                 "a mixed cluster takes each type's GPUs from its node type: leave it out");
    }
  }
  const ParallelSpec& par = s.parallel;
  if (par.pp < 2) {
    errors.Add(at, "cluster.nodes",
               absl::StrCat("a mixed cluster places pipeline stages by node type: set "
                            "parallel.pp to 2 or more (the ",
                            c.groups.size(), " types need a stage each at least)"));
    return;
  }
  if (par.rank_order.back() != ParallelDim::kPp) {
    errors.Add(KeyAt(root, "parallel", "rank_order"), "parallel.rank_order",
               "a mixed cluster places pipeline stages by node type: the pipeline must be the "
               "outermost dimension (e.g. tp-cp-dp-pp)");
    return;
  }
  const int64_t per_stage = c.gpus() / par.pp;
  for (size_t i = 0; i < c.groups.size(); ++i) {
    const int64_t gpus = c.groups[i].count * c.node.gpus_per_node;
    if (per_stage == 0 || gpus % per_stage != 0) {
      errors.Add(at, "cluster.nodes",
                 absl::StrCat("'", c.groups[i].node.name, "' has ", gpus,
                              " GPUs, not a whole number of pipeline stages of ", per_stage,
                              " (tp x cp x dp): each stage must run on one node type"));
      return;
    }
  }
}

void CheckConsistency(const YAML::Node& root, const Scenario& s, YamlErrors& errors) {
  const std::optional<int64_t> dp = CheckShapes(root, s, errors);
  if (!dp) return;
  CheckMixedCluster(root, s, errors);
  CheckExperts(root, s, *dp, errors);
  if (!CheckSizes(root, s, *dp, errors)) return;
  CheckKeys(root, s, errors);
  CheckFinetune(root, s, *dp, errors);
  CheckOffload(root, s, errors);
}

}  // namespace sim::config
