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

// A mixture-of-experts MLP (models/NAME.yaml `moe:`): each token's MLP is the weighted sum of
// the top_k of `experts` routed experts its router picks, plus `shared_experts` that every token
// runs (DeepSeek-MoE, Qwen-MoE). The MoE layers are decoder layers F, F + N, F + 2N, ... (0-based,
// F = first_dense_layers, N = layer_freq): every layer by default; DeepSeek-V2 keeps its first
// layer dense and V3 its first three (first_k_dense_replace), Llama 4 Maverick alternates (F 1,
// N 2), Megatron-LM --moe-layer-freq N is F 0. The other layers have the dense MLP of width
// ffn_hidden. Experts are SwiGLU or GELU MLPs like the model's dense one (ModelSpec::mlp), of width
// expert_ffn_hidden.
enum class RouterKind { kSoftmax, kSigmoid };
struct MoeSpec {
  int64_t experts = 0;
  int64_t top_k = 0;
  int64_t expert_ffn_hidden = 0;
  int64_t shared_experts = 0;
  int64_t shared_ffn_hidden = 0;  // each shared expert's width
  // softmax over the experts' logits then top-k (Mixtral, Qwen-MoE, Switch); sigmoid scores
  // with top-k and renormalisation (DeepSeek-V3). Either way one h × experts GEMM.
  RouterKind router = RouterKind::kSoftmax;
  int64_t first_dense_layers = 0;  // F
  int64_t layer_freq = 1;          // N
};

// Multi-head latent attention (DeepSeek-V2/V3, models/NAME.yaml `mla:`; DeepSeek-AI 2024,
// arXiv 2405.04434 §2.1): queries and keys/values are projected down to latent ranks, normalised
// and projected up per head; each head's query and key are qk_nope + qk_rope wide (the rope part
// of the key shared by the heads, projected with the kv latent), its value v_head wide.
//   down  h × (q_lora + kv_lora + qk_rope), then RMSNorms of q_lora and kv_lora
//   up    q_lora × a·(qk_nope + qk_rope), kv_lora × a·(qk_nope + v_head)
//   out   a·v_head × h
// The down projections are replicated over TP, the rest split by heads, as in DeepSeek-V3's
// reference model (deepseek-ai/DeepSeek-V3 inference/model.py: wq_a and wkv_a plain Linear,
// wq_b and wkv_b column-parallel, wo row-parallel).
struct MlaSpec {
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t down_width() const { return q_lora_rank + kv_lora_rank + qk_rope_head_dim; }
};

struct ModelSpec {
  std::string name;
  std::string family;  // gpt | llama | mpt ... (informative)
  int64_t layers = 0;
  int64_t hidden = 0;    // h
  int64_t heads = 0;     // a
  int64_t kv_heads = 0;  // k (grouped-query attention when k < a)
  // d, each head's width, when it is not h / a (Megatron-LM --kv-channels, Hugging Face
  // head_dim: Qwen3 has 64 heads of 128 on h = 4096); 0 = h / a. Queries are a·d wide.
  int64_t head_dim_override = 0;
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
  std::optional<double> nominal_active_params;  // MoE: parameters one token computes with
  std::optional<MoeSpec> moe;
  std::optional<MlaSpec> mla;  // the attention is MLA instead of (grouped-query) MHA
  std::string source;

  int64_t head_dim() const { return head_dim_override > 0 ? head_dim_override : hidden / heads; }
  int64_t query_width() const { return heads * head_dim(); }  // a·d (= h unless head_dim set)
  // Whether decoder layer `i` (0-based) is a mixture-of-experts layer (MoeSpec), and how many are.
  bool IsMoeLayer(int64_t i) const {
    return moe && i >= moe->first_dense_layers &&
           (i - moe->first_dense_layers) % moe->layer_freq == 0;
  }
  int64_t moe_layers() const {
    if (!moe || layers <= moe->first_dense_layers) return 0;
    return (layers - moe->first_dense_layers + moe->layer_freq - 1) / moe->layer_freq;
  }
};

}  // namespace sim
