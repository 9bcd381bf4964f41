#pragma once
// Fitting one GPU type's calibration to measured step times (`stepsim calibrate`), and judging
// a calibration on what it was not fitted to (`stepsim validate --cross-validate`).
//
// The fit minimises the mean absolute step-time error over the cases, one error per case: its
// step_s if measured, else its tokens/s/GPU, MFU or HFU (each inversely proportional to the
// step time) turned into the step-time error they imply. The search is a bounded coordinate
// descent: each free parameter in CalibrationParams() order is moved up, then down, by its step
// (clamped to its bounds), and a move is kept when it lowers the error; after a sweep with no
// move every step halves, until all are below 1/64 of their initial size (a sweep that moved is
// followed by Hooke-Jeeves' pattern move: its displacement once more); then the descent starts
// again from there with the initial steps, until a round finds nothing better (at most four
// rounds). It starts from several points, each descended coarsely first (to 1/8 of the steps):
// the start, and the start with one parameter at the middle of its range; the best is
// descended to the end. No randomness, cases
// replayed in parallel but summed in input order: the same cases give the same fit, byte for
// byte, whatever the thread count.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/spec/hardware.h"
#include "sim/spec/validation_case.h"
#include "sim/validate/validate.h"

namespace sim::validate {

// A parameter of GpuCalibration the fit can move, with its physical bounds (what a kernel can
// reach: no GEMM beats its dense peak, no launch is free) and initial search step.
struct CalibrationParam {
  absl::string_view name;  // as topologies/gpus.yaml spells it; launch_overhead in µs
  double low = 0, high = 0, step = 0;
  // What the search moves by default; the others rest on microbenchmarks (HBM bandwidth,
  // kernel launch latency, nccl-tests) and are pinned to the catalog's values.
  bool fitted_by_default = true;
};
const std::vector<CalibrationParam>& CalibrationParams();
std::optional<double> ParamValue(const GpuCalibration& c, absl::string_view name);
void SetParam(GpuCalibration& c, absl::string_view name, double value);

struct FitOptions {
  std::string gpu;                  // the catalog name of the GPU whose calibration is fitted
  std::vector<std::string> params;  // parameters to fit; empty = those fitted by default
  // Pinned values (applied before the search, never moved).
  std::vector<std::pair<std::string, double>> fixed;
  // Where the search starts for the parameters it moves: the cases' catalog calibration, or
  // GpuCalibration's first estimates (cross-validation starts there, so that no fold inherits
  // the full fit). The others keep the catalog's values either way.
  bool start_from_defaults = false;
  // Fit a kernel library's terms (GpuCalibration::Library) instead of the GPU's own: every case
  // must run that library (training.kernel_library, or its framework's); the search moves
  // LibraryParams() (default: gemm_efficiency, fp8_gemm_efficiency, attention_efficiency) and
  // starts from the GPU's own values, the rest of the calibration kept.
  std::optional<KernelLibrary> library;
  // One descent from the start, its steps halved down to 1/8 (not several starts down to 1/64):
  // far fewer evaluations for a coarser fit (on the synthetic cases of tests/calibrate_test.cc,
  // within 0.01 of the full fit's efficiencies).
  bool quick = false;
  int jobs = 1;
};

// The terms a kernel library's entry can hold, by CalibrationParams() name; those a library fit
// moves by default are marked.
struct LibraryParam {
  absl::string_view name;
  bool fitted_by_default = true;
};
const std::vector<LibraryParam>& LibraryParams();
bool IsLibraryParam(absl::string_view name);
// `c`'s entry for `library`, made if it has none, and one of its terms set by name.
GpuCalibration::Library& LibraryEntry(GpuCalibration& c, KernelLibrary library);
void SetLibraryParam(GpuCalibration::Library& l, absl::string_view name, double v);

struct FitResult {
  std::string gpu;
  std::optional<KernelLibrary> library;  // FitOptions::library
  GpuCalibration start, fitted;
  std::vector<std::string> params;  // those the search moved
  std::vector<std::string> pinned;  // those --fix set
  double start_mape = 0, mape = 0;  // step-time MAPE (%) over the cases, before and after
  int cases = 0, evaluations = 0;
  std::vector<std::string> sources;  // the cases' files (names without .yaml), in first-seen order
  // What was fitted to, where not step times (empty): "kernel times of a profiled step"
  // (sim/validate/trace_fit.h), whose `cases` count kernel classes.
  std::string basis;
};

// The step-time error (%) a case's time metrics imply; none if it measured no time.
std::optional<double> StepTimeError(const CaseResult& r);

// Fits options.gpu's calibration to `cases`, which must all run on that GPU (InvalidArgument
// naming the first that does not) and include at least one case with a measured time.
absl::StatusOr<FitResult> Fit(const std::vector<ValidationCase>& cases, const FitOptions& options);

// Writes into the fitted calibration (its library's entry for a library fit) the sources and
// terms it rests on (fit.sources, fit.params), which `stepsim list gpus` shows.
void RecordFitBasis(FitResult& fit);

// `cases` with their GPU's calibration replaced where it is options.gpu's.
std::vector<ValidationCase> WithCalibration(std::vector<ValidationCase> cases,
                                            const std::string& gpu, const GpuCalibration& c);

// The calibration file stepsim calibrate writes (config::LoadCalibrationFile reads it): the
// values the fit moved or pinned, and what the fit rested on. Read back over a GPU's catalog
// calibration, it leaves that GPU's other terms (its microbenchmarked bandwidths, latencies and
// NCCL ramp) as they are, so a part of the same silicon can use another part's fit.
std::string CalibrationFileText(const FitResult& fit, const std::string& command);
// The fit's report: each parameter's start, fitted value and bounds, and the MAPE.
std::string FitText(const FitResult& fit);

// Leave-one-source-out: each case predicted by a calibration fitted without its source. A fit is
// a GPU's own terms, or a kernel library's terms on that GPU (a case whose library has fitted
// terms on its GPU is folded with that library's fit, labelled "GPU library"). For a
// GPU whose catalog calibration was fitted to several case files (GpuCalibration::fit_sources),
// each of those files is left out in turn and its cases predicted by a fit to the others; with
// one such file, its cases are left out one model at a time; cases from files the calibration
// never saw (and GPUs fitted to nothing) keep their ordinary prediction, already out of sample.
struct CrossValidation {
  std::vector<CaseResult> results;  // in the input order
  std::vector<std::string> gpu;     // each result's fit: its GPU, or "GPU library"
  // Per GPU: how it was folded ("source", "model" or "none": not fitted) and its folds.
  struct Gpu {
    std::string gpu, folding;  // gpu: the fit's label, as above
    std::vector<std::string> folds;
  };
  std::vector<Gpu> gpus;
};
CrossValidation CrossValidate(const std::vector<ValidationCase>& cases,
                              const std::vector<CaseResult>& in_sample, int jobs);
// Adds cross_validated_mape (metric -> MAPE, beside mape), cross_validated_mape_by_gpu, each
// case's cross-validated prediction (cross_validated_cases) and the folds to a ValidationJson
// document.
void AddCrossValidation(const CrossValidation& cv, nlohmann::ordered_json& j);
// Per GPU and metric: the in-sample and the cross-validated MAPE, and how the GPU was folded.
std::string CrossValidationText(const CrossValidation& cv,
                                const std::vector<CaseResult>& in_sample);

}  // namespace sim::validate
