#include "sim/report/ledger_report.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/report/table.h"
#include "sim/workload/params.h"
#include "sim/workload/policy/framework_traits.h"
#include "sim/workload/static_ledger.h"

namespace sim::report {

namespace {

std::string StageFormula(const BytesPerParam& b, Framework fw, int stage) {
  // Bytes per parameter that stay whole and that are divided by N at this stage.
  int64_t whole = 0, sharded = 0;
  for (const StateKind* k :
       {&b.weights, &b.gradients, &b.master_weights, &b.optimizer_m, &b.optimizer_v}) {
    if (k == &b.weights && !TraitsOf(fw).KeepsWeightsAt(stage)) continue;
    const bool s = k->sharded_from_stage && stage >= *k->sharded_from_stage;
    (s ? sharded : whole) += k->bytes_per_param;
  }
  if (sharded == 0) return absl::StrCat(whole);
  if (whole == 0) return absl::StrCat(sharded, "/N");
  return absl::StrCat(whole, " + ", sharded, "/N");
}

std::string KindLabel(absl::string_view kind, Framework fw, OptimizerKind opt, Precision p) {
  if (kind == "weights" || kind == "gradients" || kind == "master_weights") {
    return TraitsOf(fw).StateLabel(kind, p);
  }
  const std::string state(TraitsOf(fw).MomentDtype());
  if (opt == OptimizerKind::kSgd) {
    return kind == "optimizer_m" ? absl::StrCat("momentum (", state, ")") : "-";
  }
  const bool eight = opt == OptimizerKind::kAdam8bit || opt == OptimizerKind::kAdam8bitPaged;
  const std::string bits = eight ? "8-bit" : state;
  return kind == "optimizer_m" ? absl::StrCat("Adam m (", bits, ")")
                               : absl::StrCat("Adam v (", bits, ")");
}

struct ActivationRow {
  absl::string_view policy;
  Recompute recompute;
  Bytes per_layer;
};

// The selective row's modules by name, in RecomputeModule order.
std::vector<std::string> ModuleNames(RecomputeModules modules) {
  std::vector<std::string> names;
  for (int i = 0; i < kNumRecomputeModules; ++i) {
    const auto m = static_cast<RecomputeModule>(i);
    if (modules & ModuleBit(m)) names.emplace_back(Name(m));
  }
  return names;
}

std::vector<ActivationRow> ActivationRows(const LedgerInput& in) {
  std::vector<ActivationRow> rows;
  if (!in.model || !in.activations) return rows;
  const auto ops = LayerForwardOps(*in.model, *in.activations);
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull, Recompute::kOp}) {
    rows.push_back({Name(r), r, SavedActivationBytes(ops, r, in.recompute_modules)});
  }
  return rows;
}

struct EstimatorRow {
  std::string name;
  DeepSpeedEstimatorInput input;
};

// DeepSpeed's estimator for the same P and N under its offload options (static_ledger.h).
std::vector<EstimatorRow> EstimatorRows(const LedgerInput& in) {
  const int64_t gpn = std::min(in.gpus, in.gpus_per_node);
  const int64_t nodes = std::max<int64_t>(1, in.gpus / gpn);
  auto make = [&](int stage, bool opt, bool param) {
    return DeepSpeedEstimatorInput{
        stage, in.params, in.largest_layer_params, gpn, nodes, opt, param, true, 1.5};
  };
  return {{"zero2", make(2, false, false)},
          {"zero2_offload_optimizer", make(2, true, false)},
          {"zero3", make(3, false, false)},
          {"zero3_offload_optimizer", make(3, true, false)},
          {"zero3_offload_all", make(3, true, true)}};
}

}  // namespace

nlohmann::ordered_json LedgerJson(const LedgerInput& in) {
  const BytesPerParam b = StateBytesPerParam(in.framework, in.optimizer, in.precision);
  nlohmann::ordered_json j;
  j["schema_version"] = 1;
  if (in.model) j["model"] = in.model->name;
  j["params"] = in.params;
  if (in.active_params > 0) j["active_params"] = in.active_params;
  j["gpus"] = in.gpus;
  j["framework"] = Name(in.framework);
  j["optimizer"] = Name(in.optimizer);
  j["precision"] = Name(in.precision);
  j["bytes_per_param"] = {{"weights", b.weights.bytes_per_param},
                          {"gradients", b.gradients.bytes_per_param},
                          {"master_weights", b.master_weights.bytes_per_param},
                          {"optimizer_m", b.optimizer_m.bytes_per_param},
                          {"optimizer_v", b.optimizer_v.bytes_per_param},
                          {"total", b.total()}};
  nlohmann::ordered_json per_gpu;
  for (int stage = 0; stage <= 3; ++stage) {
    auto v = PerGpuStateBytes(b, in.framework, stage, in.params, in.gpus);
    per_gpu[absl::StrCat("zero", stage)] = v ? nlohmann::ordered_json(v->count()) : nullptr;
  }
  j["per_gpu_bytes"] = per_gpu;
  nlohmann::ordered_json est;
  for (const auto& row : EstimatorRows(in)) {
    const DeepSpeedEstimate e = EstimateDeepSpeed(row.input);
    est[row.name] = {{"gpu_bytes", e.gpu.count()}, {"cpu_bytes", e.cpu.count()}};
  }
  est["largest_layer_params"] = in.largest_layer_params;
  j["deepspeed_estimator"] = est;
  if (auto rows = ActivationRows(in); !rows.empty()) {
    nlohmann::ordered_json act;
    for (const auto& r : rows) act[std::string(r.policy)] = r.per_layer.count();
    j["activation_bytes_per_layer"] = act;
    const ActivationShape& s = *in.activations;
    j["activation_shape"] = {{"seq_len", s.seq_len},
                             {"micro_batch", s.micro_batch},
                             {"tp", s.tp},
                             {"sequence_parallel", s.sequence_parallel},
                             {"attention", Name(s.attention)},
                             {"recompute_modules", ModuleNames(in.recompute_modules)},
                             {"layers", in.model->layers}};
  }
  return j;
}

std::string LedgerText(const LedgerInput& in) {
  const BytesPerParam b = StateBytesPerParam(in.framework, in.optimizer, in.precision);
  std::string out;
  absl::StrAppend(&out, "Static ledger", in.model ? absl::StrCat(" of ", in.model->name) : "", ": ",
                  FormatCount(static_cast<double>(in.params)), " parameters (", in.params, ")",
                  in.active_params > 0
                      ? absl::StrCat(", ", FormatCount(static_cast<double>(in.active_params)),
                                     " active per token (mixture of experts)")
                      : std::string(),
                  ", framework ", Name(in.framework), ", ", Name(in.optimizer), ", ",
                  Name(in.precision), "\n\nBytes per parameter\n");
  Table kinds({"state", "B/param", "sharded from"});
  for (const StateKind* k :
       {&b.weights, &b.gradients, &b.master_weights, &b.optimizer_m, &b.optimizer_v}) {
    if (k->bytes_per_param == 0) continue;
    kinds.AddRow({KindLabel(k->name, in.framework, in.optimizer, in.precision),
                  absl::StrCat(k->bytes_per_param),
                  k->sharded_from_stage ? absl::StrCat("ZeRO-", *k->sharded_from_stage) : "never"});
  }
  kinds.AddRow({"total", absl::StrCat(b.total()), ""});
  absl::StrAppend(&out, kinds.Render(), "\nPer-GPU model states at N = ", in.gpus,
                  " data-parallel GPUs\n");
  std::vector<std::string> header = {"stage", "B/param", "per GPU", "per GPU"};
  if (in.capacity) header.push_back(absl::StrCat("fits ", FormatGiB(in.capacity->count(), 0)));
  Table stages(header);
  for (int stage = 0; stage <= 3; ++stage) {
    auto split = PerGpuStateSplit(b, in.framework, stage, in.params, in.gpus);
    if (!split) {
      stages.AddRow({absl::StrCat("ZeRO-", stage), "n/a", "-", "-"});
      continue;
    }
    const double bytes = static_cast<double>(split->total().count());
    std::vector<std::string> row = {absl::StrCat("ZeRO-", stage),
                                    StageFormula(b, in.framework, stage), FormatGB(bytes),
                                    FormatGiB(bytes)};
    if (in.capacity) row.push_back(split->total() <= *in.capacity ? "yes" : "no");
    stages.AddRow(row);
  }
  absl::StrAppend(&out, stages.Render());
  // The largest layer sizes ZeRO-3's gathered working set in DeepSpeed's formula; with --params
  // alone nothing says what it is.
  const std::string largest =
      in.largest_layer_params > 0
          ? absl::StrCat("largest layer ",
                         FormatCount(static_cast<double>(in.largest_layer_params)), " params")
          : std::string("largest layer unknown, 0 assumed: pass --largest-layer or a model");
  absl::StrAppend(&out,
                  "\nDeepSpeed's own estimator (model states only, zero_init, 1.5x CPU buffer; ",
                  largest, ")\n");
  if (in.optimizer != OptimizerKind::kAdamW || in.precision == Precision::kFp8) {
    // estimate_zero2/3_model_states_mem_needs hard-code mixed-precision Adam: 16-bit weights
    // and gradients, fp32 master, momentum and variance.
    absl::StrAppend(&out, "  (its formulas assume mixed-precision Adam, whatever --optimizer ",
                    "and --precision say; the rows below follow them)\n");
  }
  Table est({"configuration", "per GPU", "per CPU node"});
  for (const auto& row : EstimatorRows(in)) {
    const DeepSpeedEstimate e = EstimateDeepSpeed(row.input);
    est.AddRow({row.name, FormatGiB(e.gpu), FormatGiB(e.cpu)});
  }
  absl::StrAppend(&out, est.Render());
  if (auto rows = ActivationRows(in); !rows.empty()) {
    const ActivationShape& s = *in.activations;
    absl::StrAppend(&out, "\nActivations kept for backward, per GPU (s = ", s.seq_len,
                    ", b = ", s.micro_batch, ", t = ", s.tp, s.sequence_parallel ? " with SP" : "",
                    ", ", Name(s.attention), " attention; selective re-runs ",
                    absl::StrJoin(ModuleNames(in.recompute_modules), ", "), "), op by op\n");
    Table act(
        {"recompute", "per layer", "per layer", absl::StrCat("all ", in.model->layers, " layers")});
    for (const auto& r : rows) {
      const double bytes = static_cast<double>(r.per_layer.count());
      act.AddRow({std::string(r.policy), FormatGB(bytes, 4), FormatGiB(bytes, 4),
                  FormatGB(bytes * static_cast<double>(in.model->layers))});
    }
    absl::StrAppend(&out, act.Render());
  }
  return out;
}

}  // namespace sim::report
