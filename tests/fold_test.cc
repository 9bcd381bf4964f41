// Micro-batch folding (sim/replay/fold.h): the folded step's report is the unfolded one, byte for
// byte, on every shipped scenario and on the golden runs' grid of layouts (ZeRO 0-3, FSDP's
// shardings, Megatron 1F1B / interleaved / CP, GPipe), each at a batch long enough to fold.
#include "sim/replay/fold.h"

#include <catch2/catch.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include "sim/config/catalog.h"
#include "sim/report/run_report.h"
#include "sim/report/run_summary.h"
#include "tests/replay_models.h"
#include "tests/test_scenarios.h"

namespace sim {
namespace {

// The report as `stepsim run` writes it (text and JSON).
std::string Report(const Scenario& s, bool fold) {
  replay::ReplayOptions o;
  o.fold = fold;
  auto r = replay::Simulate(s, o);
  REQUIRE(r.ok());
  const report::RunSummary summary = report::Summarize(s, *r);
  return report::RunText(summary) + report::RunJson(summary).dump(2);
}

// Whether the folded path ran (rather than falling back to the full replay).
bool Folded(const Scenario& s) {
  const ReplayModels m(s);
  auto r = replay::FoldedReplay(s, m.compute, *m.comm, m.options);
  REQUIRE(r.ok());
  return r->has_value();
}

// The same scenario with the fewest micro-batches PlanFold folds (its K and d read at a long
// batch): 3 (K + d) + d, or with `slides` > 0 enough for the window to slide that many periods
// first (FoldedReplay slides while its short replays, K + i d for i = 0 … slides + 2, hold
// fewer micro-batches than the step). GPipe, which PlanFold never folds, gets as many as 1F1B
// would.
Scenario Foldable(Scenario s, int64_t slides = 0) {
  const int64_t per_micro_batch = s.training.micro_batch * s.dp();
  Scenario probe = s;
  probe.training.global_batch = 4096 * s.parallel.pp * per_micro_batch;
  if (s.parallel.pp_schedule == PipelineSchedule::kGpipe) {
    REQUIRE_FALSE(replay::PlanFold(probe).has_value());
    s.training.global_batch = (3 * (s.parallel.pp + 1) + 1) * per_micro_batch;
    return s;
  }
  const auto plan = replay::PlanFold(probe);
  REQUIRE(plan.has_value());
  const int64_t replays = slides + 3;
  const int64_t short_ones = replays * plan->k + plan->d * (replays - 1) * replays / 2;
  s.training.global_batch = (short_ones + plan->d) * per_micro_batch;
  REQUIRE(replay::PlanFold(s).has_value());
  return s;
}

TEST_CASE("folded and unfolded reports are byte-identical on the shipped scenarios", "[fold]") {
  // Llama 3 405B's interleaved 16-stage pipeline settles slowly: its point-to-point sends
  // slow the compute beside them (overlap_slowdown), which shifts the next sends, a transient
  // that shrinks each period (the increments of the recompute time first differ by hundreds
  // of picoseconds, then by fewer) until the replay repeats exactly, within seven slides.
  const std::pair<const char*, int64_t> files[] = {{"scenarios/default.yaml", 0},
                                                   {"scenarios/gpt3-175b-korthikanti.yaml", 0},
                                                   {"scenarios/llama2-70b-finetune.yaml", 0},
                                                   {"scenarios/llama3-405b-8k.yaml", 7}};
  for (const auto& [file, slides] : files) {
    INFO(file);
    const Scenario s = Load(std::string(STEPSIM_SOURCE_DIR "/") + file);
    CHECK(Report(s, true) == Report(s, false));
    const Scenario longer = Foldable(s, slides);
    INFO(longer.micro_batches() << " micro-batches");
    CHECK(Folded(longer));
    CHECK(Report(longer, true) == Report(longer, false));
  }
}

// How the scenario's fold went (FoldedReplay's trace).
replay::FoldTrace Trace(const Scenario& s) {
  const ReplayModels m(s);
  replay::FoldTrace t;
  auto r = replay::FoldedReplay(s, m.compute, *m.comm, m.options, &t);
  REQUIRE(r.ok());
  REQUIRE(r->has_value());
  return t;
}

TEST_CASE("folded and unfolded reports are byte-identical across the golden layouts", "[fold]") {
  int checked = 0;
  for (const GoldenCase& g : GoldenCases()) {
    INFO(g.line);
    // Long enough for one slide: FSDP2's first micro-batch holds fewer communication buffers at
    // once than the later ones, whose gathers overlap the previous one's reduce-scatter inputs,
    // so its window starts at the second.
    const Scenario s = Foldable(g.scenario, 1);
    // GPipe holds every micro-batch's activations until its backward: the peak grows with the
    // batch, nothing repeats, and the step is replayed in full.
    const bool gpipe = s.parallel.pp_schedule == PipelineSchedule::kGpipe;
    CHECK(Folded(s) == !gpipe);
    CHECK(Report(s, true) == Report(s, false));
    // Every other layout, pipelines included, folds on its states: at the first pair, but for
    // the interleaved ones (2 stages × 2 chunks: K = 2, d = 2), whose pair of 2 and 4
    // micro-batches is still warming up and which fold after one slide.
    if (!gpipe) {
      const replay::FoldTrace t = Trace(s);
      CHECK(t.by_state);
      const bool slides = s.parallel.pp_schedule == PipelineSchedule::kInterleaved;
      CHECK(t.replays == (slides ? 3 : 2));
    }
    ++checked;
  }
  CHECK(checked >= 14);
}

TEST_CASE("GPT-3 175B's interleaved pipeline folds on its states after two short replays",
          "[fold]") {
  // K = 16 and d = 8 (PlanFold: its warm-up of 10 micro-batches rounded up to a group of 8):
  // the replay of 24 micro-batches, compared with itself at the states where 16's and 32's
  // programs part from it, gives the step of 128 — byte for byte the full replay.
  const Scenario s =
      Load(STEPSIM_SOURCE_DIR "/scenarios/gpt3-175b-korthikanti.yaml").WithMicroBatches(128);
  const auto plan = replay::PlanFold(s);
  REQUIRE(plan.has_value());
  CHECK(plan->k == 16);
  CHECK(plan->d == 8);
  const replay::FoldTrace t = Trace(s);
  CHECK(t.by_state);
  CHECK(t.replays == 2);
  CHECK(t.last == 24);
  CHECK(Report(s, true) == Report(s, false));
}

TEST_CASE("a step too short for three short replays folds on the first pair's states", "[fold]") {
  // GPT-3 175B as shipped: 64 micro-batches, fewer than the window of three (16, 24 and 32:
  // 72), more than the pair's 24. The pair's states repeat, and the step is the replay of 24
  // extended by five periods of 8, byte for byte the full replay.
  const Scenario s = Load(STEPSIM_SOURCE_DIR "/scenarios/gpt3-175b-korthikanti.yaml");
  REQUIRE(s.micro_batches() == 64);
  CHECK_FALSE(replay::PlanFold(s).has_value());
  const replay::FoldTrace t = Trace(s);
  CHECK(t.by_state);
  CHECK_FALSE(t.went_on);
  CHECK(t.replays == 2);
  CHECK(t.last == 24);
  CHECK(Report(s, true) == Report(s, false));
  // Down to K + 2d: 32 micro-batches fold the same way; 24 (the pair itself) is replayed whole.
  const Scenario thirty_two = s.WithMicroBatches(32);
  CHECK(Trace(thirty_two).by_state);
  CHECK(Report(thirty_two, true) == Report(thirty_two, false));
  CHECK_FALSE(Folded(s.WithMicroBatches(24)));
}

TEST_CASE("where the first pair's states do not repeat, the step goes on from them", "[fold]") {
  // Llama 3 405B's 16 stages × 2 chunks at 128 micro-batches (K = 32, d = 16): the window of
  // three would need 144, and its point-to-point sends settle only some seven periods in, so
  // the pair of 32 and 48 does not repeat. A pipeline's short steps do not slide (their
  // programs are lowered whole): the step's replay goes on from the state of the replay of 48
  // where longer programs part from it, and is the full replay's, byte for byte.
  const Scenario s =
      Load(STEPSIM_SOURCE_DIR "/scenarios/llama3-405b-8k.yaml").WithMicroBatches(128);
  CHECK_FALSE(replay::PlanFold(s).has_value());
  const replay::FoldTrace t = Trace(s);
  CHECK_FALSE(t.by_state);
  CHECK(t.went_on);
  CHECK(t.replays == 2);
  CHECK(t.last == 48);
  CHECK(Report(s, true) == Report(s, false));
  // A 1F1B pair is tried too, from K = pp + max(2, pp / 4) (FoldWindow): GPT-3 175B as 1F1B
  // on 8 stages at 16 micro-batches (the window of three would need 33) folds on the pair of
  // 10 and 11.
  const Scenario one_f_one_b = Load(STEPSIM_SOURCE_DIR "/scenarios/gpt3-175b-korthikanti.yaml",
                                    {{"parallel.pp_schedule", "1f1b"},
                                     {"parallel.pp_chunks", "1"},
                                     {"training.global_batch", "16"}});
  REQUIRE(one_f_one_b.micro_batches() == 16);
  const replay::FoldTrace pair = Trace(one_f_one_b);
  CHECK(pair.by_state);
  CHECK(pair.replays == 2);
  CHECK(pair.last == 11);
  CHECK(Report(one_f_one_b, true) == Report(one_f_one_b, false));
}

TEST_CASE("short steps of the golden layouts: folded or gone on, byte for byte the full replay",
          "[fold]") {
  // Each golden layout that folds (all but GPipe), at the shortest step that tries the first
  // pair alone (K + 2d) and the longest below the window of three (3 (K + d) - d): whether the
  // pair repeats or the step goes on from it, the report is the full replay's.
  int tried = 0;
  for (const GoldenCase& g : GoldenCases()) {
    const Scenario& base = g.scenario;
    if (base.parallel.pp_schedule == PipelineSchedule::kGpipe) continue;
    const auto plan = replay::PlanFold(base.WithMicroBatches(4096 * base.parallel.pp));
    REQUIRE(plan.has_value());
    for (int64_t m : {plan->k + 2 * plan->d, 3 * (plan->k + plan->d) - plan->d}) {
      const Scenario s = base.WithMicroBatches(m);
      INFO(g.line << " at " << m << " micro-batches");
      CHECK_FALSE(replay::PlanFold(s).has_value());
      const replay::FoldTrace t = Trace(s);
      CHECK((t.by_state || t.went_on));
      CHECK(Report(s, true) == Report(s, false));
      ++tried;
    }
  }
  CHECK(tried >= 30);
}

TEST_CASE("without a pipeline, a short step whose pair does not repeat goes on from it", "[fold]") {
  // The default scenario under ZeRO-2 with full recompute at 4 micro-batches (fewer than the
  // window's 1 + 2 + 3): its allocator, past capacity, drifts, so neither the pair of 1 and 2
  // nor, one slide on, 2 and 3 repeats, and the step's replay goes on from the state of 3's
  // where longer programs part from it — the full replay's report, byte for byte.
  const Scenario s = Load(
      STEPSIM_SOURCE_DIR "/scenarios/default.yaml",
      {{"parallel.zero", "2"}, {"training.recompute", "full"}, {"training.global_batch", "128"}});
  REQUIRE(s.micro_batches() == 4);
  const replay::FoldTrace t = Trace(s);
  CHECK(t.went_on);
  CHECK(t.replays == 3);
  CHECK(t.last == 3);
  CHECK(Report(s, true) == Report(s, false));
}

TEST_CASE("the default scenario folds on its state after two short replays", "[fold]") {
  // Llama-2-70B, ZeRO-3, full recompute, 4,096-token sequences, 32 micro-batches: the caching
  // allocator has reserved what the step needs within the first micro-batch, so the replay of
  // two is, where the second micro-batch starts its backward, in its state of the first a
  // period on — the fold's cheapest path (sim/replay/state_period.h).
  const Scenario s = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml");
  const replay::FoldTrace t = Trace(s);
  CHECK(t.by_state);
  CHECK(t.replays == 2);
  CHECK(t.last == 2);
}

TEST_CASE("states whose allocators alone differ fold, the allocator replayed alone", "[fold]") {
  // Both fold at the first pair: every tensor, time and event repeats a period on, only the
  // caching allocator's segments differ, and nothing else depends on them, so the period's
  // ledger changes go through the allocator alone until it settles (ReservedPeaks), then the
  // step's end, for the reserved peak — the full replay's report.
  const std::pair<const char*, std::vector<config::Override>> cases[] = {
      // ZeRO-1, selective recompute: the replay of 2 micro-batches reserves 25 MB less at its
      // peak than those of 3 and 4 (the allocator's segments settle late).
      {"an allocator still settling",
       {{"training.seq_len", "1024"}, {"parallel.zero", "1"}, {"training.recompute", "selective"}}},
      // ZeRO-0, no recompute: the weights, gradients and fp32 optimizer states of 70 B
      // parameters (1,286 GiB) are far past the 80 GB from the start, so every new segment
      // first releases the cached ones and the segments are laid out anew each micro-batch.
      {"an allocator past its capacity",
       {{"training.seq_len", "1024"}, {"parallel.zero", "0"}, {"training.recompute", "none"}}},
  };
  for (const auto& [what, overrides] : cases) {
    INFO(what);
    const Scenario s = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml", overrides);
    REQUIRE(s.micro_batches() == 32);
    const replay::FoldTrace t = Trace(s);
    CHECK(t.by_state);
    CHECK(t.allocator_alone);
    CHECK(t.allocator_periods > 0);
    CHECK(t.replays == 2);
    CHECK(Report(s, true) == Report(s, false));
  }
}

TEST_CASE("an allocator past its capacity that never settles folds on three replays", "[fold]") {
  // The same with full recompute: the allocator, replayed alone, releases the same 32 MiB of
  // cached segments every period instead of settling. ReservedPeaks gives up on it after two
  // periods (a change repeated is a drift) rather than the four it gives an allocator that
  // settles, and the fold rests on three replays whose results repeat (the reserved peak, past
  // capacity, no longer moves), to the full replay's report.
  const Scenario s =
      Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml",
           {{"training.seq_len", "1024"}, {"parallel.zero", "0"}, {"training.recompute", "full"}});
  const replay::FoldTrace t = Trace(s);
  CHECK_FALSE(t.by_state);
  CHECK(t.allocator_periods == 2);
  CHECK(t.replays >= 3);
  CHECK(Report(s, true) == Report(s, false));
}

TEST_CASE("without a pipeline, a window whose three replays do not repeat yet slides", "[fold]") {
  // FSDP SHARD_GRAD_OP on 4 nodes, 1,024-token sequences, 32 micro-batches: neither the states
  // of the first pair nor the results of 1, 2 and 3 micro-batches repeat, so the window slides
  // one period (StepLowering lowers the fourth micro-batch, ReplayAfter replays it from the
  // third's state) and 2, 3 and 4 fold — to the full replay's report. Of a sweep of 432
  // configurations around the default shape (frameworks, ZeRO stages, recompute, micro-batch
  // 1, 2 and 4, one or four nodes), the only ones that slide without a pipeline are these two
  // recompute settings, on one node and on four.
  for (const char* recompute : {"none", "selective"}) {
    INFO(recompute);
    const Scenario s =
        Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml", {{"parallel.framework", "fsdp"},
                                                            {"parallel.zero", "2"},
                                                            {"training.recompute", recompute},
                                                            {"training.seq_len", "1024"},
                                                            {"cluster.nodes", "4"}});
    REQUIRE(s.micro_batches() == 32);
    const replay::FoldTrace t = Trace(s);
    CHECK_FALSE(t.by_state);
    CHECK(t.replays == 4);
    CHECK(t.last == 4);
    CHECK(Report(s, true) == Report(s, false));
  }
}

TEST_CASE("folded and unfolded reports are byte-identical across the sweep check's grid",
          "[fold]") {
  // The contract's sweep grid (the sweep-throughput contract check (144 default-shape
  // configurations, 2 jobs)), at three of its six sequence lengths: each ZeRO stage, recompute and
  // micro-batch size, which between them fold by state (with the allocator replayed alone or not)
  // and on three replays.
  int by_state = 0, by_results = 0, allocator_alone = 0;
  for (const char* seq : {"1024", "4096", "16384"}) {
    for (const char* zero : {"0", "1", "2", "3"}) {
      for (const char* recompute : {"none", "selective", "full"}) {
        for (const char* micro_batch : {"1", "2"}) {
          const Scenario s = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml",
                                  {{"training.seq_len", seq},
                                   {"parallel.zero", zero},
                                   {"training.recompute", recompute},
                                   {"training.micro_batch", micro_batch}});
          INFO(seq << " tokens, ZeRO-" << zero << ", " << recompute << ", micro-batch "
                   << micro_batch);
          const replay::FoldTrace t = Trace(s);
          (t.by_state ? by_state : by_results)++;
          allocator_alone += t.allocator_alone ? 1 : 0;
          CHECK(Report(s, true) == Report(s, false));
        }
      }
    }
  }
  CHECK(by_state > allocator_alone);
  CHECK(allocator_alone > 0);
  CHECK(by_results > 0);
}

TEST_CASE("a step shorter than the replays a settling allocator needs folds at the first pair",
          "[fold]") {
  // ZeRO-3 at micro-batch 2 and 1,024-token sequences (16 micro-batches): the caching
  // allocator's reserved peak grows up to the replay of four micro-batches, and neither states
  // nor windows of three replays repeat before the replay of six (1 + 2 + ... + 6 = 21
  // micro-batches of short replays, more than the step's 16). Replayed alone, the allocator
  // settles within the fold's periods, and the step folds at the first pair, to the full
  // replay's report.
  const Scenario s =
      Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml", {{"training.seq_len", "1024"},
                                                          {"parallel.zero", "3"},
                                                          {"training.micro_batch", "2"},
                                                          {"training.recompute", "none"}});
  REQUIRE(s.micro_batches() == 16);
  const replay::FoldTrace t = Trace(s);
  CHECK(t.by_state);
  CHECK(t.last == 2);
  CHECK(Report(s, true) == Report(s, false));
}

TEST_CASE("a folded step of 131,072 micro-batches is the unfolded step's arithmetic", "[fold]") {
  // Linear in the micro-batches past the warm-up: the step at M is the step at M' plus
  // (M - M') periods, each what one more micro-batch adds (measured at a count both replay).
  const Scenario base = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml");
  auto at = [&](int64_t m) {
    const Scenario s = base.WithMicroBatches(m);
    replay::ReplayOptions o;
    o.fold = m > 131072 / 2;
    auto r = replay::Simulate(s, o);
    REQUIRE(r.ok());
    return std::move(*r);
  };
  const replay::ReplayResult a = at(40), b = at(41), big = at(131072);
  const int64_t period = b.step.picoseconds() - a.step.picoseconds();
  CHECK(period > 0);
  CHECK(big.step.picoseconds() == a.step.picoseconds() + (131072 - 40) * period);
  CHECK(big.ops == a.ops + (131072 - 40) * (b.ops - a.ops));
  // The program stays that of a few micro-batches.
  CHECK(static_cast<int64_t>(big.program.ops.size()) < 10 * (b.ops - a.ops));
  CHECK(big.ledgers[0].peak() == a.ledgers[0].peak());
}

}  // namespace
}  // namespace sim
