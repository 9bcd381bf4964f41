#pragma once
// Renderings of many run reports: the sweep and compare tables (text, CSV, Markdown) and the
// sweep plot (SVG through gnuplot, Debian's gnuplot-nox).

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/report/run_summary.h"

namespace sim::report {

// One row of a sweep or comparison: its labels (varied values) and its run report, or the
// reason it could not run.
struct Row {
  std::vector<std::string> labels;
  std::optional<RunSummary> summary;  // the run's result; empty when `error` is set
  std::string error;
};

enum class TableFormat { kText, kCsv, kMarkdown };

// Columns: the labels, then fits, peak (GiB), activations at peak (GiB), step (s), MFU,
// tokens/s per GPU, exposed communication (s).
std::string SweepTable(const std::vector<std::string>& label_names, const std::vector<Row>& rows,
                       TableFormat format);

// Per row: peak, fits, bytes sent per GPU by collective kind and their total, its ratio to the
// first row's, total and exposed communication time, step time, MFU.
std::string CompareTable(const std::vector<std::string>& label_names, const std::vector<Row>& rows,
                         TableFormat format);

// `stepsim compare --finetune`: per row fits (GPU and host), the peak and what it is made of
// (weights, gradients + optimizer, activations + logits, the rest: gathers, buffers,
// workspaces, the runtime reserve), host memory per node, step time and tokens/s per GPU.
std::string FinetuneTable(const std::vector<std::string>& label_names, const std::vector<Row>& rows,
                          TableFormat format);

// A gnuplot run: its script and the data files it reads, by bare name. The caller writes them
// into a private folder, runs gnuplot there, and reads the picture it drew from `output` in
// that folder (the library runs nothing). No text from the inputs is in the script except as
// single-quoted gnuplot strings (sim/base/text_escape.h), and none is in the data files.
struct GnuplotJob {
  std::string script;
  std::vector<std::pair<std::string, std::string>> data;  // (file name, contents)
  std::string output;                                     // the picture's file name
};

// The picture formats --plot writes, named by the file's extension.
enum class PlotFormat { kSvg, kPng };
// The format a --plot path's extension names (.svg or .png, any case); InvalidArgument for
// any other, so that the command refuses before it runs anything.
absl::StatusOr<PlotFormat> PlotFormatOf(const std::string& path);

// Plots `metrics` (any of: peak, step, activations, mfu, exposed_comm) against the first label,
// one line per combination of the other labels, as SVG or PNG (gnuplot's svg and pngcairo
// terminals); peak plots carry the GPU capacity as a line.
absl::StatusOr<GnuplotJob> PlotSweep(PlotFormat format, const std::string& title,
                                     const std::vector<std::string>& label_names,
                                     const std::vector<Row>& rows,
                                     const std::vector<std::string>& metrics);

}  // namespace sim::report
