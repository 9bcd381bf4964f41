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

absl::Status WriteOutput(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
    return std::cout ? absl::OkStatus() : absl::InternalError("cannot write standard output");
  }
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    // A device or a pipe: written in place (renaming over it would replace it).
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": cannot open for writing: ", std::strerror(errno)));
    }
    const size_t n = std::fwrite(text.data(), 1, text.size(), f);
    const int write_errno = n == text.size() && std::fflush(f) == 0 ? 0 : errno;
    const int close_failed = std::fclose(f);
    if (write_errno != 0 || close_failed != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": write failed: ", std::strerror(write_errno ? write_errno : errno)));
    }
    return absl::OkStatus();
  }
  const std::string tmp = absl::StrCat(path, ".tmp-stepsim");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": cannot open for writing: ", std::strerror(errno)));
    }
    out << text;
    if (!out.flush()) {
      const int e = errno;
      out.close();
      std::filesystem::remove(tmp, ec);
      return absl::InvalidArgumentError(absl::StrCat(path, ": write failed: ", std::strerror(e)));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", ec.message()));
  }
  return absl::OkStatus();
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
