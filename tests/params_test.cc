// Parameter counts derived from each catalog model's architecture against the published counts.
#include "sim/workload/params.h"

#include <catch2/catch.hpp>

#include "sim/config/catalog.h"

namespace sim {
namespace {

int64_t Count(const char* name) {
  auto m = config::LoadModel(config::DataRoot{STEPSIM_SOURCE_DIR}, name);
  REQUIRE(m.ok());
  return CountParameters(*m).total;
}

// Narayanan et al. SC21 eq. (2): 12·l·h² + 13·l·h + (V + s)·h, without the final LayerNorm.
int64_t Narayanan(int64_t l, int64_t h, int64_t v, int64_t s) {
  return 12 * l * h * h + 13 * l * h + (v + s) * h;
}

TEST_CASE("Llama counts equal the released checkpoints", "[params]") {
  // Llama 2 (arXiv 2307.09288) and Llama 3 (arXiv 2407.21783); counts of the HF checkpoints.
  CHECK(Count("llama2-7b") == 6'738'415'616);
  CHECK(Count("llama2-13b") == 13'015'864'320);
  CHECK(Count("llama2-70b") == 68'976'648'192);  // 68.98e9
  CHECK(Count("llama3-8b") == 8'030'261'248);    // 8.03e9
  CHECK(Count("llama3-70b") == 70'553'706'496);
  CHECK(Count("llama3-405b") == 405'853'388'800);  // 405.9e9
}

TEST_CASE("GPT counts follow Narayanan's formula plus the final LayerNorm", "[params]") {
  const int64_t final_norm = 2;  // weight and bias, × h
  CHECK(Count("gpt3-175b") == Narayanan(96, 12288, 51200, 2048) + final_norm * 12288);
  CHECK(static_cast<double>(Count("gpt3-175b")) / 1e9 == Approx(174.6).epsilon(0.0005));
  CHECK(Count("gpt-530b") == Narayanan(105, 20480, 51200, 2048) + final_norm * 20480);
  CHECK(static_cast<double>(Count("gpt-530b")) / 1e9 == Approx(529.6).epsilon(0.0005));
  CHECK(Count("gpt-1t") == Narayanan(128, 25600, 51200, 2048) + final_norm * 25600);
  CHECK(static_cast<double>(Count("gpt-1t")) / 1e9 == Approx(1008.0).epsilon(0.0005));
  CHECK(static_cast<double>(Count("gpt-22b")) / 1e9 == Approx(22.0).epsilon(0.005));
}

TEST_CASE("MPT counts equal llm-foundry's NumParams at seq 2048", "[params]") {
  CHECK(Count("mpt-7b") == 6'658'859'008);
  CHECK(Count("mpt-30b") == 29'975'214'080);
  CHECK(Count("mpt-70b") == 64'862'437'376);
}

TEST_CASE("every catalog model is within 0.5% of its nominal count", "[params]") {
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  const auto names = config::CatalogModelNames(root);
  CHECK(names.size() >= 13);
  for (const std::string& name : names) {
    auto m = config::LoadModel(root, name);
    REQUIRE(m.ok());
    REQUIRE(m->nominal_params.has_value());
    INFO(name);
    CHECK(static_cast<double>(CountParameters(*m).total) ==
          Approx(*m->nominal_params).epsilon(0.005));
    CHECK_FALSE(m->source.empty());
  }
}

}  // namespace
}  // namespace sim
