#pragma once
// The inter-node fabric of a cluster (topologies/fabrics/NAME.yaml): a two- or three-level fat
// tree, rail-optimised or not, with an oversubscription ratio; or an explicit list of switches
// and links for anything else.

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/units.h"

namespace sim {

// One cable of an explicit fabric. Endpoints are switch names or "nodeN.nicK" (NIC K of node
// N); the cable carries `bandwidth` in each direction.
struct FabricLink {
  std::string a, b;
  Bandwidth bandwidth;
  Duration latency;
  bool operator==(const FabricLink&) const = default;
};

struct FabricSpec {
  enum class Kind { kFatTree, kExplicit };
  std::string name;
  Kind kind = Kind::kFatTree;
  // Explicit fabrics: the switches and cables; routes are shortest paths (fewest hops).
  std::vector<std::string> switches;
  std::vector<FabricLink> links;
  int levels = 2;              // 2: leaf + spine; 3: leaf + spine + core (pods of leaves)
  bool rail_optimized = true;  // NIC k of every node connects to a leaf of rail k
  // Leaf downlink bandwidth : uplink bandwidth. 1 = non-blocking; 4 = a 4:1 oversubscribed spine.
  double oversubscription = 1.0;
  int64_t leaf_ports = 32;   // NIC-facing ports per leaf
  int64_t pod_leaves = 16;   // leaves per pod (three levels)
  Bandwidth link_bandwidth;  // switch-to-switch port bandwidth, one direction
  Duration switch_latency = Duration::Nanoseconds(600);
  // NCCL's network transport over this fabric (sim/spec/transport.h): ib, roce, efa (AWS's
  // plugin's SENDRECV protocol, p4d/p4de), efa-rdma (its RDMA protocol, p5 and later), tcpx,
  // tcpxo or socket.
  std::string transport = "ib";
  // In-network reduction in the switches (NVIDIA SHARP on InfiniBand), enabled for NCCL (the
  // nccl-rdma-sharp-plugins loaded, NCCL_COLLNET_ENABLE=1): NCCL's CollNet all-reduce is then
  // a candidate of its tuner (sim/cost/graph_collective.h `collnet`).
  bool sharp = false;
  std::string source;
  bool operator==(const FabricSpec&) const = default;
};

}  // namespace sim
