#pragma once
// A Hugging Face `config.json` as a stepsim model file (`stepsim import model`).
//
// Reads the fields transformers' configuration classes define for decoder-only models:
// LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, GemmaConfig (dense); MixtralConfig,
// Qwen2MoeConfig, Qwen3MoeConfig (MoE); DeepseekV2Config, DeepseekV3Config (MoE with MLA). Each
// field that decides a cost (widths, depths, heads, experts, the MLP's gating, tied
// embeddings, MLA's ranks) is mapped and named in the file's `source`; fields known not to
// change the cost (token ids, initialisation, RoPE base and scaling, dtypes, dropout of 0) are
// passed over; any other field, and a known one stepsim does not price (a sliding window), is
// an error naming it, unless the caller lists it in `ignore` (the file's source then says it was
// ignored). A malformed document is an error with its byte offset. Nothing in the file is
// executed or written anywhere but the returned text.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sim::config {

struct HfImport {
  std::string yaml;                   // the model file
  std::vector<std::string> ignored;   // fields passed over at the caller's request
  std::vector<std::string> unpriced;  // small parts not modelled, as the source says
};

// `text`: the config.json; `origin` names it in errors; `name`: the model's name (its file's
// stem when empty).
absl::StatusOr<HfImport> ImportHfConfig(const std::string& text, const std::string& origin,
                                        const std::string& name,
                                        const std::vector<std::string>& ignore);

}  // namespace sim::config
