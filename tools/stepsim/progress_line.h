#pragma once
// A progress line on stderr for long sweeps, compares and plans, once the work has taken more
// than a second. On a terminal the line is redrawn in place (at most ten times a second) and
// ended with a newline when the work is done; into a file or pipe (a log, CI) a whole line is
// written at most every ten seconds, so the log stays readable.

#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include "absl/functional/function_ref.h"

namespace stepsim_cli {

class ProgressLine {
 public:
  // `text(done, total)`: what the line says ("sweep: 12/144 configurations").
  // Without `text`, only the Update that takes its text draws.
  explicit ProgressLine(std::function<std::string(size_t done, size_t total)> text = nullptr);
  ~ProgressLine();  // ends a drawn line
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void Update(size_t done, size_t total);
  // The same for a line whose text is made when it is drawn, from the seconds since the line
  // was made (`text` is not called when the line is not drawn); `finished` ends it.
  void Update(absl::FunctionRef<std::string(double elapsed_s)> text, bool finished = false);

 private:
  using Clock = std::chrono::steady_clock;
  std::function<std::string(size_t, size_t)> text_;
  const Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
  const bool terminal_;
  bool drawn_ = false;  // a terminal line is open (needs its newline)
  std::mutex mu_;
};

}  // namespace stepsim_cli
