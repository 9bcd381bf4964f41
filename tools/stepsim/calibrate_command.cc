// stepsim calibrate CASES.yaml... --gpu GPU --out FILE: fits one GPU type's calibration to
// measured step times (sim/validate/calibrate.h).

#include <filesystem>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sim/base/input_file.h"
#include "sim/config/catalog.h"
#include "sim/explore/runner.h"
#include "sim/report/json_text.h"
#include "sim/spec/enum_names.h"
#include "sim/validate/calibrate.h"
#include "sim/validate/trace_fit.h"
#include "tools/stepsim/cli.h"
#include "tools/stepsim/flags.h"

namespace stepsim_cli {

namespace {

nlohmann::ordered_json FitJson(const sim::validate::FitResult& fit) {
  nlohmann::ordered_json params = nlohmann::ordered_json::object();
  // A library's fit reports the terms in force under that library.
  const sim::GpuCalibration start =
      fit.library ? sim::ForLibrary(fit.start, *fit.library) : fit.start;
  const sim::GpuCalibration fitted =
      fit.library ? sim::ForLibrary(fit.fitted, *fit.library) : fit.fitted;
  for (const sim::validate::CalibrationParam& p : sim::validate::CalibrationParams()) {
    const bool moved = std::find(fit.params.begin(), fit.params.end(), p.name) != fit.params.end();
    params[std::string(p.name)] = {{"start", *sim::validate::ParamValue(start, p.name)},
                                   {"fitted", *sim::validate::ParamValue(fitted, p.name)},
                                   {"low", p.low},
                                   {"high", p.high},
                                   {"moved", moved}};
  }
  return {{"schema_version", 1},
          {"gpu", fit.gpu},
          {"library", fit.library ? nlohmann::ordered_json(std::string(sim::Name(*fit.library)))
                                  : nlohmann::ordered_json(nullptr)},
          {"params", params},
          {"start_mape", fit.start_mape},
          {"mape", fit.mape},
          {"cases", fit.cases},
          {"sources", fit.sources},
          {"evaluations", fit.evaluations}};
}

// --library NAME: the kernel library whose terms are fitted (none: the GPU's own).
absl::StatusOr<std::optional<sim::KernelLibrary>> LibraryFlag(const FlagSet& flags) {
  const auto l = flags.Get("library");
  if (!l) return std::nullopt;
  const auto library = sim::EnumFromName<sim::KernelLibrary>(*l);
  if (!library) {
    return absl::InvalidArgumentError(
        absl::StrCat("--library expects transformer_engine or pytorch, got '", *l, "'"));
  }
  return library;
}

// stepsim calibrate SCENARIO --trace TRACE.json --out FILE: the compute terms fitted to one
// profiled step (sim/validate/trace_fit.h).
int CalibrateToTrace(const FlagSet& flags, const std::vector<std::string>& args) {
  if (flags.positional().size() != 1) {
    return Fail("calibrate", absl::InvalidArgumentError(
                                 "--trace fits to one profiled step: expected one SCENARIO"));
  }
  const std::string trace_path = *flags.Get("trace");
  auto text = sim::ReadInputFile(trace_path);
  if (!text.ok()) return Fail("calibrate", text.status());
  auto trace = sim::validate::ReadKernelTrace(*text, trace_path);
  if (!trace.ok()) return Fail("calibrate", trace.status());
  std::vector<sim::config::Override> overrides;
  for (const std::string& kv : flags.GetAll("set")) {
    auto o = sim::config::ParseOverride(kv);
    if (!o.ok()) return Fail("calibrate", o.status());
    overrides.push_back(*o);
  }
  auto root = DataRootFor(flags);
  if (!root.ok()) return Fail("calibrate", root.status());
  auto scenario =
      sim::config::LoadScenario(*root, ResolveScenarioPath(flags.positional()[0]), overrides);
  if (!scenario.ok()) return Fail("calibrate", scenario.status());
  if (auto g = flags.Get("gpu");
      g && absl::AsciiStrToLower(*g) != absl::AsciiStrToLower(scenario->cluster.gpu.name)) {
    return Fail("calibrate", absl::InvalidArgumentError(absl::StrCat(
                                 "--gpu ", *g, ": the scenario runs on ",
                                 scenario->cluster.gpu.name, ", the GPU the trace's terms fit")));
  }
  sim::validate::TraceFitOptions options;
  options.trace_name = std::filesystem::path(trace_path).filename().string();
  auto library = LibraryFlag(flags);
  if (!library.ok()) return Fail("calibrate", library.status());
  options.library = *library;
  if (auto st = flags.Get("stage");
      st && (!absl::SimpleAtoi(*st, &options.stage) || options.stage < 0)) {
    return Fail("calibrate", absl::InvalidArgumentError("--stage expects a stage number from 0"));
  }
  auto fit = sim::validate::FitToTrace(*scenario, *trace, options);
  if (!fit.ok()) return Fail("calibrate", fit.status());
  const std::string command = absl::StrCat("stepsim calibrate ", absl::StrJoin(args, " "));
  OutputFiles files;
  const std::string out = *flags.Get("out");
  if (absl::Status st = files.Stage(out, sim::validate::CalibrationFileText(fit->fit, command));
      !st.ok()) {
    return Fail("calibrate", st);
  }
  if (auto p = flags.Get("json")) {
    nlohmann::ordered_json j = FitJson(fit->fit);
    j["basis"] = fit->fit.basis;
    j["trace_steps"] = trace->steps;
    j["trace_kernels"] = trace->kernels;
    if (absl::Status st = files.Stage(*p, sim::report::JsonText(j) + "\n"); !st.ok()) {
      return Fail("calibrate", st);
    }
  }
  if (absl::Status st = files.Commit(); !st.ok()) return Fail("calibrate", st);
  if (files.writes_stdout()) return kExitOk;
  std::cout << trace->kernels << " kernels over " << trace->steps << " step"
            << (trace->steps == 1 ? "" : "s") << " (" << trace->communication_kernels
            << " NCCL kernels left out)\n"
            << sim::validate::TraceFitText(*fit) << "Wrote " << out
            << "; use it with --calibration " << out << "\n";
  return kExitOk;
}

}  // namespace

int CalibrateCommand(const std::vector<std::string>& args) {
  FlagSet flags(
      "stepsim calibrate CASES.yaml... --gpu GPU --out FILE [flags]\n"
      "       stepsim calibrate SCENARIO --trace TRACE.json --out FILE [flags]",
      "Fits the calibration of one GPU type (the compute efficiencies of topologies/gpus.yaml)\n"
      "to the step times the cases measured: a bounded, deterministic coordinate descent on the\n"
      "mean absolute step-time error, one error per case (its step_s, or the step time its\n"
      "tokens/s, MFU or HFU imply). Prints each parameter before and after with its bounds and\n"
      "the MAPE, and writes FILE, which --calibration FILE reads back in run, sweep, compare,\n"
      "plan and validate. The search moves gemm_efficiency, attention_efficiency,\n"
      "roofline_blend, overlap_slowdown and attention_kv_overhead; gemm_k_overhead rests on\n"
      "the GEMM kernel's tile, and memory_efficiency, launch_overhead, dispatch_overhead and\n"
      "comm_efficiency on microbenchmarks: they keep the catalog's values unless --params\n"
      "names them. With --library NAME it fits that kernel library's terms instead\n"
      "(gemm_efficiency, fp8_gemm_efficiency, attention_efficiency; attention_kv_overhead on\n"
      "request), from the GPU's own values, to cases that all run the library, and FILE holds\n"
      "them under libraries: NAME:.\n"
      "With --trace, fits to one profiled step instead: a PyTorch profiler trace of one rank\n"
      "(Kineto's JSON, torch.profiler export_chrome_trace; only data is read) running SCENARIO.\n"
      "Its kernels are sorted by name into GEMMs, attention and memory-bound kernels (NCCL's\n"
      "left out), averaged over its ProfilerStep#N steps, and each class's time fixes one term\n"
      "against the replay's kernel time for that class: gemm_efficiency (fp8_gemm_efficiency\n"
      "in fp8), attention_efficiency, and memory_efficiency (not with --library).",
      {{"gpu", "GPU", "the GPU type (catalog name) whose calibration is fitted; required"},
       {"out", "FILE", "write the calibration file here; required"},
       {"fix", "NAME=VALUE", "pin a parameter instead of fitting it", true},
       {"params", "NAMES", "comma-separated parameters to fit (default: the compute terms)"},
       {"from-defaults", "", "start from the first estimates, not the catalog's calibration"},
       {"library", "NAME",
        "fit this kernel library's terms (transformer_engine, pytorch) instead of the GPU's"},
       {"skip-other-gpus", "", "leave out the cases that run on other GPUs instead of failing"},
       {"jobs", "N", "worker threads (default: all cores); the fit is the same for any N"},
       {"json", "PATH", "write the fit (parameters, MAPE, cases) as JSON (- = standard output)"},
       {"trace", "TRACE.json", "fit to this profiled step of SCENARIO (see above)"},
       {"stage", "N", "with --trace: the traced GPU's pipeline stage (default 0)"},
       {"set", "KEY=VALUE", "with --trace: override a scenario key", true},
       CalibrationFlag()});
  if (absl::Status st = flags.Parse(args); !st.ok()) return Fail("calibrate", st);
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return kExitOk;
  }
  if (flags.Has("trace")) {
    if (!flags.Get("out")) {
      return Fail("calibrate", absl::InvalidArgumentError("expected --out FILE"));
    }
    return CalibrateToTrace(flags, args);
  }
  if (flags.Has("stage") || !flags.GetAll("set").empty()) {
    return Fail("calibrate",
                absl::InvalidArgumentError("--stage and --set belong to --trace fits"));
  }
  const auto gpu = flags.Get("gpu");
  const auto out = flags.Get("out");
  if (flags.positional().empty() || !gpu || !out) {
    return Fail("calibrate",
                absl::InvalidArgumentError("expected CASES.yaml files, --gpu GPU and --out FILE"));
  }
  auto root = DataRootFor(flags);
  if (!root.ok()) return Fail("calibrate", root.status());
  auto catalogs = sim::config::LoadCatalogs(*root);
  if (!catalogs.ok()) return Fail("calibrate", catalogs.status());
  auto spec = sim::config::FindGpu(catalogs->gpus, *gpu);
  if (!spec.ok()) return Fail("calibrate", spec.status());

  sim::validate::FitOptions options;
  options.gpu = spec->name;
  options.start_from_defaults = flags.Has("from-defaults");
  auto library = LibraryFlag(flags);
  if (!library.ok()) return Fail("calibrate", library.status());
  options.library = *library;
  options.jobs = sim::explore::DefaultJobs();
  if (auto j = flags.Get("jobs"); j && (!absl::SimpleAtoi(*j, &options.jobs) || options.jobs < 1)) {
    return Fail("calibrate", absl::InvalidArgumentError("--jobs expects a positive integer"));
  }
  if (auto p = flags.Get("params")) options.params = absl::StrSplit(*p, ',', absl::SkipEmpty());
  for (const std::string& kv : flags.GetAll("fix")) {
    const std::pair<std::string, std::string> nv = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    double v = 0;
    if (nv.first.empty() || !absl::SimpleAtod(nv.second, &v)) {
      return Fail("calibrate",
                  absl::InvalidArgumentError(absl::StrCat(
                      "--fix expects NAME=VALUE (comm_efficiency=0.81), got '", kv, "'")));
    }
    options.fixed.push_back({nv.first, v});
  }
  std::vector<sim::ValidationCase> cases;
  int others = 0;
  for (const std::string& f : flags.positional()) {
    auto c = sim::config::LoadCases(*root, f);
    if (!c.ok()) return Fail("calibrate", c.status());
    for (sim::ValidationCase& v : *c) {
      if (flags.Has("skip-other-gpus") && absl::AsciiStrToLower(v.scenario.cluster.gpu.name) !=
                                              absl::AsciiStrToLower(options.gpu)) {
        ++others;
        continue;
      }
      cases.push_back(std::move(v));
    }
  }
  auto fit = sim::validate::Fit(cases, options);
  if (!fit.ok()) return Fail("calibrate", fit.status());
  const std::string command = absl::StrCat("stepsim calibrate ", absl::StrJoin(args, " "));
  OutputFiles files;
  if (absl::Status st = files.Stage(*out, sim::validate::CalibrationFileText(*fit, command));
      !st.ok()) {
    return Fail("calibrate", st);
  }
  if (auto p = flags.Get("json")) {
    if (absl::Status st = files.Stage(*p, sim::report::JsonText(FitJson(*fit)) + "\n"); !st.ok()) {
      return Fail("calibrate", st);
    }
  }
  if (absl::Status st = files.Commit(); !st.ok()) return Fail("calibrate", st);
  if (files.writes_stdout()) return kExitOk;
  std::cout << sim::validate::FitText(*fit);
  if (others > 0) std::cout << others << " cases on other GPUs left out (--skip-other-gpus).\n";
  std::cout << "Wrote " << *out << "; use it with --calibration " << *out << "\n";
  return kExitOk;
}

}  // namespace stepsim_cli
