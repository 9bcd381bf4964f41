// stepsim validate [CASES.yaml...]: predictions against published measurements.

#include <filesystem>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/config/catalog.h"
#include "sim/explore/runner.h"
#include "sim/validate/calibrate.h"
#include "sim/validate/validate.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"

namespace stepsim_cli {

int ValidateCommand(const std::vector<std::string>& args) {
  FlagSet flags(
      "stepsim validate [CASES.yaml...] [--json PATH]",
      "Replays validation cases (SPEC §6; default: every file in scenarios/validation/) and\n"
      "prints, per case and metric, the measured value, stepsim's prediction in the source's\n"
      "FLOP and memory conventions, and the signed error; then the mean absolute percentage\n"
      "error per metric and per source, and the skipped cases with their reasons. Case files\n"
      "may live anywhere: check stepsim against your own cluster's measurements.",
      {{"json", "PATH",
        "write {cases, mape, mape_by_source, skipped[, cross_validated_mape]} (- = standard "
        "output)"},
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
  std::vector<std::string> files = flags.positional();
  if (files.empty()) {
    files = sim::config::YamlFilesIn(root.path + "/scenarios/validation", /*stems=*/false);
    if (files.empty()) {
      return Fail("validate", absl::NotFoundError("no case files in scenarios/validation/"));
    }
  }
  int jobs = sim::explore::DefaultJobs();
  if (auto j = flags.Get("jobs"); j && (!absl::SimpleAtoi(*j, &jobs) || jobs < 1)) {
    return Fail("validate", absl::InvalidArgumentError("--jobs expects a positive integer"));
  }
  std::vector<sim::ValidationCase> cases;
  for (const std::string& f : files) {
    auto c = sim::config::LoadCases(root, f);
    if (!c.ok()) return Fail("validate", c.status());
    cases.insert(cases.end(), c->begin(), c->end());
  }
  const auto results = sim::validate::RunCases(cases, jobs);
  std::optional<sim::validate::CrossValidation> cv;
  if (flags.Has("cross-validate")) cv = sim::validate::CrossValidate(cases, results, jobs);
  if (auto p = flags.Get("json")) {
    nlohmann::ordered_json j = sim::validate::ValidationJson(results);
    if (cv) sim::validate::AddCrossValidation(*cv, j);
    if (absl::Status st = WriteOutput(*p, j.dump(2) + "\n"); !st.ok()) return Fail("validate", st);
    if (*p == "-") return kExitOk;
  }
  std::cout << sim::validate::ValidationText(results);
  if (cv) std::cout << sim::validate::CrossValidationText(*cv, results);
  return kExitOk;
}

}  // namespace stepsim_cli
