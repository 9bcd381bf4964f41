#pragma once
// Time of a collective (SPEC §3.5). The interface is the seam the topology issue replaces: a
// graph-based model with routes, algorithms and link sharing implements the same Cost().

#include <memory>

#include "sim/base/units.h"
#include "sim/spec/scenario.h"
#include "sim/workload/program.h"

namespace sim::cost {

class CollectiveCostModel {
 public:
  virtual ~CollectiveCostModel() = default;
  // Time for one collective of `kind` over `group` moving a full tensor of `tensor` bytes,
  // launched as `buckets` separate collectives of equal size.
  virtual Duration Cost(CollectiveKind kind, Bytes tensor, CommGroup group,
                        int32_t buckets) const = 0;
};

// Ring algorithm, latency-bandwidth (alpha-beta) model with the node type's two bandwidths:
//   t = buckets · steps · α + bytes_sent_per_gpu / (B · η)
// steps = n − 1 (all-gather, reduce-scatter) or 2(n − 1) (all-reduce); bytes sent per SPEC §2;
// α the intra- or inter-node latency; η the GPU type's calibrated comm efficiency. B is the bus
// bandwidth: inside one node the per-GPU NVLink bandwidth; across nodes NCCL runs one ring
// (channel) per NIC, each crossing every node boundary once, so a NIC carries 1/c of the
// traffic of c channels and B = min(NVLink per GPU, NICs per node × NIC bandwidth) — e.g.
// DGX H100: min(450, 8 × 50) = 400 GB/s.
class RingCostModel final : public CollectiveCostModel {
 public:
  explicit RingCostModel(const ClusterSpec& cluster);
  Duration Cost(CollectiveKind kind, Bytes tensor, CommGroup group,
                int32_t buckets) const override;

  Bandwidth IntraNodeBandwidth() const { return intra_; }
  Bandwidth InterNodeBandwidth() const { return inter_; }

 private:
  Bandwidth intra_, inter_;
  Duration intra_latency_, inter_latency_;
  double efficiency_;
};

std::unique_ptr<CollectiveCostModel> MakeCollectiveCostModel(const Scenario& s);

}  // namespace sim::cost
