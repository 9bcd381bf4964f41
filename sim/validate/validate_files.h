#pragma once
// Validation case files replayed as `stepsim validate` and the Python bindings' `validate()` do
// it: the files named (or every file of scenarios/validation/), all their cases, and the
// leave-one-source-out predictions when asked.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/config/catalog.h"
#include "sim/validate/calibrate.h"
#include "sim/validate/validate.h"

namespace sim::validate {

struct ValidationRun {
  std::vector<ValidationCase> cases;
  std::vector<CaseResult> results;         // one per case, in file order
  std::optional<CrossValidation> crossed;  // with cross_validate
};

// `files` empty: every .yaml file of the data root's scenarios/validation/ (NotFound when there
// is none). A file that does not load is its located error.
absl::StatusOr<ValidationRun> ValidateFiles(const config::DataRoot& root,
                                            std::vector<std::string> files, int jobs,
                                            bool cross_validate);

// ValidationJson of the results, with the cross-validation's keys when it ran.
nlohmann::ordered_json ValidationRunJson(const ValidationRun& run);

}  // namespace sim::validate
