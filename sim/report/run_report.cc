#include "sim/report/run_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/cost/compute_cost.h"
#include "sim/report/table.h"
#include "sim/workload/lowering.h"

namespace sim::report {

namespace {

struct Derived {
  double step_s = 0;
  double model_flops_total = 0, hardware_flops_total = 0, recompute_flops_total = 0;
  double tokens_per_s = 0, mfu = 0, hfu = 0;
  Bytes static_total;
  Bytes reserved_estimate;
  bool fits = false;
};

Derived Derive(const Scenario& s, const replay::ReplayResult& r) {
  Derived d;
  d.step_s = r.step.seconds();
  const double gpus = static_cast<double>(s.cluster.gpus());
  // Per-GPU work (averaged over stages; TP and CP ranks each do their share) times the GPUs.
  d.model_flops_total = r.model_flops.count() * gpus;
  d.hardware_flops_total = r.hardware_flops.count() * gpus;
  d.recompute_flops_total = r.recompute_flops.count() * gpus;
  const double peak = cost::PeakRate(s.cluster.gpu, s.training.precision).per_second();
  if (d.step_s > 0) {
    d.tokens_per_s = static_cast<double>(s.training.global_batch * s.training.seq_len) / d.step_s;
    d.mfu = d.model_flops_total / (d.step_s * gpus * peak);
    d.hfu = d.hardware_flops_total / (d.step_s * gpus * peak);
  }
  const memory::MemoryLedger& ledger = r.ledgers[r.peak_rank];
  d.static_total = PersistentStates(s, r.StageOf(r.peak_rank)).total();
  const Bytes over_reserve = ledger.peak() - s.runtime.reserved;
  d.reserved_estimate = ledger.peak() + Bytes::Round(static_cast<double>(over_reserve.count()) *
                                                     s.runtime.fragmentation);
  d.fits = ledger.peak() <= s.cluster.gpu.hbm;
  return d;
}

std::string PeakOpLabel(const replay::ReplayResult& r, std::optional<int32_t> op) {
  return op ? OpLabel(r.program.ops[*op], r.program.layers) : "persistent states";
}

// SPEC §5's memory and time keys for every pipeline stage (one entry without pp).
nlohmann::ordered_json StagesJson(const Scenario& s, const replay::ReplayResult& r) {
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (int32_t stage = 0; stage < r.program.stages; ++stage) {
    const memory::MemoryLedger& ledger = r.ledgers[stage];
    const StateSplit st = PersistentStates(s, stage);
    const replay::StageTimes& t = r.stages[stage];
    nlohmann::ordered_json breakdown;
    for (int c = 0; c < kNumMemCategories; ++c) {
      breakdown[std::string(kMemCategoryNames[c])] = ledger.peak_breakdown()[c].count();
    }
    stages.push_back({{"stage", stage},
                      {"gpu", r.program.stage_gpu[stage]},
                      {"memory",
                       {{"peak_bytes", ledger.peak().count()},
                        {"peak_at_s", ledger.peak_time().seconds()},
                        {"peak_op", PeakOpLabel(r, ledger.peak_op())},
                        {"fits", ledger.peak() <= s.cluster.gpu.hbm},
                        {"peak_breakdown_bytes", breakdown},
                        {"static_bytes",
                         {{"weights", st.weights.count()},
                          {"gradients", st.gradients.count()},
                          {"optimizer", st.optimizer.count()}}}}},
                      {"time",
                       {{"compute_s", t.compute.seconds()},
                        {"recompute_s", t.recompute.seconds()},
                        {"comm_s", t.comm.seconds()},
                        {"exposed_comm_s", t.exposed_comm.seconds()},
                        {"optimizer_s", t.optimizer.seconds()},
                        {"bubble_s", t.bubble.seconds()}}}});
  }
  return stages;
}

}  // namespace

nlohmann::ordered_json RunJson(const Scenario& s, const replay::ReplayResult& r) {
  const Derived d = Derive(s, r);
  const memory::MemoryLedger& ledger = r.ledgers[r.peak_rank];
  const StateSplit st = PersistentStates(s, r.StageOf(r.peak_rank));
  const ShardingPlan plan = PlanSharding(s);
  nlohmann::ordered_json j;
  j["schema_version"] = 1;
  j["scenario"] = s.name;
  j["cluster"] = {{"gpu", s.cluster.gpu.name},
                  {"gpus", s.cluster.gpus()},
                  {"nodes", s.cluster.nodes},
                  {"node", s.cluster.node.name},
                  {"gpus_per_node", s.cluster.node.gpus_per_node}};
  j["parallel"] = {{"dp", s.dp()},
                   {"tp", s.parallel.tp},
                   {"pp", s.parallel.pp},
                   {"cp", s.parallel.cp},
                   {"sequence_parallel", s.parallel.sequence_parallel},
                   {"pp_schedule", Name(s.parallel.pp_schedule)},
                   {"pp_chunks", s.parallel.pp_chunks},
                   {"zero", s.parallel.zero},
                   {"micro_batches", s.micro_batches()},
                   {"framework", Name(s.parallel.framework)},
                   {"replayed_stage", plan.stage},
                   {"shard_degree", plan.shard_degree},
                   {"prefetch", s.parallel.prefetch}};
  nlohmann::ordered_json breakdown;
  for (int c = 0; c < kNumMemCategories; ++c) {
    breakdown[std::string(kMemCategoryNames[c])] = ledger.peak_breakdown()[c].count();
  }
  nlohmann::ordered_json highs;
  for (int c = 0; c < kNumMemCategories; ++c) {
    highs[std::string(kMemCategoryNames[c])] = ledger.category_peaks()[c].count();
  }
  nlohmann::ordered_json overflow = nullptr;
  if (const auto& o = ledger.first_overflow()) {
    overflow = {{"op", PeakOpLabel(r, o->op)},
                {"at_s", o->time.seconds()},
                {"excess_bytes", o->excess.count()}};
  }
  j["memory"] = {{"capacity_bytes", s.cluster.gpu.hbm.count()},
                 {"peak_bytes", ledger.peak().count()},
                 {"peak_gpu", r.GpuOf(r.peak_rank)},
                 {"peak_stage", r.StageOf(r.peak_rank)},
                 {"peak_at_s", ledger.peak_time().seconds()},
                 {"peak_op", PeakOpLabel(r, ledger.peak_op())},
                 {"fits", d.fits},
                 {"peak_breakdown_bytes", breakdown},
                 {"static_bytes",
                  {{"weights", st.weights.count()},
                   {"gradients", st.gradients.count()},
                   {"optimizer", st.optimizer.count()}}},
                 {"category_peak_bytes", highs},
                 {"first_overflow", overflow},
                 {"fragmentation", s.runtime.fragmentation},
                 {"reserved_estimate_bytes", d.reserved_estimate.count()}};
  j["time"] = {{"step_s", d.step_s},
               {"compute_s", r.compute.seconds()},
               {"recompute_s", r.recompute.seconds()},
               {"comm_s", r.comm.seconds()},
               {"exposed_comm_s", r.exposed_comm.seconds()},
               {"optimizer_s", r.optimizer.seconds()},
               {"bubble_s", r.bubble.seconds()},
               {"overlap_stretch_s", r.overlap_stretch.seconds()},
               {"stage", r.time_stage}};
  j["flops"] = {{"model_per_step", d.model_flops_total},
                {"hardware_per_step", d.hardware_flops_total},
                {"recompute_per_step", d.recompute_flops_total},
                {"peak_per_gpu", cost::PeakRate(s.cluster.gpu, s.training.precision).per_second()}};
  j["throughput"] = {
      {"tokens_per_s", d.tokens_per_s},
      {"tokens_per_s_per_gpu", d.tokens_per_s / static_cast<double>(s.cluster.gpus())},
      {"mfu", d.mfu},
      {"hfu", d.hfu}};
  auto sent = [&](CollectiveKind k) { return r.comm_bytes_sent[static_cast<int>(k)].count(); };
  j["comm_bytes_per_gpu"] = {{"all_gather", sent(CollectiveKind::kAllGather)},
                             {"reduce_scatter", sent(CollectiveKind::kReduceScatter)},
                             {"all_reduce", sent(CollectiveKind::kAllReduce)},
                             {"send_recv", sent(CollectiveKind::kSendRecv)}};
  nlohmann::ordered_json coll = nlohmann::ordered_json::object();
  for (CollectiveKind k : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                           CollectiveKind::kAllReduce, CollectiveKind::kSendRecv}) {
    const auto& st = r.collectives[static_cast<int>(k)];
    if (st.count == 0) continue;
    nlohmann::ordered_json algos = nlohmann::ordered_json::object();
    for (CollectiveAlgorithm a : {CollectiveAlgorithm::kRing, CollectiveAlgorithm::kTree,
                                  CollectiveAlgorithm::kHierarchical, CollectiveAlgorithm::kNvls,
                                  CollectiveAlgorithm::kNvlsTree}) {
      if (st.by_algorithm[static_cast<int>(a)] > 0) {
        algos[std::string(Name(a))] = st.by_algorithm[static_cast<int>(a)];
      }
    }
    const double bytes = static_cast<double>(r.comm_bytes_sent[static_cast<int>(k)].count());
    coll[std::string(Name(k))] = {
        {"count", st.count},
        {"algorithms", algos},
        {"time_s", st.time.seconds()},
        // nccl-tests conventions: busbw = bytes each GPU sends / time.
        {"bus_bandwidth_bytes_per_s", st.time.seconds() > 0 ? bytes / st.time.seconds() : 0.0},
        {"busiest_link", st.busiest_link},
        {"busiest_link_transfers", st.busiest_load}};
  }
  j["collectives"] = coll;
  j["stages"] = StagesJson(s, r);
  j["replay"] = {
      {"ops", r.program.ops.size()}, {"events", r.events}, {"simulated_ranks", r.simulated_ranks}};
  return j;
}

std::string RunText(const Scenario& s, const replay::ReplayResult& r) {
  const Derived d = Derive(s, r);
  const memory::MemoryLedger& ledger = r.ledgers[r.peak_rank];
  const Bytes cap = s.cluster.gpu.hbm;
  std::string out;
  absl::StrAppendFormat(&out, "%s: %s on %d x %s (%s), %s ZeRO-%d, dp %d", s.name, s.model.name,
                        s.cluster.gpus(), s.cluster.gpu.name, s.cluster.node.name,
                        Name(s.parallel.framework), PlanSharding(s).stage, s.dp());
  if (s.parallel.tp > 1) {
    absl::StrAppendFormat(&out, " tp %d%s", s.parallel.tp,
                          s.parallel.sequence_parallel ? "+sp" : "");
  }
  if (s.parallel.cp > 1) absl::StrAppendFormat(&out, " cp %d", s.parallel.cp);
  if (s.parallel.pp > 1) {
    absl::StrAppendFormat(&out, " pp %d (%s", s.parallel.pp, Name(s.parallel.pp_schedule));
    if (s.parallel.pp_chunks > 1) absl::StrAppendFormat(&out, ", %d chunks", s.parallel.pp_chunks);
    out += ")";
  }
  absl::StrAppendFormat(&out, ", %d micro-batches\n", s.micro_batches());
  if (s.parallel.framework == Framework::kMegatron && s.parallel.zero >= 2) {
    absl::StrAppendFormat(&out,
                          "note: megatron has no ZeRO-%d; parallel.zero %d is read as its "
                          "distributed optimizer (ZeRO-1-like)\n",
                          s.parallel.zero, s.parallel.zero);
  }
  out += "\n";
  if (d.fits) {
    absl::StrAppendFormat(&out, "FITS: peak %s of %s per GPU (%s free)",
                          FormatGiB(ledger.peak().count()), FormatGiB(cap.count(), 0),
                          FormatGiB((cap - ledger.peak()).count()));
    if (d.reserved_estimate > cap) {
      absl::StrAppendFormat(&out,
                            "\n  but with allocator overhead (%.0f%%) about %s would be reserved: "
                            "expect fragmentation OOMs",
                            100 * s.runtime.fragmentation, FormatGiB(d.reserved_estimate.count()));
    }
    out += "\n";
  } else {
    const auto& o = *ledger.first_overflow();
    absl::StrAppendFormat(&out,
                          "DOES NOT FIT: peak %s of %s per GPU; capacity first exceeded at %s, "
                          "t = %s, by %s\n",
                          FormatGiB(ledger.peak().count()), FormatGiB(cap.count(), 0),
                          PeakOpLabel(r, o.op), FormatSeconds(o.time.seconds()),
                          FormatGiB(o.excess.count()));
  }
  absl::StrAppendFormat(
      &out, "Peak at t = %s in %s (GPU %d%s)\n\n", FormatSeconds(ledger.peak_time().seconds()),
      PeakOpLabel(r, ledger.peak_op()), r.GpuOf(r.peak_rank),
      r.program.stages > 1 ? absl::StrCat(", pipeline stage ", r.StageOf(r.peak_rank))
                           : std::string());

  const StateSplit st = PersistentStates(s, r.StageOf(r.peak_rank));
  Table mem({"memory per GPU", "at peak", "at peak", "static ledger"});
  for (int c = 0; c < kNumMemCategories; ++c) {
    const double b = static_cast<double>(ledger.peak_breakdown()[c].count());
    std::string stat;
    if (c == static_cast<int>(MemCategory::kWeights)) stat = FormatGB(st.weights.count());
    if (c == static_cast<int>(MemCategory::kGradients)) stat = FormatGB(st.gradients.count());
    if (c == static_cast<int>(MemCategory::kOptimizer)) stat = FormatGB(st.optimizer.count());
    if (c == static_cast<int>(MemCategory::kReserved)) stat = FormatGB(s.runtime.reserved.count());
    mem.AddRow({std::string(kMemCategoryNames[c]), FormatGB(b), FormatGiB(b), stat});
  }
  const double peak = static_cast<double>(ledger.peak().count());
  const double stat_sum = static_cast<double>((d.static_total + s.runtime.reserved).count());
  mem.AddRow({"total", FormatGB(peak), FormatGiB(peak), FormatGB(stat_sum)});
  absl::StrAppend(&out, mem.Render());
  absl::StrAppendFormat(&out,
                        "  The peak exceeds the static states + reserve by %s: transients live at "
                        "that moment.\n\n",
                        FormatGB(peak - stat_sum));

  Table time({"time per step", "seconds", "share"});
  auto row = [&](const char* name, double v) {
    time.AddRow({name, absl::StrFormat("%.4f", v),
                 d.step_s > 0 ? absl::StrFormat("%.1f%%", 100 * v / d.step_s) : "-"});
  };
  row("compute (fwd+bwd)", r.compute.seconds());
  row("recompute", r.recompute.seconds());
  row("exposed communication", r.exposed_comm.seconds());
  row("optimizer", r.optimizer.seconds());
  if (r.program.stages > 1) row("pipeline bubble", r.bubble.seconds());
  row("step", d.step_s);
  absl::StrAppend(&out, time.Render());
  if (r.program.stages > 1) {
    absl::StrAppendFormat(&out, "  (times of stage %d, the busiest)\n\n", r.time_stage);
    Table stages(
        {"stage", "GPU", "peak GiB", "compute s", "recompute s", "exposed comm s", "bubble s"});
    for (int32_t i = 0; i < r.program.stages; ++i) {
      const replay::StageTimes& t = r.stages[i];
      stages.AddRow({absl::StrCat(i), absl::StrCat(r.program.stage_gpu[i]),
                     FormatGiB(r.ledgers[i].peak().count()),
                     absl::StrFormat("%.4f", t.compute.seconds()),
                     absl::StrFormat("%.4f", t.recompute.seconds()),
                     absl::StrFormat("%.4f", t.exposed_comm.seconds()),
                     absl::StrFormat("%.4f", t.bubble.seconds())});
    }
    absl::StrAppend(&out, stages.Render());
  }
  absl::StrAppendFormat(&out,
                        "  communication busy %.4f s (overlapped %.4f s); compute slowed by "
                        "overlap %.4f s\n\n",
                        r.comm.seconds(),
                        std::max(0.0, r.comm.seconds() - r.exposed_comm.seconds()),
                        r.overlap_stretch.seconds());
  absl::StrAppendFormat(&out,
                        "Throughput: %.0f tokens/s (%.1f per GPU), MFU %.1f%%, HFU %.1f%% of %.1f "
                        "TFLOP/s dense %s\n\n",
                        d.tokens_per_s, d.tokens_per_s / static_cast<double>(s.cluster.gpus()),
                        100 * d.mfu, 100 * d.hfu,
                        cost::PeakRate(s.cluster.gpu, s.training.precision).tflops(),
                        Name(s.training.precision));
  Table comm({"per GPU per step", "sent GB", "time s", "bus GB/s", "algorithm",
              "busiest link (transfers)"});
  for (CollectiveKind k : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                           CollectiveKind::kAllReduce, CollectiveKind::kSendRecv}) {
    const auto& st = r.collectives[static_cast<int>(k)];
    if (k == CollectiveKind::kSendRecv && st.count == 0) continue;
    const double sent = r.comm_bytes_sent[static_cast<int>(k)].gb();
    std::string algo;
    for (CollectiveAlgorithm a : {CollectiveAlgorithm::kRing, CollectiveAlgorithm::kTree,
                                  CollectiveAlgorithm::kHierarchical, CollectiveAlgorithm::kNvls,
                                  CollectiveAlgorithm::kNvlsTree}) {
      if (st.by_algorithm[static_cast<int>(a)] > 0) {
        absl::StrAppend(&algo, algo.empty() ? "" : "+", Name(a));
      }
    }
    comm.AddRow({std::string(Name(k)), absl::StrFormat("%.3f", sent),
                 absl::StrFormat("%.3f", st.time.seconds()),
                 st.time.seconds() > 0 ? absl::StrFormat("%.1f", sent / st.time.seconds()) : "-",
                 algo.empty() ? "-" : algo,
                 st.busiest_link.empty()
                     ? "-"
                     : absl::StrCat(st.busiest_link, " (", st.busiest_load, ")")});
  }
  absl::StrAppend(&out, comm.Render());
  absl::StrAppendFormat(&out, "\nReplayed %d ops as %d events (%d simulated GPU%s).\n",
                        r.program.ops.size(), r.events, r.simulated_ranks,
                        r.simulated_ranks == 1                  ? ", standing for every rank"
                        : r.simulated_ranks == r.program.stages ? "s, one per pipeline stage"
                                                                : "s");
  return out;
}

std::string TraceJson(const Scenario& s, const replay::ReplayResult& r) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const nlohmann::ordered_json& e) {
    if (!first) out += ",\n";
    first = false;
    out += e.dump();
  };
  const double us = 1e6;
  const bool symmetric = r.simulated_ranks == r.program.stages;
  for (int32_t rank = 0; rank < r.simulated_ranks; ++rank) {
    std::string name = absl::StrCat("GPU ", r.GpuOf(rank));
    if (r.program.stages > 1) absl::StrAppend(&name, " (pipeline stage ", r.StageOf(rank), ")");
    if (symmetric && s.cluster.gpus() > r.program.stages) {
      absl::StrAppend(&name, ", standing for its ", s.cluster.gpus() / r.program.stages, " peers");
    }
    emit({{"ph", "M"},
          {"name", "process_name"},
          {"pid", rank},
          {"tid", 0},
          {"args", {{"name", name}}}});
    const char* threads[kNumStreams] = {"compute", "comm (NCCL, data parallel)",
                                        "comm (TP/CP, overlapped)", "pipeline send/recv"};
    for (int tid = 0; tid < kNumStreams; ++tid) {
      emit({{"ph", "M"},
            {"name", "thread_name"},
            {"pid", rank},
            {"tid", tid},
            {"args", {{"name", threads[tid]}}}});
    }
  }
  for (const replay::OpTiming& t : r.timings) {
    const Op& op = r.program.ops[t.op];
    nlohmann::ordered_json args;
    if (op.phase == OpPhase::kComm) {
      const CollectiveSpec& c = r.program.CollectiveOf(op);
      args = {{"collective", Name(c.kind)},
              {"tensor_bytes", c.tensor.count()},
              {"bytes_sent", BytesSentPerGpu(c.kind, c.tensor, c.group.size).count()},
              {"group_size", c.group.size},
              {"buckets", c.buckets}};
    } else {
      args = {{"flops", op.flops.count()}, {"bytes_moved", op.bytes_moved.count()}};
    }
    emit({{"ph", "X"},
          {"name", OpLabel(op, r.program.layers)},
          {"cat", Name(op.phase)},
          {"pid", t.rank},
          {"tid", static_cast<int>(op.stream)},
          {"ts", static_cast<double>(t.start.picoseconds()) / us},
          {"dur", static_cast<double>((t.end - t.start).picoseconds()) / us},
          {"args", args}});
  }
  // One counter sample per GPU per distinct time: the state after all changes at that time.
  for (int32_t rank = 0; rank < r.simulated_ranks; ++rank) {
    const auto& changes = r.ledgers[rank].changes();
    memory::Breakdown cur{};
    for (size_t i = 0; i < changes.size(); ++i) {
      cur[static_cast<int>(changes[i].category)] += changes[i].delta;
      if (i + 1 < changes.size() && changes[i + 1].time == changes[i].time) continue;
      nlohmann::ordered_json args;
      for (int c = 0; c < kNumMemCategories; ++c) {
        args[std::string(kMemCategoryNames[c])] =
            static_cast<double>(cur[c].count()) / 1073741824.0;
      }
      emit({{"ph", "C"},
            {"name", "allocated GiB"},
            {"pid", rank},
            {"ts", static_cast<double>(changes[i].time.picoseconds()) / us},
            {"args", args}});
    }
  }
  out += "\n]}\n";
  return out;
}

std::string TimelineCsv(const replay::ReplayResult& r) {
  std::string out = "time_s,gpu,event,category,delta_bytes,allocated_bytes\n";
  for (int32_t rank = 0; rank < r.simulated_ranks; ++rank) {
    for (const memory::MemoryChange& c : r.ledgers[rank].changes()) {
      absl::StrAppendFormat(&out, "%.12f,%d,%s,%s,%d,%d\n", c.time.seconds(), r.GpuOf(rank),
                            c.op ? OpLabel(r.program.ops[*c.op], r.program.layers) : "persistent",
                            Name(c.category), c.delta.count(), c.allocated.count());
    }
  }
  return out;
}

std::string DumpOps(const OpProgram& p) {
  std::string out =
      "# id stream label | flops bytes_moved | collective tensor group buckets | deps | memory\n";
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    const char* streams[kNumStreams] = {"compute", "comm", "tp_comm", "p2p"};
    absl::StrAppendFormat(&out, "%d %s %s", i, streams[static_cast<int>(op.stream)],
                          OpLabel(op, p.layers));
    if (p.stages > 1) absl::StrAppendFormat(&out, " stage%d", op.stage);
    if (op.phase == OpPhase::kComm) {
      const CollectiveSpec& c = p.CollectiveOf(op);
      absl::StrAppendFormat(&out, " | %s %d B over %d GPUs (%d nodes) in %d buckets", Name(c.kind),
                            c.tensor.count(), c.group.size, c.group.nodes, c.buckets);
    } else {
      absl::StrAppendFormat(&out, " | %.6g FLOP %d B", op.flops.count(), op.bytes_moved.count());
    }
    out += " | deps";
    for (int32_t k = op.deps_begin; k < op.deps_end; ++k) absl::StrAppend(&out, " ", p.deps[k]);
    out += " |";
    for (int32_t k = op.mem_begin; k < op.mem_end; ++k) {
      const MemAction& a = p.mem[k];
      absl::StrAppendFormat(&out, " %s:%s%+d",
                            a.when == MemWhen::kIssue   ? "issue"
                            : a.when == MemWhen::kStart ? "start"
                                                        : "end",
                            Name(a.category), a.bytes.count());
    }
    out += "\n";
  }
  return out;
}

}  // namespace sim::report
