#include "sim/report/resolved.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/report/table.h"
#include "sim/spec/enum_names.h"
#include "sim/workload/params.h"
#include "sim/workload/policy/framework_traits.h"
#include "sim/workload/policy/policy.h"

namespace sim::report {

namespace {

std::string RankOrder(const std::array<ParallelDim, 4>& order) {
  std::string out;
  for (ParallelDim d : order) absl::StrAppend(&out, out.empty() ? "" : "-", Name(d));
  return absl::StrCat("rank order ", out, " (innermost first)");
}

}  // namespace

std::string ResolvedScenarioText(const Scenario& s) {
  const auto params = CountParameters(s.model);
  std::string out = absl::StrCat("Scenario ", s.name, " (", s.file, ")\n");
  absl::StrAppendFormat(
      &out,
      "  model      %s: %d layers, hidden %d, %d heads%s (%d KV), FFN %d, vocab %d, %s params\n",
      s.model.name, s.model.layers, s.model.hidden, s.model.heads,
      s.model.head_dim_override > 0 ? absl::StrCat(" of ", s.model.head_dim_override) : "",
      s.model.kv_heads, s.model.ffn_hidden, s.model.vocab, FormatCount(params.total));
  if (const auto& moe = s.model.moe) {
    absl::StrAppendFormat(&out,
                          "             mixture of experts: %d experts of FFN %d, top %d, %d "
                          "shared, %s router; %s active params\n",
                          moe->experts, moe->expert_ffn_hidden, moe->top_k, moe->shared_experts,
                          EnumName(moe->router), FormatCount(params.active));
  }
  const int64_t domain_nodes = s.cluster.node.domain_nodes;  // config::FoldNvlinkDomain
  if (!s.cluster.groups.empty()) {
    // A mixed cluster: each node type in rank order, and the pipeline stages on it.
    std::vector<std::string> parts;
    const std::vector<int32_t> stage_group = s.StageGroups();
    for (int32_t g = 0; g < static_cast<int32_t>(s.cluster.groups.size()); ++g) {
      const NodeGroup& n = s.cluster.groups[g];
      std::vector<std::string> stages;
      for (size_t st = 0; st < stage_group.size(); ++st) {
        if (stage_group[st] == g) stages.push_back(absl::StrCat(st));
      }
      parts.push_back(absl::StrFormat("%d x %s (%d x %s, %s HBM each; stages %s)", n.count,
                                      n.node.name, n.node.gpus_per_node, n.gpu.name,
                                      FormatGiB(n.gpu.hbm, 0), absl::StrJoin(stages, ",")));
    }
    absl::StrAppendFormat(&out, "  cluster    mixed: %s = %d GPUs", absl::StrJoin(parts, " + "),
                          s.cluster.gpus());
  } else {
    absl::StrAppendFormat(&out, "  cluster    %d x %s (%d x %s, %s HBM each) = %d GPUs",
                          s.cluster.nodes * domain_nodes, s.cluster.node.name,
                          s.cluster.node.gpus_per_node / domain_nodes, s.cluster.gpu.name,
                          FormatGiB(s.cluster.gpu.hbm, 0), s.cluster.gpus());
  }
  if (domain_nodes > 1) {
    absl::StrAppendFormat(&out, " in %d NVLink domain%s of %d GPUs", s.cluster.nodes,
                          s.cluster.nodes == 1 ? "" : "s", s.cluster.node.gpus_per_node);
  }
  if (const GpuSpec& g = s.cluster.gpu; g.power_limit_watts && g.tdp_watts) {
    absl::StrAppendFormat(&out, ", at %g W of %g W (clocks %.1f %%)", *g.power_limit_watts,
                          *g.tdp_watts, 100 * g.SustainedClock());
  }
  absl::StrAppend(&out, ", NCCL ", Name(s.cluster.nccl), "'s tuner\n");
  absl::StrAppendFormat(&out,
                        "  training   seq_len %d, micro_batch %d, global_batch %d, %s, %s, "
                        "recompute %s, %s attention%s, %s%s kernels%s\n",
                        s.training.seq_len, s.training.micro_batch, s.training.global_batch,
                        Name(s.training.precision), Name(s.training.optimizer),
                        Name(s.training.recompute), Name(s.training.attention),
                        s.training.attention == AttentionKernel::kFlash
                            ? absl::StrCat(" (", Name(s.training.flash_impl), ")")
                            : std::string(),
                        Name(KernelLibraryOf(s)),
                        KernelLibraryOf(s) == KernelLibrary::kTransformerEngine
                            ? absl::StrCat(" ", Name(s.training.te_version))
                            : std::string(),
                        s.cluster.gpu.calibration.FindLibrary(KernelLibraryOf(s)) != nullptr
                            ? " (their own calibration terms)"
                            : "");
  if (!s.training.document_lengths.empty()) {
    absl::StrAppendFormat(&out, "             packed documents of %s tokens (attention / %.3g)\n",
                          absl::StrJoin(s.training.document_lengths, ", "),
                          s.training.AttentionPacking());
  } else if (s.training.packing > 1) {
    absl::StrAppendFormat(&out, "             %d packed documents of equal length per sequence\n",
                          s.training.packing);
  }
  const ParallelSpec& p = s.parallel;
  const std::unique_ptr<DataParallelPolicy> policy = MakeDataParallelPolicy(s);
  const DataParallelPolicy::GatherRule rule = policy->Gathers();
  const DeepSpeedSpec& ds = p.deepspeed;
  const std::string prefetch =
      rule.elements
          ? absl::StrFormat("prefetch %s / live %s / reuse %s elements",
                            FormatCount(rule.elements->prefetch_bucket),
                            FormatCount(rule.elements->max_live),
                            FormatCount(rule.elements->max_reuse))
          : absl::StrFormat("prefetch %d layer%s", rule.layers, rule.layers == 1 ? "" : "s");
  const std::string bucket =
      TraitsOf(p.framework).BucketInElements()
          ? absl::StrFormat("bucket %s elements%s",
                            FormatCount(p.bucket ? p.bucket->count() / 2 : ds.reduce_bucket_size),
                            ds.contiguous_gradients ? " (contiguous)" : "")
          : absl::StrCat("bucket ", p.bucket ? FormatGB(p.bucket->count(), 3)
                                             : std::string("framework default"));
  absl::StrAppendFormat(&out,
                        "  parallel   %s ZeRO-%d, dp %d, tp %d%s, cp %d%s, pp %d (%s, %d chunk%s), "
                        "%d micro-batch%s per step, %s, %s\n",
                        Name(p.framework), p.zero, s.dp(), p.tp, p.sequence_parallel ? " + sp" : "",
                        p.cp, p.ep > 1 ? absl::StrCat(", ep ", p.ep) : "", p.pp,
                        Name(p.pp_schedule), p.pp_chunks, p.pp_chunks == 1 ? "" : "s",
                        s.micro_batches(), s.micro_batches() == 1 ? "" : "es", prefetch, bucket);
  if (!p.pp_layers.empty()) {
    absl::StrAppendFormat(&out, "  stages     layers %s%s\n", absl::StrJoin(p.pp_layers, ","),
                          p.pp_layers_balanced
                              ? " (balanced over the node types' GEMM rates; pp_layers overrides)"
                              : "");
  }
  absl::StrAppendFormat(&out, "  placement  %s%s%s\n", RankOrder(p.rank_order),
                        p.tp_comm_overlap ? ", TP collectives overlapped" : "",
                        policy->OverlapGradReduce() ? ", gradient reduction overlapped"
                                                    : ", gradient reduction after the backward");
  absl::StrAppendFormat(&out, "  runtime    reserved %s per GPU\n",
                        FormatGiB(s.runtime.reserved, 2));
  return out;
}

}  // namespace sim::report
