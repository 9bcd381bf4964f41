#pragma once
// Fitting a GPU's (or a kernel library's) compute terms to a profiled step
// (`stepsim calibrate SCENARIO --trace TRACE.json`).
//
// A PyTorch profiler trace (Kineto's Chrome-trace JSON, torch.profiler's export_chrome_trace)
// holds every GPU kernel a rank ran as an event {"ph": "X", "cat": "kernel", "name", "dur"
// (µs)}. Its kernels are sorted by name into GEMMs, attention, and memory-bound kernels (NCCL's
// are communication and left out); each class's time per step is held against the time the
// replay gives the same class on the traced GPU (its pipeline stage), kernel bodies only (no
// launch overhead, which a kernel's duration does not include). Each class fixes one term:
// GEMMs gemm_efficiency (fp8_gemm_efficiency when the scenario trains in fp8), attention
// attention_efficiency, memory-bound kernels memory_efficiency (a GPU term, not a library's).
// Every term is solved by bisection within its physical bounds (CalibrationParams), in turns,
// until none moves: a class's replayed time falls monotonically as its term rises. FP8 cast
// kernels run apart from their GEMMs in a trace, so the replay's casts (Op::serial_bytes)
// count as memory-bound time.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/spec/scenario.h"
#include "sim/validate/calibrate.h"
#include "sim/workload/program.h"

namespace sim::validate {

enum class KernelClass { kGemm, kAttention, kMemoryBound, kCommunication };

// What a kernel is, by its name as CUDA reports it (cuBLAS/cuBLASLt "gemm", "xmma", "nvjet",
// CUTLASS; FlashAttention's and cuDNN's fused attention "flash", "fmha", "sdpa"; NCCL's
// "nccl"); everything else is memory-bound.
KernelClass ClassifyKernel(absl::string_view name);

// Seconds per step by class.
struct KernelClassTimes {
  double gemm = 0, attention = 0, memory = 0;
  double Of(KernelClass k) const;
};

// A trace's kernels: each class's time per step (the totals over the profiled steps, counted
// by their ProfilerStep#N annotations, at least one), and what was read.
struct TraceKernels {
  KernelClassTimes per_step;
  int64_t kernels = 0, communication_kernels = 0;
  int steps = 1;
};
// Reads a trace's text; `path` names it in errors, which give the line and column of malformed
// JSON and refuse a trace without kernels or with kernels of several GPUs.
absl::StatusOr<TraceKernels> ReadKernelTrace(const std::string& text, const std::string& path);

// The replay's kernel time per class on `stage` of `program` (Lower(s)), priced with `s`'s GPU
// and calibration (its kernel library's terms laid over) without launch overheads.
KernelClassTimes ReplayKernelTimes(const Scenario& s, const OpProgram& program, int32_t stage);

struct TraceFitOptions {
  std::string trace_name;  // the trace's file name, for the fit's sources
  // Fit this kernel library's terms (the scenario must run it); memory_efficiency, a GPU term,
  // is then left as it is.
  std::optional<KernelLibrary> library;
  int32_t stage = 0;  // the traced GPU's pipeline stage
};
struct TraceFit {
  FitResult fit;  // basis "kernel times of a profiled step"; MAPE over the fitted classes
  KernelClassTimes trace, before, after;
  // The classes fitted, each with its term and whether the term stopped at a bound.
  struct Term {
    KernelClass kernel_class;
    std::string param;
    bool at_bound = false;
  };
  std::vector<Term> terms;
};
absl::StatusOr<TraceFit> FitToTrace(const Scenario& s, const TraceKernels& trace,
                                    const TraceFitOptions& options);
// The fit's report: per class the trace's, the replay's before and after, and the term.
std::string TraceFitText(const TraceFit& fit);

}  // namespace sim::validate
