// Hugging Face config.json import (sim/config/hf_import.h): ten published configs
// (tests/data/hf/, each as its repository's config.json) against their published parameter
// counts, and the refusals.

#include "sim/config/hf_import.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "sim/config/loaders.h"
#include "sim/workload/params.h"
#include "yaml-cpp/yaml.h"

namespace sim::config {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ModelSpec Import(const std::string& file, const std::vector<std::string>& ignore = {}) {
  const std::string path = std::string(STEPSIM_SOURCE_DIR "/tests/data/hf/") + file;
  auto imported = ImportHfConfig(Slurp(path), path, "", ignore);
  INFO(imported.status());
  REQUIRE(imported.ok());
  YamlErrors errors(path);
  auto m = ReadModel(YAML::Load(imported->yaml), path, errors);
  REQUIRE(m.has_value());
  return *m;
}

TEST_CASE("ten Hugging Face configs import to their published parameter counts", "[import]") {
  // (config, published total, published active or 0 for dense), each count from its model card
  // or paper: Llama 3.1 model card (8,030,261,248 and 70,553,706,496); Mistral-7B-v0.3's
  // safetensors index (7,248,023,552); Qwen2.5 and Qwen3 technical reports' tables (7.61B,
  // 8.2B); Gemma report, Table 1 (2.51B with the embeddings); Mixtral paper and model card
  // (46.7B total, 12.9B active); Qwen3 report, Table 2 (30.5B, 3.3B active); Qwen1.5-MoE blog
  // (14.3B, 2.7B active); DeepSeek-V3 report §1 (671B, 37B active, without the MTP module).
  const std::vector<std::tuple<std::string, double, double>> cases = {
      {"llama-3.1-8b.json", 8.030e9, 0},
      {"llama-3.1-70b.json", 70.55e9, 0},
      {"mistral-7b-v0.3.json", 7.248e9, 0},
      {"qwen2.5-7b.json", 7.61e9, 0},
      {"qwen3-8b.json", 8.19e9, 0},
      {"gemma-2b.json", 2.51e9, 0},
      {"mixtral-8x7b.json", 46.7e9, 12.9e9},
      {"qwen3-30b-a3b.json", 30.5e9, 3.3e9},
      {"qwen1.5-moe-a2.7b.json", 14.3e9, 2.7e9},
      {"deepseek-v3.json", 671e9, 37e9}};
  for (const auto& [file, total, active] : cases) {
    INFO(file);
    const ParameterCount p = CountParameters(Import(file));
    CHECK(static_cast<double>(p.total) == Approx(total).epsilon(0.005));
    // Active counts are published to two digits: within 2 %.
    if (active > 0) CHECK(static_cast<double>(p.active) == Approx(active).epsilon(0.02));
  }
}

TEST_CASE("imported models keep what decides their cost", "[import]") {
  const ModelSpec g = Import("gemma-2b.json");
  CHECK(g.tied_embeddings);  // Gemma's default
  CHECK(g.kv_heads == 1);
  CHECK(g.head_dim() == 256);  // 8 heads of 256 on a width of 2048
  // Qwen3-30B-A3B: 32 heads of 128 on a width of 2048, an explicit head_dim.
  CHECK(Import("qwen3-30b-a3b.json").head_dim_override == 128);
  const ModelSpec d = Import("deepseek-v3.json");
  REQUIRE(d.moe.has_value());
  CHECK(d.moe->first_dense_layers == 3);
  CHECK(d.moe->shared_experts == 1);
  CHECK(d.moe->router == RouterKind::kSigmoid);
  REQUIRE(d.mla.has_value());
  CHECK(d.mla->kv_lora_rank == 512);
}

TEST_CASE("import refuses what it cannot price, and says how to import anyway", "[import]") {
  const std::string base =
      R"({"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32,
          "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
          "vocab_size": 32000)";
  // A sliding window in use: attention past it is not priced.
  auto window = ImportHfConfig(base + R"(, "sliding_window": 4096})", "m.json", "m", {});
  REQUIRE_FALSE(window.ok());
  CHECK(absl::StrContains(window.status().message(), "m.json: sliding_window: 4096"));
  CHECK(absl::StrContains(window.status().message(), "m.json --ignore sliding_window`"));
  auto ignored =
      ImportHfConfig(base + R"(, "sliding_window": 4096})", "m.json", "m", {"sliding_window"});
  REQUIRE(ignored.ok());
  CHECK(absl::StrContains(ignored->yaml, "Ignored at the importer's request: sliding_window"));
  // A field it does not know.
  auto unknown = ImportHfConfig(base + R"(, "num_mystery_layers": 3})", "m.json", "m", {});
  REQUIRE_FALSE(unknown.ok());
  CHECK(absl::StrContains(unknown.status().message(), "num_mystery_layers: a field stepsim"));
  // Not JSON, not an object, an unsupported architecture, a missing width, a bad value.
  auto broken = ImportHfConfig("{\"model_type\": ", "b.json", "b", {});
  REQUIRE_FALSE(broken.ok());
  CHECK(absl::StrContains(broken.status().message(), "b.json:1:16: not JSON"));
  // A number beyond a double: nlohmann/json throws out_of_range, read as a located error.
  auto huge = ImportHfConfig(R"({"num_hidden_layers": 1e400})", "h.json", "h", {});
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().message() == "h.json:1:23: the number 1e400 is out of range");
  CHECK_FALSE(ImportHfConfig("[1, 2]", "a.json", "a", {}).ok());
  auto gpt2 = ImportHfConfig(R"({"model_type": "gpt2"})", "g.json", "g", {});
  REQUIRE_FALSE(gpt2.ok());
  CHECK(absl::StrContains(gpt2.status().message(), "'gpt2' is not one stepsim imports"));
  auto missing =
      ImportHfConfig(R"({"model_type": "llama", "hidden_size": 4096})", "l.json", "l", {});
  REQUIRE_FALSE(missing.ok());
  CHECK(absl::StrContains(missing.status().message(), "num_hidden_layers: missing"));
  auto negative = ImportHfConfig(base + R"(, "sliding_window": null, "num_key_value_heads": -8})",
                                 "n.json", "n", {});
  REQUIRE_FALSE(negative.ok());
  // A name with YAML's specials is quoted, never read as structure.
  auto named = ImportHfConfig(base + "}", "m.json", "x: [1]\n# y", {});
  REQUIRE(named.ok());
  CHECK(YAML::Load(named->yaml)["name"].as<std::string>() == "x: [1]\n# y");
}

TEST_CASE("a scenario's model can be hf:CONFIG.json", "[import]") {
  const DataRoot root{STEPSIM_SOURCE_DIR};
  auto m = LoadModel(root, "hf:" STEPSIM_SOURCE_DIR "/tests/data/hf/mixtral-8x7b.json");
  REQUIRE(m.ok());
  CHECK(m->name == "mixtral-8x7b");
  CHECK(static_cast<double>(CountParameters(*m).total) == Approx(46.7e9).epsilon(0.005));
  auto missing = LoadModel(root, "hf:/nonexistent/config.json");
  REQUIRE_FALSE(missing.ok());
  CHECK(absl::StrContains(missing.status().message(), "/nonexistent/config.json"));
}

}  // namespace
}  // namespace sim::config
