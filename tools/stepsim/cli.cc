#include "tools/stepsim/cli.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "sim/base/bad_input.h"
#include "sim/base/input_file.h"
#include "sim/config/catalog.h"

namespace stepsim_cli {

int Fail(const std::string& command, const absl::Status& status) {
  std::cerr << "stepsim " << command << ": " << status.message() << "\n";
  return sim::IsBadInput(status) ? kExitBadInput : kExitInternal;
}

FlagDef CalibrationFlag() {
  return {"calibration", "FILE",
          "use this calibration (stepsim calibrate --out) for its GPU instead of the catalog's",
          true};
}

absl::StatusOr<sim::config::DataRoot> DataRootFor(const FlagSet& flags) {
  return sim::config::DataRoot::WithCalibrations(flags.GetAll("calibration"));
}

std::string ResolveScenarioPath(const std::string& path) {
  return sim::config::DataRoot::Default().ResolveScenarioPath(path);
}

absl::Status CheckOutputPath(const std::string& path) {
  if (path == "-") return absl::OkStatus();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a file"));
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot write: folder ", dir.string(), " does not exist"));
  }
  if (::access(dir.c_str(), W_OK) != 0 &&
      !(std::filesystem::exists(path, ec) && ::access(path.c_str(), W_OK) == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace stepsim_cli
