#pragma once
// What `stepsim sweep`, `compare` and `merge` produce besides tables: the compare rows of each
// framework, the JSON of a sweep or comparison, and the merge of sweep shards. The command line
// only parses flags and writes files.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/explore/grid.h"
#include "sim/explore/runner.h"
#include "sim/spec/scenario.h"

namespace sim::explore {

// One row of `stepsim compare`: a ZeRO stage (or FSDP strategy, or Megatron optimizer) and the
// overrides that make it.
struct CompareStage {
  int zero = 0;
  std::string mode;  // "deepspeed", an FSDP strategy, "megatron", "megatron distributed optimizer"
  std::vector<config::Override> overrides;
};
// The rows for the scenario's framework: ZeRO 0-3 (deepspeed), the FSDP strategies (fsdp),
// without and with the distributed optimizer (megatron, whose only sharding it is).
std::vector<CompareStage> CompareStages(const Scenario& base);
// `stepsim compare --finetune METHODS`: one row per method on the scenario's layout, from
// full | lora | qlora | offload, where offload is full fine-tuning at ZeRO-3 with the optimizer
// on the host (DeepSpeed ZeRO-Offload; fsdp and torchtune offload parameters, gradients and
// optimizer together; megatron its optimizer, on its distributed optimizer). Adapters keep the
// scenario's rank and targets. InvalidArgument for an unknown method.
absl::StatusOr<std::vector<CompareStage>> FinetuneStages(const Scenario& base,
                                                         const std::vector<std::string>& methods);

// `stepsim compare --ep DEGREES` (MoE models): one row per expert-parallel degree on the
// scenario's layout and sharding ("all": every degree that divides the experts and the
// tp·cp·dp / etp GPUs of a stage). InvalidArgument for a dense model or a degree that is not a
// positive integer; a degree the layout cannot take fails in its own row.
absl::StatusOr<std::vector<CompareStage>> ExpertParallelStages(
    const Scenario& base, const std::vector<std::string>& degrees);

// {schema_version, scenario, vary, shard {begin, end, total}, results: [{vary, report | error}]}.
// Each result's overrides after the first `labels_from` (the common --set ones) are its vary.
// The results' reports are built on `jobs` threads (the same JSON on any number).
nlohmann::ordered_json SweepJson(const std::string& scenario, const std::vector<std::string>& keys,
                                 const Slice& slice, size_t total,
                                 const std::vector<ConfigResult>& results, size_t labels_from,
                                 int jobs = 1);
// SweepJson(...).dump(2), byte for byte, with each item serialized on the workers too (the
// dump of a whole sweep's report on one thread was its longest serial part after the replays).
std::string SweepJsonText(const std::string& scenario, const std::vector<std::string>& keys,
                          const Slice& slice, size_t total,
                          const std::vector<ConfigResult>& results, size_t labels_from,
                          int jobs = 1);

// {schema_version, scenario, stages: [{zero, mode, report | error}]}.
nlohmann::ordered_json CompareJson(const std::string& scenario,
                                   const std::vector<CompareStage>& stages,
                                   const std::vector<ConfigResult>& results);

// A shard's JSON text (a `sweep` or `plan --shard` report) parsed, or InvalidArgument naming
// `path`: not JSON, or nested deeper than any report stepsim writes (kMaxShardDepth levels;
// the parsed value's copies, writing and destruction recurse once per level, so a few KB of
// brackets would otherwise exhaust the stack).
inline constexpr int kMaxShardDepth = 64;
absl::StatusOr<nlohmann::ordered_json> ParseShardJson(absl::string_view text,
                                                      const std::string& path);

// Joins `sweep --shard K/N` JSON reports (any order; `files` name them in errors) into the
// report of the whole sweep, checking that each has the shape SweepJson writes and that they
// tile one sweep exactly.
absl::StatusOr<nlohmann::ordered_json> MergeSweeps(std::vector<nlohmann::ordered_json> shards,
                                                   const std::vector<std::string>& files);

}  // namespace sim::explore
