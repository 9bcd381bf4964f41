#include "sim/report/rows_html.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/report/html_page.h"
#include "sim/report/table.h"

namespace sim::report {

namespace {

// The first label's values in first-seen order (the x axis), and the rows grouped by the other
// labels (the series).
html::XYChart ChartOf(const std::string& id, const std::string& y_label,
                      const std::vector<std::string>& label_names, const std::vector<Row>& rows,
                      double (*metric)(const RunSummary&)) {
  html::XYChart c;
  c.id = id;
  c.y_label = y_label;
  c.x_title = label_names.empty() ? "" : label_names[0];
  std::vector<std::string> series_names;
  std::map<std::string, size_t> series_index;
  for (const Row& r : rows) {
    if (r.labels.empty()) continue;
    auto x = std::find(c.x_labels.begin(), c.x_labels.end(), r.labels[0]);
    if (x == c.x_labels.end()) x = c.x_labels.insert(c.x_labels.end(), r.labels[0]);
    std::vector<std::string> rest;
    for (size_t i = 1; i < r.labels.size() && i < label_names.size(); ++i) {
      rest.push_back(absl::StrCat(label_names[i], "=", r.labels[i]));
    }
    const std::string name = rest.empty() ? y_label : absl::StrJoin(rest, ", ");
    auto [it, added] = series_index.emplace(name, c.series.size());
    if (added) c.series.push_back({name, {}});
    if (!r.summary) continue;
    c.series[it->second].points.push_back(
        {static_cast<int>(x - c.x_labels.begin()), metric(*r.summary),
         absl::StrCat(absl::StrJoin(r.labels, ", "), ": ",
                      absl::StrFormat("%.4g", metric(*r.summary)), " ", y_label)});
  }
  return c;
}

}  // namespace

std::string RowsHtml(const std::string& title, const std::string& held,
                     const std::vector<std::string>& label_names, const std::vector<Row>& rows) {
  std::string body = absl::StrCat("<h1>", html::Escape(title), "</h1>");
  if (!held.empty()) absl::StrAppend(&body, "<p id=\"held\">", html::Escape(held), "</p>");
  html::XYChart peak = ChartOf("peak-chart", "peak GiB per GPU", label_names, rows,
                               [](const RunSummary& s) { return s.reserved_peak.gib(); });
  for (const Row& r : rows) {
    if (!r.summary) continue;
    peak.limit = r.summary->capacity.gib();
    peak.limit_label = absl::StrCat("usable capacity ", FormatGiB(r.summary->capacity));
    break;
  }
  const html::XYChart step = ChartOf("step-chart", "step s", label_names, rows,
                                     [](const RunSummary& s) { return s.step.seconds(); });
  absl::StrAppend(&body, "<h2>Reserved peak per GPU</h2>", html::Chart(peak), "<h2>Step time</h2>",
                  html::Chart(step));
  std::vector<std::string> header = label_names;
  for (const char* h : {"fits", "reserved peak GiB", "peak GiB", "step s", "MFU", "tokens/s/GPU",
                        "exposed comm s", "sent GB per GPU", "error"}) {
    header.push_back(h);
  }
  std::string table = "<table id=\"rows-table\">" + html::TableRow(header, true);
  for (const Row& r : rows) {
    std::vector<std::string> cells = r.labels;
    if (!r.summary) {
      for (int i = 0; i < 8; ++i) cells.push_back("-");
      cells.push_back(r.error);
    } else {
      const RunSummary& s = *r.summary;
      Bytes sent;
      for (Bytes b : s.comm_bytes_sent) sent += b;
      for (const std::string& v :
           {std::string(s.fits ? "yes" : "no"), absl::StrFormat("%.2f", s.reserved_peak.gib()),
            absl::StrFormat("%.2f", s.peak.gib()), absl::StrFormat("%.4f", s.step.seconds()),
            absl::StrFormat("%.4f", s.mfu), absl::StrFormat("%.1f", s.tokens_per_s_per_gpu),
            absl::StrFormat("%.4f", s.times.exposed_comm.seconds()),
            absl::StrFormat("%.3f", static_cast<double>(sent.count()) / 1e9), std::string()}) {
        cells.push_back(v);
      }
    }
    table += html::TableRow(cells);
  }
  absl::StrAppend(&body, "<h2>Every configuration</h2><div class=\"wide\">", table,
                  "</table></div>");
  return html::Page(absl::StrCat("stepsim: ", title), body);
}

}  // namespace sim::report
