#include "tools/stepsim/output_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stepsim_cli {

namespace {

absl::Status SystemError(const std::string& path, const char* what, int error) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what, ": ", std::strerror(error)));
}

// Writes all of `text` to `fd`, retrying short writes and EINTR; returns 0 or the errno.
int WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

// Whether `path` names something that is not a regular file and must be written in place
// (a device such as /dev/stdout, a FIFO). A symlink to such is followed here on purpose: a
// user who names /dev/stdout means it.
bool WrittenInPlace(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

absl::Status WriteInPlace(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return SystemError(path, "cannot open for writing", errno);
  const int error = WriteAll(fd, text);
  const int closed = ::close(fd) == 0 ? 0 : errno;
  if (error != 0 || closed != 0) return SystemError(path, "write failed", error ? error : closed);
  return absl::OkStatus();
}

}  // namespace

OutputFiles::~OutputFiles() {
  for (const Staged& s : staged_) {
    if (!s.temporary.empty()) ::unlink(s.temporary.c_str());
  }
}

absl::Status OutputFiles::Stage(const std::string& path, std::string text) {
  if (path == "-" || WrittenInPlace(path)) {
    writes_stdout_ = writes_stdout_ || path == "-";
    staged_.push_back({path, "", std::move(text), true});
    return absl::OkStatus();
  }
  const std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  std::string name = absl::StrCat(dir.string(), "/.", target.filename().string(), ".XXXXXX");
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) return SystemError(path, "cannot create a temporary file beside it", errno);
  staged_.push_back({path, name, "", false});
  // mkstemp creates the file 0600; an output gets the mode a new file would (0666 less umask).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  int error = ::fchmod(fd, 0666 & ~mask) == 0 ? 0 : errno;
  if (error == 0) error = WriteAll(fd, text);
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) return SystemError(path, "write failed", error);
  return absl::OkStatus();
}

absl::Status OutputFiles::Commit() {
  for (Staged& s : staged_) {
    if (s.temporary.empty()) continue;
    if (::rename(s.temporary.c_str(), s.path.c_str()) != 0) {
      return SystemError(s.path, "cannot replace", errno);
    }
    s.temporary.clear();
  }
  for (const Staged& s : staged_) {
    if (!s.in_place) continue;
    if (s.path == "-") {
      std::cout << s.text;
      if (absl::Status st = FlushStandardOutput(); !st.ok()) return st;
    } else if (absl::Status st = WriteInPlace(s.path, s.text); !st.ok()) {
      return st;
    }
  }
  staged_.clear();
  return absl::OkStatus();
}

absl::Status WriteOutput(const std::string& path, const std::string& text) {
  OutputFiles out;
  if (absl::Status st = out.Stage(path, text); !st.ok()) return st;
  return out.Commit();
}

absl::Status FlushStandardOutput() {
  std::cout.flush();
  if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const int error = errno;
    std::cout.clear();
    return absl::FailedPreconditionError(
        absl::StrCat("standard output: write failed: ", std::strerror(error ? error : EIO)));
  }
  return absl::OkStatus();
}

}  // namespace stepsim_cli
