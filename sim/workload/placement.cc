#include "sim/workload/placement.h"

#include <set>

namespace sim {

Placement::Placement(const Scenario& s) : order_(s.parallel.rank_order) {
  size_[static_cast<int>(ParallelDim::kTp)] = s.parallel.tp;
  size_[static_cast<int>(ParallelDim::kCp)] = s.parallel.cp;
  size_[static_cast<int>(ParallelDim::kDp)] = s.dp();
  size_[static_cast<int>(ParallelDim::kPp)] = s.parallel.pp;
  int64_t stride = 1;
  for (ParallelDim d : order_) {
    stride_[static_cast<int>(d)] = stride;
    stride *= Size(d);
  }
  gpus_per_node_ = std::max<int64_t>(s.cluster.node.gpus_per_node, 1);
}

CommGroup Placement::Make(int64_t size, int64_t stride) const {
  // The nodes the members span: member i's node, i·stride / gpus_per_node, never falls as i
  // grows, so each new node is a change from the last (no set: a data-parallel group of 262,144
  // GPUs was counted into one at every call).
  int64_t nodes = 0, last = -1;
  for (int64_t i = 0; i < size; ++i) {
    const int64_t node = i * stride / gpus_per_node_;
    nodes += node != last ? 1 : 0;
    last = node;
  }
  // Every group of the block below `stride` runs at once: copies at offsets 0 .. stride - 1.
  return CommGroup{size, nodes, stride, stride, 1};
}

CommGroup Placement::Group(ParallelDim d) const { return Make(Size(d), Stride(d)); }

CommGroup Placement::GradientGroup() const {
  const int64_t cp = Size(ParallelDim::kCp), dp = Size(ParallelDim::kDp);
  if (cp == 1) return Group(ParallelDim::kDp);
  for (size_t i = 0; i + 1 < order_.size(); ++i) {
    const bool adjacent = (order_[i] == ParallelDim::kCp && order_[i + 1] == ParallelDim::kDp) ||
                          (order_[i] == ParallelDim::kDp && order_[i + 1] == ParallelDim::kCp);
    if (adjacent) return Make(cp * dp, Stride(order_[i]));
  }
  return Group(ParallelDim::kDp);
}

CommGroup Placement::StageNeighbours() const {
  const int64_t stride = Stride(ParallelDim::kPp);
  const std::set<int64_t> nodes = {0, stride / gpus_per_node_};
  // The stage-0 GPUs of the block below PP send at once (one copy each).
  return CommGroup{2, static_cast<int64_t>(nodes.size()), stride, stride, 1};
}

}  // namespace sim
