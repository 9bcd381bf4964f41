#include "sim/config/job_import.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "sim/base/json_parse.h"
#include "sim/base/text_escape.h"
#include "sim/config/job_import_writer.h"
#include "sim/spec/enum_names.h"
#include "sim/spec/scenario.h"

namespace sim::config {

using job_import_internal::NameOf;
using job_import_internal::Writer;

namespace {

// Megatron-LM flags that take no value (argparse store_true), as arguments.py declares them.
const std::set<std::string>& BooleanFlags() {
  static const auto* flags = new std::set<std::string>{"fp16",
                                                       "bf16",
                                                       "sequence-parallel",
                                                       "use-distributed-optimizer",
                                                       "swiglu",
                                                       "untie-embeddings-and-output-weights",
                                                       "group-query-attention",
                                                       "use-flash-attn",
                                                       "overlap-grad-reduce",
                                                       "overlap-param-gather",
                                                       "tp-comm-overlap",
                                                       "checkpoint-activations",
                                                       "recompute-activations",
                                                       "disable-bias-linear",
                                                       "use-rotary-position-embeddings",
                                                       "use-mcore-models",
                                                       "no-masked-softmax-fusion",
                                                       "no-bias-gelu-fusion",
                                                       "no-bias-dropout-fusion",
                                                       "no-gradient-accumulation-fusion",
                                                       "use-cpu-initialization",
                                                       "no-async-tensor-model-parallel-allreduce",
                                                       "distribute-saved-activations",
                                                       "no-load-optim",
                                                       "no-load-rng",
                                                       "no-save-optim",
                                                       "no-save-rng",
                                                       "fp16-lm-cross-entropy",
                                                       "accumulate-allreduce-grads-in-fp32",
                                                       "no-query-key-layer-scaling",
                                                       "attention-softmax-in-fp32",
                                                       "use-legacy-models",
                                                       "log-throughput",
                                                       "manual-gc",
                                                       "no-create-attention-mask-in-dataloader",
                                                       "use-torch-fsdp2",
                                                       "moe-grouped-gemm"};
  return *flags;
}

// Flags that do not change a step's time or memory: data and tokenizer files, the learning-rate
// schedule, logging, evaluation, checkpoint paths and intervals, initialisation, seeds.
bool Unpriced(const std::string& key) {
  static const auto* prefixes =
      new std::vector<std::string>{"data-",
                                   "vocab-file",
                                   "merge-file",
                                   "tokenizer-",
                                   "lr",
                                   "min-lr",
                                   "log-",
                                   "eval-",
                                   "save",
                                   "load",
                                   "train-iters",
                                   "train-samples",
                                   "split",
                                   "clip-grad",
                                   "loss-scale",
                                   "init-method",
                                   "seed",
                                   "weight-decay",
                                   "adam-",
                                   "distributed-backend",
                                   "tensorboard",
                                   "wandb",
                                   "exit-",
                                   "timing-",
                                   "no-load-",
                                   "no-save-",
                                   "initial-loss-scale",
                                   "min-loss-scale",
                                   "hysteresis",
                                   "num-workers",
                                   "dataloader-",
                                   "use-mcore-models",
                                   "use-legacy-models",
                                   "manual-gc",
                                   "no-create-attention-mask-in-dataloader",
                                   "use-cpu-initialization",
                                   "mock-data"};
  for (const std::string& p : *prefixes) {
    if (absl::StartsWith(key, p)) return true;
  }
  return false;
}

struct Arg {
  std::string key;                   // dashes for underscores
  std::optional<std::string> value;  // none: a boolean flag
  std::string written;               // as the file wrote it
  bool used = false;
};

// The words of a command line: `\` continuations joined, `#` comments dropped, split at blanks,
// quotes around a word dropped (a quoted value with blanks inside stays one word).
std::vector<std::string> Words(std::string text) {
  text = absl::StrReplaceAll(text, {{"\\\r\n", " "}, {"\\\n", " "}});
  std::vector<std::string> out;
  std::string word;
  char quote = 0;
  bool comment = false;  // from a `#` that starts a word to the end of its line, as a shell reads
  for (char c : text) {
    if (comment) {
      comment = c != '\n';
      continue;
    }
    if (!quote && c == '#' && word.empty()) {
      comment = true;
      continue;
    }
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else {
        word += c;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      if (!word.empty()) out.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) out.push_back(std::move(word));
  return out;
}

class Args {
 public:
  explicit Args(const std::vector<std::string>& words) {
    for (size_t i = 0; i < words.size(); ++i) {
      if (!absl::StartsWith(words[i], "--") || words[i].size() == 2) continue;  // positionals
      Arg a;
      std::string key = words[i].substr(2);
      if (const size_t eq = key.find('='); eq != std::string::npos) {
        a.value = key.substr(eq + 1);
        key.resize(eq);
      }
      a.key = absl::StrReplaceAll(key, {{"_", "-"}});
      a.written = words[i];
      if (!a.value && !BooleanFlags().contains(a.key) && i + 1 < words.size() &&
          !absl::StartsWith(words[i + 1], "--")) {
        a.value = words[++i];
        absl::StrAppend(&a.written, " ", *a.value);
      }
      by_key_[a.key] = args_.size();  // the last one counts, as argparse takes it
      args_.push_back(std::move(a));
    }
  }
  bool Has(const std::string& key) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return false;
    args_[it->second].used = true;
    return true;
  }
  Arg* Find(const std::string& key) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return nullptr;
    args_[it->second].used = true;
    return &args_[it->second];
  }
  std::vector<Arg>& all() { return args_; }

 private:
  std::vector<Arg> args_;
  std::map<std::string, size_t> by_key_;
};

}  // namespace

absl::StatusOr<JobImport> ImportMegatronArgs(const std::string& text, const std::string& origin,
                                             const JobContext& context) {
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", why));
  };
  Args args(Words(text));
  for (const Arg& a : args.all()) {
    if (a.value && absl::StrContains(*a.value, '$')) {
      return fail(absl::StrCat(a.written,
                               ": an unexpanded shell variable; give the arguments with their "
                               "values (e.g. the command the job logged)"));
    }
  }
  // Integer flag values, each in a sane range, with what it was written as.
  std::map<std::string, std::pair<int64_t, std::string>> ints;
  // Sizes and counts are at least 1 (the first and last stage's layers at least 0), and at
  // most 2^30: beyond any real job, and products of a few stay far from overflow.
  auto integer = [&](const std::string& key) -> absl::StatusOr<std::optional<int64_t>> {
    Arg* a = args.Find(key);
    if (!a) return std::optional<int64_t>();
    const int64_t least = absl::StartsWith(key, "decoder-") ? 0 : 1;
    int64_t v = 0;
    if (!a->value || !absl::SimpleAtoi(*a->value, &v) || v < least || v > (int64_t{1} << 30)) {
      return fail(absl::StrCat(a->written, ": expected a whole number from ", least, " to 2^30"));
    }
    ints[key] = {v, a->written};
    return std::optional<int64_t>(v);
  };
  auto from = [&](const std::string& key) { return ints.count(key) ? ints[key].second : ""; };
  std::map<std::string, std::optional<int64_t>> n;
  for (const char* key : {"num-layers",
                          "hidden-size",
                          "num-attention-heads",
                          "num-query-groups",
                          "ffn-hidden-size",
                          "vocab-size",
                          "make-vocab-size-divisible-by",
                          "max-position-embeddings",
                          "seq-length",
                          "micro-batch-size",
                          "global-batch-size",
                          "tensor-model-parallel-size",
                          "pipeline-model-parallel-size",
                          "context-parallel-size",
                          "expert-model-parallel-size",
                          "num-layers-per-virtual-pipeline-stage",
                          "virtual-pipeline-model-parallel-size",
                          "recompute-num-layers",
                          "nnodes",
                          "nproc-per-node",
                          "num-experts",
                          "decoder-first-pipeline-num-layers",
                          "decoder-last-pipeline-num-layers"}) {
    auto v = integer(key);
    if (!v.ok()) return v.status();
    n[key] = *v;
  }
  const int64_t tp = n["tensor-model-parallel-size"].value_or(1);
  const int64_t pp = n["pipeline-model-parallel-size"].value_or(1);

  // The world size: torchrun's, else the caller's.
  std::optional<int64_t> world;
  std::string world_from;
  if (n["nnodes"] && n["nproc-per-node"]) {
    world = *n["nnodes"] * *n["nproc-per-node"];
    world_from = absl::StrCat(from("nnodes"), " x ", from("nproc-per-node"));
  }
  if (context.gpus) {
    world = context.gpus;
    world_from = "import --gpus";
  }
  if (!world) {
    return fail(
        "the arguments do not give the world size (no torchrun --nnodes and --nproc-per-node): "
        "pass --gpus N");
  }
  if (context.node.empty()) return fail("the arguments do not name the hardware: pass --node");

  Writer w;
  const std::string name = NameOf(context, origin);
  w.Header(origin, "Megatron-LM arguments", name);

  // ---- model ----
  const bool legacy = args.Has("DDP-impl") || args.Has("checkpoint-activations") ||
                      args.Has("activations-checkpoint-method") || args.Has("use-legacy-models");
  if (context.model) {
    w.Line(0, "model", YamlString(*context.model), "import --model");
    for (const char* k :
         {"num-layers", "hidden-size", "num-attention-heads", "num-query-groups", "ffn-hidden-size",
          "vocab-size", "swiglu", "normalization", "group-query-attention",
          "untie-embeddings-and-output-weights", "position-embedding-type", "disable-bias-linear",
          "use-rotary-position-embeddings", "max-position-embeddings"}) {
      args.Has(k);  // the named model stands for them
    }
  } else {
    if (!n["num-layers"] || !n["hidden-size"] || !n["num-attention-heads"]) {
      return fail(
          "no --num-layers, --hidden-size and --num-attention-heads: pass --model NAME (a "
          "catalog model, or hf:config.json) for the architecture");
    }
    const int64_t h = *n["hidden-size"], heads = *n["num-attention-heads"];
    const bool swiglu = args.Has("swiglu");
    Arg* norm = args.Find("normalization");
    const bool rms = norm && norm->value && absl::EqualsIgnoreCase(*norm->value, "RMSNorm");
    Arg* pos = args.Find("position-embedding-type");
    const bool rope =
        args.Has("use-rotary-position-embeddings") || (pos && pos->value && *pos->value == "rope");
    const bool gqa = args.Has("group-query-attention");
    w.Raw("model:\n");
    w.Line(2, "name", YamlString(name));
    const bool llama = swiglu && rms && rope;
    w.Line(2, "family", llama ? "llama" : "gpt",
           llama ? "--swiglu, --normalization RMSNorm and rope" : "GPT's layer (no --swiglu)");
    w.Line(2, "layers", absl::StrCat(*n["num-layers"]), from("num-layers"));
    w.Line(2, "hidden", absl::StrCat(h), from("hidden-size"));
    w.Line(2, "heads", absl::StrCat(heads), from("num-attention-heads"));
    if (gqa && n["num-query-groups"]) {
      w.Line(2, "kv_heads", absl::StrCat(*n["num-query-groups"]),
             absl::StrCat("--group-query-attention ", from("num-query-groups")));
    }
    if (n["ffn-hidden-size"]) {
      w.Line(2, "ffn_hidden", absl::StrCat(*n["ffn-hidden-size"]), from("ffn-hidden-size"));
    } else if (swiglu) {
      w.Line(2, "ffn_hidden", absl::StrCat((4 * h * 2 / 3) / 64 * 64),
             "Megatron-LM's default with --swiglu: 8h/3 rounded down to a multiple of 64");
    } else {
      w.Line(2, "ffn_hidden", absl::StrCat(4 * h), "Megatron-LM's default: 4h");
    }
    // The vocabulary: --vocab-size, or GPT-2's BPE (--vocab-file with --merge-file, Megatron's
    // GPT2BPETokenizer: 50,257 tokens); padded as Megatron pads it.
    int64_t vocab = 0;
    std::string vocab_from;
    Arg* tokenizer = args.Find("tokenizer-type");
    if (n["vocab-size"]) {
      vocab = *n["vocab-size"];
      vocab_from = from("vocab-size");
    } else if ((args.Has("vocab-file") && args.Has("merge-file")) ||
               (tokenizer && tokenizer->value && *tokenizer->value == "GPT2BPETokenizer")) {
      vocab = 50257;
      vocab_from = "GPT-2 BPE (--vocab-file, --merge-file): 50,257 tokens";
    } else {
      return fail("the vocabulary's size is not in the arguments: add --vocab-size N");
    }
    const int64_t multiple = n["make-vocab-size-divisible-by"].value_or(128) * tp;
    const int64_t padded = (vocab + multiple - 1) / multiple * multiple;
    w.Line(2, "vocab", absl::StrCat(padded),
           absl::StrCat(vocab_from, ", padded to a multiple of ", multiple,
                        " (--make-vocab-size-divisible-by x tp)"));
    w.Line(2, "mlp", swiglu ? "swiglu" : "gelu", swiglu ? "--swiglu" : "Megatron-LM's default");
    w.Line(2, "norm", rms ? "rmsnorm" : "layernorm",
           norm ? norm->written : "Megatron-LM's default");
    w.Line(2, "position", rope ? "rope" : "learned",
           rope ? (pos ? pos->written : "--use-rotary-position-embeddings")
                : "Megatron-LM's default: learned absolute");
    if (!rope) {
      const int64_t max_pos = n["max-position-embeddings"].value_or(n["seq-length"].value_or(0));
      if (max_pos > 0) {
        w.Line(2, "max_seq_len", absl::StrCat(max_pos), from("max-position-embeddings"));
      }
    } else {
      args.Has("max-position-embeddings");
    }
    const bool untied = args.Has("untie-embeddings-and-output-weights");
    w.Line(2, "tied_embeddings", untied ? "false" : "true",
           untied ? "--untie-embeddings-and-output-weights" : "Megatron-LM's default");
    const bool no_bias = args.Has("disable-bias-linear");
    w.Line(2, "bias", no_bias ? "false" : "true",
           no_bias ? "--disable-bias-linear" : "Megatron-LM's default");
    Arg* dropout = args.Find("hidden-dropout");
    double p = 0.1;
    if (dropout && (!dropout->value || !absl::SimpleAtod(*dropout->value, &p) || p < 0 || p > 1)) {
      return fail(absl::StrCat(dropout->written, ": expected a probability"));
    }
    w.Line(2, "dropout", absl::StrCat(p),
           dropout ? dropout->written : "Megatron-LM's default --hidden-dropout");
    args.Has("attention-dropout");
  }

  // ---- cluster ----
  w.Raw("cluster:\n");
  w.Line(2, "node", YamlString(context.node), "import --node");
  if (context.gpus_per_node <= 0 || *world % context.gpus_per_node != 0) {
    return fail(absl::StrCat(world_from, ": ", *world, " GPUs are not whole nodes of ",
                             context.gpus_per_node, " (", context.node, ")"));
  }
  w.Line(2, "nodes", absl::StrCat(*world / context.gpus_per_node),
         absl::StrCat(world_from, ": ", *world, " GPUs"));

  // ---- training ----
  w.Raw("training:\n");
  if (n["seq-length"]) w.Line(2, "seq_len", absl::StrCat(*n["seq-length"]), from("seq-length"));
  if (n["micro-batch-size"]) {
    w.Line(2, "micro_batch", absl::StrCat(*n["micro-batch-size"]), from("micro-batch-size"));
  }
  if (n["global-batch-size"]) {
    w.Line(2, "global_batch", absl::StrCat(*n["global-batch-size"]), from("global-batch-size"));
  }
  Arg* fp8 = args.Find("fp8-format");
  if (fp8) {
    w.Line(2, "precision", "fp8", fp8->written);
    // --fp8-recipe {delayed, tensorwise, mxfp8, blockwise}, delayed by default
    // (megatron/training/arguments.py): stepsim's names are Megatron-LM's.
    if (Arg* recipe = args.Find("fp8-recipe"); recipe && recipe->value) {
      if (!EnumFromName<Fp8Recipe>(*recipe->value)) {
        return fail(absl::StrCat("--fp8-recipe ", *recipe->value, " is not one of ",
                                 absl::StrJoin(EnumNameList<Fp8Recipe>(), ", ")));
      }
      w.Line(2, "fp8_recipe", *recipe->value, recipe->written);
    }
    args.Has("bf16");
  } else if (args.Has("bf16")) {
    w.Line(2, "precision", "bf16", "--bf16");
  } else if (args.Has("fp16")) {
    w.Line(2, "precision", "fp16", "--fp16");
  } else {
    return fail("neither --bf16 nor --fp16: fp32 training is not modelled");
  }
  Arg* granularity = args.Find("recompute-granularity");
  Arg* method = args.Find("recompute-method");
  if (args.Has("checkpoint-activations") || args.Has("activations-checkpoint-method")) {
    w.Line(2, "recompute", "full", "--checkpoint-activations / --activations-checkpoint-method");
  } else if (granularity && granularity->value) {
    w.Line(2, "recompute", *granularity->value == "full" ? "full" : "selective",
           granularity->written);
  } else if (args.Has("recompute-activations")) {
    w.Line(2, "recompute", "selective", "--recompute-activations");
  } else {
    w.Line(2, "recompute", "none", "no recompute flag");
  }
  if (granularity && granularity->value && *granularity->value == "full" && method &&
      method->value && n["recompute-num-layers"]) {
    if (*method->value != "uniform" && *method->value != "block") {
      return fail(absl::StrCat(method->written, ": expected uniform or block"));
    }
    w.Line(2, "recompute_method", *method->value, method->written);
    w.Line(2, "recompute_layers", absl::StrCat(*n["recompute-num-layers"]),
           from("recompute-num-layers"));
  }
  if (legacy) {
    // Megatron-LM before Megatron-Core (--DDP-impl, --checkpoint-activations): its own fused
    // softmax attention and PyTorch's GEMMs, unless --use-flash-attn.
    const bool flash = args.Has("use-flash-attn");
    w.Line(2, "attention", flash ? "flash" : "eager",
           flash ? "--use-flash-attn" : "legacy Megatron-LM: unfused attention");
    w.Line(2, "kernel_library", "pytorch", "legacy Megatron-LM: no Transformer Engine layers");
  } else {
    args.Has("use-flash-attn");
    w.Line(2, "attention", "flash", "Megatron-Core: fused attention");
  }

  // ---- parallel ----
  w.Raw("parallel:\n");
  w.Line(2, "framework", "megatron", "pretrain_gpt.py");
  const bool dist_opt = args.Has("use-distributed-optimizer");
  w.Line(2, "zero", dist_opt ? "1" : "0",
         dist_opt ? "--use-distributed-optimizer" : "no --use-distributed-optimizer");
  w.Line(2, "tp", absl::StrCat(tp), from("tensor-model-parallel-size"));
  w.Line(2, "pp", absl::StrCat(pp), from("pipeline-model-parallel-size"));
  if (n["context-parallel-size"]) {
    w.Line(2, "cp", absl::StrCat(*n["context-parallel-size"]), from("context-parallel-size"));
  }
  if (n["expert-model-parallel-size"]) {
    w.Line(2, "ep", absl::StrCat(*n["expert-model-parallel-size"]),
           from("expert-model-parallel-size"));
  }
  const bool sp = args.Has("sequence-parallel");
  w.Line(2, "sequence_parallel", sp ? "true" : "false", sp ? "--sequence-parallel" : "");
  std::optional<int64_t> chunks;
  std::string chunks_from;
  if (n["virtual-pipeline-model-parallel-size"]) {
    chunks = n["virtual-pipeline-model-parallel-size"];
    chunks_from = from("virtual-pipeline-model-parallel-size");
  } else if (n["num-layers-per-virtual-pipeline-stage"] && n["num-layers"] && pp > 1 &&
             *n["num-layers-per-virtual-pipeline-stage"] > 0) {
    chunks = *n["num-layers"] / (pp * *n["num-layers-per-virtual-pipeline-stage"]);
    chunks_from = absl::StrCat(from("num-layers-per-virtual-pipeline-stage"),
                               ": layers / (pp x layers per chunk)");
  }
  if (chunks && *chunks > 1) {
    w.Line(2, "pp_schedule", "interleaved", chunks_from);
    w.Line(2, "pp_chunks", absl::StrCat(*chunks), chunks_from);
  }
  if (n["decoder-first-pipeline-num-layers"]) {
    w.Line(2, "first_stage_layers", absl::StrCat(*n["decoder-first-pipeline-num-layers"]),
           from("decoder-first-pipeline-num-layers"));
  }
  if (n["decoder-last-pipeline-num-layers"]) {
    w.Line(2, "last_stage_layers", absl::StrCat(*n["decoder-last-pipeline-num-layers"]),
           from("decoder-last-pipeline-num-layers"));
  }
  for (const auto& [flag, key] : {std::pair{"overlap-grad-reduce", "overlap_grad_reduce"},
                                  std::pair{"overlap-param-gather", "overlap_param_gather"},
                                  std::pair{"tp-comm-overlap", "tp_comm_overlap"}}) {
    if (args.Has(flag)) w.Line(2, key, "true", absl::StrCat("--", flag));
  }

  // ---- what was not mapped ----
  JobImport out;
  for (Arg& a : args.all()) {
    if (a.used || Unpriced(a.key) || a.key == "DDP-impl") continue;
    if (a.key == "nnodes" || a.key == "nproc-per-node" || a.key == "node-rank" ||
        a.key == "master-addr" || a.key == "master-port" || a.key == "rdzv-endpoint" ||
        a.key == "rdzv-backend" || a.key == "rdzv-id") {
      continue;  // torchrun's
    }
    out.unmapped.push_back(a.written);
  }
  w.Unmapped(out.unmapped);
  out.yaml = std::move(w.text());
  return out;
}

absl::StatusOr<JobImport> ImportDeepSpeedConfig(const std::string& text, const std::string& origin,
                                                const JobContext& context,
                                                std::optional<int64_t> seq_len) {
  using Json = nlohmann::json;
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", why));
  };
  auto parsed = ParseJsonFile(text, origin);
  if (!parsed.ok()) return parsed.status();
  const Json j = *std::move(parsed);
  if (!j.is_object()) return fail("expected a JSON object (a DeepSpeed config)");
  if (!context.model) return fail("a DeepSpeed config holds no architecture: pass --model NAME");
  if (!context.gpus) return fail("a DeepSpeed config holds no world size: pass --gpus N");
  if (context.node.empty())
    return fail("a DeepSpeed config does not name the hardware: pass --node");
  const int64_t world = *context.gpus;
  if (context.gpus_per_node <= 0 || world % context.gpus_per_node != 0) {
    return fail(absl::StrCat(world, " GPUs are not whole nodes of ", context.gpus_per_node, " (",
                             context.node, ")"));
  }
  std::set<std::string> used;
  // A value at a dotted path: none when absent; "auto" refused.
  auto at = [&](const std::string& path) -> absl::StatusOr<const Json*> {
    const Json* v = &j;
    for (absl::string_view part : absl::StrSplit(path, '.')) {
      if (!v->is_object()) return static_cast<const Json*>(nullptr);
      auto it = v->find(std::string(part));
      if (it == v->end()) return static_cast<const Json*>(nullptr);
      v = &*it;
    }
    used.insert(path);
    if (v->is_string() && v->get<std::string>() == "auto") {
      return fail(absl::StrCat(path,
                               ": \"auto\" is the Hugging Face Trainer's placeholder, "
                               "filled at launch; give the value"));
    }
    return v;
  };
  auto count = [&](const std::string& path) -> absl::StatusOr<std::optional<int64_t>> {
    auto v = at(path);
    if (!v.ok()) return v.status();
    if (!*v) return std::optional<int64_t>();
    const Json& x = **v;
    // At most 2^40 (a bucket of a trillion elements): products of three stay far from overflow.
    constexpr double kMost = 1099511627776.0;
    const double d = x.is_number() ? x.get<double>() : -1;
    if (!x.is_number() || !(d >= 0 && d <= kMost) || d != std::floor(d)) {
      return fail(absl::StrCat(path, ": expected a whole number from 0 to 2^40"));
    }
    return std::optional<int64_t>(static_cast<int64_t>(d));
  };
  auto flag = [&](const std::string& path) -> absl::StatusOr<std::optional<bool>> {
    auto v = at(path);
    if (!v.ok()) return v.status();
    if (!*v) return std::optional<bool>();
    if (!(*v)->is_boolean()) return fail(absl::StrCat(path, ": expected true or false"));
    return std::optional<bool>((*v)->get<bool>());
  };
  auto device = [&](const std::string& path) -> absl::StatusOr<std::optional<std::string>> {
    auto v = at(path);
    if (!v.ok()) return v.status();
    if (!*v) return std::optional<std::string>();
    if (!(*v)->is_string()) return fail(absl::StrCat(path, ": expected none, cpu or nvme"));
    const std::string d = (*v)->get<std::string>();
    if (d != "none" && d != "cpu" && d != "nvme") {
      return fail(absl::StrCat(path, ": expected none, cpu or nvme"));
    }
    return std::optional<std::string>(d);
  };
  SIM_IMPORT_TRY(micro, count("train_micro_batch_size_per_gpu"));
  SIM_IMPORT_TRY(total, count("train_batch_size"));
  SIM_IMPORT_TRY(gas, count("gradient_accumulation_steps"));
  SIM_IMPORT_TRY(bf16, flag("bf16.enabled"));
  SIM_IMPORT_TRY(fp16, flag("fp16.enabled"));
  SIM_IMPORT_TRY(stage, count("zero_optimization.stage"));
  SIM_IMPORT_TRY(opt_dev, device("zero_optimization.offload_optimizer.device"));
  SIM_IMPORT_TRY(param_dev, device("zero_optimization.offload_param.device"));
  SIM_IMPORT_TRY(overlap, flag("zero_optimization.overlap_comm"));
  SIM_IMPORT_TRY(contiguous, flag("zero_optimization.contiguous_gradients"));
  // DeepSpeed's batch rule (runtime/config.py _batch_assertion): train_batch_size =
  // micro × gradient_accumulation_steps × world size; two of the three give the third.
  int64_t m = micro->value_or(0), g = gas->value_or(0), t = total->value_or(0);
  if (!m && t && g) m = t / (g * world);
  if (!g && t && m) g = t / (m * world);
  if (!g) g = 1;
  if (!m) return fail("train_micro_batch_size_per_gpu is missing (or not derivable)");
  if (!t) t = m * g * world;
  if (t != m * g * world) {
    return fail(absl::StrCat("train_batch_size ", t, " is not train_micro_batch_size_per_gpu ", m,
                             " x gradient_accumulation_steps ", g, " x ", world, " GPUs"));
  }
  if (!(bf16->value_or(false) || fp16->value_or(false))) {
    return fail("neither bf16.enabled nor fp16.enabled: fp32 training is not modelled");
  }
  if (stage->value_or(0) > 3) return fail("zero_optimization.stage: expected 0 to 3");

  Writer w;
  w.Header(origin, "a DeepSpeed config", NameOf(context, origin));
  w.Line(0, "model", YamlString(*context.model), "import --model");
  w.Raw("cluster:\n");
  w.Line(2, "node", YamlString(context.node), "import --node");
  w.Line(2, "nodes", absl::StrCat(world / context.gpus_per_node),
         absl::StrCat("import --gpus: ", world, " GPUs"));
  w.Raw("training:\n");
  if (seq_len) {
    w.Line(2, "seq_len", absl::StrCat(*seq_len), "import --seq-len");
  } else {
    w.Raw("  # seq_len: not in a DeepSpeed config; stepsim's default (import --seq-len N)\n");
  }
  w.Line(2, "micro_batch", absl::StrCat(m), "train_micro_batch_size_per_gpu");
  w.Line(2, "global_batch", absl::StrCat(t),
         absl::StrCat("train_batch_size = ", m, " x gradient_accumulation_steps ", g, " x ", world,
                      " GPUs"));
  w.Line(2, "precision", bf16->value_or(false) ? "bf16" : "fp16",
         bf16->value_or(false) ? "bf16.enabled" : "fp16.enabled");
  w.Raw("parallel:\n");
  w.Line(2, "framework", "deepspeed", "a DeepSpeed config");
  w.Line(2, "zero", absl::StrCat(stage->value_or(0)),
         stage->has_value() ? "zero_optimization.stage" : "DeepSpeed's default: 0");
  if (overlap->has_value()) {
    w.Line(2, "overlap_grad_reduce", **overlap ? "true" : "false",
           "zero_optimization.overlap_comm");
  }
  if (opt_dev->value_or("none") != "none" || param_dev->value_or("none") != "none") {
    w.Raw("  offload:\n");
    if (*opt_dev) {
      w.Line(4, "optimizer", **opt_dev, "zero_optimization.offload_optimizer.device");
    }
    if (*param_dev) w.Line(4, "params", **param_dev, "zero_optimization.offload_param.device");
  }
  std::vector<std::pair<std::string, std::string>> buckets;
  for (const char* key :
       {"reduce_bucket_size", "allgather_bucket_size", "stage3_prefetch_bucket_size",
        "stage3_max_live_parameters", "stage3_max_reuse_distance", "sub_group_size"}) {
    auto v = count(absl::StrCat("zero_optimization.", key));
    if (!v.ok()) return v.status();
    if (*v) buckets.push_back({key, absl::StrCat(**v)});
  }
  if (contiguous->has_value()) {
    buckets.push_back({"contiguous_gradients", **contiguous ? "true" : "false"});
  }
  if (!buckets.empty()) {
    w.Raw("  deepspeed:\n");
    for (const auto& [k, v] : buckets) w.Line(4, k, v, absl::StrCat("zero_optimization.", k));
  }
  // Everything else: passed over when it cannot change a step, else listed.
  static const auto* unpriced = new std::set<std::string>{"optimizer",
                                                          "scheduler",
                                                          "gradient_clipping",
                                                          "steps_per_print",
                                                          "wall_clock_breakdown",
                                                          "tensorboard",
                                                          "wandb",
                                                          "csv_monitor",
                                                          "flops_profiler",
                                                          "comms_logger",
                                                          "prescale_gradients",
                                                          "zero_allow_untested_optimizer",
                                                          "dump_state",
                                                          "gradient_predivide_factor"};
  static const auto* unpriced_zero =
      new std::set<std::string>{"allgather_partitions",
                                "reduce_scatter",
                                "stage3_gather_16bit_weights_on_model_save",
                                "stage3_param_persistence_threshold",
                                "round_robin_gradients",
                                "offload_optimizer",
                                "offload_param",
                                "memory_efficient_linear",
                                "load_from_fp32_weights",
                                "elastic_checkpoint"};
  static const auto* unpriced_precision = new std::set<std::string>{
      "loss_scale",     "loss_scale_window", "initial_scale_power",  "hysteresis",
      "min_loss_scale", "auto_cast",         "immediate_grad_update"};
  JobImport out;
  for (const auto& [key, value] : j.items()) {
    if (used.contains(key) || unpriced->contains(key)) continue;
    if (value.is_object() && (key == "zero_optimization" || key == "bf16" || key == "fp16")) {
      for (const auto& [sub, v] : value.items()) {
        const std::string path = absl::StrCat(key, ".", sub);
        if (used.contains(path) || unpriced_zero->contains(sub) ||
            unpriced_precision->contains(sub)) {
          continue;
        }
        out.unmapped.push_back(path);
      }
      continue;
    }
    out.unmapped.push_back(key);
  }
  w.Unmapped(out.unmapped);
  out.yaml = std::move(w.text());
  return out;
}

}  // namespace sim::config
