// stepsim ledger [MODEL] [--params COUNT] [--gpus N] ...: the static ledger (docs/model.md "Model
// states", docs/model.md "Activations").

#include <algorithm>
#include <cmath>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sim/base/quantity.h"
#include "sim/base/suggest.h"
#include "sim/config/catalog.h"
#include "sim/report/json_text.h"
#include "sim/report/ledger_report.h"
#include "sim/spec/enum_names.h"
#include "sim/workload/params.h"
#include "sim/workload/static_ledger.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"

namespace stepsim_cli {

namespace {

absl::StatusOr<int64_t> PositiveInt(const FlagSet& f, const std::string& name, int64_t fallback) {
  auto v = f.Get(name);
  if (!v) return fallback;
  int64_t n = 0;
  if (!absl::SimpleAtoi(*v, &n) || n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " expects a positive integer, got '", *v, "'"));
  }
  return n;
}

// The value of flag --NAME, named in its enum's table (sim/spec/enum_names.h).
template <typename Enum>
absl::StatusOr<Enum> Choice(const FlagSet& f, const std::string& name, Enum fallback) {
  auto v = f.Get(name);
  if (!v) return fallback;
  if (auto e = sim::EnumFromName<Enum>(*v)) return *e;
  const std::vector<std::string> names = sim::EnumNameList<Enum>();
  return absl::InvalidArgumentError(absl::StrCat("--", name, " '", *v, "' is not one of ",
                                                 absl::StrJoin(names, ", "),
                                                 sim::DidYouMean(*v, names)));
}

// --recompute-modules: RecomputeModule names joined by commas.
absl::StatusOr<sim::RecomputeModules> Modules(const std::string& list) {
  const std::vector<std::string> names = sim::EnumNameList<sim::RecomputeModule>();
  sim::RecomputeModules modules = 0;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    const std::string name(absl::StripAsciiWhitespace(part));
    const auto m = sim::EnumFromName<sim::RecomputeModule>(name);
    if (!m) {
      return absl::InvalidArgumentError(absl::StrCat("--recompute-modules: '", name,
                                                     "' is not one of ", absl::StrJoin(names, ", "),
                                                     sim::DidYouMean(name, names)));
    }
    modules |= sim::ModuleBit(*m);
  }
  if (modules == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--recompute-modules expects one or more of ", absl::StrJoin(names, ", ")));
  }
  return modules;
}

FlagSet LedgerFlags() {
  return FlagSet(
      "stepsim ledger [MODEL] [--params COUNT] [--gpus N] [flags]",
      "Prints the static ledger (docs/model.md, 'Model states'): bytes per parameter by kind\n"
      "and the per-GPU model states under ZeRO 0-3 at N data-parallel GPUs; with a MODEL (a\n"
      "name in models/ or a path) and --seq-len, also the activation bytes one layer keeps for\n"
      "backward under none/selective/full recompute, derived op by op (docs/model.md,\n"
      "'Activations').",
      {{"params", "COUNT", "parameter count (70e9, 7B, 175e9); default: derived from MODEL"},
       {"gpus", "N", "data-parallel (sharding) degree N; default 8"},
       {"framework", "F", "deepspeed (default, the textbook rows) | fsdp | megatron"},
       {"optimizer", "O", "adamw (default) | sgd | adam8bit"},
       {"precision", "P", "bf16 (default) | fp16 | fp8"},
       {"gpu", "NAME", "mark which stages fit this GPU's HBM (e.g. H100-SXM5-80GB)"},
       {"seq-len", "S", "sequence length; enables the activation rows (needs MODEL)"},
       {"micro-batch", "B", "sequences per micro-batch; default 1"},
       {"tp", "T", "tensor-parallel degree for the activation rows; default 1"},
       {"sp", "", "sequence parallelism (with --tp > 1)"},
       {"attention", "K", "eager (default here: Korthikanti's accounting) | flash"},
       {"recompute-modules", "LIST",
        "what the selective row re-runs, names joined by commas (Megatron-Core "
        "--recompute-modules): core_attn (default), layernorm, mlp, moe, moe_act, "
        "shared_experts"},
       {"gpus-per-node", "G", "GPUs per node for DeepSpeed's estimator view; default 8"},
       {"largest-layer", "COUNT",
        "largest module's parameters for DeepSpeed's estimator "
        "(default: derived from MODEL)"},
       {"json", "PATH", "write the JSON report to PATH (- = standard output)"}});
}

}  // namespace

int LedgerCommand(const std::vector<std::string>& args) {
  FlagSet flags = LedgerFlags();
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("ledger", st);
  if (flags.help_requested()) {
    std::cout << flags.Help() << "\nmodels: "
              << absl::StrJoin(sim::config::CatalogModelNames(sim::config::DataRoot::Default()),
                               ", ")
              << "\n";
    return kExitOk;
  }
  if (flags.positional().size() > 1) {
    return Fail("ledger", absl::InvalidArgumentError("at most one MODEL argument"));
  }
  const auto root = sim::config::DataRoot::Default();
  sim::report::LedgerInput in;
  if (!flags.positional().empty()) {
    auto m = sim::config::LoadModel(root, flags.positional()[0]);
    if (!m.ok()) return Fail("ledger", m.status());
    in.model = *m;
    const auto count = sim::CountParameters(*m);
    in.params = count.total;
    if (m->moe) in.active_params = count.active;
    in.largest_layer_params = sim::LargestModuleParams(*m);
  }
  if (auto p = flags.Get("params")) {
    auto n = sim::ParseCount(*p);
    if (!n.ok())
      return Fail("ledger",
                  absl::InvalidArgumentError(absl::StrCat("--params: ", n.status().message())));
    in.params = static_cast<int64_t>(std::llround(*n));
  }
  if (in.params <= 0) {
    return Fail("ledger", absl::InvalidArgumentError("give a MODEL or --params COUNT"));
  }
  auto gpus = PositiveInt(flags, "gpus", 8);
  auto gpn = PositiveInt(flags, "gpus-per-node", 8);
  if (!gpn.ok()) return Fail("ledger", gpn.status());
  in.gpus_per_node = *gpn;
  if (auto ll = flags.Get("largest-layer")) {
    auto n = sim::ParseCount(*ll);
    if (!n.ok()) return Fail("ledger", n.status());
    in.largest_layer_params = static_cast<int64_t>(*n);
  }
  auto fw = Choice<sim::Framework>(flags, "framework", sim::Framework::kDeepSpeed);
  auto opt = Choice<sim::OptimizerKind>(flags, "optimizer", sim::OptimizerKind::kAdamW);
  auto prec = Choice<sim::Precision>(flags, "precision", sim::Precision::kBf16);
  auto attn = Choice<sim::AttentionKernel>(flags, "attention", sim::AttentionKernel::kEager);
  auto seq = PositiveInt(flags, "seq-len", 0);
  auto mb = PositiveInt(flags, "micro-batch", 1);
  auto tp = PositiveInt(flags, "tp", 1);
  for (const absl::Status& s : {gpus.status(), fw.status(), opt.status(), prec.status(),
                                attn.status(), seq.status(), mb.status(), tp.status()}) {
    if (!s.ok()) return Fail("ledger", s);
  }
  in.gpus = *gpus;
  in.framework = *fw;
  in.optimizer = *opt;
  in.precision = *prec;
  if (auto g = flags.Get("gpu")) {
    auto catalog = sim::config::LoadGpuCatalog(root.GpuCatalogFile());
    if (!catalog.ok()) return Fail("ledger", catalog.status());
    auto gpu = sim::config::FindGpu(*catalog, *g);
    if (!gpu.ok()) return Fail("ledger", gpu.status());
    in.capacity = gpu->hbm;
  }
  if (*seq > 0) {
    if (!in.model) {
      return Fail("ledger", absl::InvalidArgumentError("--seq-len needs a MODEL"));
    }
    const bool sp = flags.Has("sp");
    if (sp && *tp == 1) {
      return Fail("ledger", absl::InvalidArgumentError("--sp needs --tp > 1"));
    }
    if (in.model->heads % *tp != 0 || in.model->kv_heads % *tp != 0) {
      return Fail("ledger", absl::InvalidArgumentError(
                                absl::StrCat("--tp ", *tp, " must divide heads ", in.model->heads,
                                             " and kv_heads ", in.model->kv_heads)));
    }
    in.activations = sim::ActivationShape{*seq, *mb, *tp, sp, *attn};
  } else if (flags.Has("micro-batch") || flags.Has("tp") || flags.Has("sp") ||
             flags.Has("recompute-modules")) {
    return Fail("ledger", absl::InvalidArgumentError(
                              "--micro-batch, --tp, --sp and --recompute-modules shape the "
                              "activation rows: add --seq-len"));
  }
  if (auto list = flags.Get("recompute-modules")) {
    auto modules = Modules(*list);
    if (!modules.ok()) return Fail("ledger", modules.status());
    in.recompute_modules = *modules;
  }
  if (auto path = flags.Get("json")) {
    if (absl::Status w =
            WriteOutput(*path, sim::report::JsonText(sim::report::LedgerJson(in)) + "\n");
        !w.ok()) {
      return Fail("ledger", w);
    }
    if (*path == "-") return kExitOk;
  }
  std::cout << sim::report::LedgerText(in);
  return kExitOk;
}

}  // namespace stepsim_cli
