#pragma once
// The typed result of one run: everything the run report (docs/model.md "The report") says,
// computed once from the scenario and its replay. Text, JSON, sweep rows, compare tables, plan and
// validate all read these fields; none of them parses a rendered report back.
//
// Conventions (docs/model.md "Conventions"): FLOPs in `*_flops_total` are totals over the cluster
// per step (per-GPU work × GPUs; TP/CP ranks each do their share); MFU and HFU divide by step ×
// GPUs × the dense peak of the compute dtype. Memory is per GPU, of the simulated GPU with the
// highest peak
// (`peak_gpu`, on pipeline stage `peak_stage`); time keys are the busiest stage's
// (`time_stage`).

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/units.h"
#include "sim/memory/ledger.h"
#include "sim/replay/replay.h"
#include "sim/replay/variability.h"
#include "sim/report/whole_run.h"
#include "sim/spec/scenario.h"
#include "sim/workload/static_ledger.h"

namespace sim::report {

// The first moment a GPU's reserved memory (the caching allocator's segments and the runtime
// reserve) exceeded its usable capacity.
struct OverflowSummary {
  std::string op;  // label of the op ("mb0 L12 bwd qkv") or "persistent states"
  Duration at;
  Bytes excess;  // at that first moment (the persistent states are allocated one by one)
  // The same GPU's whole persistent set (weights, gradients, optimizer, buffers, reserve, as
  // allocated) and its reserved peak over the step, each against the capacity.
  Bytes persistent;
  Bytes reserved_peak;
};

// Memory and time of one pipeline stage's GPU (one entry without pp).
struct StageSummary {
  int32_t stage = 0;
  int64_t gpu = 0;
  Bytes peak;
  Bytes reserved_peak;
  Duration peak_at;
  std::string peak_op;
  bool fits = false;
  memory::Breakdown peak_breakdown{};
  StateSplit static_states;
  replay::StageTimes times;
};

// How the collectives of one kind ran over the step, per GPU.
struct CollectiveSummary {
  CollectiveKind kind = CollectiveKind::kNone;
  int64_t count = 0;
  // (algorithm, collectives priced with it), in CollectiveAlgorithm order, only those used.
  std::vector<std::pair<CollectiveAlgorithm, int64_t>> algorithms;
  // (NCCL protocol, collectives run with it), LL, LL128, Simple, only those used.
  std::vector<std::pair<cost::NcclProtocol, int64_t>> protocols;
  Duration time;
  Bytes sent;
  // nccl-tests conventions: bytes each GPU sends / time (0 when the time is 0).
  double bus_bandwidth_bytes_per_s = 0;
  std::string busiest_link;  // of the slowest collective of this kind
  int32_t busiest_load = 0;  // transfers sharing it
};

struct RunSummary {
  // ---- what ran -------------------------------------------------------------------------
  std::string scenario, model, gpu, node;
  std::vector<std::string> overrides;  // Scenario::overrides
  // The batch: global_batch sequences of seq_len tokens; batch_tokens is
  // training.global_batch_tokens when that set it (0 otherwise).
  int64_t global_batch = 0, seq_len = 0, batch_tokens = 0;
  // parallel.collective: what the scenario asked for (auto = NCCL's tuner).
  CollectiveAlgorithm requested_algorithm = CollectiveAlgorithm::kAuto;
  int64_t gpus = 0, nodes = 0, gpus_per_node = 0;
  int64_t dp = 1, tp = 1, pp = 1, cp = 1, ep = 1;
  bool sequence_parallel = false;
  PipelineSchedule pp_schedule = PipelineSchedule::k1F1B;
  int64_t pp_chunks = 1;
  int zero = 0;                         // as written in the scenario
  int replayed_zero_stage = 0;          // the ZeRO stage the replay used (sim/workload/sharding.h)
  bool gathered_once_per_step = false;  // ShardingPlan::gathered_once_per_step
  int64_t shard_degree = 1;
  // ZeRO-3 layers gathered ahead; none where DeepSpeed's coordinator counts elements instead.
  std::optional<int64_t> prefetch;
  int64_t micro_batches = 1;
  Framework framework = Framework::kDeepSpeed;
  Precision precision = Precision::kBf16;

  // ---- memory (per GPU) -----------------------------------------------------------------
  Bytes capacity;  // usable HBM: what one process gets (GpuSpec::Usable), less the headroom
  Bytes headroom;  // runtime.headroom, taken off `capacity`
  Bytes peak;      // allocated tensors + the runtime reserve
  int64_t peak_gpu = 0;
  int32_t peak_stage = 0;
  Duration peak_at;
  std::string peak_op;
  // The caching allocator's reserved peak + the runtime reserve (sim/memory/caching_allocator.h):
  // what the process takes from the GPU; >= peak.
  Bytes reserved_peak;
  bool fits = false;  // every GPU's reserved_peak <= capacity, and the host memory fits the node
  memory::Breakdown peak_breakdown{};  // sums to `peak`
  memory::Breakdown category_peaks{};  // each category's own high-water mark
  StateSplit static_states;            // persistent states of the peak's stage
  Bytes runtime_reserved;
  std::optional<OverflowSummary> first_overflow;
  // The allocator's overhead at its peak: (reserved_peak − peak) / (peak − runtime reserve).
  double fragmentation = 0;
  // Offload and paged optimizers, per node: the host DRAM the node's GPUs hold (offloaded
  // states, fp32 gradient partitions, paged moments, offloaded activations at their highest)
  // and the NVMe they fill.
  Bytes host_peak, nvme;
  Bytes host_capacity;    // the node type's host DRAM (0: no host entry)
  bool host_fits = true;  // host_peak <= host_capacity; `fits` requires it too
  bool gpu_fits = false;  // every GPU's reserved_peak <= capacity

  // ---- time -----------------------------------------------------------------------------
  Duration step;
  replay::StageTimes times;  // of the pacing stage, time_stage (ReplayResult::times)
  int32_t time_stage = 0;

  // A shared fabric (cluster.background_load): the share of every switch-to-switch link other
  // traffic holds, and the step with this job alone on the fabric.
  double background_load = 0;
  std::optional<Duration> idle_fabric_step;

  // ---- the step over per-GPU speed draws (run --trials N; sim/replay/variability.h) ----------
  VariabilitySpec variability;
  std::optional<replay::StepDistribution> distribution;

  // ---- the whole run (analytic; the renderers add the Monte Carlo check) ---------------------
  WholeRun whole_run;

  // ---- work and throughput ----------------------------------------------------------------
  Flops model_flops_per_gpu, hardware_flops_per_gpu;  // averaged over pipeline stages
  double model_flops_total = 0, hardware_flops_total = 0, recompute_flops_total = 0;
  FlopRate peak_rate;  // dense peak per GPU of the compute dtype
  double tokens_per_s = 0, tokens_per_s_per_gpu = 0, mfu = 0, hfu = 0;

  // ---- mixture of experts -----------------------------------------------------------------
  bool moe = false;
  int64_t experts = 0, top_k = 0;
  RoutingSpec routing;
  double expert_load = 1.0;               // the busiest EP rank's tokens over the balanced share
  double dropped_share = 0;               // token copies dropped at the experts' capacity
  std::optional<Duration> balanced_step;  // the step with balanced routing, when skewed

  // ---- communication ----------------------------------------------------------------------
  std::array<Bytes, kNumCollectiveKinds> comm_bytes_sent{};  // per GPU, by CollectiveKind
  std::vector<CollectiveSummary> collectives;                // kinds that ran, in kind order

  std::vector<StageSummary> stages;

  // ---- the replay itself ------------------------------------------------------------------
  int64_t ops = 0;
  uint64_t events = 0;
  int32_t simulated_ranks = 1;

  Bytes Sent(CollectiveKind k) const { return comm_bytes_sent[static_cast<int>(k)]; }
  // What the run is called: the scenario's name, "NAME with KEY=VALUE, ..." after overrides.
  std::string Title() const;
  Bytes PeakOf(MemCategory c) const { return peak_breakdown[static_cast<int>(c)]; }
};

RunSummary Summarize(const Scenario& s, const replay::ReplayResult& r);
// Adds `run --trials N`'s distribution to a summary, and prices the whole run at the trials'
// mean step (a real cluster's GPUs are not all at their calibrated speed).
void AddDistribution(const Scenario& s, replay::StepDistribution d, RunSummary& summary);

}  // namespace sim::report
