// NCCL's tuner model (sim/cost/nccl_tuner.h) on hand-worked cases: each expected number is
// NCCL 2.28's tuning.cc arithmetic done by hand on the graphs given.
#include "sim/cost/nccl_tuner.h"

#include <catch2/catch.hpp>

#include "sim/cluster/topology.h"
#include "sim/config/catalog.h"
#include "sim/cost/graph_collective.h"

namespace sim::cost {
namespace {

using A = CollectiveAlgorithm;
using P = NcclProtocol;
constexpr CollectiveKind kAR = CollectiveKind::kAllReduce;

// One 8-GPU Hopper node: 12 ring channels of 30 GB/s (360 GB/s of NVLink), 8 NVLS channels
// (one per GPU) of 40 GB/s, bwInter raised to 60 (NCCL's search, graph_collective.cc).
NcclGraphs HopperNode(int64_t ranks) {
  NcclGraphs g;
  g.arch = NcclArch::kHopper;
  g.ranks = ranks;
  g.nodes = 1;
  g.ring_channels = 12;
  g.bw_intra_gbps = g.bw_inter_gbps = g.tree_bw_intra_gbps = 30;
  g.nvls_channels = 8;
  g.nvls_bw_intra_gbps = 40;
  g.nvls_bw_inter_gbps = 60;
  return g;
}

TEST_CASE("NCCL tuner: latencies of one Hopper node", "[nccl_tuner]") {
  const NcclTuner t(HopperNode(8));
  // Ring all-reduce: base + 2(n-1) NVLink steps.
  CHECK(t.Latency(kAR, A::kRing, P::kLL) == Approx(6.6 + 14 * 0.6));
  CHECK(t.Latency(kAR, A::kRing, P::kLL128) == Approx(14.0 + 14 * 1.9));
  CHECK(t.Latency(kAR, A::kRing, P::kSimple) == Approx(8.4 + 14 * 3.4));
  // Tree inside one node: 2 (ppn - 1) chain steps.
  CHECK(t.Latency(kAR, A::kTree, P::kSimple) == Approx(8.4 + 2 * 7 * 4.0));
  // NVLS: the NVLink SHARP latency alone; only Simple; no NVLS tree on one node.
  CHECK(t.Latency(kAR, A::kNvls, P::kSimple) == Approx(25.0));
  CHECK(t.Bandwidth(kAR, A::kNvls, P::kLL) == 0);
  CHECK(t.Bandwidth(kAR, A::kNvlsTree, P::kSimple) == 0);
  // All-gather: n - 1 steps.
  CHECK(t.Latency(CollectiveKind::kAllGather, A::kRing, P::kSimple) == Approx(8.4 + 7 * 3.4));
}

TEST_CASE("NCCL tuner: bandwidths of one Hopper node", "[nccl_tuner]") {
  const NcclTuner t(HopperNode(8));
  const double bus = 12 * 30.0, ratio = 8.0 / 14.0;
  CHECK(t.Bandwidth(kAR, A::kRing, P::kSimple) == Approx(bus * ratio));
  CHECK(t.Bandwidth(kAR, A::kRing, P::kLL) == Approx(141.0 * ratio));  // llMaxBw caps 180
  CHECK(t.Bandwidth(kAR, A::kRing, P::kLL128) == Approx(0.92 * bus * ratio));
  // Tree: 0.92, capped at 38.7 per channel, halved to algorithm bandwidth.
  CHECK(t.Bandwidth(kAR, A::kTree, P::kSimple) == Approx(0.92 * bus * 0.5));
  CHECK(t.Bandwidth(kAR, A::kTree, P::kLL128) == Approx(0.92 * bus * 7 / 9 * 0.5));
  // NVLS: min(40 x 0.85 x 7/8 x 2, 60) per channel x 8, as the ring converts.
  CHECK(t.Bandwidth(kAR, A::kNvls, P::kSimple) == Approx(8 * 40 * 0.85 * 7.0 / 8.0 * 2 * ratio));
  // NVLS all-gather: in bus bandwidth, the intra term x (ppn-1)/ppn: 40 x .85 x 7/8 x 7/8.
  CHECK(t.Bandwidth(CollectiveKind::kAllGather, A::kNvls, P::kSimple) ==
        Approx(8 * 40 * 0.85 * 7.0 / 8.0 * 7.0 / 8.0));
}

TEST_CASE("NCCL tuner: LL for small all-reduces, NVLS for large, on a Hopper node",
          "[nccl_tuner]") {
  const NcclTuner t(HopperNode(8));
  // 64 KiB: ring LL 15 + 65536 / (1000 x 80.57) = 15.81 us beats NVLS 25.32 us.
  auto small = t.Choose(kAR, Bytes::KiB(64));
  REQUIRE(small);
  CHECK(small->algorithm == A::kRing);
  CHECK(small->protocol == P::kLL);
  CHECK(small->time_us == Approx(15.0 + 65536.0 / (1000 * 141.0 * 8 / 14)));
  // 1 GiB: equal bandwidth, NVLS's 25 us against the ring's 56.
  auto big = t.Choose(kAR, Bytes::GiB(1));
  REQUIRE(big);
  CHECK(big->algorithm == A::kNvls);
  CHECK(t.Choose(kAR, Bytes::GiB(1), A::kRing)->protocol == P::kSimple);
}

TEST_CASE("NCCL tuner: two nodes run a tree whose intra-node bandwidth the search doubled",
          "[nccl_tuner]") {
  // Two Ampere nodes, 8 GPUs each, NIC-bound at 40 GB/s per node over 8 channels of 5 GB/s;
  // the tree graph's intra-node bandwidth raised to twice the inter-node one.
  NcclGraphs g;
  g.arch = NcclArch::kAmpere;
  g.ranks = 16;
  g.nodes = 2;
  g.ring_channels = 8;
  g.bw_intra_gbps = g.bw_inter_gbps = 5;
  g.tree_bw_intra_gbps = 10;
  const NcclTuner t(g);
  // Ring: 8 x 5 x 16/30; tree: min(0.92 x 80, 8 x 23.6) / 2.
  CHECK(t.Bandwidth(kAR, A::kRing, P::kSimple) == Approx(40.0 * 16 / 30));
  CHECK(t.Bandwidth(kAR, A::kTree, P::kSimple) == Approx(0.92 * 80 * 0.5));
  // Ring Simple: 28 NVLink steps at max(3.4, 3 x 1 us net overhead), 2 at 14 us.
  CHECK(t.Latency(kAR, A::kRing, P::kSimple) == Approx(8.4 + 28 * 3.4 + 2 * 14.0));
  // and NCCL's plateau factor once every channel of every rank has 64 bytes.
  CHECK(t.CallLatencyUs(kAR, A::kRing, P::kSimple, Bytes::MiB(64)) ==
        Approx(1.4 * (8.4 + 28 * 3.4 + 2 * 14.0)));
  // Tree Simple: 2 x (7 chain steps x 4.0 + log2(2) x 14).
  CHECK(t.Latency(kAR, A::kTree, P::kSimple) == Approx(8.4 + 2 * (7 * 4.0 + 14.0)));
  const auto big = t.Choose(kAR, Bytes::GiB(1));
  REQUIRE(big);
  CHECK(big->algorithm == A::kTree);
  CHECK(big->protocol == P::kSimple);
}

TEST_CASE("NCCL tuner: CollNet Direct and Chain on a SHARP fabric, all-reduce only",
          "[nccl_tuner]") {
  // Two Ampere nodes of 8 GPUs with 4 NIC heads of 23.25 GB/s each (4 x 200 Gb/s at 0.93).
  NcclGraphs g;
  g.arch = NcclArch::kAmpere;
  g.ranks = 16;
  g.nodes = 2;
  g.ring_channels = 8;
  g.bw_intra_gbps = g.bw_inter_gbps = g.tree_bw_intra_gbps = 93.0 / 8;
  CHECK(NcclTuner(g).Bandwidth(kAR, A::kCollnet, P::kSimple) == 0);  // no SHARP: no CollNet
  g.collnet = true;
  g.collnet_direct = true;
  g.collnet_channels = 4;
  g.collnet_bw_gbps = 23.25;
  const NcclTuner direct(g);
  // Direct: 4 x 23.25 over the GPU:NIC ratio 2 less half its excess (1.5), then 0.5.
  CHECK(direct.Bandwidth(kAR, A::kCollnet, P::kSimple) == Approx(93.0 / 1.5 * 0.5));
  // 2 x (one NVLink step of 3.7 us + 7 local peers x 0.4 us) + one network step of 31 us.
  CHECK(direct.Latency(kAR, A::kCollnet, P::kSimple) == Approx(2 * (3.7 + 7 * 0.4) + 31));
  CHECK(direct.Bandwidth(kAR, A::kCollnet, P::kLL) == 0);
  CHECK(direct.Bandwidth(CollectiveKind::kAllGather, A::kCollnet, P::kSimple) == 0);
  // Chain (no NVSwitch): the graph's bandwidth, then 0.5; 2 x 7 chain steps of 2.8 us + 30 us.
  g.collnet_direct = false;
  const NcclTuner chain(g);
  CHECK(chain.Bandwidth(kAR, A::kCollnet, P::kSimple) == Approx(93.0 * 0.5));
  CHECK(chain.Latency(kAR, A::kCollnet, P::kSimple) == Approx(2 * 7 * 2.8 + 30));
  // From SM90 Direct keeps 0.85 of its bus bandwidth.
  g.collnet_direct = true;
  g.arch = NcclArch::kHopper;
  CHECK(NcclTuner(g).Bandwidth(kAR, A::kCollnet, P::kSimple) == Approx(93.0 / 1.5 * 0.85 * 0.5));
}

TEST_CASE("NCCL tuner graphs from the cluster: channels, NICs, NVLS channel counts",
          "[nccl_tuner]") {
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  for (auto [node, nodes, want_nvls] : {std::tuple{"dgx-h100", 1, 8},
                                        {"dgx-b200", 1, 8},
                                        {"dgx-b200", 2, 32},
                                        {"dgx-a100-80gb", 1, 0}}) {
    INFO(node << " x " << nodes);
    auto c = config::ResolveCluster(root, node, nodes, std::nullopt);
    REQUIRE(c.ok());
    auto topo = cluster::Topology::Build(*c);
    REQUIRE(topo.ok());
    const GraphCostModel model(*topo, *c, A::kAuto);
    const NcclGraphs g = model.GraphsFor(CommGroup{8 * nodes, nodes, 1, 1, 0});
    CHECK(g.nvls_channels == want_nvls);
    if (nodes > 1) {
      // Two channels per NIC; each carries an eighth of 8 x 400 Gb/s at InfiniBand's efficiency.
      CHECK(g.ring_channels == 16);
      CHECK(g.bw_inter_gbps == Approx(8 * 50.0 * 0.93 / 16));
    }
  }
}

TEST_CASE("NCCL's NVLS search on one node: a channel per GPU, so ring on 4 GPUs and NVLS on 8",
          "[nccl_tuner]") {
  // ncclTopoCompute: each NVLS channel pulls through every GPU's switch link once and its
  // head's twice, so a link carries n + 1 channels; on a DGX H100 (364.5 GB/s of NVLink at its
  // efficiency) that is 364.5 / 5 = 72.9 -> the 60 GB/s search speed for 4 GPUs and
  // 364.5 / 9 = 40.5 -> 40 for 8, bwInter raised to 60 either way. NCCL 2.27.7 ran ring on 4
  // of an H200 node's GPUs (stas00's all_reduce_perf log, the published measurements stepsim is
  // validated on).
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  auto c = config::ResolveCluster(root, "dgx-h100", 1, std::nullopt);
  REQUIRE(c.ok());
  auto topo = cluster::Topology::Build(*c);
  REQUIRE(topo.ok());
  const GraphCostModel model(*topo, *c, A::kAuto);
  for (auto [gpus, bw_intra, want] : {std::tuple{4, 60.0, A::kRing}, {8, 40.0, A::kNvls}}) {
    INFO(gpus << " GPUs");
    const CommGroup group{gpus, 1, 1, 1, 0};
    const NcclGraphs g = model.GraphsFor(group);
    CHECK(g.nvls_channels == gpus);
    CHECK(g.nvls_bw_intra_gbps == bw_intra);
    CHECK(g.nvls_bw_inter_gbps == 60.0);
    const auto choice = NcclTuner(g).Choose(kAR, Bytes::Count(int64_t{1} << 30));
    REQUIRE(choice.has_value());
    CHECK(choice->algorithm == want);
  }
}

TEST_CASE("NCCL 2.27's tuner prices NVLS without 2.28's pipelining: NVLS on 5 GPUs, not ring",
          "[nccl_tuner]") {
  // Five GPUs of an 8-GPU Hopper node: 5 NVLS channels of 60 GB/s (bwInter 60), 12 ring
  // channels of 30. 2.27 (v2.27.7 tuning.cc): NVLS all-reduce 5 x min(60, 60) x 5/6 = 250 GB/s
  // of algorithm bandwidth, the ring 360 x 5/8 = 225: NVLS, as NCCL 2.27.7 ran on stas00's
  // H200 node. 2.28: NVLS 5 x min(60 x 0.85 x 4/5 x 2, 60) x 5/8 = 187.5 against the same ring.
  NcclGraphs g = HopperNode(5);
  g.nvls_channels = 5;
  g.nvls_bw_intra_gbps = g.nvls_bw_inter_gbps = 60;
  const Bytes m = Bytes::Count(int64_t{8} << 30);
  CHECK(NcclTuner(g).Bandwidth(kAR, A::kNvls, P::kSimple) == Approx(5 * 60 * 5.0 / 8.0));
  CHECK(NcclTuner(g).Choose(kAR, m)->algorithm == A::kRing);
  g.release = NcclRelease::k2_27;
  const NcclTuner t(g);
  CHECK(t.Bandwidth(kAR, A::kNvls, P::kSimple) == Approx(5 * 60 * 5.0 / 6.0));
  CHECK(t.Bandwidth(kAR, A::kRing, P::kSimple) == Approx(12 * 30 * 5.0 / 8.0));
  CHECK(t.Choose(kAR, m)->algorithm == A::kNvls);
  // All-gather: min(60 x 4/5, 0.9 x 60) = 48 per channel, in bus bandwidth.
  CHECK(t.Bandwidth(CollectiveKind::kAllGather, A::kNvls, P::kSimple) == Approx(5 * 48.0));
}

}  // namespace
}  // namespace sim::cost
