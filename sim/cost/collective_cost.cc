#include "sim/cost/collective_cost.h"

#include <algorithm>

namespace sim::cost {

RingCostModel::RingCostModel(const ClusterSpec& cluster)
    : intra_(cluster.node.intra_node_bandwidth),
      intra_latency_(cluster.node.intra_node_latency),
      inter_latency_(cluster.node.inter_node_latency),
      efficiency_(cluster.gpu.calibration.comm_efficiency) {
  const double node_nics = cluster.node.nic_bandwidth.bytes_per_s() *
                           static_cast<double>(cluster.node.nics_per_node);
  inter_ = Bandwidth::BytesPerSecond(std::min(intra_.bytes_per_s(), node_nics));
}

Duration RingCostModel::Cost(CollectiveKind kind, Bytes tensor, CommGroup group,
                             int32_t buckets) const {
  if (group.size <= 1 || kind == CollectiveKind::kNone) return Duration::Zero();
  const bool spans_nodes = group.nodes > 1;
  const int64_t steps = (kind == CollectiveKind::kAllReduce ? 2 : 1) * (group.size - 1);
  const Duration alpha = (spans_nodes ? inter_latency_ : intra_latency_) * (steps * buckets);
  const Bandwidth bw = (spans_nodes ? inter_ : intra_) * efficiency_;
  return alpha + BytesSentPerGpu(kind, tensor, group.size) / bw;
}

std::unique_ptr<CollectiveCostModel> MakeCollectiveCostModel(const Scenario& s) {
  return std::make_unique<RingCostModel>(s.cluster);
}

}  // namespace sim::cost
