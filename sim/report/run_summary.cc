#include "sim/report/run_summary.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/cost/compute_cost.h"
#include "sim/workload/moe_routing.h"
#include "sim/workload/policy/policy.h"

namespace sim::report {

namespace {

std::string OpLabelOr(const replay::ReplayResult& r, std::optional<int32_t> op) {
  return op ? OpLabel(r.program.ops[*op], r.program.layers) : "persistent states";
}

constexpr CollectiveKind kReportedKinds[] = {
    CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllReduce,
    CollectiveKind::kSendRecv, CollectiveKind::kAllToAll};
constexpr CollectiveAlgorithm kAlgorithms[] = {
    CollectiveAlgorithm::kRing, CollectiveAlgorithm::kTree,     CollectiveAlgorithm::kHierarchical,
    CollectiveAlgorithm::kNvls, CollectiveAlgorithm::kNvlsTree, CollectiveAlgorithm::kCollnet};

}  // namespace

RunSummary Summarize(const Scenario& s, const replay::ReplayResult& r) {
  RunSummary o;
  const ShardingPlan& plan = r.program.sharding;
  o.scenario = s.name;
  o.overrides = s.overrides;
  o.requested_algorithm = s.parallel.collective;
  o.global_batch = s.training.global_batch;
  o.seq_len = s.training.seq_len;
  o.batch_tokens = s.training.global_batch_tokens;
  o.model = s.model.name;
  o.gpu = s.cluster.gpu.name;
  o.node = s.cluster.node.name;
  if (!s.cluster.groups.empty()) {
    // A mixed cluster: each type with its node count, in rank order.
    std::vector<std::string> gpus, nodes;
    for (const NodeGroup& g : s.cluster.groups) {
      gpus.push_back(g.gpu.name);
      nodes.push_back(absl::StrCat(g.count, " x ", g.node.name));
    }
    o.gpu = absl::StrJoin(gpus, "/");
    o.node = absl::StrJoin(nodes, " + ");
  }
  o.gpus = s.cluster.gpus();
  // Physical nodes: a multi-node NVLink domain was priced as one node (config::FoldNvlinkDomain).
  const int64_t domain_nodes = s.cluster.node.domain_nodes;
  o.nodes = s.cluster.nodes * domain_nodes;
  o.gpus_per_node = s.cluster.node.gpus_per_node / domain_nodes;
  o.dp = s.dp();
  o.tp = s.parallel.tp;
  o.pp = s.parallel.pp;
  o.cp = s.parallel.cp;
  o.ep = s.parallel.ep;
  o.sequence_parallel = s.parallel.sequence_parallel;
  o.pp_schedule = s.parallel.pp_schedule;
  o.pp_chunks = s.parallel.pp_chunks;
  o.zero = s.parallel.zero;
  o.replayed_zero_stage = plan.stage;
  o.gathered_once_per_step = plan.gathered_once_per_step;
  o.shard_degree = plan.shard_degree;
  if (const auto rule = MakeDataParallelPolicy(s)->Gathers(); !rule.elements) {
    o.prefetch = rule.layers;
  }
  o.micro_batches = s.micro_batches();
  o.framework = s.parallel.framework;
  o.precision = s.training.precision;

  // Memory of the GPU with the highest peak.
  const memory::MemoryLedger& ledger = r.ledgers[r.peak_rank];
  o.capacity = s.cluster.gpu.Usable();
  if (const std::vector<int32_t> groups = s.StageGroups(); !groups.empty()) {
    o.capacity = s.cluster.groups[groups[r.StageOf(r.peak_rank)]].gpu.Usable();
  }
  o.headroom = s.runtime.headroom_taken;
  o.peak = ledger.peak();
  o.reserved_peak = ledger.reserved_peak();
  o.peak_gpu = r.GpuOf(r.peak_rank);
  o.peak_stage = r.StageOf(r.peak_rank);
  o.peak_at = ledger.peak_time();
  o.peak_op = OpLabelOr(r, ledger.peak_op());
  o.fits = true;
  for (const memory::MemoryLedger& l : r.ledgers) o.fits = o.fits && !l.first_overflow();
  o.peak_breakdown = ledger.peak_breakdown();
  o.category_peaks = ledger.category_peaks();
  o.static_states = r.program.stage_states[o.peak_stage];
  o.runtime_reserved = s.runtime.reserved;
  // The peak's GPU first; another stage's when only that one overflows.
  auto overflow_of = [&](int32_t rank) -> std::optional<OverflowSummary> {
    const memory::MemoryLedger& l = r.ledgers[rank];
    const auto& f = l.first_overflow();
    if (!f) return std::nullopt;
    Bytes persistent;
    for (const MemAction& a : r.program.persistent[r.StageOf(rank)]) {
      if (a.bytes > Bytes()) persistent += a.bytes;
    }
    return OverflowSummary{OpLabelOr(r, f->op), f->time, f->excess, persistent, l.reserved_peak()};
  };
  o.first_overflow = overflow_of(r.peak_rank);
  for (int32_t rank = 0; rank < static_cast<int32_t>(r.ledgers.size()); ++rank) {
    if (!o.first_overflow) o.first_overflow = overflow_of(rank);
  }
  {
    Bytes host, nvme, activations;
    for (const StateSplit& st : r.program.stage_states) {
      host = std::max(host, st.host);
      nvme = std::max(nvme, st.nvme);
    }
    for (Bytes b : r.host_activation_peak) activations = std::max(activations, b);
    o.host_peak = (host + activations) * o.gpus_per_node;
    o.nvme = nvme * o.gpus_per_node;
    if (s.cluster.node.host) {
      o.host_capacity = s.cluster.node.host->dram / domain_nodes;
      o.host_fits =
          o.host_peak <= o.host_capacity && o.nvme * domain_nodes <= s.cluster.node.host->nvme;
    }
    o.gpu_fits = o.fits;
    o.fits = o.fits && o.host_fits;
  }
  const Bytes tensors = ledger.peak() - s.runtime.reserved;
  o.fragmentation = tensors > Bytes() ? (ledger.reserved_peak() - ledger.peak()) / tensors : 0.0;

  // Time of the busiest stage.
  o.step = r.step;
  o.times = r.times;
  o.time_stage = r.time_stage;
  o.variability = s.cluster.variability;

  // Work: per-GPU averages times the GPUs.
  const double gpus = static_cast<double>(o.gpus);
  o.model_flops_per_gpu = r.model_flops;
  o.hardware_flops_per_gpu = r.hardware_flops;
  o.model_flops_total = r.model_flops.count() * gpus;
  o.hardware_flops_total = r.hardware_flops.count() * gpus;
  o.recompute_flops_total = r.recompute_flops.count() * gpus;
  o.background_load = s.cluster.background_load;
  o.idle_fabric_step = r.idle_fabric_step;
  if (s.model.moe) {
    o.moe = true;
    o.experts = s.model.moe->experts;
    o.top_k = s.model.moe->top_k;
    o.routing = s.training.routing;
    o.expert_load = r.expert_load;
    o.dropped_share = DroppedShare(*s.model.moe, s.training.routing);
    o.balanced_step = r.balanced_step;
    // Skewed routing: the replayed (busiest) rank computes more than its share; the step's
    // work is the balanced one's.
    if (r.balanced_step) {
      o.model_flops_total = r.balanced_model_flops.count() * gpus;
      o.hardware_flops_total = r.balanced_hardware_flops.count() * gpus;
      o.recompute_flops_total = r.balanced_recompute_flops.count() * gpus;
    }
  }
  o.peak_rate = cost::PeakRate(s.cluster.gpu, s.training.precision);
  if (!s.cluster.groups.empty()) {
    // A mixed cluster: the mean dense peak over its GPUs.
    double sum = 0;
    for (const NodeGroup& g : s.cluster.groups) {
      sum +=
          cost::PeakRate(g.gpu, s.training.precision).per_second() * static_cast<double>(g.count);
    }
    o.peak_rate = FlopRate::PerSecond(sum / static_cast<double>(s.cluster.nodes));
  }
  const double step_s = r.step.seconds();
  if (step_s > 0) {
    const double peak = o.peak_rate.per_second();
    o.tokens_per_s = static_cast<double>(s.training.global_batch * s.training.seq_len) / step_s;
    o.mfu = o.model_flops_total / (step_s * gpus * peak);
    o.hfu = o.hardware_flops_total / (step_s * gpus * peak);
  }
  o.tokens_per_s_per_gpu = o.tokens_per_s / gpus;
  o.whole_run = PriceWholeRun(s, o);
  o.whole_run.trials = s.run.trials;
  o.whole_run.seed = static_cast<uint64_t>(s.run.seed);

  o.comm_bytes_sent = r.comm_bytes_sent;
  for (CollectiveKind k : kReportedKinds) {
    const auto& st = r.collectives[static_cast<int>(k)];
    CollectiveSummary c;
    c.kind = k;
    c.count = st.count;
    for (CollectiveAlgorithm a : kAlgorithms) {
      if (st.by_algorithm[static_cast<int>(a)] > 0) {
        c.algorithms.push_back({a, st.by_algorithm[static_cast<int>(a)]});
      }
    }
    for (cost::NcclProtocol p :
         {cost::NcclProtocol::kLL, cost::NcclProtocol::kLL128, cost::NcclProtocol::kSimple}) {
      if (st.by_protocol[static_cast<int>(p)] > 0) {
        c.protocols.push_back({p, st.by_protocol[static_cast<int>(p)]});
      }
    }
    c.time = st.time;
    c.sent = r.comm_bytes_sent[static_cast<int>(k)];
    const double seconds = st.time.seconds();
    c.bus_bandwidth_bytes_per_s = seconds > 0 ? (c.sent / st.time).bytes_per_s() : 0;
    c.busiest_link = st.busiest_link;
    c.busiest_load = st.busiest_load;
    o.collectives.push_back(std::move(c));
  }

  for (int32_t stage = 0; stage < r.program.stages; ++stage) {
    const memory::MemoryLedger& l = r.ledgers[stage];
    o.stages.push_back(StageSummary{stage, r.program.stage_gpu[stage], l.peak(), l.reserved_peak(),
                                    l.peak_time(), OpLabelOr(r, l.peak_op()), !l.first_overflow(),
                                    l.peak_breakdown(), r.program.stage_states[stage],
                                    r.stages[stage]});
  }

  o.ops = r.ops;
  o.events = r.events;
  o.simulated_ranks = r.simulated_ranks;
  return o;
}

void AddDistribution(const Scenario& s, replay::StepDistribution d, RunSummary& summary) {
  RunSummary at_mean = summary;
  at_mean.step = d.mean;
  summary.whole_run = PriceWholeRun(s, at_mean);
  summary.whole_run.trials = s.run.trials;
  summary.whole_run.seed = static_cast<uint64_t>(s.run.seed);
  summary.distribution = std::move(d);
}

std::string RunSummary::Title() const {
  return overrides.empty() ? scenario
                           : absl::StrCat(scenario, " with ", absl::StrJoin(overrides, ", "));
}

}  // namespace sim::report
