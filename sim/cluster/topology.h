#pragma once
// The cluster as a graph: GPUs, each node's NVSwitch domain, NICs, leaf/spine/core switches as
// vertices and directed links (one per direction of each cable) with bandwidth and latency as
// edges. Built from a node type × nodes × fabric (a rail-optimised or plain fat tree with an
// oversubscription ratio), validated at build time (every GPU reaches every other).
// Boost.Graph stays inside topology.cc.
//
// Fat-tree layout (two levels; three levels group leaves into pods joined by cores):
//   leaf downlink capacity D = leaf_ports × NIC bandwidth; uplink U = D / oversubscription,
//   spread over S = ceil(U / link_bandwidth) spines, one link of U / S to each.
//   Rail-optimised: NIC k of every node goes to a leaf of rail k (leaf_ports nodes per leaf);
//   otherwise all NICs of leaf_ports / NICs-per-node nodes share a leaf.
// Routes are closed-form: inside a node GPU → NVSwitch → GPU; across nodes GPU → its NIC →
// leaf [→ spine (→ core → spine)] → leaf → NIC → GPU, the spine chosen by a deterministic ECMP
// hash of (source node, destination node, rail).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "sim/base/units.h"
#include "sim/spec/scenario.h"

namespace sim::cluster {

struct Link {
  int32_t from = 0, to = 0;  // vertex ids
  Bandwidth bandwidth;       // one direction
  Duration latency;
  bool nvlink = false;  // a GPU's link into its node's NVSwitch (else PCIe to a NIC, or fabric)
};

struct TopologySummary {
  std::string fabric;
  int64_t gpus = 0, nodes = 0, nics = 0, leaves = 0, spines = 0, cores = 0;
  int64_t cables = 0;           // physical links (each is two directed links)
  Bandwidth injection_per_gpu;  // NIC bandwidth per GPU
  // The narrowest cut between the first and the second half of the nodes (max flow from the
  // one half's NICs to the other's over the fabric): for a fat tree, half the nodes' injection
  // divided by the oversubscription when the halves span the spine.
  Bandwidth bisection;
};

class Topology {
 public:
  static absl::StatusOr<Topology> Build(const ClusterSpec& cluster);

  int64_t gpus() const;
  int64_t gpus_per_node() const;
  int64_t nics_per_node() const;
  // Appends the directed links from GPU a to GPU b, in order. Across nodes each GPU uses its
  // first NIC, or NIC `rail` where it owns that NIC (GPUs with several NICs).
  void Route(int64_t a, int64_t b, std::vector<int32_t>& links) const;
  void Route(int64_t a, int64_t b, std::optional<int64_t> rail, std::vector<int32_t>& links) const;
  // The local GPU index that owns NIC `rail` (its PCIe neighbour).
  int64_t RailOwner(int64_t rail) const;
  const Link& link(int32_t id) const;
  int32_t num_links() const;
  // Every link, by id (link(id) is links()[id]): for loops over many links, without a call each.
  absl::Span<const Link> links() const;
  std::string LinkName(int32_t id) const;
  TopologySummary Summary() const;
  // Max-flow/min-cut between the halves of the nodes, bytes per second one way.
  double BisectionBytesPerSecond() const;
  // Graphviz of the fabric with each node collapsed into one vertex.
  std::string Dot() const;

 private:
  struct Impl;
  explicit Topology(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// The fabric used when a cluster names none: non-blocking, rail-optimised, two levels, with
// switch ports as fast as the node's NICs.
FabricSpec DefaultFabric(const NodeSpec& node);

}  // namespace sim::cluster
