#include "sim/report/sweep_report.h"

#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/base/text_escape.h"
#include "sim/report/table.h"

namespace sim::report {

namespace {

std::string Render(const std::vector<std::string>& header,
                   const std::vector<std::vector<std::string>>& rows, TableFormat format) {
  if (format == TableFormat::kCsv) {
    auto quote = [](const std::string& c) { return CsvCell(c); };
    std::string out;
    for (const auto* r : {&header}) {
      std::vector<std::string> q;
      for (const auto& c : *r) q.push_back(quote(c));
      absl::StrAppend(&out, absl::StrJoin(q, ","), "\n");
    }
    for (const auto& r : rows) {
      std::vector<std::string> q;
      for (const auto& c : r) q.push_back(quote(c));
      absl::StrAppend(&out, absl::StrJoin(q, ","), "\n");
    }
    return out;
  }
  if (format == TableFormat::kMarkdown) {
    std::string out = absl::StrCat("| ", absl::StrJoin(header, " | "), " |\n|");
    for (size_t i = 0; i < header.size(); ++i) out += i == 0 ? " --- |" : " ---: |";
    out += "\n";
    for (const auto& r : rows) absl::StrAppend(&out, "| ", absl::StrJoin(r, " | "), " |\n");
    return out;
  }
  Table t(header);
  for (const auto& r : rows) t.AddRow(r);
  return t.Render(0);
}

}  // namespace

std::string SweepTable(const std::vector<std::string>& label_names, const std::vector<Row>& rows,
                       TableFormat format) {
  const bool text = format == TableFormat::kText;
  // Column names for people (text, Markdown) or for programs (CSV).
  const bool csv = format == TableFormat::kCsv;
  std::vector<std::string> header = label_names;
  // The reserved peak decides "fits" (what the caching allocator holds, as the run's verdict);
  // the allocated one is the tensors' (and the runtime reserve's).
  for (const char* h :
       {"fits", csv ? "reserved_gib" : "reserved GiB", csv ? "allocated_gib" : "allocated GiB",
        csv ? "activations_gib" : "activations GiB", csv ? "step_s" : "step s", csv ? "mfu" : "MFU",
        csv ? "tokens_per_s_per_gpu" : "tokens/s/GPU", csv ? "exposed_comm_s" : "exposed comm s",
        "error"}) {
    header.push_back(h);
  }
  std::vector<std::vector<std::string>> table;
  for (const Row& r : rows) {
    std::vector<std::string> row = r.labels;
    if (!r.error.empty()) {
      for (int i = 0; i < 8; ++i) row.push_back("-");
      row.push_back(text ? r.error.substr(0, 60) : r.error);
    } else {
      row.push_back(r.summary->fits ? "yes" : "no");
      row.push_back(absl::StrFormat("%.2f", r.summary->reserved_peak.gib()));
      row.push_back(absl::StrFormat("%.2f", r.summary->peak.gib()));
      row.push_back(absl::StrFormat("%.2f", r.summary->PeakOf(MemCategory::kActivations).gib()));
      row.push_back(absl::StrFormat("%.4f", r.summary->step.seconds()));
      row.push_back(absl::StrFormat("%.4f", r.summary->mfu));
      row.push_back(absl::StrFormat("%.1f", r.summary->tokens_per_s_per_gpu));
      row.push_back(absl::StrFormat("%.4f", r.summary->times.exposed_comm.seconds()));
      row.push_back("");
    }
    table.push_back(row);
  }
  return Render(header, table, format);
}

std::string CompareTable(const std::vector<std::string>& label_names, const std::vector<Row>& rows,
                         TableFormat format) {
  // The all-to-all column only where a row sends any (expert parallelism).
  bool a2a = false;
  for (const Row& r : rows) {
    a2a = a2a || (r.error.empty() && r.summary->Sent(CollectiveKind::kAllToAll) > Bytes());
  }
  std::vector<std::string> header = label_names;
  for (const char* h :
       {"fits", "reserved GiB", "all_gather GB", "reduce_scatter GB", "all_reduce GB"}) {
    header.push_back(h);
  }
  if (a2a) header.push_back("all_to_all GB");
  for (const char* h : {"sent GB", "x first", "comm s", "exposed s", "step s", "mfu", "error"}) {
    header.push_back(h);
  }
  Bytes base;
  std::vector<std::vector<std::string>> table;
  for (const Row& r : rows) {
    std::vector<std::string> row = r.labels;
    if (!r.error.empty()) {
      for (size_t i = label_names.size() + 1; i < header.size(); ++i) row.push_back("-");
      row.push_back(r.error);
      table.push_back(row);
      continue;
    }
    std::vector<Bytes> kinds = {r.summary->Sent(CollectiveKind::kAllGather),
                                r.summary->Sent(CollectiveKind::kReduceScatter),
                                r.summary->Sent(CollectiveKind::kAllReduce)};
    if (a2a) kinds.push_back(r.summary->Sent(CollectiveKind::kAllToAll));
    Bytes sent;
    for (Bytes v : kinds) sent += v;
    if (base == Bytes()) base = sent;
    row.push_back(r.summary->fits ? "yes" : "no");
    row.push_back(absl::StrFormat("%.2f", r.summary->reserved_peak.gib()));
    kinds.push_back(sent);
    for (Bytes v : kinds) row.push_back(absl::StrFormat("%.2f", v.gb()));
    row.push_back(base > Bytes() ? absl::StrFormat("%.2f", sent / base) : "-");
    row.push_back(absl::StrFormat("%.3f", r.summary->times.comm.seconds()));
    row.push_back(absl::StrFormat("%.3f", r.summary->times.exposed_comm.seconds()));
    row.push_back(absl::StrFormat("%.3f", r.summary->step.seconds()));
    row.push_back(absl::StrFormat("%.4f", r.summary->mfu));
    row.push_back("");
    table.push_back(row);
  }
  return Render(header, table, format);
}

std::string FinetuneTable(const std::vector<std::string>& label_names, const std::vector<Row>& rows,
                          TableFormat format) {
  std::vector<std::string> header = label_names;
  for (const char* h : {"fits", "reserved GiB", "allocated GiB", "weights GiB",
                        "grads+optimizer GiB", "activations+logits GiB", "other GiB",
                        "host GiB/node", "step s", "tokens/s/GPU", "error"}) {
    header.push_back(h);
  }
  std::vector<std::vector<std::string>> table;
  for (const Row& r : rows) {
    std::vector<std::string> row = r.labels;
    if (!r.error.empty()) {
      for (int i = 0; i < 10; ++i) row.push_back("-");
      row.push_back(r.error);
      table.push_back(row);
      continue;
    }
    const RunSummary& x = *r.summary;
    const Bytes weights = x.PeakOf(MemCategory::kWeights);
    const Bytes states = x.PeakOf(MemCategory::kGradients) + x.PeakOf(MemCategory::kOptimizer);
    const Bytes acts = x.PeakOf(MemCategory::kActivations) + x.PeakOf(MemCategory::kLogits);
    const Bytes other = x.peak - weights - states - acts;
    row.push_back(x.fits ? "yes" : x.gpu_fits ? "no (host)" : "no");
    // The parts add up to the allocated peak; the reserved one decides "fits".
    for (Bytes b : {x.reserved_peak, x.peak, weights, states, acts, other, x.host_peak}) {
      row.push_back(absl::StrFormat("%.2f", b.gib()));
    }
    row.push_back(absl::StrFormat("%.3f", x.step.seconds()));
    row.push_back(absl::StrFormat("%.0f", x.tokens_per_s_per_gpu));
    row.push_back("");
    table.push_back(row);
  }
  return Render(header, table, format);
}

absl::StatusOr<PlotFormat> PlotFormatOf(const std::string& path) {
  const std::string ext = absl::AsciiStrToLower(std::filesystem::path(path).extension().string());
  if (ext == ".svg") return PlotFormat::kSvg;
  if (ext == ".png") return PlotFormat::kPng;
  return absl::InvalidArgumentError(
      absl::StrCat("--plot ", path, ": name a .svg or .png file (the extension picks the format)"));
}

absl::StatusOr<GnuplotJob> PlotSweep(PlotFormat format, const std::string& title,
                                     const std::vector<std::string>& label_names,
                                     const std::vector<Row>& rows,
                                     const std::vector<std::string>& metrics) {
  struct Metric {
    std::string label;
    std::function<double(const RunSummary&)> value;
  };
  const std::map<std::string, Metric> known = {
      {"peak", {"peak memory per GPU (GiB)", [](const RunSummary& j) { return j.peak.gib(); }}},
      {"activations",
       {"activations at the peak (GiB)",
        [](const RunSummary& j) { return j.PeakOf(MemCategory::kActivations).gib(); }}},
      {"step", {"step time (s)", [](const RunSummary& j) { return j.step.seconds(); }}},
      {"mfu", {"MFU", [](const RunSummary& j) { return j.mfu; }}},
      {"exposed_comm", {"exposed communication (s)", [](const RunSummary& j) {
                          return j.times.exposed_comm.seconds();
                        }}}};
  for (const std::string& m : metrics) {
    if (!known.count(m)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--metrics: unknown metric '", m,
                       "'; choose from peak, activations, step, mfu, exposed_comm"));
    }
  }
  // Series: one per combination of the labels after the first, in first-seen order.
  std::vector<std::string> series_names;
  std::map<std::string, std::vector<const Row*>> series;
  bool numeric_x = true;
  for (const Row& r : rows) {
    if (!r.error.empty()) continue;
    std::vector<std::string> rest;
    for (size_t i = 1; i < r.labels.size(); ++i) {
      rest.push_back(absl::StrCat(label_names[i], "=", r.labels[i]));
    }
    const std::string name = rest.empty() ? "replay" : absl::StrJoin(rest, ", ");
    if (!series.count(name)) series_names.push_back(name);
    series[name].push_back(&r);
    double x = 0;
    numeric_x = numeric_x && absl::SimpleAtod(r.labels[0], &x);
  }
  if (series.empty()) return absl::FailedPreconditionError("--plot: no configuration ran");
  GnuplotJob job;
  job.output = format == PlotFormat::kPng ? "plot.png" : "plot.svg";
  // Every text from the inputs (the title, the varied keys and values) enters the script as a
  // single-quoted gnuplot string (GnuplotString): never inside double quotes, where gnuplot
  // would run a backquoted command. The terminal is noenhanced, so ^ _ @ { } print as they are.
  std::string script = absl::StrFormat(
      "set terminal %s size 900,%d noenhanced font 'sans,11' background rgb 'white'\n"
      "set output %s\nset multiplot layout %d,1 title %s\n"
      "set grid\nset key outside right top\nset xlabel %s\n",
      format == PlotFormat::kPng ? "pngcairo" : "svg dynamic",
      360 * static_cast<int>(metrics.size()), GnuplotString(job.output), metrics.size(),
      GnuplotString(title), GnuplotString(label_names[0]));
  if (numeric_x) {
    double lo = 1e300, hi = 0;
    for (const Row& r : rows) {
      double x = 0;
      if (r.error.empty() && absl::SimpleAtod(r.labels[0], &x)) {
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
    }
    if (lo > 0 && hi / lo >= 16) script += "set logscale x 2\n";
  } else {
    // Text x values are tic labels set in the script, each a gnuplot string; the data files
    // hold only numbers.
    std::vector<std::string> tics;
    for (const std::string& name : series_names) {
      size_t index = 0;
      for (const Row* r : series[name]) {
        if (tics.size() <= index)
          tics.push_back(absl::StrCat(GnuplotString(r->labels[0]), " ", index));
        ++index;
      }
    }
    absl::StrAppend(&script, "set xtics rotate by -30 (", absl::StrJoin(tics, ", "), ")\n");
  }
  for (const std::string& m : metrics) {
    const Metric& metric = known.at(m);
    std::vector<std::string> plots;
    // The value range, for the axis: a log axis when every value is positive and they span
    // more than 10x (a sequence-length sweep's peaks from 40 GiB to 2,800 GiB would otherwise
    // squash the capacity line and the series that fit into the bottom row of pixels).
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (size_t si = 0; si < series_names.size(); ++si) {
      const std::string file = absl::StrCat(m, "-", si, ".dat");
      std::ostringstream out;
      size_t index = 0;
      for (const Row* r : series[series_names[si]]) {
        const double v = metric.value(*r->summary);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        double x = static_cast<double>(index);
        if (numeric_x && !absl::SimpleAtod(r->labels[0], &x)) x = static_cast<double>(index);
        out << absl::StrFormat("%.17g", x) << " " << v << " " << (r->summary->fits ? 1 : 0) << "\n";
        ++index;
      }
      job.data.push_back({file, out.str()});
      // Each series its own dash pattern and marker, so series with equal values (no recompute
      // and selective recompute with flash attention) stay visible on top of each other.
      plots.push_back(
          absl::StrFormat("'%s' using 1:2 with linespoints lw 2 dt %d pt %d ps 1.3 title %s", file,
                          si % 5 + 1, si % 13 + 1, GnuplotString(series_names[si])));
    }
    // Configurations that do not fit, ringed in grey (the third column is 0): a step time of one
    // is what it would take on GPUs with room for it, and must not read as an option.
    bool any_apart = false;
    for (const Row& r : rows) any_apart = any_apart || (r.error.empty() && !r.summary->fits);
    for (size_t si = 0; any_apart && si < series_names.size(); ++si) {
      plots.push_back(absl::StrFormat(
          "'%s-%d.dat' using 1:($3 == 0 ? $2 : 1/0) with points pt 6 ps 2.4 lw 1.5 lc rgb "
          "'grey50' %s",
          m, si, si == 0 ? "title 'ringed: does not fit'" : "notitle"));
    }
    if (m == "peak") {
      // A constant: horizontal at the usable capacity whatever the x axis.
      const double cap = series[series_names[0]][0]->summary->capacity.gib();
      lo = std::min(lo, cap);
      hi = std::max(hi, cap);
      plots.push_back(absl::StrFormat(
          "%.3f with lines dt 2 lw 2 lc rgb 'red' title 'GPU capacity (%.0f GiB)'", cap, cap));
    }
    const bool log_y = lo > 0 && hi / lo > 10;
    absl::StrAppendFormat(
        &script, "set ylabel %s\n%s\nplot %s\n",
        GnuplotString(absl::StrCat(metric.label, log_y ? ", log scale" : "")),
        log_y ? "set logscale y 10\nset yrange [*:*]" : "unset logscale y\nset yrange [0:*]",
        absl::StrJoin(plots, ", \\\n     "));
  }
  script += "unset multiplot\n";
  job.script = std::move(script);
  return job;
}

}  // namespace sim::report
