// Bad input files (tests/bad/*.yaml): each starts with "# expect: TEXT" lines, the exact error
// lines it must produce in order ({file} stands for its path). The file name's prefix says which
// loader reads it: scenario-, model-, gpus-, nodes-, cases-, fabric-, topology-.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "sim/config/catalog.h"
#include "sim/config/scenario_keys.h"

namespace sim {
namespace {

// The error lines `path` expects, as if it were read as `as` (by default, where it is).
std::string Expected(const std::string& path, const std::string& as = "") {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(line, "# expect: ")) {
      lines.push_back(absl::StrReplaceAll(line.substr(10), {{"{file}", as.empty() ? path : as}}));
    }
  }
  return absl::StrJoin(lines, "\n");
}

absl::Status Load(const std::string& path) {
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  const std::string name = std::filesystem::path(path).filename().string();
  if (absl::StartsWith(name, "scenario-")) return config::LoadScenario(root, path, {}).status();
  if (absl::StartsWith(name, "model-")) return config::LoadModelFile(path).status();
  if (absl::StartsWith(name, "gpus-")) return config::LoadGpuCatalog(path).status();
  if (absl::StartsWith(name, "cases-")) return config::LoadCases(root, path).status();
  if (absl::StartsWith(name, "fabric-")) return config::LoadFabric(root, path).status();
  if (absl::StartsWith(name, "topology-")) return config::LoadClusterTopology(root, path).status();
  auto gpus = config::LoadGpuCatalog(root.GpuCatalogFile());
  REQUIRE(gpus.ok());
  return config::LoadNodeCatalog(path, *gpus).status();
}

TEST_CASE("every bad input file fails with its exact located message", "[config][bad]") {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(STEPSIM_SOURCE_DIR "/tests/bad")) {
    files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 15);
  for (const std::string& f : files) {
    INFO(f);
    const std::string want = Expected(f);
    REQUIRE_FALSE(want.empty());
    const absl::Status st = Load(f);
    CHECK_FALSE(st.ok());
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(st.message()) == want);
  }
}

// A data root's catalogs, as every command loads them (LoadCatalogs): a broken node catalog is
// reported at its line and column, and with both broken, the GPU catalog's error comes first.
TEST_CASE("a data root's broken node catalog is located, after a broken GPU catalog", "[config]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "stepsim-bad-catalogs";
  fs::remove_all(dir);
  fs::create_directories(dir / "topologies");
  fs::copy(STEPSIM_SOURCE_DIR "/topologies", dir / "topologies", fs::copy_options::recursive);
  fs::copy(STEPSIM_SOURCE_DIR "/models", dir / "models", fs::copy_options::recursive);
  const config::DataRoot root{dir.string()};
  const std::string scenario = STEPSIM_SOURCE_DIR "/scenarios/default.yaml";
  REQUIRE(config::LoadScenario(root, scenario, {}).ok());

  // Each catalog in turn replaced by a corrupted file (one scalar): the nodes', then the GPUs'
  // too, whose error is reported first.
  const std::string bad = STEPSIM_SOURCE_DIR "/tests/bad/nodes-scalar.yaml";
  for (const std::string& catalog : {root.NodeCatalogFile(), root.GpuCatalogFile()}) {
    INFO(catalog);
    fs::copy_file(bad, catalog, fs::copy_options::overwrite_existing);
    auto loaded = config::LoadScenario(root, scenario, {});
    REQUIRE_FALSE(loaded.ok());
    CHECK(loaded.status().message() == Expected(bad, catalog));
  }
  fs::remove_all(dir);
}

// A loader parses its file once and builds each Load from a copy of the tree, which has no
// line and column (ScenarioLoader::Load); a failed build is redone from a fresh parse. So the
// same loader locates its errors on every call, after loads that succeeded too.
TEST_CASE("a loader locates its errors on every load", "[config]") {
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  const std::string file = STEPSIM_SOURCE_DIR "/tests/bad/scenario-batch.yaml";
  auto loader = config::ScenarioLoader::Open(root, file);
  REQUIRE(loader.ok());
  const std::string want = file +
                           ":11:17: training.global_batch: global_batch 1000 is not a multiple of "
                           "micro_batch x dp = 1 x 32 = 32";
  for (int i = 0; i < 2; ++i) {
    std::vector<config::ConfigProblem> problems;
    auto bad = loader->Load({}, &problems);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().message() == want);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].line == 11);
    CHECK(problems[0].column == 17);
    // The same file with the batch mended loads, and the next failure is located all the same.
    auto good = loader->Load({{"training.global_batch", "1024"}});
    REQUIRE(good.ok());
    CHECK(good->training.global_batch == 1024);
  }
}

TEST_CASE("overrides are validated like file keys", "[config]") {
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  const std::string file = STEPSIM_SOURCE_DIR "/scenarios/default.yaml";
  auto typo = config::LoadScenario(root, file, {{"parallel.zeor", "2"}});
  REQUIRE_FALSE(typo.ok());
  CHECK(absl::StartsWith(
      typo.status().message(),
      "--set parallel.zeor (over " + file + "): unknown key 'zeor' (did you mean 'zero'?)"));
  auto range = config::LoadScenario(root, file, {{"parallel.zero", "4"}});
  REQUIRE_FALSE(range.ok());
  CHECK(range.status().message() ==
        "--set parallel.zero (over " + file + "): must be between 0 and 3, got 4");
  auto good =
      config::LoadScenario(root, file, {{"parallel.zero", "2"}, {"training.micro_batch", "2"}});
  REQUIRE(good.ok());
  CHECK(good->parallel.zero == 2);
  CHECK(good->training.micro_batch == 2);
  CHECK(good->micro_batches() == 1024 / (2 * 32));
}

TEST_CASE("the default scenario resolves its catalog names", "[config]") {
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  auto s = config::LoadScenario(root, STEPSIM_SOURCE_DIR "/scenarios/default.yaml", {});
  REQUIRE(s.ok());
  CHECK(s->model.name == "llama2-70b");
  CHECK(s->cluster.gpu.name == "H100-SXM5-80GB");
  CHECK(s->cluster.gpus() == 32);
  CHECK(s->dp() == 32);
  CHECK(s->micro_batches() == 32);
  CHECK(s->cluster.gpu.hbm == Bytes::GiB(80));
  // DeepSpeed's own buckets and ZeRO-3 limits, in elements (the file sets neither).
  CHECK(!s->parallel.bucket);
  CHECK(!s->parallel.prefetch);
  CHECK(s->parallel.deepspeed.reduce_bucket_size == 500'000'000);
  CHECK(s->parallel.deepspeed.stage3_prefetch_bucket_size == 50'000'000);
  CHECK(s->parallel.deepspeed.stage3_max_live_parameters == 1'000'000'000);
}

TEST_CASE("an inline cluster needs its node description", "[config]") {
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  const std::string file = STEPSIM_SOURCE_DIR "/scenarios/default.yaml";
  auto s = config::LoadScenario(
      root, file, {{"cluster.node", "dgx-a100-80gb"}, {"cluster.gpu", "a100-sxm4-40gb"}});
  REQUIRE(s.ok());
  CHECK(s->cluster.gpu.name == "A100-SXM4-40GB");  // inline key overrides the node's GPU
  CHECK(s->cluster.node.nic_bandwidth.bytes_per_s() == 200e9 / 8);
}

TEST_CASE("the reference's table of scenario keys is the key registry", "[config]") {
  std::ifstream in(STEPSIM_SOURCE_DIR "/docs/reference.md");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  // Regenerate with: stepsim run --list-keys --markdown
  CHECK(text.str().find(config::ScenarioKeysMarkdown()) != std::string::npos);
}

TEST_CASE("every integer key's documented range is the range the loader enforces", "[config]") {
  // Each integer key at its documented ends and one past them: the ends pass the key's own
  // check (other checks may still refuse the layout, never with the range message), one past
  // is refused with exactly the documented range.
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  auto loader = config::ScenarioLoader::Open(root, STEPSIM_SOURCE_DIR "/scenarios/default.yaml");
  REQUIRE(loader.ok());
  int checked = 0;
  for (const config::ScenarioKey& key : config::ScenarioKeys()) {
    if (!absl::StartsWith(key.type, "integer")) continue;
    const auto range = config::IntegerRangeOf(key.path);
    INFO(key.path << " " << key.type);
    REQUIRE(range.has_value());
    const auto refusal = [&](int64_t v) {
      return absl::StrCat("must be between ", range->min, " and ", range->max, ", got ", v);
    };
    // A MoE model, so that the expert keys are read; etp needs ep.
    std::vector<config::Override> base = {{"model", "mixtral-8x7b"}};
    for (int64_t v : {range->min, range->max}) {
      auto s = loader->Load([&] {
        auto o = base;
        o.push_back({key.path, absl::StrCat(v)});
        return o;
      }());
      if (!s.ok()) CHECK_FALSE(absl::StrContains(s.status().message(), refusal(v)));
    }
    for (int64_t v : {range->min - 1, range->max + 1}) {
      auto o = base;
      o.push_back({key.path, absl::StrCat(v)});
      auto s = loader->Load(o);
      REQUIRE_FALSE(s.ok());
      CHECK(absl::StrContains(s.status().message(), absl::StrCat("--set ", key.path, " (over ")));
      CHECK(absl::StrContains(s.status().message(), refusal(v)));
    }
    ++checked;
  }
  CHECK(checked >= 20);
}

TEST_CASE("every registered scenario key is read by the loader", "[config]") {
  // Each section's keys come from the registry: a key the loader does not know would be
  // accepted silently, so each one is set to a malformed value and must be rejected by name.
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  const std::string file = STEPSIM_SOURCE_DIR "/scenarios/default.yaml";
  for (const config::ScenarioKey& k : config::ScenarioKeys()) {
    if (k.path.find('.') == std::string::npos) continue;  // sections and top-level names
    INFO(k.path);
    // A list is malformed for a scalar key; a list key gets a list with a word in it.
    const bool list = absl::StartsWith(k.type, "list of");
    auto s = config::LoadScenario(root, file, {{k.path, list ? "[1, nope]" : "[1, 2]"}});
    REQUIRE_FALSE(s.ok());
    CHECK(std::string(s.status().message()).find(k.path) != std::string::npos);
  }
}

}  // namespace
}  // namespace sim
