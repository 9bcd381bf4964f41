#pragma once
// The inter-node fabric of a cluster (topologies/fabrics/NAME.yaml): a two- or three-level fat
// tree, rail-optimised or not, with an oversubscription ratio.

#include <cstdint>
#include <string>

#include "sim/base/units.h"

namespace sim {

struct FabricSpec {
  std::string name;
  int levels = 2;               // 2: leaf + spine; 3: leaf + spine + core (pods of leaves)
  bool rail_optimized = true;   // NIC k of every node connects to a leaf of rail k
  // Leaf downlink bandwidth : uplink bandwidth. 1 = non-blocking; 4 = a 4:1 oversubscribed spine.
  double oversubscription = 1.0;
  int64_t leaf_ports = 32;      // NIC-facing ports per leaf
  int64_t pod_leaves = 16;      // leaves per pod (three levels)
  Bandwidth link_bandwidth;     // switch-to-switch port bandwidth, one direction
  Duration switch_latency = Duration::Nanoseconds(600);
  std::string source;
};

}  // namespace sim
