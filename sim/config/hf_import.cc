#include "sim/config/hf_import.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "sim/base/json_parse.h"
#include "sim/base/suggest.h"
#include "sim/config/loaders.h"
#include "yaml-cpp/yaml.h"

namespace sim::config {

namespace {

using Json = nlohmann::json;

// The architectures imported, by transformers' `model_type`.
const std::vector<std::string>& Supported() {
  static const std::vector<std::string> k = {"llama",       "mistral",    "qwen2",     "qwen3",
                                             "gemma",       "mixtral",    "qwen2_moe", "qwen3_moe",
                                             "deepseek_v2", "deepseek_v3"};
  return k;
}

// Fields that do not change what a training step costs: token ids, initialisation, RoPE's base
// and scaling (the same FLOPs), norms' epsilon, dtypes, bookkeeping, routing losses.
const std::set<std::string>& CostNeutral() {
  static const std::set<std::string> k = {"architectures",
                                          "model_type",
                                          "torch_dtype",
                                          "dtype",
                                          "transformers_version",
                                          "bos_token_id",
                                          "eos_token_id",
                                          "pad_token_id",
                                          "initializer_range",
                                          "rms_norm_eps",
                                          "rope_theta",
                                          "rope_scaling",
                                          "max_position_embeddings",
                                          "use_cache",
                                          "attention_dropout",
                                          "_name_or_path",
                                          "auto_map",
                                          "pretraining_tp",
                                          "output_router_logits",
                                          "router_aux_loss_coef",
                                          "router_jitter_noise",
                                          "norm_topk_prob",
                                          "use_sliding_window",
                                          "max_window_layers",
                                          "aux_loss_alpha",
                                          "seq_aux",
                                          "ep_size",
                                          "routed_scaling_factor",
                                          "topk_method",
                                          "n_group",
                                          "topk_group",
                                          "rope_interleave",
                                          "hidden_dropout",
                                          "embd_pdrop",
                                          "resid_pdrop",
                                          "attention_bias",
                                          "mlp_bias",
                                          "qkv_bias"};
  return k;
}

// Reads typed fields of the config, recording the first problem with the field's name.
class Fields {
 public:
  Fields(const Json& j, std::string origin) : j_(j), origin_(std::move(origin)) {}

  std::optional<int64_t> Int(const std::string& key, bool required, int64_t min = 1) {
    used_.insert(key);
    if (!j_.contains(key) || j_.at(key).is_null()) {
      if (required) Fail(key, "missing; stepsim needs it to count the model");
      return std::nullopt;
    }
    const Json& v = j_.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > (int64_t{1} << 40)) {
      Fail(key, absl::StrCat("expected a whole number from ", min, ", got ", v.dump()));
      return std::nullopt;
    }
    return v.get<int64_t>();
  }
  std::optional<std::string> String(const std::string& key) {
    used_.insert(key);
    if (!j_.contains(key) || j_.at(key).is_null()) return std::nullopt;
    if (!j_.at(key).is_string()) {
      Fail(key, absl::StrCat("expected a string, got ", j_.at(key).dump()));
      return std::nullopt;
    }
    return j_.at(key).get<std::string>();
  }
  std::optional<bool> Bool(const std::string& key) {
    used_.insert(key);
    if (!j_.contains(key) || j_.at(key).is_null()) return std::nullopt;
    if (!j_.at(key).is_boolean()) {
      Fail(key, absl::StrCat("expected true or false, got ", j_.at(key).dump()));
      return std::nullopt;
    }
    return j_.at(key).get<bool>();
  }
  const Json* Raw(const std::string& key) {
    used_.insert(key);
    return j_.contains(key) && !j_.at(key).is_null() ? &j_.at(key) : nullptr;
  }
  void Fail(const std::string& key, const std::string& what) {
    if (error_.empty()) error_ = absl::StrCat(origin_, ": ", key, ": ", what);
  }
  bool ok() const { return error_.empty(); }
  absl::Status status() const { return absl::InvalidArgumentError(error_); }
  const std::set<std::string>& used() const { return used_; }

 private:
  const Json& j_;
  std::string origin_;
  std::string error_;
  std::set<std::string> used_;
};

}  // namespace

absl::StatusOr<HfImport> ImportHfConfig(const std::string& text, const std::string& origin,
                                        const std::string& given_name,
                                        const std::vector<std::string>& ignore) {
  auto parsed = ParseJsonFile(text, origin);
  if (!parsed.ok()) return parsed.status();
  const Json j = *std::move(parsed);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": expected a JSON object (a config.json), got ", j.type_name()));
  }
  const std::set<std::string> ignored(ignore.begin(), ignore.end());
  Fields f(j, origin);
  HfImport out;
  std::vector<std::string> notes;  // for `source`: what each stepsim key came from
  const std::string type = f.String("model_type").value_or("");
  if (std::find(Supported().begin(), Supported().end(), type) == Supported().end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": model_type: '", type, "' is not one stepsim imports",
        DidYouMean(type, Supported()), "; supported: ", absl::StrJoin(Supported(), ", ")));
  }
  const bool moe = type == "mixtral" || type == "qwen2_moe" || type == "qwen3_moe" ||
                   type == "deepseek_v2" || type == "deepseek_v3";
  const bool deepseek = type == "deepseek_v2" || type == "deepseek_v3";
  const auto hidden = f.Int("hidden_size", true);
  const auto layers = f.Int("num_hidden_layers", true);
  const auto heads = f.Int("num_attention_heads", true);
  const auto kv_heads = f.Int("num_key_value_heads", false);
  const auto ffn = f.Int("intermediate_size", true);
  const auto vocab = f.Int("vocab_size", true);
  const auto head_dim = f.Int("head_dim", false);
  // transformers' defaults: Gemma ties the embeddings, the others do not.
  const bool tied = f.Bool("tie_word_embeddings").value_or(type == "gemma");
  // Every architecture here gates its MLP (gate, up and down projections): SiLU is SwiGLU,
  // Gemma's tanh-GELU GeGLU, the same three matrices and FLOPs.
  const std::string act =
      f.String("hidden_act").value_or(f.String("hidden_activation").value_or("silu"));
  if (act != "silu" && act != "gelu" && act != "gelu_pytorch_tanh" && act != "gelu_new") {
    f.Fail("hidden_act", absl::StrCat("'", act, "': stepsim prices gated SiLU or GELU MLPs"));
  }
  if (!f.ok()) return f.status();
  notes.push_back(
      absl::StrCat("model_type ", type, ", hidden_size ", *hidden, ", num_hidden_layers ", *layers,
                   ", num_attention_heads ", *heads, ", num_key_value_heads ",
                   kv_heads.value_or(*heads), ", intermediate_size ", *ffn, ", vocab_size ", *vocab,
                   head_dim ? absl::StrCat(", head_dim ", *head_dim) : "", ", tie_word_embeddings ",
                   tied ? "true" : "false", ", ", act, " gated MLP"));
  if (f.Bool("attention_bias").value_or(false) || type == "qwen2" || type == "qwen2_moe") {
    out.unpriced.push_back("the attention projections' biases");
  }
  if (f.Bool("mlp_bias").value_or(false)) out.unpriced.push_back("the MLP's biases");
  // A sliding window changes attention's cost past its width: not priced.
  const Json* window = f.Raw("sliding_window");
  const bool window_used =
      window != nullptr &&
      (type == "mistral" || type == "mixtral" ||
       ((type == "qwen2" || type == "qwen3" || type == "qwen2_moe" || type == "qwen3_moe") &&
        f.Bool("use_sliding_window").value_or(false)));
  if (window_used && ignored.count("sliding_window") == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": sliding_window: ", window->dump(),
        ": stepsim prices full attention; `stepsim import model ", origin,
        " --ignore sliding_window` imports it priced as full attention (exact for sequences "
        "within the window)"));
  }
  if (window_used) out.ignored.push_back("sliding_window");

  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "schema_version" << YAML::Value << 1;
  std::string name = given_name;
  if (name.empty()) name = std::filesystem::path(origin).stem().string();
  y << YAML::Key << "name" << YAML::Value << name;
  y << YAML::Key << "family" << YAML::Value << type;
  y << YAML::Key << "layers" << YAML::Value << *layers;
  y << YAML::Key << "hidden" << YAML::Value << *hidden;
  y << YAML::Key << "heads" << YAML::Value << *heads;
  y << YAML::Key << "kv_heads" << YAML::Value << (deepseek ? *heads : kv_heads.value_or(*heads));
  if (head_dim && *head_dim != *hidden / *heads && !deepseek) {
    y << YAML::Key << "head_dim" << YAML::Value << *head_dim;
  }
  y << YAML::Key << "ffn_hidden" << YAML::Value << *ffn;
  y << YAML::Key << "vocab" << YAML::Value << *vocab;
  y << YAML::Key << "mlp" << YAML::Value << "swiglu";
  y << YAML::Key << "norm" << YAML::Value << "rmsnorm";
  y << YAML::Key << "position" << YAML::Value << "rope";
  y << YAML::Key << "tied_embeddings" << YAML::Value << tied;
  y << YAML::Key << "bias" << YAML::Value << false;
  y << YAML::Key << "dropout" << YAML::Value << 0;
  if (deepseek) {
    // Multi-head latent attention (DeepSeek-V2 §2.1): every head reads the compressed KV.
    const auto q_rank = f.Int("q_lora_rank", true);
    const auto kv_rank = f.Int("kv_lora_rank", true);
    const auto nope = f.Int("qk_nope_head_dim", true);
    const auto rope = f.Int("qk_rope_head_dim", true);
    const auto v_dim = f.Int("v_head_dim", true);
    if (!f.ok()) return f.status();
    y << YAML::Key << "mla" << YAML::Value << YAML::BeginMap;
    y << YAML::Key << "q_lora_rank" << YAML::Value << *q_rank;
    y << YAML::Key << "kv_lora_rank" << YAML::Value << *kv_rank;
    y << YAML::Key << "qk_nope_head_dim" << YAML::Value << *nope;
    y << YAML::Key << "qk_rope_head_dim" << YAML::Value << *rope;
    y << YAML::Key << "v_head_dim" << YAML::Value << *v_dim;
    y << YAML::EndMap;
    notes.push_back(absl::StrCat("MLA: q_lora_rank ", *q_rank, ", kv_lora_rank ", *kv_rank,
                                 ", qk_nope_head_dim ", *nope, ", qk_rope_head_dim ", *rope,
                                 ", v_head_dim ", *v_dim));
    if (const auto mtp = f.Int("num_nextn_predict_layers", false, 0); mtp && *mtp > 0) {
      out.unpriced.push_back(
          absl::StrCat("the multi-token-prediction module (num_nextn_predict_layers ", *mtp, ")"));
    }
  }
  if (moe) {
    int64_t experts = 0, top_k = 0, width = 0, shared = 0, shared_width = 0, first_dense = 0,
            freq = 1;
    std::string router = "softmax";
    if (type == "mixtral") {
      experts = f.Int("num_local_experts", true).value_or(0);
      width = *ffn;
    } else if (deepseek) {
      experts = f.Int("n_routed_experts", true).value_or(0);
      width = f.Int("moe_intermediate_size", true).value_or(0);
      shared = f.Int("n_shared_experts", false, 0).value_or(0);
      shared_width = width;
      first_dense = f.Int("first_k_dense_replace", false, 0).value_or(0);
      freq = f.Int("moe_layer_freq", false).value_or(1);
      router = f.String("scoring_func").value_or("softmax");
      if (router != "softmax" && router != "sigmoid") {
        f.Fail("scoring_func", absl::StrCat("'", router, "': expected softmax or sigmoid"));
      }
    } else {
      experts = f.Int("num_experts", true).value_or(0);
      width = f.Int("moe_intermediate_size", true).value_or(0);
      freq = f.Int("decoder_sparse_step", false).value_or(1);
      if (type == "qwen2_moe") {
        shared_width = f.Int("shared_expert_intermediate_size", false, 0).value_or(0);
        shared = shared_width > 0 ? 1 : 0;
        if (shared > 0) out.unpriced.push_back("the shared expert's 1-output sigmoid gate");
      }
      if (const Json* dense = f.Raw("mlp_only_layers");
          dense != nullptr && !(dense->is_array() && dense->empty())) {
        f.Fail("mlp_only_layers",
               absl::StrCat(dense->dump(), ": dense layers between MoE layers are not priced"));
      }
    }
    top_k = f.Int("num_experts_per_tok", true).value_or(0);
    if (!f.ok()) return f.status();
    y << YAML::Key << "moe" << YAML::Value << YAML::BeginMap;
    y << YAML::Key << "experts" << YAML::Value << experts;
    y << YAML::Key << "top_k" << YAML::Value << top_k;
    y << YAML::Key << "expert_ffn_hidden" << YAML::Value << width;
    if (shared > 0) {
      y << YAML::Key << "shared_experts" << YAML::Value << shared;
      y << YAML::Key << "shared_expert_ffn_hidden" << YAML::Value << shared_width;
    }
    y << YAML::Key << "router" << YAML::Value << router;
    if (first_dense > 0) y << YAML::Key << "first_dense_layers" << YAML::Value << first_dense;
    if (freq > 1) y << YAML::Key << "layer_freq" << YAML::Value << freq;
    y << YAML::EndMap;
    notes.push_back(absl::StrCat(
        experts, " routed experts of width ", width, ", top-", top_k,
        shared > 0 ? absl::StrCat(", ", shared, " shared of width ", shared_width) : "", ", ",
        router, " router", first_dense > 0 ? absl::StrCat(", first ", first_dense, " dense") : "",
        freq > 1 ? absl::StrCat(", MoE every ", freq, " layers") : ""));
  }
  // Whatever was neither read nor known not to change the cost.
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (f.used().count(key) != 0 || CostNeutral().count(key) != 0) continue;
    if (ignored.count(key) != 0) {
      out.ignored.push_back(key);
      continue;
    }
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": ", key,
                     ": a field stepsim does not know, which may change the cost; `stepsim "
                     "import model ",
                     origin, " --ignore ", key, "` imports without it"));
  }
  std::string source =
      absl::StrCat("Imported from ", std::filesystem::path(origin).filename().string(), " (",
                   absl::StrJoin(notes, "; "), ")");
  if (!out.unpriced.empty()) {
    absl::StrAppend(&source, ". Not modelled: ", absl::StrJoin(out.unpriced, ", "));
  }
  if (!out.ignored.empty()) {
    absl::StrAppend(&source,
                    ". Ignored at the importer's request: ", absl::StrJoin(out.ignored, ", "));
  }
  y << YAML::Key << "source" << YAML::Value << YAML::DoubleQuoted << source;
  y << YAML::EndMap;
  out.yaml = absl::StrCat(y.c_str(), "\n");
  // The file must load as any model file does.
  YamlErrors errors(origin);
  const YAML::Node doc = YAML::Load(out.yaml);
  if (!ReadModel(doc, origin, errors) || !errors.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": the imported model does not load: ", errors.ToStatus().message()));
  }
  return out;
}

}  // namespace sim::config
