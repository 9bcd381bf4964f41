// The outputs of a folded step (sim/replay/step_records.h): --trace, --timeline, --html and
// --memory-snapshot written from a folded replay's records, expanded, are the full replay's,
// byte for byte, whichever way the step folds; and the folded replay holds only its short
// replay's records.
#include "sim/replay/step_records.h"

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "sim/replay/fold.h"
#include "sim/report/html_report.h"
#include "sim/report/memory_snapshot.h"
#include "sim/report/run_report.h"
#include "sim/report/run_summary.h"
#include "tests/test_scenarios.h"

namespace sim {
namespace {

replay::ReplayResult Recorded(const Scenario& s, bool fold) {
  replay::ReplayOptions o;
  o.fold = fold;
  o.record_ops = o.record_memory = true;
  auto r = replay::Simulate(s, o);
  REQUIRE(r.ok());
  return *std::move(r);
}

// The outputs `stepsim run` writes from the records that read part of the step (the page, the
// trace of the first and last micro-batches), as it writes them; with `every`, those that read
// every record too (the whole trace, the timeline, the memory snapshot).
std::string Outputs(const Scenario& s, const replay::ReplayResult& r, bool every = true) {
  report::TraceOptions kept;
  kept.micro_batches = report::DefaultTraceMicroBatches(s);
  std::string out = report::TraceJson(s, r, kept) + report::RunHtml(s, r, report::Summarize(s, r));
  if (every) {
    out += report::TraceJson(s, r) + report::TimelineCsv(r) +
           report::MemorySnapshotPickle(r, r.peak_rank);
  }
  return out;
}

// `s` at `windows` periods past the fold's first pair (K + d micro-batches, PlanFold).
Scenario Longer(Scenario s, int64_t windows) {
  const int64_t per_micro_batch = s.training.micro_batch * s.dp();
  Scenario probe = s;
  probe.training.global_batch = 4096 * s.parallel.pp * per_micro_batch;
  const auto plan = replay::PlanFold(probe);
  REQUIRE(plan.has_value());
  s.training.global_batch = (plan->k + plan->d * (1 + windows)) * per_micro_batch;
  return s;
}

// How many steps Check compared, and of those how many expanded their records (and with
// allocators replayed alone).
struct Compared {
  int checked = 0, expanded = 0, alone = 0;

  void Check(const Scenario& s, bool every = true) {
    INFO(s.micro_batches() << " micro-batches");
    const replay::ReplayResult folded = Recorded(s, true);
    const replay::ReplayResult full = Recorded(s, false);
    CHECK_FALSE(full.folded_records.has_value());
    CHECK(Outputs(s, folded, every) == Outputs(s, full, every));
    if (folded.folded_records) {
      ++expanded;
      alone += folded.folded_records->reserved.empty() ? 0 : 1;
      const replay::StepRecords records(folded);
      CHECK(records.timings() == static_cast<int64_t>(full.timings.size()));
      CHECK(records.windows() > 1);
      // The short replay's records, not the step's.
      CHECK(folded.timings.size() < full.timings.size());
    }
    ++checked;
  }
};

TEST_CASE("a folded step's outputs are the full replay's on three shipped scenarios",
          "[step_records]") {
  // GPT-3 175B at one window past its first pair (32 micro-batches). The outputs that read part
  // of the step only: those that read every record are compared on the smaller layouts below
  // (sanitized, a 175B step's whole trace, timeline and snapshot took a minute).
  Compared c;
  const std::pair<const char*, int64_t> files[] = {{"scenarios/default.yaml", 3},
                                                   {"scenarios/gpt3-175b-korthikanti.yaml", 1},
                                                   {"scenarios/llama2-70b-finetune.yaml", 3}};
  for (const auto& [file, windows] : files) {
    INFO(file);
    c.Check(Longer(Load(std::string(STEPSIM_SOURCE_DIR "/") + file), windows), /*every=*/false);
  }
  // Each folds on its states: the records expand (GPT-3 175B's interleaved pipeline at its
  // first pair too).
  CHECK(c.expanded == c.checked);
}

TEST_CASE("a folded step's outputs are the full replay's across the golden layouts",
          "[step_records]") {
  // Every layout but GPipe (which never folds) expands. The interleaved ones (2 stages × 2
  // chunks) fold on their states only after the window slides a period, which needs a longer
  // step; their pair of 4 and 6 micro-batches is then replayed again from the start, recording.
  // At 8 micro-batches, too short for three short replays, they go on from their first pair's
  // longer replay instead, its records before the state gone on from put first.
  Compared c;
  int short_interleaved = 0;
  for (const GoldenCase& g : GoldenCases()) {
    INFO(g.line);
    if (g.scenario.parallel.pp_schedule == PipelineSchedule::kGpipe) continue;
    if (g.scenario.parallel.pp_schedule == PipelineSchedule::kInterleaved) {
      c.Check(Longer(g.scenario, 12));
      const Compared expanded = c;
      c.Check(Longer(g.scenario, 2));
      short_interleaved += c.expanded == expanded.expanded ? 1 : 0;
      continue;
    }
    c.Check(Longer(g.scenario, 2));
  }
  CHECK(c.checked >= 14);
  CHECK(short_interleaved >= 4);
  CHECK(c.expanded == c.checked - short_interleaved);
}

TEST_CASE("a folded step's outputs are the full replay's under ZeRO 0-3, allocators settling",
          "[step_records]") {
  Compared c;
  for (const char* zero : {"0", "1", "2", "3"}) {
    for (const char* recompute : {"none", "full"}) {
      INFO("ZeRO-" << zero << ", recompute " << recompute);
      c.Check(
          Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml", {{"model", "llama2-7b"},
                                                              {"cluster.nodes", "1"},
                                                              {"training.seq_len", "1024"},
                                                              {"training.global_batch", "64"},
                                                              {"parallel.zero", zero},
                                                              {"training.recompute", recompute}}));
    }
  }
  // Each folds on its first pair's states: under ZeRO-3 with allocators that alone did not
  // repeat, which expand with their reserved bytes as the fold replayed them alone. A step that
  // folds on three replays instead (allocators past capacity that drift, as some of the sweep
  // grid's do) is replayed in full.
  CHECK(c.expanded == c.checked);
  CHECK(c.alone == 2);
}

TEST_CASE(
    "a long folded step's outputs, several window copies to a page column, are the full "
    "replay's",
    "[step_records]") {
  // At 4,096 micro-batches a window copy is far shorter than one of the page's 480 columns:
  // the page samples copies whole (html_report.cc, WindowSums) and the trace skips those
  // before each range it keeps. Small layouts, so that the full replay is quick.
  for (const GoldenCase& g : GoldenCases()) {
    const bool wanted =
        g.line.rfind("zero3 ", 0) == 0 || g.line.rfind("megatron-pp-layers ", 0) == 0;
    if (!wanted) continue;
    INFO(g.line);
    const Scenario s = Longer(g.scenario, 4096);
    const replay::ReplayResult folded = Recorded(s, true);
    CHECK(folded.folded_records.has_value());
    // The outputs that read part of the step (the others read every record, as above).
    CHECK(Outputs(s, folded, false) == Outputs(s, Recorded(s, false), false));
  }
}

TEST_CASE("the records of a 4,096-micro-batch step are its short replay's, expanded",
          "[step_records]") {
  // The default scenario at 4,096 micro-batches: the full replay records about 3.4 M op
  // timings; the folded one, those of 2 micro-batches, whose window the step runs 4,095 times
  // (K = 1, d = 1: the first pair holds 1 and 2 micro-batches).
  const Scenario s =
      Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml", {{"training.global_batch", "131072"}});
  REQUIRE(s.micro_batches() == 4096);
  const replay::ReplayResult r = Recorded(s, true);
  REQUIRE(r.folded_records.has_value());
  const replay::FoldedRecords& f = *r.folded_records;
  CHECK(f.windows == 4095);
  const replay::StepRecords records(r);
  const auto window = static_cast<int64_t>(f.timings_end - f.timings_begin);
  CHECK(records.timings() == static_cast<int64_t>(r.timings.size()) + 4094 * window);
  // The ops of the step as many times as the step lists them: every op finishes once.
  CHECK(records.timings() == r.ops);
  // The last op to finish is the optimizer's, at the end of the step.
  const replay::StepRecords::Timing last = records.timing(records.timings() - 1);
  CHECK(last.timing.end == r.step);
  // The middle micro-batch's first op starts a whole number of periods after micro-batch 1's.
  auto first_of = [&](int32_t micro_batch) {
    for (int64_t i = 0; i < records.timings(); ++i) {
      const replay::StepRecords::Timing t = records.timing(i);
      if (t.op.micro_batch == micro_batch && t.op.pass == OpPass::kForward) return t.timing.start;
    }
    FAIL("no op of micro-batch " << micro_batch);
    return Duration::Zero();
  };
  CHECK(first_of(2048) - first_of(1) == f.period * 2047);
}

}  // namespace
}  // namespace sim
