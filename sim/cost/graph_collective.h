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
//                 (share / bandwidth).
//   hierarchical  intra-node reduce-scatter (m GPUs per node), inter-node ring of the M/m shard
//                 among same-rail GPUs (m groups at once), intra-node all-gather; all-gather
//                 and reduce-scatter use the inter + intra (or intra + inter) halves. Not an
//                 NCCL algorithm: only when asked for by name.
//   nvls          all-reduce inside one node whose NVSwitch reduces (NVLink SHARP, H100 and
//                 later): every GPU pushes M into the switch and reads the reduced M back, so
//                 time = M / (B · η_nvls) (η_nvls from nccl-tests).
//   nvls_tree     all-reduce across NVSwitch nodes (NCCL 2.18+ NVLS tree): NVLS inside each
//                 node and an inter-node all-reduce of each rail's 1/m shard, the two pipelined
//                 in chunks, so time = the slower of the two.
//   collnet       all-reduce across the nodes of a SHARP fabric (NCCL CollNet Direct, or
//                 Chain without NVSwitches): intra-node reduce-scatter to the NIC heads, each
//                 node's M through its NICs into the switches' aggregation tree and back (each
//                 NIC carries M/heads once each way, at SHARP's efficiency, sim/spec/
//                 transport.h), intra-node all-gather, the three pipelined: time = the slowest.
//   auto          what NCCL's tuner runs (nccl_tuner.h): its choice of algorithm and protocol.
//
// On a node whose GPUs are linked point to point (`gpu_links: mesh`, each pair by one link of
// B/(gpn - 1)), the graph keeps one port of B per GPU, which a group of the whole node reaches
// (its rings decompose the mesh); a group of n < gpn GPUs of the node reaches only the links
// among them: its rings run on MeshRings(n) (n - 1, or n - 2 for 4 and 6) of each GPU's
// gpn - 1 links, its all-to-all on n - 1, a send on one.
//
// A call's time = NCCL's latency for the algorithm and protocol it runs (the tuner's tables,
// plus the node type's added step latencies and the switch hops beyond one) + the bytes over
// the graph's bandwidth, where each link carries its transport's efficiency (NVLink: the GPU's
// comm_efficiency; a NIC: its fabric transport's, sim/spec/transport.h), derated by the
// protocol (LL moves 8 bytes per 16, LL128 120 per 128) and by the ramp of the bottleneck's
// transport at the call's size. The pattern of a group (seconds per byte, busiest link) is
// cached, so a collective costs O(1) after its group's first.

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "absl/container/inlined_vector.h"
#include "absl/container/node_hash_map.h"
#include "absl/types/span.h"
#include "sim/cluster/topology.h"
#include "sim/cost/collective_cost.h"
#include "sim/cost/nccl_tuner.h"
#include "sim/spec/transport.h"

namespace sim::cost {

// The point-to-point transfers of one step, each its links and its share of the phase's
// tensor, held flat: every transfer's links in one vector, with where each transfer starts. A
// ring over 262,144 GPUs on 8 rails makes two million transfers per phase; a heap vector per
// transfer was a third of pricing a 16,384-GPU ring (malloc and free in BM_Build16kAndPriceAll),
// and a 12-link inline vector per transfer (64 bytes, mostly empty) spent a third of the
// 262,144-GPU run clearing the fresh pages it filled.
class TransferList {
 public:
  // Starts a transfer carrying `share` of the tensor; the routes appended next are its links.
  void Begin(double share) {
    starts_.push_back(links_.size());
    shares_.push_back(share);
  }
  void Append(const std::vector<int32_t>& route) {
    links_.insert(links_.end(), route.begin(), route.end());
  }
  // Ends the transfer begun last, dropping it if it crossed no link (a GPU to itself).
  void End() {
    if (starts_.back() == links_.size()) {
      starts_.pop_back();
      shares_.pop_back();
    }
  }
  void Reserve(size_t transfers, size_t links) {
    starts_.reserve(transfers);
    shares_.reserve(transfers);
    links_.reserve(links);
  }
  size_t size() const { return shares_.size(); }
  size_t crossings() const { return links_.size(); }
  double share(size_t i) const { return shares_[i]; }
  absl::Span<const int32_t> links(size_t i) const {
    const size_t end = i + 1 < starts_.size() ? starts_[i + 1] : links_.size();
    return absl::MakeConstSpan(links_.data() + starts_[i], end - starts_[i]);
  }

 private:
  std::vector<int32_t> links_;
  std::vector<size_t> starts_;
  std::vector<double> shares_;
};

class GraphCostModel final : public CollectiveCostModel {
 public:
  GraphCostModel(cluster::Topology topology, const ClusterSpec& cluster,
                 CollectiveAlgorithm algorithm);
  // Valid as long as the model (prices are kept, each where it was first put).
  const PricedCollective& Price(CollectiveKind kind, Bytes tensor, CommGroup group, int32_t buckets,
                                CollectiveAlgorithm algorithm) const;
  const PricedCollective& Price(CollectiveKind kind, Bytes tensor, CommGroup group,
                                int32_t buckets) const override {
    return Price(kind, tensor, group, buckets, algorithm_);
  }
  const cluster::Topology& topology() const { return topology_; }
  // What NCCL's tuner is told about a group (nccl_tuner.h NcclGraphs), from this cluster.
  NcclGraphs GraphsFor(const CommGroup& group) const;

 private:
  // One phase: time = bw_passes · bytes · seconds_per_byte / (protocol · ramp).
  struct Phase {
    double seconds_per_byte = 0;  // of the phase's tensor, one pass, at the links' efficiency
    int64_t bw_passes = 0;        // ring: its steps; tree: 2 (reduce, broadcast), pipelined
    Duration hop_extra;           // switch hops of the slowest transfer beyond one switch
    int64_t intra_steps = 0, inter_steps = 0;  // steps within and across nodes
    const Transport* transport = nullptr;      // of the busiest link: its ramp
    // Of the phase's tensor, the share that crosses the busiest link in one pass (the sum of
    // its transfers' shares): a network transport's ramp is read at the bytes each NIC moves.
    double busiest_share = 0;
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
  Phase SharpPhase(const std::vector<std::vector<int64_t>>& copies) const;
  Phase Settle(const TransferList& transfers) const;
  // Appends the route from GPU a to GPU b (Topology::Route) to the links of the transfer begun
  // last.
  void AppendRoute(int64_t a, int64_t b, std::optional<int64_t> rail, TransferList& t) const;
  std::optional<Pattern> MakePattern(CollectiveKind kind, const CommGroup& g,
                                     CollectiveAlgorithm a) const;
  const Pattern* CachedPattern(CollectiveKind kind, const CommGroup& g,
                               CollectiveAlgorithm a) const;
  // A node whose GPUs are linked point to point (NodeSpec::gpu_mesh): what part of it reaches.
  void OnMesh(CollectiveKind kind, const CommGroup& g, Pattern& p) const;
  const NcclTuner& TunerFor(const CommGroup& g) const;
  PricedCollective PriceUncached(CollectiveKind kind, Bytes tensor, CommGroup group,
                                 int32_t buckets, CollectiveAlgorithm algorithm) const;
  // NCCL's latency of one call with the node type's added step latencies and extra hops.
  Duration Latency(CollectiveKind kind, CollectiveAlgorithm a, NcclProtocol p, Bytes call,
                   const CommGroup& g, const Pattern& pattern) const;

  cluster::Topology topology_;
  ClusterSpec cluster_;
  const Transport* intra_;
  const Transport* inter_;
  double intra_efficiency_, inter_efficiency_;
  std::optional<double> nvls_efficiency_;
  Bandwidth nvlink_;
  Duration switch_latency_;
  CollectiveAlgorithm algorithm_;
  mutable std::map<std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int>,
                   std::optional<Pattern>>
      cache_;
  mutable std::map<std::pair<int64_t, int64_t>, std::unique_ptr<NcclTuner>> tuners_;
  // Whole prices by (kind, bytes, group, buckets, algorithm): a replay asks the same few
  // collectives thousands of times. Hashed (a lookup took 233 instructions in the ordered map
  // it replaces), in nodes that stay where they are, so that Price can hand out references.
  using PriceKey =
      std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int32_t, int>;
  mutable absl::node_hash_map<PriceKey, PricedCollective> prices_;
  // In front of prices_, a slot per multiplicative mix of the key (as RooflineCostModel::Time
  // remembers op times): the tuple's hash and the node's load were 3.9 % of the default
  // scenario's replay in cycles (perf), for a few distinct collectives asked 1,770 times.
  // A copy of the model starts with none: its slots would point into the original's prices.
  struct RecentPrice {
    PriceKey key;
    const PricedCollective* price = nullptr;
  };
  struct RecentPrices {
    RecentPrices() = default;
    RecentPrices(const RecentPrices&) {}
    RecentPrices& operator=(const RecentPrices&) {
      slots.clear();
      return *this;
    }
    std::vector<RecentPrice> slots;
  };
  static constexpr size_t kRecentPrices = 64;  // a power of two
  mutable RecentPrices recent_;
};

}  // namespace sim::cost
