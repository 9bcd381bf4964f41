#pragma once
// Collectives priced on the cluster graph (sim/cluster): each algorithm is decomposed into the
// point-to-point transfers of one step, routed over the fabric; transfers that cross the same
// directed link in the same step share it equally (a static per-link load count: the max-min
// fair share when every flow is bottlenecked on its most loaded link).
//
//   ring          c channels (one per NIC when the group spans nodes, as NCCL builds one ring
//                 per NIC; the inter-node hop of channel k leaves and enters through NIC k, the
//                 data reaching that NIC's GPU over NVLink as NCCL's PXN does). Each step every
//                 member sends M/(c·n) to its successor; n − 1 steps (all-gather,
//                 reduce-scatter) or 2(n − 1) (all-reduce).
//   tree          all-reduce across nodes only (NCCL has no tree all-gather/reduce-scatter, so
//                 those fall back to ring): a double binary tree over the nodes per channel,
//                 each tree carrying M/2; pipelined, so time = 2 · M · max over transfers of
//                 (share / bandwidth) + 2 · (⌈log2 nodes⌉ + m − 1) step latencies.
//   hierarchical  intra-node reduce-scatter (m GPUs per node), inter-node ring of the M/m shard
//                 among same-rail GPUs (m groups at once), intra-node all-gather; all-gather
//                 and reduce-scatter use the inter + intra (or intra + inter) halves.
//   nvls          all-reduce inside one node whose NVSwitch reduces (NVLink SHARP, H100 and
//                 later): every GPU pushes M into the switch and reads the reduced M back, so
//                 time = M / (B · η_nvls) + 2 step latencies (η_nvls from nccl-tests).
//   nvls_tree     all-reduce across NVSwitch nodes (NCCL 2.18+ NVLS tree): NVLS inside each
//                 node and an inter-node all-reduce of each rail's 1/m shard, the two pipelined
//                 in chunks, so time = the slower of the two + both latencies.
//   auto          the fastest of these for each collective, as NCCL's tuner chooses.
// Per-step latency: the node type's intra- or inter-node latency plus the switch hops of the
// slowest transfer. Bandwidth is derated by the GPU type's calibrated comm efficiency and by its
// size ramp (comm_size_efficiency: the fraction of the large-message bandwidth NCCL reaches at
// a bucket's size, fitted to nccl-tests). The
// pattern of a group (seconds per byte per step, latency, busiest link) is cached, so a
// collective costs O(1) after its group's first.

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "sim/cluster/topology.h"
#include "sim/cost/collective_cost.h"

namespace sim::cost {

class GraphCostModel final : public CollectiveCostModel {
 public:
  GraphCostModel(cluster::Topology topology, const ClusterSpec& cluster,
                 CollectiveAlgorithm algorithm);
  PricedCollective Price(CollectiveKind kind, Bytes tensor, CommGroup group, int32_t buckets,
                         CollectiveAlgorithm algorithm) const;
  PricedCollective Price(CollectiveKind kind, Bytes tensor, CommGroup group,
                         int32_t buckets) const override {
    return Price(kind, tensor, group, buckets, algorithm_);
  }
  const cluster::Topology& topology() const { return topology_; }

 private:
  // One phase: time = bw_passes · bytes · seconds_per_byte / η
  //                   + latency_steps · buckets · latency.
  struct Phase {
    double seconds_per_byte = 0;  // of the phase's tensor, for one pass of its transfers
    Duration latency;             // one step: software latency plus the slowest path's hops
    int64_t bw_passes = 0;        // ring: its steps; tree: 2 (reduce, broadcast), pipelined
    int64_t latency_steps = 0;
    int32_t busiest_link = -1;
    int32_t busiest_load = 0;
  };
  struct Pattern {
    std::vector<std::pair<Phase, double>> phases;  // with the fraction of M each phase moves
    bool pipelined = false;  // phases overlap chunk by chunk: the slowest sets the time
  };
  // Members of every copy of the group, as GPU ids.
  std::vector<std::vector<int64_t>> Members(const CommGroup& g) const;
  Phase RingPhase(const std::vector<std::vector<int64_t>>& rings, int64_t passes) const;
  Phase TreePhase(const std::vector<std::vector<int64_t>>& groups) const;
  std::optional<Pattern> MakePattern(CollectiveKind kind, const CommGroup& g,
                                     CollectiveAlgorithm a) const;
  const Pattern* CachedPattern(CollectiveKind kind, const CommGroup& g,
                               CollectiveAlgorithm a) const;

  cluster::Topology topology_;
  Duration intra_latency_, inter_latency_;
  double efficiency_;
  std::optional<double> nvls_efficiency_;
  GpuCalibration size_efficiency_;  // its comm_size_efficiency ramp
  Bandwidth nvlink_;
  CollectiveAlgorithm algorithm_;
  mutable std::map<std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int>,
                   std::optional<Pattern>>
      cache_;
};

}  // namespace sim::cost
