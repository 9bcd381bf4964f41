#include "tools/stepsim/cli.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "sim/base/input_file.h"
#include "sim/config/catalog.h"

namespace stepsim_cli {

int Fail(const std::string& command, const absl::Status& status) {
  std::cerr << "stepsim " << command << ": " << status.message() << "\n";
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      return kExitBadInput;
    default:
      return kExitInternal;
  }
}

std::string ResolveScenarioPath(const std::string& path) {
  const auto root = sim::config::DataRoot::Default();
  if (!sim::PathExists(path) && std::filesystem::path(path).is_relative() &&
      sim::PathExists(root.path + "/" + path)) {
    return root.path + "/" + path;
  }
  return path;
}

absl::Status WriteOutput(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
    return std::cout ? absl::OkStatus() : absl::InternalError("cannot write standard output");
  }
  const std::string tmp = absl::StrCat(path, ".tmp-stepsim");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open for writing"));
    out << text;
    if (!out.flush()) {
      std::filesystem::remove(tmp);
      return absl::InternalError(absl::StrCat(path, ": write failed"));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace stepsim_cli
