#include "sim/base/input_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace sim {

absl::StatusOr<std::string> ReadInputFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    const std::string why = ec ? ec.message() : "no such file";
    if (!ec || ec == std::errc::no_such_file_or_directory) {
      return absl::NotFoundError(absl::StrCat(path, ": cannot open file: ", why));
    }
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open file: ", why));
  }
  if (fs::is_directory(st)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a file"));
  }
  if (!fs::is_regular_file(st)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file (a device, a pipe or a socket)"));
  }
  const auto size = fs::file_size(path, ec);
  if (ec)
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open file: ", ec.message()));
  if (size > static_cast<uintmax_t>(kMaxInputBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", size, " bytes, more than the ",
                                                   kMaxInputBytes >> 20,
                                                   " MiB an input file may have"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open file"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool PathExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec) && !ec;
}

bool IsRegularFile(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

}  // namespace sim
