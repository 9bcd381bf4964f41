// stepsim validate [CASES.yaml...]: predictions against published measurements.

#include <filesystem>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/config/catalog.h"
#include "sim/explore/runner.h"
#include "sim/report/json_text.h"
#include "sim/validate/calibrate.h"
#include "sim/validate/validate_files.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"

namespace stepsim_cli {

int ValidateCommand(const std::vector<std::string>& args) {
  FlagSet flags(
      "stepsim validate [CASES.yaml...] [--json PATH]",
      "Replays validation cases (docs/model.md, 'Validation data'; default: every file in\n"
      "scenarios/validation/) and prints, per case and metric, the measured value, stepsim's\n"
      "prediction in the source's FLOP and memory conventions, and the signed error; then the\n"
      "mean absolute percentage error per metric and per source, the skipped cases with their\n"
      "reasons, and the measured runs the replay does not fit (a memory error). Case files may\n"
      "live anywhere: check stepsim against your own cluster's measurements.",
      {{"json", "PATH",
        "write {cases, skipped, not_fitting, mape, mape_by_source[, cross_validated_mape]} (- = "
        "standard output)"},
       {"jobs", "N", "worker threads (default: all cores)"},
       {"cross-validate", "",
        "also predict each case with a calibration fitted without its source (leave one source "
        "out; one model at a time for a GPU fitted to one source)"},
       CalibrationFlag()});
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("validate", st);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  const auto data = DataRootFor(flags);
  if (!data.ok()) return Fail("validate", data.status());
  const sim::config::DataRoot& root = *data;
  int jobs = sim::explore::DefaultJobs();
  if (auto j = flags.Get("jobs"); j && (!absl::SimpleAtoi(*j, &jobs) || jobs < 1)) {
    return Fail("validate", absl::InvalidArgumentError("--jobs expects a positive integer"));
  }
  auto run =
      sim::validate::ValidateFiles(root, flags.positional(), jobs, flags.Has("cross-validate"));
  if (!run.ok()) return Fail("validate", run.status());
  if (auto p = flags.Get("json")) {
    const std::string text = sim::report::JsonText(sim::validate::ValidationRunJson(*run)) + "\n";
    if (absl::Status st = WriteOutput(*p, text); !st.ok()) return Fail("validate", st);
    if (*p == "-") return kExitOk;
  }
  std::cout << sim::validate::ValidationText(run->results);
  if (run->crossed) std::cout << sim::validate::CrossValidationText(*run->crossed, run->results);
  return kExitOk;
}

}  // namespace stepsim_cli
