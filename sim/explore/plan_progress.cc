#include "sim/explore/plan_progress.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sim::explore {

double PlanProgress::Fraction() const {
  if (gpu_types <= 0 || gpu_index <= 0) return 0.0;
  const double current =
      replay_layouts > 0 ? static_cast<double>(replay_decided) / static_cast<double>(replay_layouts)
                         : 0.0;
  const double done = (static_cast<double>(gpu_index - 1) + std::clamp(current, 0.0, 1.0)) /
                      static_cast<double>(gpu_types);
  return std::clamp(done, 0.0, 1.0);
}

namespace {

// Seconds as a person reads a wait: "40 s", "12 min", "3.5 h".
std::string Wait(double s) {
  if (s < 90) return absl::StrFormat("%.0f s", std::max(1.0, std::round(s)));
  if (s < 90 * 60) return absl::StrFormat("%.0f min", std::round(s / 60));
  return absl::StrFormat("%.1f h", s / 3600);
}

}  // namespace

std::string PlanProgressText(const PlanProgress& p, double elapsed_s) {
  std::string text = absl::StrCat("plan: ", p.gpu, " (", p.gpu_index, "/", p.gpu_types, "): ");
  if (p.to_load > 0) {
    absl::StrAppend(&text, "loading the layouts on ", p.loading_gpus, " GPUs, ", p.loading, " of ",
                    p.to_load, "; ");
  }
  absl::StrAppend(&text, p.layouts, " layouts (", p.kept, " kept, ", p.rejected, " rejected), ",
                  p.replayed, " replays, ");
  // A twentieth of the search: before it, the first type's static pruning and its first replays
  // say little of the rest.
  constexpr double kKnown = 0.05;
  const double f = p.Fraction();
  if (f < kKnown || elapsed_s <= 0) {
    absl::StrAppend(&text, "time left not known yet");
  } else {
    absl::StrAppend(&text, "about ", Wait(elapsed_s * (1 - f) / f), " left");
  }
  return text;
}

}  // namespace sim::explore
