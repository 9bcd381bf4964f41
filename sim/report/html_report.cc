#include "sim/report/html_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/replay/step_records.h"
#include "sim/report/html_page.h"
#include "sim/report/table.h"

namespace sim::report {

using html::Escape;
using html::TickStep;

namespace {

// A fill: a colour and a hatch, so that series stay apart in grey print.
struct Fill {
  const char* id;
  const char* colour;
  const char* hatch;  // an SVG path in an 8 x 8 tile ("" = plain)
};
constexpr const char* kDiagonal = "M0,8 L8,0";
constexpr const char* kBackDiagonal = "M0,0 L8,8";
constexpr const char* kHorizontal = "M0,4 L8,4";
constexpr const char* kVertical = "M4,0 L4,8";
constexpr const char* kCross = "M0,4 L8,4 M4,0 L4,8";
constexpr const char* kDots = "M3,3 L5,5";
constexpr const char* kDiamond = "M0,0 L8,8 M0,8 L8,0";

// Memory categories, in MemCategory order.
constexpr std::array<Fill, kNumMemCategories> kCategoryFills = {{
    {"m-weights", "#4e79a7", ""},
    {"m-gradients", "#f28e2b", kDiagonal},
    {"m-optimizer", "#76b7b2", kHorizontal},
    {"m-activations", "#e15759", kBackDiagonal},
    {"m-gathered", "#59a14f", kVertical},
    {"m-comm", "#edc948", kCross},
    {"m-logits", "#b07aa1", kDots},
    {"m-workspace", "#ff9da7", kDiamond},
    {"m-reserved", "#bab0ac", ""},
}};

// What an op on a stream is, for the stream timeline.
enum class Work { kForward, kBackward, kRecompute, kOptimizer, kCollective, kSend, kOffload };
constexpr int kNumWork = 7;
constexpr std::array<Fill, kNumWork> kWorkFills = {{
    {"w-forward", "#4e79a7", ""},
    {"w-backward", "#f28e2b", kDiagonal},
    {"w-recompute", "#e15759", kBackDiagonal},
    {"w-optimizer", "#76b7b2", kHorizontal},
    {"w-collective", "#59a14f", kCross},
    {"w-send", "#edc948", kVertical},
    {"w-offload", "#b07aa1", kDots},
}};
constexpr std::array<const char*, kNumWork> kWorkNames = {
    "forward", "backward", "recompute", "optimizer", "collective", "pipeline send", "offload"};
constexpr std::array<const char*, kNumStreams> kStreamNames = {"compute",  "DP comm", "TP/CP comm",
                                                               "PP sends", "PCIe",    "host"};

Work WorkOf(const Op& op) {
  if (op.stream == StreamKind::kP2p) return Work::kSend;
  if (op.stream == StreamKind::kPcie || op.stream == StreamKind::kHost) return Work::kOffload;
  if (op.kind == OpKind::kCollective) return Work::kCollective;
  switch (op.pass) {
    case OpPass::kForward:
      return Work::kForward;
    case OpPass::kBackward:
      return Work::kBackward;
    case OpPass::kRecompute:
      return Work::kRecompute;
    case OpPass::kStep:
      return Work::kOptimizer;
  }
  return Work::kForward;
}

std::string Patterns() {
  std::string out = "<defs>";
  auto add = [&](const Fill& f) {
    absl::StrAppend(&out, "<pattern id=\"", f.id,
                    "\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\">",
                    "<rect width=\"8\" height=\"8\" fill=\"", f.colour, "\"/>");
    if (*f.hatch) {
      absl::StrAppend(&out, "<path d=\"", f.hatch,
                      "\" stroke=\"#000\" stroke-opacity=\"0.45\" stroke-width=\"1.2\"/>");
    }
    out += "</pattern>";
  };
  for (const Fill& f : kCategoryFills) add(f);
  for (const Fill& f : kWorkFills) add(f);
  return out + "</defs>";
}

std::string Legend(const std::vector<std::pair<const Fill*, std::string>>& items) {
  std::string out = "<ul class=\"legend\">";
  for (const auto& [fill, label] : items) {
    absl::StrAppend(&out, "<li><svg width=\"18\" height=\"12\" aria-hidden=\"true\">",
                    "<rect width=\"18\" height=\"12\" fill=\"url(#", fill->id,
                    ")\" stroke=\"#333\"/></svg>", Escape(label), "</li>");
  }
  return out + "</ul>";
}

constexpr double kW = 960, kH = 320, kLeft = 84, kRight = 20, kTop = 20, kBottom = 40;

std::string Axes(double x_max_s, double y_max, absl::string_view y_unit, double plot_h) {
  std::string out;
  const double pw = kW - kLeft - kRight;
  absl::StrAppendFormat(&out,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"axis\"/>",
                        kLeft, kTop + plot_h, kLeft + pw, kTop + plot_h);
  const double xs = TickStep(x_max_s, 8);
  for (double x = 0; x <= x_max_s * 1.0001; x += xs) {
    const double px = kLeft + pw * x / x_max_s;
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"tick\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" class=\"xt\">%s</text>",
                          px, kTop + plot_h, px, kTop + plot_h + 4, px, kTop + plot_h + 16,
                          Escape(FormatSeconds(x)));
  }
  if (y_max > 0) {
    const double ys = TickStep(y_max, 5);
    for (double y = 0; y <= y_max * 1.0001; y += ys) {
      const double py = kTop + plot_h - plot_h * y / y_max;
      absl::StrAppendFormat(&out,
                            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                            "<text x=\"%.1f\" y=\"%.1f\" class=\"yt\">%g %s</text>",
                            kLeft, py, kLeft + pw, py, kLeft - 6, py + 4, y, y_unit);
    }
  }
  return out;
}

constexpr int kBuckets = 480;

// A GPU's memory sampled in kBuckets columns over the step: each column holds the breakdown at
// the first moment of its highest total, a column no change falls in what memory held before.
class MemoryColumns {
 public:
  explicit MemoryColumns(Duration step)
      : step_ps_(static_cast<double>(step.picoseconds())),
        columns_(kBuckets),
        best_(kBuckets, -1) {}

  // The column of a change at `t` (changes come in time order).
  int ColumnOf(Duration t) const {
    return std::clamp(static_cast<int>(static_cast<double>(t.picoseconds()) / step_ps_ * kBuckets),
                      last_, kBuckets - 1);
  }
  void Change(Duration t, MemCategory category, Bytes delta) {
    const int b = ColumnOf(t);
    Fill(b);
    now_[static_cast<int>(category)] += delta;
    total_ += delta.count();
    if (total_ > best_[b]) {
      best_[b] = total_;
      columns_[b] = now_;
    }
  }
  // A run of changes in column `b`, from the level now on: `high` above it at the first of
  // its highest (`at`, the breakdown added by then), `end` added by its end.
  void Run(int b, int64_t high, const memory::Breakdown& at, int64_t end_total,
           const memory::Breakdown& end) {
    Fill(b);
    if (total_ + high > best_[b]) {
      best_[b] = total_ + high;
      columns_[b] = Plus(now_, at);
    }
    now_ = Plus(now_, end);
    total_ += end_total;
  }
  const std::vector<memory::Breakdown>& Finish() {
    Fill(kBuckets);
    return columns_;
  }

 private:
  static memory::Breakdown Plus(memory::Breakdown a, const memory::Breakdown& b) {
    for (size_t c = 0; c < a.size(); ++c) a[c] += b[c];
    return a;
  }
  // Columns between the last change's and `b` hold what memory held after it.
  void Fill(int b) {
    for (int gap = last_ + 1; gap < b; ++gap) columns_[gap] = now_;
    last_ = std::min(b, kBuckets - 1);
  }

  double step_ps_;
  std::vector<memory::Breakdown> columns_;
  std::vector<int64_t> best_;  // the highest total seen in each column
  memory::Breakdown now_{};
  int64_t total_ = 0;
  int last_ = 0;  // the column of the previous change
};

// The window of a folded step's changes on one GPU (StepRecords::change_runs), summed from
// a copy's start: by each change, what it has added in all and by category, and the first of
// its highest totals up to there and from there on. A copy that falls in one or two columns is
// then sampled in one or two runs (MemoryColumns::Run), whatever its length.
struct WindowSums {
  std::vector<int64_t> total;
  std::vector<memory::Breakdown> added;
  std::vector<int64_t> best_to, best_from;  // indices of the first highest total

  WindowSums(const replay::StepRecords& records, int32_t gpu,
             const replay::StepRecords::Runs& runs) {
    const auto n = static_cast<size_t>(runs.size);
    total.resize(n);
    added.resize(n);
    best_to.resize(n);
    best_from.resize(n);
    int64_t t = 0;
    memory::Breakdown b{};
    for (size_t k = 0; k < n; ++k) {
      const memory::MemoryChange c = records.bare_change(gpu, runs.first + static_cast<int64_t>(k));
      t += c.delta.count();
      b[static_cast<int>(c.category)] += c.delta;
      total[k] = t;
      added[k] = b;
      best_to[k] = k > 0 && total[best_to[k - 1]] >= t ? best_to[k - 1] : static_cast<int64_t>(k);
    }
    for (size_t k = n; k-- > 0;) {
      best_from[k] = k + 1 < n && total[best_from[k + 1]] > total[k] ? best_from[k + 1]
                                                                     : static_cast<int64_t>(k);
    }
  }
};

// The peak GPU's memory over the step, stacked by category, sampled in kBuckets columns at
// each column's highest moment (so no peak falls between samples).
std::string MemoryChart(const replay::ReplayResult& r, const RunSummary& sum) {
  const replay::StepRecords records(r);
  const int32_t gpu = r.peak_rank;
  const int64_t changes = records.changes(gpu);
  if (changes == 0 || r.step <= Duration::Zero()) return "<p>No memory timeline.</p>";
  MemoryColumns sampled(r.step);
  const replay::StepRecords::Runs runs = records.change_runs(gpu);
  std::optional<WindowSums> sums;
  if (runs.size > 0) sums.emplace(records, gpu, runs);
  const auto time_of = [&](int64_t i) { return records.bare_change(gpu, i).time; };
  for (int64_t i = 0; i < changes; ++i) {
    // A folded step's window copy in one or two columns: sampled in one run per column.
    if (sums && i >= runs.first && i < runs.first + runs.copies * runs.size &&
        (i - runs.first) % runs.size == 0) {
      const int64_t end = i + runs.size - 1;
      const int first = sampled.ColumnOf(time_of(i));
      const int last = sampled.ColumnOf(time_of(end));
      const WindowSums& w = *sums;
      if (first == last) {
        const int64_t k = w.best_to.back(), e = runs.size - 1;
        sampled.Run(first, w.total[k], w.added[k], w.total[e], w.added[e]);
        i = end;
        continue;
      }
      // The first change in a later column.
      int64_t lo = i + 1, hi = end;
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (sampled.ColumnOf(time_of(mid)) > first) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      if (sampled.ColumnOf(time_of(lo)) == last) {
        const int64_t p = lo - i, e = runs.size - 1;
        const int64_t k = w.best_to[p - 1];
        sampled.Run(first, w.total[k], w.added[k], w.total[p - 1], w.added[p - 1]);
        // From the level at p on: what the copy adds past p − 1.
        const int64_t m = w.best_from[p];
        memory::Breakdown at = w.added[m], rest = w.added[e];
        for (size_t c = 0; c < at.size(); ++c) {
          at[c] -= w.added[p - 1][c];
          rest[c] -= w.added[p - 1][c];
        }
        sampled.Run(last, w.total[m] - w.total[p - 1], at, w.total[e] - w.total[p - 1], rest);
        i = end;
        continue;
      }
    }
    const memory::MemoryChange c = records.bare_change(gpu, i);
    sampled.Change(c.time, c.category, c.delta);
  }
  const std::vector<memory::Breakdown>& columns = sampled.Finish();
  const double cap = static_cast<double>(sum.capacity.count());
  const double y_max_bytes = std::max(cap, static_cast<double>(sum.reserved_peak.count())) * 1.08;
  const double y_max = std::max(sum.capacity.gib(), sum.reserved_peak.gib()) * 1.08;
  const double plot_h = kH - kTop - kBottom, pw = kW - kLeft - kRight;
  auto px = [&](int b) { return kLeft + pw * (b + 0.5) / kBuckets; };
  auto py = [&](double bytes) { return kTop + plot_h - plot_h * bytes / y_max_bytes; };
  std::string out = absl::StrFormat(
      "<svg viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"memory over the step\" "
      "id=\"memory-chart\">",
      kW, kH);
  out += Patterns();
  out += Axes(r.step.seconds(), y_max, "GiB", plot_h);
  std::vector<double> below(kBuckets, 0.0);
  for (int c = 0; c < kNumMemCategories; ++c) {
    std::vector<double> above(kBuckets);
    bool any = false;
    for (int b = 0; b < kBuckets; ++b) {
      above[b] = below[b] + static_cast<double>(columns[b][c].count());
      any = any || columns[b][c] > Bytes();
    }
    if (any) {
      std::string points;
      for (int b = 0; b < kBuckets; ++b)
        absl::StrAppendFormat(&points, "%.1f,%.1f ", px(b), py(above[b]));
      for (int b = kBuckets - 1; b >= 0; --b)
        absl::StrAppendFormat(&points, "%.1f,%.1f ", px(b), py(below[b]));
      absl::StrAppend(&out, "<polygon class=\"area\" data-category=\"", kMemCategoryNames[c],
                      "\" points=\"", points, "\" fill=\"url(#", kCategoryFills[c].id,
                      ")\"><title>", kMemCategoryNames[c], "</title></polygon>");
    }
    below = above;
  }
  absl::StrAppendFormat(&out,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"capacity\"/>"
                        "<text x=\"%.1f\" y=\"%.1f\" class=\"label\" text-anchor=\"end\">"
                        "usable capacity %s</text>",
                        kLeft, py(cap), kLeft + pw, py(cap), kLeft + pw - 6, py(cap) - 5,
                        Escape(FormatGiB(sum.capacity)));
  // The areas are the allocated tensors (and the runtime reserve); the verdict is the reserved
  // peak, which adds the caching allocator's held blocks: drawn as its own level.
  absl::StrAppendFormat(&out,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"reserved\" "
                        "id=\"reserved-peak\"/><text x=\"%.1f\" y=\"%.1f\" class=\"label\">"
                        "reserved peak %s (the verdict's: allocator cache included)</text>",
                        kLeft, py(static_cast<double>(sum.reserved_peak.count())), kLeft + pw,
                        py(static_cast<double>(sum.reserved_peak.count())), kLeft + 6,
                        py(static_cast<double>(sum.reserved_peak.count())) - 5,
                        Escape(FormatGiB(sum.reserved_peak)));
  const double peak_x = kLeft + pw * sum.peak_at.seconds() / r.step.seconds();
  absl::StrAppendFormat(&out,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"peak\" "
                        "id=\"peak-marker\"/><text x=\"%.1f\" y=\"%.1f\" class=\"label\" "
                        "text-anchor=\"%s\">allocated peak %s</text>",
                        peak_x, kTop, peak_x, kTop + plot_h, peak_x + (peak_x > kW / 2 ? -6 : 6),
                        std::max(kTop + 12, py(static_cast<double>(sum.peak.count())) - 8),
                        peak_x > kW / 2 ? "end" : "start", Escape(FormatGiB(sum.peak)));
  out += "</svg>";
  std::vector<std::pair<const Fill*, std::string>> legend;
  for (int c = 0; c < kNumMemCategories; ++c) {
    if (sum.peak_breakdown[c] == Bytes() && sum.category_peaks[c] == Bytes()) continue;
    legend.push_back(
        {&kCategoryFills[c],
         absl::StrCat(kMemCategoryNames[c], " ", FormatGiB(sum.peak_breakdown[c]), " at peak")});
  }
  return out + Legend(legend);
}

// One micro-batch period of the peak GPU's streams: the middle micro-batch's compute span
// (at most 20,000 ops drawn, which keeps a page of a long pipeline period readable).
std::string StreamChart(const Scenario& s, const replay::ReplayResult& r) {
  const int32_t rank = r.peak_rank;
  const int32_t target = static_cast<int32_t>(s.micro_batches() / 2);
  Duration lo = r.step, hi = Duration::Zero();
  // Of a folded step, only the window copies that hold the micro-batch, or meet its span.
  const replay::StepRecords records(r);
  records.ForEachTimingIn(records.CopiesLabelled({{target, target}}), [&](int64_t i) {
    const auto [t, op] = records.timing(i);
    if (t.rank == rank && op.micro_batch == target && op.stream == StreamKind::kCompute &&
        op.pass != OpPass::kStep) {
      lo = std::min(lo, t.start);
      hi = std::max(hi, t.end);
    }
    return true;
  });
  if (hi <= lo) {
    lo = Duration::Zero();
    hi = r.step;
  }
  if (hi <= lo) return "<p>No op timeline.</p>";
  constexpr double kLane = 34;
  const double plot_h = kLane * kNumStreams, pw = kW - kLeft - kRight;
  const double h = plot_h + kTop + kBottom;
  const double span = static_cast<double>((hi - lo).picoseconds());
  std::string out = absl::StrFormat(
      "<svg viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"streams over one micro-batch\" "
      "id=\"stream-chart\">",
      kW, h);
  out += Patterns();
  for (int st = 0; st < kNumStreams; ++st) {
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" class=\"lane\">%s</text>", kLeft - 6,
                          kTop + kLane * st + kLane / 2 + 4, kStreamNames[st]);
  }
  // The x axis in seconds from the period's start.
  out += Axes((hi - lo).seconds(), 0, "", plot_h);
  int drawn = 0;
  std::array<bool, kNumWork> used{};
  records.ForEachTimingIn(records.CopiesMeeting(rank, lo, hi), [&](int64_t i) {
    const auto [t, op] = records.timing(i);
    if (t.rank != rank || t.end <= lo || t.start >= hi) return true;
    const Work w = WorkOf(op);
    used[static_cast<int>(w)] = true;
    const double x0 = static_cast<double>((std::max(t.start, lo) - lo).picoseconds()) / span;
    const double x1 = static_cast<double>((std::min(t.end, hi) - lo).picoseconds()) / span;
    const int lane = static_cast<int>(op.stream);
    absl::StrAppendFormat(&out,
                          "<rect class=\"op\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
                          "fill=\"url(#%s)\"><title>%s, %s</title></rect>",
                          kLeft + pw * x0, kTop + kLane * lane + 4, std::max(0.6, pw * (x1 - x0)),
                          kLane - 8, kWorkFills[static_cast<int>(w)].id,
                          Escape(OpLabel(op, r.program.layers)),
                          Escape(FormatSeconds((t.end - t.start).seconds())));
    return ++drawn < 20000;
  });
  out += "</svg>";
  std::vector<std::pair<const Fill*, std::string>> legend;
  for (int w = 0; w < kNumWork; ++w) {
    if (used[w]) legend.push_back({&kWorkFills[w], kWorkNames[w]});
  }
  return absl::StrCat(
      out, Legend(legend),
      absl::StrFormat("<p class=\"note\">Micro-batch %d of %d on GPU %d, from t = %s to %s; "
                      "blank stretches of the compute lane are waits (pipeline bubble, exposed "
                      "communication).</p>",
                      target, s.micro_batches(), r.GpuOf(rank), FormatSeconds(lo.seconds()),
                      FormatSeconds(hi.seconds())));
}

std::string TimeTable(const RunSummary& r) {
  const double step = r.step.seconds();
  std::string out =
      "<table id=\"time-table\">" + html::TableRow({"time per step", "seconds", "share"}, true);
  auto add = [&](const char* name, Duration d) {
    out += html::TableRow({name, absl::StrFormat("%.4f", d.seconds()),
                           absl::StrFormat("%.1f %%", step > 0 ? 100 * d.seconds() / step : 0.0)});
  };
  add("compute (fwd+bwd)", r.times.compute);
  add("recompute", r.times.recompute);
  add("exposed communication", r.times.exposed_comm);
  add("optimizer", r.times.optimizer);
  if (r.times.bubble > Duration::Zero()) add("pipeline bubble", r.times.bubble);
  if (r.times.exposed_pcie > Duration::Zero()) add("exposed offload copies", r.times.exposed_pcie);
  add("step", r.step);
  return out + "</table>";
}

// The step over `run --trials N`'s speed draws: a histogram of the trials' steps in 20 equal
// bins with the ideal step marked, and the percentiles beside it.
std::string StepHistogram(const RunSummary& r) {
  const replay::StepDistribution& d = *r.distribution;
  const double lo = std::min(d.ideal, *std::min_element(d.steps.begin(), d.steps.end())).seconds();
  const double hi = std::max(d.ideal, *std::max_element(d.steps.begin(), d.steps.end())).seconds();
  constexpr int kBins = 20;
  const double width = hi > lo ? (hi - lo) / kBins : 1;
  std::array<int64_t, kBins> count{};
  for (Duration t : d.steps) {
    ++count[std::min(kBins - 1, static_cast<int>((t.seconds() - lo) / width))];
  }
  const int64_t most = *std::max_element(count.begin(), count.end());
  constexpr double kW = 640, kH = 200, kLeft = 40, kBottom = 30;
  auto x_of = [&](double v) {
    return kLeft + (hi > lo ? (v - lo) / (hi - lo) : 0.5) * (kW - kLeft - 10);
  };
  std::string svg = absl::StrFormat(
      "<svg id=\"step-histogram\" width=\"%.0f\" height=\"%.0f\" role=\"img\" "
      "aria-label=\"steps of %d trials\">",
      kW, kH + kBottom, d.trials);
  const double bar = (kW - kLeft - 10) / kBins;
  for (int i = 0; i < kBins; ++i) {
    if (count[i] == 0) continue;
    const double h = (kH - 10) * static_cast<double>(count[i]) / static_cast<double>(most);
    absl::StrAppendFormat(&svg,
                          "<rect class=\"bin\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                          "height=\"%.1f\" fill=\"#4c78a8\"><title>%s .. %s: %d trials</title>"
                          "</rect>",
                          kLeft + i * bar, kH - h, bar - 1, h,
                          html::Escape(FormatSeconds(lo + i * width)),
                          html::Escape(FormatSeconds(lo + (i + 1) * width)), count[i]);
  }
  absl::StrAppendFormat(&svg,
                        "<line id=\"ideal-step\" x1=\"%.1f\" x2=\"%.1f\" y1=\"0\" y2=\"%.0f\" "
                        "stroke=\"#e45756\" stroke-dasharray=\"4 3\"/>",
                        x_of(d.ideal.seconds()), x_of(d.ideal.seconds()), kH);
  absl::StrAppendFormat(&svg,
                        "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\">%s</text>"
                        "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" "
                        "text-anchor=\"end\">%s</text></svg>",
                        kLeft, kH + 18, html::Escape(FormatSeconds(lo)), kW - 10, kH + 18,
                        html::Escape(FormatSeconds(hi)));
  std::string table = "<table id=\"distribution-table\">" +
                      html::TableRow({"step over the trials", "seconds"}, true);
  for (const auto& [name, t] :
       {std::pair{"ideal (every GPU at its calibrated speed)", d.ideal}, std::pair{"P50", d.p50},
        std::pair{"P90", d.p90}, std::pair{"P99", d.p99}, std::pair{"mean", d.mean}}) {
    table += html::TableRow({name, absl::StrFormat("%.4f", t.seconds())});
  }
  table += html::TableRow({"slowdown of the mean", absl::StrFormat("%+.2f %%", 100 * d.slowdown)});
  // The slower trials by what paced them (replay::SlowCause's order).
  constexpr std::array<const char*, replay::kNumSlowCauses> kPacedBy = {
      "trials paced by the spread", "trials paced by a slow GPU", "trials paced by a slow node",
      "trials paced by a slow link"};
  for (int c = 0; c < replay::kNumSlowCauses; ++c) {
    if (d.paced_by[c] > 0) table += html::TableRow({kPacedBy[c], absl::StrCat(d.paced_by[c])});
  }
  return svg + table + "</table>";
}

// The whole run (sim/report/whole_run.h) with its Monte Carlo check, as the text report says it.
std::string WholeRunTable(const RunSummary& r) {
  WholeRun w = r.whole_run;
  MonteCarloEttr(w, w.trials, w.seed);
  std::string out =
      "<table id=\"whole-run-table\">" + html::TableRow({"the whole run", "value"}, true);
  auto add = [&](const std::string& name, const std::string& value) {
    out += html::TableRow({name, value});
  };
  add("tokens", absl::StrCat(FormatCount(w.tokens), w.tokens_default ? " (20 per parameter)" : ""));
  add("steps; days of steps alone", absl::StrFormat("%.0f; %.1f days", w.steps, w.productive_days));
  add("interruptions per day (MTBF)",
      absl::StrFormat("%.2f (%.1f h)", w.interruptions_per_day, w.mtbf_h));
  add("checkpoint: states, write, stall, interval",
      absl::StrFormat("%s, %s, %s, %s%s", FormatGiB(Bytes::Round(w.checkpoint_bytes)),
                      FormatSeconds(w.save_s), FormatSeconds(w.stall_s),
                      FormatSeconds(w.interval_s), w.interval_optimal ? " (Young/Daly)" : ""));
  add("restart (detect + restart + reload)", FormatSeconds(w.restart_s));
  add("ETTR (Monte Carlo mean, p10-p90)",
      absl::StrFormat("%.3f (%.3f, %.3f-%.3f over %d runs)", w.ettr, w.ettr_mc, w.ettr_mc_p10,
                      w.ettr_mc_p90, w.trials));
  add("effective days", absl::StrFormat("%.1f", w.effective_days));
  add("power: per GPU over the step, per node host, PUE",
      absl::StrFormat("%.0f W, %.0f W, %.2f", w.gpu_watts, w.host_watts, w.pue));
  add("energy: per step, for the run",
      absl::StrFormat("%.3f kWh, %.1f MWh%s", w.step_kwh, w.energy_mwh,
                      w.tco2e ? absl::StrFormat(" (%.0f tCO2e)", *w.tco2e) : std::string()));
  add("tokens per joule", absl::StrFormat("%.3g", w.tokens_per_joule));
  add("cost", w.cost_usd ? absl::StrFormat("$%.0f (%s): training $%.0f, failures and "
                                           "checkpoints $%.0f, electricity $%.0f",
                                           *w.cost_usd, w.cost_basis, w.cost_compute_usd,
                                           w.cost_failures_usd, w.cost_energy_usd)
                         : w.cost_basis);
  return out + "</table>";
}

std::string CollectiveTable(const RunSummary& r) {
  std::string out = "<table id=\"collective-table\">" +
                    html::TableRow({"per GPU per step", "count", "sent GB", "time s", "bus GB/s",
                                    "algorithms", "busiest link"},
                                   true);
  for (const CollectiveSummary& c : r.collectives) {
    if (c.sent == Bytes()) continue;
    std::vector<std::string> algorithms;
    for (const auto& [a, n] : c.algorithms) algorithms.push_back(absl::StrCat(Name(a), " ", n));
    out += html::TableRow({std::string(Name(c.kind)), absl::StrCat(c.count),
                           absl::StrFormat("%.3f", static_cast<double>(c.sent.count()) / 1e9),
                           absl::StrFormat("%.3f", c.time.seconds()),
                           absl::StrFormat("%.1f", c.bus_bandwidth_bytes_per_s / 1e9),
                           absl::StrJoin(algorithms, ", "), c.busiest_link});
  }
  return out + "</table>";
}

}  // namespace

std::string RunHtml(const Scenario& s, const replay::ReplayResult& r, const RunSummary& sum) {
  const std::string name = sum.Title();
  std::string out;
  absl::StrAppend(&out, "<h1>", Escape(name), "</h1><p>", Escape(sum.model), " on ", sum.gpus,
                  " x ", Escape(sum.gpu), " (", Escape(sum.node), "), ", Name(sum.framework),
                  " ZeRO-", sum.replayed_zero_stage, ", dp ", sum.dp, ", tp ", sum.tp, ", pp ",
                  sum.pp, ", cp ", sum.cp, sum.ep > 1 ? absl::StrCat(", ep ", sum.ep) : "", ", ",
                  sum.micro_batches, " micro-batch", sum.micro_batches == 1 ? "" : "es", "</p>\n");
  const Bytes cap = sum.capacity;
  const std::string headroom = sum.reserved_peak <= cap
                                   ? absl::StrCat(FormatGiB(cap - sum.reserved_peak), " free")
                                   : absl::StrCat(FormatGiB(sum.reserved_peak - cap), " over");
  absl::StrAppend(&out, "<p id=\"verdict\" class=\"verdict ", sum.fits ? "fits" : "nofit", "\">",
                  sum.fits ? "FITS" : "DOES NOT FIT", ": reserved peak ",
                  Escape(FormatGiB(sum.reserved_peak)), " of ", Escape(FormatGiB(cap)),
                  " usable per GPU (", Escape(headroom), ")</p>\n");
  absl::StrAppend(&out, "<p id=\"peak\">Peak <strong>", Escape(FormatGiB(sum.peak)),
                  "</strong> allocated at t = ", Escape(FormatSeconds(sum.peak_at.seconds())),
                  " in ", Escape(sum.peak_op), " (GPU ", sum.peak_gpu, ")</p>\n");
  absl::StrAppend(
      &out, "<p id=\"step\">Step <strong>", Escape(FormatSeconds(sum.step.seconds())),
      "</strong>; MFU ", absl::StrFormat("%.1f %%", 100 * sum.mfu), ", HFU ",
      absl::StrFormat("%.1f %%", 100 * sum.hfu), "; ",
      absl::StrFormat("%.0f tokens/s (%.1f per GPU)", sum.tokens_per_s, sum.tokens_per_s_per_gpu),
      "</p>\n");
  absl::StrAppend(&out, "<h2>Memory of the peak GPU over the step</h2>", MemoryChart(r, sum));
  std::string breakdown =
      "<table id=\"memory-table\">" +
      html::TableRow({"memory per GPU", "at peak", "category's own peak"}, true);
  for (int c = 0; c < kNumMemCategories; ++c) {
    breakdown +=
        html::TableRow({std::string(kMemCategoryNames[c]), FormatGiB(sum.peak_breakdown[c]),
                        FormatGiB(sum.category_peaks[c])});
  }
  breakdown += html::TableRow({"total", FormatGiB(sum.peak), ""}) + "</table>";
  absl::StrAppend(&out, breakdown);
  absl::StrAppend(&out, "<h2>One micro-batch on the peak GPU's streams</h2>", StreamChart(s, r));
  absl::StrAppend(&out, "<h2>Where the step goes</h2>", TimeTable(sum));
  if (sum.distribution) {
    absl::StrAppend(&out, "<h2>The step over ", sum.distribution->trials,
                    " trials of the GPUs' speeds</h2>", StepHistogram(sum));
  }
  absl::StrAppend(&out, "<h2>Collectives</h2>", CollectiveTable(sum));
  absl::StrAppend(&out, "<h2>The whole run: failures, checkpoints, energy, cost</h2>",
                  WholeRunTable(sum));
  absl::StrAppend(&out, "<p class=\"note\">Written by stepsim run; ", sum.ops, " ops replayed as ",
                  sum.events, " events.</p>\n");
  return html::Page(absl::StrCat("stepsim: ", name), out);
}

}  // namespace sim::report
