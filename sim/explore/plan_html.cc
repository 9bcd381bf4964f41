#include "sim/explore/plan_html.h"

#include <algorithm>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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

// Each GPU type's (and variant's) series of one chart: its own Pareto front against cost, or
// its fastest layout per count against GPUs. Points past 10x the deadline are cut (`cut`
// counts them).
html::XYChart PlanChart(const PlanResult& plan, bool against_cost,
                        const std::optional<PlanFit>& choice, int64_t& cut) {
  html::XYChart c;
  c.id = against_cost ? "pareto-chart" : "count-chart";
  c.y_label = "days to train";
  c.x_title = against_cost ? "cost (USD)" : "GPUs";
  c.x_format = against_cost ? std::function<std::string(double)>(Money)
                            : [](double x) { return absl::StrFormat("%.0f", x); };
  const double cap = plan.deadline_days ? 10.0 * *plan.deadline_days : 1e300;
  for (const PlanTypeRow& t : plan.types) {
    std::vector<PlanFit> mine;
    for (const PlanFit& f : plan.fits) {
      if (f.gpu == t.gpu && f.variant == t.variant && !f.estimated) mine.push_back(f);
    }
    std::vector<PlanFit> points;
    if (against_cost) {
      if (!t.price) continue;
      points = ParetoFrontier(mine);
    } else {
      std::map<int64_t, PlanFit> fastest;
      for (const PlanFit& f : mine) {
        auto [it, fresh] = fastest.emplace(f.gpus, f);
        if (!fresh && f.days < it->second.days) it->second = f;
      }
      for (auto& [n, f] : fastest) points.push_back(f);
    }
    std::stable_sort(points.begin(), points.end(), [&](const PlanFit& a, const PlanFit& b) {
      return against_cost ? *a.cost < *b.cost : a.gpus < b.gpus;
    });
    html::Series series{TypeKey(t.gpu, t.variant), {}};
    for (const PlanFit& f : points) {
      if (f.days > cap) {
        ++cut;
        continue;
      }
      html::Series::Point p;
      p.y = f.days;
      p.xv = against_cost ? *f.cost : static_cast<double>(f.gpus);
      p.hover = Hover(f);
      p.label = absl::StrCat(f.gpus);
      series.points.push_back(std::move(p));
    }
    if (!series.points.empty()) c.series.push_back(std::move(series));
  }
  if (plan.deadline_days) {
    c.limit = *plan.deadline_days;
    c.limit_label = absl::StrFormat("deadline: %g days", *plan.deadline_days);
  }
  if (choice && (!against_cost || choice->cost)) {
    c.mark = {against_cost ? *choice->cost : static_cast<double>(choice->gpus), choice->days};
    c.mark_label = absl::StrCat("choice: ", Hover(*choice));
  }
  return c;
}

}  // namespace

std::string PlanHtml(const PlanResult& plan) {
  const std::string title =
      absl::StrFormat("stepsim plan: %s, %s tokens in sequences of %d", plan.model,
                      report::FormatCount(plan.tokens), plan.seq_len);
  std::string body = absl::StrCat("<h1>", html::Escape(title), "</h1>");
  absl::StrAppendFormat(&body,
                        "<p>%d layouts considered, %d replayed, %d fitting; %d on the Pareto "
                        "front (faster and cheaper than none other). Fits keep %s of each "
                        "GPU's usable memory free; the batch asked is %d sequences.</p>",
                        plan.considered, plan.replayed, static_cast<int64_t>(plan.fits.size()),
                        static_cast<int64_t>(plan.pareto.size()),
                        html::Escape(MemoryMarginText(plan.headroom)), plan.global_batch);
  const std::optional<PlanFit> choice = PlanChoice(plan);
  if (choice) {
    absl::StrAppend(&body, "<p id=\"choice\" class=\"verdict fits\">Choice: ",
                    html::Escape(Hover(*choice)), "</p>");
  }
  // Every type with its row, priced or not; a datasheet-only calibration said so.
  std::string types =
      "<table id=\"types-table\">" +
      html::TableRow({"GPU", "GPUs", "layout", "days", "GPU-hours", "cost", "time calibration"},
                     true);
  std::vector<std::string> unpriced;
  for (const PlanTypeRow& t : plan.types) {
    if (!t.price) unpriced.push_back(TypeKey(t.gpu, t.variant));
    const std::string calibration =
        t.datasheet_only ? "DATASHEET ONLY (uncalibrated)" : t.calibration;
    if (!t.best) {
      types += html::TableRow({TypeKey(t.gpu, t.variant), "-", t.why, "-", "-",
                               t.price ? "-" : "no price", calibration});
      continue;
    }
    const PlanFit& f = *t.best;
    types += html::TableRow({TypeKey(t.gpu, t.variant), absl::StrCat(f.gpus), ConfigLabel(f.config),
                             absl::StrFormat("%.1f", f.days),
                             absl::StrFormat("%.0f", f.days * 24.0 * static_cast<double>(f.gpus)),
                             f.cost ? Money(*f.cost) : std::string("no price"), calibration});
  }
  absl::StrAppend(&body, "<h2>Per GPU type</h2><div class=\"wide\">", types, "</table></div>");
  int64_t cut = 0;
  absl::StrAppend(&body, "<h2>Pareto front per GPU type: days against cost</h2>",
                  html::Chart(PlanChart(plan, true, choice, cut)));
  if (!unpriced.empty()) {
    absl::StrAppend(&body, "<p id=\"unpriced\">Without a price, so not on the cost chart: ",
                    html::Escape(absl::StrJoin(unpriced, ", ")),
                    " (give one with --price GPU=USD).</p>");
  }
  absl::StrAppend(&body, "<h2>Fastest layout per GPU count</h2>",
                  html::Chart(PlanChart(plan, false, choice, cut)));
  if (cut > 0) {
    absl::StrAppendFormat(&body,
                          "<p id=\"cut\">%d points beyond 10x the deadline are left out of the "
                          "charts.</p>",
                          cut);
  }
  std::vector<const PlanFit*> order;
  for (const PlanFit& f : plan.pareto) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(),
                   [&](const PlanFit* a, const PlanFit* b) { return *a->cost < *b->cost; });
  std::string front =
      "<table id=\"pareto-table\">" +
      html::TableRow({"GPU", "GPUs", "layout", "batch (sequences)", "step s", "days", "cost"},
                     true);
  for (const PlanFit* f : order) {
    front += html::TableRow({TypeKey(f->gpu, f->variant), absl::StrCat(f->gpus),
                             ConfigLabel(f->config), absl::StrCat(f->global_batch),
                             absl::StrFormat("%.2f", f->step_s), absl::StrFormat("%.1f", f->days),
                             f->cost ? Money(*f->cost) : std::string("no price")});
  }
  absl::StrAppend(&body, "<h2>Pareto front</h2><div class=\"wide\">", front, "</table></div>");
  std::string min = "<table id=\"min-gpus-table\">" +
                    html::TableRow({"GPU", "smallest count that fits", "layout",
                                    "reserved peak GiB", "capacity GiB", "largest at peak"},
                                   true);
  for (const MinGpus& m : plan.min_gpus) {
    min += html::TableRow({TypeKey(m.gpu, m.variant), m.gpus ? absl::StrCat(*m.gpus) : m.reason,
                           m.gpus ? ConfigLabel(m.config) : std::string("-"),
                           absl::StrFormat("%.2f", m.peak.gib()),
                           absl::StrFormat("%.2f", m.capacity.gib()), m.binding});
  }
  absl::StrAppend(&body, "<h2>Smallest GPU count that fits</h2><div class=\"wide\">", min,
                  "</table></div>");
  return html::Page(title, body);
}

}  // namespace sim::explore
