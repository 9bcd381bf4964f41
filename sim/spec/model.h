#pragma once
// An LLM architecture as plain data (models/NAME.yaml). Immutable once loaded; all derived
// quantities (parameter counts, per-op FLOPs and saved bytes) live in sim/workload.

#include <cstdint>
#include <optional>
#include <string>

namespace sim {

enum class MlpKind { kGelu, kSwiglu };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class PositionKind { kLearned, kRope, kAlibi };

struct ModelSpec {
  std::string name;
  std::string family;  // gpt | llama | mpt ... (informative)
  int64_t layers = 0;
  int64_t hidden = 0;      // h
  int64_t heads = 0;       // a
  int64_t kv_heads = 0;    // k (grouped-query attention when k < a)
  int64_t ffn_hidden = 0;  // f
  int64_t vocab = 0;       // V
  MlpKind mlp = MlpKind::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  PositionKind position = PositionKind::kLearned;
  // Rows of the learned position table (counted as parameters); only for kLearned.
  int64_t max_seq_len = 0;
  bool tied_embeddings = false;
  // Linear layers and norms carry bias vectors (GPT-2/3, Megatron GPT, llm-foundry benchmarks).
  bool bias = false;
  // Dropout probability; > 0 means dropout masks are saved for backward (1 byte per element).
  double dropout = 0;
  // A published count to check the derived count against (informative; never used in math).
  std::optional<double> nominal_params;
  std::string source;

  int64_t head_dim() const { return hidden / heads; }
};

}  // namespace sim
