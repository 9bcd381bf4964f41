// The fold on the replay's state (sim/replay/state_period.h): the comparisons it rests on — of
// caching allocators and ledgers (their futures, not their histories), of link sharing, of
// whole replay states one period apart, and of programs one period apart — accept what
// repeats and refuse every kind of difference.
#include "sim/replay/state_period.h"

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "sim/cost/link_sharing.h"
#include "sim/memory/caching_allocator.h"
#include "sim/memory/ledger.h"
#include "sim/replay/listener_state.h"
#include "sim/replay/prefix_watch.h"
#include "sim/replay/replay_steps.h"
#include "sim/workload/lowering.h"
#include "tests/replay_models.h"
#include "tests/test_scenarios.h"

namespace sim {
namespace {

using memory::AllocatorOptions;
using memory::CachingAllocator;

constexpr int64_t kMiB = int64_t{1} << 20;

TEST_CASE("allocators with the same segments and blocks have the same future, whatever the ids",
          "[state]") {
  // 64 MiB of capacity: a 40 MiB segment cached, then a 50 MiB request, which does not fit
  // beside it, releases it (release_cached_blocks) and takes a segment with the next id.
  CachingAllocator renamed(Bytes::Count(64 * kMiB), AllocatorOptions{});
  renamed.Free(renamed.Allocate(40 * kMiB, 0));
  renamed.Free(renamed.Allocate(50 * kMiB, 0));
  CachingAllocator direct(Bytes::Count(64 * kMiB), AllocatorOptions{});
  direct.Free(direct.Allocate(50 * kMiB, 0));
  CHECK(renamed.SameFuture(direct));
  CHECK(direct.SameFuture(renamed));
  // And they go on alike: the next request lands in the first live segment, at offset 0.
  const auto a = renamed.Allocate(10 * kMiB, 0), b = direct.Allocate(10 * kMiB, 0);
  CHECK(renamed.Place(a, renamed.LiveSegments()) == direct.Place(b, direct.LiveSegments()));
  CHECK(renamed.SameFuture(direct));

  // A block split differently, a segment more, or a block held on another stream differ.
  CachingAllocator split(Bytes::Count(64 * kMiB), AllocatorOptions{});
  split.Free(split.Allocate(50 * kMiB, 0));
  const auto held = split.Allocate(20 * kMiB, 0);
  CHECK_FALSE(split.SameFuture(direct));
  split.Free(held);
  CHECK_FALSE(split.SameFuture(renamed));  // `renamed` still holds its 10 MiB block
  CachingAllocator empty(Bytes::Count(64 * kMiB), AllocatorOptions{});
  empty.Free(empty.Allocate(50 * kMiB, 0));
  CHECK(split.SameFuture(empty));
  CachingAllocator more(Bytes::Count(1024 * kMiB), AllocatorOptions{});
  more.Free(more.Allocate(50 * kMiB, 0));
  CHECK_FALSE(more.SameFuture(empty));  // another capacity
  CachingAllocator other_stream(Bytes::Count(64 * kMiB), AllocatorOptions{});
  other_stream.Free(other_stream.Allocate(50 * kMiB, 1));
  CHECK_FALSE(other_stream.SameFuture(empty));
}

TEST_CASE("ledgers compare their live tensors and totals, not their peaks", "[state]") {
  memory::MemoryLedger a(Bytes::Count(1024 * kMiB), false), b(Bytes::Count(1024 * kMiB), false);
  for (memory::MemoryLedger* l : {&a, &b}) {
    l->Apply(MemCategory::kWeights, Bytes::Count(100 * kMiB), Duration::Zero(), -1);
    l->MarkPersistent();
  }
  // b reached a higher peak on its way: history, not the future.
  b.Apply(MemCategory::kActivations, Bytes::Count(300 * kMiB), Duration::Picoseconds(5), 0);
  b.Apply(MemCategory::kActivations, Bytes::Count(-300 * kMiB), Duration::Picoseconds(9), 1);
  a.Apply(MemCategory::kActivations, Bytes::Count(300 * kMiB), Duration::Picoseconds(5), 0);
  a.Apply(MemCategory::kActivations, Bytes::Count(-300 * kMiB), Duration::Picoseconds(9), 1);
  CHECK(a.SameFuture(b));
  b.Apply(MemCategory::kActivations, Bytes::Count(8 * kMiB), Duration::Picoseconds(10), 2);
  CHECK_FALSE(a.SameFuture(b));  // a tensor more
  a.Apply(MemCategory::kGradients, Bytes::Count(8 * kMiB), Duration::Picoseconds(10), 2);
  CHECK_FALSE(a.SameFuture(b));  // as many bytes, another category
}

TEST_CASE("link sharing compares flows with their tasks and clock moved", "[state]") {
  cost::LinkSharing a(1), b(1);
  const auto none = [](int32_t, Duration) {};
  a.Start(0, cost::LinkClass::kFabric, 3, Duration::Picoseconds(100), Duration::Picoseconds(10),
          none);
  b.Start(0, cost::LinkClass::kFabric, 8, Duration::Picoseconds(100), Duration::Picoseconds(60),
          none);
  CHECK(a.SameShifted(b, 5, Duration::Picoseconds(50)));
  CHECK_FALSE(a.SameShifted(b, 4, Duration::Picoseconds(50)));
  CHECK_FALSE(a.SameShifted(b, 5, Duration::Picoseconds(49)));
  b.Start(0, cost::LinkClass::kNvlink, 9, Duration::Picoseconds(7), Duration::Picoseconds(60),
          none);
  CHECK_FALSE(a.SameShifted(b, 5, Duration::Picoseconds(50)));
}

// The default scenario's first two short programs (1 and 2 micro-batches), the replay of the
// longer one, and the states it kept: where the shorter parts from it, and a period on.
struct TwoStates {
  explicit TwoStates(const Scenario& s) : models(s) {
    auto lowering = StepLowering::Start(s);
    REQUIRE(lowering.ok());
    std::vector<OpProgram> programs;
    std::vector<int32_t> shared;
    for (int64_t m : {1, 2}) {
      auto p = lowering->Lower(m);
      REQUIRE(p.ok());
      programs.push_back(*std::move(p));
      shared.push_back(lowering->shared());
    }
    bool deferred = false;
    runs = replay::ReplayFamily(std::move(programs), models.compute, *models.comm,
                                s.cluster.gpu.Usable(), models.options, nullptr, &later, &shared,
                                lowering->shared(), &deferred);
    REQUIRE(deferred);
    REQUIRE(later);
    REQUIRE(later->earlier);
    ops = static_cast<int32_t>(runs[1].program.ops.size() - runs[0].program.ops.size());
  }
  ReplayModels models;
  std::vector<replay::ReplayResult> runs;
  std::shared_ptr<const replay::ReplaySnapshot> later;
  int32_t ops = 0;
};

TEST_CASE("the default scenario's state one micro-batch on is its state a period later",
          "[state]") {
  const Scenario s = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml");
  TwoStates t(s);
  const replay::ReplaySnapshot &earlier = *t.later->earlier, &later = *t.later;
  const OpProgram& p = t.runs[1].program;
  const auto dt = replay::StateRepeats(p, earlier, later, t.ops);
  REQUIRE(dt.has_value());
  // The period is what one more micro-batch adds to the step: the shorter program forked from
  // the earlier state (what the fold skips) ends dt before the longer one.
  const replay::ReplayResult shorter =
      replay::ReplayFromState(t.runs[0].program, earlier, t.models.compute, *t.models.comm,
                              s.cluster.gpu.Usable(), t.models.options);
  CHECK(t.runs[1].step - shorter.step == *dt);

  SECTION("refused: another period") {
    CHECK_FALSE(replay::StateRepeats(p, earlier, later, t.ops - 1).has_value());
    CHECK_FALSE(replay::StateRepeats(p, earlier, later, t.ops + 1).has_value());
  }
  SECTION("refused: a tensor more on the GPU") {
    replay::ReplaySnapshot changed = later;
    changed.listener.ledgers[0].Apply(MemCategory::kActivations, Bytes::Count(kMiB),
                                      later.executor.stats.makespan, 0);
    CHECK_FALSE(replay::StateRepeats(p, earlier, changed, t.ops).has_value());
  }
  SECTION("refused: the compute stream free a picosecond later") {
    replay::ReplaySnapshot changed = later;
    changed.listener.compute_free[0] += Duration::Picoseconds(1);
    CHECK_FALSE(replay::StateRepeats(p, earlier, changed, t.ops).has_value());
  }
  SECTION("refused: a running op due a picosecond later") {
    replay::ReplaySnapshot changed = later;
    engine::ExecutorSnapshot& e = changed.executor;
    int32_t running = -1;
    for (int32_t task = 0; task < e.prefix && running < 0; ++task) {
      if (e.started[task] && !e.finished[task]) running = task;
    }
    REQUIRE(running >= 0);
    e.finish_at[running] += Duration::Picoseconds(1);
    CHECK_FALSE(replay::StateRepeats(p, earlier, changed, t.ops).has_value());
  }
  SECTION("refused: a task of the period not finished") {
    replay::ReplaySnapshot changed = later;
    changed.executor.finished[0] = 0;
    CHECK_FALSE(replay::StateRepeats(p, earlier, changed, t.ops).has_value());
  }
}

TEST_CASE("states whose caching allocators alone differ are told apart, and let through on ask",
          "[state]") {
  // ZeRO-0 without recompute at 1,024 tokens: past the GPU's capacity from the start (1,286 GiB
  // of weights, gradients and optimizer states), the allocator releases its cached segments
  // before every new one and lays them out differently a micro-batch on; the tensors, times
  // and everything else repeat.
  const Scenario s =
      Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml",
           {{"training.seq_len", "1024"}, {"parallel.zero", "0"}, {"training.recompute", "none"}});
  TwoStates t(s);
  const OpProgram& p = t.runs[1].program;
  CHECK_FALSE(replay::StateRepeats(p, *t.later->earlier, *t.later, t.ops).has_value());
  bool allocators = false;
  const auto dt = replay::StateRepeats(p, *t.later->earlier, *t.later, t.ops, &allocators);
  REQUIRE(dt.has_value());
  CHECK(allocators);
  const memory::MemoryLedger &a = t.later->earlier->listener.ledgers[0],
                             &b = t.later->listener.ledgers[0];
  CHECK(a.SameTensors(b));
  CHECK_FALSE(a.SameFuture(b));
  // A tensor more is a difference the allocator does not explain.
  replay::ReplaySnapshot changed = *t.later;
  changed.listener.ledgers[0].Apply(MemCategory::kActivations, Bytes::Count(kMiB),
                                    t.later->executor.stats.makespan, 0);
  CHECK_FALSE(replay::StateRepeats(p, *t.later->earlier, changed, t.ops, &allocators));
}

TEST_CASE("programs one micro-batch apart repeat from the fork on, and only so", "[state]") {
  const Scenario s = Load(STEPSIM_SOURCE_DIR "/scenarios/default.yaml");
  TwoStates t(s);
  const OpProgram &a = t.runs[0].program, &b = t.runs[1].program;
  const engine::ExecutorSnapshot& e = t.later->earlier->executor;
  int32_t from = 0;
  while (from < e.prefix && e.finished[from]) ++from;
  CHECK(replay::ProgramRepeats(a, b, from, t.ops));
  CHECK_FALSE(replay::ProgramRepeats(a, b, from, t.ops - 1));
  // From op 0 the first micro-batch's ops are compared with the second's, whose backward
  // reduces differently (the last micro-batch's reductions): they do not repeat.
  CHECK_FALSE(replay::ProgramRepeats(a, b, 0, t.ops));
  OpProgram changed = b;
  Op& op = changed.ops[changed.ops.size() - 1];
  op.flops = op.flops + Flops::Count(1.0);
  CHECK_FALSE(replay::ProgramRepeats(a, changed, from, t.ops));
}

}  // namespace
}  // namespace sim
