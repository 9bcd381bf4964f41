#pragma once
// The layouts `stepsim plan` tries (sim/explore/plan.h) and how each one's batch and screening
// sizes follow from it, for the search (planner.cc) and the merge of its shards (plan.cc).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "sim/config/catalog.h"
#include "sim/explore/plan.h"
#include "sim/spec/scenario.h"

namespace sim::explore {

// A candidate of the Pareto search: a layout and the overrides that make it a scenario.
struct Candidate {
  std::string gpu;
  int64_t gpus = 0;
  PlanConfig config;
  std::vector<config::Override> overrides;
  int64_t global_batch = 0;  // sequences per step, derived from the request's tokens
  std::shared_ptr<const Scenario> scenario = nullptr;  // as loaded from the overrides
};

// One search dimension of the ZeRO family: a scenario key, the values tried (as the scenario
// spells them), and what a value sets in the layout's PlanConfig. The family is their product,
// the first dimension outermost; a new dimension is one more entry.
struct SearchDimension {
  absl::string_view key;
  std::vector<std::string> values;
  void (*set)(PlanConfig& config, absl::string_view value);
};

// The ZeRO family's dimensions: stage 0-3, micro-batch 1/2/4, recompute none/selective/full.
std::vector<SearchDimension> DataParallelDimensions();

// The ZeRO family on `n` GPUs of type `gpu` under `framework` (its ZeRO-3 prefetch the
// framework's default: none where DeepSpeed counts elements), in the product's order.
std::vector<Candidate> DataParallelCandidates(const std::string& gpu, int64_t n,
                                              Framework framework);

// The model-parallel family searched beside ZeRO: Megatron-LM layouts with TP inside a node
// (1, 2, 4, 8 up to its GPUs), PP 1 to 32, CP 1 to 8, 1F1B or the interleaved schedule with 2
// chunks, uneven first/last stages where the layers do not split evenly, the distributed
// optimizer, sequence parallelism with TP, micro-batch 1 or 2, selective or full recompute.
// For a mixture of experts (`experts` > 0) also EP 1 to 64 dividing the experts and the
// data-parallel ranks, with EP x TP inside a node (Megatron-Core's MoE guide: "Ensure the EPxTP
// communication within the NVLink domain"); EP needs the distributed optimizer, not ZeRO-3.
std::vector<Candidate> ModelParallelCandidates(const std::string& gpu, int64_t n, int64_t gpn,
                                               int64_t layers, int64_t experts);

// Data-parallel ranks of a candidate: its GPUs over the model-parallel group (TP x PP x CP).
inline int64_t Replicas(const Candidate& c) {
  return c.gpus / (c.config.tp * c.config.pp * c.config.cp);
}

// The sequences a candidate's batch comes in: one micro-batch per data-parallel rank (pp of
// them for the interleaved schedule, which Megatron-LM asserts).
int64_t BatchUnit(const Candidate& c);

// Micro-batches per step of a candidate at a batch of `global_batch` sequences.
int64_t MicroBatches(const Candidate& c, int64_t global_batch);

// The two short batches (in micro-batches per step) a long candidate is screened at: pp and
// pp + 2 (at least 2 and 4); pp and 2 pp for the interleaved schedule, whose micro-batches
// come in groups of pp. The replayed step is linear in the micro-batches from there (each adds
// one steady-state period): over the 887 layouts of a 70B plan replayed both ways the
// extrapolation agreed with the full replay to the microsecond. The second batch is where the
// peak has settled: 1F1B's first stage holds pp micro-batches' activations, and its caching
// allocator reaches its largest reservation two micro-batches later (sim/replay/fold.cc), so
// pp + 2 and not 2 pp, which cost a third more for nothing: with pp + 2, plan llama2-70b and
// plan llama3-405b keep every fit, rejection and estimate (steps equal to 4e-15) and run 7 %
// and 4 % faster. None when replaying in full costs no more than the two short runs.
std::optional<std::pair<int64_t, int64_t>> ScreenSizes(const Candidate& c);

// Largest divisor of n not above `cap`.
int64_t PerNode(int64_t n, int64_t cap);

// Static floor of a candidate's per-GPU memory: persistent states, the activations kept across
// the whole forward (all layers), the runtime reserve. The replay only adds to it.
Bytes StaticFloor(const Scenario& s);

// Sets the smallest count of m.gpu in `all`: replaces the entry of the same GPU, or appends.
void SetMinGpus(std::vector<MinGpus>& all, MinGpus m);

}  // namespace sim::explore
