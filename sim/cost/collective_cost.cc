#include "sim/cost/collective_cost.h"

#include "sim/cluster/topology.h"
#include "sim/cost/graph_collective.h"

namespace sim::cost {

absl::StatusOr<std::unique_ptr<CollectiveCostModel>> MakeCollectiveCostModel(const Scenario& s) {
  auto topology = cluster::Topology::Build(s.cluster);
  if (!topology.ok()) return topology.status();
  return std::make_unique<GraphCostModel>(*std::move(topology), s.cluster, s.parallel.collective);
}

absl::StatusOr<const CollectiveCostModel*> CostModelCache::For(const Scenario& s) {
  for (const Entry& e : entries_) {
    if (e.algorithm == s.parallel.collective && e.cluster == s.cluster) return e.model.get();
  }
  auto model = MakeCollectiveCostModel(s);
  if (!model.ok()) return model.status();
  if (entries_.size() == kEntries) entries_.erase(entries_.begin());
  entries_.push_back({s.cluster, s.parallel.collective, *std::move(model)});
  return entries_.back().model.get();
}

}  // namespace sim::cost
