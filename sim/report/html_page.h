#pragma once
// The pieces every stepsim HTML page is built of (sim/report/html_report.h, the sweep, compare
// and plan pages): one self-contained document (inline CSS and SVG, nothing fetched), fills that
// pair a colour with a hatch so that series stay apart in grey print, and an x-y chart.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace sim::report::html {

// Text for HTML (sim/base/text_escape.h: HtmlEscape).
std::string Escape(absl::string_view text);
// Round tick steps: 1, 2 or 5 times a power of ten, about `n` of them up to `top`.
double TickStep(double top, int n);

// The whole document around `body`.
std::string Page(absl::string_view title, absl::string_view body);

// <tr> of cells (escaped); header cells with `header`.
std::string TableRow(const std::vector<std::string>& cells, bool header = false);

// One series of an x-y chart: points (x index into the chart's x labels, y), each with a
// hover text.
struct Series {
  std::string name;
  struct Point {
    int x = 0;  // categorical: an index into XYChart::x_labels
    double y = 0;
    std::string hover;
    bool apart = false;  // drawn hollow: a configuration that does not fit (XYChart::apart_label)
    double xv = 0;       // numeric: the x value (XYChart::x_format set)
    std::string label;   // drawn beside the marker ("2624")
  };
  std::vector<Point> points;
};

struct XYChart {
  std::string id;                     // the svg element's id
  std::string y_label;                // "peak GiB"
  std::vector<std::string> x_labels;  // categorical x axis, evenly spaced, in order
  std::string x_title;                // the varied key
  std::vector<Series> series;
  std::optional<double> limit;  // a horizontal dashed line (the usable capacity)
  std::string limit_label;
  bool lines = true;  // join each series' points (false: a scatter)
  // The legend's entry for hollow points (Series::Point::apart), shown when any is.
  std::string apart_label;
  // Set: a numeric linear x axis over the points' `xv` from 0, its round ticks written by it
  // (x_labels unused).
  std::function<std::string(double)> x_format;
  // A point to ring and name (the plan's choice): id "<id>-mark".
  std::optional<std::pair<double, double>> mark;  // (xv or x index, y)
  std::string mark_label;
};
// An SVG chart: a log y axis when the values span more than 10x, each series with its own
// marker shape and dash so that coincident lines stay visible, and a legend.
std::string Chart(const XYChart& chart);

}  // namespace sim::report::html
