// Sweeps, comparisons and plans (sim/explore): grids, order, determinism and the SPEC stories.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sim/cost/collective_cost.h"
#include "sim/explore/grid.h"
#include "sim/explore/plan.h"
#include "sim/explore/plan_options.h"
#include "sim/explore/plan_report.h"
#include "sim/explore/runner.h"
#include "sim/explore/sweep.h"
#include "sim/report/run_report.h"
#include "sim/workload/params.h"

namespace sim::explore {
namespace {

const config::DataRoot kRoot{STEPSIM_SOURCE_DIR};

config::ScenarioLoader DefaultLoader() {
  auto l = config::ScenarioLoader::Open(kRoot, STEPSIM_SOURCE_DIR "/scenarios/default.yaml");
  REQUIRE(l.ok());
  return *l;
}

TEST_CASE("vary values: lists and ranges", "[explore]") {
  CHECK(ParseVary("training.seq_len=2048,4096")->values ==
        std::vector<std::string>{"2048", "4096"});
  CHECK(ParseVary("cluster.nodes=2..64:x2")->values ==
        std::vector<std::string>{"2", "4", "8", "16", "32", "64"});
  CHECK(ParseVary("parallel.zero=0..3")->values == std::vector<std::string>{"0", "1", "2", "3"});
  CHECK(ParseVary("a=1..7:+3,10")->values == std::vector<std::string>{"1", "4", "7", "10"});
  CHECK(ParseVary("parallel.bucket=25 MB,50 MB")->values ==
        std::vector<std::string>{"25 MB", "50 MB"});
  CHECK_FALSE(ParseVary("novalues").ok());
  CHECK_FALSE(ParseVary("a=8..2").ok());
  CHECK_FALSE(ParseVary("a=1..8:x1").ok());
  CHECK_FALSE(ParseVary("a=1,,2").ok());
}

TEST_CASE("the product runs first key outermost, shards tile it", "[explore]") {
  const auto p = Product({{"a", {"1", "2"}}, {"b", {"x", "y", "z"}}});
  REQUIRE(p.size() == 6);
  CHECK(p[0][0].value == "1");
  CHECK(p[0][1].value == "x");
  CHECK(p[1][1].value == "y");
  CHECK(p[3][0].value == "2");
  size_t covered = 0;
  for (int k = 1; k <= 4; ++k) {
    auto shard = ParseShard(absl::StrCat(k, "/4"));
    REQUIRE(shard.ok());
    const Slice s = SliceOf(*shard, 6);
    CHECK(s.begin == covered);
    covered = s.end;
  }
  CHECK(covered == 6);
  CHECK_FALSE(ParseShard("5/4").ok());
  CHECK_FALSE(ParseShard("0/4").ok());
  CHECK_FALSE(ParseShard("1/x").ok());
}

TEST_CASE("parallel runs give identical results in product order", "[explore]") {
  const auto loader = DefaultLoader();
  const auto configs = Product({{"training.seq_len", {"2048", "4096", "8192"}},
                                {"parallel.zero", {"2", "3"}},
                                {"training.global_batch", {"32"}}});
  const auto one = RunConfigs(loader, configs, 1, nullptr);
  const auto two = RunConfigs(loader, configs, 2, nullptr);
  REQUIRE(one.size() == configs.size());
  for (size_t i = 0; i < one.size(); ++i) {
    CHECK(one[i].overrides[0].value == configs[i][0].value);
    CHECK(report::RunJson(*one[i].summary).dump() == report::RunJson(*two[i].summary).dump());
  }
  // The sweep's JSON, its items built on the workers, is the same on any number of them.
  const Slice all{0, configs.size()};
  const std::string serial =
      SweepJson("s", {"training.seq_len"}, all, configs.size(), one, 0, 1).dump();
  CHECK(absl::StrContains(serial, "\"training.seq_len\":\"8192\""));
  for (int jobs : {2, 3, 8}) {
    CHECK(SweepJson("s", {"training.seq_len"}, all, configs.size(), two, 0, jobs).dump() == serial);
  }
  // Its text, each item serialized on the workers, is the whole report's pretty print; with a
  // failed configuration's error, a label after common --set ones, and with no results.
  std::vector<ConfigResult> mixed = two;
  mixed[1].status = absl::InvalidArgumentError("training.global_batch: \"32\" does not divide");
  mixed[1].summary.reset();
  const std::vector<ConfigResult>& with_error = mixed;
  for (const std::vector<ConfigResult>* results : {&one, &with_error}) {
    const std::string pretty =
        SweepJson("s", {"training.seq_len"}, all, configs.size(), *results, 1, 1).dump(2);
    for (int jobs : {1, 2, 3}) {
      CHECK(SweepJsonText("s", {"training.seq_len"}, all, configs.size(), *results, 1, jobs) ==
            pretty);
    }
  }
  CHECK(SweepJsonText("s", {"k"}, {0, 0}, 0, {}, 0, 2) ==
        SweepJson("s", {"k"}, {0, 0}, 0, {}, 0, 2).dump(2));
}

TEST_CASE("plan's counts are decimal with K, M, G, T and binary with Ki, Mi, Gi, Ti", "[explore]") {
  // "15T tokens" is 15e12 and --batch-tokens 16M is 16,000,000; a binary count says so: the
  // default, 1,024 sequences of 4,096, is 4Mi = 4,194,304.
  PlanRequest req;
  CHECK(req.global_batch_tokens == 4194304);
  REQUIRE(SetPlanOption(req, "batch-tokens", "16M", "--batch-tokens").ok());
  CHECK(req.global_batch_tokens == 16000000);
  REQUIRE(SetPlanOption(req, "batch-tokens", "16Mi", "--batch-tokens").ok());
  CHECK(req.global_batch_tokens == 16777216);
  REQUIRE(SetPlanOption(req, "batch-tokens", "512Ki", "--batch-tokens").ok());
  CHECK(req.global_batch_tokens == 524288);
  REQUIRE(SetPlanOption(req, "batch-tokens", "4000000", "--batch-tokens").ok());
  CHECK(req.global_batch_tokens == 4000000);
  REQUIRE(SetPlanOption(req, "tokens", "2T", "--tokens").ok());
  CHECK(req.tokens == 2e12);
  REQUIRE(SetPlanOption(req, "tokens", "1Ti", "--tokens").ok());
  CHECK(req.tokens == 1099511627776.0);
  CHECK_FALSE(SetPlanOption(req, "batch-tokens", "4Xi", "--batch-tokens").ok());
}

TEST_CASE("plan options refuse a count past its bound instead of casting it", "[explore]") {
  // --max-gpus 1e19 was cast to an int64_t it does not fit (undefined; it planned nothing and
  // printed that as the answer), and --max-gpus 1e15 searched for minutes.
  PlanRequest req;
  REQUIRE(SetPlanOption(req, "max-gpus", "1048576", "--max-gpus").ok());
  CHECK(req.max_gpus == 1048576);
  const std::pair<const char*, const char*> bad[] = {
      {"max-gpus", "--max-gpus: expected a count of at most 1048576, got '1e19'"},
      {"jobs", "--jobs: expected a count of at most 1024, got '1e19'"},
      {"seq-len", "--seq-len: expected a count of at most 16777216, got '1e19'"},
      {"batch-tokens", "--batch-tokens: expected a count of at most 1099511627776, got '1e19'"},
      {"lora-rank", "--lora-rank: expected a count of at most 1048576, got '1e19'"},
  };
  for (const auto& [name, message] : bad) {
    const absl::Status st = SetPlanOption(req, name, "1e19", absl::StrCat("--", name));
    CHECK(st.message() == message);
  }
  CHECK(req.max_gpus == 1048576);  // untouched by the refused values
  CHECK(SetPlanOption(req, "tokens", "1e301", "--tokens").message() ==
        "--tokens: expected a count of at most 1e+300, got '1e301'");
}

TEST_CASE("one loader reads each model once, and keeps models apart by name", "[explore]") {
  // The loader keeps the model files it has read (config::ModelCache): a sweep over `model`
  // must still get each configuration's own model, the same as a fresh loader gives it.
  const auto loader = DefaultLoader();
  for (const char* name : {"llama2-7b", "llama2-70b", "llama2-7b", "llama3-8b"}) {
    const auto cached = loader.Load({{"model", name}});
    const auto fresh = DefaultLoader().Load({{"model", name}});
    REQUIRE(cached.ok());
    REQUIRE(fresh.ok());
    CHECK(cached->model.name == fresh->model.name);
    CHECK(cached->model.layers == fresh->model.layers);
    CHECK(cached->model.hidden == fresh->model.hidden);
  }
  CHECK(loader.Load({{"model", "llama2-7b"}})->model.layers == 32);
  CHECK(loader.Load({{"model", "llama2-70b"}})->model.layers == 80);
  // A name that is not a model stays an error on every load, with the nearest name.
  for (int i = 0; i < 2; ++i) {
    const auto bad = loader.Load({{"model", "llama2-7"}});
    REQUIRE_FALSE(bad.ok());
    CHECK(absl::StrContains(bad.status().message(), "unknown model 'llama2-7'"));
  }
}

TEST_CASE("a worker's kept collective models price as new ones", "[explore]") {
  // RunConfigs' workers keep the collective models of the clusters they replayed
  // (cost::CostModelCache): a model reused across configurations and clusters must give each
  // the report a model built for it alone gives.
  const auto loader = DefaultLoader();
  cost::CostModelCache models;
  const std::vector<std::vector<config::Override>> configs = {
      {{"training.global_batch", "64"}},
      {{"cluster.nodes", "8"}, {"training.global_batch", "128"}},
      {{"parallel.zero", "1"}, {"training.global_batch", "64"}},  // the first cluster again
      {{"parallel.collective", "ring"}, {"training.global_batch", "64"}},
  };
  std::vector<const cost::CollectiveCostModel*> used;
  for (const auto& o : configs) {
    const auto s = loader.Load(o);
    REQUIRE(s.ok());
    auto kept = replay::Simulate(*s, {}, models);
    auto fresh = replay::Simulate(*s, {});
    REQUIRE(kept.ok());
    REQUIRE(fresh.ok());
    CHECK(report::RunJson(report::Summarize(*s, *kept)).dump() ==
          report::RunJson(report::Summarize(*s, *fresh)).dump());
    used.push_back(*models.For(*s));
  }
  CHECK(used[0] == used[2]);  // the same cluster and algorithm: one model
  CHECK(used[0] != used[1]);  // another node count
  CHECK(used[0] != used[3]);  // another algorithm
}

double Activations(const report::RunSummary& r) {
  return static_cast<double>(r.category_peaks[static_cast<int>(MemCategory::kActivations)].count());
}

TEST_CASE("seq-len sweep of Llama-2-70B: flash linear, eager quadratic, full smallest",
          "[explore]") {
  const auto loader = DefaultLoader();
  std::vector<std::vector<config::Override>> configs;
  for (const char* attention : {"flash", "eager"}) {
    for (const char* recompute : {"none", "full"}) {
      for (const char* s : {"2048", "4096", "8192"}) {
        configs.push_back({{"training.global_batch", "32"},
                           {"training.attention", attention},
                           {"training.recompute", recompute},
                           {"training.seq_len", s}});
      }
    }
  }
  const auto r = RunConfigs(loader, configs, 2, nullptr);
  auto act = [&](int i) { return Activations(*r[i].summary); };
  // flash/none at 2k, 4k, 8k: doubling s doubles the activations.
  CHECK(act(1) / act(0) == Approx(2.0).epsilon(0.01));
  CHECK(act(2) / act(1) == Approx(2.0).epsilon(0.01));
  // flash/full: linear and far smaller.
  CHECK(act(4) / act(3) == Approx(2.0).epsilon(0.01));
  CHECK(act(5) < act(2) / 4);
  // eager/none: more than double per doubling (the a·s² scores).
  CHECK(act(7) / act(6) > 2.2);
  CHECK(act(8) / act(7) > act(7) / act(6));
}

TEST_CASE("compare: communication ratios to DDP at m = 1 and m = 8", "[explore]") {
  const auto loader = DefaultLoader();
  auto sent = [](const std::optional<report::RunSummary>& r) {
    return static_cast<double>((r->Sent(CollectiveKind::kAllGather) +
                                r->Sent(CollectiveKind::kReduceScatter) +
                                r->Sent(CollectiveKind::kAllReduce))
                                   .count());
  };
  for (int64_t m : {1, 8}) {
    std::vector<std::vector<config::Override>> configs;
    for (int zero = 0; zero <= 3; ++zero) {
      // Whole layers gathered ahead: the textbook volumes (DeepSpeed's own coordinator keeps
      // the head gathered into its backward, replay_test.cc).
      configs.push_back({{"cluster.nodes", "4"},
                         {"training.global_batch", std::to_string(32 * m)},
                         {"parallel.prefetch", "1"},
                         {"parallel.zero", std::to_string(zero)}});
    }
    const auto r = RunConfigs(loader, configs, 2, nullptr);
    const double ddp = sent(r[0].summary);
    INFO("m = " << m);
    CHECK(sent(r[1].summary) / ddp == Approx(1.0).epsilon(1e-6));
    if (m == 1) {
      CHECK(sent(r[2].summary) / ddp == Approx(1.0).epsilon(1e-6));
      CHECK(sent(r[3].summary) / ddp == Approx(1.5).epsilon(1e-6));
    } else {
      // ZeRO-2 reduce-scatters every micro-batch (m · 2Ψ) and gathers once (2Ψ);
      // ZeRO-3 sends m times its per-micro-batch volume 3 · 2Ψ.
      const double z2_rs =
          static_cast<double>(r[2].summary->Sent(CollectiveKind::kReduceScatter).count());
      CHECK(z2_rs / (ddp / 2) == Approx(8.0).epsilon(1e-6));
      CHECK(sent(r[3].summary) / (1.5 * ddp) == Approx(8.0).epsilon(1e-6));
    }
  }
}

TEST_CASE("uneven first/last stages where the layers do not split", "[explore]") {
  using Ends = std::optional<std::pair<int64_t, int64_t>>;
  // Llama 3 405B's 126 layers: 16 stages are 7 + 14 x 8 + 7 (the paper's layout), 2 chunks on
  // 16 stages 3 + 30 x 4 + 3 (scenarios/llama3-405b-8k.yaml), 64 virtual stages 1 + 62 x 2 + 1.
  CHECK(UnevenEnds(126, 16, 1) == Ends({7, 7}));
  CHECK(UnevenEnds(126, 16, 2) == Ends({3, 3}));
  CHECK(UnevenEnds(126, 32, 2) == Ends({1, 1}));
  CHECK(UnevenEnds(126, 2, 1) == Ends({0, 0}));  // even
  CHECK(UnevenEnds(80, 16, 1) == Ends({0, 0}));
  CHECK(UnevenEnds(80, 32, 1) == std::nullopt);  // 30 x 3 stages already exceed 80 layers
  CHECK(UnevenEnds(7, 2, 1) == std::nullopt);    // no middle stage to hold the rest
  CHECK(UnevenEnds(5, 8, 1) == std::nullopt);    // more stages than layers
}

// The plan's screening (sim/explore/plan.cc ScreenSizes): a step at m micro-batches is the
// step at m2 plus (m - m2) periods, the period the difference of the steps at pp and m2, where
// m2 = pp + 2 (2 pp interleaved), at least 4; and the peak and the reservation (whether it
// fits) are those of the whole step by m2.
TEST_CASE("the replayed step is linear in the micro-batches past pp: the plan's screening",
          "[explore]") {
  auto loader = DefaultLoader();
  struct Layout {
    std::vector<config::Override> overrides;
    int64_t pp, dp;
    bool interleaved = false;
  };
  const std::vector<Layout> layouts = {
      {{{"parallel.zero", "3"}}, 1, 32},
      {{{"parallel.framework", "megatron"},
        {"parallel.zero", "1"},
        {"parallel.tp", "4"},
        {"parallel.sequence_parallel", "true"},
        {"parallel.pp", "4"},
        {"training.recompute", "selective"}},
       4,
       2},
      // A deep pipeline, where pp + 2 is far short of 2 pp.
      {{{"parallel.framework", "megatron"},
        {"parallel.zero", "1"},
        {"parallel.tp", "4"},
        {"parallel.sequence_parallel", "true"},
        {"parallel.pp", "8"},
        {"training.recompute", "selective"}},
       8,
       1},
      {{{"parallel.framework", "megatron"},
        {"parallel.zero", "1"},
        {"parallel.tp", "2"},
        {"parallel.sequence_parallel", "true"},
        {"parallel.pp", "4"},
        {"parallel.pp_schedule", "interleaved"},
        {"parallel.pp_chunks", "2"},
        {"training.recompute", "selective"}},
       4,
       4,
       true},
  };
  for (const Layout& l : layouts) {
    const int64_t m1 = std::max<int64_t>(l.pp, 2),
                  m2 = std::max<int64_t>(l.interleaved ? 2 * l.pp : l.pp + 2, 4), m = 8 * l.pp;
    std::vector<std::vector<config::Override>> configs;
    for (int64_t mb : {m1, m2, m}) {
      std::vector<config::Override> o = l.overrides;
      o.push_back({"training.global_batch", absl::StrCat(mb * l.dp)});
      configs.push_back(o);
    }
    const auto r = RunConfigs(loader, configs, 2, nullptr);
    for (const ConfigResult& c : r) REQUIRE(c.status.ok());
    const double s1 = r[0].summary->step.seconds(), s2 = r[1].summary->step.seconds();
    const double estimate =
        s2 + (s2 - s1) / static_cast<double>(m2 - m1) * static_cast<double>(m - m2);
    INFO("pp " << l.pp << ": " << s1 << " s at " << m1 << ", " << s2 << " s at " << m2);
    CHECK(estimate == Approx(r[2].summary->step.seconds()).epsilon(1e-6));
    // And the peak and the caching allocator's reservation are reached by m2 micro-batches.
    CHECK(r[1].summary->peak == r[2].summary->peak);
    CHECK(r[1].summary->reserved_peak == r[2].summary->reserved_peak);
  }
}

TEST_CASE("plan: Llama-3-405B on 256 H100 needs deep pipelines with uneven stages", "[explore]") {
  PlanRequest req;
  req.model = "llama3-405b";
  req.gpus = {"H100-SXM5-80GB"};
  req.tokens = 15e12;
  req.max_gpus = 256;
  req.global_batch_tokens = 1 << 20;
  req.prices = {{"H100-SXM5-80GB", 2.49}};
  req.jobs = 2;
  auto plan = Plan(kRoot, req, nullptr);
  REQUIRE(plan.ok());
  REQUIRE_FALSE(plan->pareto.empty());
  for (const PlanFit& f : plan->pareto) {
    INFO(f.gpus << " GPUs tp" << f.config.tp << " pp" << f.config.pp);
    CHECK_FALSE(f.estimated);  // the front is replayed in full
    CHECK(f.config.pp >= 16);  // 405B's states need it on 256 GPUs
    // 126 layers do not split over 16 or 32 (virtual) stages: the ends take the rest.
    CHECK(f.config.first_stage_layers > 0);
    // The batch is the request's 1M tokens (256 sequences of 4096), whole micro-batches on
    // every data-parallel rank.
    CHECK(f.global_batch == 256);
  }
  // The text's Pareto table gives each row's batch after its layout.
  const std::string all_text = PlanText(*plan);
  const std::string text = all_text.substr(all_text.find("Pareto set"));
  for (const PlanFit& f : plan->pareto) {
    const std::string label = ConfigLabel(f.config);
    const size_t at = text.find(label);
    REQUIRE(at != std::string::npos);
    std::istringstream after(text.substr(at + label.size()));
    int64_t batch = 0;
    after >> batch;
    CHECK(batch == f.global_batch);
  }
  // Every layout the search considered ends as a fit or a rejection with its reason, once.
  CHECK(plan->considered ==
        static_cast<int64_t>(plan->fits.size()) + static_cast<int64_t>(plan->rejected.size()));
}

TEST_CASE("plan: the same on one thread as on three, and screening waves prune far-off layouts",
          "[explore]") {
  // Stage C screens its layouts in fixed waves (kScreenWave), each measured against the steps
  // the earlier ones found: what a wave keeps must not depend on how many threads ran it.
  PlanRequest req;
  req.model = "llama2-70b";
  req.gpus = {"H100-SXM5-80GB"};
  req.tokens = 2e12;
  req.max_gpus = 64;
  req.jobs = 1;
  auto one = Plan(kRoot, req, nullptr);
  req.jobs = 3;
  auto three = Plan(kRoot, req, nullptr);
  REQUIRE(one.ok());
  REQUIRE(three.ok());
  one->seconds = three->seconds = 0;  // the only field that may differ
  CHECK(PlanJson(*one).dump() == PlanJson(*three).dump());
  // Layouts far from the front end as `slower` rejections, without a replay or without their
  // second short one; the front is replayed in full.
  int64_t slower = 0;
  for (const PlanRejection& r : one->rejected) slower += r.kind == RejectionKind::kSlower;
  CHECK(slower > 0);
  REQUIRE_FALSE(one->pareto.empty());
  for (const PlanFit& f : one->pareto) CHECK_FALSE(f.estimated);
}

TEST_CASE("plan: its progress counts every layout once, kept or rejected", "[explore]") {
  PlanRequest req;
  req.model = "llama2-70b";
  req.gpus = {"H100-SXM5-80GB", "A100-SXM4-80GB"};
  req.tokens = 2e12;
  req.max_gpus = 64;
  req.jobs = 2;
  std::mutex mu;  // reports come from the workers too
  std::vector<PlanProgress> seen;
  auto plan = Plan(kRoot, req, [&](const PlanProgress& p) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(p);
  });
  REQUIRE(plan.ok());
  REQUIRE_FALSE(seen.empty());
  const PlanProgress& last = seen.back();
  CHECK(last.gpu == "A100-SXM4-80GB");
  CHECK(last.gpu_index == 2);
  CHECK(last.gpu_types == 2);
  CHECK(last.layouts == plan->considered);
  CHECK(last.kept == static_cast<int64_t>(plan->fits.size()));
  CHECK(last.rejected == static_cast<int64_t>(plan->rejected.size()));
  CHECK(last.kept + last.rejected == last.layouts);
  CHECK(last.replay_decided == last.replay_layouts);
  CHECK(last.Fraction() == 1.0);
  int64_t most_replays = 0;
  bool loaded = false, first_type = false;
  for (const PlanProgress& p : seen) {
    most_replays = std::max(most_replays, p.replayed);
    loaded = loaded || (p.to_load > 0 && p.loading > 0 && p.loading <= p.to_load);
    first_type = first_type || (p.gpu == "H100-SXM5-80GB" && p.gpu_index == 1);
    CHECK(p.replay_decided <= p.replay_layouts);
    CHECK(p.Fraction() >= 0.0);
    CHECK(p.Fraction() <= 1.0);
  }
  CHECK(most_replays == plan->replayed);
  CHECK(loaded);
  CHECK(first_type);
}

TEST_CASE("plan progress: the time left once a twentieth is done", "[explore]") {
  PlanProgress p;
  p.gpu = "H100-SXM5-80GB";
  p.gpu_index = 2;
  p.gpu_types = 4;
  p.layouts = 1234;
  p.kept = 56;
  p.rejected = 1100;
  p.replayed = 345;
  p.replay_layouts = 100;
  p.replay_decided = 50;
  // One type of four done and half of the second: (1 + 0.5) / 4 of the search in 30 s leaves
  // 30 x 0.625 / 0.375 = 50 s.
  CHECK(p.Fraction() == 0.375);
  CHECK(PlanProgressText(p, 30.0) ==
        "plan: H100-SXM5-80GB (2/4): 1234 layouts (56 kept, 1100 rejected), 345 replays, about "
        "50 s left");
  // 600 s: 1,000 s left, 16.7 min, rounded; 36,000 s: 60,000 s left, 16.7 h.
  CHECK(absl::StrContains(PlanProgressText(p, 600.0), "about 17 min left"));
  CHECK(absl::StrContains(PlanProgressText(p, 36000.0), "about 16.7 h left"));
  // Loading a size's layouts, in the first type with nothing decided yet: no estimate.
  p.gpu_index = 1;
  p.replay_decided = 0;
  p.to_load = 2000;
  p.loading = 1234;
  p.loading_gpus = 4096;
  CHECK(p.Fraction() == 0.0);
  CHECK(PlanProgressText(p, 5.0) ==
        "plan: H100-SXM5-80GB (1/4): loading the layouts on 4096 GPUs, 1234 of 2000; 1234 layouts "
        "(56 kept, 1100 rejected), 345 replays, time left not known yet");
  PlanProgress none;  // before any GPU type
  CHECK(none.Fraction() == 0.0);
}

TEST_CASE("plan: a mixture of experts is searched with expert parallelism", "[explore][moe]") {
  PlanRequest req;
  req.model = "mixtral-8x7b";
  req.gpus = {"H100-SXM5-80GB"};
  req.tokens = 1e12;
  req.max_gpus = 32;
  req.prices = {{"H100-SXM5-80GB", 2.49}};
  req.jobs = 2;
  auto plan = Plan(kRoot, req, nullptr);
  REQUIRE(plan.ok());
  REQUIRE_FALSE(plan->pareto.empty());
  bool expert_parallel = false;
  for (const PlanFit& f : plan->fits) {
    INFO(f.gpus << " GPUs tp" << f.config.tp << " ep" << f.config.ep);
    // EP divides the 8 experts and the data-parallel ranks, EP x TP stays inside a node.
    CHECK(8 % f.config.ep == 0);
    CHECK(f.config.tp * f.config.ep <= 8);
    CHECK((f.gpus / (f.config.tp * f.config.pp * f.config.cp)) % f.config.ep == 0);
    if (f.config.ep > 1) CHECK(f.config.zero == 1);  // the distributed optimizer
  }
  for (const PlanFit& f : plan->pareto) expert_parallel |= f.config.ep > 1;
  // Replicating 46.7B parameters on every GPU leaves less room than sharding the experts.
  CHECK(expert_parallel);
}

TEST_CASE("plan --days picks the smallest cluster in time, --budget the fastest in budget",
          "[explore]") {
  PlanResult p;
  auto fit = [](int64_t gpus, double days, double cost) {
    PlanFit f;
    f.gpu = "H100-SXM5-80GB";
    f.gpus = gpus;
    f.days = days;
    f.cost = cost;
    return f;
  };
  p.types = {{"H100-SXM5-80GB", "", 2.49, "", false, std::nullopt, ""}};
  // 384 GPUs meet 40 days but cost more than 512 (a worse layout at that count): off the front.
  p.fits = {fit(1024, 20, 300), fit(512, 35, 260), fit(384, 38, 290), fit(256, 70, 250)};
  p.pareto = ParetoFrontier(p.fits);
  REQUIRE(p.pareto.size() == 3);
  CHECK_FALSE(PlanChoice(p).has_value());  // nothing asked
  p.deadline_days = 40;
  CHECK(PlanChoice(p)->gpus == 384);  // the fewest GPUs that train within 40 days
  CHECK(absl::StrContains(PlanText(p), "Renting, the cheapest within 40 days is larger: 512"));
  p.deadline_days = 10;
  CHECK_FALSE(PlanChoice(p).has_value());  // nothing that fast
  p.deadline_days.reset();
  p.budget_usd = 270;
  CHECK(PlanChoice(p)->gpus == 512);  // the fastest within $270
  p.deadline_days = 100;
  CHECK(PlanChoice(p)->gpus == 256);  // both: the smallest within the deadline and the budget
  // A fixed count (--gpus): the fastest fit there, priced or not.
  p.deadline_days.reset();
  p.budget_usd.reset();
  p.fixed_gpus = 512;
  p.fits = {fit(512, 35, 260), fit(512, 41, 300)};
  p.fits[1].cost.reset();
  CHECK(PlanChoice(p)->days == 35);
}

TEST_CASE("plan text: each Pareto row says the batch its step ran", "[explore]") {
  // An interleaved layout's micro-batches per rank round up to a multiple of pp: 1,024
  // sequences over DP 64 and PP 32 run as 2,048, and its step time is for those.
  PlanResult p;
  p.model = "llama3-405b";
  p.global_batch = 1024;
  auto fit = [](int64_t gpus, int64_t batch, double step_s) {
    PlanFit f;
    f.gpu = "H100-SXM5-80GB";
    f.gpus = gpus;
    f.config.tp = 4;
    f.config.pp = 32;
    f.config.cp = 2;
    f.config.pp_chunks = 2;
    f.config.micro_batch = 1;
    f.config.recompute = Recompute::kSelective;
    f.global_batch = batch;
    f.step_s = step_s;
    f.days = step_s;
    f.cost = 100.0 * static_cast<double>(gpus);
    return f;
  };
  p.fits = p.pareto = {fit(16384, 2048, 4.40), fit(8192, 1024, 4.15)};
  const std::string text = PlanText(p);
  CHECK(absl::StrContains(text, "global batch 1024 sequences asked"));
  CHECK(absl::StrContains(text, "batch: the sequences each step ran"));
  CHECK(absl::StrContains(text, "selective   2048    4.40"));
  CHECK(absl::StrContains(text, "selective   1024    4.15"));
}

TEST_CASE("plan --days: the smallest count that meets it, any whole number of nodes", "[explore]") {
  PlanRequest req;
  req.model = "llama2-7b";
  req.gpus = {"H100-SXM5-80GB"};
  req.tokens = 2e12;
  req.deadline_days = 20;
  req.jobs = 2;
  auto plan = Plan(kRoot, req, nullptr);
  REQUIRE(plan.ok());
  const auto c = PlanChoice(*plan);
  REQUIRE(c.has_value());
  INFO(c->gpus << " GPUs, " << c->days << " days");
  CHECK(c->days <= 20);
  CHECK(c->gpus % 8 == 0);
  CHECK((c->gpus & (c->gpus - 1)) != 0);  // between the powers of two
  // One node fewer was searched, and none of its layouts meets the deadline.
  bool tried = false;
  for (const PlanFit& f : plan->fits) {
    if (f.gpus != c->gpus - 8 || f.estimated) continue;
    tried = true;
    CHECK(f.days > 20);
  }
  for (const PlanRejection& r : plan->rejected) tried = tried || r.gpus == c->gpus - 8;
  CHECK(tried);
  // `stepsim run` of the chosen layout agrees: the same step, so the same days.
  std::vector<config::Override> o = {
      {"model", "llama2-7b"},
      {"cluster.node", "dgx-h100"},
      {"cluster.nodes", std::to_string(c->gpus / 8)},
      {"training.micro_batch", std::to_string(c->config.micro_batch)},
      {"training.global_batch", std::to_string(c->global_batch)},
      {"training.recompute", std::string(Name(c->config.recompute))},
      {"runtime.headroom", "5%"}};
  if (c->config.ModelParallel()) {
    for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"parallel.framework", "megatron"},
             {"parallel.zero", "1"},
             {"parallel.tp", std::to_string(c->config.tp)},
             {"parallel.pp", std::to_string(c->config.pp)},
             {"parallel.cp", std::to_string(c->config.cp)},
             {"parallel.sequence_parallel", c->config.SequenceParallel() ? "true" : "false"},
             {"parallel.pp_schedule", c->config.pp_chunks > 1 ? "interleaved" : "1f1b"},
             {"parallel.pp_chunks", std::to_string(c->config.pp_chunks)}}) {
      o.push_back({k, v});
    }
  } else {
    o.push_back({"parallel.zero", std::to_string(c->config.zero)});
  }
  const auto r = RunConfigs(DefaultLoader(), {o}, 1, nullptr);
  REQUIRE(r[0].status.ok());
  CHECK(r[0].summary->fits);
  CHECK(r[0].summary->step.seconds() == Approx(c->step_s).epsilon(1e-9));
}

TEST_CASE("plan: owning instead of renting changes the choice, a power budget bounds it",
          "[explore]") {
  PlanRequest req;
  req.model = "llama2-7b";
  req.gpus = {"H100-SXM5-80GB", "H200-SXM-141GB"};
  req.tokens = 2e12;
  req.deadline_days = 20;
  req.jobs = 2;
  // Rented, H200's price ($3.50 against $2.49 per GPU-hour) is more than its speed is worth.
  auto rented = Plan(kRoot, req, nullptr);
  REQUIRE(rented.ok());
  const auto r = PlanChoice(*rented);
  REQUIRE(r.has_value());
  CHECK(r->gpu == "H100-SXM5-80GB");
  CHECK(r->days <= 20);
  // Every fit's days are effective days: the steps' over the whole run's ETTR.
  for (const PlanFit& f : rented->fits) {
    CHECK(f.ettr < 1);
    CHECK(f.days == Approx(f.ideal_days / f.ettr));
  }
  // Owned at the same purchase price per GPU, the faster H200 costs less for the same work.
  PlanRequest owned = req;
  REQUIRE(SetPlanOption(owned, "set", "run.cost.capex_per_gpu=30000", "--set").ok());
  auto o = Plan(kRoot, owned, nullptr);
  REQUIRE(o.ok());
  const auto oc = PlanChoice(*o);
  REQUIRE(oc.has_value());
  CHECK(oc->gpu == "H200-SXM-141GB");
  CHECK(*oc->cost == Approx(30000.0 * static_cast<double>(oc->gpus) * oc->days / (4 * 365.0) +
                            oc->energy_mwh * 1000 * 0.08));
  // A power budget below the rented choice's draw: the answer meets both, or there is none.
  PlanRequest capped = req;
  capped.power_mw = r->power_mw * 0.99;
  auto c = Plan(kRoot, capped, nullptr);
  REQUIRE(c.ok());
  if (const auto cc = PlanChoice(*c)) {
    CHECK(cc->power_mw <= *capped.power_mw);
    CHECK(cc->days <= 20);
  }
  capped.power_mw = 0.001;  // 1 kW: not even one GPU's node
  auto none = Plan(kRoot, capped, nullptr);
  REQUIRE(none.ok());
  CHECK_FALSE(PlanChoice(*none).has_value());
  CHECK(absl::StrContains(none->types.front().why, "within 0.001 MW"));
}

TEST_CASE("plan without a deadline fills the counts until the days' gaps are within 10 %",
          "[explore]") {
  PlanRequest req;
  req.model = "llama2-7b";
  req.gpus = {"H100-SXM5-80GB"};
  req.tokens = 2e12;
  req.max_gpus = 128;
  req.jobs = 2;
  auto plan = Plan(kRoot, req, nullptr);
  REQUIRE(plan.ok());
  std::map<int64_t, double> best;
  for (const PlanFit& f : plan->fits) {
    if (f.estimated) continue;
    auto [it, fresh] = best.emplace(f.gpus, f.days);
    if (!fresh) it->second = std::min(it->second, f.days);
  }
  REQUIRE(best.size() > 5);  // more than the powers of two from 8 to 128
  for (auto it = best.begin(); std::next(it) != best.end(); ++it) {
    const auto next = std::next(it);
    INFO(it->first << " GPUs: " << it->second << " days; " << next->first << ": " << next->second);
    // Neighbouring counts a node apart cannot be split further.
    if (next->first - it->first > 8) CHECK(it->second <= next->second * 1.10);
  }
}

TEST_CASE("plan: smallest Llama-2-70B cluster on A100-80GB, checked by replay", "[explore]") {
  PlanRequest req;
  req.model = "llama2-70b";
  req.gpus = {"A100-SXM4-80GB"};
  req.tokens = 2e12;
  req.max_gpus = 256;
  req.global_batch_tokens = 1 << 20;  // keeps the Pareto replays short; the minimum search is
                                      // independent of it
  req.jobs = 2;
  auto plan = Plan(kRoot, req, nullptr);
  REQUIRE(plan.ok());
  REQUIRE(plan->min_gpus.size() == 1);
  const MinGpus& min = plan->min_gpus.front();
  REQUIRE(min.gpus.has_value());
  const int64_t n = *min.gpus;
  // Static lower bound: 16 B/param over N plus the full-recompute layer inputs fit 80 GiB.
  const double p = static_cast<double>(plan->params);
  const double room = 80.0 * 1073741824.0 - 80.0 * 2 * 4096 * 8192;
  CHECK(static_cast<double>(n) >= 16.0 * p / room);
  // The replay confirms: N fits, N - 1 does not (laid out as the plan lays it out).
  auto loader = DefaultLoader();
  auto run = [&](int64_t gpus) {
    int64_t per_node = 8;
    while (gpus % per_node != 0) --per_node;
    const auto r = RunConfigs(loader,
                              {{{"cluster.node", "dgx-a100-80gb"},
                                {"cluster.nodes", std::to_string(gpus / per_node)},
                                {"cluster.gpus_per_node", std::to_string(per_node)},
                                {"training.global_batch", std::to_string(2 * gpus)},
                                // the plan's default headroom
                                {"runtime.headroom", "5%"}}},
                              1, nullptr);
    REQUIRE(r[0].status.ok());
    return r[0].summary->fits;
  };
  CHECK(run(n));
  CHECK_FALSE(run(n - 1));
  CHECK(plan->pareto.size() >= 1);
  CHECK(plan->replayed > 0);
  CHECK(plan->pruned > 0);
  CHECK(min.binding.rfind("optimizer", 0) == 0);
}

}  // namespace
}  // namespace sim::explore
