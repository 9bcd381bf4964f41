#include "sim/cost/nccl_tuner.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sim::cost {

namespace {

// NCCL 2.28 src/graph/tuning.cc ncclTunerConstantsDefaults, in its order: algorithms Tree,
// Ring, (CollNet Direct, CollNet Chain: below), NVLS, NVLS Tree; protocols LL, LL128, Simple. µs.
constexpr int kTree = 0, kRing = 1, kNvls = 2, kNvlsTree = 3, kCollnet = 4;
constexpr double kBaseLatency[4][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}};
// hwLatencies[NVLINK], [PCI], [NET].
constexpr double kNvlinkLatency[4][3] = {{.6, 1.25, 4.0}, {.6, 1.9, 3.4}, {0, 0, 25}, {0, 0, 25}};
constexpr double kPciLatency[4][3] = {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 0}, {0, 0, 0}};
constexpr double kNetLatency[4][3] = {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 18}, {0, 0, 14}};
// Per architecture (Volta, Ampere, Hopper, Blackwell) and node count class (1, 2, >2 nodes).
// llMaxBws: one node by GPU; across nodes by CPU (row 0 Intel, row 1 AMD).
constexpr double kLlMaxBw[4][3] = {
    {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
constexpr double kPerChMaxRingLL128Bw[4] = {20.0, 20.0, 36.7, 73.4};
constexpr double kPerChMaxTreeLL128Bw[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChMaxTreeBw[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
constexpr double kPerChMaxNvlsTreeBw[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 43.1}};
constexpr double kNvlsEfficiency[4] = {0.0, 0.0, 0.85, 0.74};
// NCCL 2.27 (v2.27.7 tuning.cc) differs in Blackwell's tree caps (twice Hopper's) and prices
// NVLS without the efficiency and pipelining terms (in the table's loop below).
constexpr double kPerChMaxTreeLL128Bw227Blackwell[3] = {73.4, 73.4, 58.0};
constexpr double kPerChMaxTreeBw227Blackwell[3] = {77.4, 82.8, 72.0};
// treeCorrectionFactor: per protocol, by log2(bytes / 64), 64 B to 256 MiB.
constexpr double kTreeCorrection[3][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6, .5,
     .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6, .6,
     .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
// CollNet's rows of hwLatencies (Simple only; its base latency is 0): NVLink or PCIe, network.
// The same table: CollNet Direct {3.7, 31}, CollNet Chain {2.8, 30}; Direct adds 0.4 µs of
// arity serialisation per local peer; with one rank per node the network step is the tree's.
constexpr double kCollnetDirectLatency[2] = {3.7, 31.0};
constexpr double kCollnetChainLatency[2] = {2.8, 30.0};
constexpr double kCollnetArityUs = 0.4;
// getNetOverhead: 1 µs on Intel x86, 2 µs on AMD x86.
double NetOverheadUs(bool amd_cpu) { return amd_cpu ? 2.0 : 1.0; }

int Function(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllGather:
      return 0;
    case CollectiveKind::kReduceScatter:
      return 1;
    default:
      return 2;
  }
}

// stepsim's algorithms as rows of the table (hierarchical has no NCCL row).
std::optional<int> Row(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::kRing:
      return kRing;
    case CollectiveAlgorithm::kTree:
      return kTree;
    case CollectiveAlgorithm::kNvls:
      return kNvls;
    case CollectiveAlgorithm::kNvlsTree:
      return kNvlsTree;
    case CollectiveAlgorithm::kCollnet:
      return kCollnet;
    default:
      return std::nullopt;
  }
}

int Log2Floor(double x) { return x < 1 ? 0 : static_cast<int>(std::floor(std::log2(x))); }

}  // namespace

absl::string_view ProtocolName(NcclProtocol p) {
  switch (p) {
    case NcclProtocol::kLL:
      return "LL";
    case NcclProtocol::kLL128:
      return "LL128";
    case NcclProtocol::kSimple:
      return "Simple";
  }
  return "Simple";
}

NcclArch ArchOf(double cc) {
  if (cc >= 10.0) return NcclArch::kBlackwell;
  if (cc >= 9.0) return NcclArch::kHopper;
  if (cc >= 8.0) return NcclArch::kAmpere;
  return NcclArch::kVolta;
}

NcclTuner::NcclTuner(const NcclGraphs& g) : graphs_(g) {
  const int arch = static_cast<int>(g.arch);
  const int64_t n = std::max<int64_t>(g.ranks, 1), nodes = std::max<int64_t>(g.nodes, 1);
  if (n <= 1) return;
  const int index2 = nodes <= 2 ? static_cast<int>(nodes - 1) : 2;
  const double ll_max_bw =
      nodes == 1 ? kLlMaxBw[arch][index2] : kLlMaxBw[g.amd_cpu ? 1 : 0][index2];
  const double ppn = static_cast<double>(n) / static_cast<double>(nodes);
  const auto& intra_hw = g.nvlink ? kNvlinkLatency : kPciLatency;
  for (int f = 0; f < kFunctions; ++f) {
    const bool all_reduce = f == 2;
    const double nsteps =
        all_reduce ? 2.0 * static_cast<double>(n - 1) : static_cast<double>(n - 1);
    for (int a = 0; a < kCollnet; ++a) {
      // NCCL: all-gather and reduce-scatter run ring, NVLS (or PAT, CollNet); trees are
      // all-reduce only; NVLS Tree needs several nodes, NVLS across nodes needs CollNet.
      if (!all_reduce && (a == kTree || a == kNvlsTree)) continue;
      const bool nvls = a == kNvls || a == kNvlsTree;
      if (nvls && (g.nvls_channels < 2 || kNvlsEfficiency[arch] == 0)) continue;
      if (a == kNvlsTree && nodes == 1) continue;
      if (a == kNvls && nodes > 1) continue;
      for (int p = 0; p < kNumNcclProtocols; ++p) {
        if (nvls && p != 2) continue;
        const int channels = nvls ? g.nvls_channels : g.ring_channels;
        double bw =
            nodes <= 2 ? (a == kTree ? g.tree_bw_intra_gbps : g.bw_intra_gbps) : g.bw_inter_gbps;
        if (nvls && g.release == NcclRelease::k2_27) {
          // 2.27: all-reduce at min(bwIntra, bwInter) per channel, all-gather and
          // reduce-scatter at min(bwIntra (ppn - 1) / ppn, 0.9 bwInter); NVLS tree at bwInter,
          // halved beyond two nodes.
          const double intra = g.nvls_bw_intra_gbps, inter = g.nvls_bw_inter_gbps;
          bw = a == kNvlsTree ? std::min(intra, nodes <= 2 ? inter : inter / 2)
               : all_reduce   ? std::min(intra, inter)
                              : std::min(intra * (ppn - 1) / ppn, inter * 0.9);
        } else if (nvls) {
          double intra = g.nvls_bw_intra_gbps * kNvlsEfficiency[arch] * (channels - 1) / channels;
          intra *= all_reduce ? 2.0 : (ppn - 1) / ppn;
          const double inter = g.nvls_bw_inter_gbps * ((nodes <= 2 && a == kNvlsTree) ? 2 : 1);
          bw = std::min({intra, inter,
                         a == kNvlsTree ? kPerChMaxNvlsTreeBw[arch][index2]
                                        : std::numeric_limits<double>::max()});
        }
        double bus = channels * bw;
        if (a == kRing && p == 0) bus = std::min(ll_max_bw, bus * .5);
        if (a == kRing && p == 1) bus = std::min(bus * .92, channels * kPerChMaxRingLL128Bw[arch]);
        const bool blackwell_227 =
            g.release == NcclRelease::k2_27 && g.arch == NcclArch::kBlackwell;
        const double tree_cap =
            blackwell_227 ? kPerChMaxTreeBw227Blackwell[index2] : kPerChMaxTreeBw[arch][index2];
        const double tree_ll128_cap = blackwell_227 ? kPerChMaxTreeLL128Bw227Blackwell[index2]
                                                    : kPerChMaxTreeLL128Bw[arch][index2];
        if (a == kTree) bus = std::min(bus * .92, channels * tree_cap);
        if (a == kTree && p == 0) bus = std::min(bus / 3.8, ll_max_bw);
        if (a == kTree && p == 1) {
          bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), channels * tree_ll128_cap);
        }
        // LL128 runs on NVLink (typeIntra up to NVB); not over PCIe.
        if (p == 1 && !g.nvlink) bus = 0;
        // Bus bandwidth to algorithm bandwidth (NVLS all-gather and reduce-scatter are priced
        // in bus bandwidth already).
        // (2.27 converts NVLS and NVLS tree all-reduce by 5/6.)
        if (a == kRing || all_reduce) {
          bus *= a == kTree                                ? .5
                 : nvls && g.release == NcclRelease::k2_27 ? 5.0 / 6.0
                                                           : static_cast<double>(n) / nsteps;
        }

        double lat = kBaseLatency[a][p];
        double intra_lat = intra_hw[a][p];
        double inter_lat =
            (ppn == 1 ? kNetLatency[kTree][p] : kNetLatency[a][p]) + g.net_latency_us;
        if (p == 2) inter_lat += g.net_latency_us;  // the flush
        if (a == kRing) {
          double overhead = nodes > 1 ? NetOverheadUs(g.amd_cpu) * (p == 2 ? 3 : 1) : 0;
          intra_lat = std::max(intra_lat, overhead);
          const double inter_steps = nodes == 1 ? 0
                                                : (all_reduce ? 2.0 * static_cast<double>(nodes - 1)
                                                              : static_cast<double>(nodes - 1));
          lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
        } else if (a == kTree) {
          lat += 2 * ((ppn - 1) * intra_lat + Log2Floor(static_cast<double>(nodes)) * inter_lat);
        } else if (a == kNvls) {
          lat = intra_lat + (nodes > 1 ? inter_lat : 0);
        } else {
          lat += intra_lat + 2 * Log2Floor(static_cast<double>(nodes)) * inter_lat;
        }
        table_[f][a][p] = {lat, bus};
      }
    }
  }
  // CollNet: all-reduce only here (its all-gather and reduce-scatter need one NIC per GPU and a
  // plugin that has them), Simple only. Its bus bandwidth is its graph's; Direct divides it by
  // the GPU:NIC ratio less half its excess and takes 0.85 of it from SM90; then 0.5 to algorithm
  // bandwidth, as trees. Latency: Direct 2·(intra + (ppn − 1)·0.4) + inter, Chain
  // 2·(ppn − 1)·intra + inter, inter with the network's reported latency twice (the flush).
  if (g.collnet && nodes > 1 && g.collnet_channels > 0) {
    const double channels = static_cast<double>(g.collnet_channels);
    double bus = channels * g.collnet_bw_gbps;
    if (g.collnet_direct) {
      double factor = ppn / channels;
      factor -= (factor - 1) / 2;
      bus /= factor;
      if (g.arch >= NcclArch::kHopper) bus *= .85;
    }
    const auto& hw = g.collnet_direct ? kCollnetDirectLatency : kCollnetChainLatency;
    const double intra_lat = hw[0];
    const double inter_lat = (ppn == 1 ? kNetLatency[kTree][2] : hw[1]) + 2 * g.net_latency_us;
    const double peers = static_cast<double>(n / nodes - 1);
    const double lat =
        g.collnet_direct
            ? 2 * (std::min(1.0, peers) * intra_lat + peers * kCollnetArityUs) + inter_lat
            : 2 * peers * intra_lat + inter_lat;
    table_[2][kCollnet][2] = {lat, bus * .5};
  }
}

double NcclTuner::Latency(CollectiveKind kind, CollectiveAlgorithm a, NcclProtocol p) const {
  const auto row = Row(a);
  if (!row) return 0;
  return table_[Function(kind)][*row][static_cast<int>(p)].latency_us;
}

double NcclTuner::Bandwidth(CollectiveKind kind, CollectiveAlgorithm a, NcclProtocol p) const {
  const auto row = Row(a);
  if (!row) return 0;
  return table_[Function(kind)][*row][static_cast<int>(p)].bandwidth_gbps;
}

double NcclTuner::CallLatencyUs(CollectiveKind kind, CollectiveAlgorithm a, NcclProtocol p,
                                Bytes bytes) const {
  double lat = Latency(kind, a, p);
  // The ring's plateau effect across nodes (1.4 from Ampere on, 1.9 before).
  if (a == CollectiveAlgorithm::kRing && p == NcclProtocol::kSimple && graphs_.nodes > 1 &&
      kind == CollectiveKind::kAllReduce &&
      static_cast<double>(bytes.count()) /
              static_cast<double>(graphs_.ring_channels * graphs_.ranks) >=
          64) {
    lat *= graphs_.arch == NcclArch::kVolta ? 1.9 : 1.4;
  }
  return lat;
}

std::optional<double> NcclTuner::TimeUs(CollectiveKind kind, CollectiveAlgorithm a, NcclProtocol p,
                                        Bytes bytes) const {
  double bw = Bandwidth(kind, a, p);
  if (bw <= 0) return std::nullopt;
  const double nbytes = static_cast<double>(bytes.count());
  const int log_size = Log2Floor(nbytes / 64);
  if (a == CollectiveAlgorithm::kTree && kind == CollectiveKind::kAllReduce && nbytes >= 64 &&
      log_size < 23) {
    bw *= kTreeCorrection[static_cast<int>(p)][log_size];
  }
  return CallLatencyUs(kind, a, p, bytes) + nbytes / (1000 * bw);
}

std::vector<NcclChoice> NcclTuner::Ranked(CollectiveKind kind, Bytes bytes) const {
  std::vector<NcclChoice> out;
  for (CollectiveAlgorithm a :
       {CollectiveAlgorithm::kTree, CollectiveAlgorithm::kRing, CollectiveAlgorithm::kCollnet,
        CollectiveAlgorithm::kNvls, CollectiveAlgorithm::kNvlsTree}) {
    for (NcclProtocol p : {NcclProtocol::kLL, NcclProtocol::kLL128, NcclProtocol::kSimple}) {
      const auto t = TimeUs(kind, a, p, bytes);
      if (t) out.push_back(NcclChoice{a, p, CallLatencyUs(kind, a, p, bytes), *t});
    }
  }
  // NCCL keeps the first of equal times in its algorithm-major order: a stable sort.
  std::stable_sort(out.begin(), out.end(),
                   [](const NcclChoice& x, const NcclChoice& y) { return x.time_us < y.time_us; });
  return out;
}

std::optional<NcclChoice> NcclTuner::Choose(CollectiveKind kind, Bytes bytes,
                                            CollectiveAlgorithm only) const {
  for (const NcclChoice& c : Ranked(kind, bytes)) {
    if (only == CollectiveAlgorithm::kAuto || c.algorithm == only) return c;
  }
  return std::nullopt;
}

double NcclTuner::P2pHopUs(bool across_nodes) const {
  return across_nodes ? kNetLatency[kRing][2]
                      : (graphs_.nvlink ? kNvlinkLatency : kPciLatency)[kRing][2];
}

double NcclTuner::P2pLatencyUs(bool across_nodes) const {
  return kBaseLatency[kRing][2] + P2pHopUs(across_nodes);
}

}  // namespace sim::cost
