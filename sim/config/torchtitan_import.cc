// stepsim import job JOB.toml: a torchtitan job config as a scenario (job_import.h).

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

// toml++ (Debian libtomlplusplus-dev) compiled into this file from its headers: the package's
// shared library would keep stepsim from linking statically (tools/link-static.sh).
#define TOML_HEADER_ONLY 1
#define TOML_ENABLE_FORMATTERS 0
#include <toml++/toml.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/config/job_import.h"
#include "sim/config/job_import_writer.h"

namespace sim::config {

namespace {

using job_import_internal::CheckedProduct;
using job_import_internal::kMostGpus;
using job_import_internal::NameOf;
using job_import_internal::Writer;

// torchtitan's [model] name and flavor (torchtitan/models/*/__init__.py's flavors) for the
// catalog models of the same shapes.
std::optional<std::string> CatalogModel(const std::string& name, const std::string& flavor) {
  static const auto* models = new std::map<std::pair<std::string, std::string>, std::string>{
      {{"llama3", "8B"}, "llama3-8b"},     {{"llama3", "70B"}, "llama3-70b"},
      {{"llama3", "405B"}, "llama3-405b"}, {{"llama2", "7B"}, "llama2-7b"},
      {{"llama2", "13B"}, "llama2-13b"},   {{"llama2", "70B"}, "llama2-70b"}};
  auto it = models->find({name, flavor});
  if (it == models->end()) return std::nullopt;
  return it->second;
}

// Sections whose keys cannot change a step's time or memory: paths, logging, profiling, the
// learning-rate schedule, validation, checkpoints (priced by the scenario's run: section),
// fault tolerance, process-group timeouts.
bool UnpricedSection(const std::string& s) {
  static const auto* sections = new std::set<std::string>{
      "job",  "metrics",         "profiling",    "lr_scheduler",      "validation", "checkpoint",
      "comm", "fault_tolerance", "experimental", "memory_estimation", "debug"};
  return sections->contains(s);
}

// Keys of [training] that do not change a step: the data, the schedule's length, clipping,
// seeds, Python's garbage collection.
bool UnpricedTrainingKey(const std::string& k) {
  static const auto* keys =
      new std::set<std::string>{"dataset",       "dataset_path", "steps",
                                "max_norm",      "warmup_steps", "seed",
                                "deterministic", "gc_freq",      "enable_cpu_offload_check",
                                "tokenizer",     "gc_debug",     "dtype_for_loss"};
  return keys->contains(k);
}

// Where a node sits in the file, as `file:line:column`.
std::string At(const std::string& origin, const toml::source_region& r) {
  return absl::StrCat(origin, ":", r.begin.line, ":", r.begin.column);
}

}  // namespace

absl::StatusOr<JobImport> ImportTorchtitanToml(const std::string& text, const std::string& origin,
                                               const JobContext& context) {
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", why));
  };
  toml::table t;
  try {
    t = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(At(origin, e.source()), ": not TOML (", std::string(e.description()), ")"));
  }
  if (context.node.empty()) return fail("a torchtitan config does not name the hardware: --node");

  // Each key read, by its [section].key path, so that the rest can be listed.
  std::set<std::string> used;
  // A located error at `node`.
  auto bad = [&](const toml::node& n, const std::string& path, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(At(origin, n.source()), ": ", path, ": ", why));
  };
  // The node at section.key, or null (absent, or its section is not a table).
  auto node = [&](const std::string& section, const std::string& key) -> const toml::node* {
    const toml::table* s = t[section].as_table();
    if (s == nullptr) return nullptr;
    const toml::node* n = s->get(key);
    if (n != nullptr) used.insert(absl::StrCat(section, ".", key));
    return n;
  };
  auto path = [](const std::string& section, const std::string& key) {
    return absl::StrCat("[", section, "].", key);
  };
  // Integers within ±2^40 (the product of a few stays far from overflow).
  auto integer = [&](const std::string& section,
                     const std::string& key) -> absl::StatusOr<std::optional<int64_t>> {
    const toml::node* n = node(section, key);
    if (n == nullptr) return std::optional<int64_t>();
    const std::optional<int64_t> v = n->value_exact<int64_t>();
    constexpr int64_t kMost = int64_t{1} << 40;
    if (!v || *v < -kMost || *v > kMost) {
      return bad(*n, path(section, key), "expected a whole number (at most 2^40)");
    }
    return v;
  };
  auto boolean = [&](const std::string& section,
                     const std::string& key) -> absl::StatusOr<std::optional<bool>> {
    const toml::node* n = node(section, key);
    if (n == nullptr) return std::optional<bool>();
    const std::optional<bool> v = n->value_exact<bool>();
    if (!v) return bad(*n, path(section, key), "expected true or false");
    return v;
  };
  auto string = [&](const std::string& section,
                    const std::string& key) -> absl::StatusOr<std::optional<std::string>> {
    const toml::node* n = node(section, key);
    if (n == nullptr) return std::optional<std::string>();
    const std::optional<std::string> v = n->value_exact<std::string>();
    if (!v) return bad(*n, path(section, key), "expected a string");
    return v;
  };
  // A string one of `allowed`, or absent.
  auto choice =
      [&](const std::string& section, const std::string& key,
          const std::vector<std::string>& allowed) -> absl::StatusOr<std::optional<std::string>> {
    auto v = string(section, key);
    if (!v.ok() || !v->has_value()) return v;
    for (const std::string& a : allowed) {
      if (**v == a) return v;
    }
    return bad(*node(section, key), path(section, key),
               absl::StrCat("'", **v, "' is not one of ", absl::StrJoin(allowed, ", ")));
  };
  // torchtitan moved the parallelism degrees from [training] and [experimental] (2024) to
  // [parallelism] (2025); any of them.
  auto degree = [&](const std::string& key) -> absl::StatusOr<std::optional<int64_t>> {
    for (const char* section : {"parallelism", "training", "experimental"}) {
      auto v = integer(section, key);
      if (!v.ok() || v->has_value()) return v;
    }
    return std::optional<int64_t>();
  };
  SIM_IMPORT_TRY(model_name, string("model", "name"));
  SIM_IMPORT_TRY(flavor, string("model", "flavor"));
  SIM_IMPORT_TRY(norm_type, choice("model", "norm_type",
                                   {"rmsnorm", "fused_rmsnorm", "compiled_rmsnorm", "layernorm",
                                    "np_layernorm"}));
  SIM_IMPORT_TRY(local_batch, integer("training", "local_batch_size"));
  SIM_IMPORT_TRY(old_batch, integer("training", "batch_size"));
  SIM_IMPORT_TRY(global_batch, integer("training", "global_batch_size"));
  SIM_IMPORT_TRY(seq_len, integer("training", "seq_len"));
  SIM_IMPORT_TRY(old_compile, boolean("training", "compile"));
  SIM_IMPORT_TRY(compile, boolean("compile", "enable"));
  SIM_IMPORT_TRY(param_dtype, choice("training", "mixed_precision_param", {"bfloat16", "float32"}));
  SIM_IMPORT_TRY(reduce_dtype,
                 choice("training", "mixed_precision_reduce", {"float32", "bfloat16"}));
  SIM_IMPORT_TRY(replicate, degree("data_parallel_replicate_degree"));
  SIM_IMPORT_TRY(shard, degree("data_parallel_shard_degree"));
  SIM_IMPORT_TRY(tp, degree("tensor_parallel_degree"));
  SIM_IMPORT_TRY(pp, degree("pipeline_parallel_degree"));
  SIM_IMPORT_TRY(cp, degree("context_parallel_degree"));
  SIM_IMPORT_TRY(ep, degree("expert_parallel_degree"));
  SIM_IMPORT_TRY(async_tp, boolean("parallelism", "enable_async_tensor_parallel"));
  SIM_IMPORT_TRY(old_async_tp, boolean("experimental", "enable_async_tensor_parallel"));
  SIM_IMPORT_TRY(old_schedule,
                 choice("experimental", "pipeline_parallel_schedule", {"1F1B", "GPipe"}));
  // The single-stage schedules; the multi-stage ones (Interleaved1F1B, ZBV, ...) split the
  // model by pipeline_parallel_layers_per_stage, which the importer does not resolve.
  SIM_IMPORT_TRY(schedule, choice("parallelism", "pipeline_parallel_schedule", {"1F1B", "GPipe"}));
  SIM_IMPORT_TRY(pp_micro, degree("pipeline_parallel_microbatch_size"));
  SIM_IMPORT_TRY(ac_mode, choice("activation_checkpoint", "mode", {"none", "selective", "full"}));
  SIM_IMPORT_TRY(ac_option, string("activation_checkpoint", "selective_ac_option"));
  SIM_IMPORT_TRY(optimizer, choice("optimizer", "name", {"AdamW", "Adam"}));
  SIM_IMPORT_TRY(optimizer_impl,
                 choice("optimizer", "implementation", {"fused", "foreach", "for-loop"}));
  SIM_IMPORT_TRY(in_backward, boolean("optimizer", "early_step_in_backward"));
  SIM_IMPORT_TRY(old_float8, boolean("float8", "enable_float8_linear"));
  // torchao's Float8Linear recipes: tensorwise dynamic scaling when recipe_name is absent
  // (torchtitan's float8 converter, Float8LinearConfig.from_recipe_name); the row-wise ones are
  // not modelled.
  SIM_IMPORT_TRY(float8_recipe,
                 choice("float8", "recipe_name", {"tensorwise", "rowwise", "rowwise_with_gw_hp"}));
  if (float8_recipe->value_or("tensorwise") != "tensorwise") {
    return bad(
        *node("float8", "recipe_name"), path("float8", "recipe_name"),
        absl::StrCat("torchao's ", **float8_recipe, " scaling is not modelled (tensorwise is)"));
  }
  // [model] converters: a list (or, in older configs, one string) of model converters;
  // "float8" swaps the linear layers for torchao's Float8Linear.
  // Before converters, [float8] enable_float8_linear.
  bool float8 = old_float8->value_or(false);
  if (const toml::node* c = node("model", "converters")) {
    std::vector<std::string> names;
    if (auto s = c->value_exact<std::string>()) {
      names.push_back(*s);
    } else if (const toml::array* a = c->as_array()) {
      for (const toml::node& e : *a) {
        auto s = e.value_exact<std::string>();
        if (!s) return bad(e, path("model", "converters"), "expected a list of strings");
        names.push_back(*s);
      }
    } else {
      return bad(*c, path("model", "converters"), "expected a list of strings");
    }
    for (const std::string& n : names) {
      if (n == "float8") {
        float8 = true;
      } else {
        return bad(*c, path("model", "converters"),
                   absl::StrCat("converter '", n, "' is not modelled (float8 is)"));
      }
    }
  }

  // ---- the layout ----
  const int64_t r = replicate->value_or(1), s_deg = shard->value_or(-1);
  const int64_t tpd = tp->value_or(1), ppd = pp->value_or(1), cpd = cp->value_or(1);
  const int64_t epd = ep->value_or(1);
  for (const auto& [k, v] :
       {std::pair{"data_parallel_replicate_degree", r}, std::pair{"tensor_parallel_degree", tpd},
        std::pair{"pipeline_parallel_degree", ppd}, std::pair{"context_parallel_degree", cpd},
        std::pair{"expert_parallel_degree", epd}}) {
    if (v < 1) return fail(absl::StrCat(k, " ", v, ": expected at least 1"));
  }
  if (s_deg == 0 || s_deg < -1) {
    return fail(absl::StrCat("data_parallel_shard_degree ", s_deg, ": expected -1 or at least 1"));
  }
  // The world size: --gpus (torchrun's), else the degrees' product when none is -1.
  int64_t world = 0;
  std::string world_from;
  if (context.gpus) {
    world = *context.gpus;
    world_from = "import --gpus";
  } else if (s_deg > 0) {
    const std::optional<int64_t> product = CheckedProduct({r, s_deg, tpd, ppd, cpd});
    if (!product || *product > kMostGpus) {
      return fail(
          absl::StrCat("the parallelism degrees multiply to more than ", kMostGpus, " GPUs"));
    }
    world = *product;
    world_from = "the parallelism degrees' product";
  } else {
    return fail(
        "data_parallel_shard_degree -1 takes the GPUs the others leave: pass --gpus N (torchrun's "
        "world size)");
  }
  const std::optional<int64_t> others = CheckedProduct({r, tpd, ppd, cpd});
  if (!others || world % *others != 0) {
    return fail(absl::StrCat(world, " GPUs are not a multiple of replicate ", r, " x tp ", tpd,
                             " x pp ", ppd, " x cp ", cpd));
  }
  const int64_t dp_shard = s_deg > 0 ? s_deg : world / *others;
  if (CheckedProduct({*others, dp_shard}) != world) {
    return fail(absl::StrCat("the degrees (replicate ", r, " x shard ", dp_shard, " x tp ", tpd,
                             " x pp ", ppd, " x cp ", cpd, ") do not multiply to ", world,
                             " GPUs"));
  }
  if (context.gpus_per_node <= 0 || world % context.gpus_per_node != 0) {
    return fail(absl::StrCat(world, " GPUs are not whole nodes of ", context.gpus_per_node, " (",
                             context.node, ")"));
  }

  // ---- the batch ----
  // local_batch_size (batch_size before 2025) is per data-parallel rank; global_batch_size,
  // when set (-1: unset), adds gradient accumulation. Under a pipeline each local batch runs as
  // micro-batches of pipeline_parallel_microbatch_size (torchtitan's default 1).
  const std::optional<int64_t> local = local_batch->has_value() ? *local_batch : *old_batch;
  const std::string local_key = local_batch->has_value() ? "local_batch_size" : "batch_size";
  if (!local) return fail("[training].local_batch_size (or batch_size) is missing");
  if (*local < 1)
    return fail(absl::StrCat("[training].", local_key, " ", *local, ": expected >= 1"));
  if (!*seq_len) return fail("[training].seq_len is missing");
  if (**seq_len < 1) return fail("[training].seq_len: expected at least 1");
  const int64_t dp = r * dp_shard;
  int64_t global = *local * dp;
  std::string global_from = absl::StrCat(local_key, " ", *local, " x data parallel ", dp);
  if (global_batch->value_or(-1) > 0) {
    if (**global_batch % global != 0) {
      return fail(absl::StrCat("[training].global_batch_size ", **global_batch,
                               " is not a multiple of ", global_from, " = ", global));
    }
    global = **global_batch;
    global_from = "[training].global_batch_size";
  }
  int64_t micro = *local;
  std::string micro_from = absl::StrCat("[training].", local_key);
  if (ppd > 1) {
    micro = pp_micro->value_or(1);
    micro_from = pp_micro->has_value() ? "pipeline_parallel_microbatch_size"
                                       : "torchtitan's pipeline_parallel_microbatch_size 1";
    if (micro < 1 || *local % micro != 0) {
      return fail(absl::StrCat(local_key, " ", *local,
                               " is not a multiple of pipeline_parallel_microbatch_size ", micro));
    }
  }

  // ---- the model ----
  Writer w;
  w.Header(origin, "a torchtitan job config", NameOf(context, origin));
  if (context.model) {
    w.Line(0, "model", YamlString(*context.model), "import --model");
  } else {
    const std::optional<std::string> m =
        CatalogModel(model_name->value_or(""), flavor->value_or(""));
    if (!m) {
      return fail(absl::StrCat("[model] name '", model_name->value_or(""), "' flavor '",
                               flavor->value_or(""),
                               "' is no catalog model: pass --model NAME or --model "
                               "hf:config.json"));
    }
    w.Line(
        0, "model", *m,
        absl::StrCat("[model] name ", model_name->value_or(""), ", flavor ", flavor->value_or("")));
  }
  w.Raw("cluster:\n");
  w.Line(2, "node", YamlString(context.node), "import --node");
  w.Line(2, "nodes", absl::StrCat(world / context.gpus_per_node),
         absl::StrCat(world, " GPUs: ", world_from));

  w.Raw("training:\n");
  w.Line(2, "seq_len", absl::StrCat(**seq_len), "[training].seq_len");
  w.Line(2, "micro_batch", absl::StrCat(micro), micro_from);
  w.Line(2, "global_batch", absl::StrCat(global), global_from);
  if (param_dtype->value_or("bfloat16") == "float32") {
    return fail("[training].mixed_precision_param float32: fp32 training is not modelled");
  }
  if (float8) {
    w.Line(2, "precision", "fp8", "[model].converters float8 (torchao Float8Linear)");
    w.Line(2, "kernel_library", "pytorch", "torchao's float8 GEMMs");
    w.Line(2, "fp8_recipe", "tensorwise",
           float8_recipe->has_value() ? "[float8].recipe_name"
                                      : "torchao's default: dynamic tensorwise scaling");
  } else {
    w.Line(2, "precision", "bf16",
           param_dtype->has_value() ? "[training].mixed_precision_param"
                                    : "torchtitan's mixed_precision_param bfloat16");
  }
  // torch.compile fuses the small kernels; eager, torchtitan's Llama runs fp32 RMSNorm, complex
  // RoPE and repeated KV heads (training.kernels eager).
  const bool compiled = compile->value_or(old_compile->value_or(false));
  w.Line(2, "kernels", compiled ? "fused" : "eager",
         compile->has_value()       ? "[compile].enable"
         : old_compile->has_value() ? "[training].compile"
                                    : "torchtitan compiles nothing by default");
  if (!compiled && (norm_type->value_or("") == "fused_rmsnorm" ||
                    norm_type->value_or("") == "compiled_rmsnorm")) {
    w.Line(2, "norm_kernel", "fused", absl::StrCat("[model].norm_type ", **norm_type));
  }
  w.Line(2, "attention", "flash", "torchtitan's SDPA (flash)");
  const std::string mode = ac_mode->value_or("selective");
  const std::string ac_from = ac_mode->has_value() ? "[activation_checkpoint].mode"
                                                   : "torchtitan's activation_checkpoint selective";
  if (mode == "none") {
    w.Line(2, "recompute", "none", ac_from);
  } else if (mode == "full") {
    w.Line(2, "recompute", "full", ac_from);
  } else {
    // selective_ac_option: "op" (per-op policy), or an integer N: every N-th layer whole.
    const std::string opt = ac_option->value_or("2");
    int64_t every = 0;
    if (opt == "op") {
      w.Line(2, "recompute", "op", "[activation_checkpoint] selective, selective_ac_option op");
    } else if (absl::SimpleAtoi(opt, &every) && every >= 1 && every <= 1024) {
      w.Line(2, "recompute", "full", "[activation_checkpoint] selective by layer");
      w.Line(2, "recompute_every", absl::StrCat(every),
             ac_option->has_value() ? "[activation_checkpoint].selective_ac_option"
                                    : "torchtitan's selective_ac_option 2");
    } else {
      return bad(*node("activation_checkpoint", "selective_ac_option"),
                 path("activation_checkpoint", "selective_ac_option"),
                 absl::StrCat("'", opt, "': expected \"op\" or a layer interval"));
    }
  }
  const std::string impl = optimizer_impl->value_or("fused");
  w.Line(2, "optimizer_impl", impl == "for-loop" ? "loop" : impl,
         optimizer_impl->has_value() ? "[optimizer].implementation"
                                     : "torchtitan's optimizer implementation fused");
  if (in_backward->value_or(false)) {
    w.Line(2, "optimizer_in_backward", "true", "[optimizer].early_step_in_backward");
  }

  // ---- the parallel layout ----
  w.Raw("parallel:\n");
  if (dp_shard == 1 && r > 1) {
    // Replication alone: torchtitan applies DDP (parallelize_llama's apply_ddp).
    w.Line(2, "framework", "ddp", "data_parallel_replicate_degree alone: torchtitan's DDP");
    w.Line(2, "zero", "0");
  } else {
    w.Line(2, "framework", "fsdp", "torchtitan: FSDP2 over data_parallel_shard_degree");
    w.Line(2, "fsdp_version", "2", "fully_shard");
    w.Line(2, "zero", "3");
    w.Line(2, "sharding", r > 1 ? "hybrid_shard" : "full_shard",
           r > 1 ? "data_parallel_replicate_degree > 1: HSDP" : "data_parallel_shard_degree");
    w.Line(2, "reduce_dtype", reduce_dtype->value_or("float32") == "bfloat16" ? "bf16" : "fp32",
           reduce_dtype->has_value() ? "[training].mixed_precision_reduce"
                                     : "torchtitan's mixed_precision_reduce float32");
  }
  if (tpd > 1) {
    w.Line(2, "tp", absl::StrCat(tpd), "tensor_parallel_degree");
    w.Line(2, "sequence_parallel", "true", "torchtitan's TP plan shards the norms' sequence");
    if (async_tp->value_or(old_async_tp->value_or(false))) {
      w.Line(2, "tp_comm_overlap", "true", "enable_async_tensor_parallel");
    }
  }
  if (ppd > 1) {
    w.Line(2, "pp", absl::StrCat(ppd), "pipeline_parallel_degree");
    const std::optional<std::string> named = schedule->has_value() ? *schedule : *old_schedule;
    const std::string sched = named.value_or("1F1B");
    if (sched == "GPipe") {
      w.Line(2, "pp_schedule", "gpipe", "pipeline_parallel_schedule");
    } else {
      w.Line(2, "pp_schedule", "1f1b",
             named ? "pipeline_parallel_schedule" : "torchtitan's pipeline_parallel_schedule 1F1B");
    }
  }
  if (cpd > 1) {
    w.Line(2, "cp", absl::StrCat(cpd), "context_parallel_degree");
    w.Line(2, "cp_kind", "ring", "PyTorch's context parallel: ring attention");
  }
  if (epd > 1) w.Line(2, "ep", absl::StrCat(epd), "expert_parallel_degree");

  // ---- what was not mapped ----
  JobImport out;
  for (const auto& [section_key, section] : t) {
    const std::string section_name(section_key.str());
    if (UnpricedSection(section_name)) continue;
    const toml::table* s = section.as_table();
    if (s == nullptr) {
      out.unmapped.push_back(section_name);
      continue;
    }
    for (const auto& [key, value] : *s) {
      const std::string k(key.str());
      const std::string p = absl::StrCat(section_name, ".", k);
      if (used.contains(p)) continue;
      if (section_name == "training" && UnpricedTrainingKey(k)) continue;
      if (section_name == "model" &&
          (k == "tokenizer_path" || k == "hf_assets_path" || k == "print_after_conversion")) {
        continue;
      }
      if (section_name == "optimizer" &&
          (k == "lr" || k == "eps" || k == "weight_decay" || k == "beta1" || k == "beta2")) {
        continue;
      }
      out.unmapped.push_back(absl::StrCat("[", section_name, "].", k));
    }
  }
  if (optimizer->value_or("AdamW") == "Adam") {
    w.Raw("# [optimizer].name Adam: priced as AdamW (the same states and passes)\n");
  }
  w.Unmapped(out.unmapped);
  out.yaml = std::move(w.text());
  return out;
}

}  // namespace sim::config
