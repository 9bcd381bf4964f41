#include "sim/report/html_page.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "sim/base/text_escape.h"

namespace sim::report::html {

namespace {

constexpr const char* kStyle = R"(
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#222;margin:0 auto;
max-width:1000px;padding:1em}
h1{font-size:1.35em;margin:.2em 0}h2{font-size:1.1em;margin:1.4em 0 .4em;border-bottom:1px solid #ccc}
.verdict{font-weight:600;padding:.5em .8em;border:2px solid;display:inline-block}
.fits{border-color:#2e7d32}.nofit{border-color:#c62828}
svg{width:100%;height:auto;display:block}
.axis,.tick{stroke:#333}.grid{stroke:#ddd}.xt{font-size:11px;text-anchor:middle}
.yt,.lane{font-size:11px;text-anchor:end}.label{font-size:12px;font-weight:600}
.capacity{stroke:#c62828;stroke-width:2;stroke-dasharray:8 4}.peak{stroke:#000;stroke-width:1.5;
stroke-dasharray:3 3}.reserved{stroke:#555;stroke-width:1.5;stroke-dasharray:2 4}
.area{stroke:#fff;stroke-width:.3}.op{stroke:#222;stroke-width:.2}
.series{fill:none;stroke-width:2}.point{stroke:#000;stroke-width:.8}
.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.4em 1.2em;font-size:13px}
.legend svg{display:inline;width:18px;vertical-align:middle;margin-right:.3em}
table{border-collapse:collapse;margin:.4em 0;font-size:14px}.wide{overflow-x:auto}
td,th{border:1px solid #bbb;padding:.2em .6em;text-align:right}td:first-child,th:first-child{text-align:left}
.note{font-size:13px;color:#555}
@media print{body{max-width:none}h2{break-after:avoid}svg{break-inside:avoid}}
)";

// Series styles: colour, dash and marker, distinct in grey.
struct Style {
  const char* colour;
  const char* dash;  // stroke-dasharray ("" = solid)
  int marker;        // 0 circle, 1 square, 2 triangle, 3 diamond, 4 cross
};
constexpr std::array<Style, 8> kStyles = {{{"#4e79a7", "", 0},
                                           {"#f28e2b", "7 3", 1},
                                           {"#59a14f", "2 3", 2},
                                           {"#e15759", "10 3 2 3", 3},
                                           {"#76b7b2", "", 4},
                                           {"#b07aa1", "7 3", 0},
                                           {"#9c755f", "2 3", 1},
                                           {"#edc948", "10 3 2 3", 2}}};

std::string FilledMarker(int shape, double x, double y, const char* colour) {
  switch (shape) {
    case 1:
      return absl::StrFormat(
          "<rect class=\"point\" x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" "
          "fill=\"%s\"",
          x - 4, y - 4, colour);
    case 2:
      return absl::StrFormat(
          "<polygon class=\"point\" points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" "
          "fill=\"%s\"",
          x, y - 5, x - 5, y + 4, x + 5, y + 4, colour);
    case 3:
      return absl::StrFormat(
          "<polygon class=\"point\" points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\" "
          "fill=\"%s\"",
          x, y - 5, x + 5, y, x, y + 5, x - 5, y, colour);
    case 4:
      return absl::StrFormat(
          "<path class=\"point\" d=\"M%.1f,%.1f l8,8 m0,-8 l-8,8\" "
          "stroke=\"%s\" stroke-width=\"2.5\"",
          x - 4, y - 4, colour);
    default:
      return absl::StrFormat("<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"",
                             x, y, colour);
  }
}

// A marker's opening tag; `apart` draws it hollow (white inside, its colour as the outline), as
// the charts draw configurations that do not fit.
std::string Marker(int shape, double x, double y, const char* colour, bool apart = false) {
  if (!apart) return FilledMarker(shape, x, y, colour);
  std::string m = FilledMarker(shape, x, y, shape == 4 ? colour : "#fff");
  absl::StrReplaceAll({{"class=\"point\"", "class=\"point apart\""}}, &m);
  if (shape == 4) return m + " opacity=\"0.45\"";
  return m + absl::StrFormat(" style=\"stroke:%s;stroke-width:1.8\"", colour);
}

}  // namespace

double TickStep(double top, int n) {
  const double raw = top / n;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

std::string Escape(absl::string_view text) { return HtmlEscape(text); }

std::string Page(absl::string_view title, absl::string_view body) {
  return absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>",
      Escape(title), "</title><style>", kStyle, "</style></head><body>\n", body,
      "</body></html>\n");
}

std::string TableRow(const std::vector<std::string>& cells, bool header) {
  std::string out = "<tr>";
  for (const std::string& c : cells) {
    absl::StrAppend(&out, header ? "<th>" : "<td>", Escape(c), header ? "</th>" : "</td>");
  }
  return out + "</tr>";
}

std::string Chart(const XYChart& c) {
  constexpr double kW = 960, kH = 340, kLeft = 84, kRight = 24, kTop = 24, kBottom = 56;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  double lo = std::numeric_limits<double>::max(), hi = 0;
  for (const Series& s : c.series) {
    for (const auto& p : s.points) {
      if (p.y > 0) lo = std::min(lo, p.y);
      hi = std::max(hi, p.y);
    }
  }
  if (c.limit) {
    lo = std::min(lo, *c.limit);
    hi = std::max(hi, *c.limit);
  }
  if (hi <= 0) return "<p>Nothing to chart.</p>";
  const bool log = lo > 0 && hi / lo > 10;
  const double y_lo = log ? std::pow(10.0, std::floor(std::log10(lo))) : 0.0;
  // A linear axis ends on a round tick above the highest value.
  const double linear_step = TickStep(hi * 1.1, 5);
  const double y_hi = log ? std::pow(10.0, std::ceil(std::log10(hi)))
                          : std::ceil(hi * 1.1 / linear_step) * linear_step;
  auto py = [&](double y) {
    const double f = log ? (std::log10(std::max(y, y_lo)) - std::log10(y_lo)) /
                               (std::log10(y_hi) - std::log10(y_lo))
                         : (y - y_lo) / (y_hi - y_lo);
    return kTop + ph - ph * f;
  };
  // A numeric x axis spans the points' values between round ticks (from 0 when they reach
  // near it), so that its spacing is real.
  const bool numeric = static_cast<bool>(c.x_format);
  double x_lo = std::numeric_limits<double>::max(), x_hi = 0;
  for (const Series& s : c.series) {
    for (const auto& p : s.points) {
      x_lo = std::min(x_lo, p.xv);
      x_hi = std::max(x_hi, p.xv);
    }
  }
  if (x_lo > x_hi || x_lo < 0.3 * x_hi) x_lo = 0;
  const double x_step = TickStep(std::max(x_hi - x_lo, 1e-300) * 1.1, 6);
  x_lo = std::floor(x_lo / x_step) * x_step;
  x_hi = std::max(x_lo + x_step, std::ceil(x_hi * 1.0001 / x_step) * x_step);
  const int n = std::max<int>(1, static_cast<int>(c.x_labels.size()));
  auto px = [&](int i) { return kLeft + pw * (i + 0.5) / n; };
  auto pxv = [&](double x) { return kLeft + pw * (x - x_lo) / (x_hi - x_lo); };
  // Series side by side at each x (6 px apart), so that equal values stay visible.
  const double dodge = c.lines && !numeric ? 6.0 : 0.0;
  auto sx = [&](size_t k, const Series::Point& p) {
    if (numeric) return pxv(p.xv);
    return px(p.x) +
           dodge * (static_cast<double>(k) - (static_cast<double>(c.series.size()) - 1) / 2);
  };
  std::string out = absl::StrFormat(
      "<svg viewBox=\"0 0 %.0f %.0f\" role=\"img\" id=\"%s\" aria-label=\"%s against %s\">", kW, kH,
      Escape(c.id), Escape(c.y_label), Escape(c.x_title));
  // Axes and grid.
  absl::StrAppendFormat(&out,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"axis\"/>",
                        kLeft, kTop + ph, kLeft + pw, kTop + ph);
  std::vector<double> ticks;
  if (log) {
    for (double y = y_lo; y <= y_hi * 1.0001; y *= 10) ticks.push_back(y);
  } else {
    for (double y = 0; y <= y_hi * 1.0001; y += linear_step) ticks.push_back(y);
  }
  for (double y : ticks) {
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" class=\"yt\">%g</text>",
                          kLeft, py(y), kLeft + pw, py(y), kLeft - 6, py(y) + 4, y);
  }
  if (numeric) {
    for (double x = x_lo; x <= x_hi + x_step * 1e-4; x += x_step) {
      absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" class=\"xt\">%s</text>", pxv(x),
                            kTop + ph + 16, Escape(c.x_format(x)));
    }
  }
  for (int i = 0; !numeric && i < n && i < static_cast<int>(c.x_labels.size()); ++i) {
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" class=\"xt\">%s</text>", px(i),
                          kTop + ph + 16, Escape(c.x_labels[i]));
  }
  absl::StrAppendFormat(&out,
                        "<text x=\"%.1f\" y=\"%.1f\" class=\"xt\">%s</text>"
                        "<text x=\"14\" y=\"%.1f\" class=\"label\" transform=\"rotate(-90 14 "
                        "%.1f)\" text-anchor=\"middle\">%s%s</text>",
                        kLeft + pw / 2, kH - 8, Escape(c.x_title), kTop + ph / 2, kTop + ph / 2,
                        Escape(c.y_label), log ? " (log scale)" : "");
  if (c.limit) {
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                          "class=\"capacity\" id=\"%s-limit\"/><text x=\"%.1f\" y=\"%.1f\" "
                          "class=\"label\" text-anchor=\"end\">%s</text>",
                          kLeft, py(*c.limit), kLeft + pw, py(*c.limit), Escape(c.id),
                          kLeft + pw - 4, py(*c.limit) - 5, Escape(c.limit_label));
  }
  if (c.mark) {
    const double mx = numeric ? pxv(c.mark->first) : px(static_cast<int>(c.mark->first));
    absl::StrAppendFormat(
        &out,
        "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"9\" class=\"mark\" id=\"%s-mark\" "
        "fill=\"none\" stroke=\"#000\" stroke-width=\"2\"><title>%s</title></circle>",
        mx, py(c.mark->second), Escape(c.id), Escape(c.mark_label));
  }
  std::string legend = "<ul class=\"legend\">";
  for (size_t k = 0; k < c.series.size(); ++k) {
    const Style& st = kStyles[k % kStyles.size()];
    const Series& s = c.series[k];
    if (c.lines && s.points.size() > 1) {
      std::string points;
      for (const auto& p : s.points)
        absl::StrAppendFormat(&points, "%.1f,%.1f ", sx(k, p), py(p.y));
      absl::StrAppendFormat(&out,
                            "<polyline class=\"series\" points=\"%s\" stroke=\"%s\" "
                            "stroke-dasharray=\"%s\"/>",
                            points, st.colour, st.dash);
    }
    for (const auto& p : s.points) {
      if (!p.label.empty()) {
        absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" class=\"point-label\">%s</text>",
                              sx(k, p) + 6, py(p.y) - 6, Escape(p.label));
      }
      absl::StrAppend(&out, Marker(st.marker, sx(k, p), py(p.y), st.colour, p.apart), "><title>",
                      Escape(p.hover), "</title>",
                      st.marker == 1   ? "</rect>"
                      : st.marker == 4 ? "</path>"
                      : st.marker == 0 ? "</circle>"
                                       : "</polygon>");
    }
    absl::StrAppend(&legend, "<li><svg width=\"18\" height=\"12\" aria-hidden=\"true\">",
                    Marker(st.marker, 9, 6, st.colour), "/></svg>", Escape(s.name), "</li>");
  }
  bool any_apart = false;
  for (const Series& s : c.series) {
    for (const auto& p : s.points) any_apart = any_apart || p.apart;
  }
  if (any_apart && !c.apart_label.empty()) {
    absl::StrAppend(
        &legend, "<li class=\"apart-legend\"><svg width=\"18\" height=\"12\" aria-hidden=\"true\">",
        Marker(0, 9, 6, "#555", true), "/></svg>", Escape(c.apart_label), "</li>");
  }
  return out + "</svg>" + legend + "</ul>";
}

}  // namespace sim::report::html
