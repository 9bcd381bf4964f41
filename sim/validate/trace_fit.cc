#include "sim/validate/trace_fit.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "sim/base/json_parse.h"
#include "sim/cost/compute_cost.h"
#include "sim/workload/lowering.h"
#include "sim/workload/policy/framework_traits.h"

namespace sim::validate {

namespace {

using Json = nlohmann::json;

constexpr absl::string_view kClassNames[] = {"GEMM", "attention", "memory-bound"};

absl::string_view ClassName(KernelClass k) { return kClassNames[static_cast<int>(k)]; }

constexpr KernelClass kFitted[] = {KernelClass::kMemoryBound, KernelClass::kGemm,
                                   KernelClass::kAttention};

}  // namespace

KernelClass ClassifyKernel(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  auto has = [&](std::initializer_list<absl::string_view> parts) {
    return std::any_of(parts.begin(), parts.end(),
                       [&](absl::string_view p) { return absl::StrContains(n, p); });
  };
  if (has({"nccl"})) return KernelClass::kCommunication;
  // Fused attention before GEMMs: cuDNN's and FlashAttention-3's kernels carry "gemm"-like
  // names of their inner loops ("wgmma", "fprop").
  if (has({"flash", "fmha", "sdpa", "fused_attn", "attention"})) return KernelClass::kAttention;
  // cuBLAS ("..._gemm_...", "sm90_xmma_gemm_..."), cuBLASLt's Hopper/Blackwell kernels
  // ("nvjet_..."), CUTLASS ("cutlass..."), TE's and DeepGEMM's grouped GEMMs.
  if (has({"gemm", "xmma", "nvjet", "cutlass", "s16816", "s1688", "wgmma"})) {
    return KernelClass::kGemm;
  }
  return KernelClass::kMemoryBound;
}

double KernelClassTimes::Of(KernelClass k) const {
  switch (k) {
    case KernelClass::kGemm:
      return gemm;
    case KernelClass::kAttention:
      return attention;
    case KernelClass::kMemoryBound:
      return memory;
    case KernelClass::kCommunication:
      break;
  }
  return 0;
}

absl::StatusOr<TraceKernels> ReadKernelTrace(const std::string& text, const std::string& path) {
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
  };
  auto parsed = ParseJsonFile(text, path);
  if (!parsed.ok()) return parsed.status();
  const Json j = *std::move(parsed);
  const Json* events = &j;
  if (j.is_object()) {
    auto it = j.find("traceEvents");
    if (it == j.end()) return fail("no traceEvents: not a PyTorch profiler (Chrome) trace");
    events = &*it;
  }
  if (!events->is_array()) return fail("traceEvents is not a list");
  TraceKernels out;
  std::set<std::string> steps;
  std::optional<int64_t> device;
  std::set<int64_t> other_devices;
  for (size_t i = 0; i < events->size(); ++i) {
    const Json& e = (*events)[i];
    if (!e.is_object()) continue;
    const auto cat = e.find("cat");
    const auto name = e.find("name");
    if (cat == e.end() || !cat->is_string() || name == e.end() || !name->is_string()) continue;
    const std::string& c = cat->get_ref<const std::string&>();
    const std::string& n = name->get_ref<const std::string&>();
    if ((c == "user_annotation" || c == "gpu_user_annotation") &&
        absl::StartsWith(n, "ProfilerStep#")) {
      steps.insert(n);
      continue;
    }
    if (absl::AsciiStrToLower(c) != "kernel") continue;
    const auto dur = e.find("dur");
    if (dur == e.end() || !dur->is_number() || dur->get<double>() < 0 ||
        !std::isfinite(dur->get<double>())) {
      return fail(absl::StrCat("traceEvents[", i, "] (kernel ", n,
                               "): dur is not a duration in microseconds"));
    }
    if (const auto args = e.find("args"); args != e.end() && args->is_object()) {
      if (const auto d = args->find("device"); d != args->end() && d->is_number_integer()) {
        const int64_t id = d->get<int64_t>();
        if (!device) device = id;
        if (id != *device) other_devices.insert(id);
      }
    }
    const double seconds = dur->get<double>() * 1e-6;
    switch (ClassifyKernel(n)) {
      case KernelClass::kGemm:
        out.per_step.gemm += seconds;
        break;
      case KernelClass::kAttention:
        out.per_step.attention += seconds;
        break;
      case KernelClass::kMemoryBound:
        out.per_step.memory += seconds;
        break;
      case KernelClass::kCommunication:
        ++out.communication_kernels;
        continue;
    }
    ++out.kernels;
  }
  if (!other_devices.empty()) {
    std::vector<std::string> ids = {absl::StrCat(*device)};
    for (int64_t d : other_devices) ids.push_back(absl::StrCat(d));
    return fail(absl::StrCat("kernels of several GPUs (devices ", absl::StrJoin(ids, ", "),
                             "): fit to one rank's trace"));
  }
  if (out.kernels == 0) return fail("no GPU kernels (events with \"cat\": \"kernel\")");
  if (!std::isfinite(out.per_step.gemm + out.per_step.attention + out.per_step.memory)) {
    return fail("the kernels' durations add up beyond any number");
  }
  out.steps = std::max<int>(1, static_cast<int>(steps.size()));
  out.per_step.gemm /= out.steps;
  out.per_step.attention /= out.steps;
  out.per_step.memory /= out.steps;
  return out;
}

KernelClassTimes ReplayKernelTimes(const Scenario& s, const OpProgram& program, int32_t stage) {
  GpuSpec gpu = CalibratedGpu(s);
  gpu.calibration.launch_overhead = Duration::Zero();
  const double memory_rate = gpu.hbm_bandwidth.bytes_per_s() * gpu.calibration.memory_efficiency;
  KernelClassTimes t;
  for (const Op& op : program.ops) {
    if (op.kind != OpKind::kCompute || op.stage != stage) continue;
    Op body = op;
    body.serial_bytes = Bytes();
    const double seconds =
        cost::ComputeDuration(body, gpu, s.training.precision, s.training.flash_impl).seconds();
    switch (op.op_class) {
      case OpClass::kGemm:
        t.gemm += seconds;
        break;
      case OpClass::kAttention:
        t.attention += seconds;
        break;
      case OpClass::kMemoryBound:
        t.memory += seconds;
        break;
      default:
        continue;  // host-side copies and compute
    }
    t.memory += static_cast<double>(op.serial_bytes.count()) / memory_rate;
  }
  return t;
}

absl::StatusOr<TraceFit> FitToTrace(const Scenario& s, const TraceKernels& trace,
                                    const TraceFitOptions& options) {
  if (options.library && KernelLibraryOf(s) != *options.library) {
    return absl::InvalidArgumentError(
        absl::StrCat("the scenario runs ", Name(KernelLibraryOf(s)), " kernels, not ",
                     Name(*options.library), ": a library's terms are fitted to a trace of it"));
  }
  auto program = Lower(s);
  if (!program.ok()) return program.status();
  if (options.stage < 0 || options.stage >= program->stages) {
    return absl::InvalidArgumentError(absl::StrCat("--stage ", options.stage, ": the scenario has ",
                                                   program->stages, " pipeline stages"));
  }
  TraceFit out;
  FitResult& fit = out.fit;
  fit.gpu = s.cluster.gpu.name;
  fit.library = options.library;
  fit.start = s.cluster.gpu.calibration;
  fit.basis = "kernel times of a profiled step";
  fit.sources = {options.trace_name};
  out.trace = trace.per_step;

  Scenario work = s;
  auto times = [&] { return ReplayKernelTimes(work, *program, options.stage); };
  out.before = times();
  auto term_of = [&](KernelClass k) -> std::string {
    switch (k) {
      case KernelClass::kGemm:
        return s.training.precision == Precision::kFp8 ? "fp8_gemm_efficiency" : "gemm_efficiency";
      case KernelClass::kAttention:
        return "attention_efficiency";
      default:
        return "memory_efficiency";
    }
  };
  auto set = [&](const std::string& name, double v) {
    GpuCalibration& c = work.cluster.gpu.calibration;
    if (options.library && IsLibraryParam(name)) {
      SetLibraryParam(LibraryEntry(c, *options.library), name, v);
    } else {
      SetParam(c, name, v);
    }
  };
  auto value = [&](const std::string& name) {
    const GpuCalibration& c = work.cluster.gpu.calibration;
    return *ParamValue(options.library ? ForLibrary(c, *options.library) : c, name);
  };
  for (KernelClass k : kFitted) {
    const std::string name = term_of(k);
    if (options.library && !IsLibraryParam(name)) continue;  // memory_efficiency
    if (trace.per_step.Of(k) <= 0 || out.before.Of(k) <= 0) continue;
    out.terms.push_back({k, name, false});
  }
  if (out.terms.empty()) {
    return absl::InvalidArgumentError(
        "no kernel class is both in the trace and in the replay: nothing to fit");
  }
  auto error_pct = [&](const KernelClassTimes& r) {
    double sum = 0;
    for (const TraceFit::Term& t : out.terms) {
      sum += std::abs(r.Of(t.kernel_class) / trace.per_step.Of(t.kernel_class) - 1) * 100;
    }
    return sum / static_cast<double>(out.terms.size());
  };
  fit.start_mape = error_pct(out.before);
  // Each class's time falls as its term rises: bisect the term for the trace's time, the terms
  // in turn (memory first: GEMMs' and attention's rooflines read it), until none moves.
  for (int round = 0; round < 8; ++round) {
    double moved = 0;
    for (TraceFit::Term& t : out.terms) {
      const CalibrationParam& p =
          *std::find_if(CalibrationParams().begin(), CalibrationParams().end(),
                        [&](const CalibrationParam& q) { return q.name == t.param; });
      const double target = trace.per_step.Of(t.kernel_class), before = value(t.param);
      double lo = p.low, hi = p.high;
      set(t.param, hi);
      const bool too_slow = times().Of(t.kernel_class) > target;  // slower even at the top
      set(t.param, lo);
      const bool too_fast = times().Of(t.kernel_class) < target;  // faster even at the bottom
      t.at_bound = too_slow || too_fast;
      if (too_slow || too_fast) {
        set(t.param, too_slow ? hi : lo);
      } else {
        for (int i = 0; i < 60 && hi - lo > 1e-9; ++i) {
          const double mid = (lo + hi) / 2;
          set(t.param, mid);
          (times().Of(t.kernel_class) > target ? lo : hi) = mid;
        }
        set(t.param, (lo + hi) / 2);
      }
      ++fit.evaluations;
      moved = std::max(moved, std::abs(value(t.param) - before));
    }
    if (moved < 1e-7) break;
  }
  for (const TraceFit::Term& t : out.terms) fit.params.push_back(t.param);
  fit.fitted = work.cluster.gpu.calibration;
  out.after = times();
  fit.mape = error_pct(out.after);
  fit.cases = static_cast<int>(out.terms.size());
  RecordFitBasis(fit);
  return out;
}

std::string TraceFitText(const TraceFit& f) {
  std::string out = absl::StrFormat(
      "%s%s, kernel time per step by class (ms): the trace's, the replay's before and after\n",
      f.fit.gpu, f.fit.library ? absl::StrCat(" under ", Name(*f.fit.library), " kernels") : "");
  absl::StrAppendFormat(&out, "%-13s %10s %10s %10s  %-22s %8s %8s\n", "class", "trace", "before",
                        "after", "term", "before", "after");
  const GpuCalibration start =
      f.fit.library ? ForLibrary(f.fit.start, *f.fit.library) : f.fit.start;
  const GpuCalibration fitted =
      f.fit.library ? ForLibrary(f.fit.fitted, *f.fit.library) : f.fit.fitted;
  for (KernelClass k : {KernelClass::kGemm, KernelClass::kAttention, KernelClass::kMemoryBound}) {
    const auto t = std::find_if(f.terms.begin(), f.terms.end(),
                                [&](const TraceFit::Term& x) { return x.kernel_class == k; });
    absl::StrAppendFormat(&out, "%-13s %10.3f %10.3f %10.3f", ClassName(k), f.trace.Of(k) * 1e3,
                          f.before.Of(k) * 1e3, f.after.Of(k) * 1e3);
    if (t == f.terms.end()) {
      absl::StrAppend(&out, "  (not fitted)\n");
      continue;
    }
    absl::StrAppendFormat(&out, "  %-22s %8.4f %8.4f%s\n", t->param, *ParamValue(start, t->param),
                          *ParamValue(fitted, t->param), t->at_bound ? "  at its bound" : "");
  }
  absl::StrAppendFormat(&out, "kernel-time error over the fitted classes %.2f%% -> %.2f%%\n",
                        f.fit.start_mape, f.fit.mape);
  if (std::any_of(f.terms.begin(), f.terms.end(),
                  [](const TraceFit::Term& t) { return t.at_bound; })) {
    absl::StrAppend(
        &out,
        "A term stopped at its bound: no kernel of this GPU runs that fast (or that slowly).\n"
        "The trace is likely not of this scenario (model, batch, layout) or of this "
        "stage;\ncheck the scenario before using the file.\n");
  }
  return out;
}

}  // namespace sim::validate
