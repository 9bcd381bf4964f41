#include "sim/explore/plan_html.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/explore/plan_report.h"
#include "sim/report/html_page.h"
#include "sim/report/table.h"

namespace sim::explore {

namespace html = report::html;

namespace {

std::string Money(double usd) {
  if (usd >= 1e6) return absl::StrFormat("$%.2fM", usd / 1e6);
  if (usd >= 1e3) return absl::StrFormat("$%.0fk", usd / 1e3);
  return absl::StrFormat("$%.0f", usd);
}

std::string Hover(const PlanFit& f) {
  return absl::StrCat(f.gpus, " x ", f.gpu, ", ", ConfigLabel(f.config), ": ",
                      absl::StrFormat("%.1f days", f.days),
                      f.cost ? absl::StrCat(", ", Money(*f.cost)) : std::string());
}

}  // namespace

std::string PlanHtml(const PlanResult& plan) {
  const std::string title =
      absl::StrFormat("stepsim plan: %s, %s tokens in sequences of %d", plan.model,
                      report::FormatCount(plan.tokens), plan.seq_len);
  std::string body = absl::StrCat("<h1>", html::Escape(title), "</h1>");
  absl::StrAppendFormat(&body,
                        "<p>%d layouts considered, %d replayed, %d fitting; %d on the Pareto "
                        "front (faster and cheaper than none other).</p>",
                        plan.considered, plan.replayed, static_cast<int64_t>(plan.fits.size()),
                        static_cast<int64_t>(plan.pareto.size()));
  const std::optional<PlanFit> choice = PlanChoice(plan);
  if (choice) {
    absl::StrAppend(&body, "<p id=\"choice\" class=\"verdict fits\">Choice: ",
                    html::Escape(Hover(*choice)), "</p>");
  }
  // The front: x is the cost when every point has one, else the GPU count.
  const bool priced =
      !plan.pareto.empty() && std::all_of(plan.pareto.begin(), plan.pareto.end(),
                                          [](const PlanFit& f) { return f.cost.has_value(); });
  std::vector<const PlanFit*> order;
  for (const PlanFit& f : plan.pareto) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(), [&](const PlanFit* a, const PlanFit* b) {
    return priced ? *a->cost < *b->cost : a->gpus < b->gpus;
  });
  html::XYChart c;
  c.id = "pareto-chart";
  c.y_label = "days to train";
  c.x_title = priced ? "cost (USD), cheapest first" : "GPUs";
  std::map<std::string, size_t> series;
  for (size_t i = 0; i < order.size(); ++i) {
    const PlanFit& f = *order[i];
    c.x_labels.push_back(priced ? Money(*f.cost) : absl::StrCat(f.gpus));
    auto [it, added] = series.emplace(f.gpu, c.series.size());
    if (added) c.series.push_back({f.gpu, {}});
    c.series[it->second].points.push_back({static_cast<int>(i), f.days, Hover(f)});
  }
  absl::StrAppend(&body, "<h2>Pareto front: days against cost</h2>", html::Chart(c));
  std::string front =
      "<table id=\"pareto-table\">" +
      html::TableRow({"GPU", "GPUs", "layout", "batch (sequences)", "step s", "days", "cost"},
                     true);
  for (const PlanFit* f : order) {
    front += html::TableRow({f->gpu, absl::StrCat(f->gpus), ConfigLabel(f->config),
                             absl::StrCat(f->global_batch), absl::StrFormat("%.2f", f->step_s),
                             absl::StrFormat("%.1f", f->days),
                             f->cost ? Money(*f->cost) : std::string("no price")});
  }
  absl::StrAppend(&body, "<div class=\"wide\">", front, "</table></div>");
  std::string min = "<table id=\"min-gpus-table\">" +
                    html::TableRow({"GPU", "smallest count that fits", "layout",
                                    "reserved peak GiB", "capacity GiB", "largest at peak"},
                                   true);
  for (const MinGpus& m : plan.min_gpus) {
    min += html::TableRow({m.gpu, m.gpus ? absl::StrCat(*m.gpus) : m.reason,
                           m.gpus ? ConfigLabel(m.config) : std::string("-"),
                           absl::StrFormat("%.2f", m.peak.gib()),
                           absl::StrFormat("%.2f", m.capacity.gib()), m.binding});
  }
  absl::StrAppend(&body, "<h2>Smallest GPU count that fits</h2><div class=\"wide\">", min,
                  "</table></div>");
  return html::Page(title, body);
}

}  // namespace sim::explore
