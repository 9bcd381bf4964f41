#include "sim/cost/graph_collective.h"

#include <algorithm>
#include <cmath>

#include "sim/base/check.h"

namespace sim::cost {

namespace {

// A point-to-point transfer of one step: its links and its share of the phase's tensor.
struct Transfer {
  std::vector<int32_t> links;
  double share = 0;
};

}  // namespace

GraphCostModel::GraphCostModel(cluster::Topology topology, const ClusterSpec& cluster,
                               CollectiveAlgorithm algorithm)
    : topology_(std::move(topology)),
      intra_latency_(cluster.node.intra_node_latency),
      inter_latency_(cluster.node.inter_node_latency),
      efficiency_(cluster.gpu.calibration.comm_efficiency),
      nvls_efficiency_(cluster.gpu.calibration.nvls_efficiency),
      size_efficiency_(cluster.gpu.calibration),
      nvlink_(cluster.node.intra_node_bandwidth),
      algorithm_(algorithm) {}

std::vector<std::vector<int64_t>> GraphCostModel::Members(const CommGroup& g) const {
  std::vector<std::vector<int64_t>> out;
  for (int64_t q = 0; q < g.copies; ++q) {
    std::vector<int64_t> m;
    for (int64_t i = 0; i < g.size; ++i) m.push_back(q * g.copy_offset + i * g.stride);
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// Prices one step of concurrent transfers: each link's bandwidth is shared equally by the
// transfers crossing it; a transfer runs at its most loaded link's share.
void Settle(const cluster::Topology& topo, const std::vector<Transfer>& transfers,
            Duration base_latency, double& seconds_per_byte, Duration& latency,
            int32_t& busiest_link, int32_t& busiest_load) {
  std::vector<int32_t> load(topo.num_links(), 0);
  for (const Transfer& t : transfers) {
    for (int32_t l : t.links) load[l]++;
  }
  seconds_per_byte = 0;
  latency = Duration();
  busiest_load = 0;
  busiest_link = -1;
  for (const Transfer& t : transfers) {
    double bw = 1e300;
    Duration hops;
    for (int32_t l : t.links) {
      bw = std::min(bw, topo.link(l).bandwidth.bytes_per_s() / load[l]);
      hops += topo.link(l).latency;
    }
    if (!t.links.empty()) seconds_per_byte = std::max(seconds_per_byte, t.share / bw);
    latency = std::max(latency, base_latency + hops);
  }
  // The bottleneck: the used link with the smallest share of bandwidth per transfer.
  double tightest = 1e300;
  for (int32_t l = 0; l < topo.num_links(); ++l) {
    if (load[l] == 0) continue;
    const double per_transfer = topo.link(l).bandwidth.bytes_per_s() / load[l];
    if (per_transfer < tightest) {
      tightest = per_transfer;
      busiest_link = l;
      busiest_load = load[l];
    }
  }
}

int64_t NodeOf(const cluster::Topology& topo, int64_t gpu) { return gpu / topo.gpus_per_node(); }
// The local GPU of a node that owns NIC `rail`.
int64_t RailGpu(const cluster::Topology& topo, int64_t rail) { return topo.RailOwner(rail); }

// Members grouped by node, in order of first appearance.
std::vector<std::vector<int64_t>> ByNode(const cluster::Topology& topo,
                                         const std::vector<int64_t>& members) {
  std::vector<std::vector<int64_t>> groups;
  std::vector<int64_t> nodes;
  for (int64_t m : members) {
    const int64_t n = NodeOf(topo, m);
    auto it = std::find(nodes.begin(), nodes.end(), n);
    if (it == nodes.end()) {
      nodes.push_back(n);
      groups.push_back({m});
    } else {
      groups[it - nodes.begin()].push_back(m);
    }
  }
  return groups;
}

// The member of a node group that owns NIC `rail`, or the rail-th member when none does.
size_t RailIndex(const cluster::Topology& topo, const std::vector<int64_t>& group, int64_t rail) {
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] % topo.gpus_per_node() == RailGpu(topo, rail)) return i;
  }
  return static_cast<size_t>(rail) % group.size();
}

}  // namespace

GraphCostModel::Phase GraphCostModel::RingPhase(const std::vector<std::vector<int64_t>>& rings,
                                                int64_t passes) const {
  std::vector<Transfer> transfers;
  bool spans = false;
  for (const auto& ring : rings) {
    const auto groups = ByNode(topology_, ring);
    spans = spans || groups.size() > 1;
    // One channel per NIC a node's members drive (NCCL builds a ring per NIC): every NIC of
    // the node when several members per node take turns at the exit; the NICs one GPU owns
    // when it is the node's only member (the inter-node rings of hierarchical algorithms).
    std::vector<int64_t> rails = {0};
    if (groups.size() > 1 && groups.front().size() > 1) {
      rails.resize(topology_.nics_per_node());
      for (int64_t k = 0; k < topology_.nics_per_node(); ++k) rails[k] = k;
    } else if (groups.size() > 1) {
      const int64_t local = ring.front() % topology_.gpus_per_node();
      std::vector<int64_t> owned;
      for (int64_t k = 0; k < topology_.nics_per_node(); ++k) {
        if (topology_.RailOwner(k) == local) owned.push_back(k);
      }
      if (!owned.empty()) rails = owned;
    }
    const int64_t channels = static_cast<int64_t>(rails.size());
    const double share = 1.0 / static_cast<double>(channels * static_cast<int64_t>(ring.size()));
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t k = rails[c];
      // Channel c on rail k: each node's members from its rail-k GPU on; the inter-node hop
      // leaves through that node's rail-k GPU (PXN) towards the next node's.
      std::vector<int64_t> order;
      std::vector<size_t> node_start;
      for (const auto& g : groups) {
        node_start.push_back(order.size());
        const size_t r = groups.size() > 1 ? RailIndex(topology_, g, k) : 0;
        for (size_t i = 0; i < g.size(); ++i) order.push_back(g[(r + i) % g.size()]);
      }
      for (size_t i = 0; i < order.size(); ++i) {
        const int64_t from = order[i], to = order[(i + 1) % order.size()];
        Transfer t;
        t.share = share;
        if (NodeOf(topology_, from) != NodeOf(topology_, to)) {
          // The node's exit GPU is the first of its rotation (the rail-k GPU).
          const size_t node =
              std::upper_bound(node_start.begin(), node_start.end(), i) - node_start.begin() - 1;
          const int64_t exit = order[node_start[node]];
          topology_.Route(from, exit, t.links);
          topology_.Route(exit, to, k, t.links);
        } else {
          topology_.Route(from, to, t.links);
        }
        if (!t.links.empty()) transfers.push_back(std::move(t));
      }
    }
  }
  Phase p;
  p.bw_passes = passes;
  p.latency_steps = passes;
  Settle(topology_, transfers, spans ? inter_latency_ : intra_latency_, p.seconds_per_byte,
         p.latency, p.busiest_link, p.busiest_load);
  return p;
}

GraphCostModel::Phase GraphCostModel::TreePhase(
    const std::vector<std::vector<int64_t>>& copies) const {
  std::vector<Transfer> transfers;
  int64_t nodes = 1, per_node = 1;
  for (const auto& members : copies) {
    const auto groups = ByNode(topology_, members);
    nodes = static_cast<int64_t>(groups.size());
    per_node = static_cast<int64_t>(groups.front().size());
    const int64_t channels = per_node > 1 ? topology_.nics_per_node() : 1;
    for (int64_t k = 0; k < channels; ++k) {
      std::vector<int64_t> rail_gpu;
      for (const auto& g : groups) rail_gpu.push_back(g[RailIndex(topology_, g, k)]);
      // Two binary trees (heap order, and mirrored), each carrying half the data.
      for (int tree = 0; tree < 2; ++tree) {
        for (int64_t j = 1; j < nodes; ++j) {
          const int64_t child = tree == 0 ? j : nodes - 1 - j;
          const int64_t parent = tree == 0 ? (j - 1) / 2 : nodes - 1 - (j - 1) / 2;
          Transfer t;
          t.share = 1.0 / static_cast<double>(2 * channels);
          topology_.Route(rail_gpu[child], rail_gpu[parent], k, t.links);
          transfers.push_back(std::move(t));
        }
      }
      // The intra-node chain of each node, pipelined with the trees.
      for (const auto& g : groups) {
        for (size_t i = 0; i + 1 < g.size(); ++i) {
          Transfer t;
          t.share = 1.0 / static_cast<double>(channels);
          topology_.Route(g[i], g[i + 1], t.links);
          transfers.push_back(std::move(t));
        }
      }
    }
  }
  Phase p;
  p.bw_passes = 2;
  p.latency_steps =
      2 * (static_cast<int64_t>(std::ceil(std::log2(static_cast<double>(nodes)))) + per_node - 1);
  Settle(topology_, transfers, inter_latency_, p.seconds_per_byte, p.latency, p.busiest_link,
         p.busiest_load);
  return p;
}

std::optional<GraphCostModel::Pattern> GraphCostModel::MakePattern(CollectiveKind kind,
                                                                   const CommGroup& g,
                                                                   CollectiveAlgorithm a) const {
  const auto members = Members(g);
  const int64_t n = g.size;
  const bool all_reduce = kind == CollectiveKind::kAllReduce;
  Pattern p;
  if (kind == CollectiveKind::kSendRecv) {
    // One transfer per copy, member 0 -> member 1, every copy at once; a GPU leaves its node
    // through its own NIC (rail-aligned stages), so routes use the sender's rail.
    if (a != CollectiveAlgorithm::kRing) return std::nullopt;
    std::vector<Transfer> transfers;
    for (const auto& copy : members) {
      Transfer t;
      t.share = 1.0;
      topology_.Route(copy[0], copy[1], t.links);
      if (!t.links.empty()) transfers.push_back(std::move(t));
    }
    Phase ph;
    ph.bw_passes = 1;
    ph.latency_steps = 1;
    const bool spans = g.nodes > 1;
    Settle(topology_, transfers, spans ? inter_latency_ : intra_latency_, ph.seconds_per_byte,
           ph.latency, ph.busiest_link, ph.busiest_load);
    p.phases.push_back({ph, 1.0});
    return p;
  }
  if (a == CollectiveAlgorithm::kRing) {
    p.phases.push_back({RingPhase(members, (all_reduce ? 2 : 1) * (n - 1)), 1.0});
    return p;
  }
  const auto groups = ByNode(topology_, members.front());
  const int64_t nodes = static_cast<int64_t>(groups.size());
  const int64_t per_node = static_cast<int64_t>(groups.front().size());
  if (a == CollectiveAlgorithm::kNvls) {
    if (!all_reduce || nodes > 1 || !nvls_efficiency_) return std::nullopt;
    // Each GPU's NVLink carries M out (multimem reduce-load) and M in (multicast store); the
    // efficiency is already the NVLS one, so the efficiency_ division in Price is undone here.
    Phase p1;
    p1.seconds_per_byte = efficiency_ / (nvlink_.bytes_per_s() * *nvls_efficiency_);
    p1.latency = intra_latency_;
    p1.bw_passes = 1;
    p1.latency_steps = 2;
    p.phases.push_back({p1, 1.0});
    return p;
  }
  if (nodes < 2) return std::nullopt;  // the others are inter-node algorithms
  if (a == CollectiveAlgorithm::kNvlsTree) {
    if (!all_reduce || per_node < 2 || !nvls_efficiency_) return std::nullopt;
    Phase intra;
    intra.seconds_per_byte = efficiency_ / (nvlink_.bytes_per_s() * *nvls_efficiency_);
    intra.latency = intra_latency_;
    intra.bw_passes = 1;
    intra.latency_steps = 2;
    std::vector<std::vector<int64_t>> inter;
    for (const auto& copy : members) {
      const auto by_node = ByNode(topology_, copy);
      for (int64_t i = 0; i < per_node; ++i) {
        std::vector<int64_t> ring;
        for (const auto& node : by_node) ring.push_back(node[i]);
        inter.push_back(std::move(ring));
      }
    }
    p.phases = {{intra, 1.0},
                {RingPhase(inter, 2 * (nodes - 1)), 1.0 / static_cast<double>(per_node)}};
    p.pipelined = true;
    return p;
  }
  if (a == CollectiveAlgorithm::kTree) {
    if (!all_reduce) return std::nullopt;  // NCCL: tree for all-reduce only
    p.phases.push_back({TreePhase(members), 1.0});
    return p;
  }
  if (per_node < 2) return std::nullopt;
  std::vector<std::vector<int64_t>> intra, inter;
  for (const auto& copy : members) {
    const auto by_node = ByNode(topology_, copy);
    for (const auto& node : by_node) intra.push_back(node);
    for (int64_t i = 0; i < per_node; ++i) {
      std::vector<int64_t> ring;
      for (const auto& node : by_node) ring.push_back(node[i]);
      inter.push_back(std::move(ring));
    }
  }
  const double shard = 1.0 / static_cast<double>(per_node);
  const Phase in_phase = RingPhase(intra, per_node - 1);
  switch (kind) {
    case CollectiveKind::kAllGather:
      p.phases = {{RingPhase(inter, nodes - 1), shard}, {in_phase, 1.0}};
      break;
    case CollectiveKind::kReduceScatter:
      p.phases = {{in_phase, 1.0}, {RingPhase(inter, nodes - 1), shard}};
      break;
    case CollectiveKind::kAllReduce:
      p.phases = {{in_phase, 1.0}, {RingPhase(inter, 2 * (nodes - 1)), shard}, {in_phase, 1.0}};
      break;
    case CollectiveKind::kNone:
    case CollectiveKind::kSendRecv:
      return std::nullopt;
  }
  return p;
}

const GraphCostModel::Pattern* GraphCostModel::CachedPattern(CollectiveKind kind,
                                                             const CommGroup& g,
                                                             CollectiveAlgorithm a) const {
  const auto key = std::make_tuple(static_cast<int>(kind), g.size, g.nodes, g.stride, g.copies,
                                   g.copy_offset, static_cast<int>(a));
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, MakePattern(kind, g, a)).first;
  return it->second ? &*it->second : nullptr;
}

PricedCollective GraphCostModel::Price(CollectiveKind kind, Bytes tensor, CommGroup group,
                                       int32_t buckets, CollectiveAlgorithm algorithm) const {
  PricedCollective best;
  if (group.size <= 1 || kind == CollectiveKind::kNone) return best;
  std::vector<CollectiveAlgorithm> candidates;
  if (kind == CollectiveKind::kSendRecv) {
    candidates = {CollectiveAlgorithm::kRing};  // point-to-point: no algorithm choice
  } else if (algorithm == CollectiveAlgorithm::kAuto) {
    candidates = {CollectiveAlgorithm::kRing, CollectiveAlgorithm::kTree,
                  CollectiveAlgorithm::kHierarchical, CollectiveAlgorithm::kNvls,
                  CollectiveAlgorithm::kNvlsTree};
  } else {
    candidates = {algorithm};
  }
  bool found = false;
  // The bandwidth ramp of a bucket of this size (per-rank bytes, as nccl-tests counts them).
  const double ramp = size_efficiency_.CommSizeEfficiency(tensor / std::max<int32_t>(buckets, 1));
  for (CollectiveAlgorithm a : candidates) {
    const Pattern* p = CachedPattern(kind, group, a);
    if (p == nullptr) continue;
    double seconds = 0, latency = 0, slowest_bw = 0;
    int32_t busiest = -1, load = 0;
    double slowest = -1;
    for (const auto& [phase, fraction] : p->phases) {
      const double bw = static_cast<double>(tensor.count()) * fraction * phase.seconds_per_byte *
                        static_cast<double>(phase.bw_passes) / (efficiency_ * ramp);
      const double lat = phase.latency.seconds() * static_cast<double>(phase.latency_steps) *
                         static_cast<double>(buckets);
      seconds += bw + lat;
      latency += lat;
      slowest_bw = std::max(slowest_bw, bw);
      if (bw + lat > slowest) {
        slowest = bw + lat;
        busiest = phase.busiest_link;
        load = phase.busiest_load;
      }
    }
    if (p->pipelined) seconds = slowest_bw + latency;
    const Duration t = Duration::FromSeconds(seconds);
    if (!found || t < best.time) {
      found = true;
      best = {t, a, busiest >= 0 ? topology_.LinkName(busiest) : "", load};
    }
  }
  if (!found) {
    // The chosen algorithm does not apply (tree for all-gather, or within one node): NCCL
    // runs the ring.
    return Price(kind, tensor, group, buckets, CollectiveAlgorithm::kRing);
  }
  return best;
}

}  // namespace sim::cost
