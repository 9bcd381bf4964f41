#pragma once
// Reading an input file whole, within bounds: every file stepsim reads (scenarios, models,
// catalogs, fabrics, case files, shard reports) goes through here, so that no input can make it
// read without end or throw from the filesystem.
//
// Refused, each as "PATH: reason" (InvalidArgument, or NotFound for a missing file): a path the
// system cannot resolve (a symlink loop, a name too long), a directory, anything that is not a
// regular file (/dev/zero, a FIFO), and a file larger than kMaxInputBytes. The largest real
// input (a validation case file) is under 1 MiB; the cap is far above that.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace sim {

inline constexpr int64_t kMaxInputBytes = int64_t{64} << 20;  // 64 MiB

absl::StatusOr<std::string> ReadInputFile(const std::string& path);

// Whether `path` names a regular file / anything at all; false, never an exception, for a path
// the system cannot resolve (a symlink loop, a name too long).
bool IsRegularFile(const std::string& path);
bool PathExists(const std::string& path);

}  // namespace sim
