// stepsim run SCENARIO [--set K=V]...: load, validate and (next) replay one training step.

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/config/catalog.h"
#include "sim/report/table.h"
#include "sim/workload/params.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"

namespace stepsim_cli {

namespace {

FlagSet RunFlags() {
  return FlagSet("stepsim run SCENARIO [--set KEY=VALUE]... [flags]",
                 "Loads a scenario (SPEC §4), applies the overrides in order, validates it and\n"
                 "prints the resolved job.",
                 {{"set", "KEY=VALUE", "override any scenario key by its dotted path, e.g. "
                                       "parallel.zero=2",
                   true}});
}

std::string ResolvedJob(const sim::Scenario& s) {
  const auto params = sim::CountParameters(s.model);
  std::string out = absl::StrCat("Scenario ", s.name, " (", s.file, ")\n");
  absl::StrAppendFormat(
      &out,
      "  model      %s: %d layers, hidden %d, %d heads (%d KV), FFN %d, vocab %d, %s params\n",
      s.model.name, s.model.layers, s.model.hidden, s.model.heads, s.model.kv_heads,
      s.model.ffn_hidden, s.model.vocab, sim::report::FormatCount(params.total));
  absl::StrAppendFormat(&out, "  cluster    %d x %s (%d x %s, %s HBM each) = %d GPUs\n",
                        s.cluster.nodes, s.cluster.node.name, s.cluster.node.gpus_per_node,
                        s.cluster.gpu.name, sim::report::FormatGiB(s.cluster.gpu.hbm.count(), 0),
                        s.cluster.gpus());
  absl::StrAppendFormat(&out,
                        "  training   seq_len %d, micro_batch %d, global_batch %d, %s, %s, "
                        "recompute %s, %s attention\n",
                        s.training.seq_len, s.training.micro_batch, s.training.global_batch,
                        sim::Name(s.training.precision), sim::Name(s.training.optimizer),
                        sim::Name(s.training.recompute), sim::Name(s.training.attention));
  absl::StrAppendFormat(&out,
                        "  parallel   %s ZeRO-%d, dp %d, tp %d, pp %d, %d micro-batches per "
                        "step, prefetch %d, bucket %s\n",
                        sim::Name(s.parallel.framework), s.parallel.zero, s.dp(), s.parallel.tp,
                        s.parallel.pp, s.micro_batches(), s.parallel.prefetch,
                        sim::report::FormatGB(s.parallel.bucket.count(), 3));
  absl::StrAppendFormat(&out, "  runtime    reserved %s per GPU\n",
                        sim::report::FormatGiB(s.runtime.reserved.count(), 2));
  return out;
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  FlagSet flags = RunFlags();
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("run", st);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  if (flags.positional().size() != 1) {
    return Fail("run", absl::InvalidArgumentError("expected exactly one SCENARIO file"));
  }
  std::vector<sim::config::Override> overrides;
  for (const std::string& kv : flags.GetAll("set")) {
    auto o = sim::config::ParseOverride(kv);
    if (!o.ok()) return Fail("run", o.status());
    overrides.push_back(*o);
  }
  auto scenario = sim::config::LoadScenario(sim::config::DataRoot::Default(),
                                            flags.positional()[0], overrides);
  if (!scenario.ok()) return Fail("run", scenario.status());
  std::cout << ResolvedJob(*scenario);
  return kExitOk;
}

}  // namespace stepsim_cli
