#include <filesystem>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sim/base/input_file.h"
#include "sim/base/suggest.h"
#include "sim/config/catalog.h"
#include "sim/config/hf_import.h"
#include "sim/config/loaders.h"
#include "sim/config/yaml_fields.h"

namespace sim::config {

namespace {
// Shapes far above any published model (Llama 3 405B: 126 layers, hidden 16384, vocab 128256;
// GPT 1T: 128 layers, hidden 25600), low enough that parameter and byte counts of a whole model
// stay well inside int64 (layers x 12 x hidden^2 x 20 B < 2^62).
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxWidth = int64_t{1} << 20;  // hidden, heads, FFN width
constexpr int64_t kMaxVocab = int64_t{1} << 26;
constexpr int64_t kMaxSeq = int64_t{1} << 24;

// The `moe:` section (sim/spec/model.h MoeSpec).
std::optional<MoeSpec> ReadMoe(const YAML::Node& node, const std::string& path, int64_t ffn_hidden,
                               YamlErrors& errors) {
  if (!CheckMapping(node, path,
                    {"experts", "top_k", "expert_ffn_hidden", "shared_experts",
                     "shared_expert_ffn_hidden", "router", "first_dense_layers", "layer_freq"},
                    errors)) {
    return std::nullopt;
  }
  MoeSpec moe;
  auto req = [&](absl::string_view k) { return Key{node, k, path, true}; };
  auto opt = [&](absl::string_view k) { return Key{node, k, path, false}; };
  if (auto v = ReadInt(req("experts"), errors, 2, 1 << 16)) moe.experts = *v;
  if (auto v = ReadInt(req("top_k"), errors, 1, 1 << 16)) moe.top_k = *v;
  moe.expert_ffn_hidden = ffn_hidden;
  if (auto v = ReadInt(opt("expert_ffn_hidden"), errors, 1, 4 * kMaxWidth)) {
    moe.expert_ffn_hidden = *v;
  }
  if (auto v = ReadInt(opt("shared_experts"), errors, 0, 64)) moe.shared_experts = *v;
  moe.shared_ffn_hidden = moe.expert_ffn_hidden;
  if (auto v = ReadInt(opt("shared_expert_ffn_hidden"), errors, 1, 4 * kMaxWidth)) {
    moe.shared_ffn_hidden = *v;
  }
  if (auto v = ReadEnum<RouterKind>(opt("router"), errors)) moe.router = *v;
  if (auto v = ReadInt(opt("first_dense_layers"), errors, 0, kMaxLayers)) {
    moe.first_dense_layers = *v;
  }
  if (auto v = ReadInt(opt("layer_freq"), errors, 1, kMaxLayers)) moe.layer_freq = *v;
  if (moe.experts > 0 && moe.top_k > moe.experts) {
    errors.Add(node["top_k"], JoinPath(path, "top_k"),
               absl::StrCat("top_k ", moe.top_k, " exceeds the ", moe.experts, " experts"));
  }
  return moe;
}

// The `mla:` section (sim/spec/model.h MlaSpec); every key is required.
std::optional<MlaSpec> ReadMla(const YAML::Node& node, const std::string& path,
                               YamlErrors& errors) {
  if (!CheckMapping(
          node, path,
          {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"},
          errors)) {
    return std::nullopt;
  }
  MlaSpec mla;
  auto req = [&](absl::string_view k) { return Key{node, k, path, true}; };
  if (auto v = ReadInt(req("q_lora_rank"), errors, 1, kMaxWidth)) mla.q_lora_rank = *v;
  if (auto v = ReadInt(req("kv_lora_rank"), errors, 1, kMaxWidth)) mla.kv_lora_rank = *v;
  if (auto v = ReadInt(req("qk_nope_head_dim"), errors, 1, kMaxWidth)) mla.qk_nope_head_dim = *v;
  if (auto v = ReadInt(req("qk_rope_head_dim"), errors, 1, kMaxWidth)) mla.qk_rope_head_dim = *v;
  if (auto v = ReadInt(req("v_head_dim"), errors, 1, kMaxWidth)) mla.v_head_dim = *v;
  return mla;
}

}  // namespace

std::optional<ModelSpec> ReadModel(const YAML::Node& node, absl::string_view path,
                                   YamlErrors& errors) {
  if (!CheckMapping(node, path,
                    {"schema_version",  "name",     "family",      "layers", "hidden",  "heads",
                     "kv_heads",        "head_dim", "ffn_hidden",  "mlp",    "norm",    "vocab",
                     "tied_embeddings", "position", "max_seq_len", "bias",   "dropout", "params",
                     "active_params",   "moe",      "mla",         "source"},
                    errors)) {
    return std::nullopt;
  }
  ModelSpec m;
  auto req = [&](absl::string_view k) { return Key{node, k, path, true}; };
  auto opt = [&](absl::string_view k) { return Key{node, k, path, false}; };
  if (auto v = ReadString(req("name"), errors)) m.name = *v;
  if (auto v = ReadString(opt("family"), errors)) m.family = *v;
  if (auto v = ReadInt(req("layers"), errors, 1, kMaxLayers)) m.layers = *v;
  if (auto v = ReadInt(req("hidden"), errors, 1, kMaxWidth)) m.hidden = *v;
  if (auto v = ReadInt(req("heads"), errors, 1, kMaxWidth)) m.heads = *v;
  m.kv_heads = m.heads;
  if (auto v = ReadInt(opt("kv_heads"), errors, 1, kMaxWidth)) m.kv_heads = *v;
  if (auto v = ReadInt(opt("head_dim"), errors, 1, kMaxWidth)) m.head_dim_override = *v;
  if (auto v = ReadInt(req("ffn_hidden"), errors, 1, 4 * kMaxWidth)) m.ffn_hidden = *v;
  if (auto v = ReadInt(req("vocab"), errors, 1, kMaxVocab)) m.vocab = *v;
  if (auto v = ReadEnum<MlpKind>(req("mlp"), errors)) m.mlp = *v;
  if (auto v = ReadEnum<NormKind>(req("norm"), errors)) m.norm = *v;
  if (auto v = ReadEnum<PositionKind>(req("position"), errors)) m.position = *v;
  if (auto v = ReadInt(opt("max_seq_len"), errors, 1, kMaxSeq)) m.max_seq_len = *v;
  if (auto v = ReadBool(req("tied_embeddings"), errors)) m.tied_embeddings = *v;
  if (auto v = ReadBool(opt("bias"), errors)) m.bias = *v;
  if (auto v = ReadDouble(opt("dropout"), errors, 0.0, 0.99)) m.dropout = *v;
  if (auto v = ReadDouble(opt("params"), errors, 1.0, 1e16)) m.nominal_params = *v;
  if (auto v = ReadDouble(opt("active_params"), errors, 1.0, 1e16)) m.nominal_active_params = *v;
  if (auto v = ReadString(opt("source"), errors)) m.source = *v;
  if (const YAML::Node mla = Child(node, "mla"); mla.IsDefined()) {
    m.mla = ReadMla(mla, JoinPath(path, "mla"), errors);
  }
  if (const YAML::Node moe = Child(node, "moe"); moe.IsDefined()) {
    m.moe = ReadMoe(moe, JoinPath(path, "moe"), m.ffn_hidden, errors);
    if (m.moe && m.layers > 0 && m.moe->first_dense_layers >= m.layers) {
      errors.Add(moe["first_dense_layers"], JoinPath(path, "moe.first_dense_layers"),
                 absl::StrCat("first_dense_layers ", m.moe->first_dense_layers,
                              " leaves none of the ", m.layers, " layers to the experts"));
    }
  }

  // Cross-field checks, reported at the key that makes the combination wrong.
  if (m.heads > 0 && m.head_dim_override == 0 && m.hidden % m.heads != 0) {
    errors.Add(node["heads"], JoinPath(path, "heads"),
               absl::StrCat("hidden ", m.hidden, " is not divisible by heads ", m.heads,
                            " (give head_dim when the heads are not h / heads wide)"));
  }
  if (m.kv_heads > 0 && m.heads % m.kv_heads != 0) {
    errors.Add(node["kv_heads"], JoinPath(path, "kv_heads"),
               absl::StrCat("heads ", m.heads, " is not a multiple of kv_heads ", m.kv_heads));
  }
  if (m.position == PositionKind::kLearned && m.max_seq_len == 0 && node["position"]) {
    errors.Add(node, JoinPath(path, "max_seq_len"),
               "learned positions need max_seq_len (the rows of the position table)");
  }
  return m;
}

absl::StatusOr<ModelSpec> LoadModelFile(const std::string& path) {
  auto root = LoadYamlFile(path);
  if (!root.ok()) return root.status();
  YamlErrors errors(path);
  CheckSchemaVersion(*root, errors);
  auto m = ReadModel(*root, "", errors);
  if (!errors.empty()) return errors.ToStatus();
  return *m;
}

std::vector<std::string> YamlFilesIn(const std::string& dir, bool stems) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".yaml") {
      names.push_back(stems ? e.path().stem().string() : e.path().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> CatalogModelNames(const DataRoot& root) {
  return YamlFilesIn(root.ModelsDir(), /*stems=*/true);
}

absl::StatusOr<ModelSpec> LoadModel(const DataRoot& root, absl::string_view name_or_path) {
  const std::string s(name_or_path);
  // hf:PATH: a Hugging Face config.json, imported as `stepsim import model` would (nothing is
  // ignored: a field it cannot price is an error here too).
  if (absl::StartsWith(s, "hf:")) {
    const std::string path = s.substr(3);
    auto text = ReadInputFile(path);
    if (!text.ok()) return text.status();
    auto imported = ImportHfConfig(*text, path, "", {});
    if (!imported.ok()) return imported.status();
    YamlErrors errors(path);
    auto m = ReadModel(YAML::Load(imported->yaml), path, errors);
    if (!m || !errors.empty()) return errors.ToStatus();
    return *m;
  }
  if (absl::StrContains(s, '/') || absl::EndsWith(s, ".yaml")) return LoadModelFile(s);
  const std::string lower = absl::AsciiStrToLower(s);
  const std::string file = root.ModelsDir() + "/" + lower + ".yaml";
  if (!PathExists(file)) {
    const auto names = CatalogModelNames(root);
    return absl::NotFoundError(absl::StrCat("unknown model '", s, "'", DidYouMean(s, names),
                                            "; models/ has ", names.size(),
                                            " models (stepsim ledger --help lists them)"));
  }
  return LoadModelFile(file);
}

}  // namespace sim::config
