// stepsim import model CONFIG.json: a Hugging Face config as a stepsim model file
// (sim/config/hf_import.h); stepsim import job ARGS|DS_CONFIG.json|JOB.toml: a Megatron-LM
// job's arguments, a DeepSpeed config or a torchtitan job config as a scenario
// (sim/config/job_import.h).

#include <iostream>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/base/input_file.h"
#include "sim/base/suggest.h"
#include "sim/config/catalog.h"
#include "sim/config/hf_import.h"
#include "sim/config/job_import.h"
#include "sim/report/table.h"
#include "sim/workload/params.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"
#include "tools/stepsim/output_files.h"

namespace stepsim_cli {

namespace {

// stepsim import job ARGS --node NODE [--gpus N] [--model M] [--name N] [--out FILE].
int ImportJob(const FlagSet& flags) {
  const std::string& file = flags.positional()[1];
  const auto node = flags.Get("node");
  if (!node) {
    return Fail("import", absl::InvalidArgumentError(
                              "import job: the arguments do not name the hardware: pass --node "
                              "NODE (stepsim list nodes)"));
  }
  auto catalogs = sim::config::LoadCatalogs(sim::config::DataRoot::Default());
  if (!catalogs.ok()) return Fail("import", catalogs.status());
  sim::config::JobContext context;
  std::vector<std::string> names;
  for (const sim::NodeSpec& n : catalogs->nodes) {
    names.push_back(n.name);
    if (n.name == *node) {
      context.node = n.name;
      context.gpus_per_node = n.gpus_per_node;
    }
  }
  if (context.node.empty()) {
    return Fail("import", absl::InvalidArgumentError(absl::StrCat(
                              "--node: unknown node type '", *node, "'",
                              sim::DidYouMean(*node, names), " (stepsim list nodes)")));
  }
  if (auto g = flags.Get("gpus")) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(*g, &v) || v < 1 || v > (int64_t{1} << 20)) {
      return Fail("import", absl::InvalidArgumentError(absl::StrCat(
                                "--gpus: expected a whole number of GPUs, got '", *g, "'")));
    }
    context.gpus = v;
  }
  context.model = flags.Get("model");
  context.name = flags.Get("name").value_or("");
  auto text = sim::ReadInputFile(file);
  if (!text.ok()) return Fail("import", text.status());
  // A JSON object is a DeepSpeed config, a .toml file torchtitan's, a .yaml file a NeMo recipe;
  // anything else, Megatron-LM arguments.
  const size_t first = text->find_first_not_of(" \t\r\n");
  const bool json = first != std::string::npos && (*text)[first] == '{';
  const bool toml = absl::EndsWithIgnoreCase(file, ".toml");
  const bool nemo =
      absl::EndsWithIgnoreCase(file, ".yaml") || absl::EndsWithIgnoreCase(file, ".yml");
  // --vocab and --seq-len: whole numbers from 1 to 2^24.
  std::optional<int64_t> vocab, seq_len;
  for (const auto& [flag, out, what] : {std::tuple{"vocab", &vocab, "a vocabulary size"},
                                        std::tuple{"seq-len", &seq_len, "tokens per sequence"}}) {
    if (auto v = flags.Get(flag)) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(*v, &n) || n < 1 || n > (int64_t{1} << 24)) {
        return Fail("import", absl::InvalidArgumentError(absl::StrCat("--", flag, ": expected ",
                                                                      what, ", got '", *v, "'")));
      }
      *out = n;
    }
  }
  auto imported =
      nemo   ? sim::config::ImportNemoRecipe(*text, file, context, flags.GetAll("override"), vocab)
      : toml ? sim::config::ImportTorchtitanToml(*text, file, context)
      : json ? sim::config::ImportDeepSpeedConfig(*text, file, context, seq_len)
             : sim::config::ImportMegatronArgs(*text, file, context);
  if (!imported.ok()) return Fail("import", imported.status());
  // The scenario must load as written: a flag combination stepsim refuses is said now.
  auto loader =
      sim::config::ScenarioLoader::FromText(sim::config::DataRoot::Default(), imported->yaml, file);
  if (!loader.ok()) return Fail("import", loader.status());
  if (auto s = loader->Load({}); !s.ok()) return Fail("import", s.status());
  const std::string out = flags.Get("out").value_or("-");
  OutputFiles files;
  if (absl::Status st = files.Stage(out, imported->yaml); !st.ok()) return Fail("import", st);
  if (absl::Status st = files.Commit(); !st.ok()) return Fail("import", st);
  if (out != "-") {
    std::cout << out << ": written; "
              << (imported->unmapped.empty()
                      ? std::string("every flag that prices a step mapped")
                      : absl::StrCat("not mapped: ", absl::StrJoin(imported->unmapped, ", ")))
              << "\n";
  }
  return kExitOk;
}

}  // namespace

int ImportCommand(const std::vector<std::string>& args) {
  FlagSet flags(
      "stepsim import model CONFIG.json [--name N] [--out FILE] [--ignore FIELD]...\n"
      "       stepsim import job ARGS|DS_CONFIG.json|JOB.toml|RECIPE.yaml --node NODE [--gpus N] "
      "[--model M] [--seq-len N] [--vocab N] [--override KEY=VALUE]... [--name N] [--out FILE]",
      "import job: writes a scenario from a Megatron-LM job's arguments (a pretrain_gpt.py\n"
      "command line or launch script's arguments with their values; torchrun's --nnodes and\n"
      "--nproc-per-node give the world size, else --gpus), each key with the flag it came\n"
      "from; the flags it does not map are listed in the file and printed. A DeepSpeed\n"
      "config (a JSON object) needs --model and --gpus (its launcher's world size). A\n"
      "torchtitan job config (a .toml file) names its model by [model] name and flavor;\n"
      "--gpus gives the world size when data_parallel_shard_degree is -1. A NeMo recipe\n"
      "(a .yaml file) takes the launcher's Hydra overrides (--override KEY=VALUE) and the\n"
      "vocabulary size (--vocab N) unless --model names the architecture.\n"
      "import model: writes a stepsim model file from a Hugging Face config.json (model_type "
      "llama,\n"
      "mistral, qwen2, qwen3, gemma, mixtral, qwen2_moe, qwen3_moe, deepseek_v2,\n"
      "deepseek_v3), each key's origin in its `source`. A field that may change the cost and\n"
      "that stepsim does not price (a sliding window, an unknown field) is an error naming it;\n"
      "--ignore FIELD imports without it, and the source says so. Prints the parameter count.",
      {{"name", "N", "the model's name (default: the config file's stem)"},
       {"out", "FILE", "write the model file there (default: standard output)"},
       {"ignore", "FIELD", "import without this field, priced as if absent", true},
       {"node", "NODE", "import job: the node type the job runs on (stepsim list nodes)"},
       {"gpus", "N", "import job: the world size, when no torchrun prefix gives it"},
       {"model", "M", "import job: a catalog model or hf:config.json for the architecture"},
       {"seq-len", "N", "import job: tokens per sequence (a DeepSpeed config does not say)"},
       {"override", "KEY=VALUE", "import job: a Hydra override of a NeMo recipe (+KEY adds one)",
        true},
       {"vocab", "N",
        "import job: the vocabulary size (a NeMo recipe keeps it in its tokenizer)"}});
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("import", st);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  const std::vector<std::string>& pos = flags.positional();
  if (pos.size() != 2 || (pos[0] != "model" && pos[0] != "job")) {
    const std::string what = pos.empty() ? "" : pos[0];
    return Fail("import", absl::InvalidArgumentError(absl::StrCat(
                              "expected `import model CONFIG.json` or `import job ARGS`",
                              what.empty() || what == "model" || what == "job"
                                  ? ""
                                  : absl::StrCat(": unknown kind '", what, "'"),
                              what.empty() ? "" : sim::DidYouMean(what, {"model", "job"}))));
  }
  if (pos[0] == "job") return ImportJob(flags);
  auto text = sim::ReadInputFile(pos[1]);
  if (!text.ok()) return Fail("import", text.status());
  auto imported = sim::config::ImportHfConfig(*text, pos[1], flags.Get("name").value_or(""),
                                              flags.GetAll("ignore"));
  if (!imported.ok()) return Fail("import", imported.status());
  const std::string out = flags.Get("out").value_or("-");
  OutputFiles files;
  if (absl::Status st = files.Stage(out, imported->yaml); !st.ok()) return Fail("import", st);
  if (absl::Status st = files.Commit(); !st.ok()) return Fail("import", st);
  if (out != "-") {
    auto model = sim::config::LoadModelFile(out);
    if (!model.ok()) return Fail("import", model.status());
    const sim::ParameterCount p = sim::CountParameters(*model);
    std::cout << absl::StrFormat(
        "%s: %s parameters (%s active)%s\n", out,
        sim::report::FormatCount(static_cast<double>(p.total)),
        sim::report::FormatCount(static_cast<double>(p.active)),
        imported->ignored.empty()
            ? ""
            : absl::StrCat("; ignored: ", absl::StrJoin(imported->ignored, ", ")));
  }
  return kExitOk;
}

}  // namespace stepsim_cli
