// stepsim sweep / compare / merge: many replays of one scenario.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sim/base/input_file.h"
#include "sim/config/catalog.h"
#include "sim/explore/grid.h"
#include "sim/explore/plan.h"
#include "sim/explore/plan_report.h"
#include "sim/explore/runner.h"
#include "sim/explore/sweep.h"
#include "sim/explore/sweep_run.h"
#include "sim/report/json_text.h"
#include "sim/report/rows_html.h"
#include "sim/report/run_report.h"
#include "sim/report/sweep_report.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"
#include "tools/stepsim/progress_line.h"

namespace stepsim_cli {

namespace config = sim::config;
namespace explore = sim::explore;
namespace report = sim::report;
using sim::Framework;

namespace {

// What a sweep holds constant of the batch, above its table: a sequence-length sweep with the
// batch in sequences changes the tokens per step with the length, and says so.
std::string BatchHeld(const config::ScenarioLoader& loader,
                      const std::vector<config::Override>& sets,
                      const std::vector<std::string>& keys) {
  auto base = loader.Load(sets);
  if (!base.ok()) return "";
  const bool batch_varied = std::any_of(keys.begin(), keys.end(), [](const std::string& k) {
    return k == "training.global_batch" || k == "training.global_batch_tokens";
  });
  if (batch_varied) return "";
  const bool seq_varied = std::find(keys.begin(), keys.end(), "training.seq_len") != keys.end();
  if (base->training.global_batch_tokens > 0) {
    return absl::StrFormat(
        "held constant: %d tokens per step (training.global_batch_tokens; the sequences per "
        "step follow the sequence length)\n\n",
        base->training.global_batch_tokens);
  }
  return absl::StrFormat("held constant: the global batch, %d sequences%s\n\n",
                         base->training.global_batch,
                         seq_varied ? " (tokens per step grow with training.seq_len; set "
                                      "training.global_batch_tokens to hold tokens instead)"
                                    : "");
}

// "stepsim sweep of default.yaml: training.seq_len x training.recompute on llama2-70b, 32 x
// H100-SXM5-80GB": what was swept, on which model and cluster (the scenario with the --set
// overrides, before any vary).
std::string PlotTitle(const config::ScenarioLoader& loader,
                      const std::vector<config::Override>& sets,
                      const std::vector<std::string>& keys) {
  std::string title =
      absl::StrCat("stepsim sweep of ", std::filesystem::path(loader.path()).filename().string(),
                   ": ", absl::StrJoin(keys, " x "));
  if (auto base = loader.Load(sets); base.ok()) {
    absl::StrAppend(&title, " on ", base->model.name, ", ", base->cluster.gpus(), " x ",
                    base->cluster.gpu.name);
  }
  return title;
}

absl::StatusOr<int> Jobs(const FlagSet& f) {
  auto v = f.Get("jobs");
  if (!v) return explore::DefaultJobs();
  int n = 0;
  if (!absl::SimpleAtoi(*v, &n) || n < 1 || n > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("--jobs expects 1..1024, got '", *v, "'"));
  }
  return n;
}

absl::StatusOr<std::vector<config::Override>> Sets(const FlagSet& f) {
  std::vector<config::Override> out;
  for (const std::string& kv : f.GetAll("set")) {
    auto o = config::ParseOverride(kv);
    if (!o.ok()) return o.status();
    out.push_back(*o);
  }
  return out;
}

absl::StatusOr<config::ScenarioLoader> Open(const FlagSet& flags, const std::string& path) {
  auto root = DataRootFor(flags);
  if (!root.ok()) return root.status();
  return config::ScenarioLoader::Open(*root, ResolveScenarioPath(path));
}

// Runs a gnuplot job in a fresh private folder (mkdtemp: a name no one can plant beforehand),
// its data files beside its script, and returns the picture it drew there (job.output). gnuplot is
// started without a shell, in that folder, with only the script's name as its argument.
absl::StatusOr<std::string> RunGnuplot(const report::GnuplotJob& job) {
  std::error_code ec;
  std::string dir_name =
      (std::filesystem::temp_directory_path(ec) / "stepsim-plot-XXXXXX").string();
  if (ec || ::mkdtemp(dir_name.data()) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("--plot: cannot create a temporary folder: ", std::strerror(errno)));
  }
  const std::filesystem::path dir(dir_name);
  struct RemoveAll {
    std::filesystem::path dir;
    ~RemoveAll() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } cleanup{dir};
  for (const auto& [name, contents] : job.data) std::ofstream(dir / name) << contents;
  std::ofstream(dir / "plot.gp") << job.script;
  int out[2];
  if (::pipe(out) != 0) return absl::InternalError("--plot: cannot create a pipe");
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError("--plot: cannot start gnuplot");
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    if (::chdir(dir.c_str()) == 0) {
      char* const argv[] = {const_cast<char*>("gnuplot"), const_cast<char*>("plot.gp"), nullptr};
      ::execvp("gnuplot", argv);
    }
    ::_exit(127);
  }
  ::close(out[1]);
  std::string output;
  char buf[512];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof(buf))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (output.size() < 4096) output.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int wait_status = 0;
  while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 127) {
      return absl::FailedPreconditionError("--plot: cannot run gnuplot (install gnuplot-nox)");
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "--plot: gnuplot failed (install Debian's gnuplot-nox; tools/install-deps.sh does): ",
        output.substr(0, 300)));
  }
  std::ifstream picture(dir / job.output, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(picture)), std::istreambuf_iterator<char>());
  if (!picture || text.empty()) return absl::InternalError("--plot: gnuplot drew nothing");
  return text;
}

report::TableFormat FormatOf(const FlagSet& f) {
  return f.Has("markdown") ? report::TableFormat::kMarkdown : report::TableFormat::kText;
}

std::vector<report::Row> Rows(const std::vector<explore::ConfigResult>& results,
                              size_t labels_from) {
  std::vector<report::Row> rows;
  for (const auto& r : results) {
    report::Row row;
    for (size_t i = labels_from; i < r.overrides.size(); ++i)
      row.labels.push_back(r.overrides[i].value);
    if (r.status.ok()) {
      row.summary = r.summary;
    } else {
      row.error = std::string(r.status.message());
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

int SweepCommand(const std::vector<std::string>& args) {
  FlagSet flags(
      "stepsim sweep SCENARIO --vary KEY=V1,V2,... [--vary ...] [flags]",
      "Replays the cartesian product of the --vary values (first key outermost) in parallel and\n"
      "prints one row per configuration: fits, peak, activations at the peak, step time, MFU.\n"
      "Values: lists (2048,4096), geometric ranges (2..64:x2), arithmetic ranges (1..8:+1).",
      {{"vary", "KEY=VALUES", "a dotted scenario key and its values", true},
       {"set", "KEY=VALUE", "override a scenario key for every configuration", true},
       {"jobs", "N", "worker threads (default: all cores); output is identical for any N"},
       CalibrationFlag(),
       {"csv", "PATH", "write the table as CSV"},
       {"json", "PATH", "write {results: [{vary, report}]} (- = standard output)"},
       {"markdown", "", "print the table as Markdown"},
       {"html", "PATH",
        "write one self-contained page: peak (with the capacity) and step against the first "
        "varied key (what does not fit drawn hollow), and the table"},
       {"plot", "FILE.svg|png",
        "plot metrics against the first varied key (gnuplot; the extension picks SVG or PNG)"},
       {"metrics", "LIST", "plotted metrics: peak,step (default), activations, mfu, exposed_comm"},
       {"shard", "K/N",
        "run only the K-th of N slices of the product (merge with stepsim merge)"}});
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("sweep", st);
  if (auto p = flags.Get("plot")) {  // the format, before any work
    if (auto format = report::PlotFormatOf(*p); !format.ok()) return Fail("sweep", format.status());
  }
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  if (flags.positional().size() != 1) {
    return Fail("sweep", absl::InvalidArgumentError("expected exactly one SCENARIO file"));
  }
  std::vector<explore::Vary> varies;
  for (const std::string& v : flags.GetAll("vary")) {
    auto parsed = explore::ParseVary(v);
    if (!parsed.ok()) return Fail("sweep", parsed.status());
    varies.push_back(*parsed);
  }
  auto sets = Sets(flags);
  auto jobs = Jobs(flags);
  auto loader = Open(flags, flags.positional()[0]);
  for (const absl::Status& s : {sets.status(), jobs.status(), loader.status()}) {
    if (!s.ok()) return Fail("sweep", s);
  }
  explore::SweepRequest request{*sets, varies, std::nullopt, *jobs};
  if (auto shard = flags.Get("shard")) {
    auto s = explore::ParseShard(*shard);
    if (!s.ok()) return Fail("sweep", s.status());
    request.shard = *s;
  }
  ProgressLine line([](size_t done, size_t total) {
    return absl::StrFormat("sweep: %d/%d configurations", done, total);
  });
  auto outcome = explore::RunSweep(*loader, request,
                                   [&](size_t done, size_t total) { line.Update(done, total); });
  if (!outcome.ok()) return Fail("sweep", outcome.status());
  const std::vector<std::string>& keys = outcome->keys;
  const std::vector<explore::ConfigResult>& results = outcome->results;
  const auto rows = Rows(results, sets->size());
  OutputFiles files;
  if (auto p = flags.Get("json")) {
    const std::string text = explore::SweepJsonText(loader->path(), *outcome) + "\n";
    if (absl::Status st = files.Stage(*p, text); !st.ok()) return Fail("sweep", st);
  }
  if (auto p = flags.Get("csv")) {
    if (absl::Status st =
            files.Stage(*p, report::SweepTable(keys, rows, report::TableFormat::kCsv));
        !st.ok()) {
      return Fail("sweep", st);
    }
  }
  if (auto p = flags.Get("plot")) {
    std::vector<std::string> metrics = {"peak", "step"};
    if (auto m = flags.Get("metrics")) metrics = absl::StrSplit(*m, ',');
    const std::string title = PlotTitle(*loader, *sets, keys);
    auto job = report::PlotSweep(*report::PlotFormatOf(*p), title, keys, rows, metrics);
    if (!job.ok()) return Fail("sweep", job.status());
    auto svg = RunGnuplot(*job);
    if (!svg.ok()) return Fail("sweep", svg.status());
    if (absl::Status st = files.Stage(*p, *std::move(svg)); !st.ok()) return Fail("sweep", st);
  }
  const std::string held = BatchHeld(*loader, *sets, keys);
  if (auto p = flags.Get("html")) {
    const std::string title =
        absl::StrCat("stepsim sweep of ", std::filesystem::path(loader->path()).filename().string(),
                     " over ", absl::StrJoin(keys, ", "));
    const std::string page =
        report::RowsHtml(title, std::string(absl::StripAsciiWhitespace(held)), keys, rows);
    if (absl::Status st = files.Stage(*p, page); !st.ok()) return Fail("sweep", st);
  }
  if (absl::Status st = files.Commit(); !st.ok()) return Fail("sweep", st);
  if (!files.writes_stdout()) std::cout << held << report::SweepTable(keys, rows, FormatOf(flags));
  return kExitOk;
}

int CompareCommand(const std::vector<std::string>& args) {
  FlagSet flags(
      "stepsim compare SCENARIO [--set KEY=VALUE]... [flags]",
      "Replays the scenario under ZeRO 0, 1, 2 and 3 (deepspeed), under the FSDP sharding\n"
      "strategies (fsdp), or without and with the distributed optimizer (megatron) and prints,\n"
      "side by side, peak memory, fits, bytes sent per GPU per\n"
      "step by collective kind and their ratio to the first row, total and exposed\n"
      "communication time, step time and MFU. With --finetune, one row per fine-tuning\n"
      "method instead (full, lora, qlora; offload = full fine-tuning at ZeRO-3 with the\n"
      "optimizer on the host): fits (GPU and host), the peak and what it is made of, host\n"
      "memory per node, step time and tokens/s per GPU. With --ep (MoE models), one row per\n"
      "expert-parallel degree on the scenario's layout.",
      {{"set", "KEY=VALUE", "override a scenario key", true},
       {"finetune", "METHODS", "compare fine-tuning methods: full,lora,qlora,offload"},
       {"ep", "DEGREES", "compare expert-parallel degrees: e.g. 1,2,4,8, or all"},
       {"jobs", "N", "worker threads (default: all cores)"},
       CalibrationFlag(),
       {"json", "PATH", "write {stages: [{zero, mode, report}]} (- = standard output)"},
       {"csv", "PATH", "write the table as CSV"},
       {"markdown", "", "print the table as Markdown"},
       {"html", "PATH",
        "write one self-contained page: peak (with the capacity) and step per row (what does "
        "not fit drawn hollow), bytes sent per collective kind as a multiple of DDP's, and the "
        "table"}});
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("compare", st);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  if (flags.positional().size() != 1) {
    return Fail("compare", absl::InvalidArgumentError("expected exactly one SCENARIO file"));
  }
  auto sets = Sets(flags);
  auto jobs = Jobs(flags);
  auto loader = Open(flags, flags.positional()[0]);
  for (const absl::Status& s : {sets.status(), jobs.status(), loader.status()}) {
    if (!s.ok()) return Fail("compare", s);
  }
  explore::CompareRequest request{*sets, {}, {}, *jobs};
  const std::optional<std::string> finetune = flags.Get("finetune");
  if (finetune) {
    request.finetune = absl::StrSplit(*finetune, ',', absl::SkipEmpty());
    if (request.finetune.empty()) {
      return Fail("compare", absl::InvalidArgumentError("--finetune: give at least one method"));
    }
  }
  if (const std::optional<std::string> ep = flags.Get("ep")) {
    if (finetune) {
      return Fail("compare", absl::InvalidArgumentError("--ep and --finetune: choose one"));
    }
    request.ep = absl::StrSplit(*ep, ',', absl::SkipEmpty());
    if (request.ep.empty()) {
      return Fail("compare", absl::InvalidArgumentError("--ep: give at least one degree"));
    }
  }
  ProgressLine line([](size_t done, size_t total) {
    return absl::StrFormat("compare: %d/%d configurations", done, total);
  });
  auto outcome = explore::RunCompare(*loader, request,
                                     [&](size_t done, size_t total) { line.Update(done, total); });
  if (!outcome.ok()) return Fail("compare", outcome.status());
  const sim::Scenario* base = &outcome->base;
  const std::vector<explore::CompareStage>& stages = outcome->stages;
  const std::vector<explore::ConfigResult>& results = outcome->results;
  std::vector<report::Row> rows;
  for (size_t i = 0; i < stages.size(); ++i) {
    report::Row row;
    row.labels =
        finetune ? std::vector<std::string>{stages[i].mode, absl::StrCat("ZeRO-", stages[i].zero)}
                 : std::vector<std::string>{absl::StrCat("ZeRO-", stages[i].zero), stages[i].mode};
    if (results[i].status.ok()) {
      row.summary = results[i].summary;
    } else {
      row.error = std::string(results[i].status.message());
    }
    rows.push_back(row);
  }
  const nlohmann::ordered_json j = explore::CompareJson(loader->path(), stages, results);
  OutputFiles files;
  if (auto p = flags.Get("json")) {
    if (absl::Status st = files.Stage(*p, report::JsonText(j) + "\n"); !st.ok())
      return Fail("compare", st);
  }
  const std::vector<std::string> labels = finetune ? std::vector<std::string>{"method", "stage"}
                                                   : std::vector<std::string>{"stage", "mode"};
  auto table = [&](report::TableFormat format) {
    return finetune ? report::FinetuneTable(labels, rows, format)
                    : report::CompareTable(labels, rows, format);
  };
  if (auto p = flags.Get("csv")) {
    if (absl::Status st = files.Stage(*p, table(report::TableFormat::kCsv)); !st.ok()) {
      return Fail("compare", st);
    }
  }
  if (auto p = flags.Get("html")) {
    const std::string title =
        absl::StrFormat("stepsim compare: %s, %s on %d GPUs, %d micro-batch%s per step", base->name,
                        base->model.name, base->cluster.gpus(), base->micro_batches(),
                        base->micro_batches() == 1 ? "" : "es");
    if (absl::Status st = files.Stage(*p, finetune ? report::RowsHtml(title, "", labels, rows)
                                                   : report::CompareHtml(title, labels, rows));
        !st.ok()) {
      return Fail("compare", st);
    }
  }
  if (absl::Status st = files.Commit(); !st.ok()) return Fail("compare", st);
  if (!files.writes_stdout()) {
    std::cout << absl::StrFormat("%s: %s, %d GPUs, %d micro-batch%s per step\n\n", base->name,
                                 base->model.name, base->cluster.gpus(), base->micro_batches(),
                                 base->micro_batches() == 1 ? "" : "es")
              << table(FormatOf(flags));
  }
  return kExitOk;
}

int MergeCommand(const std::vector<std::string>& args) {
  FlagSet flags(
      "stepsim merge SHARD.json... [--json PATH]",
      "Joins the JSON reports of `stepsim sweep --shard K/N` (or `stepsim plan --shard\n"
      "K/N`) runs into one report, checking that the shards cover the work exactly once;\n"
      "a merged plan recomputes its Pareto set from every shard's fitting configurations.",
      {{"json", "PATH", "where to write the merged report (default: standard output)"}});
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("merge", st);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  if (flags.positional().empty()) {
    return Fail("merge", absl::InvalidArgumentError("give the shard JSON files to merge"));
  }
  std::vector<nlohmann::ordered_json> shards;
  for (const std::string& path : flags.positional()) {
    auto text = sim::ReadInputFile(path);
    if (!text.ok()) return Fail("merge", text.status());
    auto shard = explore::ParseShardJson(*text, path);
    if (!shard.ok()) return Fail("merge", shard.status());
    shards.push_back(*std::move(shard));
    const auto& j = shards.back();
    if (!j.contains("shard") || !(j.contains("results") || j.contains("pareto"))) {
      return Fail("merge", absl::InvalidArgumentError(absl::StrCat(
                               path, ": not a `stepsim sweep` or `stepsim plan` --json report")));
    }
  }
  if (shards.front().contains("pareto")) {
    std::vector<explore::PlanResult> plans;
    for (size_t i = 0; i < shards.size(); ++i) {
      auto plan = explore::PlanFromJson(shards[i], flags.positional()[i]);
      if (!plan.ok()) return Fail("merge", plan.status());
      plans.push_back(*std::move(plan));
    }
    auto merged = explore::MergePlans(std::move(plans));
    if (!merged.ok()) return Fail("merge", merged.status());
    if (absl::Status st = WriteOutput(flags.Get("json").value_or("-"),
                                      report::JsonText(explore::PlanJson(*merged)) + "\n");
        !st.ok()) {
      return Fail("merge", st);
    }
    return kExitOk;
  }
  auto merged = explore::MergeSweeps(std::move(shards), flags.positional());
  if (!merged.ok()) return Fail("merge", merged.status());
  if (absl::Status st = WriteOutput(flags.Get("json").value_or("-"), merged->dump(2) + "\n");
      !st.ok()) {
    return Fail("merge", st);
  }
  return kExitOk;
}

}  // namespace stepsim_cli
