// stepsim run SCENARIO [--set K=V]...: load, validate and (next) replay one training step.

#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/config/catalog.h"
#include "sim/config/scenario_keys.h"
#include "sim/replay/replay.h"
#include "sim/report/html_report.h"
#include "sim/report/resolved.h"
#include "sim/report/run_report.h"
#include "sim/report/table.h"
#include "sim/workload/lowering.h"
#include "sim/workload/params.h"
#include "sim/workload/policy/policy.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"

namespace stepsim_cli {

namespace {

FlagSet RunFlags() {
  return FlagSet(
      "stepsim run SCENARIO [--set KEY=VALUE]... [--json PATH] [--trace PATH] [--timeline PATH] "
      "[--html PATH]",
      "Loads a scenario (SPEC §4), applies the overrides in order, validates it and replays one\n"
      "optimizer step layer by layer: prints whether it fits, the per-GPU peak (when, in which\n"
      "op, and what is live then), the step time split (with the pipeline bubble and a table per\n"
      "stage when pp > 1), MFU/HFU, tokens/s and the bytes each GPU sends per collective kind.",
      {{"set", "KEY=VALUE", "override any scenario key by its dotted path, e.g. parallel.zero=2",
        true},
       {"json", "PATH", "write the JSON report (SPEC §5 keys) to PATH (- = standard output)"},
       {"trace", "PATH",
        "write a Chrome/Perfetto trace: per simulated GPU (one per pipeline stage) "
        "compute, communication and send tracks and a memory counter (open in "
        "ui.perfetto.dev)"},
       {"timeline", "PATH",
        "write the memory timeline as CSV: time_s, gpu, event, category, "
        "delta_bytes, allocated_bytes"},
       {"html", "PATH",
        "write one self-contained page: verdict, memory over the step by category with the "
        "peak, one micro-batch on the streams, time split, collectives (open in a browser)"},
       {"explicit-ranks", "",
        "simulate every data-parallel replica (of every stage) instead of one "
        "standing for all"},
       {"no-fold", "",
        "replay every micro-batch instead of folding the repeating ones (the report is the "
        "same, byte for byte)"},
       {"dump-ops", "", "print the lowered op program (one line per op) instead of replaying"},
       {"resolved", "", "print the resolved scenario instead of replaying"},
       {"list-keys", "", "print every scenario key with its type, default and meaning"},
       {"markdown", "", "with --list-keys: as the Markdown table of the README"},
       CalibrationFlag()});
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  FlagSet flags = RunFlags();
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("run", st);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  if (flags.Has("list-keys")) {
    if (flags.Has("markdown")) {
      std::cout << sim::config::ScenarioKeysMarkdown();
      return kExitOk;
    }
    // One key a line: key, type, default, meaning (left-aligned; meanings may be long).
    for (const sim::config::ScenarioKey& k : sim::config::ScenarioKeys()) {
      std::cout << absl::StrFormat("%-30s %-36s default %-22s %s\n", k.path, k.type, k.default_text,
                                   k.meaning);
    }
    return kExitOk;
  }
  if (flags.positional().size() != 1) {
    return Fail("run", absl::InvalidArgumentError("expected exactly one SCENARIO file"));
  }
  std::vector<sim::config::Override> overrides;
  for (const std::string& kv : flags.GetAll("set")) {
    auto o = sim::config::ParseOverride(kv);
    if (!o.ok()) return Fail("run", o.status());
    overrides.push_back(*o);
  }
  auto root = DataRootFor(flags);
  if (!root.ok()) return Fail("run", root.status());
  auto scenario =
      sim::config::LoadScenario(*root, ResolveScenarioPath(flags.positional()[0]), overrides);
  if (!scenario.ok()) return Fail("run", scenario.status());
  if (flags.Has("resolved")) {
    std::cout << sim::report::ResolvedScenarioText(*scenario);
    return kExitOk;
  }
  if (flags.Has("dump-ops")) {
    auto program = sim::Lower(*scenario);
    if (!program.ok()) return Fail("run", program.status());
    std::cout << sim::report::DumpOps(*program);
    return kExitOk;
  }
  sim::replay::ReplayOptions options;
  options.explicit_ranks = flags.Has("explicit-ranks");
  options.fold = !flags.Has("no-fold");
  options.record_ops = flags.Has("trace") || flags.Has("html");
  options.record_memory = flags.Has("trace") || flags.Has("timeline") || flags.Has("html");
  auto result = sim::replay::Simulate(*scenario, options);
  if (!result.ok()) return Fail("run", result.status());
  const sim::report::RunSummary summary = sim::report::Summarize(*scenario, *result);
  // Render everything before writing anything, so a failure leaves no partial output.
  std::vector<std::pair<std::string, std::string>> outputs;
  if (auto p = flags.Get("json")) {
    outputs.push_back({*p, sim::report::RunJson(summary).dump(2) + "\n"});
  }
  if (auto p = flags.Get("trace"))
    outputs.push_back({*p, sim::report::TraceJson(*scenario, *result)});
  if (auto p = flags.Get("timeline")) outputs.push_back({*p, sim::report::TimelineCsv(*result)});
  if (auto p = flags.Get("html")) {
    outputs.push_back({*p, sim::report::RunHtml(*scenario, *result, summary)});
  }
  bool stdout_used = false;
  for (const auto& [file, text] : outputs) {
    if (absl::Status st = WriteOutput(file, text); !st.ok()) return Fail("run", st);
    stdout_used = stdout_used || file == "-";
  }
  if (!stdout_used) std::cout << sim::report::RunText(summary);
  return kExitOk;
}

}  // namespace stepsim_cli
