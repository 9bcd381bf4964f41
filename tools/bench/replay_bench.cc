// Benchmarks (not tests): the event kernel's throughput and the wall time of whole replays.
//   build/tools/replay_bench                      # all
//   build/tools/replay_bench --benchmark_filter=Default
// The issue's targets: >= 10 million events/s; <= 20 ms for the default scenario (32 micro-batches
// x 80 layers) and <= 5 ms with global_batch = DP (one micro-batch), on one core.

#include <benchmark/benchmark.h>

#include <string>
#include <utility>

#include "sim/base/heap_tuning.h"
#include "sim/cluster/topology.h"
#include "sim/config/catalog.h"
#include "sim/cost/graph_collective.h"
#include "sim/engine/executor.h"
#include "sim/explore/runner.h"
#include "sim/replay/replay.h"
#include "sim/replay/step_bound.h"
#include "sim/report/html_report.h"
#include "sim/report/run_report.h"
#include "sim/report/run_summary.h"

namespace {

// A listener that only returns fixed durations: measures the kernel alone.
struct FixedDurations {
  void OnIssue(int32_t, sim::Duration) {}
  sim::Duration OnStart(int32_t t, sim::Duration, sim::engine::Rescheduler&) {
    return sim::Duration::Picoseconds(1000 + (t % 7) * 100);
  }
  void OnFinish(int32_t, sim::Duration, sim::engine::Rescheduler&) {}
};

// Two streams like a replay: a compute chain, and every third task a collective on the comm
// stream that the compute task after it waits for.
sim::engine::TaskGraph SyntheticGraph(int32_t n) {
  sim::engine::TaskGraph g;
  g.num_streams = 2;
  std::vector<std::vector<int32_t>> succ(n);
  for (int32_t t = 0; t < n; ++t) {
    const bool comm = t % 3 == 1;
    g.stream.push_back(comm ? 1 : 0);
    int32_t preds = 0;
    if (t > 0) {
      succ[t - 1].push_back(t);
      ++preds;
    }
    g.pred_count.push_back(preds);
  }
  g.succ_begin.push_back(0);
  for (int32_t t = 0; t < n; ++t) {
    for (int32_t s : succ[t]) g.succ.push_back(s);
    g.succ_begin.push_back(static_cast<int32_t>(g.succ.size()));
  }
  return g;
}

void BM_EngineEvents(benchmark::State& state) {
  const auto graph = SyntheticGraph(static_cast<int32_t>(state.range(0)));
  uint64_t events = 0;
  for (auto _ : state) {
    FixedDurations l;
    sim::engine::Executor<FixedDurations> ex(graph, l);
    events += ex.Run().events;
  }
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineEvents)->Arg(100'000)->Unit(benchmark::kMillisecond);

// A shipped scenario (scenarios/NAME), with overrides.
sim::Scenario ShippedScenario(const std::string& name,
                              std::vector<sim::config::Override> overrides = {}) {
  const auto root = sim::config::DataRoot::Default();
  auto s = sim::config::LoadScenario(root, root.path + "/scenarios/" + name, overrides);
  if (!s.ok()) std::abort();
  return *s;
}

sim::Scenario DefaultScenario(std::vector<sim::config::Override> overrides) {
  return ShippedScenario("default.yaml", std::move(overrides));
}

void ReplayLoop(benchmark::State& state, const sim::Scenario& s, bool fold = true) {
  uint64_t events = 0;
  sim::replay::ReplayOptions options;
  options.fold = fold;
  for (auto _ : state) {
    auto r = sim::replay::Simulate(s, options);
    if (!r.ok()) std::abort();
    events += r->events;
    benchmark::DoNotOptimize(r->step);
  }
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}

// Lowering + replay of scenarios/default.yaml: 32 micro-batches x 80 layers, folded (the
// short replays of 1, 2 and 3 micro-batches, run as one forked replay: sim/replay/fold.h) and
// each replayed.
void BM_ReplayDefault(benchmark::State& state) { ReplayLoop(state, DefaultScenario({})); }
BENCHMARK(BM_ReplayDefault)->Unit(benchmark::kMillisecond);
void BM_ReplayDefaultNoFold(benchmark::State& state) {
  ReplayLoop(state, DefaultScenario({}), /*fold=*/false);
}
BENCHMARK(BM_ReplayDefaultNoFold)->Unit(benchmark::kMillisecond);
// A 4,194,304-sequence batch: 131,072 micro-batches, folded.
void BM_ReplayDefault131072MicroBatches(benchmark::State& state) {
  ReplayLoop(state, DefaultScenario({{"training.global_batch", "4194304"}}));
}
BENCHMARK(BM_ReplayDefault131072MicroBatches)->Unit(benchmark::kMillisecond);

// Outputs keep the fold (sim/replay/step_records.h): the default scenario at 4,096
// micro-batches replayed (a), and replayed with its records then written as the HTML page (b)
// or the trace of its first and last micro-batches (c). Each output should cost at most about
// twice (a).
sim::Scenario Default4096() { return DefaultScenario({{"training.global_batch", "131072"}}); }
void BM_ReplayDefault4096MicroBatches(benchmark::State& state) { ReplayLoop(state, Default4096()); }
BENCHMARK(BM_ReplayDefault4096MicroBatches)->Unit(benchmark::kMillisecond);
void OutputLoop(benchmark::State& state, bool html) {
  const sim::Scenario s = Default4096();
  sim::replay::ReplayOptions options;
  options.record_ops = options.record_memory = true;
  sim::report::TraceOptions kept;
  kept.micro_batches = sim::report::DefaultTraceMicroBatches(s);
  for (auto _ : state) {
    auto r = sim::replay::Simulate(s, options);
    if (!r.ok()) std::abort();
    const std::string out = html ? sim::report::RunHtml(s, *r, sim::report::Summarize(s, *r))
                                 : sim::report::TraceJson(s, *r, kept);
    benchmark::DoNotOptimize(out.data());
  }
}
void BM_HtmlDefault4096MicroBatches(benchmark::State& state) { OutputLoop(state, true); }
BENCHMARK(BM_HtmlDefault4096MicroBatches)->Unit(benchmark::kMillisecond);
void BM_TraceDefault4096MicroBatches(benchmark::State& state) { OutputLoop(state, false); }
BENCHMARK(BM_TraceDefault4096MicroBatches)->Unit(benchmark::kMillisecond);

// Issue 7's target: scenarios/llama3-405b-8k.yaml, Llama-3-405B on 16,384 H100 as TP8 PP16
// DP128, 126 layers, 16 micro-batches; one GPU per stage is simulated (TP and DP peers are
// symmetric). Includes building the 2,048-node fabric and pricing every collective.
void BM_ReplayLlama3_405B_16k(benchmark::State& state) {
  ReplayLoop(state, ShippedScenario("llama3-405b-8k.yaml"));
}
BENCHMARK(BM_ReplayLlama3_405B_16k)->Unit(benchmark::kMillisecond);

// Issue 14's target: scenarios/gpt3-175b-korthikanti.yaml, GPT-3 175B as TP8 PP8 interleaved
// (3 chunks) on 64 A100 (DP 1), 64 micro-batches of one sequence: too few to fold.
void BM_ReplayGpt3_175B(benchmark::State& state) {
  ReplayLoop(state, ShippedScenario("gpt3-175b-korthikanti.yaml"));
}
BENCHMARK(BM_ReplayGpt3_175B)->Unit(benchmark::kMillisecond);

// The same with global_batch = DP: one micro-batch.
void BM_ReplayDefaultOneMicroBatch(benchmark::State& state) {
  ReplayLoop(state, DefaultScenario({{"training.global_batch", "32"}}));
}
BENCHMARK(BM_ReplayDefaultOneMicroBatch)->Unit(benchmark::kMillisecond);

// `stepsim plan`'s lower bound on a step without replaying it (sim/replay/step_bound.h), for a
// Megatron layout of the default shape: TP 2, PP 8, 1F1B, selective recompute, 512
// micro-batches.
void BM_StepLowerBoundPp8(benchmark::State& state) {
  const sim::Scenario s = DefaultScenario({{"parallel.framework", "megatron"},
                                           {"parallel.zero", "1"},
                                           {"parallel.tp", "2"},
                                           {"parallel.pp", "8"},
                                           {"parallel.sequence_parallel", "true"},
                                           {"training.recompute", "selective"}});
  for (auto _ : state) {
    auto b = sim::replay::StepLowerBound(s);
    if (!b.ok()) std::abort();
    benchmark::DoNotOptimize(*b);
  }
}
BENCHMARK(BM_StepLowerBoundPp8)->Unit(benchmark::kMillisecond);

// A sweep on all cores (ScenarioLoader + replay + JSON report per configuration): 64
// configurations of the default scenario's shape varying prefetch and bucket size.
void SweepLoop(benchmark::State& state, const char* global_batch) {
  const auto root = sim::config::DataRoot::Default();
  auto loader = sim::config::ScenarioLoader::Open(root, root.path + "/scenarios/default.yaml");
  if (!loader.ok()) std::abort();
  std::vector<std::vector<sim::config::Override>> configs;
  for (int i = 0; i < 64; ++i) {
    configs.push_back({{"training.global_batch", global_batch},
                       {"parallel.prefetch", std::to_string(1 + i % 4)},
                       {"parallel.bucket", std::to_string(5 + i) + " MB"}});
  }
  const int jobs = sim::explore::DefaultJobs();
  size_t done = 0;
  for (auto _ : state) {
    done += sim::explore::RunConfigs(*loader, configs, jobs, nullptr).size();
  }
  state.counters["configs_per_s"] =
      benchmark::Counter(static_cast<double>(done), benchmark::Counter::kIsRate);
  state.counters["jobs"] = jobs;
}

void BM_SweepDefault(benchmark::State& state) { SweepLoop(state, "1024"); }
BENCHMARK(BM_SweepDefault)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SweepOneMicroBatch(benchmark::State& state) { SweepLoop(state, "32"); }
BENCHMARK(BM_SweepOneMicroBatch)->Unit(benchmark::kMillisecond)->UseRealTime();

// The contract check's sweep (the sweep-throughput contract check (144 default-shape
// configurations, 2 jobs), issue 14: >= 2,000 configurations/s on 2 cores): the default scenario
// over 6 sequence lengths x 3 recompute policies x ZeRO 0-3 x micro-batch 1 and 2, 144
// configurations of 16 or 32 micro-batches; the argument is the number of jobs.
void BM_SweepCheckGrid(benchmark::State& state) {
  const auto root = sim::config::DataRoot::Default();
  auto loader = sim::config::ScenarioLoader::Open(root, root.path + "/scenarios/default.yaml");
  if (!loader.ok()) std::abort();
  std::vector<std::vector<sim::config::Override>> configs;
  for (const char* seq : {"1024", "2048", "4096", "8192", "16384", "32768"}) {
    for (const char* recompute : {"none", "selective", "full"}) {
      for (const char* zero : {"0", "1", "2", "3"}) {
        for (const char* mb : {"1", "2"}) {
          configs.push_back({{"training.seq_len", seq},
                             {"training.recompute", recompute},
                             {"parallel.zero", zero},
                             {"training.micro_batch", mb}});
        }
      }
    }
  }
  const int jobs = static_cast<int>(state.range(0));
  size_t done = 0;
  for (auto _ : state) {
    done += sim::explore::RunConfigs(*loader, configs, jobs, nullptr).size();
  }
  state.counters["configs_per_s"] =
      benchmark::Counter(static_cast<double>(done), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SweepCheckGrid)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// Building the graph of a 16,384-GPU cluster (2,048 DGX H100 on a three-level rail-optimised
// fat tree) and pricing all-gather, reduce-scatter and all-reduce over every GPU with each
// algorithm (routes and link loads computed once per group).
sim::ClusterSpec BigCluster() {
  const auto root = sim::config::DataRoot::Default();
  auto catalogs = sim::config::LoadCatalogs(root);
  auto fabric = sim::config::LoadFabric(root, "rail-3tier-1to1");
  if (!catalogs.ok() || !fabric.ok()) std::abort();
  sim::ClusterSpec c;
  for (const auto& n : catalogs->nodes) {
    if (n.name == "dgx-h100") c.node = n;
  }
  c.gpu = *sim::config::FindGpu(catalogs->gpus, c.node.gpu);
  c.nodes = 2048;
  c.fabric = *fabric;
  return c;
}

void BM_Build16kAndPriceAll(benchmark::State& state) {
  const sim::ClusterSpec c = BigCluster();
  for (auto _ : state) {
    auto topo = sim::cluster::Topology::Build(c);
    if (!topo.ok()) std::abort();
    sim::cost::GraphCostModel model(*topo, c, sim::CollectiveAlgorithm::kAuto);
    const sim::CommGroup all{16384, 2048, 1, 1, 0};
    for (auto k : {sim::CollectiveKind::kAllGather, sim::CollectiveKind::kReduceScatter,
                   sim::CollectiveKind::kAllReduce}) {
      benchmark::DoNotOptimize(model.Price(k, sim::Bytes::GiB(1), all, 1));
    }
  }
}
BENCHMARK(BM_Build16kAndPriceAll)->Unit(benchmark::kMillisecond)->Iterations(2);

// One collective priced with contention once its group's routes are cached.
void BM_PriceCached(benchmark::State& state) {
  const sim::ClusterSpec c = BigCluster();
  auto topo = sim::cluster::Topology::Build(c);
  if (!topo.ok()) std::abort();
  sim::cost::GraphCostModel model(*topo, c, sim::CollectiveAlgorithm::kAuto);
  const sim::CommGroup all{16384, 2048, 1, 1, 0};
  model.Price(sim::CollectiveKind::kAllReduce, sim::Bytes::GiB(1), all, 1);
  int64_t bytes = 1 << 20;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        model.Price(sim::CollectiveKind::kAllReduce, sim::Bytes::Count(bytes++), all, 4));
  }
}
BENCHMARK(BM_PriceCached)->Unit(benchmark::kMicrosecond);

}  // namespace

// BENCHMARK_MAIN, with the heap kept across replays as stepsim keeps it (sim/base/heap_tuning.h).
int main(int argc, char** argv) {
  sim::KeepHeapForReplays();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
