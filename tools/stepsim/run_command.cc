// stepsim run SCENARIO [--set K=V]...: load, validate and (next) replay one training step.

#include <filesystem>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "sim/config/catalog.h"
#include "sim/config/scenario_keys.h"
#include "sim/replay/replay.h"
#include "sim/replay/variability.h"
#include "sim/report/html_report.h"
#include "sim/report/json_text.h"
#include "sim/report/memory_snapshot.h"
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

// "A..B" or "A" (A <= B), each within [0, count): a --trace-steps or --trace-stages value.
absl::StatusOr<sim::report::TraceRange> ParseTraceRange(const std::string& flag,
                                                        const std::string& text, int64_t count,
                                                        const std::string& what) {
  const std::vector<std::string> parts = absl::StrSplit(text, absl::MaxSplits("..", 1));
  sim::report::TraceRange range;
  if (!absl::SimpleAtoi(parts[0], &range.first) ||
      (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &range.last))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": expected an index or a range A..B of ", what, ", got '", text, "'"));
  }
  if (parts.size() == 1) range.last = range.first;
  if (range.last < range.first) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " ", text, ": the first index must not exceed the last"));
  }
  if (range.first < 0 || range.last >= count) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", text, ": the step has ", count,
                                                   " ", what, " (0..", count - 1, ")"));
  }
  return range;
}

FlagSet RunFlags() {
  return FlagSet(
      "stepsim run SCENARIO [--set KEY=VALUE]... [--json PATH] [--trace PATH [--trace-steps A..B] "
      "[--trace-stages A..B]] [--timeline PATH] [--html PATH] [--trials N]",
      "Loads a scenario (docs/reference.md, 'Scenario files'), applies the overrides in order,\n"
      "validates it and replays one optimizer step layer by layer: prints whether it fits, the\n"
      "per-GPU peak (when, in which op, and what is live then), the step time split (with the\n"
      "pipeline bubble and a table per stage when pp > 1), MFU/HFU, tokens/s and the bytes each\n"
      "GPU sends per collective kind.",
      {{"set", "KEY=VALUE", "override any scenario key by its dotted path, e.g. parallel.zero=2",
        true},
       {"json", "PATH",
        "write the JSON report (docs/model.md, 'The report') to PATH (- = standard output)"},
       {"trace", "PATH",
        "write a Chrome/Perfetto trace: per simulated GPU (one per pipeline stage) "
        "compute, communication and send tracks and a memory counter (open in "
        "ui.perfetto.dev; warns above 256 MB, more than the viewers open)"},
       {"trace-steps", "A..B",
        "with --trace: keep micro-batches A to B of the step (0-based; one index = one "
        "micro-batch), the optimizer and step-wide reductions when B is the last; `all` keeps "
        "every one (default: all of a short step; of a long one, the first until the schedule "
        "repeats and the last, with a note)"},
       {"trace-stages", "A..B", "with --trace: keep pipeline stages A to B (0-based)"},
       {"timeline", "PATH",
        "write the memory timeline as CSV: time_s, gpu, event, category, "
        "delta_bytes, allocated_bytes"},
       {"memory-snapshot", "PATH",
        "write the peak GPU's allocations over the step as a PyTorch memory snapshot "
        "(torch.cuda.memory._snapshot()'s pickle; opens in pytorch.org/memory_viz)"},
       {"html", "PATH",
        "write one self-contained page: verdict, memory over the step by category with the "
        "peak, one micro-batch on the streams, time split, collectives (open in a browser)"},
       {"trials", "N",
        "replay the step N times with each GPU's speed drawn from cluster.variability: P50, "
        "P90, P99 and mean step, the slowdown over the ideal cluster and what paced it "
        "(1..100000)"},
       {"explicit-ranks", "",
        "simulate every data-parallel replica (of every stage) instead of one "
        "standing for all"},
       {"no-fold", "",
        "replay every micro-batch instead of folding the repeating ones (the report is the "
        "same, byte for byte)"},
       {"dump-ops", "", "print the lowered op program (one line per op) instead of replaying"},
       {"resolved", "", "print the resolved scenario instead of replaying"},
       {"list-keys", "", "print every scenario key with its type, default and meaning"},
       {"markdown", "", "with --list-keys: as the Markdown table of docs/reference.md"},
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
    // Every op of every micro-batch, one line each (no folding): bounded, as the text and the
    // lowered program grow with the step (a line per op, some 30 ops per layer).
    constexpr int64_t kMaxDumpGroups = 20'000;
    const int64_t groups = scenario->micro_batches() * (scenario->model.layers + 2);
    if (groups > kMaxDumpGroups) {
      return Fail("run", absl::InvalidArgumentError(absl::StrCat(
                             "--dump-ops prints every op of every micro-batch: at most ",
                             kMaxDumpGroups, " micro-batch x layer groups, and this step has ",
                             groups, " (", scenario->micro_batches(),
                             " micro-batches); lower training.global_batch to see its ops")));
    }
    auto program = sim::Lower(*scenario);
    if (!program.ok()) return Fail("run", program.status());
    std::cout << sim::report::DumpOps(*program);
    return kExitOk;
  }
  sim::report::TraceOptions trace;
  for (const char* flag : {"trace-steps", "trace-stages"}) {
    if (flags.Has(flag) && !flags.Has("trace")) {
      return Fail("run", absl::InvalidArgumentError(absl::StrCat(
                             "--", flag, " chooses what --trace PATH writes: add it")));
    }
  }
  if (auto v = flags.Get("trace-steps"); v && *v != "all") {
    auto range = ParseTraceRange("trace-steps", *v, scenario->micro_batches(), "micro-batches");
    if (!range.ok()) return Fail("run", range.status());
    trace.micro_batches = {*range};
  } else if (!v && flags.Has("trace")) {
    trace.micro_batches = sim::report::DefaultTraceMicroBatches(*scenario);
  }
  if (auto v = flags.Get("trace-stages")) {
    auto range = ParseTraceRange("trace-stages", *v, scenario->parallel.pp, "pipeline stages");
    if (!range.ok()) return Fail("run", range.status());
    trace.stages = *range;
  }
  std::optional<int64_t> trials;
  if (auto v = flags.Get("trials")) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(*v, &n) || n < 1 || n > 100000) {
      return Fail("run", absl::InvalidArgumentError(absl::StrCat(
                             "--trials: expected a whole number of trials from 1 to 100000, got '",
                             *v, "'")));
    }
    trials = n;
  }
  sim::replay::ReplayOptions options;
  options.explicit_ranks = flags.Has("explicit-ranks");
  options.fold = !flags.Has("no-fold");
  options.record_ops = flags.Has("trace") || flags.Has("html");
  options.record_memory = flags.Has("trace") || flags.Has("timeline") || flags.Has("html") ||
                          flags.Has("memory-snapshot");
  auto result = sim::replay::Simulate(*scenario, options);
  if (!result.ok()) return Fail("run", result.status());
  sim::report::RunSummary summary = sim::report::Summarize(*scenario, *result);
  if (trials) {
    auto d = sim::replay::SimulateTrials(*scenario, *result, *trials);
    if (!d.ok()) return Fail("run", d.status());
    sim::report::AddDistribution(*scenario, *std::move(d), summary);
  }
  // Render everything before writing anything, so a failure leaves no partial output.
  std::vector<std::pair<std::string, std::string>> outputs;
  if (auto p = flags.Get("json")) {
    outputs.push_back({*p, sim::report::JsonText(sim::report::RunJson(summary)) + "\n"});
  }
  if (auto p = flags.Get("trace")) {
    outputs.push_back({*p, sim::report::TraceJson(*scenario, *result, trace)});
    if (!flags.Has("trace-steps") && !trace.micro_batches.empty()) {
      std::cerr << "stepsim run: note: the trace keeps micro-batches "
                << sim::report::TraceRangesText(trace.micro_batches, scenario->micro_batches())
                << " (the first until the schedule repeats, the last with the optimizer); the "
                   "micro-batches between run the same ops: --trace-steps all keeps every one\n";
    }
    const sim::Bytes size = sim::Bytes::Count(static_cast<int64_t>(outputs.back().second.size()));
    if (auto w = sim::report::TraceSizeWarning(*p, size))
      std::cerr << "stepsim run: " << *w << "\n";
  }
  if (auto p = flags.Get("timeline")) outputs.push_back({*p, sim::report::TimelineCsv(*result)});
  if (auto p = flags.Get("memory-snapshot")) {
    outputs.push_back({*p, sim::report::MemorySnapshotPickle(*result, result->peak_rank)});
  }
  if (auto p = flags.Get("html")) {
    outputs.push_back({*p, sim::report::RunHtml(*scenario, *result, summary)});
  }
  OutputFiles files;
  for (auto& [file, text] : outputs) {
    if (absl::Status st = files.Stage(file, std::move(text)); !st.ok()) return Fail("run", st);
  }
  if (absl::Status st = files.Commit(); !st.ok()) return Fail("run", st);
  if (!files.writes_stdout()) std::cout << sim::report::RunText(summary);
  return kExitOk;
}

}  // namespace stepsim_cli
