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
//    1, 2, 4, ... up to --max-gpus), every stage, micro-batch 1/2/4 and recompute policy, and
//    the Megatron-LM layouts TP 1/2/4/8 (within a node) × PP 1/2/4/8 with the distributed
//    optimizer, SP, micro-batch 1 and selective or full recompute;
//    configurations whose static states plus kept activations exceed the HBM are pruned
//    before replay; every rejected family is reported with its reason.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/config/catalog.h"
#include "sim/explore/runner.h"

namespace sim::explore {

struct PlanRequest {
  std::string model;              // catalog name or path
  std::vector<std::string> gpus;  // GPU catalog names (each needs a node type)
  int64_t seq_len = 4096;
  double tokens = 1e12;                     // training budget
  int64_t global_batch_tokens = 4'194'304;  // ~4M tokens per step (Llama 2's batch)
  int64_t max_gpus = 1024;
  std::map<std::string, double> prices;  // GPU name -> USD per GPU-hour (overrides catalog)
  std::string framework = "deepspeed";
  int jobs = 1;
  // Run only the K-th (1-based) of N contiguous slices of the work: per GPU type, one unit for
  // the smallest-count search and one per whole-node cluster size. `stepsim merge` joins them.
  int shard_k = 1, shard_n = 1;
};

absl::StatusOr<nlohmann::ordered_json> Plan(const config::DataRoot& root, const PlanRequest& req,
                                            const Progress& progress);

// The human rendering of Plan()'s JSON.
std::string PlanText(const nlohmann::ordered_json& plan);

// The Pareto set of a list of fitting configurations ({gpu, gpus, config, step_s, days, cost}):
// those no other is both faster and cheaper than; configurations without a price are left out.
nlohmann::ordered_json ParetoFrontier(const nlohmann::ordered_json& fits);

// Joins the JSON of `plan --shard K/N` runs (any order) into one plan, checking that they are
// slices of the same plan and tile it exactly.
absl::StatusOr<nlohmann::ordered_json> MergePlans(std::vector<nlohmann::ordered_json> shards);

}  // namespace sim::explore
