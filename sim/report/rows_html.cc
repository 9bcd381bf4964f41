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

// The legend of hollow points: a step time of a configuration that does not fit is what it would
// take on GPUs with room for it, and must not read as an option (at 128K tokens "no recompute"
// is fastest and needs 752 GiB).
constexpr const char* kDoesNotFit = "hollow: does not fit (reserved peak over the usable capacity)";

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
                      absl::StrFormat("%.4g", metric(*r.summary)), " ", y_label,
                      r.summary->fits ? "" : " (does not fit)"),
         !r.summary->fits, 0, ""});
  }
  c.apart_label = kDoesNotFit;
  return c;
}

}  // namespace

namespace {

// The heading, the peak and step-time charts.
std::string HeadAndCharts(const std::string& title, const std::string& held,
                          const std::vector<std::string>& label_names,
                          const std::vector<Row>& rows) {
  std::string body = absl::StrCat("<h1>", html::Escape(title), "</h1>");
  if (!held.empty()) absl::StrAppend(&body, "<p id=\"held\">", html::Escape(held), "</p>");
  html::XYChart peak = ChartOf("peak-chart", "reserved peak GiB per GPU", label_names, rows,
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
  return body;
}

// Every row's numbers.
std::string RowsTable(const std::vector<std::string>& label_names, const std::vector<Row>& rows) {
  std::vector<std::string> header = label_names;
  for (const char* h : {"fits", "reserved peak GiB", "allocated peak GiB", "step s", "MFU",
                        "tokens/s/GPU", "exposed comm s", "sent GB per GPU", "error"}) {
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
  return absl::StrCat("<h2>Every configuration</h2><div class=\"wide\">", table, "</table></div>");
}

Bytes SentPerStep(const RunSummary& s) {
  Bytes sent;
  for (Bytes b : s.comm_bytes_sent) sent += b;
  return sent;
}

// What each GPU sends per step, by collective kind, across the compared rows; each row's total as
// a multiple of the first row's (ZeRO-0: DDP's all-reduce), and why the sharded stages send more.
std::string CommunicationSection(const std::vector<Row>& rows) {
  const Row* first = nullptr;
  for (const Row& r : rows) {
    if (r.summary) {
      first = &r;
      break;
    }
  }
  if (first == nullptr) return "";
  const double base = static_cast<double>(SentPerStep(*first->summary).count());
  const std::string base_name =
      first->summary->zero == 0 ? std::string("DDP") : absl::StrJoin(first->labels, " ");
  html::XYChart c;
  c.id = "comm-chart";
  c.y_label = "GB sent per GPU per step";
  c.x_title = absl::StrCat("configuration: all it sends, as a multiple of ", base_name);
  c.apart_label = kDoesNotFit;
  std::map<CollectiveKind, size_t> series_of;
  for (const Row& r : rows) {
    if (!r.summary) continue;
    const RunSummary& s = *r.summary;
    const double total = static_cast<double>(SentPerStep(s).count());
    const std::string ratio =
        base > 0 ? absl::StrFormat("%.2fx %s", total / base, base_name) : std::string("-");
    c.x_labels.push_back(absl::StrCat(absl::StrJoin(r.labels, " "), ": ", ratio));
    const int x = static_cast<int>(c.x_labels.size()) - 1;
    for (const CollectiveSummary& k : s.collectives) {
      if (k.sent == Bytes()) continue;
      auto [it, added] = series_of.emplace(k.kind, c.series.size());
      if (added) c.series.push_back({std::string(Name(k.kind)), {}});
      c.series[it->second].points.push_back(
          {x, k.sent.gb(),
           absl::StrFormat("%s: %s %.3f GB per GPU per step (all kinds %.3f GB, %s)",
                           absl::StrJoin(r.labels, " "), Name(k.kind), k.sent.gb(), total / 1e9,
                           ratio),
           !s.fits, 0, ""});
    }
  }
  const int64_t m = first->summary->micro_batches;
  std::string why;
  if (m > 1) {
    why = absl::StrFormat(
        "<p id=\"comm-why\">With %d micro-batches per step, ZeRO-2 and ZeRO-3 send many times "
        "what DDP sends: their gradients are sharded, so each micro-batch's gradients are "
        "reduce-scattered as its backward ends (there is no whole gradient to accumulate into), "
        "where DDP accumulates them locally and all-reduces once per step (ZeRO-1 reduce-scatters "
        "and all-gathers once per step). ZeRO-3 also all-gathers the parameters for every "
        "micro-batch's forward and backward.</p>",
        m);
  }
  return absl::StrCat("<h2>Communication per GPU per step</h2>", html::Chart(c), why);
}

}  // namespace

std::string RowsHtml(const std::string& title, const std::string& held,
                     const std::vector<std::string>& label_names, const std::vector<Row>& rows) {
  return html::Page(absl::StrCat("stepsim: ", title),
                    HeadAndCharts(title, held, label_names, rows) + RowsTable(label_names, rows));
}

std::string CompareHtml(const std::string& title, const std::vector<std::string>& label_names,
                        const std::vector<Row>& rows) {
  return html::Page(absl::StrCat("stepsim: ", title), HeadAndCharts(title, "", label_names, rows) +
                                                          CommunicationSection(rows) +
                                                          RowsTable(label_names, rows));
}

}  // namespace sim::report
