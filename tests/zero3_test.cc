// DeepSpeed ZeRO-3's parameter coordinator (sim/workload/zero3_coordinator.h) against
// hand-worked traces, and what it does to a replayed DeepSpeed step: the gathered parameters
// stay near stage3_max_live_parameters, the contiguous gradient buckets are where DeepSpeed
// allocates them.

#include <catch2/catch.hpp>

#include "sim/config/catalog.h"
#include "sim/replay/replay.h"
#include "sim/workload/zero3_coordinator.h"

namespace sim {
namespace {

using Ids = std::vector<int32_t>;

Zero3Coordinator Make(std::vector<int64_t> elements, std::vector<Ids> uses, Zero3Limits limits) {
  std::vector<ModuleUse> trace;
  for (const Ids& u : uses) trace.push_back({{u.begin(), u.end()}});
  return Zero3Coordinator(std::move(elements), std::move(trace), limits);
}

TEST_CASE("zero3: each fetch prefetches up to the bucket, the last parameter overshooting",
          "[zero3]") {
  // Four parameters of 10 elements, one per module; bucket 15.
  Zero3Coordinator c = Make({10, 10, 10, 10}, {{0}, {1}, {2}, {3}}, {15, 100, 0});
  Zero3Coordinator::Fetched f = c.Fetch(0);
  CHECK(f.now == Ids{0});
  CHECK(f.ahead == Ids{1, 2});  // 10 < 15 takes the next one too: 20 in flight
  CHECK(c.gathered_elements() == 30);
  CHECK(c.Release(0) == Ids{0});  // no later use
  f = c.Fetch(1);
  CHECK(f.now.empty());
  CHECK(f.ahead == Ids{3});  // the queue is past 2 already; 3 is all that is left
  CHECK(c.Release(1) == Ids{1});
  CHECK(c.Fetch(2).ahead.empty());
  CHECK(c.Release(2) == Ids{2});
  c.Fetch(3);
  CHECK(c.Release(3) == Ids{3});
  CHECK(c.gathered_elements() == 0);
  c.Reset();
}

TEST_CASE("zero3: max_live bounds what a fetch prefetches", "[zero3]") {
  Zero3Coordinator c = Make({10, 10, 10, 10}, {{0}, {1}, {2}, {3}}, {100, 25, 0});
  const Zero3Coordinator::Fetched f = c.Fetch(0);
  // 10 gathered: room for min(100, 25 − 10) = 15, so two parameters go out (DeepSpeed's loop
  // checks before each one).
  CHECK(f.ahead == Ids{1, 2});
  CHECK(c.gathered_elements() == 30);
  c.Release(0);
  // 20 gathered: room for 5, one more parameter.
  CHECK(c.Fetch(1).ahead == Ids{3});
}

TEST_CASE("zero3: parameters used again within the reuse distance stay gathered", "[zero3]") {
  // p0 (10), then p1 (10), then p0 again: the uses between hold 10 elements.
  for (int64_t reuse : {10, 11}) {
    INFO("max_reuse " << reuse);
    Zero3Coordinator c = Make({10, 10}, {{0}, {1}, {0}}, {0, 100, reuse});
    c.Fetch(0);
    const Ids released = c.Release(0);
    CHECK(released == (reuse > 10 ? Ids{} : Ids{0}));  // kept only when 10 < max_reuse
    CHECK(c.Fetch(1).now == Ids{1});
    c.Release(1);
    CHECK(c.Fetch(2).now == (reuse > 10 ? Ids{} : Ids{0}));
    CHECK(c.Release(2) == Ids{0});
    c.Reset();
  }
}

TEST_CASE("zero3: a parameter the prefetch walked past a later use of stays for it", "[zero3]") {
  // No reuse window: only the passed-over rule keeps p0.
  Zero3Coordinator c = Make({10, 10}, {{0}, {1}, {0}}, {100, 100, 0});
  const Zero3Coordinator::Fetched f = c.Fetch(0);
  CHECK(f.ahead == Ids{1});  // and the queue passes over use 2 of p0, already gathered
  CHECK(c.Release(0).empty());
  c.Fetch(1);
  CHECK(c.Release(1) == Ids{1});
  CHECK(c.Fetch(2).now.empty());
  CHECK(c.Release(2) == Ids{0});
}

TEST_CASE("zero3: no bucket, no prefetch", "[zero3]") {
  Zero3Coordinator c = Make({10, 10}, {{0}, {1}}, {0, 100, 0});
  CHECK(c.Fetch(0).ahead.empty());
  c.Release(0);
  CHECK(c.Fetch(1).now == Ids{1});
}

TEST_CASE("zero3: with small parameters the gathered set grows to max_live", "[zero3]") {
  // 100 parameters of 10 elements, one module each, bucket 30, max_live 200: every fetch
  // prefetches three and releases one (+20 a step) until the room left is below the bucket;
  // then one in, one out, at exactly 200 (multiples of 10 never overshoot it).
  std::vector<int64_t> elements(100, 10);
  std::vector<Ids> uses;
  for (int32_t p = 0; p < 100; ++p) uses.push_back({p});
  Zero3Coordinator c = Make(elements, uses, {30, 200, 0});
  int64_t most = 0;
  for (int32_t u = 0; u < 100; ++u) {
    c.Fetch(u);
    most = std::max(most, c.gathered_elements());
    c.Release(u);
  }
  CHECK(most == 200);
  CHECK(c.gathered_elements() == 0);
}

// ---- in the replay ------------------------------------------------------------------------

Scenario Load(std::vector<config::Override> overrides) {
  auto s = config::LoadScenario(config::DataRoot{STEPSIM_SOURCE_DIR},
                                STEPSIM_SOURCE_DIR "/scenarios/default.yaml", overrides);
  REQUIRE(s.ok());
  return *s;
}

Bytes CategoryPeak(const Scenario& s, MemCategory c) {
  auto r = replay::Simulate(s, {});
  REQUIRE(r.ok());
  return r->ledgers[0].category_peaks()[static_cast<int>(c)];
}

TEST_CASE("zero3: a DeepSpeed step holds about stage3_max_live_parameters gathered",
          "[zero3][replay]") {
  // Llama-2-70B: the largest projection is 8192 × 28672 elements, the most one fetch can
  // overshoot by; a recomputed layer (855.6M) holds all its projections while it runs.
  const int64_t largest = 8192LL * 28672;
  for (const char* live : {"1e9", "2e9"}) {
    INFO("max_live " << live);
    const Scenario s = Load(
        {{"training.global_batch", "32"}, {"parallel.deepspeed.stage3_max_live_parameters", live}});
    const int64_t max_live = s.parallel.deepspeed.stage3_max_live_parameters;
    const Bytes gathered = CategoryPeak(s, MemCategory::kGatheredParams);
    // Bytes include the layer's norms, folded into its projections: at most 0.01 % more.
    CHECK(gathered.count() <= (2 * (max_live + largest)) * 10001 / 10000);
    CHECK(gathered.count() >= 2 * max_live);
  }
}

TEST_CASE("zero3: the contiguous gradient buckets, per stage", "[zero3][replay][memory]") {
  const int64_t bucket = 2 * 500'000'000;  // reduce_bucket_size 16-bit elements
  auto comm = [](std::vector<config::Override> o) {
    o.push_back({"training.global_batch", "128"});
    o.push_back({"cluster.nodes", "16"});
    return CategoryPeak(Load(o), MemCategory::kCommBuffers).count();
  };
  // ZeRO-3: one bucket, allocated at initialisation.
  CHECK(comm({}) == bucket);
  // ZeRO-2 and ZeRO-1: one in the backward without overlap_comm (DeepSpeed's default there),
  // two with it ("double buffers").
  CHECK(comm({{"parallel.zero", "2"}}) == bucket);
  CHECK(comm({{"parallel.zero", "2"}, {"parallel.overlap_grad_reduce", "true"}}) == 2 * bucket);
  CHECK(comm({{"parallel.zero", "1"}}) == bucket);
  // Without contiguous gradients each reduction stages its bucket instead (at most a layer's
  // 16-bit gradients, 1.71 GB for a 70B layer, above the 1 GB bucket).
  CHECK(comm({{"parallel.zero", "2"}, {"parallel.deepspeed.contiguous_gradients", "false"}}) ==
        bucket);
  CHECK(comm({{"parallel.zero", "2"}, {"parallel.deepspeed.reduce_bucket_size", "2e8"}}) ==
        400'000'000);
}

}  // namespace
}  // namespace sim
