// Forked replays (sim/replay/prefix_watch.h, ReplayFamily, ReplayAfter): the short replays of a
// fold, run as one replay forked where their programs part, and each slide's replay going on
// from the last one's kept state, give each program's report exactly as its own replay does —
// on the shipped scenarios and the golden runs' grid of layouts — and the forks are really
// taken (a fork refused falls back to a replay alone, which would hide nothing but the speed).
#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/replay/fold.h"
#include "sim/replay/prefix_watch.h"
#include "sim/replay/replay_steps.h"
#include "sim/report/run_report.h"
#include "sim/report/run_summary.h"
#include "sim/workload/lowering.h"
#include "tests/replay_models.h"
#include "tests/test_scenarios.h"

namespace sim {
namespace {

// The report of a raw replay of the scenario at its own micro-batch count.
std::string Report(const Scenario& s, replay::ReplayResult r) {
  replay::Finalize(r, s.micro_batches());
  const report::RunSummary summary = report::Summarize(s, r);
  return report::RunText(summary) + report::RunJson(summary).dump(2);
}

// Replays the fold's first window of `s` (K, K + d, K + 2d micro-batches) forked and alone,
// and two slides past it (K + 3d, K + 4d) each going on from the last one's kept state
// (ReplayAfter) and alone; returns the forks and adoptions taken after checking every report
// equal. `resume_at_part`: also check that each slide goes on from where its program parts
// from the last.
int CheckFamily(const Scenario& s, bool resume_at_part = false) {
  const auto plan = replay::PlanFold(s.WithMicroBatches(4096 * s.parallel.pp));
  if (!plan) return 0;  // GPipe
  const ReplayModels m(s);
  const cost::RooflineCostModel& compute = m.compute;
  const cost::CollectiveCostModel& comm = *m.comm;
  const replay::ReplayOptions& o = m.options;
  std::vector<Scenario> scenarios;
  std::vector<OpProgram> programs;
  for (int64_t i = 0; i < 5; ++i) {
    scenarios.push_back(s.WithMicroBatches(plan->k + i * plan->d));
    auto p = Lower(scenarios.back());
    REQUIRE(p.ok());
    programs.push_back(*std::move(p));
  }
  int forks = 0;
  std::shared_ptr<const replay::ReplaySnapshot> snapshot;
  std::vector<replay::ReplayResult> runs =
      replay::ReplayFamily({programs.begin(), programs.begin() + 3}, compute, comm,
                           s.cluster.gpu.Usable(), o, &forks, &snapshot);
  REQUIRE(runs.size() == 3);
  for (size_t i = 3; i < 5; ++i) {
    forks += snapshot != nullptr;
    // The state kept is the latest a slide can go on from (where its program parts from the
    // last), and the slide goes on from it: one period replayed, not two.
    if (snapshot != nullptr && resume_at_part) {
      CHECK(replay::SnapshotPrefix(*snapshot) ==
            replay::CommonPrefix(programs[i], programs[i - 1]));
    }
    int32_t resumed = 0;
    runs.push_back(replay::ReplayAfter(programs[i], runs.back().program, compute, comm,
                                       s.cluster.gpu.Usable(), o, snapshot, 0, 0, &resumed));
    if (resume_at_part) CHECK(resumed == replay::CommonPrefix(programs[i], programs[i - 1]));
  }
  for (size_t i = 0; i < 5; ++i) {
    INFO(scenarios[i].micro_batches() << " micro-batches");
    replay::ReplayResult alone =
        replay::ReplayRaw(programs[i], compute, comm, s.cluster.gpu.Usable(), o);
    CHECK(runs[i].events == alone.events);
    CHECK(Report(scenarios[i], std::move(runs[i])) == Report(scenarios[i], std::move(alone)));
  }
  return forks;
}

TEST_CASE("forked short replays report what each replays alone, across layouts", "[fold]") {
  int cases = 0, forks = 0;
  for (const GoldenCase& g : GoldenCases()) {
    INFO(g.line);
    const int f = CheckFamily(g.scenario);
    forks += f;
    cases += f > 0;
  }
  for (const char* file : {"scenarios/default.yaml", "scenarios/gpt3-175b-korthikanti.yaml",
                           "scenarios/llama2-70b-finetune.yaml"}) {
    INFO(file);
    forks += CheckFamily(Load(std::string(STEPSIM_SOURCE_DIR "/") + file));
  }
  // Every layout but GPipe's forks both shorter replays and keeps a state for each slide (none
  // of the grid's tails touches a stream of its own at time zero).
  CHECK(cases >= 13);
  CHECK(forks >= 4 * 13 + 12);
}

TEST_CASE("forked replays of overflowing, settling and offloading steps", "[fold]") {
  // The sweep check's grid at its extremes: ZeRO-0 a terabyte over capacity (every new segment
  // releases the cached ones), ZeRO-3 whose reserved peak grows for three micro-batches.
  const Scenario base = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml");
  for (const auto& sets : std::vector<std::vector<config::Override>>{
           {{"parallel.zero", "0"}, {"training.recompute", "none"}},
           {{"parallel.zero", "3"},
            {"training.recompute", "none"},
            {"training.seq_len", "1024"},
            {"training.micro_batch", "2"}},
           {{"parallel.zero", "2"},
            {"training.recompute", "selective"},
            {"training.seq_len", "32768"}}}) {
    const Scenario s = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml", sets);
    INFO(sets.front().value << " " << sets[1].value);
    CHECK(CheckFamily(s, /*resume_at_part=*/true) == 4);
  }
  // Offload: copies on the PCIe stream, the optimizer's update on the host stream.
  for (const auto& sets : std::vector<std::vector<config::Override>>{
           {{"parallel.offload.activations", "cpu"}},
           {{"parallel.offload.optimizer", "cpu"}},
           {{"parallel.offload.params", "cpu"}, {"parallel.offload.optimizer", "cpu"}}}) {
    const Scenario s = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml", sets);
    INFO(sets.front().key);
    CHECK(CheckFamily(s) == 4);
  }
}

TEST_CASE("programs share the ops before the first that differs in anything replayed", "[fold]") {
  const Scenario s = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml");
  auto lowered = Lower(s.WithMicroBatches(3));
  REQUIRE(lowered.ok());
  const OpProgram& p = *lowered;
  const auto n = static_cast<int32_t>(p.ops.size());
  CHECK(replay::CommonPrefix(p, p) == n);
  // One micro-batch fewer: they part at its optimizer step, after two micro-batches' ops.
  auto shorter = Lower(s.WithMicroBatches(2));
  REQUIRE(shorter.ok());
  const int32_t two = replay::CommonPrefix(*shorter, p);
  CHECK(two < static_cast<int32_t>(shorter->ops.size()));
  CHECK(p.ops[two].micro_batch == 2);
  // A change to one op's memory, dependencies, collective or price parts them there.
  auto first_memory_op = [&](int32_t from) {
    while (p.ops[from].mem_begin == p.ops[from].mem_end) ++from;
    return from;
  };
  {
    OpProgram q = p;
    const int32_t at = first_memory_op(n / 2);
    q.mem[q.ops[at].mem_begin].bytes = q.mem[q.ops[at].mem_begin].bytes + Bytes::Count(512);
    CHECK(replay::CommonPrefix(p, q) == at);
  }
  {
    OpProgram q = p;
    int32_t at = n / 3;
    while (q.ops[at].deps_begin == q.ops[at].deps_end) ++at;
    q.deps[q.ops[at].deps_begin] -= 1;
    CHECK(replay::CommonPrefix(p, q) == at);
  }
  {
    OpProgram q = p;
    int32_t at = n / 4;
    while (!q.ops[at].collective) ++at;
    q.collectives[*q.ops[at].collective].buckets += 1;
    CHECK(replay::CommonPrefix(p, q) == at);
  }
  {
    OpProgram q = p;
    q.ops[n - 1].flops = q.ops[n - 1].flops * 2.0;
    CHECK(replay::CommonPrefix(p, q) == n - 1);
  }
  {
    OpProgram q = p;  // persistent memory differs: nothing is shared
    q.persistent[0].back().bytes = q.persistent[0].back().bytes + Bytes::Count(1);
    CHECK(replay::CommonPrefix(p, q) == 0);
  }
}

// A watch's items by their definition (sim/replay/prefix_watch.h), visiting every op past the
// prefix of each program given: op t of a program is past(t)'s (stream, dependencies, whether
// it allocates when issued). None when one without dependencies allocates at issue, or is the
// first past the prefix on a stream the prefix has no op on.
struct PastOp {
  int32_t stream;
  std::vector<int32_t> deps;
  bool issues;
};
using ItemSet = std::set<std::vector<int32_t>>;

std::vector<PastOp> PastOps(const OpProgram& p, int32_t from,
                            const std::function<int32_t(int32_t)>& moved) {
  std::vector<PastOp> ops;
  for (int32_t t = from; t < static_cast<int32_t>(p.ops.size()); ++t) {
    const Op& op = p.ops[t];
    PastOp o{
        op.stage * kNumStreams + static_cast<int32_t>(op.stream), {}, op.mem_begin != op.mem_start};
    for (int32_t i = op.deps_begin; i < op.deps_end; ++i) o.deps.push_back(moved(p.deps[i]));
    ops.push_back(o);
  }
  return ops;
}

std::optional<ItemSet> ReferenceItems(const OpProgram& running, int32_t prefix,
                                      const std::vector<std::vector<PastOp>>& programs) {
  std::vector<int32_t> last(static_cast<size_t>(running.stages) * kNumStreams, -1);
  for (int32_t t = 0; t < prefix; ++t) {
    last[running.ops[t].stage * kNumStreams + static_cast<int32_t>(running.ops[t].stream)] = t;
  }
  ItemSet items;
  for (const std::vector<PastOp>& ops : programs) {
    std::vector<bool> seen(last.size(), false);
    for (const PastOp& op : ops) {
      const bool first = !seen[op.stream];
      seen[op.stream] = true;
      if (op.deps.empty()) {
        if (op.issues) return std::nullopt;
        if (first) {
          if (last[op.stream] < 0) return std::nullopt;
          items.insert({last[op.stream]});
        }
      } else if (*std::max_element(op.deps.begin(), op.deps.end()) < prefix) {
        std::vector<int32_t> d = op.deps;
        std::sort(d.begin(), d.end());
        d.erase(std::unique(d.begin(), d.end()), d.end());
        items.insert(d);
      }
    }
  }
  return items;
}

std::optional<ItemSet> ItemsOf(const std::optional<replay::PrefixWatch>& w) {
  if (!w) return std::nullopt;
  const std::vector<std::vector<int32_t>> items = w->Items();
  return ItemSet(items.begin(), items.end());
}

TEST_CASE("a watch finds the ops past its prefix that the prefix alone can touch", "[fold]") {
  std::vector<Scenario> cases;
  for (const GoldenCase& g : GoldenCases()) cases.push_back(g.scenario);
  for (const char* zero : {"0", "3"}) {
    cases.push_back(Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml",
                         {{"parallel.zero", zero}, {"training.recompute", "selective"}}));
  }
  const auto same = [](int32_t d) { return d; };
  int watches = 0;
  for (const Scenario& s : cases) {
    const auto plan = replay::PlanFold(s.WithMicroBatches(4096 * s.parallel.pp));
    if (!plan) continue;  // GPipe
    std::vector<OpProgram> p;
    for (int64_t i = 0; i < 3; ++i) {
      auto lowered = Lower(s.WithMicroBatches(plan->k + i * plan->d));
      REQUIRE(lowered.ok());
      p.push_back(*std::move(lowered));
    }
    const replay::PrefixIndex index(p[2]);
    for (int i : {0, 1}) {
      const int32_t prefix = replay::CommonPrefix(p[i], p[2]);
      if (prefix == 0) continue;
      INFO(s.name << " fork of " << i);
      CHECK(
          ItemsOf(replay::PrefixWatch::Make(index, p[2], p[i], prefix)) ==
          ReferenceItems(p[2], prefix, {PastOps(p[2], prefix, same), PastOps(p[i], prefix, same)}));
      ++watches;
    }
    // The next window's program, guessed a period on.
    const auto period = static_cast<int32_t>(p[2].ops.size() - p[1].ops.size());
    const int32_t prefix = replay::CommonPrefix(p[1], p[2]) + period;
    if (period <= 0 || prefix > static_cast<int32_t>(p[2].ops.size())) continue;
    INFO(s.name << " next");
    const auto moved = [&](int32_t d) { return d >= prefix - 2 * period ? d + period : d; };
    CHECK(ItemsOf(replay::PrefixWatch::MakeForNext(index, p[2], prefix, period)) ==
          ReferenceItems(p[2], prefix,
                         {PastOps(p[2], prefix, same), PastOps(p[2], prefix - period, moved)}));
    ++watches;
  }
  CHECK(watches >= 3 * 13);
}

}  // namespace
}  // namespace sim
