// The stepsim command against files from strangers (docs/security.md): text from a model, a
// fabric or a --vary value reaches the plot, the pages, the CSV, the DOT graph and the trace as
// text and runs nothing; outputs are written whole or not at all, whatever sits at their paths.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/cli_run.h"
#include "tests/csv_rows.h"

namespace {

namespace fs = std::filesystem;

// A private folder for one test, removed at its end.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    std::string name =
        (fs::temp_directory_path() / absl::StrCat("stepsim-", tag, "-XXXXXX")).string();
    REQUIRE(::mkdtemp(name.data()) != nullptr);
    path = name;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A model name that is shell, gnuplot, HTML and spreadsheet code at once; each command in it
// would create a marker file in `dir`.
std::string HostileName(const TempDir& dir) {
  return absl::StrCat("x`touch ", dir / "ran1", "`\\\" ; system \\\"touch ", dir / "ran2",
                      "\\\" ; print '<script>alert(1)</script>=cmd|x");
}

std::vector<std::string> Markers(const TempDir& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    if (absl::StartsWith(e.path().filename().string(), "ran")) found.push_back(e.path());
  }
  return found;
}

TEST_CASE("a hostile model name and --vary value stay text in plot, pages, CSV and trace",
          "[cli][security]") {
  TempDir dir("hostile");
  std::string model = Slurp(STEPSIM_SOURCE_DIR "/tests/golden/tiny-model.yaml");
  model.replace(model.find("name: tiny-llama"), 16,
                absl::StrCat("name: \"", HostileName(dir), "\""));
  WriteFile(dir / "m.yaml", model);
  WriteFile(dir / "s.yaml",
            "schema_version: 1\nname: t\nmodel: ./m.yaml\ncluster: {node: dgx-h100, nodes: 1}\n"
            "training: {global_batch: 16, seq_len: 1024}\n");
  // The --vary value: a backquote command, a quote, a newline and a formula.
  const std::string vary = absl::StrCat("name=y`touch ", dir / "ran3", "`,=HYPERLINK(\"a\")");
  const Result sweep = Stepsim(absl::StrCat(
      "sweep ", dir / "s.yaml", " --vary training.micro_batch=1,2 --vary '", vary, "' --plot ",
      dir / "p.svg", " --csv ", dir / "p.csv", " --html ", dir / "p.html"));
  INFO(sweep.out);
  REQUIRE(sweep.status == 0);
  CHECK(Markers(dir).empty());
  // The plot drew the name as text (gnuplot's SVG escapes < and &).
  const std::string svg = Slurp(dir / "p.svg");
  CHECK(absl::StrContains(svg, "touch "));
  CHECK(!absl::StrContains(svg, "<script>"));
  const std::string html = Slurp(dir / "p.html");
  CHECK(!absl::StrContains(html, "<script>alert"));
  CHECK(absl::StrContains(html, "=HYPERLINK"));
  // Every CSV row has the header's cells, and none would start a spreadsheet formula.
  const auto rows = sim::testing::CsvRows(Slurp(dir / "p.csv"));
  REQUIRE(rows.size() == 5);
  for (const auto& row : rows) {
    CHECK(row.size() == rows[0].size());
    for (const std::string& cell : row) {
      INFO(cell);
      if (cell.empty() || cell == "-") continue;
      CHECK((cell[0] != '=' && cell[0] != '+' && cell[0] != '@'));
    }
  }
  CHECK(rows[2][1] == "'=HYPERLINK(\"a\")");

  const Result run = Stepsim(absl::StrCat("run ", dir / "s.yaml", " --trace ", dir / "t.json",
                                          " --html ", dir / "r.html", " --timeline ", dir / "t.csv",
                                          " --json ", dir / "r.json"));
  INFO(run.out);
  REQUIRE(run.status == 0);
  CHECK(Markers(dir).empty());
  CHECK(!absl::StrContains(Slurp(dir / "r.html"), "<script>"));
  CHECK(absl::StrContains(Slurp(dir / "r.html"), "print &#39;&lt;script&gt;"));
  CHECK_NOTHROW(nlohmann::json::parse(Slurp(dir / "t.json")));
}

TEST_CASE("a fabric's hostile names stay DOT strings", "[cli][security]") {
  TempDir dir("dot");
  std::string fabric = Slurp(STEPSIM_SOURCE_DIR "/topologies/fabrics/explicit-dumbbell.yaml");
  fabric = absl::StrReplaceAll(
      fabric, {{"name: explicit-dumbbell", "name: 'fab\" } ; x'"}, {"tor-a", "'tor\"a\\'"}});
  WriteFile(dir / "f.yaml", fabric);
  std::string cluster = Slurp(STEPSIM_SOURCE_DIR "/topologies/commodity-dumbbell.yaml");
  cluster =
      absl::StrReplaceAll(cluster, {{"fabric: explicit-dumbbell", "fabric: " + dir / "f.yaml"}});
  WriteFile(dir / "c.yaml", cluster);
  const Result r = Stepsim(absl::StrCat("topo ", dir / "c.yaml", " --dot ", dir / "g.dot"));
  INFO(r.out);
  REQUIRE(r.status == 0);
  const std::string dot = Slurp(dir / "g.dot");
  CHECK(absl::StartsWith(dot, "graph \"fab\\\" } ; x\" {\n"));
  CHECK(absl::StrContains(dot, "\"tor\\\"a\\\\\" [shape=ellipse];"));
}

TEST_CASE("outputs replace a planted symlink, never write through it", "[cli][security]") {
  TempDir dir("symlink");
  WriteFile(dir / "victim", "keep me\n");
  fs::create_symlink(dir / "victim", dir / "r.json");
  const Result r = Stepsim(absl::StrCat("run tests/golden/zero3.yaml --json ", dir / "r.json"));
  REQUIRE(r.status == 0);
  CHECK(Slurp(dir / "victim") == "keep me\n");
  CHECK(!fs::is_symlink(dir / "r.json"));
  CHECK_NOTHROW(nlohmann::json::parse(Slurp(dir / "r.json")));
  // No temporary is left beside the output.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) entries += e.path().empty() ? 0 : 1;
  CHECK(entries == 2);
}

TEST_CASE("a bad later output path leaves no earlier output behind", "[cli][security]") {
  TempDir dir("partial");
  const Result r = Stepsim(absl::StrCat("run tests/golden/zero3.yaml --json ", dir / "r.json",
                                        " --html ", dir / "missing/r.html"));
  CHECK(r.status == 2);
  CHECK(absl::StrContains(r.out, "--html"));
  CHECK(!fs::exists(dir / "r.json"));
  const Result same =
      Stepsim(absl::StrCat("sweep tests/golden/zero3.yaml --vary "
                           "training.seq_len=512 --json ",
                           dir / "x", " --csv ", dir / "x"));
  CHECK(same.status == 2);
  CHECK(absl::StrContains(same.out, "--json and --csv both name"));
}

TEST_CASE("a full disk or standard output fails the command and keeps the old file",
          "[cli][security]") {
  TempDir dir("full");
  WriteFile(dir / "r.json", "old\n");
  // A file-size limit of 1 KiB with SIGXFSZ ignored: the write fails with EFBIG, as on a full disk.
  const Result big = Shell(absl::StrCat("trap '' XFSZ; ulimit -f 1; " STEPSIM_BINARY
                                        " run tests/golden/zero3.yaml --json ",
                                        dir / "r.json"));
  CHECK(big.status == 2);
  CHECK(absl::StrContains(big.out, "write failed"));
  CHECK(Slurp(dir / "r.json") == "old\n");
  // The command's stdout to /dev/full, its stderr to the test (Shell's 2>&1 is outside).
  const Result json =
      Shell("{ " STEPSIM_BINARY " run tests/golden/zero3.yaml --json - >/dev/full; }");
  CHECK(json.status == 2);
  CHECK(absl::StrContains(json.out, "standard output: write failed"));
  const Result text = Shell("{ " STEPSIM_BINARY " run tests/golden/zero3.yaml >/dev/full; }");
  CHECK(text.status == 2);
  CHECK(absl::StrContains(text.out, "standard output: write failed"));
  const Result device = Stepsim("run tests/golden/zero3.yaml --json /dev/full");
  CHECK(device.status == 2);
  CHECK(absl::StrContains(device.out, "/dev/full: write failed"));
}

TEST_CASE("two processes writing one output leave one whole report", "[cli][security]") {
  TempDir dir("concurrent");
  const Result r = Shell(absl::StrCat("for i in 1 2 3 4; do " STEPSIM_BINARY
                                      " sweep tests/golden/zero3.yaml --vary "
                                      "training.seq_len=256,512,1024 --json ",
                                      dir / "s.json", " & done; wait"));
  CHECK(r.status == 0);
  const auto j = nlohmann::json::parse(Slurp(dir / "s.json"));
  CHECK(j["results"].size() == 3);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) entries += e.path().empty() ? 0 : 1;
  CHECK(entries == 1);
}

}  // namespace

namespace {

TEST_CASE("numbers past their bounds are refused before any work, with exit 2", "[cli][security]") {
  auto expect2 = [](const std::string& args, const std::string& message) {
    INFO(args);
    const Result r = Stepsim(args);
    CHECK(r.status == 2);
    CHECK(absl::StrContains(r.out, message));
  };
  std::string many;
  for (int i = 1; i <= 1001; ++i) absl::StrAppend(&many, i == 1 ? "" : ",", i);
  expect2(absl::StrCat("sweep tests/golden/zero3.yaml --vary training.seq_len=", many,
                       " --vary training.micro_batch=", many),
          "1001 x 1001 values make more than the 1000000 configurations one sweep runs");
  expect2("plan llama2-7b --price H100-SXM5-80GB=nan", "(a finite price, 0 or more)");
  expect2("plan llama2-7b --price H100-SXM5-80GB=inf", "(a finite price, 0 or more)");
  expect2("plan llama2-7b --price NO-SUCH-GPU=2", "--price: unknown GPU 'NO-SUCH-GPU'");
  expect2("plan llama2-7b --price H100-SXM5-80GB=2 --price h100-sxm5-80gb=3", "priced twice");
  expect2("plan llama2-7b --gpu H100-SXM5-80GB --price H200-SXM-141GB=2",
          "H200-SXM-141GB is not among the GPUs planned for");
  expect2("plan llama2-7b --days inf", "--days: expected a positive number");
  expect2(
      "calibrate scenarios/validation/mpt-h100.yaml --gpu H100-SXM5-80GB --out /dev/null "
      "--fix comm_efficiency=nan",
      "comm_efficiency = nan is outside its bounds");
}

TEST_CASE("a shard whose configurations all fail still writes its rows, and merge finishes",
          "[cli][security]") {
  TempDir dir("shards");
  const std::string vary = "--vary parallel.tp=1,3";  // tp 3 divides nothing: its row fails
  const Result a = Stepsim(
      absl::StrCat("sweep tests/golden/zero3.yaml ", vary, " --shard 1/2 --json ", dir / "a.json"));
  const Result b = Stepsim(
      absl::StrCat("sweep tests/golden/zero3.yaml ", vary, " --shard 2/2 --json ", dir / "b.json"));
  CHECK(a.status == 0);
  INFO(b.out);
  REQUIRE(b.status == 0);
  const auto shard = nlohmann::json::parse(Slurp(dir / "b.json"));
  REQUIRE(shard["results"].size() == 1);
  CHECK(absl::StrContains(shard["results"][0]["error"].get<std::string>(), "tp 3 must divide"));
  const Result merged =
      Stepsim(absl::StrCat("merge ", dir / "a.json", " ", dir / "b.json", " --json -"));
  REQUIRE(merged.status == 0);
  CHECK(nlohmann::json::parse(merged.out)["results"].size() == 2);
  // A shard nested past any report's depth is refused, not recursed into (it crashed merge).
  WriteFile(dir / "deep.json", absl::StrCat(std::string(100000, '['), std::string(100000, ']')));
  const Result deep = Stepsim(absl::StrCat("merge ", dir / "a.json", " ", dir / "deep.json"));
  CHECK(deep.status == 2);
  CHECK(absl::StrContains(deep.out, "nested more than 64 levels deep"));
}

}  // namespace

namespace {

TEST_CASE("a list value in flow form reaches the scenario through --set and a case's set:",
          "[cli]") {
  // The same two recompute modules as a flow list on the command line and in a case file, and
  // as the scenario file's own comma-joined text: one report.
  const std::string base =
      "run tests/golden/zero3.yaml --set training.recompute=selective --json - --set ";
  const Result flow = Stepsim(base + "'training.recompute_modules=[core_attn, mlp]'");
  const Result joined = Stepsim(base + "training.recompute_modules=core_attn,mlp");
  REQUIRE(flow.status == 0);
  REQUIRE(joined.status == 0);
  auto without_overrides = [](const std::string& text) {
    auto j = nlohmann::json::parse(text);
    j.erase("overrides");
    j.erase("scenario");
    return j;
  };
  CHECK(without_overrides(flow.out) == without_overrides(joined.out));
  const Result bad = Stepsim(base + "'training.recompute_modules=[core_attn, bogus]'");
  CHECK(bad.status == 2);
  CHECK(absl::StrContains(bad.out,
                          "--set training.recompute_modules (over tests/golden/zero3.yaml): "
                          "unknown recompute module 'bogus'"));
  const Result open = Stepsim(base + "'training.recompute_modules=[core_attn, mlp'");
  CHECK(open.status == 2);
  CHECK(absl::StrContains(open.out, "is not a YAML flow list or mapping"));

  TempDir dir("flow-case");
  WriteFile(dir / "cases.yaml",
            absl::StrCat("schema_version: 1\ncases:\n  - id: flow\n    source: test\n"
                         "    measured: {step_s: 1.0}\n    scenario:\n      base: ",
                         STEPSIM_SOURCE_DIR "/tests/golden/zero3.yaml",
                         "\n      set: {training.recompute: selective, "
                         "training.recompute_modules: [core_attn, mlp]}\n"));
  const Result c = Stepsim(absl::StrCat("validate ", dir / "cases.yaml", " --json -"));
  INFO(c.out);
  REQUIRE(c.status == 0);
  CHECK(absl::StrContains(c.out, "\"flow\""));
}

}  // namespace

namespace {

TEST_CASE("a calibration file is read back whatever its cases' names", "[cli][security]") {
  // A case file's name is a source in the calibration file; quotes, a colon, a comment sign and
  // a backslash in it made a file that --calibration refused.
  TempDir dir("calibration");
  const std::string cases = dir / "we\"ird, ]: #x\\.yaml";
  fs::copy_file(STEPSIM_SOURCE_DIR "/scenarios/validation/mpt-h100.yaml", cases);
  const Result fit = Stepsim(absl::StrCat("calibrate '", cases,
                                          "' --gpu H100-SXM5-80GB --params gemm_efficiency "
                                          "--out ",
                                          dir / "cal.yaml"));
  INFO(fit.out);
  REQUIRE(fit.status == 0);
  const Result back = Stepsim(
      absl::StrCat("run tests/golden/zero3.yaml --calibration ", dir / "cal.yaml", " --json -"));
  INFO(back.out);
  CHECK(back.status == 0);
}

}  // namespace

namespace {

TEST_CASE("a cluster or an op listing too large to build is refused before it is built",
          "[cli][security]") {
  const Result nodes = Stepsim(
      "run scenarios/default.yaml --set cluster.nodes=1000000 --set training.global_batch=8000000");
  CHECK(nodes.status == 2);
  CHECK(absl::StrContains(nodes.out, "8000000 GPUs, above the 1048576 stepsim models"));
  const Result collective =
      Stepsim("collective all_reduce --node dgx-h100 --nodes 1000000 --sizes 1G");
  CHECK(collective.status == 2);
  CHECK(absl::StrContains(collective.out, "above the 1048576 GPUs stepsim models"));
  // A geometric factor near 2^63 overflowed and looped without end.
  const Result sizes =
      Stepsim("collective all_reduce --node dgx-h100 --sizes 8..8G:x4611686018427387904 --json -");
  CHECK(sizes.status == 0);
  CHECK(nlohmann::json::parse(sizes.out)["rows"].size() == 1);
  const Result dump =
      Stepsim("run scenarios/default.yaml --set training.global_batch=65536 --dump-ops");
  CHECK(dump.status == 2);
  CHECK(absl::StrContains(dump.out,
                          "--dump-ops prints every op of every micro-batch: at most "
                          "20000 micro-batch x layer groups, and this step has 167936"));
}

}  // namespace
