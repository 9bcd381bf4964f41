#include "sim/cost/collective_cost.h"

#include "sim/cluster/topology.h"
#include "sim/cost/graph_collective.h"

namespace sim::cost {

absl::StatusOr<std::unique_ptr<CollectiveCostModel>> MakeCollectiveCostModel(const Scenario& s) {
  auto topology = cluster::Topology::Build(s.cluster);
  if (!topology.ok()) return topology.status();
  return std::make_unique<GraphCostModel>(*std::move(topology), s.cluster, s.parallel.collective);
}

const PricedCollective& SlowLinkCostModel::Price(CollectiveKind kind, Bytes tensor, CommGroup group,
                                                 int32_t buckets) const {
  const PricedCollective& base = base_.Price(kind, tensor, group, buckets);
  const double speed = kind == CollectiveKind::kSendRecv ? speed_.send : speed_.collective;
  if (group.nodes <= 1 || speed >= 1) return base;
  const Key key{kind,         tensor.count(), group.size,        group.nodes,
                group.stride, group.copies,   group.copy_offset, buckets};
  auto [it, added] = slowed_.try_emplace(key, base);
  if (added) {
    PricedCollective& p = it->second;
    p.time = p.latency + Duration::FromSeconds((base.time - base.latency).seconds() / speed);
  }
  return it->second;
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
