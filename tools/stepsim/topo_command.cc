// stepsim topo CLUSTER.yaml [--dot FILE]: the cluster graph's summary, or its Graphviz.

#include <iostream>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "sim/cluster/topology.h"
#include "sim/config/catalog.h"
#include "sim/cost/graph_collective.h"
#include "sim/report/json_text.h"
#include "sim/report/table.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"

namespace stepsim_cli {

int TopoCommand(const std::vector<std::string>& args) {
  FlagSet flags(
      "stepsim topo CLUSTER.yaml [--dot FILE] [--json PATH]",
      "Builds the cluster graph of a topology file (topologies/*.yaml: a node type, a number of\n"
      "nodes and a fabric from topologies/fabrics/), validates it, and prints GPUs, switches,\n"
      "links, bisection and per-GPU injection bandwidth, and the bus bandwidth each collective\n"
      "algorithm reaches across all GPUs for a 1 GiB message.",
      {{"dot", "FILE", "write the fabric as Graphviz (each node collapsed into one vertex)"},
       {"json", "PATH", "write the summary as JSON (- = standard output)"}});
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("topo", st);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  if (flags.positional().size() != 1) {
    return Fail("topo", absl::InvalidArgumentError("expected exactly one topology file"));
  }
  const auto root = sim::config::DataRoot::Default();
  auto file = sim::config::LoadClusterTopology(root, flags.positional()[0]);
  if (!file.ok()) return Fail("topo", file.status());
  auto topo = sim::cluster::Topology::Build(file->cluster);
  if (!topo.ok()) return Fail("topo", topo.status());
  const auto s = topo->Summary();
  OutputFiles files;
  if (auto dot = flags.Get("dot")) {
    if (absl::Status st = files.Stage(*dot, topo->Dot()); !st.ok()) return Fail("topo", st);
  }
  // Bus bandwidth of a 1 GiB collective over every GPU, per algorithm.
  sim::cost::GraphCostModel model(*topo, file->cluster, sim::CollectiveAlgorithm::kAuto);
  const sim::CommGroup all{s.gpus, s.nodes, 1, 1, 0};
  const sim::Bytes m = sim::Bytes::GiB(1);
  nlohmann::ordered_json bus;
  sim::report::Table t({"collective (1 GiB, all GPUs)", "algorithm", "time", "bus GB/s",
                        "busiest link (transfers)"});
  for (sim::CollectiveKind k : {sim::CollectiveKind::kAllReduce, sim::CollectiveKind::kAllGather,
                                sim::CollectiveKind::kReduceScatter}) {
    for (sim::CollectiveAlgorithm a :
         {sim::CollectiveAlgorithm::kRing, sim::CollectiveAlgorithm::kTree,
          sim::CollectiveAlgorithm::kHierarchical, sim::CollectiveAlgorithm::kNvls,
          sim::CollectiveAlgorithm::kNvlsTree, sim::CollectiveAlgorithm::kCollnet}) {
      const auto p = model.Price(k, m, all, 1, a);
      if (p.algorithm != a) continue;  // not applicable (fell back to ring)
      const double busbw = sim::BytesSentPerGpu(k, m, s.gpus).gb() / p.time.seconds();
      t.AddRow({std::string(sim::Name(k)), std::string(sim::Name(a)),
                sim::report::FormatSeconds(p.time.seconds()), absl::StrFormat("%.1f", busbw),
                absl::StrFormat("%s (%d)", p.busiest_link, p.busiest_load)});
      bus[std::string(sim::Name(k))][std::string(sim::Name(a))] = busbw * 1e9;
    }
  }
  nlohmann::ordered_json j = {
      {"schema_version", 1},
      {"name", file->name},
      {"fabric", s.fabric},
      {"gpu", file->cluster.gpu.name},
      {"gpus", s.gpus},
      {"nodes", s.nodes},
      {"nics", s.nics},
      {"switches", {{"leaf", s.leaves}, {"spine", s.spines}, {"core", s.cores}}},
      {"cables", s.cables},
      {"injection_bytes_per_s_per_gpu", s.injection_per_gpu.bytes_per_s()},
      {"bisection_bytes_per_s", s.bisection.bytes_per_s()},
      {"bus_bandwidth_bytes_per_s", bus}};
  if (auto p = flags.Get("json")) {
    if (absl::Status st = files.Stage(*p, sim::report::JsonText(j) + "\n"); !st.ok())
      return Fail("topo", st);
  }
  if (absl::Status st = files.Commit(); !st.ok()) return Fail("topo", st);
  if (files.writes_stdout()) return kExitOk;
  // A multi-node NVLink domain was folded into one priced node (config::FoldNvlinkDomain).
  const sim::NodeSpec& node = file->cluster.node;
  const std::string domain =
      node.domain_nodes > 1 ? absl::StrFormat(" NVLink domains of %d nodes of", node.domain_nodes)
                            : "";
  std::cout << absl::StrFormat(
      "%s: %d x%s %s (%d GPUs, %d NICs each) on %s\n"
      "  GPUs %d, NICs %d, switches %d leaf + %d spine + %d core, %d cables\n"
      "  injection %.1f GB/s per GPU, bisection %.1f GB/s (min cut between the node halves)\n\n",
      file->name, s.nodes, domain, node.name, node.gpus_per_node, node.nics_per_node, s.fabric,
      s.gpus, s.nics, s.leaves, s.spines, s.cores, s.cables,
      s.injection_per_gpu.bytes_per_s() / 1e9, s.bisection.bytes_per_s() / 1e9);
  std::cout << t.Render();
  return kExitOk;
}

}  // namespace stepsim_cli
