// stepsim plan MODEL --gpu LIST --tokens T: smallest GPU count that fits and the Pareto set.

#include <iostream>

#include "absl/strings/str_cat.h"
#include "sim/explore/grid.h"
#include "sim/explore/plan.h"
#include "sim/explore/plan_html.h"
#include "sim/explore/plan_options.h"
#include "sim/explore/plan_report.h"
#include "sim/report/json_text.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"
#include "tools/stepsim/progress_line.h"

namespace stepsim_cli {

int PlanCommand(const std::vector<std::string>& args) {
  FlagSet flags(
      "stepsim plan MODEL|SCENARIO [--gpu NAME[,NAME...]] [--tokens 2T] [--set K=V] [--search "
      "K=A,B] [--gpus N] [--days D] [flags]",
      "Plans from a model (catalog name or file) or from a scenario file, whose model, node\n"
      "type, precision and other keys stand, and whose sequence length, batch and GPU apply\n"
      "unless the flags name them.\n"
      "Searches GPU type x GPU count x layout (ZeRO stage, or Megatron TP 1-8 x PP 1-32 x CP\n"
      "1-8, 1F1B or interleaved, uneven first/last stages, with the distributed optimizer and SP)\n"
      "x micro-batch x recompute for configurations that fit, by replay (pruning with the static\n"
      "ledger first, screening long layouts by two short replays). Prints the smallest GPU count "
      "that fits\n"
      "per GPU type with the binding memory term, the Pareto set of time-to-train against\n"
      "cost, and the closest miss of each layout family; every rejection has its reason in\n"
      "--json.\n"
      "Prices are indicative on-demand USD per GPU-hour from topologies/gpus.yaml (2025).",
      {{"gpu", "LIST", "GPU catalog names, comma-separated (default: every GPU with a node type)"},
       {"tokens", "COUNT", "training tokens (2T, 15T, 300B: decimal); default 1T"},
       {"seq-len", "S", "sequence length; default 4096"},
       {"batch-tokens", "COUNT",
        "tokens per optimizer step (default 4Mi = 4194304 = 1024 x 4096). Counts here are "
        "decimal with K, M, G, T (16M = 16,000,000) and binary with Ki, Mi, Gi, Ti"},
       {"max-gpus", "N",
        "largest cluster to consider; default 1024 (with --days: doubling until one meets the "
        "deadline, up to 131072), at most 1048576"},
       {"gpus", "N", "only clusters of exactly N GPUs (a whole number of nodes)"},
       {"set", "KEY=VALUE",
        "a scenario key for every candidate (training.precision=fp8); a key the search varies "
        "(parallel.tp, training.recompute, ...) is fixed to that value",
        true},
       {"search", "KEY=A,B",
        "plan once per value and show them side by side (cluster.node=dgx-h100,dgx-b200 "
        "picks the GPU type); several: their product",
        true},
       {"headroom", "P%|BYTES",
        "memory kept free below each GPU's usable memory (default 5%: about the replay's mean "
        "error on measured reserved peaks)"},
       {"count-gap", "P%",
        "without --days, add counts between the powers of two until neighbouring counts' "
        "fastest days differ by at most P (default 10%; 0: powers of two only)"},
       {"days", "D",
        "deadline in effective days (failures and checkpoints included): pick the smallest "
        "cluster that trains within D"},
       {"budget", "USD",
        "budget: pick the fastest Pareto point within it (with --days: a bound on the choice)"},
       {"power-mw", "MW",
        "power budget at the facility (GPUs, hosts, PUE): layouts drawing more are not chosen"},
       {"price", "GPU=USD", "price per GPU-hour, overriding the catalog", true},
       {"framework", "F", "deepspeed (default) | fsdp | fsdp2 (FSDP2, torchtitan) | torchtune"},
       {"finetune", "METHOD", "full (default) | lora | qlora: adapters on every candidate"},
       {"lora-rank", "R", "adapter rank with --finetune lora/qlora; default 16"},
       {"offload", "WHAT", "optimizer | params | activations, comma-separated: to host memory"},
       {"jobs", "N", "worker threads (default: all cores)"},
       CalibrationFlag(),
       {"shard", "K/N", "run only the K-th of N slices of the search (join with stepsim merge)"},
       {"json", "PATH", "write min_gpus, pareto, fits, rejected, considered/pruned/replayed"},
       {"html", "PATH",
        "write one self-contained page: the Pareto front of days against cost (layouts on "
        "hover), the front and the smallest counts as tables"}});
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("plan", st);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  if (flags.positional().size() != 1) {
    return Fail("plan", absl::InvalidArgumentError("expected exactly one MODEL or SCENARIO"));
  }
  sim::explore::PlanRequest req;
  req.model = flags.positional()[0];
  req.jobs = sim::explore::DefaultJobs();
  const auto data = DataRootFor(flags);
  if (!data.ok()) return Fail("plan", data.status());
  const sim::config::DataRoot& root = *data;
  for (const std::string& name : sim::explore::PlanOptionNames()) {
    for (const std::string& value : flags.GetAll(name)) {
      if (absl::Status st = sim::explore::SetPlanOption(req, name, value, absl::StrCat("--", name));
          !st.ok()) {
        return Fail("plan", st);
      }
    }
  }
  // What the search has done and, once a twentieth of it is, the time it has left (the pruning
  // decides how many replays it takes as it goes: there is no total to count down).
  auto plan = [&] {
    ProgressLine line;
    return sim::explore::Plan(root, req, [&](const sim::explore::PlanProgress& p) {
      line.Update([&](double elapsed_s) { return sim::explore::PlanProgressText(p, elapsed_s); });
    });
  }();
  if (!plan.ok()) return Fail("plan", plan.status());
  OutputFiles files;
  if (auto p = flags.Get("html")) {
    if (absl::Status st = files.Stage(*p, sim::explore::PlanHtml(*plan)); !st.ok()) {
      return Fail("plan", st);
    }
  }
  if (auto p = flags.Get("json")) {
    if (absl::Status st =
            files.Stage(*p, sim::report::JsonText(sim::explore::PlanJson(*plan)) + "\n");
        !st.ok()) {
      return Fail("plan", st);
    }
  }
  if (absl::Status st = files.Commit(); !st.ok()) return Fail("plan", st);
  if (files.writes_stdout()) return kExitOk;
  std::cout << sim::explore::PlanText(*plan);
  return kExitOk;
}

}  // namespace stepsim_cli
