#pragma once
// Running the stepsim command from a test as a user would: a shell command in the source folder
// (STEPSIM_SOURCE_DIR), its exit status and its stdout and stderr together.

#include <sys/wait.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"

namespace {

struct Result {
  int status = -1;
  std::string out;  // stdout and stderr together
};

// A shell command run in the source folder, stdout and stderr together.
Result Shell(const std::string& command) {
  const std::string cmd = absl::StrCat("cd " STEPSIM_SOURCE_DIR " && ", command, " 2>&1");
  Result r;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) r.out.append(buf.data(), n);
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

Result Stepsim(const std::string& args) { return Shell(absl::StrCat(STEPSIM_BINARY " ", args)); }

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace
