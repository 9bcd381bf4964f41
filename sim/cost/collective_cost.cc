#include "sim/cost/collective_cost.h"

#include "sim/cluster/topology.h"
#include "sim/cost/graph_collective.h"

namespace sim::cost {

absl::StatusOr<std::unique_ptr<CollectiveCostModel>> MakeCollectiveCostModel(const Scenario& s) {
  auto topology = cluster::Topology::Build(s.cluster);
  if (!topology.ok()) return topology.status();
  return std::make_unique<GraphCostModel>(*std::move(topology), s.cluster, s.parallel.collective);
}

}  // namespace sim::cost
