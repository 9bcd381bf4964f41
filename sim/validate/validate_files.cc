#include "sim/validate/validate_files.h"

namespace sim::validate {

absl::StatusOr<ValidationRun> ValidateFiles(const config::DataRoot& root,
                                            std::vector<std::string> files, int jobs,
                                            bool cross_validate) {
  if (files.empty()) {
    files = config::YamlFilesIn(root.path + "/scenarios/validation", /*stems=*/false);
    if (files.empty()) return absl::NotFoundError("no case files in scenarios/validation/");
  }
  ValidationRun run;
  for (const std::string& f : files) {
    auto c = config::LoadCases(root, f);
    if (!c.ok()) return c.status();
    run.cases.insert(run.cases.end(), c->begin(), c->end());
  }
  run.results = RunCases(run.cases, jobs);
  if (cross_validate) run.crossed = CrossValidate(run.cases, run.results, jobs);
  return run;
}

nlohmann::ordered_json ValidationRunJson(const ValidationRun& run) {
  nlohmann::ordered_json j = ValidationJson(run.results);
  if (run.crossed) AddCrossValidation(*run.crossed, j);
  return j;
}

}  // namespace sim::validate
