#include "tools/stepsim/progress_line.h"

#include <unistd.h>

#include <iostream>

#include "absl/strings/str_format.h"

namespace stepsim_cli {

ProgressLine::ProgressLine(std::function<std::string(size_t, size_t)> text)
    : text_(std::move(text)), terminal_(isatty(STDERR_FILENO) == 1) {}

ProgressLine::~ProgressLine() {
  if (drawn_) std::cerr << "\n" << std::flush;
}

void ProgressLine::Update(size_t done, size_t total) {
  Update([&](double) { return text_(done, total); }, total > 0 && done == total);
}

void ProgressLine::Update(absl::FunctionRef<std::string(double)> text, bool finished) {
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  const double s = std::chrono::duration<double>(now - start_).count();
  if (s < 1.0) return;
  const auto every = terminal_ ? std::chrono::milliseconds(100) : std::chrono::seconds(10);
  if (!finished && last_ != Clock::time_point{} && now - last_ < every) return;
  last_ = now;
  const std::string line = absl::StrFormat("%s, %.1f s", text(s), s);
  if (terminal_) {
    std::cerr << "\r" << line << (finished ? "\n" : "") << std::flush;
    drawn_ = !finished;
  } else {
    std::cerr << line << "\n" << std::flush;
  }
}

}  // namespace stepsim_cli
