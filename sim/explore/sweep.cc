#include "sim/explore/sweep.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "sim/base/check.h"
#include "sim/base/parallel.h"
#include "sim/report/json_text.h"
#include "sim/report/run_report.h"
#include "sim/spec/enum_names.h"
#include "sim/workload/policy/framework_traits.h"

namespace sim::explore {

namespace {

using Json = nlohmann::ordered_json;

// The shard range of a sweep report, checked: "FILE: key: what was expected" otherwise.
absl::StatusOr<Slice> ShardOf(const Json& j, const std::string& file, size_t& total) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", what));
  };
  if (!j.is_object()) return bad("expected a JSON object");
  if (!j.contains("shard") || !j.at("shard").is_object()) return bad("shard: expected an object");
  const Json& s = j.at("shard");
  for (const char* k : {"begin", "end", "total"}) {
    if (!s.contains(k) || !s.at(k).is_number_unsigned()) {
      return bad(absl::StrCat("shard.", k, ": expected a count >= 0"));
    }
  }
  const Slice slice{s.at("begin").get<size_t>(), s.at("end").get<size_t>()};
  total = s.at("total").get<size_t>();
  if (slice.begin > slice.end || slice.end > total) {
    return bad("shard: expected begin <= end <= total");
  }
  if (!j.contains("vary") || !j.at("vary").is_array()) return bad("vary: expected an array");
  if (!j.contains("results") || !j.at("results").is_array()) {
    return bad("results: expected an array");
  }
  if (j.at("results").size() != slice.end - slice.begin) {
    return bad(absl::StrCat("results: expected ", slice.end - slice.begin,
                            " configurations (shard ", slice.begin, "..", slice.end, "), got ",
                            j.at("results").size()));
  }
  return slice;
}

}  // namespace

std::vector<CompareStage> CompareStages(const Scenario& base) {
  std::vector<CompareStage> stages;
  for (ShardingStage& st : TraitsOf(base.parallel.framework).ShardingStages()) {
    CompareStage c{st.zero, std::move(st.label), {}};
    for (auto& [key, value] : st.overrides) c.overrides.push_back({key, value});
    stages.push_back(std::move(c));
  }
  return stages;
}

absl::StatusOr<std::vector<CompareStage>> FinetuneStages(const Scenario& base,
                                                         const std::vector<std::string>& methods) {
  std::vector<CompareStage> stages;
  const int zero = static_cast<int>(base.parallel.zero);
  for (const std::string& m : methods) {
    if (m == "offload") {
      const FrameworkTraits& traits = TraitsOf(base.parallel.framework);
      CompareStage st{traits.OffloadStage(), "full, optimizer offloaded", {}};
      st.overrides = {{"training.finetune.method", "full"},
                      {"parallel.zero", absl::StrCat(traits.OffloadStage())},
                      {std::string(traits.OffloadKey()), "cpu"}};
      stages.push_back(st);
      continue;
    }
    const std::optional<FinetuneMethod> method = EnumFromName<FinetuneMethod>(m);
    if (!method) {
      return absl::InvalidArgumentError(absl::StrCat("--finetune: unknown method '", m,
                                                     "'; choose from full, lora, qlora, offload"));
    }
    stages.push_back({zero, m, {{"training.finetune.method", m}}});
  }
  if (stages.empty()) return absl::InvalidArgumentError("--finetune: give at least one method");
  return stages;
}

absl::StatusOr<std::vector<CompareStage>> ExpertParallelStages(
    const Scenario& base, const std::vector<std::string>& degrees) {
  if (!base.model.moe) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ep: model ", base.model.name,
                     " has no experts (expert parallelism needs a `moe:` model)"));
  }
  std::vector<int64_t> eps;
  for (const std::string& d : degrees) {
    if (d == "all") {
      const int64_t block = base.parallel.tp * base.parallel.cp * base.dp();
      const int64_t etp = base.parallel.expert_tp();
      for (int64_t ep = 1; ep <= base.model.moe->experts; ++ep) {
        if (base.model.moe->experts % ep == 0 && block % (etp * ep) == 0) eps.push_back(ep);
      }
      continue;
    }
    int64_t ep = 0;
    if (!absl::SimpleAtoi(d, &ep) || ep < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ep: '", d, "' is not a positive integer or 'all'"));
    }
    eps.push_back(ep);
  }
  if (eps.empty()) return absl::InvalidArgumentError("--ep: give at least one degree");
  std::vector<CompareStage> stages;
  for (int64_t ep : eps) {
    stages.push_back({static_cast<int>(base.parallel.zero),
                      absl::StrCat("ep ", ep),
                      {{"parallel.ep", absl::StrCat(ep)}}});
  }
  return stages;
}

namespace {

// A sweep report without its results: {schema_version, scenario, vary, shard, results: []}.
Json SweepHead(const std::string& scenario, const std::vector<std::string>& keys,
               const Slice& slice, size_t total) {
  Json j;
  j["schema_version"] = 1;
  j["scenario"] = scenario;
  j["vary"] = keys;
  j["shard"] = {{"begin", slice.begin}, {"end", slice.end}, {"total", total}};
  j["results"] = Json::array();
  return j;
}

// One result's item: {vary, report | error}.
Json SweepItem(const ConfigResult& r, size_t labels_from) {
  Json item;
  Json vary;
  for (size_t i = labels_from; i < r.overrides.size(); ++i) {
    vary[r.overrides[i].key] = r.overrides[i].value;
  }
  item["vary"] = std::move(vary);
  if (r.status.ok()) {
    item["report"] = report::RunJson(*r.summary, /*monte_carlo=*/false);
  } else {
    item["error"] = std::string(r.status.message());
  }
  return item;
}

}  // namespace

Json SweepJson(const std::string& scenario, const std::vector<std::string>& keys,
               const Slice& slice, size_t total, const std::vector<ConfigResult>& results,
               size_t labels_from, int jobs) {
  Json j = SweepHead(scenario, keys, slice, total);
  // Each result's item on the workers, then put in order: built on one thread after the
  // replays, the items were the sweep's longest serial part.
  std::vector<Json> items(results.size());
  ParallelFor(results.size(), jobs,
              [&](size_t k) { items[k] = SweepItem(results[k], labels_from); });
  for (Json& item : items) j["results"].push_back(std::move(item));
  return j;
}

std::string SweepJsonText(const std::string& scenario, const std::vector<std::string>& keys,
                          const Slice& slice, size_t total,
                          const std::vector<ConfigResult>& results, size_t labels_from, int jobs) {
  // nlohmann's pretty printer writes the results array's items one per element, each nested
  // two levels deep: an item's own dump(2) with every line indented by four spaces (a JSON
  // string holds no raw newline, so every newline in it is the printer's), the items joined
  // by ",\n", inside "[\n" and "\n  ]". The head is written with an empty array, "[]", the
  // last thing before its closing "\n}".
  std::string head = report::JsonText(SweepHead(scenario, keys, slice, total));
  if (results.empty()) return head;
  std::vector<std::string> items(results.size());
  ParallelFor(results.size(), jobs, [&](size_t k) {
    const std::string text = report::JsonText(SweepItem(results[k], labels_from));
    items[k] = absl::StrCat("    ", absl::StrReplaceAll(text, {{"\n", "\n    "}}));
  });
  constexpr absl::string_view kEmpty = "[]\n}";
  SIM_CHECK(absl::EndsWith(head, kEmpty), "a sweep report's head ends with its empty results");
  head.resize(head.size() - kEmpty.size());
  return absl::StrCat(head, "[\n", absl::StrJoin(items, ",\n"), "\n  ]\n}");
}

Json CompareJson(const std::string& scenario, const std::vector<CompareStage>& stages,
                 const std::vector<ConfigResult>& results) {
  Json j;
  j["schema_version"] = 1;
  j["scenario"] = scenario;
  j["stages"] = Json::array();
  for (size_t i = 0; i < stages.size(); ++i) {
    Json item = {{"zero", stages[i].zero}, {"mode", stages[i].mode}};
    if (results[i].status.ok()) {
      item["report"] = report::RunJson(*results[i].summary, /*monte_carlo=*/false);
    } else {
      item["error"] = std::string(results[i].status.message());
    }
    j["stages"].push_back(item);
  }
  return j;
}

absl::StatusOr<nlohmann::ordered_json> ParseShardJson(absl::string_view text,
                                                      const std::string& path) {
  // The nesting depth, read off the text before parsing: brackets outside strings.
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxShardDepth) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": nested more than ", kMaxShardDepth,
                                                       " levels deep: not a stepsim report"));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not JSON: ", e.what()));
  }
}

absl::StatusOr<Json> MergeSweeps(std::vector<Json> shards, const std::vector<std::string>& files) {
  if (shards.empty()) return absl::InvalidArgumentError("no sweep shards to merge");
  struct Part {
    Slice slice;
    size_t total;
    size_t index;
  };
  std::vector<Part> parts;
  for (size_t i = 0; i < shards.size(); ++i) {
    size_t total = 0;
    auto slice = ShardOf(shards[i], files[i], total);
    if (!slice.ok()) return slice.status();
    parts.push_back({*slice, total, i});
  }
  std::stable_sort(parts.begin(), parts.end(),
                   [](const Part& a, const Part& b) { return a.slice.begin < b.slice.begin; });
  const Json& first = shards[parts.front().index];
  const size_t total = parts.front().total;
  size_t expect = 0;
  Json merged = first;
  merged["results"] = Json::array();
  for (const Part& p : parts) {
    const Json& s = shards[p.index];
    if (p.total != total || s.at("vary") != first.at("vary") || p.slice.begin != expect) {
      return absl::InvalidArgumentError(absl::StrCat(
          files[p.index], ": shards do not tile one sweep: expected a shard starting at ", expect,
          " of ", total));
    }
    for (const Json& r : s.at("results")) merged["results"].push_back(r);
    expect = p.slice.end;
  }
  if (expect != total) {
    return absl::InvalidArgumentError(
        absl::StrCat("shards cover ", expect, " of ", total, " configurations"));
  }
  merged["shard"] = {{"begin", 0}, {"end", total}, {"total", total}};
  return merged;
}

}  // namespace sim::explore
