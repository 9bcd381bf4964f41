#include "sim/cluster/topology.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/visitors.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/check.h"
#include "sim/base/text_escape.h"

namespace sim::cluster {

namespace {

enum class Kind { kGpu, kNvSwitch, kNic, kLeaf, kSpine, kCore, kSwitch };

struct VertexProp {
  Kind kind = Kind::kGpu;
  int64_t index = 0;  // within its kind
};
struct EdgeProp {
  int32_t link = 0;
};
// A compressed sparse row graph, built once every link is made (Impl::Freeze): an
// adjacency_list grows each vertex's out-edge vector and allocates each edge's property on
// the heap (boost/graph/detail/adjacency_list.hpp stored_edge_property), and building and
// freeing the 16,384-GPU cluster of scenarios/llama3-405b-8k.yaml that way took 96 of the 413
// million instructions of its `run` (callgrind). Its rows keep each vertex's out-edges in the
// order they were made (the construction from unsorted edges sorts by source with a stable
// histogram sort), as the adjacency list did: the breadth-first searches, and so the routes,
// are the same.
using Graph = boost::compressed_sparse_row_graph<boost::directedS, VertexProp, EdgeProp>;

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kGpu:
      return "gpu";
    case Kind::kNvSwitch:
      return "nvswitch";
    case Kind::kNic:
      return "nic";
    case Kind::kLeaf:
      return "leaf";
    case Kind::kSpine:
      return "spine";
    case Kind::kCore:
      return "core";
    case Kind::kSwitch:
      return "switch";
  }
  return "?";
}

}  // namespace

struct Topology::Impl {
  Graph g;                           // built by Freeze from `vertices` and `links`
  std::vector<VertexProp> vertices;  // until Freeze, which moves them into g
  std::vector<Link> links;
  FabricSpec fabric;
  int64_t nodes = 1, gpn = 1, nics = 1;
  // The node's GPUs are a point-to-point mesh (NodeSpec::gpu_mesh): its vertex stands for the
  // mesh's links, not a switch, and is named so.
  bool mesh = false;
  int64_t leaves_per_rail = 0, nodes_per_leaf = 1, leaves = 0, spines_per_pod = 0, pods = 1;
  std::vector<int32_t> gpu, nvs, nic, leaf, spine, core;  // vertex ids by kind
  std::vector<int32_t> switches;                          // explicit fabrics
  std::vector<std::string> switch_names;
  // Explicit fabrics route by breadth-first search (fewest hops), one search per source NIC,
  // cached: for each vertex, the link that reached it in the search tree.
  mutable std::mutex bfs_mu;
  mutable std::map<int32_t, std::vector<int32_t>> bfs_tree;

  bool Explicit() const { return fabric.kind == FabricSpec::Kind::kExplicit; }
  const std::vector<int32_t>& SearchTree(int32_t source) const;

  int32_t AddVertex(Kind k, int64_t index) {
    vertices.push_back(VertexProp{k, index});
    return static_cast<int32_t>(vertices.size() - 1);
  }
  void Connect(int32_t a, int32_t b, Bandwidth bw, Duration latency, bool nvlink = false) {
    links.push_back({a, b, bw, latency, nvlink});
    links.push_back({b, a, bw, latency, nvlink});
  }
  // The graph of the vertices and links made, each link an edge whose property is its id.
  void Freeze() {
    std::vector<std::pair<std::size_t, std::size_t>> ends;
    std::vector<EdgeProp> ids;
    ends.reserve(links.size());
    ids.reserve(links.size());
    for (size_t id = 0; id < links.size(); ++id) {
      ends.emplace_back(links[id].from, links[id].to);
      ids.push_back(EdgeProp{static_cast<int32_t>(id)});
    }
    g = Graph(boost::edges_are_unsorted_multi_pass, ends.begin(), ends.end(), ids.begin(),
              vertices.size());
    for (size_t v = 0; v < vertices.size(); ++v) g[v] = vertices[v];
    vertices = {};
  }
  // The first link from u to v, in the order they were made.
  int32_t LinkBetween(int32_t u, int32_t v) const {
    for (auto [e, end] = boost::out_edges(static_cast<std::size_t>(u), g); e != end; ++e) {
      if (boost::target(*e, g) == static_cast<std::size_t>(v)) return g[*e].link;
    }
    SIM_CHECK(false, "route uses a link the fabric does not have");
    return -1;
  }
  int64_t LeafOf(int64_t node, int64_t rail) const {
    if (fabric.rail_optimized) return rail * leaves_per_rail + node / nodes_per_leaf;
    return node / nodes_per_leaf;
  }
  // The GPU (local index) that owns NIC k, and the default NIC of local GPU i.
  int64_t RailOwner(int64_t k) const { return k * gpn / nics; }
  // The first NIC GPU i owns (nics >= gpn), or the NIC it shares (nics < gpn).
  int64_t DefaultRail(int64_t i) const {
    return nics >= gpn ? (i * nics + gpn - 1) / gpn : i * nics / gpn;
  }
  int64_t PodOf(int64_t leaf_index) const {
    return fabric.levels == 3 ? leaf_index / fabric.pod_leaves : 0;
  }
};

const std::vector<int32_t>& Topology::Impl::SearchTree(int32_t source) const {
  std::lock_guard<std::mutex> lock(bfs_mu);
  auto it = bfs_tree.find(source);
  if (it != bfs_tree.end()) return it->second;
  // Breadth-first search from `source`, recording the link that first reaches each vertex;
  // vecS out-edge lists make the search (and so the routes) deterministic.
  std::vector<int32_t> reached_by(boost::num_vertices(g), -1);
  struct Recorder : boost::default_bfs_visitor {
    std::vector<int32_t>* reached_by;
    void tree_edge(Graph::edge_descriptor e, const Graph& graph) const {
      (*reached_by)[boost::target(e, graph)] = graph[e].link;
    }
  };
  Recorder rec;
  rec.reached_by = &reached_by;
  boost::breadth_first_search(g, boost::vertex(source, g), boost::visitor(rec));
  return bfs_tree.emplace(source, std::move(reached_by)).first->second;
}

FabricSpec DefaultFabric(const NodeSpec& node) {
  FabricSpec f;
  f.name = "default (non-blocking rail-optimised two-level fat tree)";
  f.link_bandwidth = node.nic_bandwidth;
  f.leaf_ports = 32;
  f.source = "assumed: the DGX SuperPOD reference design";
  return f;
}

absl::StatusOr<Topology> Topology::Build(const ClusterSpec& c) {
  auto impl = std::make_shared<Impl>();
  Impl& t = *impl;
  t.fabric = c.fabric.value_or(DefaultFabric(c.node));
  t.nodes = c.nodes;
  t.gpn = c.node.gpus_per_node;
  t.mesh = c.node.gpu_mesh;
  t.nics = std::max<int64_t>(1, c.node.nics_per_node);
  if (t.nodes > 1 && (c.node.nics_per_node == 0 ||
                      (!t.Explicit() && t.fabric.link_bandwidth.bytes_per_s() <= 0))) {
    return absl::FailedPreconditionError(
        "a multi-node cluster needs NICs on its node type and a fabric link bandwidth");
  }
  const Bandwidth nic_bw = c.node.nic_bandwidth;
  const Duration hop = t.fabric.switch_latency;
  // Other jobs' traffic holds `background_load` of every switch-to-switch link: this job's
  // flows share the rest (ClusterSpec::background_load).
  const double own_share = 1 - c.background_load;
  for (int64_t n = 0; n < t.nodes; ++n) {
    t.nvs.push_back(t.AddVertex(Kind::kNvSwitch, n));
    for (int64_t i = 0; i < t.gpn; ++i) {
      t.gpu.push_back(t.AddVertex(Kind::kGpu, n * t.gpn + i));
      t.Connect(t.gpu.back(), t.nvs.back(), c.node.intra_node_bandwidth, Duration(),
                /*nvlink=*/true);
    }
    if (t.nodes == 1) continue;
    for (int64_t k = 0; k < t.nics; ++k) {
      t.nic.push_back(t.AddVertex(Kind::kNic, n * t.nics + k));
      // NIC k hangs off GPU k·gpn/nics's PCIe switch (one NIC per GPU on DGX; several per GPU
      // when nics > gpn; one shared by several GPUs when nics < gpn). The NIC bounds the path.
      for (int64_t i = 0; i < t.gpn; ++i) {
        if (t.RailOwner(k) == i || (t.nics < t.gpn && i * t.nics / t.gpn == k)) {
          t.Connect(t.gpu[n * t.gpn + i], t.nic.back(), nic_bw, Duration());
        }
      }
    }
  }
  if (t.nodes > 1 && t.Explicit()) {
    for (size_t i = 0; i < t.fabric.switches.size(); ++i) {
      t.switches.push_back(t.AddVertex(Kind::kSwitch, static_cast<int64_t>(i)));
      t.switch_names.push_back(t.fabric.switches[i]);
    }
    auto vertex = [&](const std::string& end) -> std::optional<int32_t> {
      int64_t n = 0, k = 0;
      char tail = 0;
      if (std::sscanf(end.c_str(), "node%ld.nic%ld%c", &n, &k, &tail) == 2) {
        if (n < t.nodes && k < t.nics) return t.nic[n * t.nics + k];
        return std::nullopt;
      }
      for (size_t i = 0; i < t.switch_names.size(); ++i) {
        if (t.switch_names[i] == end) return t.switches[i];
      }
      return std::nullopt;
    };
    for (const FabricLink& l : t.fabric.links) {
      auto a = vertex(l.a), b = vertex(l.b);
      if (!a || !b) {
        return absl::InvalidArgumentError(absl::StrCat("fabric ", t.fabric.name, ": link ", l.a,
                                                       " -- ", l.b, " names no vertex of a ",
                                                       t.nodes, "-node cluster"));
      }
      const bool between_switches =
          t.vertices[*a].kind == Kind::kSwitch && t.vertices[*b].kind == Kind::kSwitch;
      t.Connect(*a, *b, between_switches ? l.bandwidth * own_share : l.bandwidth, l.latency);
    }
  } else if (t.nodes > 1) {
    const FabricSpec& f = t.fabric;
    if (f.rail_optimized) {
      t.nodes_per_leaf = f.leaf_ports;
      t.leaves_per_rail = (t.nodes + t.nodes_per_leaf - 1) / t.nodes_per_leaf;
      t.leaves = t.leaves_per_rail * t.nics;
    } else {
      t.nodes_per_leaf = std::max<int64_t>(1, f.leaf_ports / t.nics);
      t.leaves = (t.nodes + t.nodes_per_leaf - 1) / t.nodes_per_leaf;
    }
    for (int64_t l = 0; l < t.leaves; ++l) t.leaf.push_back(t.AddVertex(Kind::kLeaf, l));
    for (int64_t n = 0; n < t.nodes; ++n) {
      for (int64_t k = 0; k < t.nics; ++k) {
        t.Connect(t.nic[n * t.nics + k], t.leaf[t.LeafOf(n, k)], nic_bw, hop);
      }
    }
    if (t.leaves > 1) {
      const double down = static_cast<double>(f.leaf_ports) * nic_bw.bytes_per_s();
      const double up = down / f.oversubscription;
      t.spines_per_pod = std::max<int64_t>(
          1, static_cast<int64_t>(std::ceil(up / f.link_bandwidth.bytes_per_s() - 1e-9)));
      const Bandwidth per_spine =
          Bandwidth::BytesPerSecond(up / static_cast<double>(t.spines_per_pod) * own_share);
      t.pods = f.levels == 3 ? (t.leaves + f.pod_leaves - 1) / f.pod_leaves : 1;
      for (int64_t s = 0; s < t.pods * t.spines_per_pod; ++s) {
        t.spine.push_back(t.AddVertex(Kind::kSpine, s));
      }
      for (int64_t l = 0; l < t.leaves; ++l) {
        for (int64_t s = 0; s < t.spines_per_pod; ++s) {
          t.Connect(t.leaf[l], t.spine[t.PodOf(l) * t.spines_per_pod + s], per_spine, hop);
        }
      }
      if (t.pods > 1) {
        // Core plane s joins spine s of every pod, non-blocking above the spines.
        const int64_t pod_leaves = std::min(f.pod_leaves, t.leaves);
        const Bandwidth core_bw = per_spine * static_cast<double>(pod_leaves);
        for (int64_t s = 0; s < t.spines_per_pod; ++s) {
          t.core.push_back(t.AddVertex(Kind::kCore, s));
          for (int64_t p = 0; p < t.pods; ++p) {
            t.Connect(t.spine[p * t.spines_per_pod + s], t.core.back(), core_bw, hop);
          }
        }
      }
    }
  }
  t.Freeze();
  // Validation: every GPU reaches every other (all links come in pairs, so reaching all from
  // GPU 0 suffices).
  std::vector<boost::default_color_type> color(boost::num_vertices(t.g));
  boost::breadth_first_search(t.g, boost::vertex(t.gpu.front(), t.g),
                              boost::color_map(boost::make_iterator_property_map(
                                  color.begin(), boost::get(boost::vertex_index, t.g))));
  for (int32_t v : t.gpu) {
    if (color[v] == boost::white_color) {
      return absl::FailedPreconditionError(absl::StrCat(
          "fabric ", t.fabric.name, ": GPU ", t.g[v].index, " is not reachable from GPU 0"));
    }
  }
  return Topology(std::move(impl));
}

int64_t Topology::gpus() const { return static_cast<int64_t>(impl_->gpu.size()); }
int64_t Topology::gpus_per_node() const { return impl_->gpn; }
int64_t Topology::nics_per_node() const { return impl_->nics; }
int64_t Topology::RailOwner(int64_t rail) const { return impl_->RailOwner(rail); }
const Link& Topology::link(int32_t id) const { return impl_->links[id]; }
int32_t Topology::num_links() const { return static_cast<int32_t>(impl_->links.size()); }
absl::Span<const Link> Topology::links() const { return impl_->links; }

void Topology::Route(int64_t a, int64_t b, std::vector<int32_t>& out) const {
  Route(a, b, std::nullopt, out);
}

void Topology::Route(int64_t a, int64_t b, std::optional<int64_t> rail,
                     std::vector<int32_t>& out) const {
  const Impl& t = *impl_;
  const int64_t na = a / t.gpn, nb = b / t.gpn;
  if (a == b) return;
  if (na == nb) {
    out.push_back(t.LinkBetween(t.gpu[a], t.nvs[na]));
    out.push_back(t.LinkBetween(t.nvs[na], t.gpu[b]));
    return;
  }
  // A rail is usable only by a GPU attached to that NIC; otherwise each side uses its own.
  auto nic_of = [&](int64_t gpu) {
    const int64_t i = gpu % t.gpn;
    if (rail && (t.RailOwner(*rail) == i || (t.nics < t.gpn && i * t.nics / t.gpn == *rail))) {
      return *rail;
    }
    return t.DefaultRail(i);
  };
  const int64_t ka = nic_of(a), kb = nic_of(b);
  const int32_t nic_a = t.nic[na * t.nics + ka], nic_b = t.nic[nb * t.nics + kb];
  out.push_back(t.LinkBetween(t.gpu[a], nic_a));
  if (t.Explicit()) {
    const std::vector<int32_t>& tree = t.SearchTree(nic_a);
    std::vector<int32_t> path;
    for (int32_t v = nic_b; v != nic_a;) {
      const int32_t l = tree[v];
      SIM_CHECK(l >= 0, "explicit fabric: destination unreachable (validated at build)");
      path.push_back(l);
      v = t.links[l].from;
    }
    out.insert(out.end(), path.rbegin(), path.rend());
    out.push_back(t.LinkBetween(nic_b, t.gpu[b]));
    return;
  }
  const int64_t la = t.LeafOf(na, ka), lb = t.LeafOf(nb, kb);
  out.push_back(t.LinkBetween(nic_a, t.leaf[la]));
  if (la != lb) {
    // Deterministic ECMP: the same (source node, destination node, rail) takes the same spine.
    const uint64_t h = (static_cast<uint64_t>(na) * 1000003u + static_cast<uint64_t>(nb)) * 31u +
                       static_cast<uint64_t>(ka);
    const int64_t s = static_cast<int64_t>(h % static_cast<uint64_t>(t.spines_per_pod));
    const int64_t pa = t.PodOf(la), pb = t.PodOf(lb);
    const int32_t spine_a = t.spine[pa * t.spines_per_pod + s];
    const int32_t spine_b = t.spine[pb * t.spines_per_pod + s];
    out.push_back(t.LinkBetween(t.leaf[la], spine_a));
    if (pa != pb) {
      out.push_back(t.LinkBetween(spine_a, t.core[s]));
      out.push_back(t.LinkBetween(t.core[s], spine_b));
    }
    out.push_back(t.LinkBetween(spine_b, t.leaf[lb]));
  }
  out.push_back(t.LinkBetween(t.leaf[lb], nic_b));
  out.push_back(t.LinkBetween(nic_b, t.gpu[b]));
}

std::string Topology::LinkName(int32_t id) const {
  const Link& l = impl_->links[id];
  const auto& f = impl_->g[l.from];
  const auto& to = impl_->g[l.to];
  auto name = [&](Kind k) { return k == Kind::kNvSwitch && impl_->mesh ? "mesh" : KindName(k); };
  return absl::StrCat(name(f.kind), f.index, "->", name(to.kind), to.index);
}

TopologySummary Topology::Summary() const {
  const Impl& t = *impl_;
  TopologySummary s;
  s.fabric = t.fabric.name;
  s.gpus = static_cast<int64_t>(t.gpu.size());
  s.nodes = t.nodes;
  s.nics = static_cast<int64_t>(t.nic.size());
  s.leaves = t.Explicit() ? static_cast<int64_t>(t.switches.size()) : t.leaves;
  s.spines = static_cast<int64_t>(t.spine.size());
  s.cores = static_cast<int64_t>(t.core.size());
  s.cables = static_cast<int64_t>(t.links.size()) / 2;
  // Injection: each node's NICs divided among its GPUs.
  double nic_bw = 0;
  for (const Link& l : t.links) {
    if (t.g[l.from].kind == Kind::kNic &&
        (t.g[l.to].kind == Kind::kLeaf || t.g[l.to].kind == Kind::kSwitch)) {
      nic_bw = l.bandwidth.bytes_per_s();
      break;
    }
  }
  s.injection_per_gpu =
      Bandwidth::BytesPerSecond(nic_bw * static_cast<double>(t.nics) / static_cast<double>(t.gpn));
  s.bisection = Bandwidth::BytesPerSecond(BisectionBytesPerSecond());
  return s;
}

double Topology::BisectionBytesPerSecond() const {
  const Impl& t = *impl_;
  if (t.nodes < 2) return 0;
  // The maximum flow from the NICs of the first half of the nodes to those of the second half
  // over the fabric's directed link capacities: by max-flow/min-cut, the capacity of the
  // narrowest cut between the halves (Boykov-Kolmogorov, Boost.Graph).
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using FlowGraph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS,
      boost::property<boost::vertex_index_t, int64_t,
                      boost::property<boost::vertex_color_t, boost::default_color_type,
                                      boost::property<boost::vertex_distance_t, int64_t,
                                                      boost::property<boost::vertex_predecessor_t,
                                                                      Traits::edge_descriptor>>>>,
      boost::property<
          boost::edge_capacity_t, double,
          boost::property<boost::edge_residual_capacity_t, double,
                          boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  const auto n = static_cast<int64_t>(boost::num_vertices(t.g));
  FlowGraph f(static_cast<size_t>(n + 2));
  auto capacity = boost::get(boost::edge_capacity, f);
  auto reverse = boost::get(boost::edge_reverse, f);
  auto add = [&](int64_t u, int64_t v, double cap) {
    auto e = boost::add_edge(u, v, f).first;
    auto r = boost::add_edge(v, u, f).first;
    capacity[e] = cap;
    capacity[r] = 0;
    reverse[e] = r;
    reverse[r] = e;
  };
  for (const Link& l : t.links) {
    // Only the inter-node fabric: NIC and switch links (not NVLink inside a node).
    const Kind a = t.g[l.from].kind, b = t.g[l.to].kind;
    if (a == Kind::kGpu || b == Kind::kGpu || a == Kind::kNvSwitch || b == Kind::kNvSwitch) {
      continue;
    }
    add(l.from, l.to, l.bandwidth.bytes_per_s());
  }
  const int64_t source = n, sink = n + 1;
  const double unbounded = 1e30;
  for (int64_t node = 0; node < t.nodes; ++node) {
    for (int64_t k = 0; k < t.nics; ++k) {
      const int32_t nic = t.nic[node * t.nics + k];
      if (node < t.nodes / 2) {
        add(source, nic, unbounded);
      } else {
        add(nic, sink, unbounded);
      }
    }
  }
  return boost::boykov_kolmogorov_max_flow(f, source, sink);
}

std::string Topology::Dot() const {
  const Impl& t = *impl_;
  // Names from the fabric file are DOT strings (DotString), so a quote in one ends nothing.
  std::string out = absl::StrCat("graph ", DotString(t.fabric.name), " {\n  node [shape=box];\n");
  for (int64_t n = 0; n < t.nodes; ++n) {
    absl::StrAppendFormat(&out, "  node%d [label=\"node %d\\n%d GPUs, %d NICs\"];\n", n, n, t.gpn,
                          t.nodes > 1 ? t.nics : 0);
  }
  for (int64_t l = 0; l < t.leaves; ++l) {
    absl::StrAppendFormat(&out, "  leaf%d [shape=ellipse];\n", l);
  }
  for (size_t s = 0; s < t.spine.size(); ++s)
    absl::StrAppendFormat(&out, "  spine%d [shape=ellipse];\n", s);
  for (size_t c = 0; c < t.core.size(); ++c)
    absl::StrAppendFormat(&out, "  core%d [shape=ellipse];\n", c);
  for (const std::string& n : t.switch_names)
    absl::StrAppendFormat(&out, "  %s [shape=ellipse];\n", DotString(n));
  for (const Link& l : t.links) {
    const auto& f = t.g[l.from];
    const auto& to = t.g[l.to];
    auto name = [&](const VertexProp& v) -> std::string {
      switch (v.kind) {
        case Kind::kNic:
          return absl::StrCat("node", v.index / t.nics);
        case Kind::kLeaf:
          return absl::StrCat("leaf", v.index);
        case Kind::kSpine:
          return absl::StrCat("spine", v.index);
        case Kind::kCore:
          return absl::StrCat("core", v.index);
        case Kind::kSwitch:
          return DotString(t.switch_names[v.index]);
        default:
          return "";
      }
    };
    // One line per cable between switch tiers (and node to leaf), written from the lower tier;
    // explicit switch-to-switch cables once, from the lower vertex id.
    const bool switch_pair = f.kind == Kind::kSwitch && to.kind == Kind::kSwitch;
    if ((switch_pair && l.from < l.to) ||
        (!switch_pair && static_cast<int>(f.kind) < static_cast<int>(to.kind) &&
         f.kind >= Kind::kNic)) {
      absl::StrAppendFormat(&out, "  %s -- %s [label=\"%.0f GB/s\"];\n", name(f), name(to),
                            l.bandwidth.bytes_per_s() / 1e9);
    }
  }
  out += "}\n";
  return out;
}

}  // namespace sim::cluster
