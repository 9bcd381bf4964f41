#include "sim/explore/plan_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/report/json_text.h"
#include "sim/report/table.h"

namespace sim::explore {

namespace {

using Json = nlohmann::ordered_json;

Json BreakdownJson(const memory::Breakdown& b) {
  Json j;
  for (int c = 0; c < kNumMemCategories; ++c) j[std::string(kMemCategoryNames[c])] = b[c].count();
  return j;
}

Json FitJson(const PlanFit& f) {
  Json j = {{"gpu", f.gpu},
            {"gpus", f.gpus},
            {"config", PlanConfigJson(f.config)},
            {"global_batch", f.global_batch},
            {"step_s", f.step_s},
            {"days", f.days},
            {"cost", nullptr}};
  if (f.cost) j["cost"] = *f.cost;
  j["host_bytes_per_node"] = f.host.count();
  j["estimated"] = f.estimated;
  j["variant"] = f.variant;
  j["ideal_days"] = f.ideal_days;
  j["ettr"] = f.ettr;
  j["power_mw"] = f.power_mw;
  j["energy_mwh"] = f.energy_mwh;
  return j;
}

Json TypeJson(const PlanTypeRow& t) {
  Json j = {{"gpu", t.gpu},
            {"variant", t.variant},
            {"price_per_gpu_hour", t.price ? Json(*t.price) : Json(nullptr)},
            {"priced", t.price.has_value()},
            {"calibration", t.calibration},
            {"datasheet_only", t.datasheet_only},
            {"best", t.best ? FitJson(*t.best) : Json(nullptr)},
            {"gpus", t.best ? Json(t.best->gpus) : Json(nullptr)},
            {"days", t.best ? Json(t.best->days) : Json(nullptr)},
            {"gpu_hours", t.best ? Json(t.best->days * 24.0 * static_cast<double>(t.best->gpus))
                                 : Json(nullptr)},
            {"cost", t.best && t.best->cost ? Json(*t.best->cost) : Json(nullptr)},
            {"why", t.why}};
  return j;
}

// ---- reading a plan back ------------------------------------------------------------------

// Reads typed values out of one JSON document, recording the first problem with its key path.
class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}

  const Json* At(const Json& j, const std::string& path, const char* key, Json::value_t want) {
    const std::string where = path.empty() ? key : absl::StrCat(path, ".", key);
    if (!j.is_object() || !j.contains(key)) return Fail(where, "missing");
    const Json& v = j.at(key);
    const bool number = want == Json::value_t::number_float;
    const bool ok = number                                  ? v.is_number()
                    : want == Json::value_t::number_integer ? v.is_number_integer()
                                                            : v.type() == want;
    if (!ok) return Fail(where, absl::StrCat("expected ", Expected(want), ", got ", v.type_name()));
    return &v;
  }
  std::optional<int64_t> Int(const Json& j, const std::string& path, const char* key,
                             int64_t min = 0) {
    const Json* v = At(j, path, key, Json::value_t::number_integer);
    if (v == nullptr) return std::nullopt;
    const int64_t n = v->get<int64_t>();
    if (n < min) {
      Fail(path.empty() ? key : absl::StrCat(path, ".", key),
           absl::StrCat("expected a count >= ", min, ", got ", n));
      return std::nullopt;
    }
    return n;
  }
  std::optional<double> Real(const Json& j, const std::string& path, const char* key) {
    const Json* v = At(j, path, key, Json::value_t::number_float);
    if (v == nullptr) return std::nullopt;
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < 0) {
      Fail(path.empty() ? key : absl::StrCat(path, ".", key),
           absl::StrCat("expected a finite number >= 0, got ", v->dump()));
      return std::nullopt;
    }
    return x;
  }
  std::optional<std::string> String(const Json& j, const std::string& path, const char* key) {
    const Json* v = At(j, path, key, Json::value_t::string);
    if (v == nullptr) return std::nullopt;
    return v->get<std::string>();
  }
  std::optional<bool> Bool(const Json& j, const std::string& path, const char* key) {
    const Json* v = At(j, path, key, Json::value_t::boolean);
    if (v == nullptr) return std::nullopt;
    return v->get<bool>();
  }
  std::nullptr_t Fail(const std::string& where, const std::string& what) {
    if (error_.empty()) error_ = absl::StrCat(origin_, ": ", where, ": ", what);
    return nullptr;
  }
  bool ok() const { return error_.empty(); }
  absl::Status status() const { return absl::InvalidArgumentError(error_); }

 private:
  static const char* Expected(Json::value_t t) {
    switch (t) {
      case Json::value_t::object:
        return "an object";
      case Json::value_t::array:
        return "an array";
      case Json::value_t::string:
        return "a string";
      case Json::value_t::boolean:
        return "true or false";
      case Json::value_t::number_integer:
        return "an integer";
      default:
        return "a number";
    }
  }
  std::string origin_;
  std::string error_;
};

std::optional<PlanConfig> ReadConfig(Reader& in, const Json& j, const std::string& path) {
  const Json* c = in.At(j, path, "config", Json::value_t::object);
  if (c == nullptr) return std::nullopt;
  const std::string p = absl::StrCat(path, ".config");
  PlanConfig out;
  if (auto v = in.Int(*c, p, "zero")) out.zero = static_cast<int>(*v);
  if (auto v = in.Int(*c, p, "micro_batch", 1)) out.micro_batch = *v;
  // null: DeepSpeed's coordinator counts elements, no layer count.
  if (!(c->is_object() && c->contains("prefetch") && c->at("prefetch").is_null())) {
    if (auto v = in.Int(*c, p, "prefetch")) out.prefetch = *v;
  }
  if (auto v = in.String(*c, p, "recompute")) {
    auto r = EnumFromName<Recompute>(*v);
    if (!r)
      return in.Fail(p + ".recompute", absl::StrCat("unknown policy '", *v, "'")), std::nullopt;
    out.recompute = *r;
  }
  if (c->contains("tp")) {
    if (auto v = in.Int(*c, p, "tp", 1)) out.tp = *v;
    if (auto v = in.Int(*c, p, "pp", 1)) out.pp = *v;
    if (auto v = in.Int(*c, p, "cp", 1)) out.cp = *v;
    if (c->contains("ep")) {
      if (auto v = in.Int(*c, p, "ep", 1)) out.ep = *v;
    }
    if (auto v = in.Int(*c, p, "pp_chunks", 1)) out.pp_chunks = *v;
    if (auto v = in.Int(*c, p, "first_stage_layers")) out.first_stage_layers = *v;
    if (auto v = in.Int(*c, p, "last_stage_layers")) out.last_stage_layers = *v;
  }
  if (!in.ok()) return std::nullopt;
  return out;
}

std::optional<PlanFit> ReadFit(Reader& in, const Json& j, const std::string& path) {
  if (!j.is_object()) {
    in.Fail(path, absl::StrCat("expected an object, got ", j.type_name()));
    return std::nullopt;
  }
  PlanFit f;
  if (auto v = in.String(j, path, "gpu")) f.gpu = *v;
  if (auto v = in.Int(j, path, "gpus", 1)) f.gpus = *v;
  if (auto c = ReadConfig(in, j, path)) f.config = *c;
  if (auto v = in.Int(j, path, "global_batch", 1)) f.global_batch = *v;
  if (auto v = in.Real(j, path, "step_s")) f.step_s = *v;
  if (auto v = in.Real(j, path, "days")) f.days = *v;
  if (auto v = in.Int(j, path, "host_bytes_per_node")) f.host = Bytes::Count(*v);
  if (j.is_object() && j.contains("estimated"))
    f.estimated = j.at("estimated").is_boolean() && j.at("estimated").get<bool>();
  if (j.is_object() && j.contains("variant")) {
    if (auto v = in.String(j, path, "variant")) f.variant = *v;
  }
  // The whole run's terms (older plans have none: the days are the steps' alone).
  f.ideal_days = f.days;
  for (const auto& [key, slot] :
       {std::pair{"ideal_days", &f.ideal_days}, std::pair{"ettr", &f.ettr},
        std::pair{"power_mw", &f.power_mw}, std::pair{"energy_mwh", &f.energy_mwh}}) {
    if (j.is_object() && j.contains(key)) {
      if (auto v = in.Real(j, path, key)) *slot = *v;
    }
  }
  if (j.is_object() && j.contains("cost") && !j.at("cost").is_null()) {
    if (auto v = in.Real(j, path, "cost")) f.cost = *v;
  } else if (!j.is_object() || !j.contains("cost")) {
    in.Fail(path + ".cost", "missing");
  }
  if (!in.ok()) return std::nullopt;
  return f;
}

}  // namespace

std::string TypeKey(const std::string& gpu, const std::string& variant) {
  return variant.empty() ? gpu : absl::StrCat(gpu, " [", variant, "]");
}

std::string ConfigLabel(const PlanConfig& c) {
  if (c.ModelParallel()) {
    std::string pp = absl::StrCat("pp", c.pp);
    if (c.pp_chunks > 1) absl::StrAppend(&pp, " v", c.pp_chunks);
    if (c.first_stage_layers > 0) {
      absl::StrAppend(&pp, " ends ", c.first_stage_layers, "/", c.last_stage_layers);
    }
    return absl::StrFormat("megatron tp%d %s%s%s%s mb%d %s", c.tp, pp,
                           c.cp > 1 ? absl::StrCat(" cp", c.cp) : "",
                           c.ep > 1 ? absl::StrCat(" ep", c.ep) : "",
                           c.SequenceParallel() ? " sp" : "", c.micro_batch, Name(c.recompute));
  }
  return absl::StrFormat("ZeRO-%d mb%d %s", c.zero, c.micro_batch, Name(c.recompute));
}

Json PlanJson(const PlanResult& p) {
  Json out;
  out["schema_version"] = 1;
  out["model"] = p.model;
  out["params"] = p.params;
  out["seq_len"] = p.seq_len;
  out["tokens"] = p.tokens;
  out["global_batch"] = p.global_batch;
  out["batch_tokens"] = p.batch_tokens;
  out["headroom"] = MemoryMarginText(p.headroom);
  out["types"] = Json::array();
  for (const PlanTypeRow& t : p.types) out["types"].push_back(TypeJson(t));
  out["min_gpus"] = Json::object();
  for (const MinGpus& m : p.min_gpus) {
    const std::string key = TypeKey(m.gpu, m.variant);
    if (!m.gpus) {
      out["min_gpus"][key] = {{"gpus", nullptr}, {"reason", m.reason}};
      continue;
    }
    out["min_gpus"][key] = {{"gpus", *m.gpus},
                            {"config", PlanConfigJson(m.config)},
                            {"peak_bytes", m.peak.count()},
                            {"capacity_bytes", m.capacity.count()},
                            {"binding", m.binding},
                            {"peak_breakdown_bytes", BreakdownJson(m.peak_breakdown)},
                            {"host_bytes_per_node", m.host.count()},
                            {"one_fewer", absl::StrFormat("%d GPUs do not fit", *m.gpus - 1)}};
  }
  out["pareto"] = Json::array();
  for (const PlanFit& f : p.pareto) out["pareto"].push_back(FitJson(f));
  out["deadline_days"] = p.deadline_days ? Json(*p.deadline_days) : Json(nullptr);
  out["budget_usd"] = p.budget_usd ? Json(*p.budget_usd) : Json(nullptr);
  out["fixed_gpus"] = p.fixed_gpus ? Json(*p.fixed_gpus) : Json(nullptr);
  out["power_mw"] = p.power_mw ? Json(*p.power_mw) : Json(nullptr);
  const auto choice = PlanChoice(p);
  out["choice"] = choice ? FitJson(*choice) : Json(nullptr);
  out["rejected"] = Json::array();
  for (const PlanRejection& r : p.rejected) {
    Json j = {{"gpu", r.gpu},
              {"gpus", r.gpus},
              {"config", PlanConfigJson(r.config)},
              {"kind", Name(r.kind)},
              {"reason", r.reason}};
    if (r.floor) j["floor_bytes"] = r.floor->count();
    out["rejected"].push_back(j);
  }
  out["shard"] = {{"begin", p.shard.begin}, {"end", p.shard.end}, {"total", p.shard.total}};
  out["fitting"] = p.fits.size();
  out["fits"] = Json::array();
  for (const PlanFit& f : p.fits) out["fits"].push_back(FitJson(f));
  out["considered"] = p.considered;
  out["pruned"] = p.pruned;
  out["replayed"] = p.replayed;
  out["estimated"] = p.estimated;
  out["confirmed"] = p.confirmed;
  out["seconds"] = p.seconds;
  return out;
}

absl::StatusOr<PlanResult> PlanFromJson(const Json& j, const std::string& origin) {
  Reader in(origin);
  PlanResult p;
  if (!j.is_object()) {
    in.Fail("(top level)", absl::StrCat("expected an object, got ", j.type_name()));
    return in.status();
  }
  if (auto v = in.Int(j, "", "schema_version", 1); v && *v != 1) {
    in.Fail("schema_version", absl::StrCat("expected 1, got ", *v));
  }
  if (auto v = in.String(j, "", "model")) p.model = *v;
  if (auto v = in.Int(j, "", "params", 1)) p.params = *v;
  if (auto v = in.Int(j, "", "seq_len", 1)) p.seq_len = *v;
  if (auto v = in.Real(j, "", "tokens")) p.tokens = *v;
  if (auto v = in.Int(j, "", "global_batch", 1)) p.global_batch = *v;
  if (const Json* s = in.At(j, "", "shard", Json::value_t::object)) {
    if (auto v = in.Int(*s, "shard", "begin")) p.shard.begin = *v;
    if (auto v = in.Int(*s, "shard", "end")) p.shard.end = *v;
    if (auto v = in.Int(*s, "shard", "total")) p.shard.total = *v;
    if (in.ok() && !(p.shard.begin <= p.shard.end && p.shard.end <= p.shard.total)) {
      in.Fail("shard", "expected begin <= end <= total");
    }
  }
  if (const Json* m = in.At(j, "", "min_gpus", Json::value_t::object)) {
    for (auto it = m->begin(); in.ok() && it != m->end(); ++it) {
      const std::string path = absl::StrCat("min_gpus.", it.key());
      const Json& e = it.value();
      MinGpus g;
      g.gpu = it.key();
      // "GPU [variant]" under --search (TypeKey).
      if (const size_t open = g.gpu.find(" ["); open != std::string::npos && g.gpu.back() == ']') {
        g.variant = g.gpu.substr(open + 2, g.gpu.size() - open - 3);
        g.gpu.resize(open);
      }
      if (!e.is_object() || !e.contains("gpus")) {
        in.Fail(path + ".gpus", "missing");
        break;
      }
      if (e.at("gpus").is_null()) {
        if (auto v = in.String(e, path, "reason")) g.reason = *v;
      } else {
        g.gpus = in.Int(e, path, "gpus", 1);
        if (auto c = ReadConfig(in, e, path)) g.config = *c;
        if (auto v = in.Int(e, path, "peak_bytes")) g.peak = Bytes::Count(*v);
        if (auto v = in.Int(e, path, "capacity_bytes")) g.capacity = Bytes::Count(*v);
        if (auto v = in.String(e, path, "binding")) g.binding = *v;
        if (auto v = in.Int(e, path, "host_bytes_per_node")) g.host = Bytes::Count(*v);
        if (const Json* b = in.At(e, path, "peak_breakdown_bytes", Json::value_t::object)) {
          for (int c = 0; c < kNumMemCategories; ++c) {
            if (auto v = in.Int(*b, path + ".peak_breakdown_bytes", kMemCategoryNames[c].data())) {
              g.peak_breakdown[c] = Bytes::Count(*v);
            }
          }
        }
      }
      p.min_gpus.push_back(std::move(g));
    }
  }
  // Older plans have no types: their rows are left out.
  if (j.contains("types")) {
    if (const Json* types = in.At(j, "", "types", Json::value_t::array)) {
      for (size_t i = 0; in.ok() && i < types->size(); ++i) {
        const Json& e = (*types)[i];
        const std::string path = absl::StrCat("types[", i, "]");
        PlanTypeRow t;
        if (auto v = in.String(e, path, "gpu")) t.gpu = *v;
        if (auto v = in.String(e, path, "variant")) t.variant = *v;
        if (auto v = in.String(e, path, "calibration")) t.calibration = *v;
        if (auto v = in.Bool(e, path, "datasheet_only")) t.datasheet_only = *v;
        if (e.is_object() && e.contains("price_per_gpu_hour") &&
            !e.at("price_per_gpu_hour").is_null()) {
          if (auto v = in.Real(e, path, "price_per_gpu_hour")) t.price = *v;
        }
        p.types.push_back(std::move(t));
      }
    }
  }
  if (j.contains("headroom")) {
    if (auto v = in.String(j, "", "headroom")) {
      auto m = ParseMemoryMargin(*v);
      if (m.ok()) {
        p.headroom = *m;
      } else {
        in.Fail("headroom", std::string(m.status().message()));
      }
    }
  }
  if (j.contains("batch_tokens")) {
    if (auto v = in.Int(j, "", "batch_tokens", 1)) p.batch_tokens = *v;
  }
  if (const Json* fits = in.At(j, "", "fits", Json::value_t::array)) {
    for (size_t i = 0; in.ok() && i < fits->size(); ++i) {
      if (auto f = ReadFit(in, (*fits)[i], absl::StrCat("fits[", i, "]"))) p.fits.push_back(*f);
    }
  }
  if (const Json* rej = in.At(j, "", "rejected", Json::value_t::array)) {
    for (size_t i = 0; in.ok() && i < rej->size(); ++i) {
      const Json& e = (*rej)[i];
      const std::string path = absl::StrCat("rejected[", i, "]");
      if (!e.is_object()) {
        in.Fail(path, absl::StrCat("expected an object, got ", e.type_name()));
        break;
      }
      PlanRejection r;
      if (auto v = in.String(e, path, "gpu")) r.gpu = *v;
      if (auto v = in.Int(e, path, "gpus", 1)) r.gpus = *v;
      if (auto c = ReadConfig(in, e, path)) r.config = *c;
      if (auto v = in.String(e, path, "kind")) {
        auto k = EnumFromName<RejectionKind>(*v);
        if (k) {
          r.kind = *k;
        } else {
          in.Fail(path + ".kind", absl::StrCat("unknown kind '", *v, "'"));
        }
      }
      if (auto v = in.String(e, path, "reason")) r.reason = *v;
      if (r.kind == RejectionKind::kStatic) {
        if (auto v = in.Int(e, path, "floor_bytes")) r.floor = Bytes::Count(*v);
      }
      p.rejected.push_back(std::move(r));
    }
  }
  if (auto v = in.Int(j, "", "considered")) p.considered = *v;
  if (auto v = in.Int(j, "", "pruned")) p.pruned = *v;
  if (auto v = in.Int(j, "", "replayed")) p.replayed = *v;
  if (auto v = in.Int(j, "", "estimated")) p.estimated = *v;
  if (auto v = in.Int(j, "", "confirmed")) p.confirmed = *v;
  if (auto v = in.Real(j, "", "seconds")) p.seconds = *v;
  for (const auto& [key, slot] :
       {std::pair{"deadline_days", &p.deadline_days}, std::pair{"budget_usd", &p.budget_usd}}) {
    if (j.is_object() && j.contains(key) && !j.at(key).is_null()) {
      if (auto v = in.Real(j, "", key)) *slot = *v;
    }
  }
  if (j.is_object() && j.contains("fixed_gpus") && !j.at("fixed_gpus").is_null()) {
    p.fixed_gpus = in.Int(j, "", "fixed_gpus", 1);
  }
  if (j.is_object() && j.contains("power_mw") && !j.at("power_mw").is_null()) {
    p.power_mw = in.Real(j, "", "power_mw");
  }
  if (!in.ok()) return in.status();
  p.pareto = ParetoFrontier(p.fits);
  FillTypeRows(p);
  return p;
}

std::string PlanText(const PlanResult& p) {
  std::string out = absl::StrFormat(
      "Plan for %s (%s parameters), seq_len %d, %.3g tokens, global batch %d sequences asked "
      "(%d tokens per step)\nFits keep %s of each GPU's usable memory free (--headroom); the "
      "peaks shown are reserved peaks, the ones that decide it.\n\n",
      p.model, report::FormatCount(static_cast<double>(p.params)), p.seq_len, p.tokens,
      p.global_batch, p.batch_tokens, MemoryMarginText(p.headroom));
  // Host memory is a requirement of the nodes bought when something is offloaded.
  bool host = false;
  for (const MinGpus& m : p.min_gpus) host = host || m.host > Bytes();
  for (const PlanFit& f : p.pareto) host = host || f.host > Bytes();
  auto with_host = [&](std::vector<std::string> cells, Bytes b) {
    if (host) cells.push_back(absl::StrFormat("%.1f GiB", b.gib()));
    return cells;
  };
  std::vector<std::string> min_header = {"GPU", "min GPUs", "reserved peak", "binding term"};
  if (host) min_header.push_back("host per node");
  report::Table min(min_header);
  for (const MinGpus& m : p.min_gpus) {
    if (!m.gpus) {
      min.AddRow(with_host({TypeKey(m.gpu, m.variant), "-", "-", m.reason}, Bytes()));
      continue;
    }
    min.AddRow(
        with_host({TypeKey(m.gpu, m.variant), absl::StrCat(*m.gpus),
                   absl::StrFormat("%.1f of %.0f GiB", m.peak.gib(), m.capacity.gib()), m.binding},
                  m.host));
  }
  absl::StrAppend(&out, "Smallest GPU count that fits (ZeRO-3, full recompute, micro-batch 1):\n",
                  min.Render(), "\n");
  absl::StrAppend(&out,
                  "Days are effective days: the steps' days over the ETTR the whole run's "
                  "interruptions and checkpoints leave; MW is the cluster's draw at the facility; "
                  "cost is the wall time's",
                  p.power_mw ? absl::StrFormat(" (power budget %g MW)", *p.power_mw) : "", ".\n\n");
  // Every GPU type planned, priced or not, with what its time rests on.
  if (!p.types.empty()) {
    report::Table types({"GPU", "GPUs", "config", "days", "ETTR", "MW", "GPU-hours", "cost USD",
                         "time calibration"});
    for (const PlanTypeRow& t : p.types) {
      const std::string calibration =
          t.datasheet_only ? "DATASHEET ONLY (uncalibrated)" : t.calibration;
      if (!t.best) {
        types.AddRow({TypeKey(t.gpu, t.variant), "-", t.why, "-", "-", "-", "-",
                      t.price ? "-" : "no price", calibration});
        continue;
      }
      const PlanFit& f = *t.best;
      types.AddRow({TypeKey(t.gpu, t.variant), absl::StrCat(f.gpus), ConfigLabel(f.config),
                    absl::StrFormat("%.1f", f.days), absl::StrFormat("%.3f", f.ettr),
                    absl::StrFormat("%.2f", f.power_mw),
                    absl::StrFormat("%.0f", f.days * 24.0 * static_cast<double>(f.gpus)),
                    f.cost ? absl::StrFormat("%.0f", *f.cost) : "no price", calibration});
    }
    absl::StrAppend(
        &out, "Per GPU type: ",
        p.deadline_days
            ? absl::StrFormat("the smallest cluster that trains within %g days", *p.deadline_days)
            : std::string("the fewest GPU-hours"),
        " (a type without a price keeps its row):\n", types.Render(), "\n");
  }
  // "batch": the sequences each layout's step ran — the request's tokens rounded to whole
  // micro-batches on every data-parallel rank (and to pp of them for the interleaved
  // schedule), which can double it on a large cluster: its step time is for that batch.
  std::vector<std::string> par_header = {"GPU",    "GPUs", "config",  "batch",
                                         "step s", "days", "cost USD"};
  if (host) par_header.push_back("host per node");
  report::Table par(par_header);
  for (const PlanFit& f : p.pareto) {
    par.AddRow(with_host({TypeKey(f.gpu, f.variant), absl::StrCat(f.gpus), ConfigLabel(f.config),
                          absl::StrCat(f.global_batch), absl::StrFormat("%.2f", f.step_s),
                          absl::StrFormat("%.1f", f.days), absl::StrFormat("%.0f", *f.cost)},
                         f.host));
  }
  absl::StrAppend(&out, "Pareto set of time-to-train against cost (", p.fits.size(),
                  " fitting configurations; batch: the sequences each step ran):\n", par.Render(),
                  "\n");
  std::vector<std::string> unpriced;
  for (const PlanFit& f : p.fits) {
    if (!f.cost && std::find(unpriced.begin(), unpriced.end(), f.gpu) == unpriced.end()) {
      unpriced.push_back(f.gpu);
    }
  }
  for (const std::string& g : unpriced) {
    absl::StrAppendFormat(&out, "%s: no price, so not on the Pareto set: pass --price %s=USD\n", g,
                          g);
  }
  if (p.fixed_gpus && !p.deadline_days && !p.budget_usd) {
    if (const auto c = PlanChoice(p)) {
      absl::StrAppendFormat(&out, "Choice (the fastest on exactly %d GPUs): %s %s, %.1f days%s\n\n",
                            *p.fixed_gpus, TypeKey(c->gpu, c->variant), ConfigLabel(c->config),
                            c->days, c->cost ? absl::StrFormat(", $%.0f", *c->cost) : "");
    } else {
      absl::StrAppendFormat(&out, "Choice: nothing fits on exactly %d GPUs\n\n", *p.fixed_gpus);
    }
  }
  if (p.deadline_days || p.budget_usd) {
    std::string ask = p.deadline_days ? absl::StrFormat(
                                            "the smallest cluster that trains "
                                            "within %g days",
                                            *p.deadline_days)
                                      : "fastest";
    if (p.budget_usd) absl::StrAppendFormat(&ask, " within $%.0f", *p.budget_usd);
    if (const auto c = PlanChoice(p)) {
      absl::StrAppendFormat(&out, "Choice (%s): %d x %s %s, %.1f days, %s\n", ask, c->gpus,
                            TypeKey(c->gpu, c->variant), ConfigLabel(c->config), c->days,
                            c->cost ? absl::StrFormat("$%.0f", *c->cost) : "no price");
      // Renting, the cheapest within the deadline can be a larger cluster that runs better.
      if (p.deadline_days) {
        std::optional<PlanFit> cheapest;
        for (const PlanFit& f : p.pareto) {
          if (f.days <= *p.deadline_days && (!cheapest || *f.cost < *cheapest->cost)) {
            cheapest = f;
          }
        }
        if (cheapest && c->cost && *cheapest->cost < *c->cost) {
          absl::StrAppendFormat(&out,
                                "  Renting, the cheapest within %g days is larger: %d x %s %s, "
                                "%.1f days, $%.0f\n",
                                *p.deadline_days, cheapest->gpus,
                                TypeKey(cheapest->gpu, cheapest->variant),
                                ConfigLabel(cheapest->config), cheapest->days, *cheapest->cost);
        }
      }
      absl::StrAppend(&out, "\n");
    } else if (!p.pareto.empty()) {
      absl::StrAppendFormat(&out,
                            "Choice (%s): none of the Pareto set meets it (fastest %.1f days for "
                            "$%.0f, cheapest $%.0f in %.1f days)\n\n",
                            ask, p.pareto.front().days, *p.pareto.front().cost,
                            *p.pareto.back().cost, p.pareto.back().days);
    } else {
      absl::StrAppendFormat(&out, "Choice (%s): nothing priced fits\n\n", ask);
    }
  }
  // Rejections by kind, with the closest miss of the replayed ones.
  std::map<std::string, int> kinds;
  for (const PlanRejection& r : p.rejected) kinds[std::string(Name(r.kind))]++;
  const std::map<std::string, std::string> what = {
      {"batch", "their batch rounds more than 10 % off the one asked"},
      {"lighter", "the same layout with less recompute fits (and is faster)"},
      {"slower", "a lower bound on their step exceeds the fastest on as many GPUs"},
      {"static", "the static ledger exceeds the HBM"},
      {"replay", "the replayed peak exceeds the HBM"},
      {"layout", "the model does not admit the layout"},
      {"invalid", "the configuration is invalid"}};
  absl::StrAppend(&out, "Rejected (each with its reason in --json):\n");
  for (const auto& [k, n] : kinds) {
    absl::StrAppendFormat(&out, "  %4d because %s\n", n, what.count(k) ? what.at(k) : k);
  }
  for (const PlanRejection& r : p.rejected) {
    if (r.kind == RejectionKind::kReplay) {
      absl::StrAppendFormat(&out, "  e.g. %d x %s %s: %s\n", r.gpus, r.gpu, ConfigLabel(r.config),
                            r.reason);
      break;
    }
  }
  // The closest miss of each family (ZeRO, model-parallel) by the static ledger: what would
  // have to shrink for the largest cluster searched.
  for (bool model_parallel : {false, true}) {
    const PlanRejection* best = nullptr;
    for (const PlanRejection& r : p.rejected) {
      if (r.kind != RejectionKind::kStatic || r.config.ModelParallel() != model_parallel) continue;
      if (best == nullptr || *r.floor < *best->floor) best = &r;
    }
    if (best != nullptr) {
      absl::StrAppendFormat(&out, "  closest %s: %d x %s %s: %s\n",
                            model_parallel ? "TP/PP layout" : "ZeRO layout", best->gpus, best->gpu,
                            ConfigLabel(best->config), best->reason);
    }
  }
  absl::StrAppendFormat(&out,
                        "Considered %d configurations, "
                        "pruned %d by the static ledger or the batch, replayed %d, in %.1f s.\n",
                        p.considered, p.pruned, p.replayed, p.seconds);
  if (p.estimated + p.confirmed > 0) {
    absl::StrAppendFormat(
        &out,
        "Layouts of many micro-batches were screened by two short replays (pp and "
        "pp + 2 micro-batches, 2 pp interleaved; the step extrapolated); %d near the front were "
        "then replayed in full, %d far from it keep the estimate (\"estimated\" "
        "in --json) and stay off the front.\n",
        p.confirmed, p.estimated);
  }
  return out;
}

}  // namespace sim::explore
