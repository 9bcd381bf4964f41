#pragma once
// The step replay: drives a rank's op program (sim/workload) through the event executor
// (sim/engine), timing ops with the cost models (sim/cost) and booking every allocation and free
// in a per-GPU ledger (sim/memory). Reports are observers of the result (sim/report).
//
// Data-parallel (and TP, CP) ranks run the same program, so by default one GPU per pipeline
// stage is simulated and stands for its peers; with `explicit_ranks` every DP replica is
// simulated with its own streams and ledgers, and the DP collectives of all replicas start
// together. Both give the same report (tests/replay_test.cc). Simulated GPU i is stage
// i % stages of replica i / stages.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/cost/collective_cost.h"
#include "sim/cost/compute_cost.h"
#include "sim/memory/ledger.h"
#include "sim/spec/scenario.h"
#include "sim/workload/program.h"

namespace sim::replay {

struct ReplayOptions {
  // Simulate: every DP replica (sets `replicas` to the scenario's dp).
  bool explicit_ranks = false;
  // Replay: DP replicas simulated, each with every pipeline stage (1 = one stands for all).
  int32_t replicas = 1;
  bool record_ops = false;     // per-op start/end times (for --trace)
  bool record_memory = false;  // every ledger change (for --trace and --timeline)
  memory::AllocatorOptions allocator = {};
  // Simulate: fold the repeating micro-batches (sim/replay/fold.h); off = replay each (--no-fold).
  bool fold = true;
  // Simulate: per pipeline stage, how much longer its kernels take than at the calibrated
  // speed (a trial of sim/replay/variability.h); empty = the calibrated speed everywhere.
  std::vector<cost::StageSlowdown> stage_slowdown = {};
  // Simulate: per pipeline stage, the share of their bandwidth its network links reach (a
  // trial's degraded links); empty = every link healthy.
  std::vector<cost::LinkSlowdown> stage_link = {};
  // Replay: per pipeline stage, its GPUs' usable memory (a mixed cluster's types); empty = the
  // capacity Replay is given, for every stage. Simulate sets it from the scenario.
  std::vector<Bytes> stage_capacity = {};
  // Per pipeline stage, the collective model its collectives are priced by (a mixed cluster's
  // node types); empty = the model Replay is given. Simulate sets it from the scenario.
  std::vector<const cost::CollectiveCostModel*> stage_comm = {};
};

struct OpTiming {
  int32_t op;
  int32_t rank;
  Duration start, end;
};

// How a folded replay's records (ReplayOptions::record_ops, record_memory) give the whole
// step's without replaying it (sim/replay/step_records.h). The records are those of the fold's
// last short replay, whose program the result holds. Between its two states one period apart
// (sim/replay/state_period.h) it recorded a window that the whole step runs `windows` times,
// each `ops` ops and `period` later than the one before; what it recorded after the window,
// the step records `windows - 1` periods later. An op of the window or after it names the
// micro-batch `label_step[op]` further on per period (0 for step-wide ops).
struct FoldedRecords {
  int64_t windows = 1;
  int32_t ops = 0;
  Duration period;
  size_t timings_begin = 0, timings_end = 0;  // the window, in ReplayResult::timings
  // Per simulated GPU, the window in its ledger's changes().
  std::vector<std::pair<size_t, size_t>> changes;
  std::vector<int32_t> label_step;  // per op of ReplayResult::program
  // Where the caching allocators alone did not repeat (sim/replay/fold.cc, ReservedPeaks), per
  // simulated GPU the reserved bytes after each change of window copies 1, 2, ... until its
  // allocator settled (later copies repeat the last), and after each change past the window;
  // empty where the window's records repeat whole.
  struct Reserved {
    std::vector<std::vector<Bytes>> copies;
    std::vector<Bytes> after;
  };
  std::vector<Reserved> reserved;
};

// Where one stage's GPU spent the step. step = compute + recompute + optimizer + exposed_comm
// + exposed_pcie + bubble: the compute stream's idle time (and busy time on TP collectives that
// it waits for) is exposed communication when the op it waited for was a collective, exposed
// PCIe when it was an offload copy, and bubble when it was another stage's send (or the stage
// had finished and waited for the others). An offloaded optimizer's host time is optimizer time.
struct StageTimes {
  Duration compute, recompute, optimizer;
  Duration comm;  // busy time of its collectives and sends, on any stream
  Duration pcie;  // busy time of its offload copies and NVMe reads of parameter shards
  Duration exposed_comm;
  Duration exposed_pcie;
  Duration bubble;
  Duration overlap_stretch;  // extra compute time beside collectives (overlap_slowdown)
};

// Calls f(key, duration) for each of StageTimes' fields, with the key and in the order of the
// JSON report's `time`: folding scales them all, the summary and renderers read them. A field
// added to StageTimes is added here once.
template <class Times, class F>
void ForEachTime(Times& t, F&& f) {
  f("compute_s", t.compute);
  f("recompute_s", t.recompute);
  f("comm_s", t.comm);
  f("exposed_comm_s", t.exposed_comm);
  f("optimizer_s", t.optimizer);
  f("bubble_s", t.bubble);
  f("overlap_stretch_s", t.overlap_stretch);
  f("pcie_s", t.pcie);
  f("exposed_pcie_s", t.exposed_pcie);
}

struct ReplayResult {
  OpProgram program;
  // The program replayed: with folding, that of the last short replay (sim/replay/fold.h),
  // whose ops and memory actions the full step repeats.
  int32_t simulated_ranks = 1;  // simulated GPUs: stages x (explicit ? DP replicas : 1)
  uint64_t events = 0;
  int64_t ops = 0;  // ops of the whole step (folded: as if every micro-batch were lowered)

  Duration step;
  // The pacing stage's times (the one with the most compute): the report's time keys.
  StageTimes times;
  int32_t time_stage = 0;
  std::vector<StageTimes> stages;

  // Per GPU per step (averaged over the pipeline stages).
  Flops model_flops, hardware_flops, recompute_flops;
  std::array<Bytes, kNumCollectiveKinds> comm_bytes_sent{};  // indexed by CollectiveKind

  // Per collective kind (indexed by CollectiveKind): how the cost model ran them.
  struct CollectiveStats {
    int64_t count = 0;
    Duration time;  // sum over the step (per GPU: averaged over pipeline stages)
    std::array<int64_t, kNumCollectiveAlgorithms> by_algorithm{};  // by CollectiveAlgorithm
    std::array<int64_t, cost::kNumNcclProtocols> by_protocol{};    // by NcclProtocol
    std::string busiest_link;  // of the slowest collective of this kind
    int32_t busiest_load = 0;  // transfers sharing it in one step
    Duration slowest;
  };
  std::array<CollectiveStats, kNumCollectiveKinds> collectives{};

  std::vector<memory::MemoryLedger> ledgers;  // one per simulated GPU
  // Activation offload: the highest bytes of activations each simulated GPU held in host memory.
  std::vector<Bytes> host_activation_peak;
  int32_t peak_rank = 0;  // the simulated GPU with the highest peak
  // MoE under skewed routing (training.routing): the replayed GPU is the busiest EP rank, at
  // `expert_load` times the balanced token copies (sim/workload/moe_routing.h; below 1 when a
  // capacity factor drops tokens); Simulate also replays the step with balanced routing under
  // the same capacity rule (`balanced_step`), so that the report can attribute the difference
  // to the imbalance.
  double expert_load = 1.0;
  std::optional<Duration> balanced_step;
  // A shared fabric (cluster.background_load > 0): Simulate also replays the step on the idle
  // fabric, so that the report can say what the other jobs' traffic costs.
  std::optional<Duration> idle_fabric_step;
  // The balanced step's work per GPU: the step's useful FLOPs (the busiest rank computes more
  // than its share; the others less).
  Flops balanced_model_flops, balanced_hardware_flops, balanced_recompute_flops;
  std::vector<OpTiming> timings;  // rank = simulated GPU
  // A folded replay that recorded: how its records expand to the whole step's. Read the
  // records through sim/replay/step_records.h, which applies it.
  std::optional<FoldedRecords> folded_records;

  int32_t StageOf(int32_t rank) const { return rank % program.stages; }
  // The cluster GPU a simulated GPU stands for.
  int64_t GpuOf(int32_t rank) const;
};

// Replays `program` (sim/workload/program.h) on GPUs of `capacity` HBM, timing compute ops with
// `compute` and collectives with `comm`: the seam between lowering and replay, usable with a
// program and models written by hand.
ReplayResult Replay(OpProgram program, const cost::ComputeCostModel& compute,
                    const cost::CollectiveCostModel& comm, Bytes capacity,
                    const ReplayOptions& options);

// Lowers the scenario, builds its cost models (the roofline of its GPU, its cluster graph) and
// replays: what every command runs.
// The longest step Simulate reports: Durations saturate at 2^63 − 1 ps, and a step at or past
// 2^62 ps (53 days) is OutOfRange instead (a step that long comes from inputs far from any real
// cluster: a few bytes per second, a latency of days).
inline constexpr Duration kClockLimit = Duration::Picoseconds(int64_t{1} << 62);

// The compute model Simulate prices the scenario's kernels with (before any stage slowdown);
// a mixed cluster's first node type's.
cost::RooflineCostModel ComputeModel(const Scenario& s);
// The model that prices the scenario's compute ops: ComputeModel, or on a mixed cluster each
// stage's node type's (cost::StagedCostModel).
std::unique_ptr<cost::ComputeCostModel> ScenarioComputeModel(const Scenario& s);
// A mixed cluster as if every node were of its node group `group` (ClusterSpec::groups).
Scenario OnGroup(const Scenario& s, int32_t group);
// The same for the GPUs of a mixed cluster's node group `group` (ClusterSpec::groups).
cost::RooflineCostModel ComputeModel(const Scenario& s, int32_t group);

absl::StatusOr<ReplayResult> Simulate(const Scenario& s, ReplayOptions options);
// The same, with the collective model taken from (and kept in) `models`: for a worker that
// replays many configurations (sim/explore/runner.h). The same report as without.
absl::StatusOr<ReplayResult> Simulate(const Scenario& s, ReplayOptions options,
                                      cost::CostModelCache& models);

}  // namespace sim::replay
