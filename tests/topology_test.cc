// The cluster graph and collectives priced on it, on small hand-checkable cases.
#include "sim/cluster/topology.h"

#include <catch2/catch.hpp>

#include "sim/config/catalog.h"
#include "sim/cost/graph_collective.h"

namespace sim {
namespace {

const config::DataRoot kRoot{STEPSIM_SOURCE_DIR};

ClusterSpec Cluster(const char* node, int64_t nodes, std::optional<FabricSpec> fabric = {}) {
  auto catalogs = config::LoadCatalogs(kRoot);
  REQUIRE(catalogs.ok());
  ClusterSpec c;
  for (const auto& n : catalogs->nodes) {
    if (n.name == node) c.node = n;
  }
  c.gpu = *config::FindGpu(catalogs->gpus, c.node.gpu);
  c.nodes = nodes;
  c.fabric = fabric;
  return c;
}

FabricSpec Fabric(double oversubscription, int64_t leaf_ports) {
  FabricSpec f;
  f.name = "test";
  f.oversubscription = oversubscription;
  f.leaf_ports = leaf_ports;
  f.link_bandwidth = Bandwidth::Gbps(400);
  return f;
}

TEST_CASE("the fat tree has the switches and links its formulas say", "[topology]") {
  // 64 DGX H100, rail-optimised, 32 nodes per leaf: 8 rails x 2 leaves; non-blocking uplink
  // U = 32 x 50 GB/s = 1.6 TB/s per leaf over 32 spines of 50 GB/s.
  auto t = cluster::Topology::Build(Cluster("dgx-h100", 64, Fabric(1, 32)));
  REQUIRE(t.ok());
  const auto s = t->Summary();
  CHECK(s.gpus == 512);
  CHECK(s.leaves == 16);
  CHECK(s.spines == 32);
  // Cables: 512 GPU-NVSwitch + 512 GPU-NIC + 512 NIC-leaf + 16 x 32 leaf-spine.
  CHECK(s.cables == 512 + 512 + 512 + 16 * 32);
  CHECK(s.injection_per_gpu.bytes_per_s() == 8 * 50e9 / 8);
  // A 2:1 spine halves the bisection.
  auto half = cluster::Topology::Build(Cluster("dgx-h100", 64, Fabric(2, 32)));
  REQUIRE(half.ok());
  CHECK(half->Summary().bisection.bytes_per_s() == Approx(s.bisection.bytes_per_s() / 2));
  CHECK(half->Summary().spines == 16);
  // The max flow between the halves equals the closed form: 32 nodes x 8 NICs x 50 GB/s,
  // divided by the oversubscription.
  CHECK(s.bisection.bytes_per_s() == Approx(32 * 8 * 50e9));
  CHECK(half->Summary().bisection.bytes_per_s() == Approx(32 * 8 * 50e9 / 2));
}

TEST_CASE("explicit fabrics: the bisection is the min cut (a dumbbell's middle link)",
          "[topology]") {
  auto file =
      config::LoadClusterTopology(kRoot, STEPSIM_SOURCE_DIR "/topologies/commodity-dumbbell.yaml");
  REQUIRE(file.ok());
  auto t = cluster::Topology::Build(file->cluster);
  REQUIRE(t.ok());
  // Nodes 0-1 hang off tor-a, nodes 2-3 off tor-b; one 100 Gb/s link joins the switches.
  CHECK(t->Summary().bisection.bytes_per_s() == Approx(100e9 / 8));
}

TEST_CASE("routes: NVSwitch inside a node, rail leaf across, spine between leaves", "[topology]") {
  auto t = cluster::Topology::Build(Cluster("dgx-h100", 4, Fabric(1, 2)));
  REQUIRE(t.ok());
  std::vector<int32_t> r;
  t->Route(0, 5, r);  // same node
  CHECK(r.size() == 2);
  r.clear();
  t->Route(0, 8, r);  // node 0 -> node 1, rail 0, same leaf (2 nodes per leaf)
  CHECK(r.size() == 4);
  r.clear();
  t->Route(0, 16, r);  // node 0 -> node 2: another leaf, through a spine
  CHECK(r.size() == 6);
  CHECK(t->LinkName(r[2]).rfind("leaf", 0) == 0);
}

TEST_CASE("ring all-reduce on one switch: NCCL's latency + 2(n-1)/n M / B", "[topology]") {
  const ClusterSpec c = Cluster("dgx-h100", 1);
  auto t = cluster::Topology::Build(c);
  REQUIRE(t.ok());
  cost::GraphCostModel model(*t, c, CollectiveAlgorithm::kRing);
  const int64_t n = 8;
  const Bytes m = Bytes::GB(1);
  const double b = c.node.intra_node_bandwidth.bytes_per_s() * c.gpu.calibration.comm_efficiency;
  // The bandwidth reached at 1 GB per rank: NVLink's ramp there.
  const double f = FindTransport("nvlink")->RampAt(m);
  // NCCL's ring Simple latency on one NVLink node (tuning.cc): base 8.4 us + 2(n-1) steps of
  // 3.4 us = 56 us for all-reduce; n - 1 steps, 32.2 us, for all-gather.
  const double want = 56.0e-6 + 2.0 * (n - 1) / n * static_cast<double>(m.count()) / (b * f);
  const auto got = model.Price(CollectiveKind::kAllReduce, m, CommGroup{n, 1, 1, 1, 0}, 1);
  CHECK(got.protocol == cost::NcclProtocol::kSimple);
  CHECK(got.latency.seconds() == Approx(56.0e-6));
  CHECK(got.time.seconds() == Approx(want).epsilon(1e-9));
  // All-gather: half the steps and half the bytes.
  const Duration ag = model.Cost(CollectiveKind::kAllGather, m, CommGroup{n, 1, 1, 1, 0}, 1);
  CHECK(ag.seconds() ==
        Approx(32.2e-6 + (n - 1.0) / n * static_cast<double>(m.count()) / (b * f)).epsilon(1e-9));
}

TEST_CASE("the size ramp: log-linear between table rows, flat beyond its ends", "[topology]") {
  Transport t;
  CHECK(t.RampAt(Bytes::MiB(1)) == 1.0);  // no table: no ramp
  t.ramp = {{Bytes::MiB(1), 0.2}, {Bytes::MiB(16), 0.6}};
  CHECK(t.RampAt(Bytes::KiB(4)) == 0.2);
  CHECK(t.RampAt(Bytes::MiB(4)) == Approx(0.4));  // halfway in log(size)
  CHECK(t.RampAt(Bytes::MiB(16)) == Approx(0.6));
  CHECK(t.RampAt(Bytes::GiB(1)) == 1.0);
}

TEST_CASE("across nodes: ring uses every NIC, NCCL's latency by algorithm and protocol",
          "[topology]") {
  const ClusterSpec c = Cluster("dgx-h100", 16);
  auto t = cluster::Topology::Build(c);
  REQUIRE(t.ok());
  cost::GraphCostModel model(*t, c, CollectiveAlgorithm::kAuto);
  const CommGroup all{128, 16, 1, 1, 0};
  const Bytes big = Bytes::GiB(8);
  // Bandwidth-bound: one ring per NIC, so the bus bandwidth approaches the node's NICs
  // (8 x 50 GB/s = 400 GB/s, times InfiniBand's efficiency).
  const auto ring =
      model.Price(CollectiveKind::kAllReduce, big, all, 1, CollectiveAlgorithm::kRing);
  const double busbw =
      BytesSentPerGpu(CollectiveKind::kAllReduce, big, 128).count() / ring.time.seconds();
  CHECK(busbw == Approx(400e9 * *FindTransport("ib")->efficiency).epsilon(0.10));
  // A 25 MB bucket: NCCL's tuner runs the ring in LL128 there, paying 2·127 steps (224 of
  // 1.9 us on NVLink, 30 of 4.0 us across nodes, 14 us base: 559.6 us); the hierarchical
  // reduce-scatter, ring and all-gather (Simple) pay 56 + 428.4 + 56 us.
  const Bytes small = Bytes::MB(25);
  const auto r = model.Price(CollectiveKind::kAllReduce, small, all, 1, CollectiveAlgorithm::kRing);
  const auto h =
      model.Price(CollectiveKind::kAllReduce, small, all, 1, CollectiveAlgorithm::kHierarchical);
  CHECK(r.protocol == cost::NcclProtocol::kLL128);
  CHECK(r.latency.seconds() == Approx(559.6e-6));
  CHECK(h.latency.seconds() == Approx(540.4e-6));
  // auto runs what NCCL's tuner picks for the group and the size.
  const auto pick = cost::NcclTuner(model.GraphsFor(all)).Choose(CollectiveKind::kAllReduce, small);
  REQUIRE(pick);
  const auto a = model.Price(CollectiveKind::kAllReduce, small, all, 1);
  CHECK(a.algorithm == pick->algorithm);
  CHECK(a.protocol == pick->protocol);
  // Tree exists for all-reduce only; all-gather falls back to the ring.
  CHECK(model.Price(CollectiveKind::kAllGather, small, all, 1, CollectiveAlgorithm::kTree)
            .algorithm == CollectiveAlgorithm::kRing);
}

TEST_CASE("oversubscription slows what crosses the spine, not what stays under a leaf",
          "[topology]") {
  // 8 nodes, 4 per leaf per rail: two leaves per rail.
  const ClusterSpec flat = Cluster("dgx-h100", 8, Fabric(1, 4));
  const ClusterSpec tapered = Cluster("dgx-h100", 8, Fabric(4, 4));
  auto t1 = cluster::Topology::Build(flat);
  auto t4 = cluster::Topology::Build(tapered);
  REQUIRE(t1.ok());
  REQUIRE(t4.ok());
  cost::GraphCostModel m1(*t1, flat, CollectiveAlgorithm::kTree);
  cost::GraphCostModel m4(*t4, tapered, CollectiveAlgorithm::kTree);
  const Bytes big = Bytes::GiB(4);
  // The first four nodes share a leaf on every rail: unaffected.
  const CommGroup under_leaf{32, 4, 1, 1, 0};
  CHECK(m1.Cost(CollectiveKind::kAllReduce, big, under_leaf, 1) ==
        m4.Cost(CollectiveKind::kAllReduce, big, under_leaf, 1));
  // All eight nodes: the tree's transfers cross the 4:1 spine and slow down.
  const CommGroup across{64, 8, 1, 1, 0};
  CHECK(m4.Cost(CollectiveKind::kAllReduce, big, across, 1) >
        m1.Cost(CollectiveKind::kAllReduce, big, across, 1));
}

TEST_CASE("other jobs' traffic on the switch links slows what crosses them by its share",
          "[topology]") {
  // 8 DGX H100, 4 per leaf per rail, one spine link of 4 × 50 / 8 = 25 GB/s per leaf (8:1): a
  // ring over the eight nodes crosses each rail's two leaves once each way, and that link is
  // its bottleneck. Other jobs holding half of every switch-to-switch link leave it 12.5 GB/s:
  // the ring's bandwidth part doubles, its latency stays.
  ClusterSpec idle = Cluster("dgx-h100", 8, Fabric(8, 4));
  ClusterSpec shared = idle;
  shared.background_load = 0.5;
  auto ti = cluster::Topology::Build(idle);
  auto ts = cluster::Topology::Build(shared);
  REQUIRE(ti.ok());
  REQUIRE(ts.ok());
  REQUIRE(ti->num_links() == ts->num_links());
  int spine_links = 0;
  for (int32_t id = 0; id < ti->num_links(); ++id) {
    const std::string name = ti->LinkName(id);
    INFO(name);
    const bool switch_to_switch =
        name.find("leaf") != std::string::npos && name.find("spine") != std::string::npos;
    spine_links += switch_to_switch;
    CHECK(ts->link(id).bandwidth.bytes_per_s() ==
          Approx(ti->link(id).bandwidth.bytes_per_s() * (switch_to_switch ? 0.5 : 1.0)));
  }
  CHECK(spine_links == 2 * 16);  // 16 leaves (2 per rail), one spine link each, both ways
  cost::GraphCostModel mi(*ti, idle, CollectiveAlgorithm::kRing);
  cost::GraphCostModel ms(*ts, shared, CollectiveAlgorithm::kRing);
  const Bytes big = Bytes::GiB(4);
  const CommGroup across{64, 8, 1, 1, 0};
  const cost::PricedCollective i = mi.Price(CollectiveKind::kAllGather, big, across, 1);
  const Duration i_time = i.time, i_latency = i.latency;
  CHECK(i.busiest_link.find("spine") != std::string::npos);
  const cost::PricedCollective& p = ms.Price(CollectiveKind::kAllGather, big, across, 1);
  CHECK(p.busiest_link.find("spine") != std::string::npos);
  CHECK(p.latency == i_latency);
  CHECK((p.time - p.latency).seconds() == Approx(2 * (i_time - i_latency).seconds()));
  // Under one leaf nothing of it is shared.
  const CommGroup under_leaf{32, 4, 1, 1, 0};
  CHECK(ms.Cost(CollectiveKind::kAllGather, big, under_leaf, 1) ==
        mi.Cost(CollectiveKind::kAllGather, big, under_leaf, 1));
}

TEST_CASE("shipped cluster topology files build", "[topology]") {
  for (const char* f :
       {"dgx-a100-superpod", "dgx-h100-superpod", "dgx-h100-4to1", "commodity-2x100gbe"}) {
    INFO(f);
    auto file = config::LoadClusterTopology(
        kRoot, std::string(STEPSIM_SOURCE_DIR "/topologies/") + f + ".yaml");
    REQUIRE(file.ok());
    CHECK(cluster::Topology::Build(file->cluster).ok());
  }
}

}  // namespace
}  // namespace sim

namespace sim {
namespace {

TEST_CASE("explicit fabrics: shortest-path routes, the inter-rack cable as bottleneck",
          "[topology]") {
  auto file =
      config::LoadClusterTopology(kRoot, STEPSIM_SOURCE_DIR "/topologies/commodity-dumbbell.yaml");
  REQUIRE(file.ok());
  auto t = cluster::Topology::Build(file->cluster);
  REQUIRE(t.ok());
  std::vector<int32_t> r;
  t->Route(0, 8, r);  // node 0 -> node 1: GPU, NIC, tor-a, NIC, GPU
  CHECK(r.size() == 4);
  r.clear();
  t->Route(0, 16, r);  // node 0 -> node 2: across the tor-a -- tor-b cable
  CHECK(r.size() == 5);
  CHECK(t->LinkName(r[2]) == "switch0->switch1");
  cost::GraphCostModel model(*t, file->cluster, CollectiveAlgorithm::kRing);
  const auto p =
      model.Price(CollectiveKind::kAllGather, Bytes::GiB(1), CommGroup{32, 4, 1, 1, 0}, 1);
  CHECK(p.busiest_link == "switch0->switch1");
}

TEST_CASE("explicit fabrics: of parallel cables, a route takes the one declared first",
          "[topology]") {
  // The cluster graph keeps each vertex's links in the order they were made (a compressed
  // sparse row graph built by a stable sort, sim/cluster/topology.cc): the breadth-first
  // search reaches tor-b over the first tor-a -- tor-b cable, whichever it is.
  for (const double first_gbps : {100.0, 400.0}) {
    INFO(first_gbps << " Gb/s declared first");
    auto file = config::LoadClusterTopology(
        kRoot, STEPSIM_SOURCE_DIR "/topologies/commodity-dumbbell.yaml");
    REQUIRE(file.ok());
    FabricSpec& f = *file->cluster.fabric;
    REQUIRE(f.links.back().a == "tor-a");
    FabricLink second = f.links.back();
    f.links.back().bandwidth = Bandwidth::Gbps(first_gbps);
    second.bandwidth = Bandwidth::Gbps(first_gbps == 100 ? 400 : 100);
    f.links.push_back(second);
    auto t = cluster::Topology::Build(file->cluster);
    REQUIRE(t.ok());
    std::vector<int32_t> r;
    t->Route(0, 16, r);  // node 0 -> node 2, across the racks
    REQUIRE(r.size() == 5);
    CHECK(t->LinkName(r[2]) == "switch0->switch1");
    CHECK(t->link(r[2]).bandwidth.bytes_per_s() == Bandwidth::Gbps(first_gbps).bytes_per_s());
  }
}

TEST_CASE("a GPU the fabric does not reach is an error", "[topology]") {
  auto file =
      config::LoadClusterTopology(kRoot, STEPSIM_SOURCE_DIR "/topologies/commodity-dumbbell.yaml");
  REQUIRE(file.ok());
  ClusterSpec c = file->cluster;
  // Drop node 3's cables.
  auto& links = c.fabric->links;
  links.erase(std::remove_if(links.begin(), links.end(),
                             [](const FabricLink& l) { return l.a.rfind("node3.", 0) == 0; }),
              links.end());
  auto t = cluster::Topology::Build(c);
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().message() == "fabric explicit-dumbbell: GPU 24 is not reachable from GPU 0");
}

}  // namespace
}  // namespace sim

namespace sim {
namespace {

TEST_CASE("NVLS: in-switch all-reduce inside an H100 node, not on A100 or for all-gather",
          "[topology]") {
  for (const char* node : {"dgx-h100", "dgx-a100-80gb"}) {
    const ClusterSpec c = Cluster(node, 1);
    auto t = cluster::Topology::Build(c);
    REQUIRE(t.ok());
    cost::GraphCostModel model(*t, c, CollectiveAlgorithm::kAuto);
    const CommGroup all{8, 1, 1, 1, 0};
    const auto ar = model.Price(CollectiveKind::kAllReduce, Bytes::GiB(8), all, 1);
    const auto ag = model.Price(CollectiveKind::kAllGather, Bytes::GiB(8), all, 1);
    CHECK(ag.algorithm == CollectiveAlgorithm::kRing);
    if (std::string(node) == "dgx-h100") {
      CHECK(ar.algorithm == CollectiveAlgorithm::kNvls);
      // M / (B · η_nvls) at NVLS's ramp, plus NCCL's NVLS latency (25 us on NVLink).
      const double want =
          static_cast<double>(Bytes::GiB(8).count()) /
              (c.node.intra_node_bandwidth.bytes_per_s() * *c.gpu.calibration.nvls_efficiency *
               NvlsTransport().RampAt(Bytes::GiB(8))) +
          25e-6;
      CHECK(ar.time.seconds() == Approx(want).epsilon(1e-9));
    } else {
      CHECK(ar.algorithm == CollectiveAlgorithm::kRing);
    }
  }
}

TEST_CASE("NVLS tree: NVLS in each node pipelined with the rails' inter-node all-reduce",
          "[topology]") {
  const ClusterSpec c = Cluster("dgx-h100", 2);
  auto t = cluster::Topology::Build(c);
  REQUIRE(t.ok());
  cost::GraphCostModel model(*t, c, CollectiveAlgorithm::kAuto);
  const CommGroup all{16, 2, 1, 1, 0};
  const Bytes m = Bytes::GiB(8);
  const auto tree =
      model.Price(CollectiveKind::kAllReduce, m, all, 1, CollectiveAlgorithm::kNvlsTree);
  const auto hier =
      model.Price(CollectiveKind::kAllReduce, m, all, 1, CollectiveAlgorithm::kHierarchical);
  CHECK(model.Price(CollectiveKind::kAllReduce, m, all, 1).algorithm ==
        CollectiveAlgorithm::kNvlsTree);
  // The slower phase sets the time: NVLS moves M at B·η_nvls; each rail's ring all-reduces
  // M/8 between 2 nodes over one 400 Gb/s NIC per GPU: 2·(2−1)/2 · M/8 / (50 GB/s · η_ib).
  const double nvls = static_cast<double>(m.count()) /
                      (c.node.intra_node_bandwidth.bytes_per_s() *
                       *c.gpu.calibration.nvls_efficiency * NvlsTransport().RampAt(m));
  const Transport& ib = *FindTransport("ib");
  const double rails = static_cast<double>(m.count()) / 8 /
                       (c.node.nic_bandwidth.bytes_per_s() * *ib.efficiency * ib.RampAt(m));
  CHECK(tree.time.seconds() == Approx(std::max(nvls, rails)).epsilon(0.01));
  CHECK(tree.time < hier.time);
  // All-gather has no NVLS tree.
  CHECK(model.Price(CollectiveKind::kAllGather, m, all, 1, CollectiveAlgorithm::kNvlsTree)
            .algorithm == CollectiveAlgorithm::kRing);
}

TEST_CASE("a GPU that owns several NICs drives them all in an inter-node ring", "[topology]") {
  // 2 nodes of 8 GPUs with 32 x 100 Gb/s NICs (AWS p5): GPU 0 owns rails 0-3.
  ClusterSpec c = Cluster("dgx-h100", 2);
  c.node.nics_per_node = 32;
  c.node.nic_bandwidth = Bandwidth::Gbps(100);
  auto t = cluster::Topology::Build(c);
  REQUIRE(t.ok());
  cost::GraphCostModel model(*t, c, CollectiveAlgorithm::kRing);
  const Bytes m = Bytes::GiB(1);
  // A 2-member ring, one GPU per node: all-gather sends M/2 over 4 NICs of 12.5 GB/s, M/8
  // through each (where InfiniBand's ramp is read).
  const auto ag = model.Price(CollectiveKind::kAllGather, m, CommGroup{2, 2, 8, 1, 0}, 1);
  const Transport& ib = *FindTransport("ib");
  CHECK(ag.ramp_bytes == m / 8);
  const double want = static_cast<double>(m.count()) / 2 /
                      (4 * c.node.nic_bandwidth.bytes_per_s() * *ib.efficiency * ib.RampAt(m / 8));
  CHECK(ag.time.seconds() == Approx(want).epsilon(0.01));
}

}  // namespace
}  // namespace sim

namespace sim {
namespace {

TEST_CASE("all-to-all: grouped point-to-point, slices of M/n, rail-aligned across nodes",
          "[topology]") {
  const Bytes m = Bytes::GiB(1);
  {
    // One H100 node: every GPU sends 7 slices of M/8 over its NVLink at once. NCCL's p2p
    // latency: base 8.4 us + 7 NVLink hops of 3.4 us.
    const ClusterSpec c = Cluster("dgx-h100", 1);
    auto t = cluster::Topology::Build(c);
    REQUIRE(t.ok());
    cost::GraphCostModel model(*t, c, CollectiveAlgorithm::kAuto);
    const auto p = model.Price(CollectiveKind::kAllToAll, m, CommGroup{8, 1, 1, 1, 0}, 1);
    CHECK(p.latency.seconds() == Approx((8.4 + 7 * 3.4) * 1e-6));
    CHECK(p.busiest_load == 7);
    const double b = c.node.intra_node_bandwidth.bytes_per_s() * c.gpu.calibration.comm_efficiency;
    CHECK(p.time.seconds() ==
          Approx(p.latency.seconds() + 7.0 / 8.0 * static_cast<double>(m.count()) /
                                           (b * FindTransport("nvlink")->RampAt(m))));
    CHECK(BytesSentPerGpu(CollectiveKind::kAllToAll, m, 8) == m * 7 / 8);
  }
  {
    // Two nodes: the 8 slices bound for GPU 8 (rail 0) leave through GPU 0's NIC (PXN), M/16
    // each: M/2 through every NIC, at InfiniBand's efficiency and its ramp at M/2. Latency:
    // base + 7 NVLink hops + 8 network hops of 14 us.
    const ClusterSpec c = Cluster("dgx-h100", 2);
    auto t = cluster::Topology::Build(c);
    REQUIRE(t.ok());
    cost::GraphCostModel model(*t, c, CollectiveAlgorithm::kAuto);
    const auto p = model.Price(CollectiveKind::kAllToAll, m, CommGroup{16, 2, 1, 1, 0}, 1);
    CHECK(p.latency.seconds() == Approx((8.4 + 7 * 3.4 + 8 * 14.0) * 1e-6));
    CHECK(p.busiest_link == "gpu0->nic0");
    CHECK(p.busiest_load == 8);
    CHECK(p.ramp_bytes == m / 2);
    const Transport& ib = *FindTransport("ib");
    CHECK(p.time.seconds() ==
          Approx(p.latency.seconds() +
                 static_cast<double>(m.count()) / 2 / (50e9 * *ib.efficiency * ib.RampAt(m / 2))));
  }
}

}  // namespace
}  // namespace sim

namespace sim {
namespace {

TEST_CASE("NVLink domains across nodes: a job takes the fewest domains, split evenly",
          "[topology]") {
  struct Case {
    int64_t trays;
    int64_t domains, gpus_per_domain;
  };
  // An NVL72 rack is 18 trays of 4: 9 trays are half a rack, 32 trays two racks of 16 (the
  // fewest domains that hold them, ceil(32 / 18) = 2, split evenly), 36 two full racks.
  for (const Case& k : {Case{1, 1, 4}, Case{9, 1, 36}, Case{18, 1, 72}, Case{32, 2, 64},
                        Case{36, 2, 72}, Case{360, 20, 72}}) {
    ClusterSpec c = Cluster("gb200-nvl72", k.trays);
    REQUIRE(c.node.nvlink_domain == 72);
    INFO(k.trays << " trays");
    CHECK_FALSE(config::FoldNvlinkDomain(c).has_value());
    CHECK(c.nodes == k.domains);
    CHECK(c.node.gpus_per_node == k.gpus_per_domain);
    CHECK(c.node.nics_per_node == 4 * (k.gpus_per_domain / 4));
    CHECK(c.node.domain_nodes == k.gpus_per_domain / 4);
    CHECK(c.gpus() == 4 * k.trays);
  }
  // 19 trays need two domains and do not split evenly over them.
  ClusterSpec odd = Cluster("gb200-nvl72", 19);
  const auto problem = config::FoldNvlinkDomain(odd);
  REQUIRE(problem.has_value());
  CHECK(*problem ==
        "19 nodes of gb200-nvl72 do not split evenly over the 2 NVLink domains of at most 18 "
        "nodes (72 GPUs) they need; use 18 or 20 nodes");
  // A node type without a multi-node domain is left alone.
  ClusterSpec h100 = Cluster("dgx-h100", 4);
  CHECK_FALSE(config::FoldNvlinkDomain(h100).has_value());
  CHECK(h100.nodes == 4);
  CHECK(h100.node.gpus_per_node == 8);
}

TEST_CASE("NVLS spans an NVL72 rack, NICs carry only what crosses racks", "[topology]") {
  ClusterSpec c = Cluster("gb200-nvl72", 36, Fabric(1.0, 64));
  REQUIRE_FALSE(config::FoldNvlinkDomain(c).has_value());
  auto t = cluster::Topology::Build(c);
  REQUIRE(t.ok());
  cost::GraphCostModel model(*t, c, CollectiveAlgorithm::kAuto);
  // All 72 GPUs of one rack: NVLS in the rack's NVLink switches, no NIC.
  const Bytes m = Bytes::GiB(8);
  const auto rack = model.Price(CollectiveKind::kAllReduce, m, CommGroup{72, 1, 1, 1, 0}, 1);
  CHECK(rack.algorithm == CollectiveAlgorithm::kNvls);
  // M / (B x nvls_efficiency x ramp) + NCCL's NVLS latency; the ramp read at the slice each
  // GPU reduces, scaled to the 8-GPU node it was fitted on: 8 GiB x 8 / 72.
  const double want =
      static_cast<double>(m.count()) /
          (c.node.intra_node_bandwidth.bytes_per_s() * *c.gpu.calibration.nvls_efficiency *
           NvlsTransport().RampAt(Bytes::Round(static_cast<double>(m.count()) * 8.0 / 72.0))) +
      25e-6;
  CHECK(rack.time.seconds() == Approx(want).epsilon(1e-9));
  CHECK(NvlsTransport().RampAt(Bytes::Round(static_cast<double>(m.count()) * 8.0 / 72.0)) <
        NvlsTransport().RampAt(m));
  // Both racks: NVLS tree, NVLS inside each rack and the inter-rack tree over the NICs.
  const auto both = model.Price(CollectiveKind::kAllReduce, m, CommGroup{144, 2, 1, 1, 0}, 1);
  CHECK(both.algorithm == CollectiveAlgorithm::kNvlsTree);
  CHECK(both.time >= rack.time);
}

TEST_CASE("CollNet on a SHARP fabric: each NIC carries M each way once, at SHARP's rate",
          "[topology]") {
  FabricSpec f = Fabric(1.0, 64);
  f.sharp = true;
  const ClusterSpec c = Cluster("dgx-h100", 2, f);
  auto t = cluster::Topology::Build(c);
  REQUIRE(t.ok());
  cost::GraphCostModel model(*t, c, CollectiveAlgorithm::kAuto);
  const CommGroup all{16, 2, 1, 1, 0};
  const Bytes m = Bytes::GiB(8);
  const auto collnet =
      model.Price(CollectiveKind::kAllReduce, m, all, 1, CollectiveAlgorithm::kCollnet);
  REQUIRE(collnet.algorithm == CollectiveAlgorithm::kCollnet);
  // The three phases are pipelined: the slowest sets the time. Each node's 8 NICs of 50 GB/s
  // carry M/8 each way at SHARP's efficiency (the ramp read at M/8); the NVLink reduce-scatter
  // and all-gather move 7/8 M at 450 GB/s x comm_efficiency, faster.
  const Transport& sharp = SharpTransport();
  const double nic = static_cast<double>(m.count()) / 8 /
                     (c.node.nic_bandwidth.bytes_per_s() * *sharp.efficiency *
                      sharp.RampAt(Bytes::Count(m.count() / 8)));
  const double nvlink = static_cast<double>(m.count()) * 7 / 8 /
                        (c.node.intra_node_bandwidth.bytes_per_s() *
                         c.gpu.calibration.comm_efficiency * FindTransport("nvlink")->RampAt(m));
  REQUIRE(nvlink < nic);
  // NCCL's CollNet Direct latency: 2 x (3.7 + 7 x 0.4) + 31 us.
  CHECK(collnet.time.seconds() == Approx(nic + 44e-6).epsilon(1e-6));
  // Not SHARP: CollNet does not apply and the ring runs; all-gather has no CollNet here.
  FabricSpec plain = Fabric(1.0, 64);
  const ClusterSpec d = Cluster("dgx-h100", 2, plain);
  auto u = cluster::Topology::Build(d);
  REQUIRE(u.ok());
  cost::GraphCostModel without(*u, d, CollectiveAlgorithm::kAuto);
  CHECK(without.Price(CollectiveKind::kAllReduce, m, all, 1, CollectiveAlgorithm::kCollnet)
            .algorithm == CollectiveAlgorithm::kRing);
  CHECK(
      model.Price(CollectiveKind::kAllGather, m, all, 1, CollectiveAlgorithm::kCollnet).algorithm ==
      CollectiveAlgorithm::kRing);
  // One GPU per node (a rail's DP group): only the NIC its GPU owns, M through it each way.
  const CommGroup rail{2, 2, 8, 1, 0};
  const auto one =
      model.Price(CollectiveKind::kAllReduce, m, rail, 1, CollectiveAlgorithm::kCollnet);
  REQUIRE(one.algorithm == CollectiveAlgorithm::kCollnet);
  const double owned = static_cast<double>(m.count()) /
                       (c.node.nic_bandwidth.bytes_per_s() * *sharp.efficiency * sharp.RampAt(m));
  // With one rank per node NCCL charges the tree's network step (14 us), no local peers.
  CHECK(one.time.seconds() == Approx(owned + 14e-6).epsilon(1e-6));
}

TEST_CASE("a mesh node: a group of part of it reaches only the links among its GPUs",
          "[topology]") {
  // An MI300X platform: 8 GPUs, each pair linked by one 64 GB/s link (448 GB/s per GPU). The
  // same node as a switch of 448 GB/s per GPU is the reference: a group of the whole node
  // runs its rings on all 7 links of each GPU (a Hamiltonian decomposition), so the two agree;
  // n GPUs of it run rings on the arc-disjoint Hamiltonian cycles among them (1, 2, 2, 4, 4, 6
  // for n = 2..7), an all-to-all on n - 1 links, a send on one.
  ClusterSpec mesh = Cluster("mi300x-platform", 1);
  REQUIRE(mesh.node.gpu_mesh);
  ClusterSpec sw = mesh;
  sw.node.gpu_mesh = false;
  auto tm = cluster::Topology::Build(mesh);
  auto ts = cluster::Topology::Build(sw);
  REQUIRE(tm.ok());
  REQUIRE(ts.ok());
  const cost::GraphCostModel on_mesh(*tm, mesh, CollectiveAlgorithm::kAuto);
  const cost::GraphCostModel on_switch(*ts, sw, CollectiveAlgorithm::kAuto);
  const Bytes m = Bytes::GiB(1);
  auto bandwidth_term = [&](const cost::GraphCostModel& model, CollectiveKind kind, int64_t n) {
    const auto p = model.Price(kind, m, CommGroup{n, 1, 1, 1, 0}, 1);
    return (p.time - p.latency).seconds();
  };
  const std::vector<std::pair<int64_t, double>> rings = {{2, 1}, {3, 2}, {4, 2}, {5, 4},
                                                         {6, 4}, {7, 6}, {8, 7}};
  for (const auto& [n, links] : rings) {
    INFO(n << " GPUs");
    CHECK(bandwidth_term(on_mesh, CollectiveKind::kAllReduce, n) ==
          Approx(bandwidth_term(on_switch, CollectiveKind::kAllReduce, n) * 7 / links));
    CHECK(bandwidth_term(on_mesh, CollectiveKind::kAllGather, n) ==
          Approx(bandwidth_term(on_switch, CollectiveKind::kAllGather, n) * 7 / links));
  }
  CHECK(bandwidth_term(on_mesh, CollectiveKind::kAllToAll, 4) ==
        Approx(bandwidth_term(on_switch, CollectiveKind::kAllToAll, 4) * 7 / 3));
  CHECK(bandwidth_term(on_mesh, CollectiveKind::kSendRecv, 2) ==
        Approx(bandwidth_term(on_switch, CollectiveKind::kSendRecv, 2) * 7));
  // Four GPUs' ring all-reduce by hand: 2 (n - 1)/n M over 2 links of 64 GB/s at the GPU's
  // efficiency and the Infinity Fabric ramp at M.
  const double want =
      2.0 * 3 / 4 * static_cast<double>(m.count()) /
      (2 * 64e9 * mesh.gpu.calibration.comm_efficiency * FindTransport("xgmi")->RampAt(m));
  CHECK(bandwidth_term(on_mesh, CollectiveKind::kAllReduce, 4) == Approx(want).epsilon(1e-6));
  CHECK(on_mesh.Price(CollectiveKind::kAllReduce, m, CommGroup{4, 1, 1, 1, 0}, 1).busiest_link ==
        "gpu0->mesh0");
}

}  // namespace
}  // namespace sim
