// stepsim import job RECIPE.yaml: a NeMo (NeMo-Framework-Launcher) training recipe as a scenario
// (job_import.h).

#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/config/job_import.h"
#include "sim/config/job_import_writer.h"
#include "sim/config/yaml_fields.h"
#include "yaml-cpp/yaml.h"

namespace sim::config {

namespace {

using job_import_internal::CheckedProduct;
using job_import_internal::kMostGpus;
using job_import_internal::NameOf;
using job_import_internal::Writer;

// `file:line:column` of a yaml-cpp mark (0-based, printed 1-based).
std::string At(const std::string& origin, const YAML::Mark& m) {
  if (m.is_null()) return origin;
  return absl::StrCat(origin, ":", m.line + 1, ":", m.column + 1);
}

// model.* keys that do not change a step: initialisation, tokenizer files, data, logging,
// profiling, numerics that cost nothing, fusions Megatron-Core applies anyway.
bool UnpricedModelKey(const std::string& k) {
  static const auto* keys =
      new std::set<std::string>{"rampup_batch_size",
                                "max_position_embeddings",
                                "init_method_std",
                                "use_scaled_init_method",
                                "attention_dropout",
                                "ffn_dropout",
                                "apply_query_key_layer_scaling",
                                "layernorm_epsilon",
                                "layernorm_zero_centered_gamma",
                                "do_layer_norm_weight_decay",
                                "pre_process",
                                "post_process",
                                "persist_layer_norm",
                                "headscale",
                                "transformer_block_type",
                                "openai_gelu",
                                "normalize_attention_scores",
                                "tokenizer",
                                "native_amp_init_scale",
                                "native_amp_growth_interval",
                                "hysteresis",
                                "fp32_residual_connection",
                                "fp16_lm_cross_entropy",
                                "megatron_amp_O2",
                                "grad_allreduce_chunk_size_mb",
                                "grad_div_ar_fusion",
                                "gradient_accumulation_fusion",
                                "bias_activation_fusion",
                                "bias_dropout_add_fusion",
                                "masked_softmax_fusion",
                                "seed",
                                "resume_from_checkpoint",
                                "use_cpu_initialization",
                                "onnx_safe",
                                "apex_transformer_log_level",
                                "gradient_as_bucket_view",
                                "sync_batch_comm",
                                "fsdp_sharding_strategy",
                                "fsdp_grad_reduce_dtype",
                                "fsdp_sharded_checkpoint",
                                "batch_p2p_comm",
                                "overlap_p2p_comm",
                                "sharp",
                                "mcore_gpt",
                                "fp8_e4m3",
                                "fp8_hybrid",
                                "fp8_margin",
                                "fp8_interval",
                                "fp8_amax_history_len",
                                "fp8_amax_compute_algo",
                                "fp8_wgrad",
                                "nsys_profile",
                                "data",
                                "gc_interval",
                                "apply_rope_fusion",
                                "defer_embedding_wgrad_compute",
                                "wgrad_deferral_limit",
                                "cross_entropy_loss_fusion",
                                "rotary_percentage",
                                "activations_checkpoint_method",
                                "activations_checkpoint_num_layers",
                                "num_micro_batches_with_partial_activation_checkpoints",
                                "activations_checkpoint_layers_per_pipeline",
                                "make_vocab_size_divisible_by",
                                "use_flash_attention",
                                "kv_channels",
                                "fsdp",
                                "ub_tp_comm_overlap_cfg",
                                "attention_type"};
  return keys->contains(k);
}

}  // namespace

absl::StatusOr<JobImport> ImportNemoRecipe(const std::string& text, const std::string& origin,
                                           const JobContext& context,
                                           const std::vector<std::string>& overrides,
                                           std::optional<int64_t> vocab) {
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", why));
  };
  // The loaders' parse: control characters and non-UTF-8 bytes refused before yaml-cpp sees
  // them, one document, nesting bounded (yaml_fields.h).
  auto parsed = ParseYamlMapping(text, origin);
  if (!parsed.ok()) return parsed.status();
  YAML::Node root = *parsed;
  if (!root.IsMap() || !root["model"] || !root["model"].IsMap()) {
    return fail("expected a NeMo recipe: a mapping with a model: section");
  }
  if (context.node.empty()) return fail("a NeMo recipe does not name the hardware: --node");

  // Hydra's command-line overrides, as the launcher passes them: KEY=VALUE replaces a key the
  // recipe has, +KEY=VALUE adds one.
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0) {
      return fail(absl::StrCat("override '", o, "': expected KEY=VALUE or +KEY=VALUE"));
    }
    std::string key = o.substr(0, eq);
    const bool add = absl::StartsWith(key, "+");
    if (add) key = key.substr(1);
    YAML::Node value;
    try {
      value = YAML::Load(o.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      return fail(absl::StrCat("override '", o, "': ", e.msg));
    }
    if (!value.IsScalar() && !value.IsNull()) {
      return fail(absl::StrCat("override '", o, "': expected one value"));
    }
    std::vector<std::string> parts = absl::StrSplit(key, '.');
    YAML::Node at = root;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      YAML::Node next = at[parts[i]];
      if (!next.IsMap()) {
        return fail(absl::StrCat("override '", o, "': ", parts[i], " is not a section"));
      }
      at.reset(next);
    }
    if (!add && !at[parts.back()].IsDefined()) {
      return fail(absl::StrCat("override '", o, "': ", key,
                               " is not in the recipe (Hydra adds a key with +", key, ")"));
    }
    at[parts.back()] = value;
  }

  const YAML::Node model = root["model"];
  const YAML::Node trainer = root["trainer"];
  std::set<std::string> used;
  // model.KEY (or trainer.KEY, optim.KEY below), marked read.
  auto get = [&](const YAML::Node& section, const std::string& prefix,
                 const std::string& key) -> YAML::Node {
    if (!section || !section.IsMap() || !section[key]) return YAML::Node();
    used.insert(absl::StrCat(prefix, key));
    return section[key];
  };
  auto bad = [&](const YAML::Node& n, const std::string& path, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(At(origin, n.Mark()), ": ", path, ": ", why));
  };
  // A whole number within 0..2^40, or absent (null counts as absent, as in NeMo's configs).
  auto count = [&](const YAML::Node& section, const std::string& prefix,
                   const std::string& key) -> absl::StatusOr<std::optional<int64_t>> {
    const YAML::Node n = get(section, prefix, key);
    if (!n || n.IsNull()) return std::optional<int64_t>();
    double d = -1;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, d) || !(d >= 0) || d > 1099511627776.0 ||
        d != std::floor(d)) {
      return bad(n, prefix + key, "expected a whole number");
    }
    return std::optional<int64_t>(static_cast<int64_t>(d));
  };
  auto flag = [&](const YAML::Node& section, const std::string& prefix,
                  const std::string& key) -> absl::StatusOr<std::optional<bool>> {
    const YAML::Node n = get(section, prefix, key);
    if (!n || n.IsNull()) return std::optional<bool>();
    bool b = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, b)) {
      return bad(n, prefix + key, "expected true or false");
    }
    return std::optional<bool>(b);
  };
  auto word = [&](const YAML::Node& section, const std::string& prefix,
                  const std::string& key) -> absl::StatusOr<std::optional<std::string>> {
    const YAML::Node n = get(section, prefix, key);
    if (!n || n.IsNull()) return std::optional<std::string>();
    if (!n.IsScalar()) return bad(n, prefix + key, "expected a word");
    return std::optional<std::string>(n.Scalar());
  };
  const std::string m = "model.";
  SIM_IMPORT_TRY(nodes, count(trainer, "trainer.", "num_nodes"));
  SIM_IMPORT_TRY(devices, count(trainer, "trainer.", "devices"));
  SIM_IMPORT_TRY(precision, word(trainer, "trainer.", "precision"));
  SIM_IMPORT_TRY(micro, count(model, m, "micro_batch_size"));
  SIM_IMPORT_TRY(global, count(model, m, "global_batch_size"));
  SIM_IMPORT_TRY(seq, count(model, m, "encoder_seq_length"));
  SIM_IMPORT_TRY(tp, count(model, m, "tensor_model_parallel_size"));
  SIM_IMPORT_TRY(pp, count(model, m, "pipeline_model_parallel_size"));
  SIM_IMPORT_TRY(vp, count(model, m, "virtual_pipeline_model_parallel_size"));
  SIM_IMPORT_TRY(cp, count(model, m, "context_parallel_size"));
  SIM_IMPORT_TRY(ep, count(model, m, "expert_model_parallel_size"));
  SIM_IMPORT_TRY(sp, flag(model, m, "sequence_parallel"));
  SIM_IMPORT_TRY(layers, count(model, m, "num_layers"));
  SIM_IMPORT_TRY(hidden, count(model, m, "hidden_size"));
  SIM_IMPORT_TRY(ffn, count(model, m, "ffn_hidden_size"));
  SIM_IMPORT_TRY(heads, count(model, m, "num_attention_heads"));
  SIM_IMPORT_TRY(groups, count(model, m, "num_query_groups"));
  SIM_IMPORT_TRY(activation, word(model, m, "activation"));
  SIM_IMPORT_TRY(norm, word(model, m, "normalization"));
  SIM_IMPORT_TRY(position, word(model, m, "position_embedding_type"));
  SIM_IMPORT_TRY(tied, flag(model, m, "share_embeddings_and_output_weights"));
  SIM_IMPORT_TRY(bias, flag(model, m, "bias"));
  SIM_IMPORT_TRY(dropout, word(model, m, "hidden_dropout"));
  SIM_IMPORT_TRY(divisible, count(model, m, "make_vocab_size_divisible_by"));
  SIM_IMPORT_TRY(granularity, word(model, m, "activations_checkpoint_granularity"));
  SIM_IMPORT_TRY(fp8, flag(model, m, "fp8"));
  SIM_IMPORT_TRY(fp8_params, flag(model, m, "fp8_params"));
  SIM_IMPORT_TRY(ub, flag(model, m, "ub_tp_comm_overlap"));
  SIM_IMPORT_TRY(te, flag(model, m, "transformer_engine"));
  const YAML::Node optim = get(model, m, "optim");
  const std::string o = "model.optim.";
  SIM_IMPORT_TRY(optim_name, word(optim, o, "name"));
  SIM_IMPORT_TRY(grad_dtype, word(optim, o, "grad_sync_dtype"));
  SIM_IMPORT_TRY(grad_overlap, flag(optim, o, "overlap_grad_sync"));
  SIM_IMPORT_TRY(param_overlap, flag(optim, o, "overlap_param_sync"));

  // ---- the world and the layout ----
  int64_t world = 0;
  std::string world_from;
  if (context.gpus) {
    world = *context.gpus;
    world_from = "import --gpus";
  } else if (nodes->has_value() && devices->has_value()) {
    const std::optional<int64_t> product = CheckedProduct({**nodes, **devices});
    if (!product || *product > kMostGpus) {
      return fail(
          absl::StrCat("trainer.num_nodes x trainer.devices is more than ", kMostGpus, " GPUs"));
    }
    world = *product;
    world_from = "trainer.num_nodes x trainer.devices";
  } else {
    return fail("trainer.num_nodes and trainer.devices are missing: pass --gpus N");
  }
  if (world < 1 || context.gpus_per_node <= 0 || world % context.gpus_per_node != 0) {
    return fail(absl::StrCat(world, " GPUs are not whole nodes of ", context.gpus_per_node, " (",
                             context.node, ")"));
  }
  const int64_t tpd = tp->value_or(1), ppd = pp->value_or(1), cpd = cp->value_or(1);
  const std::optional<int64_t> model_parallel = CheckedProduct({tpd, ppd, cpd});
  if (tpd < 1 || ppd < 1 || cpd < 1 || !model_parallel || world % *model_parallel != 0) {
    return fail(
        absl::StrCat(world, " GPUs are not a multiple of tp ", tpd, " x pp ", ppd, " x cp ", cpd));
  }

  Writer w;
  w.Header(origin, "a NeMo recipe", NameOf(context, origin));
  // ---- the model ----
  if (context.model) {
    w.Line(0, "model", YamlString(*context.model), "import --model");
  } else {
    if (!layers->has_value() || !hidden->has_value() || !heads->has_value()) {
      return fail("model.num_layers, hidden_size and num_attention_heads are needed (or --model)");
    }
    if (!vocab) {
      return fail(
          "the vocabulary's size is in the tokenizer's file, not the recipe: pass --vocab N (or "
          "--model)");
    }
    w.Raw("model:\n");
    w.Line(2, "name", YamlString(NameOf(context, origin)));
    w.Line(2, "layers", absl::StrCat(**layers), "model.num_layers");
    w.Line(2, "hidden", absl::StrCat(**hidden), "model.hidden_size");
    w.Line(2, "heads", absl::StrCat(**heads), "model.num_attention_heads");
    w.Line(2, "kv_heads", absl::StrCat(groups->value_or(**heads)),
           groups->has_value() ? "model.num_query_groups" : "no num_query_groups: one per head");
    w.Line(2, "ffn_hidden", absl::StrCat(ffn->value_or(4 * **hidden)),
           ffn->has_value() ? "model.ffn_hidden_size" : "NeMo's default: 4 x hidden");
    if (divisible->value_or(128) < 1) {
      return bad(model["make_vocab_size_divisible_by"], "model.make_vocab_size_divisible_by",
                 "expected at least 1");
    }
    // tp divides the world (at most kMostGpus), the divisor is at most 2^40: no overflow.
    const int64_t multiple = divisible->value_or(128) * tpd;
    w.Line(2, "vocab", absl::StrCat((*vocab + multiple - 1) / multiple * multiple),
           absl::StrCat("import --vocab ", *vocab, ", padded to a multiple of ", multiple,
                        " (make_vocab_size_divisible_by x tp)"));
    const std::string act = activation->value_or("gelu");
    std::string mlp;
    if (act == "swiglu" || act == "fast-swiglu") {
      mlp = "swiglu";
    } else if (act == "gelu" || act == "fast-gelu" || act == "squared-relu") {
      mlp = "gelu";  // squared ReLU: the same two GEMMs as GELU's, priced alike
    } else {
      return bad(model["activation"], "model.activation",
                 absl::StrCat("'", act, "' is not modelled (swiglu, gelu, squared-relu are)"));
    }
    w.Line(2, "mlp", mlp, absl::StrCat("model.activation ", act));
    const std::string n = norm->value_or("layernorm");
    if (n != "layernorm" && n != "layernorm1p" && n != "rmsnorm") {
      return bad(model["normalization"], "model.normalization",
                 absl::StrCat("'", n, "' is not modelled (layernorm, layernorm1p, rmsnorm are)"));
    }
    w.Line(2, "norm", n == "rmsnorm" ? "rmsnorm" : "layernorm",
           absl::StrCat("model.normalization ", n));
    const std::string pos = position->value_or("learned_absolute");
    w.Line(2, "position", pos == "rope" ? "rope" : "learned",
           absl::StrCat("model.position_embedding_type ", pos));
    if (pos != "rope" && seq->has_value()) {
      w.Line(2, "max_seq_len", absl::StrCat(**seq), "model.encoder_seq_length");
    }
    w.Line(2, "tied_embeddings", tied->value_or(true) ? "true" : "false",
           tied->has_value() ? "model.share_embeddings_and_output_weights" : "NeMo's default");
    w.Line(2, "bias", bias->value_or(true) ? "true" : "false",
           bias->has_value() ? "model.bias" : "NeMo's default");
    double p = 0.1;
    if (dropout->has_value() && (!absl::SimpleAtod(**dropout, &p) || !(p >= 0) || !(p <= 1))) {
      return bad(model["hidden_dropout"], "model.hidden_dropout", "expected a probability");
    }
    w.Line(2, "dropout", absl::StrCat(p),
           dropout->has_value() ? "model.hidden_dropout" : "NeMo's default 0.1");
  }
  w.Raw("cluster:\n");
  w.Line(2, "node", YamlString(context.node), "import --node");
  w.Line(2, "nodes", absl::StrCat(world / context.gpus_per_node),
         absl::StrCat(world, " GPUs: ", world_from));

  // ---- training ----
  w.Raw("training:\n");
  if (!seq->has_value() || !micro->has_value() || !global->has_value()) {
    return fail("model.encoder_seq_length, micro_batch_size and global_batch_size are needed");
  }
  w.Line(2, "seq_len", absl::StrCat(**seq), "model.encoder_seq_length");
  w.Line(2, "micro_batch", absl::StrCat(**micro), "model.micro_batch_size");
  w.Line(2, "global_batch", absl::StrCat(**global), "model.global_batch_size");
  const std::string prec = precision->value_or("bf16");
  if (fp8->value_or(false)) {
    w.Line(2, "precision", "fp8", "model.fp8");
    if (fp8_params->value_or(false)) w.Line(2, "fp8_params", "true", "model.fp8_params");
  } else if (absl::StartsWith(prec, "bf16")) {
    w.Line(2, "precision", "bf16", "trainer.precision");
  } else if (prec == "16" || prec == "16-mixed") {
    w.Line(2, "precision", "fp16", "trainer.precision");
  } else {
    return bad(trainer["precision"], "trainer.precision",
               absl::StrCat("'", prec, "': fp32 training is not modelled"));
  }
  if (te->has_value() && !**te) {
    w.Line(2, "kernel_library", "pytorch", "model.transformer_engine false");
  }
  w.Line(2, "attention", "flash", "Transformer Engine's fused attention");
  const std::string gran = granularity->value_or("");
  if (gran.empty()) {
    w.Line(2, "recompute", "none", "no activations_checkpoint_granularity");
  } else if (gran == "selective" || gran == "full") {
    w.Line(2, "recompute", gran, "model.activations_checkpoint_granularity");
  } else {
    return bad(model["activations_checkpoint_granularity"],
               "model.activations_checkpoint_granularity",
               absl::StrCat("'", gran, "': expected selective, full or null"));
  }

  // ---- parallel ----
  w.Raw("parallel:\n");
  w.Line(2, "framework", "megatron", "NeMo's Megatron-Core GPT");
  const std::string opt = optim_name->value_or("fused_adam");
  const bool dfa = opt == "distributed_fused_adam";
  const bool sharded = dfa || opt == "mcore_distributed_optim";
  w.Line(2, "zero", sharded ? "1" : "0", absl::StrCat("model.optim.name ", opt));
  w.Line(2, "tp", absl::StrCat(tpd), "model.tensor_model_parallel_size");
  w.Line(2, "pp", absl::StrCat(ppd), "model.pipeline_model_parallel_size");
  w.Line(2, "cp", absl::StrCat(cpd), "model.context_parallel_size");
  if (ep->value_or(1) > 1) w.Line(2, "ep", absl::StrCat(**ep), "model.expert_model_parallel_size");
  w.Line(2, "sequence_parallel", tpd > 1 && sp->value_or(false) ? "true" : "false",
         "model.sequence_parallel");
  if (ppd > 1 && vp->value_or(1) > 1) {
    w.Line(2, "pp_schedule", "interleaved", "model.virtual_pipeline_model_parallel_size");
    w.Line(2, "pp_chunks", absl::StrCat(**vp), "model.virtual_pipeline_model_parallel_size");
  }
  if (grad_dtype->has_value()) {
    const std::string g = **grad_dtype;
    if (g != "bf16" && g != "fp32" && g != "fp16") {
      return bad(optim["grad_sync_dtype"], "model.optim.grad_sync_dtype",
                 "expected bf16, fp16 or fp32");
    }
    w.Line(2, "reduce_dtype", g, "model.optim.grad_sync_dtype");
  }
  if (dfa && absl::StartsWith(prec, "bf16")) {
    // NeMo's setup_optimization sets Apex's store_param_remainders for a bf16 model with fp32
    // optimizer states (megatron_base_model.py); fp8 runs keep a bf16 model around their fp8
    // GEMMs.
    w.Line(2, "store_param_remainders", "true", "distributed_fused_adam with a bf16 model");
  }
  if (tpd > 1 && ub->value_or(false)) {
    w.Line(2, "tp_comm_overlap", "true", "model.ub_tp_comm_overlap");
  }
  if (sharded && grad_overlap->value_or(false)) {
    w.Line(2, "overlap_grad_reduce", "true", "model.optim.overlap_grad_sync");
  }
  if (sharded && param_overlap->value_or(false)) {
    w.Line(2, "overlap_param_gather", "true", "model.optim.overlap_param_sync");
  }

  // ---- what was not mapped ----
  JobImport out;
  // A key that is not a scalar (YAML allows a mapping as a key) is listed as such.
  auto key_of = [](const YAML::Node& k) { return k.IsScalar() ? k.Scalar() : "(not a name)"; };
  for (const auto& kv : model) {
    const std::string k = key_of(kv.first);
    if (used.contains(m + k) || UnpricedModelKey(k)) continue;
    if (k == "optim" || k == "name") continue;
    out.unmapped.push_back(m + k);
  }
  if (optim && optim.IsMap()) {
    for (const auto& kv : optim) {
      const std::string k = key_of(kv.first);
      if (used.contains(o + k)) continue;
      if (k == "lr" || k == "weight_decay" || k == "betas" || k == "sched" ||
          k == "bucket_cap_mb" || k == "contiguous_grad_buffer" || k == "contiguous_param_buffer" ||
          k == "dtype") {
        continue;
      }
      out.unmapped.push_back(o + k);
    }
  }
  w.Unmapped(out.unmapped);
  out.yaml = std::move(w.text());
  return out;
}

}  // namespace sim::config
