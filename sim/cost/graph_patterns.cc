// GraphCostModel's routes: how a collective's transfers settle on the cluster's links (Settle),
// the ring, tree and SHARP phases NCCL's algorithms are made of, and the patterns of phases
// each collective kind runs (MakePattern), cached per kind and group.

#include <algorithm>
#include <cmath>
#include <iterator>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "sim/base/check.h"
#include "sim/base/slot_mix.h"
#include "sim/cost/graph_collective.h"

namespace sim::cost {

namespace {

int64_t NodeOf(const cluster::Topology& topo, int64_t gpu) { return gpu / topo.gpus_per_node(); }

// Members grouped by node, in order of first appearance.
// A node's group is found by a hash of the node (the last member's node first: members come
// node by node in most groups); a search of the nodes seen so far made a 16,384-member ring on
// 2,048 nodes quadratic, 40 % of building and pricing that cluster (BM_Build16kAndPriceAll).
std::vector<std::vector<int64_t>> ByNode(const cluster::Topology& topo,
                                         const std::vector<int64_t>& members) {
  std::vector<std::vector<int64_t>> groups;
  absl::flat_hash_map<int64_t, size_t> group_of_node;
  int64_t last_node = -1;
  size_t last = 0;
  for (int64_t m : members) {
    const int64_t n = NodeOf(topo, m);
    if (n != last_node || groups.empty()) {
      auto [it, added] = group_of_node.try_emplace(n, groups.size());
      if (added) groups.emplace_back();
      last_node = n;
      last = it->second;
    }
    groups[last].push_back(m);
  }
  return groups;
}

// The member of a node group that owns NIC `rail`, or the rail-th member when none does.
size_t RailIndex(const cluster::Topology& topo, const std::vector<int64_t>& group, int64_t rail) {
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] % topo.gpus_per_node() == topo.RailOwner(rail)) return i;
  }
  return static_cast<size_t>(rail) % group.size();
}

// Arc-disjoint directed Hamiltonian cycles of the complete symmetric digraph on n vertices:
// the rings n GPUs of a point-to-point mesh can run at once on disjoint links. n - 1 where it
// decomposes into Hamiltonian cycles (odd n: Walecki's undirected cycles, each both ways;
// even n >= 8: Tillson 1980), n - 2 for n = 4 and 6, which do not (Bermond and Faber 1976).
// An exhaustive search confirms 1, 2, 2, 4, 4, 6 for n = 2..7.
int64_t MeshRings(int64_t n) {
  if (n <= 1) return 1;
  return n == 4 || n == 6 ? n - 2 : n - 1;
}

int64_t Log2Ceil(int64_t n) {
  return static_cast<int64_t>(std::ceil(std::log2(static_cast<double>(std::max<int64_t>(n, 1)))));
}

}  // namespace

// One step of concurrent transfers: each link's bandwidth (at its transport's efficiency) is
// shared equally by the transfers crossing it; a transfer runs at its most loaded link's share.
GraphCostModel::Phase GraphCostModel::Settle(const TransferList& transfers) const {
  // The transfers' loads per link, in a table of every link kept zeroed between calls, and the
  // links they touch: a phase crosses a few hundred links of a fabric's hundreds of thousands
  // (16,384 GPUs), and zeroing and scanning the whole table per phase was most of pricing
  // there (callgrind of `run scenarios/llama3-405b-8k.yaml`: 14.6M of 321M instructions).
  thread_local std::vector<int32_t> load_table, touched_table;
  const auto links = static_cast<size_t>(topology_.num_links());
  if (load_table.size() < links) {
    load_table.resize(links);
    touched_table.resize(links + 1);  // every link, and the slot each later crossing writes
  }
  // Plain pointers, which the compiler keeps in registers.
  int32_t* const load = load_table.data();
  int32_t* const touched = touched_table.data();
  // A phase that crosses a good part of the fabric (a ring over all 16,384 GPUs: millions of
  // crossings) is counted, scanned and cleared whole, in link order, which costs less than
  // keeping the list of its links.
  const size_t crossings = transfers.crossings();
  const bool dense = crossings > links / 4;
  size_t used = 0;  // sparse: touched[0, used), each link once, in the order first crossed
  for (size_t i = 0; i < transfers.size(); ++i) {
    if (dense) {
      for (int32_t l : transfers.links(i)) load[l]++;
      continue;
    }
    for (int32_t l : transfers.links(i)) {
      touched[used] = l;
      used += load[l]++ == 0 ? 1 : 0;
    }
  }
  const cluster::Link* const link = topology_.links().data();
  auto effective = [&](int32_t l) {
    return link[l].bandwidth.bytes_per_s() *
           (link[l].nvlink ? intra_efficiency_ : inter_efficiency_);
  };
  Phase p;
  // The bottleneck: the used link with the smallest share of bandwidth per transfer, the
  // lowest-numbered of equals. The loads decide it, so it is found before the transfers' own
  // pass, which then adds up the shares crossing it too.
  double tightest = 1e300;
  auto consider = [&](int32_t l) {
    const double per_transfer = effective(l) / load[l];
    if (per_transfer < tightest || (per_transfer == tightest && l < p.busiest_link)) {
      tightest = per_transfer;
      p.busiest_link = l;
      p.busiest_load = load[l];
    }
  };
  if (dense) {
    for (size_t l = 0; l < links; ++l) {
      if (load[l] != 0) consider(static_cast<int32_t>(l));
    }
  } else {
    for (size_t i = 0; i < used; ++i) consider(touched[i]);
  }
  p.transport = p.busiest_link >= 0 && !link[p.busiest_link].nvlink ? inter_ : intra_;
  for (size_t i = 0; i < transfers.size(); ++i) {
    double bw = 1e300;
    Duration path;
    bool network = false, busiest = false;
    for (int32_t l : transfers.links(i)) {
      bw = std::min(bw, effective(l) / load[l]);
      path += link[l].latency;
      network = network || !link[l].nvlink;
      busiest = busiest || l == p.busiest_link;
    }
    p.seconds_per_byte = std::max(p.seconds_per_byte, transfers.share(i) / bw);
    if (busiest) p.busiest_share += transfers.share(i);
    // NCCL's network latencies hold one switch (a NIC-leaf-NIC path of two link latencies).
    if (network) p.hop_extra = std::max(p.hop_extra, path - switch_latency_ * 2.0);
  }
  if (dense) {
    std::fill(load, load + links, 0);
  } else {
    for (size_t i = 0; i < used; ++i) load[touched[i]] = 0;
  }
  return p;
}

void GraphCostModel::AppendRoute(int64_t a, int64_t b, std::optional<int64_t> rail,
                                 TransferList& t) const {
  thread_local std::vector<int32_t> route;  // Topology::Route's, its capacity kept
  route.clear();
  topology_.Route(a, b, rail, route);
  t.Append(route);
}

GraphCostModel::Phase GraphCostModel::RingPhase(const std::vector<std::vector<int64_t>>& rings,
                                                int64_t passes) const {
  TransferList transfers;
  int64_t nodes = 1, size = 1;
  for (const auto& ring : rings) {
    const auto groups = ByNode(topology_, ring);
    nodes = static_cast<int64_t>(groups.size());
    size = static_cast<int64_t>(ring.size());
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
    // Each transfer crosses a few links: an NVLink hop, or up to the core and back down.
    const size_t ring_transfers = static_cast<size_t>(channels) * ring.size();
    transfers.Reserve(transfers.size() + ring_transfers,
                      transfers.crossings() + 4 * ring_transfers);
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
        transfers.Begin(share);
        if (NodeOf(topology_, from) != NodeOf(topology_, to)) {
          // The node's exit GPU is the first of its rotation (the rail-k GPU).
          const size_t node =
              std::upper_bound(node_start.begin(), node_start.end(), i) - node_start.begin() - 1;
          const int64_t exit = order[node_start[node]];
          AppendRoute(from, exit, std::nullopt, transfers);
          AppendRoute(exit, to, k, transfers);
        } else {
          AppendRoute(from, to, std::nullopt, transfers);
        }
        transfers.End();
      }
    }
  }
  Phase p = Settle(transfers);
  p.bw_passes = passes;
  // Of a ring's steps, those whose slowest transfer crosses nodes: nodes − 1 per n − 1.
  p.inter_steps = nodes > 1 ? passes * (nodes - 1) / std::max<int64_t>(size - 1, 1) : 0;
  p.intra_steps = passes - p.inter_steps;
  return p;
}

GraphCostModel::Phase GraphCostModel::TreePhase(
    const std::vector<std::vector<int64_t>>& copies) const {
  TransferList transfers;
  int64_t nodes = 1, per_node = 1;
  for (const auto& members : copies) {
    const auto groups = ByNode(topology_, members);
    nodes = static_cast<int64_t>(groups.size());
    per_node = static_cast<int64_t>(groups.front().size());
    const int64_t channels = per_node > 1 && nodes > 1 ? topology_.nics_per_node() : 1;
    for (int64_t k = 0; k < channels; ++k) {
      std::vector<int64_t> rail_gpu;
      for (const auto& g : groups) rail_gpu.push_back(g[RailIndex(topology_, g, k)]);
      // Two binary trees (heap order, and mirrored), each carrying half the data.
      for (int tree = 0; tree < 2; ++tree) {
        for (int64_t j = 1; j < nodes; ++j) {
          const int64_t child = tree == 0 ? j : nodes - 1 - j;
          const int64_t parent = tree == 0 ? (j - 1) / 2 : nodes - 1 - (j - 1) / 2;
          transfers.Begin(1.0 / static_cast<double>(2 * channels));
          AppendRoute(rail_gpu[child], rail_gpu[parent], k, transfers);
          transfers.End();
        }
      }
      // The intra-node chain of each node, pipelined with the trees.
      for (const auto& g : groups) {
        for (size_t i = 0; i + 1 < g.size(); ++i) {
          transfers.Begin(1.0 / static_cast<double>(channels));
          AppendRoute(g[i], g[i + 1], std::nullopt, transfers);
          transfers.End();
        }
      }
    }
  }
  Phase p = Settle(transfers);
  p.bw_passes = 2;
  p.inter_steps = 2 * Log2Ceil(nodes);
  p.intra_steps = 2 * (per_node - 1);
  return p;
}

GraphCostModel::Phase GraphCostModel::SharpPhase(
    const std::vector<std::vector<int64_t>>& copies) const {
  TransferList transfers;
  for (const auto& members : copies) {
    const auto groups = ByNode(topology_, members);
    const int64_t nodes = static_cast<int64_t>(groups.size());
    // The NIC heads: every NIC of the node when several members share it (each behind its
    // rail's GPU), the NICs its GPU owns when one member is alone on its node.
    std::vector<int64_t> rails;
    if (groups.front().size() > 1) {
      for (int64_t k = 0; k < topology_.nics_per_node(); ++k) rails.push_back(k);
    } else {
      const int64_t local = members.front() % topology_.gpus_per_node();
      for (int64_t k = 0; k < topology_.nics_per_node(); ++k) {
        if (topology_.RailOwner(k) == local) rails.push_back(k);
      }
      if (rails.empty()) rails.push_back(0);
    }
    const double share = 1.0 / static_cast<double>(rails.size());
    for (int64_t k : rails) {
      for (int64_t i = 0; i < nodes; ++i) {
        const auto& from = groups[i];
        const auto& to = groups[(i + 1) % nodes];
        transfers.Begin(share);
        AppendRoute(from[RailIndex(topology_, from, k)], to[RailIndex(topology_, to, k)], k,
                    transfers);
        transfers.End();
      }
    }
  }
  Phase p = Settle(transfers);
  // At SHARP's efficiency of the NICs' line rate instead of the transport's.
  p.seconds_per_byte *= inter_efficiency_ / *SharpTransport().efficiency;
  p.transport = &SharpTransport();
  p.bw_passes = 1;
  p.inter_steps = 1;  // NCCL's one network latency: up the aggregation tree and back
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
    TransferList transfers;
    for (const auto& copy : members) {
      transfers.Begin(1.0);
      AppendRoute(copy[0], copy[1], std::nullopt, transfers);
      transfers.End();
    }
    Phase ph = Settle(transfers);
    ph.bw_passes = 1;
    (g.nodes > 1 ? ph.inter_steps : ph.intra_steps) = 1;
    p.phases.push_back({ph, 1.0});
    return p;
  }
  if (kind == CollectiveKind::kAllToAll) {
    // NCCL's all-to-all is grouped point-to-point: every member sends M/n to each other
    // member at once. Across nodes the slice leaves through the NICs of the destination's rail,
    // reaching that rail's local GPU over NVLink first (PXN, NCCL 2.12+), so that it crosses
    // the fabric rail-aligned; where a GPU owns several NICs (AWS p5: 4 EFA per GPU) its p2p
    // channels to a network peer take those NICs in turn (without a graph NCCL picks a
    // channel's NIC among the GPU's local ones by channel id: src/graph/paths.cc
    // ncclTopoGetNetDev, ncclTopoGetLocalNet), so each carries an equal part.
    if (a != CollectiveAlgorithm::kRing) return std::nullopt;
    TransferList transfers;
    const int64_t gpn = topology_.gpus_per_node();
    std::vector<std::vector<int64_t>> owned(static_cast<size_t>(gpn));  // rails by local GPU
    for (int64_t k = 0; k < topology_.nics_per_node(); ++k) {
      const int64_t owner = topology_.RailOwner(k);
      if (owner >= 0 && owner < gpn) owned[static_cast<size_t>(owner)].push_back(k);
    }
    int64_t across = 0;
    for (const auto& copy : members) {
      for (int64_t from : copy) {
        for (int64_t to : copy) {
          if (from == to) continue;
          if (NodeOf(topology_, from) == NodeOf(topology_, to)) {
            transfers.Begin(1.0 / static_cast<double>(n));
            AppendRoute(from, to, std::nullopt, transfers);
            transfers.End();
            continue;
          }
          const int64_t exit = NodeOf(topology_, from) * gpn + to % gpn;
          const std::vector<int64_t>& rails = owned[static_cast<size_t>(to % gpn)];
          const size_t stripes = std::max<size_t>(rails.size(), 1);
          for (size_t r = 0; r < stripes; ++r) {
            transfers.Begin(1.0 / static_cast<double>(n * static_cast<int64_t>(stripes)));
            AppendRoute(from, exit, std::nullopt, transfers);
            AppendRoute(exit, to, rails.empty() ? std::nullopt : std::optional<int64_t>(rails[r]),
                        transfers);
            transfers.End();
          }
          if (copy.front() == members.front().front() && from == copy.front()) ++across;
        }
      }
    }
    Phase ph = Settle(transfers);
    ph.bw_passes = 1;
    ph.inter_steps = across;  // the first member's peers on other nodes
    ph.intra_steps = n - 1 - across;
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
  // NVLink SHARP: each GPU's NVLink carries M out (multimem reduce-load) and M in (multicast
  // store), at the NVLS efficiency.
  Phase nvls;
  nvls.seconds_per_byte = 1.0 / (nvlink_.bytes_per_s() * nvls_efficiency_.value_or(1.0));
  nvls.bw_passes = 1;
  nvls.intra_steps = 1;
  nvls.transport = &NvlsTransport();
  nvls.busiest_load = static_cast<int32_t>(per_node);  // GPUs multicasting into the switch
  if (a == CollectiveAlgorithm::kNvls) {
    if (!all_reduce || nodes > 1 || !nvls_efficiency_) return std::nullopt;
    p.phases.push_back({nvls, 1.0});
    return p;
  }
  if (a == CollectiveAlgorithm::kTree) {
    if (!all_reduce) return std::nullopt;  // NCCL: tree for all-reduce only
    p.phases.push_back({TreePhase(members), 1.0});
    return p;
  }
  if (nodes < 2) return std::nullopt;  // the others are inter-node algorithms
  if (a == CollectiveAlgorithm::kCollnet) {
    if (!all_reduce || !cluster_.fabric || !cluster_.fabric->sharp) return std::nullopt;
    const Phase in_switch = SharpPhase(members);
    if (per_node < 2) {
      p.phases = {{in_switch, 1.0}};
      return p;
    }
    std::vector<std::vector<int64_t>> intra;
    for (const auto& copy : members) {
      for (const auto& node : ByNode(topology_, copy)) intra.push_back(node);
    }
    // Reduce-scatter to the NIC heads, the switches' reduction, all-gather from them: NCCL
    // pipelines the three chunk by chunk (CollNet Direct's scatter, net and broadcast peers).
    const Phase in_node = RingPhase(intra, per_node - 1);
    p.phases = {{in_node, 1.0}, {in_switch, 1.0}, {in_node, 1.0}};
    p.pipelined = true;
    return p;
  }
  if (a == CollectiveAlgorithm::kNvlsTree) {
    if (!all_reduce || per_node < 2 || !nvls_efficiency_) return std::nullopt;
    std::vector<std::vector<int64_t>> inter;
    for (const auto& copy : members) {
      const auto by_node = ByNode(topology_, copy);
      for (int64_t i = 0; i < per_node; ++i) {
        std::vector<int64_t> ring;
        for (const auto& node : by_node) ring.push_back(node[i]);
        inter.push_back(std::move(ring));
      }
    }
    Phase across = RingPhase(inter, 2 * (nodes - 1));
    across.inter_steps = 2 * Log2Ceil(nodes);  // NCCL's NVLS tree: log2 of the nodes, twice
    across.intra_steps = 0;
    p.phases = {{nvls, 1.0}, {across, 1.0 / static_cast<double>(per_node)}};
    p.pipelined = true;
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
    case CollectiveKind::kAllToAll:
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
  if (it == cache_.end()) {
    std::optional<Pattern> p = MakePattern(kind, g, a);
    if (p && cluster_.node.gpu_mesh) OnMesh(kind, g, *p);
    it = cache_.emplace(key, std::move(p)).first;
  }
  return it->second ? &*it->second : nullptr;
}

void GraphCostModel::OnMesh(CollectiveKind kind, const CommGroup& g, Pattern& p) const {
  // The graph gives each GPU one port of intra_node_bandwidth, right for a group of the whole
  // node, whose rings use all gpn - 1 links of each GPU. n GPUs of the node reach only the
  // links among themselves: rings on MeshRings(n) of them, an all-to-all or a send on the
  // n - 1 (or one) that lead to its peers. Phases bound by the node's links slow down by that
  // share; those bound by a NIC are unchanged.
  const int64_t gpn = cluster_.node.gpus_per_node;
  const int64_t n = static_cast<int64_t>(ByNode(topology_, Members(g).front()).front().size());
  if (n >= gpn || n < 2) return;
  const int64_t links = kind == CollectiveKind::kAllToAll   ? n - 1
                        : kind == CollectiveKind::kSendRecv ? 1
                                                            : MeshRings(n);
  const double slower = static_cast<double>(gpn - 1) / static_cast<double>(links);
  for (auto& [phase, fraction] : p.phases) {
    if (phase.transport == intra_) phase.seconds_per_byte *= slower;
  }
}
}  // namespace sim::cost
