// stepsim memory-diff SNAPSHOT.pickle SCENARIO: a real run's PyTorch memory snapshot beside the
// scenario's replay (sim/report/memory_snapshot.h).

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/input_file.h"
#include "sim/base/pickle_reader.h"
#include "sim/config/catalog.h"
#include "sim/replay/replay.h"
#include "sim/report/memory_snapshot.h"
#include "sim/report/run_summary.h"
#include "sim/report/table.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"

namespace stepsim_cli {

namespace {

std::string Gib(sim::Bytes b) { return absl::StrFormat("%.2f", b.gib()); }

std::string Diff(sim::Bytes snapshot, sim::Bytes replay) {
  if (snapshot == sim::Bytes()) return "-";
  return absl::StrFormat("%+.1f %%", 100.0 * (replay.gib() - snapshot.gib()) / snapshot.gib());
}

}  // namespace

int MemoryDiffCommand(const std::vector<std::string>& args) {
  FlagSet flags(
      "stepsim memory-diff SNAPSHOT.pickle SCENARIO [--set KEY=VALUE]...",
      "Reads a PyTorch memory snapshot (torch.cuda.memory._snapshot(), pickled; no PyTorch\n"
      "needed: only data is read, nothing in it runs) and prints it beside the scenario's\n"
      "replay: the allocated and reserved peaks, and what was live at the allocated peak by\n"
      "stepsim's categories (the snapshot's blocks attributed by when they were allocated and\n"
      "by their frames). The runtime reserve (CUDA context, NCCL) is outside a real snapshot and\n"
      "left out of the replay's column too.",
      {{"set", "KEY=VALUE", "override a scenario key", true}});
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("memory-diff", st);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  if (flags.positional().size() != 2) {
    return Fail("memory-diff", absl::InvalidArgumentError("expected SNAPSHOT.pickle and SCENARIO"));
  }
  const std::string& path = flags.positional()[0];
  auto data = sim::ReadInputFile(path);
  if (!data.ok()) return Fail("memory-diff", data.status());
  auto pickle = sim::ReadPickle(*data, path);
  if (!pickle.ok()) return Fail("memory-diff", pickle.status());
  auto snap = sim::report::SummarizeSnapshot(**pickle, path);
  if (!snap.ok()) return Fail("memory-diff", snap.status());

  std::vector<sim::config::Override> overrides;
  for (const std::string& kv : flags.GetAll("set")) {
    auto o = sim::config::ParseOverride(kv);
    if (!o.ok()) return Fail("memory-diff", o.status());
    overrides.push_back(*o);
  }
  auto root = DataRootFor(flags);
  if (!root.ok()) return Fail("memory-diff", root.status());
  auto scenario =
      sim::config::LoadScenario(*root, ResolveScenarioPath(flags.positional()[1]), overrides);
  if (!scenario.ok()) return Fail("memory-diff", scenario.status());
  auto result = sim::replay::Simulate(*scenario, {});
  if (!result.ok()) return Fail("memory-diff", result.status());
  const sim::report::RunSummary run = sim::report::Summarize(*scenario, *result);
  const sim::Bytes runtime = run.runtime_reserved;

  sim::report::Table t({"", "snapshot GiB", "replay GiB", "replay vs snapshot"});
  const sim::Bytes allocated = run.peak - runtime;
  const sim::Bytes reserved = run.reserved_peak - runtime;
  t.AddRow({"allocated peak", Gib(snap->allocated_peak), Gib(allocated),
            Diff(snap->allocated_peak, allocated)});
  t.AddRow({"reserved peak", Gib(snap->reserved_peak), Gib(reserved),
            Diff(snap->reserved_peak, reserved)});
  const sim::Bytes persistent = run.PeakOf(sim::MemCategory::kWeights) +
                                run.PeakOf(sim::MemCategory::kGradients) +
                                run.PeakOf(sim::MemCategory::kOptimizer);
  t.AddRow({"persistent at the peak", Gib(snap->persistent_at_peak), Gib(persistent),
            Diff(snap->persistent_at_peak, persistent)});
  for (int c = 0; c < sim::kNumMemCategories; ++c) {
    if (static_cast<sim::MemCategory>(c) == sim::MemCategory::kReserved) continue;
    const sim::Bytes s = snap->at_peak[c], r = run.peak_breakdown[c];
    if (s == sim::Bytes() && r == sim::Bytes()) continue;
    t.AddRow({absl::StrCat("  ", sim::kMemCategoryNames[c]), Gib(s), Gib(r), Diff(s, r)});
  }
  std::cout << absl::StrFormat(
      "%s (%d trace events; allocated peak at %.3f s) against %s, replayed (peak GPU %d):\n", path,
      snap->events, static_cast<double>(snap->peak_at_us) / 1e6, run.Title(), run.peak_gpu);
  std::cout << t.Render();
  std::cout << "The snapshot's blocks at its peak: allocated before its first release count as "
               "persistent (weights, or gradients / optimizer when their frames say so); the "
               "others by their frames (collectives, logits, else activations).\n";
  return kExitOk;
}

}  // namespace stepsim_cli
