// Processor sharing of a GPU's link classes by the collectives it runs at once
// (sim/cost/link_sharing.h), on a case computed by hand.

#include "sim/cost/link_sharing.h"

#include <catch2/catch.hpp>
#include <utility>
#include <vector>

namespace sim::cost {
namespace {

TEST_CASE("link sharing: collectives in one link class progress at 1/k each", "[cost]") {
  LinkSharing sharing(1);
  std::vector<std::pair<int32_t, double>> moved;
  auto record = [&](int32_t task, Duration finish) { moved.push_back({task, finish.seconds()}); };
  // A (10 s alone) starts at 0; B (4 s alone) at 2: A has 8 s left, both now at half rate.
  CHECK(sharing.Start(0, LinkClass::kFabric, 0, Duration::FromSeconds(10), Duration::Zero(),
                      record) == Duration::FromSeconds(10));
  CHECK(sharing.Start(0, LinkClass::kFabric, 1, Duration::FromSeconds(4), Duration::FromSeconds(2),
                      record) == Duration::FromSeconds(8));
  REQUIRE(moved.size() == 1);
  CHECK(moved[0].first == 0);
  CHECK(moved[0].second == Approx(2 + 2 * 8));
  // An NVLink collective on the same GPU shares nothing with them.
  CHECK(sharing.Start(0, LinkClass::kNvlink, 2, Duration::FromSeconds(1), Duration::FromSeconds(3),
                      record) == Duration::FromSeconds(1));
  CHECK(moved.size() == 1);
  // B ends at 10; A did 4 s of its work meanwhile and finishes its last 4 s alone, at 14:
  // 14 s of work in 14 s, as processor sharing conserves.
  sharing.Finish(0, LinkClass::kFabric, 1, Duration::FromSeconds(10), record);
  REQUIRE(moved.size() == 2);
  CHECK(moved[1].first == 0);
  CHECK(moved[1].second == Approx(14));
}

}  // namespace
}  // namespace sim::cost
