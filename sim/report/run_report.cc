#include "sim/report/run_report.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/base/text_escape.h"
#include "sim/replay/fold.h"
#include "sim/replay/step_records.h"
#include "sim/report/json_text.h"
#include "sim/report/table.h"
#include "sim/spec/enum_names.h"
#include "sim/workload/lowering.h"
#include "sim/workload/policy/framework_traits.h"

namespace sim::report {

namespace {

nlohmann::ordered_json BreakdownJson(const memory::Breakdown& b) {
  nlohmann::ordered_json j;
  for (int c = 0; c < kNumMemCategories; ++c) j[std::string(kMemCategoryNames[c])] = b[c].count();
  return j;
}

nlohmann::ordered_json StaticJson(const StateSplit& st) {
  return {{"weights", st.weights.count()},     {"gradients", st.gradients.count()},
          {"optimizer", st.optimizer.count()}, {"adapter_weights", st.adapters.count()},
          {"host", st.host.count()},           {"nvme", st.nvme.count()}};
}

// docs/model.md "The report"'s memory and time keys for every pipeline stage (one entry without
// pp).
nlohmann::ordered_json StagesJson(const RunSummary& r) {
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (const StageSummary& st : r.stages) {
    const replay::StageTimes& t = st.times;
    stages.push_back({{"stage", st.stage},
                      {"gpu", st.gpu},
                      {"memory",
                       {{"peak_bytes", st.peak.count()},
                        {"reserved_peak_bytes", st.reserved_peak.count()},
                        {"peak_at_s", st.peak_at.seconds()},
                        {"peak_op", st.peak_op},
                        {"fits", st.fits},
                        {"peak_breakdown_bytes", BreakdownJson(st.peak_breakdown)},
                        {"static_bytes", StaticJson(st.static_states)}}},
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

namespace {

// What the speeds were drawn from, and how the trials came out (StepDistribution).
nlohmann::ordered_json VariabilityJson(const RunSummary& r) {
  const VariabilitySpec& v = r.variability;
  const replay::StepDistribution& d = *r.distribution;
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (Duration t : d.steps) steps.push_back(t.seconds());
  return {{"trials", d.trials},
          {"seed", v.seed},
          {"distribution", EnumName(v.distribution)},
          {"gemm_cv", v.gemm_cv},
          {"memory_cv", v.memory_cv},
          {"speeds", v.speeds},
          {"slow_nodes", v.slow_node_share},
          {"slow_node_speed", v.slow_node_speed},
          {"slow_gpus", v.slow_gpu_share},
          {"slow_gpu_speed", v.slow_gpu_speed},
          {"slow_links", v.slow_link_share},
          {"slow_link_speed", v.slow_link_speed},
          {"ideal_step_s", d.ideal.seconds()},
          {"paced_by",
           {{"spread", d.paced_by[static_cast<int>(replay::SlowCause::kSpread)]},
            {"slow_gpu", d.paced_by[static_cast<int>(replay::SlowCause::kSlowGpu)]},
            {"slow_node", d.paced_by[static_cast<int>(replay::SlowCause::kSlowNode)]},
            {"slow_link", d.paced_by[static_cast<int>(replay::SlowCause::kSlowLink)]}}},
          {"paced_by_stage", d.paced_by_stage},
          {"replays", d.replays},
          {"step_s", steps}};
}

// The whole run with its Monte Carlo check (WholeRun, sim/report/whole_run.h).
WholeRun Checked(const RunSummary& r) {
  WholeRun w = r.whole_run;
  MonteCarloEttr(w, w.trials, w.seed);
  return w;
}

nlohmann::ordered_json WholeRunJson(const RunSummary& r, bool monte_carlo) {
  const WholeRun w = monte_carlo ? Checked(r) : r.whole_run;
  nlohmann::ordered_json causes = nlohmann::ordered_json::object();
  for (const auto& [cause, per_day] : w.interruptions_by_cause) causes[cause] = per_day;
  nlohmann::ordered_json j = {
      {"tokens", w.tokens},
      {"tokens_default", w.tokens_default},
      {"steps", w.steps},
      {"productive_days", w.productive_days},
      {"interruptions_per_day", w.interruptions_per_day},
      {"interruptions_by_cause_per_day", causes},
      {"mtbf_h", w.mtbf_h},
      {"checkpoint_bytes", w.checkpoint_bytes},
      {"checkpoint_s", w.save_s},
      {"checkpoint_stall_s", w.stall_s},
      {"checkpoint_interval_s", w.interval_s},
      {"checkpoint_interval_optimal", w.interval_optimal},
      {"restart_s", w.restart_s},
      {"ettr", w.ettr},
      {"ettr_monte_carlo", monte_carlo ? nlohmann::ordered_json{{"mean", w.ettr_mc},
                                                                {"p10", w.ettr_mc_p10},
                                                                {"p90", w.ettr_mc_p90},
                                                                {"trials", w.trials},
                                                                {"seed", w.seed}}
                                       : nlohmann::ordered_json(nullptr)},
      {"checkpoint_share", w.checkpoint_share},
      {"failure_share", w.failure_share},
      {"effective_days", w.effective_days},
      {"gpu_watts", w.gpu_watts},
      {"host_watts_per_node", w.host_watts},
      {"pue", w.pue},
      {"step_kwh", w.step_kwh},
      {"energy_mwh", w.energy_mwh},
      {"tokens_per_joule", w.tokens_per_joule},
      {"tco2e", w.tco2e ? nlohmann::ordered_json(*w.tco2e) : nlohmann::ordered_json(nullptr)},
      {"cost_usd",
       w.cost_usd ? nlohmann::ordered_json(*w.cost_usd) : nlohmann::ordered_json(nullptr)},
      {"cost_basis", w.cost_basis},
      {"cost_split_usd",
       {{"training", w.cost_compute_usd},
        {"failures_and_checkpoints", w.cost_failures_usd},
        {"electricity", w.cost_energy_usd}}}};
  return j;
}

void AppendWholeRun(const RunSummary& r, std::string& out) {
  const WholeRun w = Checked(r);
  absl::StrAppendFormat(
      &out,
      "\nWhole run: %s tokens%s = %.0f steps, %.1f days of steps alone%s\n"
      "  interruptions: %.2f per day (MTBF %.1f h: gpu %.2f, hbm %.2f, network %.2f, host %.2f, "
      "software %.2f, planned %.2f)\n"
      "  checkpoint: %s of model states, written in %s (%s stall per save), every %s%s; "
      "restart %s (detect + restart + reload)\n"
      "  ETTR %.3f (Monte Carlo %.3f, p10-p90 %.3f-%.3f over %d runs): %.1f effective days "
      "(checkpoints %.1f %%, failures %.1f %% of wall time)\n"
      "  energy: %.0f W per GPU over the step, %.0f W per node host, PUE %.2f: %.3f kWh per step, "
      "%.1f MWh for the run, %.3g tokens per joule%s\n"
      "  cost: %s%s\n",
      FormatCount(w.tokens), w.tokens_default ? " (20 per parameter: run.tokens)" : "", w.steps,
      w.productive_days,
      r.distribution ? absl::StrFormat(" (at the trials' mean step, %.4f s)", w.step_s) : "",
      w.interruptions_per_day, w.mtbf_h, w.interruptions_by_cause[0].second,
      w.interruptions_by_cause[1].second, w.interruptions_by_cause[2].second,
      w.interruptions_by_cause[3].second, w.interruptions_by_cause[4].second,
      w.interruptions_by_cause[5].second, FormatGiB(Bytes::Round(w.checkpoint_bytes)),
      FormatSeconds(w.save_s), FormatSeconds(w.stall_s), FormatSeconds(w.interval_s),
      w.interval_optimal ? " (Young/Daly)" : "", FormatSeconds(w.restart_s), w.ettr, w.ettr_mc,
      w.ettr_mc_p10, w.ettr_mc_p90, w.trials, w.effective_days, 100 * w.checkpoint_share,
      100 * w.failure_share, w.gpu_watts, w.host_watts, w.pue, w.step_kwh, w.energy_mwh,
      w.tokens_per_joule, w.tco2e ? absl::StrFormat(", %.0f tCO2e", *w.tco2e) : std::string(),
      w.cost_usd ? absl::StrFormat("$%.0f, ", *w.cost_usd) : std::string(), w.cost_basis);
}

}  // namespace

nlohmann::ordered_json RunJson(const RunSummary& r, bool monte_carlo) {
  nlohmann::ordered_json j;
  j["schema_version"] = 1;
  j["scenario"] = r.scenario;
  j["overrides"] = r.overrides;
  j["cluster"] = {{"gpu", r.gpu},
                  {"gpus", r.gpus},
                  {"nodes", r.nodes},
                  {"node", r.node},
                  {"gpus_per_node", r.gpus_per_node},
                  {"background_load", r.background_load}};
  j["parallel"] = {{"dp", r.dp},
                   {"tp", r.tp},
                   {"pp", r.pp},
                   {"cp", r.cp},
                   {"ep", r.ep},
                   {"sequence_parallel", r.sequence_parallel},
                   {"pp_schedule", Name(r.pp_schedule)},
                   {"pp_chunks", r.pp_chunks},
                   {"zero", r.zero},
                   {"micro_batches", r.micro_batches},
                   {"framework", Name(r.framework)},
                   {"replayed_zero_stage", r.replayed_zero_stage},
                   {"shard_degree", r.shard_degree},
                   {"prefetch", r.prefetch ? nlohmann::ordered_json(*r.prefetch) : nullptr}};
  nlohmann::ordered_json overflow = nullptr;
  if (const auto& o = r.first_overflow) {
    overflow = {{"op", o->op},
                {"at_s", o->at.seconds()},
                {"excess_bytes", o->excess.count()},
                {"persistent_bytes", o->persistent.count()},
                {"persistent_excess_bytes", (o->persistent - r.capacity).count()},
                {"reserved_peak_excess_bytes", (o->reserved_peak - r.capacity).count()}};
  }
  j["memory"] = {{"capacity_bytes", r.capacity.count()},
                 {"headroom_bytes", r.headroom.count()},
                 {"peak_bytes", r.peak.count()},
                 {"peak_gpu", r.peak_gpu},
                 {"peak_stage", r.peak_stage},
                 {"peak_at_s", r.peak_at.seconds()},
                 {"peak_op", r.peak_op},
                 {"fits", r.fits},
                 {"peak_breakdown_bytes", BreakdownJson(r.peak_breakdown)},
                 {"static_bytes", StaticJson(r.static_states)},
                 {"category_peak_bytes", BreakdownJson(r.category_peaks)},
                 {"first_overflow", overflow},
                 {"reserved_peak_bytes", r.reserved_peak.count()},
                 {"fragmentation", r.fragmentation},
                 {"runtime_reserved_bytes", r.runtime_reserved.count()},
                 {"host_peak_bytes", r.host_peak.count()},
                 {"host_capacity_bytes", r.host_capacity.count()},
                 {"host_fits", r.host_fits},
                 {"nvme_bytes", r.nvme.count()}};
  nlohmann::ordered_json time = {{"step_s", r.step.seconds()}};
  replay::ForEachTime(r.times, [&](const char* key, Duration d) { time[key] = d.seconds(); });
  time["stage"] = r.time_stage;
  time["idle_fabric_step_s"] =
      r.idle_fabric_step ? nlohmann::ordered_json(r.idle_fabric_step->seconds()) : nullptr;
  if (r.distribution) {
    const replay::StepDistribution& d = *r.distribution;
    time["step_s_p50"] = d.p50.seconds();
    time["step_s_p90"] = d.p90.seconds();
    time["step_s_p99"] = d.p99.seconds();
    time["step_s_mean"] = d.mean.seconds();
    time["variability_slowdown"] = d.slowdown;
  }
  j["time"] = std::move(time);
  if (r.distribution) j["variability"] = VariabilityJson(r);
  if (r.moe) {
    nlohmann::ordered_json moe = {{"experts", r.experts},
                                  {"top_k", r.top_k},
                                  {"ep", r.ep},
                                  {"routing", EnumName(r.routing.distribution)},
                                  {"expert_load", r.expert_load}};
    if (r.routing.distribution == RoutingDistribution::kZipf) {
      moe["skew"] = r.routing.skew;
      moe["seed"] = r.routing.seed;
    }
    if (r.routing.capacity_factor) {
      moe["capacity_factor"] = *r.routing.capacity_factor;
      moe["pad_to_capacity"] = r.routing.pad_to_capacity;
      moe["dropped_share"] = r.dropped_share;
    }
    if (r.balanced_step) {
      moe["balanced_step_s"] = r.balanced_step->seconds();
      moe["imbalance_s"] = r.step.seconds() - r.balanced_step->seconds();
    }
    j["moe"] = moe;
  }
  j["flops"] = {{"model_per_step", r.model_flops_total},
                {"hardware_per_step", r.hardware_flops_total},
                {"recompute_per_step", r.recompute_flops_total},
                {"peak_per_gpu", r.peak_rate.per_second()}};
  j["throughput"] = {{"tokens_per_s", r.tokens_per_s},
                     {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu},
                     {"mfu", r.mfu},
                     {"hfu", r.hfu}};
  j["comm_bytes_per_gpu"] = {{"all_gather", r.Sent(CollectiveKind::kAllGather).count()},
                             {"reduce_scatter", r.Sent(CollectiveKind::kReduceScatter).count()},
                             {"all_reduce", r.Sent(CollectiveKind::kAllReduce).count()},
                             {"send_recv", r.Sent(CollectiveKind::kSendRecv).count()},
                             {"all_to_all", r.Sent(CollectiveKind::kAllToAll).count()}};
  nlohmann::ordered_json coll = nlohmann::ordered_json::object();
  for (const CollectiveSummary& c : r.collectives) {
    if (c.count == 0) continue;
    nlohmann::ordered_json algos = nlohmann::ordered_json::object();
    for (const auto& [a, n] : c.algorithms) algos[std::string(Name(a))] = n;
    nlohmann::ordered_json protos = nlohmann::ordered_json::object();
    for (const auto& [p, n] : c.protocols) protos[std::string(cost::ProtocolName(p))] = n;
    coll[std::string(Name(c.kind))] = {{"count", c.count},
                                       {"algorithms", algos},
                                       {"protocols", protos},
                                       {"time_s", c.time.seconds()},
                                       {"bus_bandwidth_bytes_per_s", c.bus_bandwidth_bytes_per_s},
                                       {"busiest_link", c.busiest_link},
                                       {"busiest_link_transfers", c.busiest_load}};
  }
  j["collectives"] = coll;
  j["stages"] = StagesJson(r);
  j["replay"] = {{"ops", r.ops}, {"events", r.events}, {"simulated_ranks", r.simulated_ranks}};
  j["run"] = WholeRunJson(r, monte_carlo);
  return j;
}

namespace {

// The title line: the run, the cluster and the layout; notes on how keys were read.
void AppendTitle(const RunSummary& r, std::string& out) {
  const std::string name = r.Title();
  absl::StrAppendFormat(&out, "%s: %s on %d x %s (%s), %s ZeRO-%d%s, dp %d", name, r.model, r.gpus,
                        r.gpu, r.node, Name(r.framework), r.replayed_zero_stage,
                        r.gathered_once_per_step ? " (FSDP2 under pp: gathered once per step)" : "",
                        r.dp);
  if (r.tp > 1) absl::StrAppendFormat(&out, " tp %d%s", r.tp, r.sequence_parallel ? "+sp" : "");
  if (r.cp > 1) absl::StrAppendFormat(&out, " cp %d", r.cp);
  if (r.ep > 1) absl::StrAppendFormat(&out, " ep %d", r.ep);
  if (r.pp > 1) {
    absl::StrAppendFormat(&out, " pp %d (%s", r.pp, Name(r.pp_schedule));
    if (r.pp_chunks > 1) absl::StrAppendFormat(&out, ", %d chunks", r.pp_chunks);
    out += ")";
  }
  absl::StrAppendFormat(&out, ", %d micro-batch%s\n", r.micro_batches,
                        r.micro_batches == 1 ? "" : "es");
  if (const auto note = TraitsOf(r.framework).ZeroNote(r.zero)) {
    absl::StrAppend(&out, "note: ", *note, "\n");
  }
  if (r.batch_tokens > 0) {
    absl::StrAppendFormat(&out,
                          "batch: %d sequences of %d tokens = %d tokens per step "
                          "(training.global_batch_tokens %d, rounded to whole micro-batches)\n",
                          r.global_batch, r.seq_len, r.global_batch * r.seq_len, r.batch_tokens);
  }
  if (r.requested_algorithm != CollectiveAlgorithm::kAuto) {
    // An algorithm that does not apply to a collective (NCCL has no tree all-gather, NVLS needs
    // NVLink SHARP, ...) falls back to the ring (sim/cost/graph_collective.h): say where.
    std::vector<std::string> fell_back;
    for (const CollectiveSummary& c : r.collectives) {
      for (const auto& [algorithm, count] : c.algorithms) {
        if (algorithm != r.requested_algorithm && count > 0) {
          fell_back.push_back(
              absl::StrFormat("%s ran %s (%d collectives)", Name(c.kind), Name(algorithm), count));
        }
      }
    }
    if (!fell_back.empty()) {
      absl::StrAppendFormat(&out, "note: parallel.collective %s does not apply everywhere: %s\n",
                            Name(r.requested_algorithm), absl::StrJoin(fell_back, ", "));
    }
  }
  out += "\n";
}

// The verdict (FITS / DOES NOT FIT), the term that decides it, and the peak's moment.
void AppendVerdict(const RunSummary& r, std::string& out) {
  const Bytes cap = r.capacity;
  const bool pipelined = r.stages.size() > 1;
  // Reserved = allocated tensors + the allocator's cached, unused segments + the runtime
  // reserve: the verdict names the term that decides.
  const Bytes tensors = r.peak - r.runtime_reserved;
  const Bytes overhead = r.reserved_peak - r.peak;
  const std::string terms =
      absl::StrFormat("tensors %s + allocator cache %s + runtime %s", FormatGiB(tensors),
                      FormatGiB(overhead), FormatGiB(r.runtime_reserved));
  const std::string margin = r.headroom > Bytes() ? absl::StrCat(" after a ", FormatGiB(r.headroom),
                                                                 " headroom (runtime.headroom)")
                                                  : "";
  if (!r.host_fits && r.gpu_fits) {
    absl::StrAppendFormat(&out,
                          "DOES NOT FIT: the host memory per node %s exceeds the node's %s of "
                          "DRAM%s (GPU: reserved peak %s of %s usable)\n",
                          FormatGiB(r.host_peak), FormatGiB(r.host_capacity),
                          r.nvme > Bytes() ? " or its NVMe" : "", FormatGiB(r.reserved_peak),
                          FormatGiB(cap));
  } else if (r.gpu_fits) {
    absl::StrAppendFormat(&out, "FITS: reserved peak %s of %s usable per GPU%s (%s free)\n  %s\n",
                          FormatGiB(r.reserved_peak), FormatGiB(cap), margin,
                          FormatGiB(cap - r.reserved_peak), terms);
  } else {
    const absl::string_view decides =
        tensors > cap  ? "the tensors alone exceed it"
        : r.peak > cap ? "the tensors fit, the runtime reserve tips it over"
                       : "the tensors and runtime fit; the allocator's cached segments do not";
    absl::StrAppendFormat(&out, "DOES NOT FIT: reserved peak %s of %s usable per GPU%s: %s\n  %s\n",
                          FormatGiB(r.reserved_peak), FormatGiB(cap), margin, decides, terms);
    if (const auto& o = r.first_overflow) {
      absl::StrAppendFormat(&out, "  capacity first exceeded at %s, t = %s, by %s\n", o->op,
                            FormatSeconds(o->at.seconds()), FormatGiB(o->excess));
      // The first moment counts what was allocated so far; say what the whole persistent set
      // and the peak need beside it.
      const std::string persistent =
          o->persistent > cap ? absl::StrCat(FormatGiB(o->persistent - cap), " over")
                              : absl::StrCat("fit, ", FormatGiB(cap - o->persistent), " left");
      absl::StrAppendFormat(&out,
                            "  persistent states alone %s (%s); the reserved peak %s (%s over)\n",
                            FormatGiB(o->persistent), persistent, FormatGiB(o->reserved_peak),
                            FormatGiB(o->reserved_peak - cap));
    }
  }
  absl::StrAppendFormat(
      &out, "Peak at t = %s in %s (GPU %d%s)\n\n", FormatSeconds(r.peak_at.seconds()), r.peak_op,
      r.peak_gpu, pipelined ? absl::StrCat(", pipeline stage ", r.peak_stage) : std::string());
}

// Memory per GPU at the peak by category, beside the static ledger; host memory.
void AppendMemory(const RunSummary& r, std::string& out) {
  const StateSplit& st = r.static_states;
  Table mem({"memory per GPU", "at peak", "at peak", "static ledger"});
  for (int c = 0; c < kNumMemCategories; ++c) {
    const double b = static_cast<double>(r.peak_breakdown[c].count());
    std::string stat;
    if (c == static_cast<int>(MemCategory::kWeights)) stat = FormatGB(st.weights);
    if (c == static_cast<int>(MemCategory::kGradients)) stat = FormatGB(st.gradients);
    if (c == static_cast<int>(MemCategory::kOptimizer)) stat = FormatGB(st.optimizer);
    if (c == static_cast<int>(MemCategory::kReserved)) stat = FormatGB(r.runtime_reserved);
    mem.AddRow({std::string(kMemCategoryNames[c]), FormatGB(b), FormatGiB(b), stat});
  }
  const double peak = static_cast<double>(r.peak.count());
  const double stat_sum = static_cast<double>((st.total() + r.runtime_reserved).count());
  mem.AddRow({"total", FormatGB(peak), FormatGiB(peak), FormatGB(stat_sum)});
  absl::StrAppend(&out, mem.Render());
  absl::StrAppendFormat(&out,
                        "  The peak exceeds the static states + reserve by %s: transients live at "
                        "that moment.\n",
                        FormatGB(peak - stat_sum));
  if (st.adapters > Bytes()) {
    absl::StrAppendFormat(&out,
                          "  weights: frozen base %s + trained adapters %s; gradients and "
                          "optimizer are the adapters'\n",
                          FormatGB(st.weights), FormatGB(st.adapters));
  }
  if (r.host_peak > Bytes() || r.nvme > Bytes()) {
    absl::StrAppendFormat(&out, "  host memory per node %s (per GPU: states %s)",
                          FormatGiB(r.host_peak), FormatGiB(st.host));
    if (r.nvme > Bytes()) absl::StrAppendFormat(&out, "; NVMe per node %s", FormatGB(r.nvme));
    out += "\n";
  }
  out += "\n";
}

// The step's time split, each stage's under a pipeline, and the busy links.
void AppendTime(const RunSummary& r, std::string& out) {
  const bool pipelined = r.stages.size() > 1;
  const double step_s = r.step.seconds();
  Table time({"time per step", "seconds", "share"});
  auto row = [&](const char* name, double v) {
    time.AddRow({name, absl::StrFormat("%.4f", v),
                 step_s > 0 ? absl::StrFormat("%.1f%%", 100 * v / step_s) : "-"});
  };
  row("compute (fwd+bwd)", r.times.compute.seconds());
  row("recompute", r.times.recompute.seconds());
  row("exposed communication", r.times.exposed_comm.seconds());
  row("optimizer", r.times.optimizer.seconds());
  if (r.times.pcie > Duration::Zero())
    row("exposed PCIe (offload)", r.times.exposed_pcie.seconds());
  if (pipelined) row("pipeline bubble", r.times.bubble.seconds());
  row("step", step_s);
  absl::StrAppend(&out, time.Render());
  if (pipelined) {
    absl::StrAppendFormat(&out, "  (times of stage %d, the busiest)\n\n", r.time_stage);
    Table stages(
        {"stage", "GPU", "reserved GiB", "compute s", "recompute s", "exposed comm s", "bubble s"});
    for (const StageSummary& sg : r.stages) {
      const replay::StageTimes& t = sg.times;
      stages.AddRow({absl::StrCat(sg.stage), absl::StrCat(sg.gpu), FormatGiB(sg.reserved_peak),
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
                        r.times.comm.seconds(),
                        std::max(0.0, r.times.comm.seconds() - r.times.exposed_comm.seconds()),
                        r.times.overlap_stretch.seconds());
  if (r.idle_fabric_step) {
    out.pop_back();
    const double idle = r.idle_fabric_step->seconds(), extra = step_s - idle;
    absl::StrAppendFormat(&out,
                          "  shared fabric: other jobs' traffic holds %g %% of every "
                          "switch-to-switch link;\n  %s\n\n",
                          100 * r.background_load,
                          extra > 0 ? absl::StrFormat("the step is %.4f s (%+.2f %%) over the "
                                                      "%.4f s it takes on an idle fabric",
                                                      extra, 100 * extra / idle, idle)
                                    : std::string("this job's traffic crosses no loaded link "
                                                  "(or hides it): the step is the idle "
                                                  "fabric's"));
  }
  if (r.times.pcie > Duration::Zero()) {
    // Drop the blank line the communication line ended with, to keep the two together.
    out.pop_back();
    absl::StrAppendFormat(&out, "  PCIe copies busy %.4f s (hidden %.4f s)\n\n",
                          r.times.pcie.seconds(),
                          std::max(0.0, r.times.pcie.seconds() - r.times.exposed_pcie.seconds()));
  }
}

// The step over the trials' speed draws (run --trials N).
void AppendDistribution(const RunSummary& r, std::string& out) {
  if (!r.distribution) return;
  const replay::StepDistribution& d = *r.distribution;
  const VariabilitySpec& v = r.variability;
  std::vector<std::string> drawn;
  if (v.gemm_cv > 0) drawn.push_back(absl::StrFormat("GEMM speed cv %g", v.gemm_cv));
  if (v.memory_cv > 0) drawn.push_back(absl::StrFormat("memory-bound speed cv %g", v.memory_cv));
  if (!drawn.empty()) drawn.back() += absl::StrCat(" (", EnumName(v.distribution), ")");
  if (!v.speeds.empty()) drawn.push_back(absl::StrCat(v.speeds.size(), " tabulated speeds"));
  if (v.slow_node_share > 0 && v.slow_node_speed < 1) {
    drawn.push_back(
        absl::StrFormat("%g %% of nodes at %g", 100 * v.slow_node_share, v.slow_node_speed));
  }
  if (v.slow_gpu_share > 0 && v.slow_gpu_speed < 1) {
    drawn.push_back(
        absl::StrFormat("%g %% of GPUs at %g", 100 * v.slow_gpu_share, v.slow_gpu_speed));
  }
  if (v.SlowLinks()) {
    drawn.push_back(absl::StrFormat("%g %% of network links at %g of their bandwidth",
                                    100 * v.slow_link_share, v.slow_link_speed));
  }
  absl::StrAppendFormat(&out, "Step over %d trials (%s; seed %d):\n", d.trials,
                        drawn.empty() ? "no variability described: every GPU at its calibrated "
                                        "speed"
                                      : absl::StrJoin(drawn, ", "),
                        v.seed);
  absl::StrAppendFormat(&out,
                        "  P50 %.4f s, P90 %.4f s, P99 %.4f s; mean %.4f s, %+.2f %% over the "
                        "ideal %.4f s\n",
                        d.p50.seconds(), d.p90.seconds(), d.p99.seconds(), d.mean.seconds(),
                        100 * d.slowdown, d.ideal.seconds());
  const int64_t slower = std::accumulate(d.paced_by.begin(), d.paced_by.end(), int64_t{0});
  if (slower > 0) {
    std::vector<std::string> stages;
    for (size_t st = 0; st < d.paced_by_stage.size(); ++st) {
      if (d.paced_by_stage[st] > 0 && d.paced_by_stage.size() > 1) {
        stages.push_back(absl::StrCat("stage ", st, " ", d.paced_by_stage[st]));
      }
    }
    absl::StrAppendFormat(
        &out,
        "  %d trials slower than ideal, paced by: the spread %d, a slow GPU %d, a slow node "
        "%d%s%s\n",
        slower, d.paced_by[static_cast<int>(replay::SlowCause::kSpread)],
        d.paced_by[static_cast<int>(replay::SlowCause::kSlowGpu)],
        d.paced_by[static_cast<int>(replay::SlowCause::kSlowNode)],
        v.SlowLinks() ? absl::StrCat(", a slow link ",
                                     d.paced_by[static_cast<int>(replay::SlowCause::kSlowLink)])
                      : "",
        stages.empty() ? "" : absl::StrCat("; at ", absl::StrJoin(stages, ", ")));
  }
  absl::StrAppendFormat(&out, "  (%d exact replays of the slowest-ranked pipelines)\n\n",
                        d.replays);
}

// Experts' routing and imbalance; throughput and MFU.
void AppendExpertsAndThroughput(const RunSummary& r, std::string& out) {
  if (r.moe) {
    absl::StrAppendFormat(&out, "Experts: %d, top %d, %s routing", r.experts, r.top_k,
                          EnumName(r.routing.distribution));
    if (r.routing.distribution == RoutingDistribution::kZipf) {
      absl::StrAppendFormat(&out, " (skew %g, seed %d)", r.routing.skew, r.routing.seed);
    }
    if (r.routing.capacity_factor) {
      absl::StrAppendFormat(&out, ", capacity factor %g%s: %.1f%% of token copies dropped",
                            *r.routing.capacity_factor,
                            r.routing.pad_to_capacity ? " (padded)" : "", 100 * r.dropped_share);
    }
    if (r.balanced_step) {
      const double extra = r.step.seconds() - r.balanced_step->seconds();
      absl::StrAppendFormat(&out,
                            ": the busiest of %d EP ranks computes %.3fx the balanced tokens "
                            "and paces the step; imbalance costs %.4f s (%.1f%%) over balanced "
                            "routing's %.4f s",
                            r.ep, r.expert_load, extra, 100 * extra / r.balanced_step->seconds(),
                            r.balanced_step->seconds());
    }
    out += "\n";
  }
  absl::StrAppendFormat(&out,
                        "Throughput: %.0f tokens/s (%.1f per GPU), MFU %.1f%%, HFU %.1f%% of %.1f "
                        "TFLOP/s dense %s\n\n",
                        r.tokens_per_s, r.tokens_per_s_per_gpu, 100 * r.mfu, 100 * r.hfu,
                        r.peak_rate.tflops(), Name(r.precision));
}

// Communication per GPU per collective kind, and the replay's size.
void AppendCommunication(const RunSummary& r, std::string& out) {
  Table comm({"per GPU per step", "sent GB", "time s", "bus GB/s", "algorithm", "protocol",
              "busiest link (transfers)"});
  for (const CollectiveSummary& c : r.collectives) {
    if ((c.kind == CollectiveKind::kSendRecv || c.kind == CollectiveKind::kAllToAll) &&
        c.count == 0) {
      continue;
    }
    const double sent = c.sent.gb();
    std::string algo;
    for (const auto& [a, n] : c.algorithms)
      absl::StrAppend(&algo, algo.empty() ? "" : "+", Name(a));
    std::string proto;
    for (const auto& [p, n] : c.protocols)
      absl::StrAppend(&proto, proto.empty() ? "" : "+", cost::ProtocolName(p));
    comm.AddRow(
        {std::string(Name(c.kind)), absl::StrFormat("%.3f", sent),
         absl::StrFormat("%.3f", c.time.seconds()),
         c.time.seconds() > 0 ? absl::StrFormat("%.1f", sent / c.time.seconds()) : "-",
         algo.empty() ? "-" : algo, proto.empty() ? "-" : proto,
         c.busiest_link.empty() ? "-" : absl::StrCat(c.busiest_link, " (", c.busiest_load, ")")});
  }
  absl::StrAppend(&out, comm.Render());
  absl::StrAppendFormat(&out, "\nReplayed %d ops as %d events (%d simulated GPU%s).\n", r.ops,
                        r.events, r.simulated_ranks,
                        r.simulated_ranks == 1 ? ", standing for every rank"
                        : r.simulated_ranks == static_cast<int32_t>(r.stages.size())
                            ? "s, one per pipeline stage"
                            : "s");
}

}  // namespace

std::string RunText(const RunSummary& r) {
  std::string out;
  AppendTitle(r, out);
  AppendVerdict(r, out);
  AppendMemory(r, out);
  AppendTime(r, out);
  AppendDistribution(r, out);
  AppendExpertsAndThroughput(r, out);
  AppendCommunication(r, out);
  AppendWholeRun(r, out);
  return out;
}

std::vector<TraceRange> DefaultTraceMicroBatches(const Scenario& s) {
  const auto fold = replay::PlanFold(s);
  if (!fold) return {};
  const int64_t m = s.micro_batches();
  return {{0, fold->k + fold->d - 1}, {m - fold->k, m - 1}};
}

std::string TraceRangesText(const std::vector<TraceRange>& ranges, int64_t micro_batches) {
  std::vector<std::string> parts;
  for (const TraceRange& r : ranges) {
    parts.push_back(r.first == r.last ? absl::StrCat(r.first)
                                      : absl::StrCat(r.first, "..", r.last));
  }
  return absl::StrCat(absl::StrJoin(parts, ", "), " of 0..", micro_batches - 1);
}

std::string TraceJson(const Scenario& s, const replay::ReplayResult& r,
                      const TraceOptions& options) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const nlohmann::ordered_json& e) {
    if (!first) out += ",\n";
    first = false;
    out += JsonText(e, -1);
  };
  const double us = 1e6;
  const bool symmetric = r.simulated_ranks == r.program.stages;
  const int64_t micro_batches = s.micro_batches();
  const std::vector<TraceRange>& kept_ranges = options.micro_batches;
  const bool all_micro_batches = kept_ranges.empty();
  auto in = [](const TraceRange& range, int64_t v) { return v >= range.first && v <= range.last; };
  auto rank_kept = [&](int32_t rank) {
    return !options.stages || in(*options.stages, r.StageOf(rank));
  };
  // The index in kept_ranges of the range an op belongs to (step-wide ops: the one reaching the
  // last micro-batch), or -1 when it is left out; 0 without ranges.
  auto range_of = [&](const Op& op) -> int {
    if (all_micro_batches) return 0;
    const bool step_wide = op.pass == OpPass::kStep || !op.group;
    for (size_t i = 0; i < kept_ranges.size(); ++i) {
      if (step_wide ? kept_ranges[i].last >= micro_batches - 1
                    : in(kept_ranges[i], op.micro_batch)) {
        return static_cast<int>(i);
      }
    }
    return -1;
  };
  const replay::StepRecords records(r);
  auto op_kept = [&](const replay::StepRecords::Timing& t) {
    return rank_kept(t.timing.rank) && range_of(t.op) >= 0;
  };
  for (int32_t rank = 0; rank < r.simulated_ranks; ++rank) {
    if (!rank_kept(rank)) continue;
    std::string name = absl::StrCat("GPU ", r.GpuOf(rank));
    if (r.program.stages > 1) absl::StrAppend(&name, " (pipeline stage ", r.StageOf(rank), ")");
    if (symmetric && s.cluster.gpus() > r.program.stages) {
      const int64_t n = s.cluster.gpus() / r.program.stages;
      absl::StrAppend(&name, ", standing for ", n, " GPUs (itself and ", n - 1, " peer",
                      n - 1 == 1 ? "" : "s", ")");
    }
    if (!all_micro_batches) {
      absl::StrAppend(&name, ", micro-batches ", TraceRangesText(kept_ranges, micro_batches));
    }
    emit({{"ph", "M"},
          {"name", "process_name"},
          {"pid", rank},
          {"tid", 0},
          {"args", {{"name", name}}}});
    const char* threads[kNumStreams] = {"compute",
                                        "comm (NCCL, data parallel)",
                                        "comm (TP/CP, overlapped)",
                                        "pipeline send/recv",
                                        "PCIe copies (offload)",
                                        "host CPU (offloaded optimizer)"};
    for (int tid = 0; tid < kNumStreams; ++tid) {
      emit({{"ph", "M"},
            {"name", "thread_name"},
            {"pid", rank},
            {"tid", tid},
            {"args", {{"name", threads[tid]}}}});
    }
  }
  // Each range's time span, which the memory counters are cut to (the whole step without
  // ranges). A range whose ops all fall on left-out stages has no span.
  struct Span {
    Duration from, to;
    bool any = false;
  };
  std::vector<Span> spans(all_micro_batches ? 1 : kept_ranges.size());
  if (all_micro_batches) spans[0] = {Duration::Zero(), r.step, true};
  // Of a folded step, only the window copies that hold a kept micro-batch are read.
  std::vector<std::pair<int64_t, int64_t>> copies;
  if (all_micro_batches) {
    if (records.windows() > 1) copies = {{0, records.windows() - 1}};
  } else {
    std::vector<std::pair<int64_t, int64_t>> kept_micro_batches;
    for (const TraceRange& range : kept_ranges) {
      kept_micro_batches.push_back({range.first, range.last});
    }
    copies =
        records.CopiesLabelled(kept_micro_batches, kept_ranges.back().last >= micro_batches - 1);
  }
  if (!all_micro_batches) {
    records.ForEachTimingIn(copies, [&](int64_t i) {
      const replay::StepRecords::Timing kept = records.timing(i);
      if (!op_kept(kept)) return true;
      const replay::OpTiming& t = kept.timing;
      Span& sp = spans[range_of(kept.op)];
      sp.from = sp.any ? std::min(sp.from, t.start) : t.start;
      sp.to = sp.any ? std::max(sp.to, t.end) : t.end;
      sp.any = true;
      return true;
    });
  }
  records.ForEachTimingIn(copies, [&](int64_t i) {
    const replay::StepRecords::Timing kept = records.timing(i);
    if (!op_kept(kept)) return true;
    const replay::OpTiming& t = kept.timing;
    const Op& op = kept.op;
    nlohmann::ordered_json args;
    if (op.kind == OpKind::kCollective) {
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
          {"cat", op.kind == OpKind::kCollective ? "comm" : Name(op.pass)},
          {"pid", t.rank},
          {"tid", static_cast<int>(op.stream)},
          {"ts", static_cast<double>(t.start.picoseconds()) / us},
          {"dur", static_cast<double>((t.end - t.start).picoseconds()) / us},
          {"args", args}});
    return true;
  });
  // One counter sample per GPU per distinct time: the state after all changes at that time.
  // With micro-batch ranges, per range only the times a kept op allocated or freed inside its
  // span, after one sample at the span's start with the level reached before it.
  auto sample = [&](int32_t rank, Duration at, const memory::Breakdown& cur, Bytes reserved) {
    nlohmann::ordered_json args;
    for (int c = 0; c < kNumMemCategories; ++c) {
      args[std::string(kMemCategoryNames[c])] = static_cast<double>(cur[c].count()) / 1073741824.0;
    }
    emit({{"ph", "C"},
          {"name", "allocated GiB"},
          {"pid", rank},
          {"ts", static_cast<double>(at.picoseconds()) / us},
          {"args", args}});
    emit({{"ph", "C"},
          {"name", "reserved GiB"},
          {"pid", rank},
          {"ts", static_cast<double>(at.picoseconds()) / us},
          {"args", {{"reserved", static_cast<double>(reserved.count()) / 1073741824.0}}}});
  };
  for (int32_t rank = 0; rank < r.simulated_ranks; ++rank) {
    if (!rank_kept(rank)) continue;
    const int64_t changes = records.changes(rank);
    const replay::StepRecords::Runs runs = records.change_runs(rank);
    auto time_of = [&](int64_t i) { return records.bare_change(rank, i).time; };
    // Where the changes before `from` can be skipped from `i` on: past whole window copies,
    // which end where they began (the state repeats), to the start of the last copy (or of
    // what follows the window) that begins before `from` and does not begin inside a group of
    // changes at one time — all samples the skipped changes would give are before the span.
    auto skip_before = [&](int64_t i, Duration from) {
      if (runs.size == 0 || i < runs.first || (i - runs.first) % runs.size != 0) return i;
      const int64_t c = (i - runs.first) / runs.size;
      if (c >= runs.copies) return i;
      auto start = [&](int64_t k) { return runs.first + k * runs.size; };
      int64_t lo = c, hi = start(runs.copies) < changes ? runs.copies : runs.copies - 1;
      while (lo < hi) {  // the last k in [c, hi] whose start is before `from`
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (time_of(start(mid)) < from) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      while (lo > c && time_of(start(lo)) == time_of(start(lo) - 1)) --lo;
      return start(lo);
    };
    for (const Span& span : spans) {
      if (!span.any) continue;
      memory::Breakdown cur{};
      bool kept_change = false;  // a change of the current time group is a kept op's
      bool level_shown = false;  // the sample at the span's start
      for (int64_t i = 0; i < changes; ++i) {
        if (!all_micro_batches) {
          if (const int64_t to = skip_before(i, span.from); to != i) {
            i = to;
            kept_change = false;
          }
        }
        const replay::StepRecords::Change c = records.change(rank, i);
        std::optional<Duration> next;
        if (i + 1 < changes) next = time_of(i + 1);
        cur[static_cast<int>(c.change.category)] += c.change.delta;
        kept_change = kept_change || (c.op && range_of(*c.op) >= 0);
        if (next && *next == c.change.time) continue;
        Duration at = c.change.time;
        if (!all_micro_batches) {
          const bool kept = kept_change;
          kept_change = false;
          if (at > span.to) break;
          const bool next_before = next && *next < span.from;
          if (at < span.from) {
            if (next_before) continue;
            at = span.from;  // the level when the span starts
          } else if (!kept && level_shown) {
            continue;
          }
          level_shown = true;
        }
        sample(rank, at, cur, c.change.reserved);
      }
    }
  }
  out += "\n]}\n";
  return out;
}

std::optional<std::string> TraceSizeWarning(const std::string& path, Bytes size) {
  if (size <= kTraceViewerLimit) return std::nullopt;
  return absl::StrFormat(
      "warning: the trace %s is %.2f GiB: chrome://tracing opens JSON traces up to 256 MB and "
      "ui.perfetto.dev runs out of browser memory near 1 GB; keep a part of the step with "
      "--trace-steps A..B (micro-batches) and --trace-stages A..B, or open it with Perfetto's "
      "trace_processor --httpd",
      path, static_cast<double>(size.count()) / 1073741824.0);
}

std::string TimelineCsv(const replay::ReplayResult& r) {
  std::string out = "time_s,gpu,event,category,delta_bytes,allocated_bytes,reserved_bytes\n";
  const replay::StepRecords records(r);
  for (int32_t rank = 0; rank < r.simulated_ranks; ++rank) {
    for (int64_t i = 0, n = records.changes(rank); i < n; ++i) {
      const replay::StepRecords::Change change = records.change(rank, i);
      const memory::MemoryChange& c = change.change;
      absl::StrAppendFormat(
          &out, "%.12f,%d,%s,%s,%d,%d,%d\n", c.time.seconds(), r.GpuOf(rank),
          CsvCell(change.op ? OpLabel(*change.op, r.program.layers) : "persistent"),
          Name(c.category), c.delta.count(), c.allocated.count(), c.reserved.count());
    }
  }
  return out;
}

std::string DumpOps(const OpProgram& p) {
  std::string out =
      "# id stream label | flops bytes_moved [waves W] [1/K X] | collective tensor group buckets "
      "| deps | memory\n";
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    const char* streams[kNumStreams] = {"compute", "comm", "tp_comm", "p2p", "pcie", "host"};
    absl::StrAppendFormat(&out, "%d %s %s", i, streams[static_cast<int>(op.stream)],
                          OpLabel(op, p.layers));
    if (p.stages > 1) absl::StrAppendFormat(&out, " stage%d", op.stage);
    if (op.kind == OpKind::kCollective) {
      const CollectiveSpec& c = p.CollectiveOf(op);
      absl::StrAppendFormat(&out, " | %s %d B over %d GPUs (%d nodes) in %d buckets", Name(c.kind),
                            c.tensor.count(), c.group.size, c.group.nodes, c.buckets);
    } else {
      absl::StrAppendFormat(&out, " | %.6g FLOP %d B", op.flops.count(), op.bytes_moved.count());
      // What stretches a kernel's math beyond its FLOPs (sim/cost/compute_cost.h): a GEMM's
      // tiles in whole waves over the SMs, and the fixed work per tile or query block.
      if (op.waves > 1) absl::StrAppendFormat(&out, " waves %.6g", op.waves);
      if (op.inv_k > 0) absl::StrAppendFormat(&out, " 1/K %.6g", op.inv_k);
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
