#pragma once
// The cost models and replay options Simulate builds for a scenario (sim/replay/replay.cc), for
// tests that call the replay's halves (FoldedReplay, ReplayFamily, ReplayRaw) directly.
#include <catch2/catch.hpp>
#include <memory>

#include "sim/cost/collective_cost.h"
#include "sim/cost/compute_cost.h"
#include "sim/replay/replay.h"

namespace sim {

struct ReplayModels {
  explicit ReplayModels(const Scenario& s)
      : compute(s.cluster.gpu, s.training.precision, s.cluster.node.host,
                s.cluster.node.gpus_per_node, s.training.flash_impl) {
    auto c = cost::MakeCollectiveCostModel(s);
    REQUIRE(c.ok());
    comm = *std::move(c);
    options.allocator.expandable_segments = s.runtime.expandable_segments;
  }
  std::unique_ptr<cost::CollectiveCostModel> comm;
  cost::RooflineCostModel compute;
  replay::ReplayOptions options;
};

}  // namespace sim
