#include "sim/cost/graph_collective.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "sim/base/check.h"
#include "sim/base/slot_mix.h"

namespace sim::cost {

namespace {

// NCCL's per-channel search speeds at the top of its arrays (src/graph/search.cc
// speedArrayIntra 40 GB/s, sm90SpeedArrayIntra 60 GB/s): one node's channels are its NVLink
// bandwidth over that speed, doubled as ncclTopoCompute duplicates channels of >= 25 GB/s.
constexpr double kTopSearchSpeed = 40.0, kTopSearchSpeedSm90 = 60.0;

// NCCL's intra-node search speeds, fastest first (search.cc sm90SpeedArrayIntra,
// sm100SpeedArrayIntra).
constexpr double kSpeedsSm90[] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
constexpr double kSpeedsSm100[] = {90.0, 80.0, 70.0, 60.0, 50.0, 45.0,
                                   40.0, 30.0, 24.0, 20.0, 19.0, 18.0};

// A one-node NVLS graph's per-channel bandwidths as ncclTopoCompute finds them: bwIntra the
// fastest speed at most `gbps` (the slowest where none is); then its second pass raises bwInter
// a speed at a time while it is under twice bwIntra (no NIC bounds it on one node).
std::pair<double, double> NvlsSearchSpeeds(NcclArch arch, double gbps) {
  const double* speeds = arch == NcclArch::kBlackwell ? kSpeedsSm100 : kSpeedsSm90;
  const size_t n = arch == NcclArch::kBlackwell ? std::size(kSpeedsSm100) : std::size(kSpeedsSm90);
  size_t i = 0;
  while (i + 1 < n && speeds[i] > gbps) ++i;
  const double intra = speeds[i];
  while (i > 0 && speeds[i] < 2 * intra) --i;
  return {intra, speeds[i]};
}
constexpr int kMaxChannels = 32;  // MAXCHANNELS
// The NVLS ramp (sim/spec/transport.cc) was fitted on an 8-GPU node (azure_ndh100v5).
constexpr double kNvlsRampRanks = 8.0;

// Bytes a protocol moves per byte of line: LL sends 8 bytes of data in 16 (a flag per word),
// LL128 120 in 128; NCCL's tuner prices LL128 at 0.92 of Simple (tuning.cc).
double ProtocolEfficiency(NcclProtocol p) {
  switch (p) {
    case NcclProtocol::kLL:
      return 0.5;
    case NcclProtocol::kLL128:
      return 0.92;
    case NcclProtocol::kSimple:
      return 1.0;
  }
  return 1.0;
}

}  // namespace

GraphCostModel::GraphCostModel(cluster::Topology topology, const ClusterSpec& cluster,
                               CollectiveAlgorithm algorithm)
    : topology_(std::move(topology)),
      cluster_(cluster),
      intra_(FindTransport(cluster.node.intra_node_transport)),
      inter_(FindTransport(cluster.fabric ? cluster.fabric->transport : "ib")),
      nvls_efficiency_(cluster.gpu.calibration.nvls_efficiency),
      nvlink_(cluster.node.intra_node_bandwidth),
      switch_latency_(cluster.fabric ? cluster.fabric->switch_latency
                                     : cluster::DefaultFabric(cluster.node).switch_latency),
      algorithm_(algorithm) {
  // The loaders accept only names of the table; a hand-built spec falls back to the defaults.
  if (intra_ == nullptr) intra_ = FindTransport("nvlink");
  if (inter_ == nullptr) inter_ = FindTransport("ib");
  const double gpu = cluster.gpu.calibration.comm_efficiency;
  intra_efficiency_ = intra_->efficiency.value_or(gpu);
  inter_efficiency_ = inter_->efficiency.value_or(gpu);
  // NVLink SHARP needs NVSwitches (NVLink, not a mesh or PCIe).
  if (intra_->name != "nvlink" || cluster.node.gpu_mesh) nvls_efficiency_.reset();
}

std::vector<std::vector<int64_t>> GraphCostModel::Members(const CommGroup& g) const {
  std::vector<std::vector<int64_t>> out;
  for (int64_t q = 0; q < g.copies; ++q) {
    std::vector<int64_t> m;
    for (int64_t i = 0; i < g.size; ++i) m.push_back(q * g.copy_offset + i * g.stride);
    out.push_back(std::move(m));
  }
  return out;
}

NcclGraphs GraphCostModel::GraphsFor(const CommGroup& group) const {
  NcclGraphs g;
  g.arch = ArchOf(cluster_.gpu.compute_capability.value_or(9.0));
  g.ranks = group.size;
  g.nodes = std::max<int64_t>(group.nodes, 1);
  g.nvlink = intra_->name != "pcie";
  g.net_latency_us = inter_->net_latency_us;
  g.release = cluster_.nccl;
  const int64_t ppn = (g.ranks + g.nodes - 1) / g.nodes;
  const double intra = nvlink_.bytes_per_s() * intra_efficiency_ / 1e9;  // GB/s per GPU
  if (g.nodes == 1) {
    const double speed = g.arch >= NcclArch::kHopper ? kTopSearchSpeedSm90 : kTopSearchSpeed;
    g.ring_channels =
        std::min<int>(kMaxChannels, 2 * std::max(1, static_cast<int>(std::floor(intra / speed))));
    g.bw_intra_gbps = g.bw_inter_gbps = g.tree_bw_intra_gbps = intra / g.ring_channels;
  } else {
    // The NICs the node's members reach: all of the node's when every GPU is in the group,
    // their share of them otherwise (at least the one nearest).
    const int64_t gpn = cluster_.node.gpus_per_node, nics = cluster_.node.nics_per_node;
    const int64_t used = std::max<int64_t>(1, std::min(nics, (nics * ppn + gpn - 1) / gpn));
    const double net = static_cast<double>(used) * cluster_.node.nic_bandwidth.bytes_per_s() *
                       inter_efficiency_ / 1e9;
    g.ring_channels = std::min<int>(kMaxChannels, static_cast<int>(2 * used));
    g.bw_inter_gbps = net / g.ring_channels;
    g.bw_intra_gbps = std::min(intra, net) / g.ring_channels;
    g.tree_bw_intra_gbps = std::min(intra / g.ring_channels, 2 * g.bw_inter_gbps);
    g.nvls_bw_inter_gbps = net;  // divided by the NVLS channels below
    // CollNet's graph: one channel per NIC head, each at its NIC's bandwidth; Direct on
    // NVSwitch nodes (NCCL disables it without NVSwitches).
    g.collnet = cluster_.fabric && cluster_.fabric->sharp;
    g.collnet_direct = intra_->name == "nvlink" && !cluster_.node.gpu_mesh;
    g.collnet_channels = static_cast<int>(used);
    g.collnet_bw_gbps = net / static_cast<double>(used);
  }
  // NCCL enables NVLS on more than two GPUs of an NVSwitch with multicast (transport/nvls.cc).
  if (nvls_efficiency_ && ppn > 2 && g.arch >= NcclArch::kHopper) {
    if (g.nodes == 1) {
      // ncclTopoCompute's NVLS search on one node (src/graph/search.cc): one channel per GPU
      // (minChannels forced to maxChannels = min(NCCL_MAX_NVLS_ARITY 32, GPUs)); each channel
      // pulls through every GPU's switch link once and its head's twice, so a link carries
      // n + 1 channels, at the fastest search speed that fits. On 4 Hopper GPUs that is 4
      // channels of 60 GB/s, under the ring's bandwidth: NCCL runs ring there; on 8, 8 of 40
      // (bwInter raised to 60), over it: NVLS.
      g.nvls_channels = static_cast<int>(std::min<int64_t>(32, ppn));
      std::tie(g.nvls_bw_intra_gbps, g.nvls_bw_inter_gbps) =
          NvlsSearchSpeeds(g.arch, intra / static_cast<double>(ppn + 1));
    } else {
      g.nvls_channels = g.arch == NcclArch::kBlackwell ? 32 : 16;
      g.nvls_bw_intra_gbps = intra / g.nvls_channels;
      g.nvls_bw_inter_gbps /= g.nvls_channels;
    }
  }
  return g;
}

const NcclTuner& GraphCostModel::TunerFor(const CommGroup& g) const {
  const auto key = std::make_pair(g.size, g.nodes);
  auto it = tuners_.find(key);
  if (it == tuners_.end()) {
    it = tuners_.emplace(key, std::make_unique<NcclTuner>(GraphsFor(g))).first;
  }
  return *it->second;
}

Duration GraphCostModel::Latency(CollectiveKind kind, CollectiveAlgorithm a, NcclProtocol p,
                                 Bytes call, const CommGroup& g, const Pattern& pattern) const {
  double us = 0;
  if (kind == CollectiveKind::kSendRecv) {
    us = TunerFor(g).P2pLatencyUs(g.nodes > 1);
  } else if (kind == CollectiveKind::kAllToAll) {
    // Grouped point-to-point: the p2p base latency, plus one hop per peer (NCCL runs a rank's
    // peers in turn on its channels): NVLink steps for those in the node, network ones for
    // the rest. An estimate from NCCL's tables; no public all-to-all curve to hold it to yet.
    const NcclTuner& t = TunerFor(g);
    const Phase& ph = pattern.phases.front().first;
    us = t.P2pLatencyUs(false) - t.P2pHopUs(false) +
         static_cast<double>(ph.intra_steps) * t.P2pHopUs(false) +
         static_cast<double>(ph.inter_steps) * t.P2pHopUs(true);
  } else if (a == CollectiveAlgorithm::kHierarchical) {
    // Not an NCCL algorithm: the NCCL ring latency of each of its phases' communicators.
    const int64_t per_node = g.size / std::max<int64_t>(g.nodes, 1);
    const NcclTuner& in = TunerFor(CommGroup{per_node, 1, 1, 1, 0});
    const NcclTuner& across = TunerFor(CommGroup{g.nodes, g.nodes, 1, 1, 0});
    const double intra = in.Latency(kind, CollectiveAlgorithm::kRing, p);
    const double inter = across.Latency(kind, CollectiveAlgorithm::kRing, p);
    us = inter + (kind == CollectiveKind::kAllReduce ? 2 : 1) * intra;
  } else {
    us = TunerFor(g).CallLatencyUs(kind, a, p, call);
  }
  Duration extra;
  for (const auto& [phase, fraction] : pattern.phases) {
    if (kind == CollectiveKind::kAllToAll) break;  // its hops are counted above, per peer
    extra += cluster_.node.intra_node_latency * static_cast<double>(phase.intra_steps) +
             (cluster_.node.inter_node_latency + phase.hop_extra) *
                 static_cast<double>(phase.inter_steps);
  }
  return Duration::FromSeconds(us * 1e-6) + extra;
}

const PricedCollective& GraphCostModel::Price(CollectiveKind kind, Bytes tensor, CommGroup group,
                                              int32_t buckets,
                                              CollectiveAlgorithm algorithm) const {
  const PriceKey key{static_cast<int>(kind),
                     tensor.count(),
                     group.size,
                     group.nodes,
                     group.stride,
                     group.copies,
                     group.copy_offset,
                     buckets,
                     static_cast<int>(algorithm)};
  uint64_t mix = static_cast<uint64_t>(tensor.count()) * kFibonacciMix;
  mix ^= static_cast<uint64_t>(group.size << 20 ^ group.stride << 8 ^ group.nodes) *
         0xC2B2AE3D27D4EB4FULL;
  mix ^= static_cast<uint64_t>(static_cast<int>(kind) << 16 ^ buckets << 4 ^
                               static_cast<int>(algorithm) ^ group.copies << 24) *
         0x165667B19E3779F9ULL;
  if (recent_.slots.empty()) recent_.slots.resize(kRecentPrices);
  RecentPrice& slot = recent_.slots[(mix >> 40) & (kRecentPrices - 1)];
  if (slot.price != nullptr && slot.key == key) return *slot.price;
  auto it = prices_.find(key);
  if (it == prices_.end()) {
    it = prices_.emplace(key, PriceUncached(kind, tensor, group, buckets, algorithm)).first;
  }
  slot = {key, &it->second};  // node_hash_map's values stay where they are
  return it->second;
}

PricedCollective GraphCostModel::PriceUncached(CollectiveKind kind, Bytes tensor, CommGroup group,
                                               int32_t buckets,
                                               CollectiveAlgorithm algorithm) const {
  PricedCollective best;
  if (group.size <= 1 || kind == CollectiveKind::kNone) return best;
  buckets = std::max<int32_t>(buckets, 1);
  const Bytes call = tensor / buckets;  // each bucket is one NCCL call
  // (algorithm, protocol) in the order NCCL's tuner ranks them, restricted to what was asked.
  std::vector<std::pair<CollectiveAlgorithm, NcclProtocol>> candidates;
  if (kind == CollectiveKind::kSendRecv || kind == CollectiveKind::kAllToAll) {
    candidates = {{CollectiveAlgorithm::kRing, NcclProtocol::kSimple}};
  } else if (algorithm == CollectiveAlgorithm::kHierarchical) {
    candidates = {{CollectiveAlgorithm::kHierarchical, NcclProtocol::kSimple}};
  } else {
    for (const NcclChoice& c : TunerFor(group).Ranked(kind, call)) {
      if (algorithm == CollectiveAlgorithm::kAuto || c.algorithm == algorithm) {
        candidates.push_back({c.algorithm, c.protocol});
      }
    }
  }
  for (const auto& [a, proto] : candidates) {
    const Pattern* p = CachedPattern(kind, group, a);
    if (p == nullptr) continue;  // the tuner's pick has no pattern here: take its next
    double total = 0, slowest_bw = 0, slowest = -1;
    int32_t busiest = -1, load = 0;
    bool in_switch = false;  // the slowest phase is NVLS's (the NVSwitch's multicast)
    double slowest_ramp = 1.0;
    Bytes slowest_ramp_bytes;
    const Transport* slowest_transport = nullptr;
    for (const auto& [phase, fraction] : p->phases) {
      // Intra-node ramps are read at the call's bytes per rank (as nccl-tests count them, and
      // as they were fitted); network ones at the bytes the busiest NIC moves in the call, so
      // that a node with more NICs (smaller messages per NIC) ramps up later. NVLS's at the
      // slice each GPU reduces and multicasts (call / ranks in the NVLink domain), scaled to
      // the 8 GPUs of the run it was fitted on (kNvlsRampRanks): a 72-GPU NVL72 domain fills
      // its pipeline at 9x the message size of an 8-GPU node (CoreWeave's GB200 rack curve).
      const Bytes at =
          phase.transport != nullptr && phase.transport->network
              ? Bytes::Round(static_cast<double>(call.count()) * fraction *
                             static_cast<double>(phase.bw_passes) * phase.busiest_share)
          : phase.transport == &NvlsTransport()
              ? Bytes::Round(static_cast<double>(call.count()) * kNvlsRampRanks /
                             static_cast<double>(std::max<int64_t>(
                                 group.size / std::max<int64_t>(group.nodes, 1), 1)))
              : call;
      const double ramp = phase.transport != nullptr ? phase.transport->RampAt(at) : 1.0;
      const double bw = static_cast<double>(tensor.count()) * fraction * phase.seconds_per_byte *
                        static_cast<double>(phase.bw_passes) / (ProtocolEfficiency(proto) * ramp);
      total += bw;
      slowest_bw = std::max(slowest_bw, bw);
      if (bw > slowest) {
        slowest = bw;
        busiest = phase.busiest_link;
        load = phase.busiest_load;
        in_switch = phase.transport == &NvlsTransport();
        slowest_ramp = ramp;
        slowest_ramp_bytes = at;
        slowest_transport = phase.transport;
      }
    }
    const Duration latency =
        Latency(kind, a, proto, call, group, *p) * static_cast<double>(buckets);
    const double bandwidth_s = p->pipelined ? slowest_bw : total;
    best = {Duration::FromSeconds(bandwidth_s) + latency,
            latency,
            a,
            proto,
            busiest >= 0 ? topology_.LinkName(busiest) : (in_switch ? "nvswitch multicast" : ""),
            load,
            slowest_ramp,
            slowest_transport != nullptr ? slowest_transport->name : "",
            slowest_ramp_bytes};
    return best;
  }
  // The chosen algorithm does not apply (tree for all-gather, NVLS without NVLink SHARP, an
  // inter-node algorithm within one node): NCCL runs the ring.
  if (algorithm != CollectiveAlgorithm::kRing) {
    return PriceUncached(kind, tensor, group, buckets, CollectiveAlgorithm::kRing);
  }
  return best;
}

}  // namespace sim::cost
