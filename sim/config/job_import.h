#pragma once
// A training job's own launch arguments or config as a stepsim scenario (`stepsim import job`).
//
// Megatron-LM's `pretrain_gpt.py` arguments (a command line, a launch script's argument string,
// or one `--flag value` per line; `\` line continuations, `--flag=value` and underscores for
// dashes as Megatron's argparse accepts them; a torchrun prefix's --nnodes and
// --nproc-per-node give the world size). Each flag that decides a cost maps to a scenario key,
// written with the flag it came from in a comment; flags known not to change the cost (data,
// tokenizer files, learning rate, logging, checkpoint paths) are passed over; every other flag
// is listed at the end of the scenario as not mapped, and returned. The architecture flags
// (--num-layers, --hidden-size, ...) become an inline model, with Megatron-LM's own defaults
// where a flag is absent (arguments.py: --ffn-hidden-size 4h, or 8h/3 rounded down to a
// multiple of 64 with --swiglu; the vocabulary padded to a multiple of
// --make-vocab-size-divisible-by x tp); a named catalog model may stand in for them. Nothing in
// the text is executed: it is read as words.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sim::config {

// What the arguments do not say: the hardware, and what stands for the architecture.
struct JobContext {
  std::string name;                  // the scenario's name (the file's stem when empty)
  std::string node;                  // cluster.node (required)
  int64_t gpus_per_node = 0;         // its GPUs (the node catalog's)
  std::optional<int64_t> gpus;       // the world size, when no torchrun prefix gives it
  std::optional<std::string> model;  // a catalog model name or hf:PATH instead of the flags
};

struct JobImport {
  std::string yaml;                   // the scenario
  std::vector<std::string> unmapped;  // flags read and not priced, as written
};

absl::StatusOr<JobImport> ImportMegatronArgs(const std::string& text, const std::string& origin,
                                             const JobContext& context);

// A DeepSpeed JSON config (`ds_config.json`) with the world size (`context.gpus`, as the
// launcher's) and the model (`context.model`: a DeepSpeed config holds no architecture):
// train_batch_size / train_micro_batch_size_per_gpu / gradient_accumulation_steps (checked
// against each other as DeepSpeed does), bf16 / fp16, zero_optimization's stage, offload devices,
// buckets and overlap_comm. "auto" (the Hugging Face Trainer's placeholder) is refused naming the
// key; keys that do not change a step (optimizer, scheduler, logging) are passed over, others
// listed as not mapped. `seq_len`: the tokens per sequence (none: stepsim's default, said so).
absl::StatusOr<JobImport> ImportDeepSpeedConfig(const std::string& text, const std::string& origin,
                                                const JobContext& context,
                                                std::optional<int64_t> seq_len);

// A torchtitan job config (`train_configs/*.toml`, torchtitan's JobConfig): [model] name and
// flavor name the catalog model (or `context.model`), [training] the batch, sequence, precision
// and compile settings, [parallelism] (or, in older configs, [training]) the degrees,
// [activation_checkpoint], [optimizer] and [compile]. data_parallel_shard_degree -1 takes what
// the other degrees leave of `context.gpus`, torchrun's world size. Each key's origin is written
// in its comment, torchtitan's defaults named where a key is absent; sections that cannot change
// a step (job, metrics, checkpoint, ...) are passed over, other keys listed as not mapped.
// Malformed TOML and bad values are refused at their line and column.
// A NeMo training recipe (NeMo-Framework-Launcher's Hydra YAML: trainer:, model: with its optim:)
// with the launcher's Hydra `overrides` applied first (KEY=VALUE replaces a key the recipe has,
// +KEY=VALUE adds one, as Hydra does). The architecture becomes an inline model (the vocabulary,
// which lives in the tokenizer's file, from `vocab`, padded as Megatron pads it), or
// `context.model` stands for it; trainer.num_nodes x devices give the world size unless
// `context.gpus` does. distributed_fused_adam is the distributed optimizer with its overlapped
// syncs, grad_sync_dtype and, for a bf16 model, Apex's store_param_remainders as NeMo sets it.
absl::StatusOr<JobImport> ImportNemoRecipe(const std::string& text, const std::string& origin,
                                           const JobContext& context,
                                           const std::vector<std::string>& overrides,
                                           std::optional<int64_t> vocab);

absl::StatusOr<JobImport> ImportTorchtitanToml(const std::string& text, const std::string& origin,
                                               const JobContext& context);

}  // namespace sim::config
