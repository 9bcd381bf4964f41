#pragma once
// NCCL's own cost model, as its tuner runs it to choose an algorithm and a protocol for each
// collective (NCCL 2.28 src/graph/tuning.cc: ncclTopoTuneModel builds a latency and a bandwidth
// per function × algorithm × protocol from the topology search's graphs; ncclTopoGetAlgoTime
// prices a call as latency + bytes / bandwidth, with its tree correction and ring plateau
// factors; the enqueue takes the fastest). stepsim asks it which (algorithm, protocol) NCCL
// would run, and takes each pair's latency floor from it; the bandwidth a collective reaches is
// the cluster graph's (graph_collective.h), not this model's.
//
// What the topology search would have found is approximated from the cluster (NcclGraphs): the
// ring and tree graphs carry the GPU's NVLink bandwidth inside a node and its node's NIC
// bandwidth across nodes, spread over channels (two per NIC across nodes, as NCCL duplicates
// its channels; NVLink bandwidth over NCCL's per-channel search speed, doubled, inside one);
// on one node the NVLS graph has a channel per GPU at the search speed a GPU's link carries
// n + 1 times (search.cc; graph_collective.cc), across nodes NCCL's NVLS channel count (16
// from SM90, 32 on Blackwell: transport/nvls.cc ncclNvlsChannels).
//
// NcclGraphs::release picks 2.27's tuner instead (cluster `nccl_version`): its NVLS
// all-reduce at channels × min(bwIntra, bwInter) converted by 5/6, its NVLS all-gather and
// reduce-scatter at min(bwIntra (ppn − 1)/ppn, 0.9 bwInter), no NVLS-tree cap, and Blackwell's
// tree caps at twice Hopper's (v2.27.7 tuning.cc); the rest of the tables are the same.

#include <array>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "sim/base/units.h"
#include "sim/spec/scenario.h"
#include "sim/workload/program.h"

namespace sim::cost {

enum class NcclProtocol { kLL, kLL128, kSimple };
inline constexpr int kNumNcclProtocols = 3;
// NCCL's spelling: "LL", "LL128", "Simple".
absl::string_view ProtocolName(NcclProtocol p);

// The GPU generation NCCL's tables are indexed by (compute capability 7.x, 8.x, 9.x, 10.x+).
enum class NcclArch { kVolta, kAmpere, kHopper, kBlackwell };
NcclArch ArchOf(double compute_capability);

// What NCCL's topology search hands its tuner, for one communicator.
struct NcclGraphs {
  NcclArch arch = NcclArch::kAmpere;
  int64_t ranks = 1;
  int64_t nodes = 1;
  bool nvlink = true;        // the intra-node links are NVLink (else PCIe)
  int ring_channels = 2;     // ring and tree graphs
  double bw_intra_gbps = 0;  // per channel
  double bw_inter_gbps = 0;  // per channel
  // The tree graph's intra-node bandwidth per channel: NCCL's search raises it above the
  // inter-node one, up to twice, for trees (src/graph/search.cc ncclTopoCompute, "increase
  // bwIntra for trees (2 nodes or collnet)"), which is what the tuner prices on two nodes.
  double tree_bw_intra_gbps = 0;
  int nvls_channels = 0;          // 0: no NVLink SHARP
  double nvls_bw_intra_gbps = 0;  // per NVLS channel
  double nvls_bw_inter_gbps = 0;
  // CollNet (a fabric with SHARP, several nodes): NCCL's CollNet Direct on NVSwitch nodes
  // (collnet_direct), CollNet Chain otherwise; its graph's channels (one per NIC the node's
  // members drive) and each channel's bandwidth (the NIC's, at its transport's efficiency).
  bool collnet = false;
  bool collnet_direct = false;
  int collnet_channels = 0;
  double collnet_bw_gbps = 0;
  double net_latency_us = 0;  // the network plugin's reported latency (graph latencyInter)
  NcclRelease release = NcclRelease::k2_28;  // whose tuner (ClusterSpec::nccl)
  bool amd_cpu = false;                      // picks the multi-node LL bandwidth row
};

struct NcclChoice {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
  double latency_us = 0;  // the model's latency of one call (before the ring plateau factor)
  double time_us = 0;     // the model's time of the call
};

class NcclTuner {
 public:
  explicit NcclTuner(const NcclGraphs& graphs);
  // The model's latency (µs) and bandwidth (GB/s of the call's bytes; 0: NCCL does not run
  // this combination) of one call.
  double Latency(CollectiveKind kind, CollectiveAlgorithm a, NcclProtocol p) const;
  double Bandwidth(CollectiveKind kind, CollectiveAlgorithm a, NcclProtocol p) const;
  // ncclTopoGetAlgoTime for a call of `bytes` (NCCL's nBytes: the per-rank buffer for
  // all-reduce, the whole gathered or scattered buffer for all-gather and reduce-scatter).
  std::optional<double> TimeUs(CollectiveKind kind, CollectiveAlgorithm a, NcclProtocol p,
                               Bytes bytes) const;
  // The latency ncclTopoGetAlgoTime charges a call of `bytes` (with the ring's plateau factor).
  double CallLatencyUs(CollectiveKind kind, CollectiveAlgorithm a, NcclProtocol p,
                       Bytes bytes) const;
  // The fastest combination whose algorithm is `only` (any, when kAuto).
  std::optional<NcclChoice> Choose(CollectiveKind kind, Bytes bytes,
                                   CollectiveAlgorithm only = CollectiveAlgorithm::kAuto) const;
  // Every combination NCCL would run, fastest first (ties in NCCL's algorithm-major order).
  std::vector<NcclChoice> Ranked(CollectiveKind kind, Bytes bytes) const;
  // A point-to-point send/receive: the ring's Simple base latency plus one step of the link
  // it crosses (NCCL prices p2p outside the tuner; this is the same table's one-step cost).
  double P2pLatencyUs(bool across_nodes) const;
  // The one step of that: the ring Simple per-hop latency of NVLink (or PCIe) or the network.
  double P2pHopUs(bool across_nodes) const;
  const NcclGraphs& graphs() const { return graphs_; }

 private:
  static constexpr int kFunctions = 3;   // all-gather, reduce-scatter, all-reduce
  static constexpr int kAlgorithms = 5;  // tree, ring, nvls, nvls_tree, collnet
  struct Entry {
    double latency_us = 0;
    double bandwidth_gbps = 0;
  };
  NcclGraphs graphs_;
  std::array<std::array<std::array<Entry, kNumNcclProtocols>, kAlgorithms>, kFunctions> table_{};
};

}  // namespace sim::cost
