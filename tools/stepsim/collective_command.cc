// stepsim collective KIND: one collective priced on the cluster graph across message sizes, as
// nccl-tests prints it (sim/cost/graph_collective.h).

#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "sim/base/quantity.h"
#include "sim/base/suggest.h"
#include "sim/cluster/topology.h"
#include "sim/config/catalog.h"
#include "sim/cost/graph_collective.h"
#include "sim/report/json_text.h"
#include "sim/report/table.h"
#include "sim/spec/enum_names.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"

namespace stepsim_cli {

namespace {

// One size: a count with nccl-tests' binary suffixes (8, 64K, 1M, 8G) or a size with its unit
// ("1 MiB", "4 GB").
absl::StatusOr<int64_t> ParseSize(absl::string_view text) {
  const std::string t(absl::StripAsciiWhitespace(text));
  if (auto b = sim::ParseBytes(t); b.ok()) return b->count();
  int64_t scale = 1;
  std::string digits = t;
  if (!t.empty()) {
    switch (absl::ascii_toupper(static_cast<unsigned char>(t.back()))) {
      case 'K':
        scale = int64_t{1} << 10;
        break;
      case 'M':
        scale = int64_t{1} << 20;
        break;
      case 'G':
        scale = int64_t{1} << 30;
        break;
      case 'T':
        scale = int64_t{1} << 40;
        break;
      default:
        break;
    }
    if (scale != 1) digits.pop_back();
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(digits, &n) || n < 1 || n > (int64_t{1} << 50) / scale) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sizes: '", text, "' is not a size (8, 64K, 1M, 8G, or \"1 MiB\")"));
  }
  return n * scale;
}

// "8..8G:x2" (geometric), "1M..64M:+1M" (arithmetic), or sizes joined by commas.
absl::StatusOr<std::vector<int64_t>> ParseSizes(absl::string_view text) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    const size_t dots = part.find("..");
    if (dots == absl::string_view::npos) {
      auto v = ParseSize(part);
      if (!v.ok()) return v.status();
      out.push_back(*v);
      continue;
    }
    const absl::string_view range = part.substr(dots + 2);
    const size_t colon = range.find(':');
    auto lo = ParseSize(part.substr(0, dots));
    auto hi = ParseSize(range.substr(0, colon));
    if (!lo.ok()) return lo.status();
    if (!hi.ok()) return hi.status();
    const absl::string_view step =
        colon == absl::string_view::npos ? absl::string_view("x2") : range.substr(colon + 1);
    if (*hi < *lo) {
      return absl::InvalidArgumentError(absl::StrCat("--sizes: '", part, "' runs backwards"));
    }
    if (absl::StartsWith(step, "x")) {
      int64_t f = 0;
      if (!absl::SimpleAtoi(step.substr(1), &f) || f < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("--sizes: '", step, "': a geometric step is x2 or more"));
      }
      // v * f is computed only when it stays at or below hi (a factor near 2^63 overflowed
      // and looped without end).
      for (int64_t v = *lo;; v *= f) {
        out.push_back(v);
        if (v > *hi / f) break;
      }
    } else if (absl::StartsWith(step, "+")) {
      auto d = ParseSize(step.substr(1));
      if (!d.ok()) return d.status();
      if ((*hi - *lo) / *d > 10'000) {
        return absl::InvalidArgumentError(
            absl::StrCat("--sizes: '", part, "' makes too many rows"));
      }
      for (int64_t v = *lo; v <= *hi; v += *d) out.push_back(v);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--sizes: '", step, "': expected xF (geometric) or +SIZE (arithmetic)"));
    }
  }
  if (out.empty()) return absl::InvalidArgumentError("--sizes: no size given");
  if (out.size() > 10'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sizes: ", out.size(), " sizes, above the 10000 rows one table holds"));
  }
  return out;
}

// nccl-tests' bus bandwidth factor (its doc/PERFORMANCE.md): what each GPU moves over its
// slowest link relative to the buffer size.
double BusFactor(sim::CollectiveKind k, int64_t n) {
  const double f = static_cast<double>(n - 1) / static_cast<double>(n);
  switch (k) {
    case sim::CollectiveKind::kAllReduce:
      return 2 * f;
    case sim::CollectiveKind::kAllGather:
    case sim::CollectiveKind::kReduceScatter:
    case sim::CollectiveKind::kAllToAll:
      return f;
    default:
      return 1;
  }
}

}  // namespace

int CollectiveCommand(const std::vector<std::string>& args) {
  FlagSet flags(
      "stepsim collective KIND (--cluster FILE | --node NODE [--nodes N] [--fabric F]) "
      "[--sizes RANGE] [flags]",
      "Prices one collective (all_reduce, all_gather, reduce_scatter, all_to_all) over GPUs of\n"
      "a cluster at each message size, as nccl-tests prints it: size (the buffer of\n"
      "all_reduce_perf and alltoall_perf, all_gather_perf's output, reduce_scatter_perf's\n"
      "input), time, algbw = size / time, busbw = algbw x 2(n-1)/n (all-reduce) or (n-1)/n,\n"
      "the algorithm and protocol NCCL's tuner runs, its latency and the link that bounds it.\n"
      "The cost model is the replay's (graph-routed, calibrated per GPU type).",
      {{"cluster", "FILE", "a topology file (topologies/*.yaml)"},
       {"node", "NODE", "a node type of topologies/nodes.yaml (instead of --cluster)"},
       {"nodes", "N", "with --node: how many (default 1)"},
       {"fabric", "F", "with --node: a fabric of topologies/fabrics/ or a path"},
       {"gpus", "N", "GPUs in the collective: the first N (default all)"},
       {"sizes", "RANGE", "8..8G:x2 (default), 1M..64M:+1M, or sizes joined by commas"},
       {"algo", "A", "auto (default) | ring | tree | hierarchical | nvls | nvls_tree | collnet"},
       {"json", "PATH", "write {kind, gpus, nodes, rows: [...]} (- = standard output)"},
       CalibrationFlag()});
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("collective", st);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  if (flags.positional().size() != 1) {
    return Fail("collective",
                absl::InvalidArgumentError("expected one KIND: all_reduce, all_gather, "
                                           "reduce_scatter or all_to_all"));
  }
  const std::string kind_name = flags.positional()[0];
  std::optional<sim::CollectiveKind> kind;
  for (sim::CollectiveKind k :
       {sim::CollectiveKind::kAllReduce, sim::CollectiveKind::kAllGather,
        sim::CollectiveKind::kReduceScatter, sim::CollectiveKind::kAllToAll}) {
    if (sim::Name(k) == kind_name) kind = k;
  }
  if (!kind) {
    return Fail("collective",
                absl::InvalidArgumentError(absl::StrCat(
                    "unknown collective '", kind_name, "'",
                    sim::DidYouMean(kind_name,
                                    {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}),
                    "; expected all_reduce, all_gather, reduce_scatter or all_to_all")));
  }
  auto root = DataRootFor(flags);
  if (!root.ok()) return Fail("collective", root.status());
  sim::ClusterSpec cluster;
  if (auto file = flags.Get("cluster")) {
    if (flags.Has("node") || flags.Has("nodes") || flags.Has("fabric")) {
      return Fail("collective", absl::InvalidArgumentError(
                                    "--cluster names the whole cluster: drop --node, --nodes "
                                    "and --fabric, or drop --cluster"));
    }
    auto topo = sim::config::LoadClusterTopology(*root, *file);
    if (!topo.ok()) return Fail("collective", topo.status());
    cluster = topo->cluster;
  } else if (auto node = flags.Get("node")) {
    int64_t nodes = 1;
    if (auto n = flags.Get("nodes"); n && (!absl::SimpleAtoi(*n, &nodes) || nodes < 1)) {
      return Fail("collective", absl::InvalidArgumentError("--nodes expects a positive integer"));
    }
    auto c = sim::config::ResolveCluster(*root, *node, nodes, flags.Get("fabric"));
    if (!c.ok()) return Fail("collective", c.status());
    cluster = *c;
  } else {
    return Fail("collective", absl::InvalidArgumentError("give --cluster FILE or --node NODE"));
  }
  const int64_t total = cluster.gpus(), gpn = cluster.node.gpus_per_node;
  int64_t n = total;
  if (auto g = flags.Get("gpus")) {
    if (!absl::SimpleAtoi(*g, &n) || n < 2 || n > total || (n > gpn && n % gpn != 0)) {
      return Fail(
          "collective",
          absl::InvalidArgumentError(absl::StrFormat(
              "--gpus: expected 2..%d GPUs, up to one node's %d or whole nodes", total, gpn)));
    }
  }
  if (n < 2) {
    return Fail("collective", absl::InvalidArgumentError("a collective needs two GPUs or more"));
  }
  sim::CollectiveAlgorithm algo = sim::CollectiveAlgorithm::kAuto;
  if (auto a = flags.Get("algo")) {
    auto v = sim::EnumFromName<sim::CollectiveAlgorithm>(*a);
    if (!v) {
      return Fail("collective",
                  absl::InvalidArgumentError(absl::StrCat(
                      "--algo: unknown algorithm '", *a, "'",
                      sim::DidYouMean(*a, sim::EnumNameList<sim::CollectiveAlgorithm>()))));
    }
    algo = *v;
  }
  auto sizes = ParseSizes(flags.Get("sizes").value_or("8..8G:x2"));
  if (!sizes.ok()) return Fail("collective", sizes.status());
  auto topo = sim::cluster::Topology::Build(cluster);
  if (!topo.ok()) return Fail("collective", topo.status());
  const sim::cost::GraphCostModel model(*topo, cluster, algo);
  const int64_t nodes = (n + gpn - 1) / gpn;
  const sim::CommGroup group{n, nodes, 1, 1, 0};

  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  sim::report::Table t({"size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algorithm",
                        "protocol", "latency (us)", "busiest link (transfers)"});
  for (int64_t bytes : *sizes) {
    const sim::cost::PricedCollective p =
        model.Price(*kind, sim::Bytes::Count(bytes), group, 1, algo);
    const double algbw = static_cast<double>(bytes) / p.time.seconds();
    const double busbw = algbw * BusFactor(*kind, n);
    // All-to-all is NCCL's grouped point-to-point, not one of its algorithms.
    const std::string algorithm =
        *kind == sim::CollectiveKind::kAllToAll ? "p2p" : std::string(sim::Name(p.algorithm));
    rows.push_back({{"bytes", bytes},
                    {"time_s", p.time.seconds()},
                    {"algbw_bytes_per_s", algbw},
                    {"busbw_bytes_per_s", busbw},
                    {"algorithm", algorithm},
                    {"protocol", sim::cost::ProtocolName(p.protocol)},
                    {"latency_s", p.latency.seconds()},
                    {"ramp", p.ramp},
                    {"transport", p.transport},
                    {"ramp_bytes", p.ramp_bytes.count()},
                    {"busiest_link", p.busiest_link},
                    {"busiest_load", p.busiest_load}});
    t.AddRow({absl::StrCat(bytes), absl::StrFormat("%.2f", p.time.seconds() * 1e6),
              absl::StrFormat("%.2f", algbw / 1e9), absl::StrFormat("%.2f", busbw / 1e9), algorithm,
              std::string(sim::cost::ProtocolName(p.protocol)),
              absl::StrFormat("%.1f", p.latency.seconds() * 1e6),
              p.busiest_link.empty() ? std::string("-")
                                     : absl::StrFormat("%s (%d)", p.busiest_link, p.busiest_load)});
  }
  const nlohmann::ordered_json j = {{"schema_version", 1},
                                    {"kind", kind_name},
                                    {"gpu", cluster.gpu.name},
                                    {"node", cluster.node.name},
                                    {"gpus", n},
                                    {"nodes", nodes},
                                    {"rows", rows}};
  if (auto p = flags.Get("json")) {
    if (absl::Status st = WriteOutput(*p, sim::report::JsonText(j) + "\n"); !st.ok())
      return Fail("collective", st);
    if (*p == "-") return kExitOk;
  }
  std::cout << absl::StrFormat("%s over %d x %s (%d node%s of %s)\n", kind_name, n,
                               cluster.gpu.name, nodes, nodes == 1 ? "" : "s", cluster.node.name);
  std::cout << t.Render();
  return kExitOk;
}

}  // namespace stepsim_cli
