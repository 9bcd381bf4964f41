// stepsim import model CONFIG.json: a Hugging Face config as a stepsim model file
// (sim/config/hf_import.h).

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/base/input_file.h"
#include "sim/base/suggest.h"
#include "sim/config/catalog.h"
#include "sim/config/hf_import.h"
#include "sim/report/table.h"
#include "sim/workload/params.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"
#include "tools/stepsim/output_files.h"

namespace stepsim_cli {

int ImportCommand(const std::vector<std::string>& args) {
  FlagSet flags(
      "stepsim import model CONFIG.json [--name N] [--out FILE] [--ignore FIELD]...",
      "Writes a stepsim model file from a Hugging Face config.json (model_type llama,\n"
      "mistral, qwen2, qwen3, gemma, mixtral, qwen2_moe, qwen3_moe, deepseek_v2,\n"
      "deepseek_v3), each key's origin in its `source`. A field that may change the cost and\n"
      "that stepsim does not price (a sliding window, an unknown field) is an error naming it;\n"
      "--ignore FIELD imports without it, and the source says so. Prints the parameter count.",
      {{"name", "N", "the model's name (default: the config file's stem)"},
       {"out", "FILE", "write the model file there (default: standard output)"},
       {"ignore", "FIELD", "import without this field, priced as if absent", true}});
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("import", st);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  const std::vector<std::string>& pos = flags.positional();
  if (pos.size() != 2 || pos[0] != "model") {
    const std::string what = pos.empty() ? "" : pos[0];
    return Fail(
        "import",
        absl::InvalidArgumentError(absl::StrCat(
            "expected `import model CONFIG.json`",
            what.empty() || what == "model" ? "" : absl::StrCat(": unknown kind '", what, "'"),
            what.empty() ? "" : sim::DidYouMean(what, {"model"}))));
  }
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
