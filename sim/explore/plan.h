#pragma once
// `stepsim plan`: for a model and a token budget, search GPU type × GPU count × ZeRO stage ×
// micro-batch × recompute for configurations that fit, by replay.
//
// 1. Smallest GPU count per GPU type (single-GPU granularity): the most memory-frugal
//    configuration (ZeRO-3, full recompute, micro-batch 1, prefetch 1) needs less memory as N
//    grows, so a binary search over N between the static lower bound and the first whole-node
//    count that fits finds the smallest N whose replayed peak fits. N GPUs are laid out as
//    nodes of the largest divisor of N not above the node type's GPUs per node.
// 2. The Pareto set of time-to-train against cost over whole-node clusters (node counts
//    1, 2, 4, ... up to --max-gpus, then the counts between: bisection to the smallest that
//    meets a deadline, or until neighbouring counts' days are within count_gap; days are the
//    whole run's effective days), every stage, micro-batch 1/2/4 and recompute policy, and
//    the Megatron-LM layouts TP 1/2/4/8 (within a node) × PP 1/2/4/8/16/32 × CP 1/2/4/8 ×
//    1F1B or interleaved (2 chunks), with uneven first/last stages where the layers do not
//    split, the distributed optimizer, SP, micro-batch 1/2 and selective or full recompute;
//    the batch is the request's tokens rounded per layout to whole micro-batches per rank
//    (within kBatchTolerance of it);
//    configurations whose static states plus kept activations exceed the HBM are pruned
//    before replay; every rejected family is reported with its reason.
// 3. What keeps it affordable (planner.cc): rounds by recompute policy, lightest first (a heavier
//    policy of a layout only when the lighter did not fit); layouts of many micro-batches
//    screened at pp and pp + 2 of them (pp and 2 pp interleaved) and extrapolated (the step is
//    linear from there), bounded below after the first short run and dropped when slower than
//    the fastest step on as many GPUs; the estimates near the fastest of their size replayed in
//    full. Only full replays make the Pareto set. Each worker keeps its clusters' collective
//    models (cost::CostModelCache), the loader the model files it has read.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/base/quantity.h"
#include "sim/config/catalog.h"
#include "sim/explore/grid.h"
#include "sim/explore/plan_progress.h"
#include "sim/explore/runner.h"
#include "sim/memory/ledger.h"
#include "sim/spec/enum_names.h"

namespace sim::explore {

// The headroom a plan keeps below each GPU's usable memory unless told otherwise: 5 %, about
// the replay's mean error on measured reserved peaks (docs/validation.md: 4.4 % over SimuMax's
// B200 runs, each 2-9 % low), so that a layout the plan calls a fit still fits when the replay
// errs low by that much.
inline const MemoryMargin kDefaultPlanHeadroom{0.05, Bytes()};

// How far a layout's batch may round from the batch asked (a whole number of micro-batches on
// every data-parallel rank, and of pp of them interleaved): 10 %; a layout further off is
// rejected ("batch"), so that the plan's rows train the batch asked for, to the rounding.
inline constexpr double kBatchTolerance = 0.10;

struct PlanRequest {
  // A catalog model name or model file, or a scenario file (one whose top level has `model:`):
  // the scenario gives the model, the node type, the precision and every other key the search
  // does not vary, and its sequence length, batch and framework unless the options name them.
  std::string model;
  std::vector<std::string> gpus;  // GPU catalog names (each needs a node type); empty: default
  // The options the caller named (SetPlanOption records them): a scenario's own values stand
  // for those it did not name.
  std::set<std::string> given;
  // --set KEY=VALUE over the base, in order. A key the search varies (parallel.zero, tp, pp, cp,
  // ep, pp_chunks, sequence_parallel, training.micro_batch, recompute) fixes it: only layouts
  // with that value are tried.
  std::vector<config::Override> sets;
  // --search KEY=A,B: the whole plan once per value (several keys: their product), each fit
  // labelled with its values (PlanFit::variant); cluster.node picks the GPU type.
  std::vector<std::pair<std::string, std::vector<std::string>>> searches;
  std::string variant;  // this request's search values ("KEY=V, ..."), set by Plan
  // --gpus N: only clusters of exactly N GPUs (a whole number of nodes of each type).
  std::optional<int64_t> fixed_gpus;
  // Kept free below each GPU's usable memory (runtime.headroom of every candidate).
  MemoryMargin headroom = kDefaultPlanHeadroom;
  // Counts between the powers of two: without a deadline, counts are added between
  // neighbouring ones until their fastest layouts' days differ by at most this share; with a
  // deadline, the smallest count that meets it is found by bisection over node counts.
  double count_gap = 0.10;
  int64_t seq_len = 4096;
  double tokens = 1e12;                     // training budget
  int64_t global_batch_tokens = 4'194'304;  // ~4M tokens per step (Llama 2's batch)
  int64_t max_gpus = 1024;
  std::map<std::string, double> prices;         // GPU name -> USD per GPU-hour (overrides catalog)
  Framework framework = Framework::kDeepSpeed;  // deepspeed, fsdp or torchtune (ZeRO family)
  int64_t fsdp_version = 1;                     // with fsdp: 2 is FSDP2 (`--framework fsdp2`)
  // Fine-tuning: every candidate trains with these adapters (rank as given, targets the
  // default) and offloads what `offload` says; plan then reports the host memory each node
  // needs beside its GPUs.
  FinetuneMethod finetune = FinetuneMethod::kFull;
  int64_t lora_rank = 16;
  OffloadSpec offload;
  int jobs = 1;
  // A deadline (per GPU type the smallest cluster whose fastest layout trains the tokens within
  // it; of the types, the cheapest) and a budget in USD (alone: the fastest Pareto point
  // within it; with a deadline, it also bounds the smallest clusters' cost).
  std::optional<double> deadline_days, budget_usd;
  // A power budget in MW (the cluster's draw at the facility, PUE included): layouts above it
  // are left out of the choice and the type rows.
  std::optional<double> power_mw;
  // Run only one of N contiguous slices of the work: per GPU type, one unit for the
  // smallest-count search and one per whole-node cluster size. `stepsim merge` joins them.
  Shard shard;
};

// One layout the plan tries. tp × pp > 1 is the Megatron-LM family (distributed optimizer,
// sequence parallelism with TP); otherwise the ZeRO family of the request's framework.
struct PlanConfig {
  int zero = 3;
  int64_t micro_batch = 1;
  Recompute recompute = Recompute::kFull;
  // ZeRO-3 layers gathered ahead: the framework's default, which the plan does not vary (none
  // where DeepSpeed counts elements).
  std::optional<int64_t> prefetch = std::nullopt;
  int64_t tp = 1, pp = 1, cp = 1;
  int64_t ep = 1;         // expert parallelism (MoE models)
  int64_t pp_chunks = 1;  // > 1: the interleaved schedule with that many model chunks per stage
  // Layers of the first and last virtual stage where the layers do not split evenly (Megatron's
  // --decoder-first/last-pipeline-num-layers; the other virtual stages equal); 0: even.
  int64_t first_stage_layers = 0, last_stage_layers = 0;
  bool ModelParallel() const { return tp * pp * cp * ep > 1; }
  bool SequenceParallel() const { return tp > 1; }
};

// Uneven ends for `layers` over pp × chunks virtual stages that do not split evenly: the middle
// stages take ceil(layers / stages) each and the first and last share the rest (the first the
// smaller half), as Llama 3 405B's 126 layers over 16 stages are 7 + 14 × 8 + 7. {0, 0} when
// the layers split evenly; nullopt when no such split exists (more stages than layers).
std::optional<std::pair<int64_t, int64_t>> UnevenEnds(int64_t layers, int64_t pp, int64_t chunks);

// A configuration that fits, with its time to train and (given a price) its cost.
struct PlanFit {
  std::string gpu;
  int64_t gpus = 0;
  PlanConfig config;
  std::string variant;  // the --search values it ran with ("" without --search)
  // Sequences per step: the request's batch in tokens rounded to a whole number of
  // micro-batches on every data-parallel rank (and of pp for the interleaved schedule).
  int64_t global_batch = 0;
  // The step, and the days to train the tokens: effective days (the steps' days over the ETTR
  // of the whole run's interruptions and checkpoints; sim/report/whole_run.h), the steps' days
  // alone beside them.
  double step_s = 0, days = 0;
  // USD of the wall time: rented at the GPU's price, or owned (run.cost.capex_per_gpu written
  // off over run.cost.years, plus electricity); none without a price for the GPU.
  std::optional<double> cost;
  Bytes host;  // host memory per node (offload, paged optimizers)
  // The step extrapolated from two short replays (the plan's screening), not replayed in
  // full: never on the Pareto front.
  bool estimated = false;
  double ideal_days = 0;  // the steps alone
  double ettr = 1;
  double power_mw = 0;    // at the facility
  double energy_mwh = 0;  // over the wall time
};

// Why a configuration was left out, in the order the search applies the filters.
// kLighter: the same layout with less recompute fits, and is faster (it recomputes less).
// kSlower: a bound from a short replay shows another layout on as many GPUs of the type faster
// (same GPUs, same cost per day: it cannot be on the front).
enum class RejectionKind { kBatch, kLayout, kStatic, kReplay, kInvalid, kLighter, kSlower };

struct PlanRejection {
  std::string gpu;
  int64_t gpus = 0;
  PlanConfig config;
  RejectionKind kind = RejectionKind::kInvalid;
  std::string reason;
  std::optional<Bytes> floor;  // kStatic: the static floor that exceeded the HBM
};

// The smallest GPU count of one GPU type that fits (ZeRO-3, full recompute, micro-batch 1).
struct MinGpus {
  std::string gpu;
  std::string variant;          // as PlanFit::variant
  std::optional<int64_t> gpus;  // none: nothing fits up to the request's max_gpus
  std::string reason;           // why none fits
  PlanConfig config;
  Bytes peak, capacity;  // the reserved peak (what decides "fits") and the usable capacity
  std::string binding;   // the largest category at the peak
  memory::Breakdown peak_breakdown{};
  Bytes host;  // host memory per node
};

// One GPU type's answer (per --search variant): its best fit (with a deadline, the smallest
// cluster that meets it, at its fastest layout; otherwise the fewest GPU-hours of all), its
// price, and what its time calibration rests on. Every type planned has a row, priced or not.
struct PlanTypeRow {
  std::string gpu, variant;
  std::optional<double> price;  // USD per GPU-hour
  std::string calibration;      // CalibrationBasis
  bool datasheet_only = false;  // no fit to measured step times on any GPU
  std::optional<PlanFit> best;
  std::string why;  // why there is no best
};

// The slice of the plan's work units a result covers: [begin, end) of total.
struct PlanShard {
  int64_t begin = 0, end = 0, total = 0;
};

struct PlanResult {
  std::string model;
  int64_t params = 0;
  int64_t seq_len = 0;
  double tokens = 0;
  int64_t global_batch = 0;             // sequences per step
  std::vector<MinGpus> min_gpus;        // in the request's GPU order
  std::vector<PlanFit> pareto;          // time against cost, fastest first
  std::vector<PlanRejection> rejected;  // canonical order (GPU, count, configuration)
  PlanShard shard;
  std::vector<PlanFit> fits;  // every fitting configuration
  std::vector<PlanTypeRow> types;
  MemoryMargin headroom;     // kept free below each GPU's usable memory
  int64_t batch_tokens = 0;  // the request's tokens per step
  int64_t considered = 0, pruned = 0, replayed = 0;
  // Fits whose step is a screening estimate, and the estimates near the front replayed in full.
  int64_t estimated = 0, confirmed = 0;
  double seconds = 0;                               // wall time of the search
  std::optional<double> deadline_days, budget_usd;  // the request's (PlanRequest)
  std::optional<int64_t> fixed_gpus;                // the request's --gpus
  std::optional<double> power_mw;                   // the request's --power-mw
};

// The fit the request's deadline and budget choose (PlanRequest::deadline_days, budget_usd;
// types of `plan.types` compared); with neither, at a fixed count (--gpus) the fastest fit
// there, priced or not; none otherwise, or when nothing meets them.
std::optional<PlanFit> PlanChoice(const PlanResult& plan);

absl::StatusOr<PlanResult> Plan(const config::DataRoot& root, const PlanRequest& req,
                                const PlanProgressFn& progress);

// One row per GPU type (and search variant) of `plan.fits` (PlanTypeRow), in the order of
// `types`, whose gpu, variant, price and calibration are kept.
void FillTypeRows(PlanResult& plan);

// The Pareto set of fitting configurations: those no other is both faster and cheaper than;
// configurations without a price are left out.
std::vector<PlanFit> ParetoFrontier(const std::vector<PlanFit>& fits);

// A layout as the plan's JSON writes it (the keys of docs/reference.md's plan report).
nlohmann::ordered_json PlanConfigJson(const PlanConfig& c);

// Sorts rejections into the canonical order (GPU, GPU count, configuration), whatever the
// sharding.
void SortRejected(std::vector<PlanRejection>& rejected);

// Joins `plan --shard K/N` results (any order) into one plan, checking that they are slices of
// the same plan and tile it exactly; the Pareto set is recomputed from every shard's fits.
absl::StatusOr<PlanResult> MergePlans(std::vector<PlanResult> shards);

absl::string_view Name(RejectionKind k);

}  // namespace sim::explore

namespace sim {
template <>
struct EnumNames<explore::RejectionKind> {
  using K = explore::RejectionKind;
  static constexpr NameTable<K, 7> kNames{{{K::kBatch, "batch"},
                                           {K::kLayout, "layout"},
                                           {K::kStatic, "static"},
                                           {K::kReplay, "replay"},
                                           {K::kInvalid, "invalid"},
                                           {K::kLighter, "lighter"},
                                           {K::kSlower, "slower"}}};
};
}  // namespace sim

namespace sim::explore {}  // namespace sim::explore
