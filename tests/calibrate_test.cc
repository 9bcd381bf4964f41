// stepsim calibrate's fit (sim/validate/calibrate.h): it recovers a calibration from cases
// whose "measurements" were made with it, is the same for any thread count, refuses cases of
// another GPU type, writes a file that reads back as what it fitted, and cross-validation
// predicts each held-out source with a fit that never saw it.

#include "sim/validate/calibrate.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "sim/config/catalog.h"
#include "sim/replay/replay.h"
#include "sim/report/run_summary.h"

namespace sim::validate {
namespace {

// A small Llama-style job on 8 A100s whose shape moves the GEMM, attention and memory shares.
constexpr const char* kCase = R"(schema_version: 1
name: synthetic
model: {name: synthetic, family: llama, layers: 4, hidden: HIDDEN, heads: 16, kv_heads: 8,
        ffn_hidden: FFN, vocab: 32000, mlp: swiglu, norm: rmsnorm, position: rope,
        tied_embeddings: false}
cluster: {node: NODE, nodes: 1}
training: {seq_len: SEQ, micro_batch: MB, global_batch: GB, recompute: none, attention: flash}
parallel: {framework: fsdp, zero: 3}
)";

Scenario Make(const char* node, int64_t hidden, int64_t seq, int64_t mb,
              const char* parallel = "framework: fsdp, zero: 3") {
  const std::string text = absl::StrReplaceAll(kCase, {{"framework: fsdp, zero: 3", parallel},
                                                       {"HIDDEN", absl::StrCat(hidden)},
                                                       {"FFN", absl::StrCat(hidden * 7 / 2)},
                                                       {"NODE", node},
                                                       {"SEQ", absl::StrCat(seq)},
                                                       {"MB", absl::StrCat(mb)},
                                                       {"GB", absl::StrCat(8 * mb * 2)}});
  auto loader = config::ScenarioLoader::FromText(config::DataRoot{STEPSIM_SOURCE_DIR}, text,
                                                 "calibrate_test");
  REQUIRE(loader.ok());
  auto s = loader->Load({});
  INFO(s.status().message());
  REQUIRE(s.ok());
  return *s;
}

// What the fit is to find: off every default and every bound.
GpuCalibration Truth(const Scenario& s) {
  GpuCalibration c = s.cluster.gpu.calibration;
  c.gemm_efficiency = 0.55;
  c.attention_efficiency = 0.45;
  c.roofline_blend = 0.2;
  return c;
}

// Cases of `file` on `node` whose measured step times are the replay's under Truth().
std::vector<ValidationCase> Synthetic(const char* node, const std::string& file) {
  std::vector<ValidationCase> cases;
  int i = 0;
  for (int64_t hidden : {1024, 2048, 4096}) {
    for (auto [seq, mb] : {std::pair<int64_t, int64_t>{512, 1}, {2048, 2}, {8192, 1}}) {
      ValidationCase c;
      c.id = absl::StrCat("synthetic-", hidden, "-", seq, "-", mb);
      c.file = file;
      c.line = ++i;
      c.scenario = Make(node, hidden, seq, mb);
      Scenario truth = c.scenario;
      truth.cluster.gpu.calibration = Truth(truth);
      auto r = replay::Simulate(truth, {});
      REQUIRE(r.ok());
      c.measured["step_s"] = report::Summarize(truth, *r).step.seconds();
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

FitOptions Options(const std::string& gpu, int jobs = 1) {
  FitOptions o;
  o.gpu = gpu;
  o.params = {"gemm_efficiency", "attention_efficiency", "roofline_blend"};
  o.start_from_defaults = true;
  o.jobs = jobs;
  return o;
}

TEST_CASE("calibrate recovers the calibration synthetic cases were made with", "[calibrate]") {
  const std::vector<ValidationCase> cases = Synthetic("dgx-a100-80gb", "synthetic-a.yaml");
  auto fit = Fit(cases, Options("A100-SXM4-80GB"));
  REQUIRE(fit.ok());
  const GpuCalibration truth = Truth(cases[0].scenario);
  CHECK(fit->start_mape > 10);
  CHECK(fit->mape < 0.5);
  CHECK(fit->fitted.gemm_efficiency == Approx(truth.gemm_efficiency).margin(0.01));
  CHECK(fit->fitted.attention_efficiency == Approx(truth.attention_efficiency).margin(0.02));
  CHECK(fit->fitted.roofline_blend == Approx(truth.roofline_blend).margin(0.05));
  // Terms the fit does not move keep the catalog's (microbenchmarked) values.
  CHECK(fit->fitted.memory_efficiency ==
        cases[0].scenario.cluster.gpu.calibration.memory_efficiency);
  CHECK(fit->cases == 9);
  CHECK(fit->sources == std::vector<std::string>{"synthetic-a"});
}

TEST_CASE("calibrate is the same for any thread count", "[calibrate]") {
  const std::vector<ValidationCase> cases = Synthetic("dgx-a100-80gb", "synthetic-a.yaml");
  auto one = Fit(cases, Options("A100-SXM4-80GB", 1));
  auto two = Fit(cases, Options("A100-SXM4-80GB", 2));
  REQUIRE(one.ok());
  REQUIRE(two.ok());
  CHECK(CalibrationFileText(*one, "cmd") == CalibrationFileText(*two, "cmd"));
  CHECK(FitText(*one) == FitText(*two));
}

TEST_CASE("calibrate refuses cases of another GPU type", "[calibrate]") {
  std::vector<ValidationCase> cases = Synthetic("dgx-a100-80gb", "synthetic-a.yaml");
  cases.push_back(Synthetic("dgx-h100", "synthetic-h.yaml").front());
  auto fit = Fit(cases, Options("A100-SXM4-80GB"));
  REQUIRE_FALSE(fit.ok());
  CHECK(fit.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(fit.status().message()) ==
        "synthetic-h.yaml:1: case synthetic-1024-512-1 runs on H100-SXM5-80GB, not "
        "A100-SXM4-80GB: a calibration belongs to one GPU type (leave the case's file out, or "
        "pass --skip-other-gpus)");
}

TEST_CASE("the calibration file reads back as the calibration that was fitted", "[calibrate]") {
  const std::vector<ValidationCase> cases = Synthetic("dgx-a100-80gb", "synthetic-a.yaml");
  auto fit = Fit(cases, Options("A100-SXM4-80GB"));
  REQUIRE(fit.ok());
  const std::string path =
      (std::filesystem::temp_directory_path() / "stepsim-calibrate-test.yaml").string();
  std::ofstream(path) << CalibrationFileText(*fit, "stepsim calibrate test");
  auto file = config::LoadCalibrationFile(config::DataRoot{STEPSIM_SOURCE_DIR}, path);
  std::remove(path.c_str());
  REQUIRE(file.ok());
  CHECK(file->gpu == "A100-SXM4-80GB");
  CHECK(file->calibration.gemm_efficiency == fit->fitted.gemm_efficiency);
  CHECK(file->calibration.attention_efficiency == fit->fitted.attention_efficiency);
  CHECK(file->calibration.roofline_blend == fit->fitted.roofline_blend);
  CHECK(file->calibration.fit_sources == fit->sources);
  // What the fit moved, which cross-validation refits without each fold.
  CHECK(file->calibration.fit_params == fit->params);
  CHECK(fit->params ==
        std::vector<std::string>{"gemm_efficiency", "attention_efficiency", "roofline_blend"});
  // The cases predict the same with the file read back: the fit's MAPE.
  const std::vector<CaseResult> r =
      RunCases(WithCalibration(cases, file->gpu, file->calibration), 1);
  double sum = 0;
  for (const CaseResult& c : r) sum += std::abs(*StepTimeError(c));
  CHECK(sum / static_cast<double>(r.size()) == Approx(fit->mape).epsilon(1e-9));
}

TEST_CASE("a calibration file naming an unknown GPU is refused with the nearest name",
          "[calibrate]") {
  const std::string path =
      (std::filesystem::temp_directory_path() / "stepsim-calibrate-bad.yaml").string();
  std::ofstream(path) << "schema_version: 1\ngpu: A100-SXM4-81GB\ncalibration: {}\n";
  auto file = config::LoadCalibrationFile(config::DataRoot{STEPSIM_SOURCE_DIR}, path);
  std::remove(path.c_str());
  REQUIRE_FALSE(file.ok());
  CHECK(file.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(file.status().message()) ==
        absl::StrCat(path, ": gpu: unknown GPU 'A100-SXM4-81GB' (did you mean 'A100-SXM4-80GB'?)"));
}

TEST_CASE("a calibration file naming an unknown kernel library is refused where it stands",
          "[calibrate]") {
  const std::string path =
      (std::filesystem::temp_directory_path() / "stepsim-calibrate-library.yaml").string();
  std::ofstream(path) << "schema_version: 1\ngpu: H100-SXM5-80GB\nlibraries:\n"
                         "  transformer-engine: {gemm_efficiency: 0.7}\n";
  auto file = config::LoadCalibrationFile(config::DataRoot{STEPSIM_SOURCE_DIR}, path);
  std::remove(path.c_str());
  REQUIRE_FALSE(file.ok());
  CHECK(std::string(file.status().message()) ==
        absl::StrCat(path,
                     ":4:3: libraries.transformer-engine: unknown kernel library "
                     "'transformer-engine' (did you mean 'transformer_engine'?) (one of pytorch, "
                     "transformer_engine)"));
}

TEST_CASE("cross-validation predicts each fitted source with a fit to the others", "[calibrate]") {
  // Two sources made with the same truth: each fold's fit to the other recovers it, so the
  // cross-validated errors are near zero while the in-sample ones (catalog calibration) are not.
  std::vector<ValidationCase> cases = Synthetic("dgx-a100-80gb", "source-a.yaml");
  for (ValidationCase& c : Synthetic("dgx-a100-80gb", "source-b.yaml")) {
    c.id += "-b";
    cases.push_back(std::move(c));
  }
  for (ValidationCase& c : cases)
    c.scenario.cluster.gpu.calibration.fit_sources = {"source-a", "source-b"};
  const std::vector<CaseResult> in_sample = RunCases(cases, 1);
  const CrossValidation cv = CrossValidate(cases, in_sample, 2);
  REQUIRE(cv.gpus.size() == 1);
  CHECK(cv.gpus[0].folding == "source");
  CHECK(cv.gpus[0].folds == std::vector<std::string>{"source-a", "source-b"});
  const auto in = MapeByMetric(in_sample), out = MapeByMetric(cv.results);
  CHECK(in.at("step_s") > 5);
  CHECK(out.at("step_s") < 1);
}

// Megatron cases on H100 (Transformer Engine's kernels by default) whose measured step times
// are the replay's with TE terms of gemm 0.55 and attention 0.45 over the catalog's H100 terms.
std::vector<ValidationCase> SyntheticTe(const std::string& file) {
  std::vector<ValidationCase> cases;
  int i = 0;
  for (int64_t hidden : {1024, 4096}) {
    for (auto [seq, mb] : {std::pair<int64_t, int64_t>{512, 1}, {8192, 1}}) {
      ValidationCase c;
      c.id = absl::StrCat("te-", hidden, "-", seq);
      c.file = file;
      c.line = ++i;
      c.scenario = Make("dgx-h100", hidden, seq, mb, "framework: megatron, tp: 2");
      Scenario truth = c.scenario;
      GpuCalibration::Library te;
      te.library = KernelLibrary::kTransformerEngine;
      te.gemm_efficiency = 0.55;
      te.attention_efficiency = 0.45;
      truth.cluster.gpu.calibration.libraries = {te};
      auto r = replay::Simulate(truth, {});
      REQUIRE(r.ok());
      c.measured["step_s"] = report::Summarize(truth, *r).step.seconds();
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// A fit of the H100's Transformer Engine GEMM and attention terms.
FitOptions TeOptions() {
  FitOptions o;
  o.gpu = "H100-SXM5-80GB";
  o.library = KernelLibrary::kTransformerEngine;
  o.params = {"gemm_efficiency", "attention_efficiency"};
  return o;
}

TEST_CASE("a kernel library's fit recovers its terms and leaves the GPU's own", "[calibrate]") {
  const std::vector<ValidationCase> cases = SyntheticTe("te-cases.yaml");
  FitOptions o = TeOptions();
  auto fit = Fit(cases, o);
  INFO((fit.ok() ? FitText(*fit) : std::string(fit.status().message())));
  REQUIRE(fit.ok());
  const GpuCalibration& own = cases[0].scenario.cluster.gpu.calibration;
  const GpuCalibration::Library* te = fit->fitted.FindLibrary(KernelLibrary::kTransformerEngine);
  REQUIRE(te != nullptr);
  CHECK(*te->gemm_efficiency == Approx(0.55).margin(0.01));
  CHECK(*te->attention_efficiency == Approx(0.45).margin(0.03));
  CHECK(te->fit_sources == std::vector<std::string>{"te-cases"});
  CHECK(fit->mape < 0.5);
  // The GPU's own terms, which PyTorch-kernel scenarios run with, are untouched.
  CHECK(fit->fitted.gemm_efficiency == own.gemm_efficiency);
  CHECK(fit->fitted.attention_efficiency == own.attention_efficiency);
  // The file holds the library's terms alone and reads back over the catalog's calibration.
  const std::string text = CalibrationFileText(*fit, "stepsim calibrate te");
  CHECK(text.find("libraries:\n  transformer_engine:\n    gemm_efficiency: ") != std::string::npos);
  CHECK(text.find("\ncalibration:") == std::string::npos);
  const std::string path =
      (std::filesystem::temp_directory_path() / "stepsim-calibrate-te.yaml").string();
  std::ofstream(path) << text;
  auto file = config::LoadCalibrationFile(config::DataRoot{STEPSIM_SOURCE_DIR}, path);
  std::remove(path.c_str());
  REQUIRE(file.ok());
  const GpuCalibration::Library* read = file->calibration.FindLibrary(te->library);
  REQUIRE(read != nullptr);
  CHECK(read->gemm_efficiency == te->gemm_efficiency);
  CHECK(read->attention_efficiency == te->attention_efficiency);
  CHECK(file->calibration.gemm_efficiency == own.gemm_efficiency);
}

TEST_CASE("a quick fit (cross-validation's library folds) lands near the full one, cheaper",
          "[calibrate]") {
  const std::vector<ValidationCase> cases = SyntheticTe("te-cases.yaml");
  FitOptions o = TeOptions();
  auto full = Fit(cases, o);
  o.quick = true;
  auto quick = Fit(cases, o);
  REQUIRE(full.ok());
  REQUIRE(quick.ok());
  const auto* f = full->fitted.FindLibrary(KernelLibrary::kTransformerEngine);
  const auto* q = quick->fitted.FindLibrary(KernelLibrary::kTransformerEngine);
  // Within a fifth of the initial step (0.05) of the full fit's terms (0.0093 reached).
  CHECK(*q->gemm_efficiency == Approx(*f->gemm_efficiency).margin(0.01));
  CHECK(*q->attention_efficiency == Approx(*f->attention_efficiency).margin(0.01));
  CHECK(quick->evaluations * 2 < full->evaluations);
}

TEST_CASE("a kernel library's fit refuses cases that run other kernels", "[calibrate]") {
  std::vector<ValidationCase> cases = SyntheticTe("te-cases.yaml");
  cases.back().scenario.training.kernel_library = KernelLibrary::kPyTorch;
  FitOptions o = TeOptions();
  o.params.clear();  // the library's default terms
  auto fit = Fit(cases, o);
  REQUIRE_FALSE(fit.ok());
  CHECK(std::string(fit.status().message()) ==
        "te-cases.yaml:4: case te-4096-8192 runs pytorch kernels, not transformer_engine: a "
        "library's terms are fitted to cases that run it (training.kernel_library)");
  o.params = {"roofline_blend"};
  cases.back().scenario.training.kernel_library.reset();
  fit = Fit(cases, o);
  REQUIRE_FALSE(fit.ok());
  CHECK(std::string(fit.status().message()).starts_with("'roofline_blend' is not a kernel"));
}

TEST_CASE("a library's terms price only the scenarios that run it", "[calibrate]") {
  ValidationCase c = SyntheticTe("te-cases.yaml").back();
  Scenario te = c.scenario, pytorch = c.scenario;
  GpuCalibration::Library lib;
  lib.library = KernelLibrary::kTransformerEngine;
  lib.gemm_efficiency = 0.9;
  te.cluster.gpu.calibration.libraries = {lib};
  pytorch.cluster.gpu.calibration.libraries = {lib};
  pytorch.training.kernel_library = KernelLibrary::kPyTorch;
  auto step = [](const Scenario& s) {
    auto r = replay::Simulate(s, {});
    REQUIRE(r.ok());
    return report::Summarize(s, *r).step.seconds();
  };
  Scenario none = c.scenario;
  none.cluster.gpu.calibration.libraries.clear();
  CHECK(step(pytorch) == step(none));   // pytorch: the GPU's own terms, the entry ignored
  CHECK(step(te) < 0.95 * step(none));  // megatron's default library: faster GEMMs
}

}  // namespace
}  // namespace sim::validate
