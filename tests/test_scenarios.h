#pragma once
// Scenarios for tests: a file with overrides, and the golden runs' grid of layouts
// (tests/golden/cases.txt: one `NAME FILE [--set KEY=VALUE]...` per line) for tests that check a
// property across it.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "sim/config/catalog.h"

namespace sim {

inline Scenario Load(const std::string& file, std::vector<config::Override> overrides = {}) {
  auto s = config::LoadScenario(config::DataRoot{STEPSIM_SOURCE_DIR}, file, overrides);
  REQUIRE(s.ok());
  return *s;
}

struct GoldenCase {
  std::string line;  // as written in cases.txt, for INFO
  Scenario scenario;
};

inline std::vector<GoldenCase> GoldenCases() {
  std::ifstream cases(STEPSIM_SOURCE_DIR "/tests/golden/cases.txt");
  std::vector<GoldenCase> out;
  std::string line;
  while (std::getline(cases, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    REQUIRE(words.size() >= 2);
    std::vector<config::Override> sets;
    for (size_t i = 2; i + 1 < words.size(); i += 2) {
      // Flags that choose what `run` reports, not the scenario: the scenario is the same.
      if (words[i] == "--trials") continue;
      REQUIRE(words[i] == "--set");
      auto o = config::ParseOverride(words[i + 1]);
      REQUIRE(o.ok());
      sets.push_back(*o);
    }
    out.push_back({line, Load(STEPSIM_SOURCE_DIR "/tests/golden/" + words[1], sets)});
  }
  return out;
}

}  // namespace sim
