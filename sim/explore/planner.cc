// `stepsim plan`'s search: the enumeration of layouts, the static screen, the replays and the
// smallest GPU count that fits (the class in planner.h; the screening in plan_screening.cc).

#include "sim/explore/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/base/input_file.h"
#include "sim/base/parallel.h"
#include "sim/base/stop_request.h"
#include "sim/base/suggest.h"
#include "sim/config/yaml_fields.h"
#include "sim/explore/plan_options.h"
#include "sim/replay/step_bound.h"
#include "sim/workload/params.h"
#include "yaml-cpp/yaml.h"

namespace sim::explore {

namespace plan_internal {

namespace {

// "memory category (N.NN GiB of the peak)" for the category that holds the most at the peak.
std::string Largest(const memory::Breakdown& breakdown) {
  int best = 0;
  for (int c = 1; c < kNumMemCategories; ++c) {
    if (breakdown[c] > breakdown[best]) best = c;
  }
  return absl::StrFormat("%s (%.2f GiB of the peak)", kMemCategoryNames[best],
                         breakdown[best].gib());
}

// "key.path: message; ..." of a layout the model does not admit.
std::string ProblemsText(const std::vector<config::ConfigProblem>& problems,
                         const absl::Status& status) {
  if (problems.empty()) return std::string(status.message());
  std::vector<std::string> lines;
  for (const auto& p : problems) lines.push_back(absl::StrCat(p.key_path, ": ", p.message));
  return absl::StrJoin(lines, "; ");
}

// Whether `arg` names a scenario file rather than a model: a file whose top level has `model:`.
bool IsScenarioFile(const std::string& arg) {
  if (!IsRegularFile(arg)) return false;
  auto doc = config::LoadYamlFile(arg);
  return doc.ok() && doc->IsMap() && config::Child(*doc, "model").IsDefined();
}

// The scenario keys the search sets for every candidate, by section: taken out of a scenario
// file planned from, so that none of its own layout stays in force under another.
const std::vector<std::pair<const char*, std::vector<const char*>>>& SearchedKeys() {
  static const auto* keys = new std::vector<std::pair<const char*, std::vector<const char*>>>{
      {"cluster", {"nodes", "gpus_per_node"}},
      {"training",
       {"seq_len", "micro_batch", "global_batch", "global_batch_tokens", "recompute",
        "recompute_every", "recompute_layers", "recompute_method", "recompute_modules"}},
      {"parallel",
       {"zero", "tp", "pp", "cp", "ep", "etp", "sequence_parallel", "pp_schedule", "pp_chunks",
        "first_stage_layers", "last_stage_layers", "pp_layers"}}};
  return *keys;
}

// Whether a rejection decides a layout that waited for replays (not one pruned before them).
bool AfterReplays(RejectionKind k) {
  return k != RejectionKind::kBatch && k != RejectionKind::kLayout && k != RejectionKind::kStatic;
}

}  // namespace

absl::StatusOr<PlanResult> Planner::Run() {
  const auto t0 = std::chrono::steady_clock::now();
  if (absl::Status s = Prepare(); !s.ok()) return s;
  for (const std::string& gpu_name : req_.gpus) {
    if (absl::Status s = PlanGpu(gpu_name); !s.ok()) return s;
  }
  SortRejected(out_.rejected);
  out_.pareto = ParetoFrontier(out_.fits);
  FillTypeRows(out_);
  out_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::move(out_);
}

absl::Status Planner::Prepare() {
  auto catalogs = config::LoadCatalogs(root_);
  if (!catalogs.ok()) return catalogs.status();
  catalogs_ = *std::move(catalogs);
  if (IsScenarioFile(req_.model)) {
    if (absl::Status st = PrepareScenario(); !st.ok()) return st;
  } else {
    auto model = config::LoadModel(root_, req_.model);
    if (!model.ok()) return model.status();
    model_ = *std::move(model);
  }
  // --set cluster.node (one value of --search cluster.node) names the node type, so its GPU.
  for (const config::Override& o : req_.sets) {
    if (o.key != "cluster.node") continue;
    const NodeSpec* node = nullptr;
    std::vector<std::string> names;
    for (const NodeSpec& n : catalogs_->nodes) {
      names.push_back(n.name);
      if (absl::AsciiStrToLower(n.name) == absl::AsciiStrToLower(o.value)) node = &n;
    }
    if (node == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("cluster.node: no node type '", o.value,
                                                     "' in topologies/nodes.yaml",
                                                     DidYouMean(o.value, names)));
    }
    if (req_.given.count("gpu") != 0 &&
        (req_.gpus.size() != 1 ||
         absl::AsciiStrToLower(req_.gpus[0]) != absl::AsciiStrToLower(node->gpu))) {
      return absl::InvalidArgumentError(absl::StrCat("cluster.node ", node->name, " holds ",
                                                     node->gpu, ", not the --gpu named; give one"));
    }
    req_.gpus = {node->gpu};
    node_of_[node->gpu] = node->name;
  }
  if (req_.gpus.empty()) {
    auto gpus = DefaultPlanGpus(root_);
    if (!gpus.ok()) return gpus.status();
    req_.gpus = *std::move(gpus);
  }
  out_.model = model_->name;
  out_.headroom = req_.headroom;
  out_.batch_tokens = req_.global_batch_tokens;
  out_.deadline_days = req_.deadline_days;
  out_.budget_usd = req_.budget_usd;
  out_.fixed_gpus = req_.fixed_gpus;
  out_.power_mw = req_.power_mw;
  out_.params = CountParameters(*model_).total;
  out_.seq_len = req_.seq_len;
  out_.tokens = req_.tokens;
  out_.global_batch =
      std::max<int64_t>(1, (req_.global_batch_tokens + req_.seq_len / 2) / req_.seq_len);

  // --price names: each a catalog GPU the plan considers (FindGpu: case-insensitive, with the
  // nearest name).
  for (const auto& [name, usd] : req_.prices) {
    auto gpu = config::FindGpu(catalogs_->gpus, name);
    if (!gpu.ok())
      return absl::InvalidArgumentError(absl::StrCat("--price: ", gpu.status().message()));
    bool considered = false;
    for (const std::string& g : req_.gpus) {
      considered = considered || absl::AsciiStrToLower(g) == absl::AsciiStrToLower(gpu->name);
    }
    if (!considered) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--price: ", gpu->name, " is not among the GPUs planned for (--gpu); add it there"));
    }
    prices_[gpu->name] = usd;
  }
  // Work units in a fixed order: per GPU type, the smallest-count search, then one unit per
  // whole-node cluster size. A shard runs a contiguous slice of them.
  for (const std::string& gpu_name : req_.gpus) {
    auto gpu = config::FindGpu(catalogs_->gpus, gpu_name);
    if (!gpu.ok()) return gpu.status();
    int64_t gpn = 0;
    if (const NodeSpec* n = NodeFor(gpu->name)) gpn = n->gpus_per_node;
    units_.push_back({gpu->name, 0});
    if (req_.fixed_gpus) {
      // --gpus N: one size, a whole number of this type's nodes.
      if (gpn > 0 && *req_.fixed_gpus % gpn != 0) {
        const int64_t below = *req_.fixed_gpus / gpn * gpn;
        return absl::InvalidArgumentError(
            absl::StrFormat("--gpus %d: not a whole number of %s nodes of %d GPUs (nearest: %s%d)",
                            *req_.fixed_gpus, gpu->name, gpn,
                            below > 0 ? absl::StrCat(below, " or ") : "", below + gpn));
      }
      if (gpn > 0) units_.push_back({gpu->name, *req_.fixed_gpus / gpn});
      continue;
    }
    for (int64_t nodes = 1; gpn > 0 && nodes * gpn <= req_.max_gpus; nodes *= 2) {
      units_.push_back({gpu->name, nodes});
    }
  }
  const Slice slice = SliceOf(req_.shard, units_.size());
  begin_ = static_cast<int64_t>(slice.begin);
  end_ = static_cast<int64_t>(slice.end);
  out_.shard = {begin_, end_, static_cast<int64_t>(units_.size())};
  // The progress line numbers the GPU types with work in this slice (the units list each
  // type's together).
  for (int64_t i = begin_; i < end_; ++i) {
    if (i == begin_ || units_[i].first != units_[i - 1].first) ++types_in_slice_;
  }
  return absl::OkStatus();
}

bool Planner::Mine(const std::string& gpu, int64_t nodes) const {
  for (int64_t i = begin_; i < end_; ++i) {
    if (units_[i].first == gpu && units_[i].second == nodes) return true;
  }
  return false;
}

const NodeSpec* Planner::NodeFor(const std::string& gpu) const {
  const auto named = node_of_.find(gpu);
  for (const NodeSpec& n : catalogs_->nodes) {
    if (named != node_of_.end() ? n.name == named->second : n.gpu == gpu) return &n;
  }
  return nullptr;
}

absl::Status Planner::PrepareScenario() {
  auto file = config::ScenarioLoader::Open(root_, req_.model);
  if (!file.ok()) return file.status();
  // As written, with --set: what the plan takes from it.
  auto s = file->Load(req_.sets);
  if (!s.ok()) return s.status();
  if (!s->cluster.groups.empty()) {
    // The plan sizes a cluster of one type; it does not place stages over an inventory of
    // several (docs/model.md "Mixed clusters"): replay the mixed cluster with `run`.
    return absl::InvalidArgumentError(absl::StrCat(
        req_.model,
        ": cluster.nodes lists several node types; plan searches clusters of one type (--search "
        "cluster.node=A,B compares types): replay a mixed cluster with stepsim run"));
  }
  model_ = s->model;
  if (req_.given.count("seq-len") == 0) req_.seq_len = s->training.seq_len;
  if (req_.given.count("batch-tokens") == 0) {
    req_.global_batch_tokens = s->training.global_batch * s->training.seq_len;
  }
  // The ZeRO family's framework is the scenario's where it is one --framework takes
  // (Megatron's layouts are searched anyway).
  if (req_.given.count("framework") == 0) {
    const std::string name(Name(s->parallel.framework));
    if (ApplyPlanOption(req_, "framework", name, "the scenario's parallel.framework").ok() &&
        s->parallel.fsdp_version != 1) {
      req_.fsdp_version = s->parallel.fsdp_version;
    }
  }
  if (req_.given.count("gpu") == 0) {
    req_.gpus = {s->cluster.gpu.name};
    node_of_[s->cluster.gpu.name] = s->cluster.node.name;
  }
  // The file again, without the keys the search sets: what it says of them would otherwise
  // stay in force where a candidate does not name them (a scenario's pp under a ZeRO layout).
  auto doc = config::LoadYamlFile(req_.model);
  if (!doc.ok()) return doc.status();
  YAML::Node root = *doc;
  for (const auto& [section, keys] : SearchedKeys()) {
    YAML::Node sec = root[section];
    if (!sec.IsMap()) continue;
    for (const char* k : keys) sec.remove(k);
  }
  YAML::Emitter text;
  text << root;
  auto loader = config::ScenarioLoader::FromText(root_, text.c_str(), req_.model);
  if (!loader.ok()) return loader.status();
  scenario_.emplace(*std::move(loader));
  return absl::OkStatus();
}

absl::Status Planner::BaseLoader(GpuSearch& g) const {
  std::vector<config::Override> base = {{"cluster.node", g.node->name},
                                        {"cluster.nodes", "1"},
                                        {"training.seq_len", absl::StrCat(req_.seq_len)},
                                        {"training.micro_batch", "1"},
                                        {"training.global_batch", absl::StrCat(out_.global_batch)},
                                        {"training.recompute", std::string(Name(Recompute::kFull))},
                                        {"parallel.framework", std::string(Name(req_.framework))},
                                        {"parallel.zero", "3"}};
  if (req_.fsdp_version != 1) {
    base.push_back({"parallel.fsdp_version", absl::StrCat(req_.fsdp_version)});
  }
  // Fine-tuning and offload apply to every candidate.
  if (req_.finetune != FinetuneMethod::kFull) {
    base.push_back({"training.finetune.method", std::string(Name(req_.finetune))});
    base.push_back({"training.finetune.rank", absl::StrCat(req_.lora_rank)});
  }
  if (req_.offload.optimizer != OffloadTarget::kNone) {
    base.push_back({"parallel.offload.optimizer", std::string(Name(req_.offload.optimizer))});
  }
  if (req_.offload.params != OffloadTarget::kNone) {
    base.push_back({"parallel.offload.params", std::string(Name(req_.offload.params))});
  }
  if (req_.offload.activations) base.push_back({"parallel.offload.activations", "cpu"});
  if (!req_.headroom.none()) {
    base.push_back({"runtime.headroom", MemoryMarginText(req_.headroom)});
  }
  // The whole run of every candidate trains the plan's budget.
  base.push_back({"run.tokens", absl::StrFormat("%.17g", req_.tokens)});
  // --set last: it fixes what it names (Admitted keeps only the layouts that agree).
  for (const config::Override& o : req_.sets) base.push_back(o);
  g.base = std::move(base);
  if (scenario_) {
    g.loader.emplace(*scenario_);
    return absl::OkStatus();
  }
  auto loader = config::ScenarioLoader::FromOverrides(
      root_,
      {{"schema_version", "1"},
       {"name", absl::StrCat("plan-", model_->name, "-", g.gpu.name)},
       {"model", req_.model}},
      absl::StrCat("plan:", g.gpu.name));
  if (!loader.ok()) return loader.status();
  g.loader.emplace(*std::move(loader));
  return absl::OkStatus();
}

absl::StatusOr<Scenario> Planner::Load(const GpuSearch& g,
                                       const std::vector<config::Override>& overrides,
                                       std::vector<config::ConfigProblem>* problems) const {
  std::vector<config::Override> all = g.base;
  all.insert(all.end(), overrides.begin(), overrides.end());
  return g.loader->Load(all, problems);
}

bool Planner::Admitted(const Candidate& c) const {
  if (req_.sets.empty()) return true;
  // The candidate's value of each searched key: what it sets, else what the base implies.
  std::map<std::string, std::string> value = {
      {"parallel.tp", "1"},
      {"parallel.pp", "1"},
      {"parallel.cp", "1"},
      {"parallel.ep", "1"},
      {"parallel.pp_chunks", "1"},
      {"parallel.sequence_parallel", "false"},
      {"parallel.pp_schedule", "1f1b"},
      {"parallel.framework", std::string(Name(req_.framework))}};
  for (const config::Override& o : c.overrides) value[o.key] = o.value;
  for (const config::Override& o : req_.sets) {
    const auto it = value.find(o.key);
    if (it != value.end() && absl::AsciiStrToLower(it->second) != absl::AsciiStrToLower(o.value)) {
      return false;
    }
  }
  return true;
}

absl::Status Planner::PlanGpu(const std::string& gpu_name) {
  auto gpu = config::FindGpu(catalogs_->gpus, gpu_name);
  if (!gpu.ok()) return gpu.status();
  GpuSearch g;
  g.gpu = *std::move(gpu);
  g.node = NodeFor(g.gpu.name);
  if (g.node == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("plan: no node type in topologies/nodes.yaml holds ", g.gpu.name,
                     "; add one (GPUs per node, NVLink and NIC bandwidth) to plan with it"));
  }
  g.price = g.gpu.price_per_hour_usd;
  if (auto it = prices_.find(g.gpu.name); it != prices_.end()) g.price = it->second;
  bool in_slice = false;
  for (int64_t i = begin_; i < end_; ++i) in_slice = in_slice || units_[i].first == g.gpu.name;
  if (in_slice) {
    ++type_index_;
    tracker_.Update([&](PlanProgress& p) {
      p.gpu = g.gpu.name;
      p.gpu_index = type_index_;
      p.gpu_types = types_in_slice_;
      p.replay_layouts = p.replay_decided = 0;
    });
  }
  if (absl::Status st = BaseLoader(g); !st.ok()) return st;
  out_.types.push_back({g.gpu.name, req_.variant, g.price, CalibrationBasis(g.gpu),
                        DatasheetOnly(g.gpu), std::nullopt, ""});

  // ---- Pareto search: the whole-node sizes of this slice, then the counts between ----------
  tried_.clear();
  std::vector<int64_t> sizes;
  for (int64_t i = begin_; i < end_; ++i) {
    if (units_[i].first == g.gpu.name && units_[i].second > 0) sizes.push_back(units_[i].second);
  }
  SearchSizes(g, sizes);
  if (StopRequested()) return absl::CancelledError("interrupted");
  // A shard sees only its own sizes: the counts between are searched by unsharded plans.
  if (req_.shard.n == 1 && !req_.fixed_gpus) {
    if (absl::Status st = RefineCounts(g); !st.ok()) return st;
  }
  if (!Mine(g.gpu.name, 0)) return absl::OkStatus();
  return SmallestCount(g);
}

void Planner::SearchSizes(const GpuSearch& type, const std::vector<int64_t>& node_counts) {
  GpuSearch g;
  g.gpu = type.gpu;
  g.node = type.node;
  g.price = type.price;
  g.loader = type.loader;
  g.base = type.base;
  for (int64_t nodes : node_counts) {
    if (StopRequested()) return;
    tried_.insert(nodes);
    Enumerate(g, nodes);
  }
  // Rounds by recompute policy, lightest first (none, selective, full): a layout is replayed
  // with more recompute only when the lighter policy did not fit, since recomputing less
  // takes less time on the same GPUs.
  g.fits.assign(g.candidates.size(), std::nullopt);
  for (Recompute round : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    ReplayRound(g, round);
  }
  Confirm(g);
}

std::map<int64_t, double> Planner::BestDays(const GpuSearch& type) const {
  std::map<int64_t, double> best;
  for (int64_t nodes : tried_) best[nodes] = std::numeric_limits<double>::infinity();
  for (const PlanFit& f : out_.fits) {
    if (f.gpu != type.gpu.name || f.estimated) continue;
    if (req_.power_mw && f.power_mw > *req_.power_mw) continue;
    double& d = best[f.gpus / type.node->gpus_per_node];
    d = std::min(d, f.days);
  }
  return best;
}

absl::Status Planner::RefineCounts(const GpuSearch& type) {
  const int64_t gpn = type.node->gpus_per_node;
  // The largest node count searched: --max-gpus; with a deadline and no --max-gpus, the
  // powers of two go on past it until one meets the deadline (up to kMaxDeadlineGpus).
  constexpr int64_t kMaxDeadlineGpus = 131072;
  if (req_.deadline_days && req_.given.count("max-gpus") == 0) {
    int64_t nodes = tried_.empty() ? 1 : *tried_.rbegin();
    auto met = [&] {
      for (const auto& [n, d] : BestDays(type)) {
        if (d <= *req_.deadline_days) return true;
      }
      return false;
    };
    // Past a power budget a larger cluster only draws more: stop once no layout of the
    // largest count searched is within it.
    auto over_power = [&](int64_t n) {
      if (!req_.power_mw) return false;
      for (const PlanFit& f : out_.fits) {
        if (f.gpu == type.gpu.name && f.gpus == n * gpn && f.power_mw <= *req_.power_mw) {
          return false;
        }
      }
      return true;
    };
    while (!met() && nodes * 2 * gpn <= kMaxDeadlineGpus && !over_power(nodes)) {
      if (StopRequested()) return absl::CancelledError("interrupted");
      nodes *= 2;
      SearchSizes(type, {nodes});
    }
  }
  if (req_.deadline_days) {
    // Bisection over node counts between the largest tried that misses the deadline and the
    // smallest that meets it (the fastest layout's days fall as the count grows).
    while (true) {
      if (StopRequested()) return absl::CancelledError("interrupted");
      const std::map<int64_t, double> best = BestDays(type);
      std::optional<int64_t> hi;
      for (const auto& [n, d] : best) {
        if (d <= *req_.deadline_days) {
          hi = n;
          break;
        }
      }
      if (!hi) return absl::OkStatus();
      int64_t lo = 0;
      for (const auto& [n, d] : best) {
        if (n < *hi) lo = n;
      }
      if (*hi - lo <= 1) return absl::OkStatus();
      SearchSizes(type, {lo + (*hi - lo) / 2});
    }
  }
  if (req_.count_gap <= 0) return absl::OkStatus();
  // Without a deadline: the geometric middle of each neighbouring pair whose fastest days
  // differ by more than the gap, all of a round at once, until none does.
  while (true) {
    if (StopRequested()) return absl::CancelledError("interrupted");
    const std::map<int64_t, double> best = BestDays(type);
    std::vector<int64_t> middles;
    for (auto it = best.begin(); it != best.end() && std::next(it) != best.end(); ++it) {
      const auto next = std::next(it);
      if (next->first - it->first <= 1 || !std::isfinite(it->second)) continue;
      if (it->second <= next->second * (1.0 + req_.count_gap)) continue;
      const auto mid = static_cast<int64_t>(
          std::llround(std::sqrt(static_cast<double>(it->first * next->first))));
      middles.push_back(std::clamp(mid, it->first + 1, next->first - 1));
    }
    if (middles.empty()) return absl::OkStatus();
    SearchSizes(type, middles);
  }
}

void Planner::Enumerate(GpuSearch& g, int64_t nodes) {
  const int64_t gpn = g.node->gpus_per_node;
  const int64_t n = nodes * gpn;
  const int64_t global_batch = out_.global_batch;
  std::vector<Candidate> family = DataParallelCandidates(g.gpu.name, n, req_.framework);
  for (Candidate& c : ModelParallelCandidates(g.gpu.name, n, gpn, model_->layers,
                                              model_->moe ? model_->moe->experts : 0)) {
    // The Megatron layouts leave FSDP's version behind (it belongs to framework fsdp).
    if (req_.fsdp_version != 1) c.overrides.push_back({"parallel.fsdp_version", "1"});
    family.push_back(std::move(c));
  }
  // --set of a searched key: only the layouts that keep its value.
  std::erase_if(family, [&](const Candidate& c) { return !Admitted(c); });
  // Each layout loaded and its static floor taken on the workers (independently: 0.9 s of
  // plan llama2-70b, one thread, before); then kept or rejected in the family's order.
  struct Loaded {
    std::optional<absl::StatusOr<Scenario>> scenario;  // none: not one micro-batch per rank
    std::vector<config::ConfigProblem> problems;
    Bytes floor;
  };
  std::vector<Loaded> loaded(family.size());
  tracker_.Update([&](PlanProgress& p) {
    p.loading = 0;
    p.to_load = static_cast<int64_t>(family.size());
    p.loading_gpus = n;
  });
  ParallelFor(family.size(), req_.jobs, [&](size_t k) {
    tracker_.Update([](PlanProgress& p) { ++p.loading; });
    if (StopRequested()) return;  // left unloaded, as a batch that rounds to nothing
    Candidate& c = family[k];
    c.overrides.insert(c.overrides.begin(), {"cluster.nodes", absl::StrCat(nodes)});
    // The batch in tokens, as sequences: the nearest whole number of micro-batches on every
    // data-parallel rank (a multiple of pp of them for the interleaved schedule, which
    // Megatron-LM asserts); refused when that is more than kBatchTolerance off the batch
    // asked, so that no row trains with a batch other than the one asked for but by rounding.
    const int64_t units = (global_batch + BatchUnit(c) / 2) / BatchUnit(c);
    if (units == 0) return;
    c.global_batch = units * BatchUnit(c);
    if (std::abs(static_cast<double>(c.global_batch - global_batch)) >
        kBatchTolerance * static_cast<double>(global_batch)) {
      return;
    }
    c.overrides.push_back({"training.global_batch", absl::StrCat(c.global_batch)});
    Loaded& l = loaded[k];
    l.scenario = Load(g, c.overrides, &l.problems);
    if (l.scenario->ok()) l.floor = StaticFloor(**l.scenario);
  });
  tracker_.Update([](PlanProgress& p) { p.to_load = 0; }, /*report=*/false);
  for (size_t k = 0; k < family.size(); ++k) {
    Candidate& c = family[k];
    Loaded& l = loaded[k];
    ++out_.considered;
    tracker_.Update([](PlanProgress& p) { ++p.layouts; }, /*report=*/false);
    if (!l.scenario) {
      ++out_.pruned;
      const int64_t unit = BatchUnit(c);
      const int64_t nearest = std::max<int64_t>(1, (global_batch + unit / 2) / unit) * unit;
      Reject(g, c, RejectionKind::kBatch,
             absl::StrFormat("a batch of %d sequences is not within %.0f %% of a whole number "
                             "of steps' least, %d (micro-batch x data-parallel ranks%s): the "
                             "nearest is %d",
                             global_batch, kBatchTolerance * 100, unit,
                             c.config.pp_chunks > 1 ? " x pp" : "", nearest));
      continue;
    }
    absl::StatusOr<Scenario>& s = *l.scenario;
    if (!s.ok()) {
      // A layout the model does not admit (TP not dividing the heads, PP the layers).
      ++out_.pruned;
      Reject(g, c, RejectionKind::kLayout, ProblemsText(l.problems, s.status()));
      continue;
    }
    if (l.floor > s->cluster.gpu.Usable()) {
      ++out_.pruned;
      Reject(g, c, RejectionKind::kStatic,
             absl::StrFormat("static ledger: states + kept activations + reserve "
                             "= %.1f GiB > %.1f GiB usable",
                             l.floor.gib(), s->cluster.gpu.Usable().gib()),
             l.floor);
      continue;
    }
    c.scenario = std::make_shared<const Scenario>(*std::move(s));
    g.candidates.push_back(c);
    tracker_.Update([](PlanProgress& p) { ++p.replay_layouts; }, /*report=*/false);
  }
}

void Planner::Reject(GpuSearch& g, const Candidate& c, RejectionKind kind, std::string reason,
                     std::optional<Bytes> floor) {
  g.rejected.push_back({g.gpu.name, c.gpus, c.config, kind, std::move(reason), floor});
  tracker_.Update([&](PlanProgress& p) {
    ++p.rejected;
    if (AfterReplays(kind)) ++p.replay_decided;
  });
}

std::optional<PlanFit> Planner::FitOf(GpuSearch& g, const Candidate& c, const ConfigResult& r,
                                      std::optional<double> step_s) {
  if (!r.status.ok()) {
    Reject(g, c, RejectionKind::kInvalid, std::string(r.status.message()));
    return std::nullopt;
  }
  const report::RunSummary& run = *r.summary;
  if (!run.fits) {
    // The GPUs overflow at an op; or they fit and the node's host memory does not.
    Reject(g, c, RejectionKind::kReplay,
           run.first_overflow
               ? absl::StrFormat("replay: out of memory at %s by %.2f GiB (reserved peak %.1f GiB)",
                                 run.first_overflow->op, run.first_overflow->excess.gib(),
                                 run.reserved_peak.gib())
               : absl::StrFormat("replay: host memory %.0f GiB per node exceeds the "
                                 "node's %.0f GiB of DRAM (GPU peak %.1f GiB fits)",
                                 run.host_peak.gib(), run.host_capacity.gib(), run.peak.gib()));
    return std::nullopt;
  }
  const double step = step_s.value_or(run.step.seconds());
  const double tokens_per_s =
      static_cast<double>(c.global_batch) * static_cast<double>(req_.seq_len) / step;
  // The whole run (sim/report/whole_run.h): the days of steps over the ETTR its interruptions
  // and checkpoints leave, at the power the cluster draws; the cost of that wall time, rented
  // at the plan's price or owned (run.cost.capex_per_gpu) with its electricity.
  const report::WholeRun& whole = run.whole_run;
  const double ideal_days = req_.tokens / tokens_per_s / 86400.0;
  const double ettr = whole.ettr > 0 ? whole.ettr : 1.0;
  const double days = ideal_days / ettr;
  const double gpus = static_cast<double>(c.gpus);
  const double power_w =
      (whole.gpu_watts * gpus + whole.host_watts * static_cast<double>(whole.nodes)) * whole.pue;
  PlanFit fit{g.gpu.name, c.gpus, c.config,     req_.variant,  c.global_batch,
              step,       days,   std::nullopt, run.host_peak, step_s.has_value()};
  fit.ideal_days = ideal_days;
  fit.ettr = ettr;
  fit.power_mw = power_w / 1e6;
  fit.energy_mwh = power_w * days * 86400.0 / 3.6e9;
  const RunSpec& spec = c.scenario->run;
  if (spec.capex_per_gpu_usd) {
    fit.cost = *spec.capex_per_gpu_usd * gpus * days / (spec.years * 365.0) +
               fit.energy_mwh * 1000.0 * spec.electricity_usd_per_kwh;
  } else if (g.price) {
    fit.cost = days * 24.0 * gpus * *g.price;
  }
  return fit;
}

void Planner::SetFit(GpuSearch& g, size_t i, std::optional<PlanFit> f) {
  const int64_t change = (f ? 1 : 0) - (g.fits[i] ? 1 : 0);
  g.fits[i] = std::move(f);
  tracker_.Update([&](PlanProgress& p) {
    p.kept += change;
    p.replay_decided += change;
  });
}

// The replays of one batch, reported to the progress function as the plan's running count of
// replays. They run longest first (`work`: the micro-batches each replays, at most), so that a
// long replay does not start when the other workers are nearly done and keep them waiting; the
// results come back in the batch's order.
std::vector<ConfigResult> Planner::Replay(const std::vector<Scenario>& batch,
                                          const std::vector<int64_t>& work) {
  const size_t base = static_cast<size_t>(out_.replayed);
  ProgressTracker& tracker = tracker_;
  const Progress counted = progress_ ? Progress([&tracker, base](size_t done, size_t) {
    // Workers report in any order: the count only grows.
    tracker.Update([&](PlanProgress& p) {
      p.replayed = std::max(p.replayed, static_cast<int64_t>(base + done));
    });
  })
                                     : Progress();
  std::vector<size_t> order(batch.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return work[x] > work[y]; });
  std::vector<Scenario> longest_first;
  for (size_t k : order) longest_first.push_back(batch[k]);
  std::vector<ConfigResult> ran = RunScenarios(longest_first, req_.jobs, counted);
  std::vector<ConfigResult> results(batch.size());
  for (size_t k = 0; k < order.size(); ++k) results[order[k]] = std::move(ran[k]);
  out_.replayed += static_cast<int64_t>(results.size());
  return results;
}

std::vector<ConfigResult> Planner::ReplayInFull(const GpuSearch& g,
                                                const std::vector<size_t>& which) {
  std::vector<Scenario> scenarios;
  std::vector<int64_t> work;
  for (size_t i : which) {
    scenarios.push_back(*g.candidates[i].scenario);
    work.push_back(MicroBatches(g.candidates[i], g.candidates[i].global_batch));
  }
  return Replay(scenarios, work);
}

// The smallest count: a static lower bound (16 B/param sharded over N under ZeRO-3, plus the
// layer inputs of full recompute, plus the reserve, must fit), then single GPUs up to a node
// and whole nodes past it until one fits, then a bisection.
absl::Status Planner::SmallestCount(GpuSearch& g) {
  const int64_t gpn = g.node->gpus_per_node;
  auto fits_at = [&](int64_t n) -> std::optional<report::RunSummary> {
    const int64_t per_node = PerNode(n, gpn);
    std::vector<config::Override> o = {{"cluster.nodes", absl::StrCat(n / per_node)},
                                       {"cluster.gpus_per_node", absl::StrCat(per_node)},
                                       {"training.global_batch", absl::StrCat(2 * n)}};
    std::vector<config::Override> all = g.base;
    all.insert(all.end(), o.begin(), o.end());
    auto r = RunConfigs(*g.loader, {all}, 1, nullptr);
    ++out_.replayed;
    tracker_.Update([&](PlanProgress& p) { p.replayed = out_.replayed; });
    if (!r[0].status.ok() || !r[0].summary->fits) return std::nullopt;
    return std::move(r[0].summary);
  };
  int64_t lo = 1;  // largest N known not to fit (or 1 as the floor), hi = smallest that fits
  {
    // One node, ZeRO-3, the batch of the count search (whatever the request's batch in tokens).
    auto s = Load(g, {{"training.global_batch", absl::StrCat(2 * gpn)}});
    if (!s.ok()) return s.status();
    const Bytes act = StaticFloor(*s) - PersistentStates(*s).total() - s->runtime.reserved;
    const double per_gpu_room = (s->cluster.gpu.Usable() - act - s->runtime.reserved).gb();
    const double states = static_cast<double>(PersistentStates(*s).total().count()) *
                          static_cast<double>(s->dp()) / 1e9;  // ZeRO-3 states of the model
    lo = per_gpu_room > 0 ? std::max<int64_t>(1, static_cast<int64_t>(states / per_gpu_room))
                          : req_.max_gpus;
  }
  std::optional<int64_t> hi;
  std::optional<report::RunSummary> hi_run;
  for (int64_t n = std::max<int64_t>(lo, 1); n <= req_.max_gpus;
       n = n < gpn ? n + 1 : (n / gpn + 1) * gpn) {
    if (StopRequested()) return absl::CancelledError("interrupted");
    if (auto r = fits_at(n)) {
      hi = n;
      hi_run = std::move(r);
      break;
    }
    lo = n;
  }
  if (!hi) {
    MinGpus none;
    none.gpu = g.gpu.name;
    none.variant = req_.variant;
    none.reason = absl::StrFormat("nothing fits up to %d GPUs", req_.max_gpus);
    SetMinGpus(out_.min_gpus, std::move(none));
    return absl::OkStatus();
  }
  while (*hi - lo > 1) {
    if (StopRequested()) return absl::CancelledError("interrupted");
    const int64_t mid = lo + (*hi - lo) / 2;
    if (auto r = fits_at(mid)) {
      hi = mid;
      hi_run = std::move(r);
    } else {
      lo = mid;
    }
  }
  SetMinGpus(out_.min_gpus,
             MinGpus{g.gpu.name, req_.variant, *hi, "", PlanConfig{}, hi_run->reserved_peak,
                     hi_run->capacity, Largest(hi_run->peak_breakdown), hi_run->peak_breakdown,
                     hi_run->host_peak});
  return absl::OkStatus();
}

}  // namespace plan_internal

absl::StatusOr<PlanResult> Plan(const config::DataRoot& root, const PlanRequest& req,
                                const PlanProgressFn& progress) {
  if (req.searches.empty()) return plan_internal::Planner(root, req, progress).Run();
  if (req.shard.n > 1) {
    return absl::InvalidArgumentError("--search and --shard: shard a plan without --search");
  }
  // The product of the searched values by an odometer, the last key fastest; each a plan of
  // its own with the values as --set, joined into one.
  std::vector<size_t> at(req.searches.size(), 0);
  std::optional<PlanResult> all;
  while (true) {
    PlanRequest one = req;
    std::vector<std::string> label;
    for (size_t k = 0; k < req.searches.size(); ++k) {
      const auto& [key, values] = req.searches[k];
      one.sets.push_back({key, values[at[k]]});
      label.push_back(absl::StrCat(key, "=", values[at[k]]));
    }
    one.variant = absl::StrJoin(label, ", ");
    auto p = plan_internal::Planner(root, one, progress).Run();
    if (!p.ok()) {
      return absl::Status(p.status().code(), absl::StrCat(one.variant, ": ", p.status().message()));
    }
    if (!all) {
      all = *std::move(p);
    } else {
      for (auto& f : p->fits) all->fits.push_back(std::move(f));
      for (auto& r : p->rejected) all->rejected.push_back(std::move(r));
      for (auto& m : p->min_gpus) all->min_gpus.push_back(std::move(m));
      for (auto& t : p->types) all->types.push_back(std::move(t));
      all->considered += p->considered;
      all->pruned += p->pruned;
      all->replayed += p->replayed;
      all->estimated += p->estimated;
      all->confirmed += p->confirmed;
      all->seconds += p->seconds;
    }
    size_t k = at.size();
    while (k > 0 && ++at[k - 1] == req.searches[k - 1].second.size()) at[--k] = 0;
    if (k == 0) break;
  }
  SortRejected(all->rejected);
  all->pareto = ParetoFrontier(all->fits);
  FillTypeRows(*all);
  return *std::move(all);
}

}  // namespace sim::explore
