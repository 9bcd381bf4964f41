// End-to-end: the stepsim command as a user runs it (exit status, JSON keys, bad input).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/cli_run.h"

namespace {

// The DOM headless Chromium makes of a page, or "" when chromium is not installed (then the
// caller WARNs and checks the file alone).
std::string RenderedDom(const std::string& page) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) return "";
  return Shell(absl::StrCat("chromium --headless --no-sandbox --disable-gpu --dump-dom file://",
                            page))
      .out;
}

TEST_CASE("help for the command and each subcommand", "[cli]") {
  Result top = Stepsim("--help");
  CHECK(top.status == 0);
  CHECK(absl::StrContains(top.out, "ledger"));
  Result ledger = Stepsim("ledger --help");
  CHECK(ledger.status == 0);
  for (const char* flag : {"--params", "--gpus", "--optimizer", "--precision", "--seq-len",
                           "--micro-batch", "--json", "--framework", "--tp", "--sp"}) {
    CHECK(absl::StrContains(ledger.out, flag));
  }
  for (const char* cmd : {"run", "sweep", "compare", "plan", "merge", "validate", "calibrate",
                          "topo", "collective", "list"}) {
    INFO(cmd);
    Result r = Stepsim(std::string(cmd) + " --help");
    CHECK(r.status == 0);
    CHECK(absl::StrContains(r.out, std::string("usage: stepsim ") + cmd));
    CHECK(absl::StrContains(top.out, cmd));
    // Flag help in one column at 29, wrapped within 100 columns, --help included.
    const size_t flags = r.out.find("flags:\n");
    REQUIRE(flags != std::string::npos);
    for (absl::string_view line : absl::StrSplit(r.out.substr(flags + 7), '\n')) {
      INFO(line);
      CHECK(line.size() <= 100);
      if (absl::StartsWith(line, "  --") && line.size() > 29) {
        CHECK(line.substr(0, 29).find("  ", 4) != absl::string_view::npos);
        CHECK(line[28] == ' ');
        CHECK(line[29] != ' ');
      }
    }
  }
}

TEST_CASE("ledger JSON carries the SPEC 5 keys", "[cli]") {
  Result r = Stepsim("ledger --params 70e9 --gpus 8 --json -");
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["params"] == 70'000'000'000);
  CHECK(j["bytes_per_param"]["total"] == 16);
  CHECK(j["per_gpu_bytes"]["zero0"] == 70'000'000'000LL * 16);
  CHECK(j["per_gpu_bytes"]["zero3"] == 70'000'000'000LL * 16 / 8);
  Result a = Stepsim("ledger gpt-22b --seq-len 2048 --micro-batch 4 --optimizer sgd --json -");
  REQUIRE(a.status == 0);
  auto k = nlohmann::json::parse(a.out);
  const int64_t s = 2048, b = 4, h = 6144, heads = 64;
  CHECK(k["bytes_per_param"]["total"] == 12);
  CHECK(k["activation_bytes_per_layer"]["none"] == 34 * s * b * h + 5 * heads * s * s * b);
  CHECK(k["activation_bytes_per_layer"]["selective"] == 34 * s * b * h);
  CHECK(k["activation_bytes_per_layer"]["full"] == 2 * s * b * h);
  CHECK(k["activation_shape"]["recompute_modules"] == nlohmann::json::array({"core_attn"}));
  // Megatron-Core's mlp module also drops the MLP's input (2sbh), GELU's input and fc2's input
  // (8sbh each); the dropout masks after it stay.
  Result m = Stepsim(
      "ledger gpt-22b --seq-len 2048 --micro-batch 4 --recompute-modules "
      "core_attn,mlp --json -");
  REQUIRE(m.status == 0);
  auto mj = nlohmann::json::parse(m.out);
  CHECK(mj["activation_bytes_per_layer"]["selective"] == 16 * s * b * h);
  CHECK(mj["activation_shape"]["recompute_modules"] == nlohmann::json::array({"core_attn", "mlp"}));
  Result typo = Stepsim("ledger gpt-22b --seq-len 2048 --recompute-modules mpl");
  CHECK(typo.status == 2);
  CHECK(absl::StrContains(typo.out, "(did you mean 'mlp'?)"));
}

TEST_CASE("run writes the report, trace and timeline, and bare stepsim runs the default", "[cli]") {
  const std::string dir = "/tmp/stepsim-cli-test";
  std::filesystem::create_directories(dir);
  Result r =
      Stepsim(absl::StrCat("run scenarios/default.yaml --set training.global_batch=64 ", "--json ",
                           dir, "/r.json --trace ", dir, "/t.json --timeline ", dir, "/m.csv"));
  REQUIRE(r.status == 0);
  CHECK(absl::StrContains(r.out, "FITS"));
  for (const char* f : {"/r.json", "/t.json", "/m.csv"}) {
    CHECK(std::filesystem::file_size(dir + f) > 0);
  }
  std::ifstream in(dir + "/r.json");
  auto j = nlohmann::json::parse(in);
  for (const char* section :
       {"cluster", "parallel", "memory", "time", "flops", "throughput", "comm_bytes_per_gpu"}) {
    CHECK(j.contains(section));
  }
  CHECK(j["parallel"]["micro_batches"] == 2);
  Result bare = Stepsim("");
  CHECK(bare.status == 0);
  CHECK(absl::StrContains(bare.out, "llama2-70b-32xh100-zero3"));
  Result dump = Stepsim("run scenarios/default.yaml --dump-ops --set training.global_batch=32");
  CHECK(dump.status == 0);
  // Llama-2-70B's QKV on an H100 (132 SMs), 4,096 tokens of h = 8,192 into 8,192 + 2 x 1,024
  // columns: 2 x 4096 x 8192 x 10240 = 6.87195e11 FLOP, 2 B x (4096 x 8192 + 8192 x 10240 +
  // 4096 x 10240) = 318,767,104 B; 32 x 80 = 2,560 output tiles, 19.4 waves, so 20: 20 x 132 /
  // 2,560 = 1.03125; its reduction length is h: 1/K = 1/8192.
  CHECK(absl::StrContains(dump.out,
                          "fwd qkv | 6.87195e+11 FLOP 318767104 B waves 1.03125 1/K "
                          "0.00012207"));
  // Issue 7's example: TP8 PP4 under the Megatron preset; a stage table in the text, one
  // entry per stage in the JSON.
  Result tp = Stepsim(
      "run scenarios/default.yaml --set parallel.tp=8 --set parallel.pp=4 "
      "--set parallel.framework=megatron --set training.global_batch=16 --json -");
  CHECK(tp.status == 0);
  const auto tj = nlohmann::json::parse(tp.out);
  CHECK(tj["stages"].size() == 4);
  CHECK(tj["time"]["bubble_s"].get<double>() > 0);
  CHECK(tj["comm_bytes_per_gpu"]["send_recv"].get<int64_t>() > 0);
  // A layout no framework runs is refused with exit 2, not faked.
  Result pp_zero3 = Stepsim("run scenarios/default.yaml --set parallel.pp=4");
  CHECK(pp_zero3.status == 2);
  CHECK(absl::StrContains(pp_zero3.out, "ZeRO-2/3 are not combined with pipeline parallelism"));
}

// Issue 14's large traces: a part of the step by micro-batch and stage, and a word when the file
// is more than the viewers open.
TEST_CASE("run --trace-steps and --trace-stages keep a part of the step", "[cli]") {
  const std::string dir = "/tmp/stepsim-cli-trace";
  std::filesystem::create_directories(dir);
  const std::string run =
      "run scenarios/default.yaml --set parallel.tp=8 --set parallel.pp=4 "
      "--set parallel.framework=megatron --set training.global_batch=16 ";  // 16 micro-batches
  REQUIRE(Stepsim(absl::StrCat(run, "--trace ", dir, "/all.json")).status == 0);
  Result part =
      Stepsim(absl::StrCat(run, "--trace ", dir, "/part.json --trace-steps 1..2 --trace-stages 1"));
  REQUIRE(part.status == 0);
  auto events = [&](const std::string& file) {
    std::ifstream in(dir + file);
    return nlohmann::json::parse(in)["traceEvents"];
  };
  const auto all = events("/all.json"), kept = events("/part.json");
  int all_x = 0, kept_x = 0;
  std::set<std::string> prefixes;
  std::set<int> pids;
  for (const auto& e : all) all_x += e["ph"] == "X";
  for (const auto& e : kept) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] != "X") continue;
    ++kept_x;
    const std::string name = e["name"];
    prefixes.insert(name.substr(0, name.find(' ')));
  }
  // Stage 1 only, micro-batches 1 and 2 only: 2 of 16 micro-batches on 1 of 4 stages.
  CHECK(pids == std::set<int>{1});
  CHECK(prefixes == std::set<std::string>{"mb1", "mb2"});
  CHECK(kept_x > 0);
  CHECK(kept_x < all_x / 16);
  CHECK(absl::StrContains(Slurp(dir + "/part.json"), "micro-batches 1..2 of 0..15"));
  // Bad ranges and a range without a trace exit 2, naming the flag, and write nothing.
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--trace-steps 16", "--trace-steps 16: the step has 16 micro-batches (0..15)"},
           {"--trace-steps 3..1", "--trace-steps 3..1: the first index must not exceed the last"},
           {"--trace-stages 4", "--trace-stages 4: the step has 4 pipeline stages (0..3)"},
           {"--trace-steps one",
            "--trace-steps: expected an index or a range A..B of "
            "micro-batches, got 'one'"}}) {
    std::filesystem::remove(dir + "/bad.json");
    Result bad = Stepsim(absl::StrCat(run, "--trace ", dir, "/bad.json ", args));
    CHECK(bad.status == 2);
    CHECK(absl::StrContains(bad.out, says));
    CHECK_FALSE(std::filesystem::exists(dir + "/bad.json"));
  }
  Result alone = Stepsim(absl::StrCat(run, "--trace-stages 1"));
  CHECK(alone.status == 2);
  CHECK(absl::StrContains(alone.out, "--trace-stages chooses what --trace PATH writes"));
  // Far below the viewers' 256 MB: no warning.
  CHECK_FALSE(absl::StrContains(part.out, "warning"));
}

// Issue 14: a long step's trace keeps, unless asked otherwise, the micro-batches until the
// schedule repeats (K + d = 3 for the default scenario's ZeRO-3 without a pipeline: K = 2,
// d = 1, sim/replay/fold.cc) and the last K with the optimizer, and says so; `all` keeps all.
// 10 micro-batches, the fewest that fold (more than 3 (K + d)).
// Issue 71: outputs keep the fold. A step of 131,072 micro-batches, refused with an output
// before (its program is past the limit one lowers whole), writes its page and trace from its
// first short replays' records (sim/replay/step_records.h) in well under a second.
TEST_CASE("run --html and --trace of a 131,072-micro-batch step write from the folded replay",
          "[cli]") {
  const std::string dir = "/tmp/stepsim-cli-long-outputs";
  std::filesystem::create_directories(dir);
  Result r = Stepsim(
      absl::StrCat("run scenarios/default.yaml --set training.global_batch=4194304 --html ", dir,
                   "/page.html --trace ", dir, "/trace.json --json ", dir, "/report.json"));
  REQUIRE(r.status == 0);
  const std::string page = Slurp(dir + "/page.html");
  // The middle micro-batch drawn on the streams, the peak marked on the memory chart.
  CHECK(absl::StrContains(page, "Micro-batch 65536 of 131072"));
  CHECK(absl::StrContains(page, "id=\"peak-marker\""));
  CHECK(absl::StrContains(r.out, "note: the trace keeps micro-batches 0..1, 131071 of 0..131071"));
  std::ifstream in(dir + "/trace.json");
  const auto trace = nlohmann::json::parse(in);
  std::set<std::string> prefixes;
  double last_end = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string name = e["name"];
    prefixes.insert(name.substr(0, name.find(' ')));
    last_end = std::max(last_end, e["ts"].get<double>() + e["dur"].get<double>());
  }
  CHECK(prefixes == std::set<std::string>{"mb0", "mb1", "mb131071", "optimizer"});
  // The last op ends with the step the report gives (microseconds in the trace).
  std::ifstream report(dir + "/report.json");
  const double step_s = nlohmann::json::parse(report)["time"]["step_s"].get<double>();
  CHECK(last_end / 1e6 == Approx(step_s).epsilon(1e-9));
}

TEST_CASE("run --trace of a long step keeps its first and last micro-batches, with a note",
          "[cli]") {
  const std::string dir = "/tmp/stepsim-cli-trace-default";
  std::filesystem::create_directories(dir);
  const std::string run = "run scenarios/default.yaml --set training.global_batch=320 ";
  Result part = Stepsim(absl::StrCat(run, "--trace ", dir, "/part.json"));
  REQUIRE(part.status == 0);
  CHECK(absl::StrContains(part.out, "note: the trace keeps micro-batches 0..1, 9 of 0..9"));
  Result all = Stepsim(absl::StrCat(run, "--trace ", dir, "/all.json --trace-steps all"));
  REQUIRE(all.status == 0);
  CHECK_FALSE(absl::StrContains(all.out, "note: the trace keeps"));
  auto kept = [&](const std::string& file) {
    std::ifstream in(dir + file);
    std::set<std::string> prefixes;
    std::vector<double> counter_times;
    const auto trace = nlohmann::json::parse(in);
    for (const auto& e : trace["traceEvents"]) {
      if (e["ph"] == "X") {
        const std::string name = e["name"];
        prefixes.insert(name.substr(0, name.find(' ')));
      } else if (e["ph"] == "C" && e["name"] == "allocated GiB") {
        counter_times.push_back(e["ts"].get<double>());
      }
    }
    return std::make_pair(prefixes, counter_times);
  };
  const auto [part_ops, part_counters] = kept("/part.json");
  const auto [all_ops, all_counters] = kept("/all.json");
  CHECK(part_ops == std::set<std::string>{"mb0", "mb1", "mb9", "optimizer"});
  CHECK(all_ops.size() == 11);  // mb0..mb9 and the optimizer
  // The memory counters cover both spans, in time order, and far fewer samples than the whole.
  REQUIRE_FALSE(part_counters.empty());
  CHECK(std::is_sorted(part_counters.begin(), part_counters.end()));
  CHECK(part_counters.front() == all_counters.front());
  CHECK(part_counters.back() == all_counters.back());
  CHECK(part_counters.size() < all_counters.size() * 4 / 10);
  CHECK(absl::StrContains(Slurp(dir + "/part.json"), "micro-batches 0..1, 9 of 0..9"));
  // A shorter step (6 micro-batches, which do not fold) is traced whole, without a note.
  Result whole =
      Stepsim(absl::StrCat(run, "--set training.global_batch=192 --trace ", dir, "/short.json"));
  REQUIRE(whole.status == 0);
  CHECK_FALSE(absl::StrContains(whole.out, "note: the trace keeps"));
}

// Issue 18's rough edges, each as the user saw it.
TEST_CASE("run names its overrides, counts micro-batches in English, says what overflows",
          "[cli]") {
  // 70B with ZeRO-3 on one node: 16 B/param over 8 GPUs is ~130 GiB before any activation.
  Result r = Stepsim(
      "run scenarios/default.yaml --set cluster.nodes=1 --set training.global_batch=8 "
      "--set training.recompute=none");
  REQUIRE(r.status == 0);
  // The header says which file and which changes, not the file's name alone.
  CHECK(absl::StrContains(r.out,
                          "llama2-70b-32xh100-zero3 with cluster.nodes=1, "
                          "training.global_batch=8, training.recompute=none: llama2-70b "
                          "on 8 x H100"));
  CHECK(absl::StrContains(r.out, ", 1 micro-batch\n"));
  CHECK_FALSE(absl::StrContains(r.out, "1 micro-batches"));
  // The first overflow happens part-way through the persistent states; the whole set and the
  // peak are given beside it.
  CHECK(absl::StrContains(r.out, "capacity first exceeded at persistent states"));
  CHECK(absl::StrContains(r.out, "persistent states alone"));
  Result j = Stepsim(
      "run scenarios/default.yaml --set cluster.nodes=1 --set training.global_batch=8 "
      "--set training.recompute=none --json -");
  REQUIRE(j.status == 0);
  const auto rep = nlohmann::json::parse(j.out);
  CHECK(rep["overrides"].size() == 3);
  CHECK(rep["parallel"].contains("replayed_zero_stage"));
  const auto& m = rep["memory"];
  const auto& o = m["first_overflow"];
  const int64_t cap = m["capacity_bytes"].get<int64_t>();
  const int64_t persistent = o["persistent_bytes"].get<int64_t>();
  // The persistent set holds at least the ZeRO-3 states of the static ledger and the reserve.
  const auto& st = m["static_bytes"];
  CHECK(persistent >= st["weights"].get<int64_t>() + st["gradients"].get<int64_t>() +
                          st["optimizer"].get<int64_t>() +
                          m["runtime_reserved_bytes"].get<int64_t>());
  CHECK(o["persistent_excess_bytes"].get<int64_t>() == persistent - cap);
  CHECK(o["excess_bytes"].get<int64_t>() <= o["persistent_excess_bytes"].get<int64_t>());
  CHECK(o["reserved_peak_excess_bytes"].get<int64_t>() ==
        m["reserved_peak_bytes"].get<int64_t>() - cap);
}

TEST_CASE("the batch in tokens holds tokens per step across sequence lengths", "[cli]") {
  // 4,194,304 tokens: 2,048 sequences of 2,048 (64 micro-batches on 32 ranks), 512 of 8,192.
  for (const auto& [seq, micro_batches] : {std::pair{2048, 64}, std::pair{8192, 16}}) {
    Result r = Stepsim(
        absl::StrCat("run scenarios/default.yaml --set training.global_batch_tokens=4194304 "
                     "--set training.seq_len=",
                     seq, " --json -"));
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["parallel"]["micro_batches"] == micro_batches);
  }
  Result text = Stepsim("run scenarios/default.yaml --set training.global_batch_tokens=262144");
  CHECK(absl::StrContains(text.out, "batch: 64 sequences of 4096 tokens = 262144 tokens per step"));
  // A sweep says what it holds: sequences (and that tokens grow), or tokens.
  Result seqs = Stepsim(
      "sweep scenarios/default.yaml --vary training.seq_len=2048,4096 --set "
      "training.global_batch=64");
  REQUIRE(seqs.status == 0);
  CHECK(absl::StrContains(seqs.out,
                          "held constant: the global batch, 64 sequences (tokens per "
                          "step grow with training.seq_len"));
  Result tokens = Stepsim(
      "sweep scenarios/default.yaml --vary training.seq_len=2048,4096 --set "
      "training.global_batch_tokens=262144");
  REQUIRE(tokens.status == 0);
  CHECK(absl::StrContains(tokens.out, "held constant: 262144 tokens per step"));
}

// Issue 18: run --html, one self-contained page, and a real browser renders it.
TEST_CASE("run --html writes a self-contained page that headless Chromium renders", "[cli]") {
  const std::string dir = "/tmp/stepsim-cli-html";
  std::filesystem::create_directories(dir);
  const std::string page = dir + "/run.html";
  Result r = Stepsim("run scenarios/gpt3-175b-korthikanti.yaml --html " + page + " --json -");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const std::string html = Slurp(page);
  // Nothing fetched: no external src or href at all.
  CHECK_FALSE(absl::StrContains(html, "src=\"http"));
  CHECK_FALSE(absl::StrContains(html, "href=\"http"));
  for (const char* id : {"id=\"verdict\"", "id=\"memory-chart\"", "id=\"peak-marker\"",
                         "id=\"stream-chart\"", "id=\"time-table\"", "id=\"collective-table\""}) {
    CHECK(absl::StrContains(html, id));
  }
  // The report's numbers: the peak and the step, as the text report prints them.
  const double peak_gib = j["memory"]["peak_bytes"].get<double>() / 1073741824.0;
  CHECK(absl::StrContains(html, absl::StrFormat("Peak <strong>%.2f GiB", peak_gib)));
  CHECK(absl::StrContains(html, absl::StrFormat("%.3f s", j["time"]["step_s"].get<double>())));
  // The memory chart draws the reserved peak the verdict is decided on, above the allocated
  // areas.
  const double reserved_gib = j["memory"]["reserved_peak_bytes"].get<double>() / 1073741824.0;
  CHECK(absl::StrContains(html, "id=\"reserved-peak\""));
  CHECK(absl::StrContains(html,
                          absl::StrFormat("reserved peak %.2f GiB (the verdict", reserved_gib)));
  // Every category held at the peak has its hatched area; every pattern is defined.
  CHECK(absl::StrContains(html, "data-category=\"activations\""));
  CHECK(absl::StrContains(html, "<pattern id=\"m-activations\""));
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    WARN("chromium not installed (tools/install-deps.sh --test installs it): page not rendered");
    return;
  }
  const std::string browser =
      "chromium --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 ";
  Result dom = Shell(absl::StrCat(browser, "--dump-dom file://", page));
  CHECK(absl::StrContains(dom.out, "id=\"memory-chart\""));
  CHECK(absl::StrContains(dom.out, "<polygon"));
  CHECK(absl::StrContains(dom.out, "FITS: reserved peak"));
  CHECK(absl::StrContains(dom.out, "id=\"whole-run-table\""));
  CHECK(absl::StrContains(dom.out, "ETTR (Monte Carlo mean, p10-p90)"));
  CHECK_FALSE(absl::StrContains(dom.out, "CONSOLE"));  // no console message of any kind
  std::filesystem::remove(dir + "/run.png");
  Result shot = Shell(absl::StrCat(browser, "--window-size=1100,1500 --screenshot=", dir,
                                   "/run.png file://", page));
  CHECK(std::filesystem::exists(dir + "/run.png"));
  CHECK(std::filesystem::file_size(dir + "/run.png") > 20000);
}

TEST_CASE("a forced algorithm that does not apply says where the ring ran instead", "[cli]") {
  Result r = Stepsim("run scenarios/default.yaml --set parallel.collective=tree");
  REQUIRE(r.status == 0);
  // NCCL has no tree all-gather or reduce-scatter (ZeRO-3's collectives).
  CHECK(absl::StrContains(r.out,
                          "note: parallel.collective tree does not apply everywhere: "
                          "all_gather ran ring"));
  CHECK(absl::StrContains(r.out, "reduce_scatter ran ring"));
  Result ring = Stepsim("run scenarios/default.yaml --set parallel.collective=ring");
  REQUIRE(ring.status == 0);
  CHECK_FALSE(absl::StrContains(ring.out, "does not apply"));
}

TEST_CASE("ledger says what DeepSpeed's estimator does not know", "[cli]") {
  Result bare = Stepsim("ledger --params 70e9 --optimizer sgd");
  REQUIRE(bare.status == 0);
  CHECK(absl::StrContains(bare.out, "largest layer unknown, 0 assumed"));
  CHECK(absl::StrContains(bare.out, "its formulas assume mixed-precision Adam"));
  Result sized = Stepsim("ledger --params 70e9 --largest-layer 1e9");
  REQUIRE(sized.status == 0);
  CHECK(absl::StrContains(sized.out, "largest layer 1"));
  CHECK_FALSE(absl::StrContains(sized.out, "assume mixed-precision Adam"));
}

TEST_CASE("sweep: --jobs 1 and 2 byte-identical, shards merge into the whole", "[cli]") {
  const std::string dir = "/tmp/stepsim-cli-sweep";
  std::filesystem::create_directories(dir);
  const std::string sweep =
      "sweep scenarios/default.yaml --vary training.seq_len=2048,4096 --vary parallel.zero=2..3 "
      "--set training.global_batch=32 ";
  REQUIRE(Stepsim(sweep + "--jobs 1 --json " + dir + "/j1.json").status == 0);
  REQUIRE(Stepsim(sweep + "--jobs 2 --json " + dir + "/j2.json").status == 0);
  CHECK(Slurp(dir + "/j1.json") == Slurp(dir + "/j2.json"));
  REQUIRE(Stepsim(sweep + "--shard 1/2 --json " + dir + "/s1.json").status == 0);
  REQUIRE(Stepsim(sweep + "--shard 2/2 --json " + dir + "/s2.json").status == 0);
  REQUIRE(
      Stepsim("merge " + dir + "/s2.json " + dir + "/s1.json --json " + dir + "/m.json").status ==
      0);
  auto whole = nlohmann::json::parse(Slurp(dir + "/j1.json"));
  auto merged = nlohmann::json::parse(Slurp(dir + "/m.json"));
  CHECK(whole["results"] == merged["results"]);
  CHECK(Stepsim("merge " + dir + "/s1.json").status == 2);  // half a sweep
  Result csv = Stepsim(sweep + "--csv -");
  CHECK(csv.status == 0);
  CHECK(
      absl::StartsWith(csv.out, "training.seq_len,parallel.zero,fits,reserved_gib,allocated_gib"));
  Result bad = Stepsim("sweep scenarios/default.yaml --vary training.seqlen=1,2");
  CHECK(bad.status == 2);
  CHECK(absl::StrContains(bad.out, "did you mean 'seq_len'"));
}

TEST_CASE("sweep --html draws peak and step against the first key, one series per other", "[cli]") {
  const std::string page = "/tmp/stepsim-cli-pages-sweep.html";
  Result r = Stepsim(
      "sweep scenarios/default.yaml --vary training.seq_len=2048,4096,8192 "
      "--vary training.recompute=none,selective,full --set training.global_batch=32 --html " +
      page);
  REQUIRE(r.status == 0);
  const std::string html = Slurp(page);
  for (const char* id : {"id=\"peak-chart\"", "id=\"peak-chart-limit\"", "id=\"step-chart\"",
                         "id=\"held\"", "training.recompute=selective"}) {
    CHECK(absl::StrContains(html, id));
  }
  // Values spanning less than 10x (2K..8K) keep a linear axis; the README's 2K..128K sweep
  // spans more and gets a log one.
  CHECK(absl::StrContains(html, "<polyline"));
  CHECK_FALSE(absl::StrContains(html, "(log scale)"));
  const std::string dom = RenderedDom(page);
  if (dom.empty()) {
    WARN("chromium not installed: sweep page not rendered");
    return;
  }
  CHECK(absl::StrContains(dom, "id=\"peak-chart\""));
}

TEST_CASE("sweep plots through gnuplot when it is installed", "[cli]") {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    WARN("gnuplot not installed (tools/install-deps.sh installs gnuplot-nox): plot not checked");
    return;
  }
  const std::string svg = "/tmp/stepsim-cli-sweep/plot.svg";
  std::filesystem::remove(svg);
  Result r = Stepsim(
      "sweep scenarios/default.yaml --vary training.seq_len=2048,4096,8192 "
      "--vary training.recompute=none,full --set training.global_batch=32 "
      "--plot " +
      svg);
  CHECK(r.status == 0);
  const std::string text = Slurp(svg);
  CHECK(absl::StrContains(text, "<svg"));
  CHECK(absl::StrContains(text, "training.seq_len"));
  CHECK(absl::StrContains(text, "GPU capacity"));
  // No recompute does not fit at these lengths (124 GiB at 4K): those points are ringed apart.
  CHECK(absl::StrContains(text, "ringed: does not fit"));
  // The extension picks the format: a PNG file holds a PNG (its signature, RFC 2083 §3.1), and
  // an extension gnuplot is not asked to draw is refused before any replay.
  const std::string png = "/tmp/stepsim-cli-sweep/plot.png";
  std::filesystem::remove(png);
  Result p =
      Stepsim("sweep tests/golden/zero3.yaml --vary training.seq_len=512,1024 --plot " + png);
  CHECK(p.status == 0);
  CHECK(absl::StartsWith(Slurp(png), "\x89PNG\r\n\x1a\n"));
  const std::string pdf = "/tmp/stepsim-cli-sweep/plot.pdf";
  Result bad =
      Stepsim("sweep tests/golden/zero3.yaml --vary training.seq_len=512,1024 --plot " + pdf);
  CHECK(bad.status == 2);
  CHECK(absl::StrContains(bad.out, "name a .svg or .png file"));
  CHECK(!std::filesystem::exists(pdf));
}

TEST_CASE("compare and plan print their tables", "[cli]") {
  const std::string dir = "/tmp/stepsim-cli-pages";
  std::filesystem::create_directories(dir);
  Result c = Stepsim(
      "compare scenarios/default.yaml --set training.global_batch=32 --markdown "
      "--html " +
      dir + "/compare.html");
  CHECK(c.status == 0);
  CHECK(absl::StrContains(c.out, "| ZeRO-3 | deepspeed | yes |"));
  Result p = Stepsim(
      "plan llama2-70b --gpu A100-SXM4-80GB --max-gpus 64 --tokens 2T --batch-tokens 524288 "
      "--price A100-SXM4-80GB=1.5 --html " +
      dir + "/plan.html");
  CHECK(p.status == 0);
  CHECK(absl::StrContains(p.out, "Smallest GPU count that fits"));
  // Their pages: self-contained, the charts and tables there, and a browser renders them.
  for (const auto& [page, ids] :
       {std::pair<std::string, std::vector<std::string>>{
            "compare.html", {"peak-chart", "peak-chart-limit", "step-chart", "rows-table"}},
        {"plan.html", {"pareto-chart", "pareto-table", "min-gpus-table"}}}) {
    INFO(page);
    const std::string html = Slurp(dir + "/" + page);
    CHECK_FALSE(absl::StrContains(html, "src=\"http"));
    CHECK_FALSE(absl::StrContains(html, "href=\"http"));
    for (const std::string& id : ids) CHECK(absl::StrContains(html, "id=\"" + id + "\""));
    const std::string dom = RenderedDom(dir + "/" + page);
    if (dom.empty()) {
      WARN("chromium not installed: " << page << " not rendered");
      continue;
    }
    CHECK(absl::StrContains(dom, "id=\"" + ids[0] + "\""));
    CHECK(absl::StrContains(dom, "<circle"));
  }
  // The plan page's points carry their layouts on hover; its table and the text's say the batch
  // each step ran (512K tokens: 128 sequences of 4,096).
  CHECK(absl::StrContains(Slurp(dir + "/plan.html"), "<title>"));
  CHECK(absl::StrContains(Slurp(dir + "/plan.html"), "batch (sequences)"));
  CHECK(absl::StrContains(p.out, "batch: the sequences each step ran"));
  // Into a pipe (this test, a log, CI) the progress line is whole lines, never redrawn.
  CHECK_FALSE(absl::StrContains(p.out, "\r"));
  CHECK_FALSE(absl::StrContains(c.out, "\r"));
  // The seeds' exercise, 70B on 8 x A100-80GB: neither a ZeRO nor a TP/PP layout fits, and the
  // plan says by how much (16 B/param of 69e9 parameters over 8 GPUs is 138 GB alone).
  Result eight = Stepsim("plan llama2-70b --gpu A100-SXM4-80GB --max-gpus 8");
  CHECK(eight.status == 0);
  CHECK(absl::StrContains(eight.out, "nothing fits up to 8 GPUs"));
  CHECK(absl::StrContains(eight.out, "closest TP/PP layout: 8 x A100-SXM4-80GB megatron tp8"));
  CHECK(Stepsim("plan llama2-70b --gpu V100-SXM2-32GB").status == 2);  // no node type
  // A deadline picks from the Pareto set, and says when nothing meets it; a batch in tokens
  // that is no multiple of a node's GPUs (1,000,000 = 244 sequences) still plans.
  Result d = Stepsim(
      "plan llama2-70b --gpu H100-SXM5-80GB --max-gpus 64 --tokens 2T --batch-tokens 1000000 "
      "--days 100000");
  CHECK(d.status == 0);
  CHECK(absl::StrContains(d.out, "Choice (the smallest cluster that trains within 100000 days): "));
  Result none = Stepsim(
      "plan llama2-70b --gpu H100-SXM5-80GB --max-gpus 64 --tokens 2T --batch-tokens 524288 "
      "--days 1");
  CHECK(absl::StrContains(none.out, "none of the Pareto set meets it"));
  CHECK(Stepsim("plan llama2-70b --days -3").status == 2);
  CHECK(Stepsim("plan llama2-70b --budget lots").status == 2);
}

TEST_CASE("plan takes a scenario, --set, --search, --gpus and --headroom", "[cli]") {
  // JSON into a file: the progress line goes to the terminal's stderr, which Stepsim joins to
  // stdout.
  const std::string dir = "/tmp/stepsim-cli-plan-scenario";
  std::filesystem::create_directories(dir);
  auto plan_json = [&](const std::string& args, const std::string& name) {
    const std::string path = absl::StrCat(dir, "/", name, ".json");
    Result r = Stepsim(absl::StrCat(args, " --json ", path));
    INFO(r.out);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(Slurp(path));
  };
  // A scenario with fp8 over it, at exactly 1,536 GPUs: the choice is there.
  auto j = plan_json(
      "plan scenarios/default.yaml --set training.precision=fp8 --gpus 1536 --tokens 1T", "a");
  CHECK(j["model"] == "llama2-70b");  // the scenario's model and GPU
  REQUIRE(j["choice"].is_object());
  CHECK(j["choice"]["gpus"] == 1536);
  for (const auto& f : j["fits"]) CHECK(f["gpus"] == 1536);
  CHECK(j["types"].size() == 1);
  CHECK(j["types"][0]["gpu"] == "H100-SXM5-80GB");
  // --set of a key the search varies fixes it.
  auto t = plan_json("plan scenarios/default.yaml --set parallel.tp=2 --gpus 64", "tp");
  REQUIRE_FALSE(t["fits"].empty());
  for (const auto& f : t["fits"]) CHECK(f["config"]["tp"] == 2);
  // --search: one plan per value, every fit and type row labelled.
  auto v =
      plan_json("plan scenarios/default.yaml --search training.precision=bf16,fp8 --gpus 64", "s");
  REQUIRE(v["types"].size() == 2);
  CHECK(v["types"][0]["variant"] == "training.precision=bf16");
  CHECK(v["types"][1]["variant"] == "training.precision=fp8");
  // --headroom 10%: no fit's reserved peak passes 90 % of the usable memory (79.2 GiB).
  auto hj = plan_json("plan llama2-70b --gpu H100-SXM5-80GB --gpus 32 --headroom 10%", "h");
  CHECK(hj["headroom"] == "10%");
  const auto& m = hj["min_gpus"]["H100-SXM5-80GB"];
  CHECK(m["peak_bytes"].get<double>() <= 0.9 * 79.2 * 1073741824.0);
  // Three GPU types, one without a price: all three have rows; that one says so.
  auto tj = plan_json("plan llama3-8b --gpu H100-SXM5-80GB,H200-SXM-141GB,B200-SXM-180GB --gpus 64",
                      "three");
  REQUIRE(tj["types"].size() == 3);
  CHECK(tj["types"][2]["gpu"] == "B200-SXM-180GB");
  CHECK(tj["types"][2]["priced"] == false);
  CHECK(tj["types"][2]["best"].is_object());
  CHECK(tj["types"][2]["cost"].is_null());
  Result text =
      Stepsim("plan llama3-8b --gpu H100-SXM5-80GB,B200-SXM-180GB,MI300X-192GB --gpus 64");
  CHECK(absl::StrContains(text.out, "no price"));
  CHECK(absl::StrContains(text.out, "DATASHEET ONLY"));  // MI300X's time rests on datasheets
  // Errors: a count that is no whole number of nodes; a key the plan sets itself.
  Result odd = Stepsim("plan scenarios/default.yaml --gpus 100");
  CHECK(odd.status == 2);
  CHECK(absl::StrContains(odd.out, "nearest: 96 or 104"));
  Result own = Stepsim("plan scenarios/default.yaml --set cluster.nodes=4");
  CHECK(own.status == 2);
  CHECK(absl::StrContains(own.out, "use --gpus N"));
}

TEST_CASE("the plan page draws the deadline, the choice and one series per GPU type", "[cli]") {
  const std::string dir = "/tmp/stepsim-cli-plan-page";
  std::filesystem::create_directories(dir);
  const std::string page = dir + "/plan.html";
  // H100 priced, B200 not: both are series of the count chart, only H100 of the cost chart.
  Result r = Stepsim(
      "plan llama3-8b --gpu H100-SXM5-80GB,B200-SXM-180GB --tokens 1T --days 10 --max-gpus 256 "
      "--html " +
      page);
  REQUIRE(r.status == 0);
  std::string dom = RenderedDom(page);
  if (dom.empty()) {
    WARN("chromium not installed (tools/install-deps.sh --test installs it): page not rendered");
    dom = Slurp(page);
  }
  for (const char* id : {"pareto-chart", "count-chart", "types-table", "choice", "unpriced"}) {
    INFO(id);
    CHECK(absl::StrContains(dom, absl::StrCat("id=\"", id, "\"")));
  }
  // The deadline as a line in each chart, the chosen point ringed in each.
  CHECK(absl::StrContains(dom, "id=\"pareto-chart-limit\""));
  CHECK(absl::StrContains(dom, "id=\"count-chart-limit\""));
  CHECK(absl::StrContains(dom, "deadline: 10 days"));
  CHECK(absl::StrContains(dom, "id=\"pareto-chart-mark\""));
  CHECK(absl::StrContains(dom, "id=\"count-chart-mark\""));
  // One series per GPU type in the count chart's legend, and the counts beside the points.
  const size_t legend = dom.find("<ul class=\"legend\">", dom.find("id=\"count-chart\""));
  REQUIRE(legend != std::string::npos);
  const std::string items = dom.substr(legend, dom.find("</ul>", legend) - legend);
  CHECK(absl::StrContains(items, "H100-SXM5-80GB"));
  CHECK(absl::StrContains(items, "B200-SXM-180GB"));
  CHECK(absl::StrContains(dom, "class=\"point-label\">128<"));
  // Real spacing: the cost axis's ticks are round money amounts, not one label per point.
  CHECK(absl::StrContains(dom, ">$70k<"));
  CHECK(absl::StrContains(dom, "Without a price, so not on the cost chart: B200-SXM-180GB"));
}

TEST_CASE("run reports the whole run: Llama 3 405B as Meta trained it", "[cli]") {
  const std::string path = "/tmp/stepsim-cli-whole-run.json";
  Result r = Stepsim("run scenarios/llama3-405b-8k.yaml --json " + path);
  REQUIRE(r.status == 0);
  const auto run = nlohmann::json::parse(Slurp(path))["run"];
  // Meta (Dubey et al. 2024): 466 interruptions in a 54-day snapshot, > 90 % effective
  // training time; the rates are theirs, so the count is exact, the ETTR a model's.
  CHECK(run["interruptions_per_day"].get<double>() * 54 == Approx(466));
  CHECK(run["ettr"].get<double>() > 0.90);
  CHECK(run["ettr"].get<double>() < 0.95);
  CHECK(run["ettr_monte_carlo"]["mean"].get<double>() ==
        Approx(run["ettr"].get<double>()).margin(0.01));
  CHECK(run["tokens"].get<double>() == 15.6e12);
  for (const char* k :
       {"checkpoint_s", "effective_days", "energy_mwh", "tokens_per_joule", "cost_usd"}) {
    INFO(k);
    CHECK(run[k].get<double>() > 0);
  }
  CHECK(run["effective_days"].get<double>() > run["productive_days"].get<double>());
  Result text = Stepsim("run scenarios/llama3-405b-8k.yaml");
  CHECK(absl::StrContains(text.out, "Whole run: 15.60 T tokens"));
  CHECK(absl::StrContains(text.out, "(Young/Daly)"));
}

TEST_CASE("import model writes a model file the ledger and run read", "[cli]") {
  const std::string out = "/tmp/stepsim-cli-import/qwen2.5-7b.yaml";
  std::filesystem::create_directories("/tmp/stepsim-cli-import");
  std::filesystem::remove(out);
  Result r = Stepsim("import model tests/data/hf/qwen2.5-7b.json --name qwen2.5-7b --out " + out);
  REQUIRE(r.status == 0);
  CHECK(absl::StrContains(r.out, "7.62 B parameters"));
  Result ledger = Stepsim("ledger " + out + " --json -");
  REQUIRE(ledger.status == 0);
  // Qwen2.5-7B's 7,615,616,512 parameters less its q/k/v biases, which the source lists as not
  // modelled: 28 layers x (3,584 + 2 x 512).
  CHECK(nlohmann::json::parse(ledger.out)["params"] == 7615616512 - 28 * (3584 + 2 * 512));
  Result run = Stepsim("run scenarios/default.yaml --set model=" + out);
  CHECK(run.status == 0);
  // A config that is not JSON: exit 2, the file, line and column named, nothing written.
  std::filesystem::remove("/tmp/stepsim-cli-import/bad.yaml");
  { std::ofstream("/tmp/stepsim-cli-import/bad.json") << "{\"model_type\": \"llama\",\n"; }
  Result bad = Stepsim(
      "import model /tmp/stepsim-cli-import/bad.json --out /tmp/stepsim-cli-import/bad.yaml");
  CHECK(bad.status == 2);
  CHECK(absl::StrContains(bad.out, "bad.json:2:1: not JSON"));
  CHECK_FALSE(std::filesystem::exists("/tmp/stepsim-cli-import/bad.yaml"));
  CHECK(Stepsim("import modle x.json").status == 2);
}

TEST_CASE("import job reads torchtitan configs and NeMo recipes into scenarios run reads",
          "[cli]") {
  const std::string dir = "/tmp/stepsim-cli-import-job";
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir + "/titan.yaml");
  Result titan = Stepsim(
      "import job tests/data/jobs/torchtitan-llama3-8b-h100-202412.toml --node "
      "grand-teton-h100-96gb --gpus 8 --out " +
      dir + "/titan.yaml");
  REQUIRE(titan.status == 0);
  CHECK(absl::StrContains(titan.out, "every flag that prices a step mapped"));
  CHECK(Stepsim("run " + dir + "/titan.yaml").status == 0);
  Result nemo = Stepsim(
      "import job tests/data/jobs/nemotron4-340b-synth.yaml --node dgx-h100 --vocab 256000 "
      "--override trainer.num_nodes=16 --override model.global_batch_size=32 --out " +
      dir + "/nemo.yaml");
  REQUIRE(nemo.status == 0);
  CHECK(Stepsim("run " + dir + "/nemo.yaml").status == 0);
  // Malformed input: exit 2, the place named, nothing written.
  std::filesystem::remove(dir + "/bad.yaml");
  { std::ofstream(dir + "/bad.toml") << "[model]\nname = \"llama3\"\nflavor = 8B\n"; }
  Result bad = Stepsim("import job " + dir + "/bad.toml --node dgx-h100 --gpus 8 --out " + dir +
                       "/bad.yaml");
  CHECK(bad.status == 2);
  CHECK(absl::StrContains(bad.out, "bad.toml:3:"));
  CHECK_FALSE(std::filesystem::exists(dir + "/bad.yaml"));
  // A recipe's key that Hydra would refuse to override without +.
  Result hydra = Stepsim(
      "import job tests/data/jobs/nemotron4-340b-synth.yaml --node dgx-h100 --vocab 256000 "
      "--override model.fp8_params=True");
  CHECK(hydra.status == 2);
  CHECK(absl::StrContains(hydra.out, "+model.fp8_params"));
}

TEST_CASE("compare's page charts what each ZeRO stage sends, as a multiple of DDP's", "[cli]") {
  const std::string page = "/tmp/stepsim-cli-pages/compare-comm.html";
  std::filesystem::create_directories("/tmp/stepsim-cli-pages");
  // The default scenario: 70B on 32 GPUs, 32 micro-batches per step.
  Result c = Stepsim("compare scenarios/default.yaml --html " + page);
  REQUIRE(c.status == 0);
  const std::string html = Slurp(page);
  CHECK(absl::StrContains(html, "id=\"comm-chart\""));
  // Per step over n ranks and P parameters of 2 bytes: DDP's ring all-reduce sends
  // 2 (n-1)/n 2P; ZeRO-1 one reduce-scatter and one all-gather, the same; ZeRO-2 a
  // reduce-scatter per micro-batch and one all-gather, (m + 1)/2 times DDP: 16.5 at m = 32.
  CHECK(absl::StrContains(html, "ZeRO-1 deepspeed: 1.00x DDP"));
  CHECK(absl::StrContains(html, "ZeRO-2 deepspeed: 16.50x DDP"));
  CHECK(absl::StrContains(html, "With 32 micro-batches per step, ZeRO-2 and ZeRO-3 send"));
  // Only ZeRO-3 fits (70B on 32 x 80 GB): the other three stages' points are hollow in the peak
  // and step charts (6), and in the communication chart per kind they send (ZeRO-0 all-reduce,
  // ZeRO-1 and ZeRO-2 reduce-scatter and all-gather: 5); each chart's legend shows one (3).
  size_t hollow = 0;
  for (size_t at = html.find("point apart"); at != std::string::npos;
       at = html.find("point apart", at + 1)) {
    ++hollow;
  }
  CHECK(hollow == 6 + 5 + 3);
  CHECK(absl::StrContains(html, "hollow: does not fit"));
}

TEST_CASE("compare --finetune puts the methods side by side, plan takes adapters",
          "[cli][finetune]") {
  // The seed's questions: Llama-2-70B on 8 x A100; full fine-tuning does not fit, LoRA and
  // QLoRA do, the offloaded optimizer fits the GPUs and needs more host memory than a DGX A100
  // 40GB has (1 TiB).
  Result c = Stepsim(
      "compare scenarios/llama2-70b-finetune.yaml --finetune full,lora,qlora,offload --markdown");
  CHECK(c.status == 0);
  CHECK(absl::StrContains(c.out, "| full | ZeRO-3 | no |"));
  CHECK(absl::StrContains(c.out, "| lora | ZeRO-3 | yes |"));
  CHECK(absl::StrContains(c.out, "| qlora | ZeRO-3 | yes |"));
  CHECK(absl::StrContains(c.out, "| full, optimizer offloaded | ZeRO-3 | yes |"));
  Result c40 = Stepsim(
      "compare scenarios/llama2-70b-finetune.yaml --finetune offload --markdown --set "
      "cluster.node=dgx-a100-40gb");
  CHECK(c40.status == 0);
  CHECK(absl::StrContains(c40.out, "| full, optimizer offloaded | ZeRO-3 | no (host) |"));
  CHECK(Stepsim("compare scenarios/llama2-70b-finetune.yaml --finetune dora").status == 2);
  Result p = Stepsim(
      "plan gpt2-xl --gpu A100-SXM4-40GB --max-gpus 8 --tokens 10M --seq-len 1024 --finetune "
      "qlora --offload activations --batch-tokens 65536");
  CHECK(p.status == 0);
  CHECK(absl::StrContains(p.out, "host per node"));
  CHECK(Stepsim("plan llama2-7b --gpu A100-SXM4-40GB --offload gpu").status == 2);
}

TEST_CASE("plan shards merge into the whole plan", "[cli]") {
  const std::string dir = "/tmp/stepsim-cli-plan";
  std::filesystem::create_directories(dir);
  const std::string plan =
      "plan llama2-70b --gpu A100-SXM4-80GB,H100-SXM5-80GB --tokens 2T --max-gpus 64 "
      "--batch-tokens 524288 --count-gap 0 --json ";  // a shard searches its own sizes only
  REQUIRE(Stepsim(plan + dir + "/full.json").status == 0);
  for (int k = 1; k <= 3; ++k) {
    REQUIRE(
        Stepsim(plan + dir + "/p" + std::to_string(k) + ".json --shard " + std::to_string(k) + "/3")
            .status == 0);
  }
  REQUIRE(Stepsim("merge " + dir + "/p2.json " + dir + "/p3.json " + dir + "/p1.json --json " +
                  dir + "/merged.json")
              .status == 0);
  auto full = nlohmann::json::parse(Slurp(dir + "/full.json"));
  auto merged = nlohmann::json::parse(Slurp(dir + "/merged.json"));
  CHECK(full["pareto"] == merged["pareto"]);
  CHECK(full["min_gpus"] == merged["min_gpus"]);
  CHECK(full["rejected"] == merged["rejected"]);
  CHECK(full["considered"] == merged["considered"]);
  CHECK(Stepsim("merge " + dir + "/p1.json " + dir + "/p3.json").status == 2);  // a gap
}

TEST_CASE("validate reports cases, MAPE and skipped cases", "[cli]") {
  Result r = Stepsim("validate --json -");
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["cases"].size() > 200);
  CHECK(j["mape"].contains("step_s"));
  CHECK(j["skipped"].size() > 0);
  Result t = Stepsim("validate scenarios/validation/deepspeed-estimator.yaml");
  CHECK(t.status == 0);
  CHECK(absl::StrContains(t.out, "Mean absolute percentage error"));
  CHECK(Stepsim("validate tests/bad/cases-unknown-metric.yaml").status == 2);
}

TEST_CASE("calibrate writes a file that run and validate read back with --calibration", "[cli]") {
  const std::string out =
      (std::filesystem::temp_directory_path() / "stepsim-cli-calibration.yaml").string();
  std::filesystem::remove(out);
  // torchtitan.yaml mixes A100 and H100 96GB cases: refused without --skip-other-gpus, nothing
  // written.
  Result mixed = Stepsim(
      "calibrate scenarios/validation/torchtitan.yaml --gpu A100-SXM4-80GB "
      "--params gemm_efficiency --out " +
      out);
  CHECK(mixed.status == 2);
  CHECK(absl::StrContains(mixed.out, "runs on H100-SXM5-96GB-HBM2e, not A100-SXM4-80GB"));
  CHECK_FALSE(std::filesystem::exists(out));
  Result fit = Stepsim(
      "calibrate scenarios/validation/torchtitan.yaml --gpu a100-sxm4-80gb "
      "--skip-other-gpus --params gemm_efficiency --out " +
      out + " --json -");
  REQUIRE(fit.status == 0);
  auto j = nlohmann::json::parse(fit.out);
  CHECK(j["gpu"] == "A100-SXM4-80GB");
  CHECK(j["cases"] == 8);
  CHECK(j["mape"].get<double>() <= j["start_mape"].get<double>());
  CHECK(j["params"]["gemm_efficiency"]["moved"] == true);
  CHECK(j["params"]["attention_efficiency"]["moved"] == false);
  REQUIRE(std::filesystem::exists(out));
  Result run = Stepsim(
      "run scenarios/default.yaml --set cluster.node=dgx-a100-80gb "
      "--calibration " +
      out + " --json -");
  CHECK(run.status == 0);
  Result val =
      Stepsim("validate scenarios/validation/torchtitan.yaml --calibration " + out + " --json -");
  REQUIRE(val.status == 0);
  CHECK(absl::StrContains(val.out, "\"mape\""));
  std::filesystem::remove(out);
  // A calibration file that is not one: exit 2, located.
  Result bad = Stepsim("run scenarios/default.yaml --calibration tests/bad/scenario-scalar.yaml");
  CHECK(bad.status == 2);
  CHECK(absl::StrContains(bad.out, "scenario-scalar.yaml"));
}

TEST_CASE("calibrate --trace fits to a profiled step and refuses a malformed trace", "[cli]") {
  const std::string dir = "/tmp/stepsim-cli-trace";
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir + "/fit.yaml");
  // One step of the default scenario (Llama-2-70B, ZeRO-3 on 32 H100s) as a profiler would
  // record it on GPU 0: 100 s of GEMMs, 10 s of attention, 5 s of memory-bound kernels, and an
  // NCCL kernel the fit leaves out.
  {
    std::ofstream(dir + "/step.json") << R"({"traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 0, "dur": 1},
{"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "ts": 0, "dur": 1e8, "args": {"device": 0}},
{"ph": "X", "cat": "kernel", "name": "void flash_fwd_kernel<>", "ts": 0, "dur": 1e7, "args": {"device": 0}},
{"ph": "X", "cat": "kernel", "name": "void at::native::elementwise_kernel<>", "ts": 0, "dur": 5e6, "args": {"device": 0}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "ts": 0, "dur": 1e6, "args": {"device": 0}}
]})";
  }
  Result fit = Stepsim("calibrate scenarios/default.yaml --trace " + dir + "/step.json --out " +
                       dir + "/fit.yaml");
  REQUIRE(fit.status == 0);
  CHECK(absl::StrContains(fit.out, "3 kernels over 1 step (1 NCCL kernels left out)"));
  CHECK(absl::StrContains(Slurp(dir + "/fit.yaml"), "kernel times of a profiled step"));
  // The fitted file prices the step: run reads it back.
  CHECK(Stepsim("run scenarios/default.yaml --calibration " + dir + "/fit.yaml").status == 0);
  // Malformed JSON: exit 2 at its line, nothing written.
  std::filesystem::remove(dir + "/bad-fit.yaml");
  { std::ofstream(dir + "/bad.json") << "{\"traceEvents\": [\n  {\"ph\": \"X\",,}]}"; }
  Result bad = Stepsim("calibrate scenarios/default.yaml --trace " + dir + "/bad.json --out " +
                       dir + "/bad-fit.yaml");
  CHECK(bad.status == 2);
  CHECK(absl::StrContains(bad.out, "bad.json:2:"));
  CHECK_FALSE(std::filesystem::exists(dir + "/bad-fit.yaml"));
}

TEST_CASE("collective prints nccl-tests rows with a latency floor and refuses bad input", "[cli]") {
  Result r = Stepsim("collective all_reduce --node dgx-h100 --sizes 8..1G:x8 --json -");
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["rows"].size() == 10);  // 8, 64, ..., 2^30
  CHECK(j["gpus"] == 8);
  double last_bus = 0;
  for (const auto& row : j["rows"]) {
    const double bytes = row["bytes"].get<double>(), t = row["time_s"].get<double>();
    // nccl-tests' conventions: algbw = size / time, all-reduce busbw = algbw x 2(n-1)/n.
    CHECK(row["algbw_bytes_per_s"].get<double>() == Approx(bytes / t));
    CHECK(row["busbw_bytes_per_s"].get<double>() == Approx(bytes / t * 2 * 7 / 8));
    CHECK(row["busbw_bytes_per_s"].get<double>() >= last_bus);  // rises with size
    last_bus = row["busbw_bytes_per_s"].get<double>();
  }
  Result gather = Stepsim(
      "collective all_gather --cluster topologies/dgx-h100-superpod.yaml "
      "--gpus 16 --sizes 1M,64M --algo ring");
  CHECK(gather.status == 0);
  CHECK(absl::StrContains(gather.out, "all_gather over 16 x H100-SXM5-80GB (2 nodes"));
  // Each row says what NCCL ran and its latency floor; all-to-all is point-to-point.
  for (const auto& row : j["rows"]) {
    CHECK(row["latency_s"].get<double>() > 0);
    CHECK(row["latency_s"].get<double>() < row["time_s"].get<double>());
    const std::string proto = row["protocol"];
    CHECK((proto == "LL" || proto == "LL128" || proto == "Simple"));
  }
  Result a2a = Stepsim("collective all_to_all --node dgx-h100 --nodes 2 --sizes 64M --json -");
  REQUIRE(a2a.status == 0);
  auto ja = nlohmann::json::parse(a2a.out);
  CHECK(ja["rows"][0]["algorithm"] == "p2p");
  CHECK(ja["rows"][0]["busbw_bytes_per_s"].get<double>() ==
        Approx(ja["rows"][0]["algbw_bytes_per_s"].get<double>() * 15 / 16));
  for (const char* bad :
       {"collective all_reduc --node dgx-h100", "collective all_reduce --node dgx-h10",
        "collective all_reduce --node dgx-h100 --sizes 1Q",
        "collective all_reduce --node dgx-h100 --nodes 2 --gpus 12",
        "collective all_reduce --node dgx-h100 --algo rign"}) {
    INFO(bad);
    const Result b = Stepsim(bad);
    CHECK(b.status == 2);
  }
  CHECK(absl::StrContains(Stepsim("collective all_reduc --node dgx-h100").out,
                          "did you mean 'all_reduce'"));
}

TEST_CASE("bad input exits 2 with a located message and writes nothing", "[cli]") {
  const std::string out = "/tmp/stepsim-cli-test-should-not-exist.json";
  std::filesystem::remove(out);
  Result r = Stepsim(absl::StrCat("ledger --params 7e9 --gpus 0 --json ", out));
  CHECK(r.status == 2);
  CHECK_FALSE(std::filesystem::exists(out));
  r = Stepsim(absl::StrCat("run tests/bad/scenario-typo-key.yaml --json ", out));
  CHECK_FALSE(std::filesystem::exists(out));
  CHECK(r.status == 2);
  CHECK(absl::StrContains(r.out, "tests/bad/scenario-typo-key.yaml:12:3: training.recompte"));
  CHECK_FALSE(std::filesystem::exists(out));
  CHECK(Stepsim("ledger --params seventy").status == 2);
  CHECK(Stepsim("ledger --gpus 8").status == 2);
  CHECK(Stepsim("ledger llama2-71b").status == 2);
  CHECK(Stepsim("ledgr").status == 2);
  Result flag = Stepsim("ledger --param 7e9");
  CHECK(flag.status == 2);
  CHECK(absl::StrContains(flag.out, "unknown flag --param (did you mean 'params'?)"));
  CHECK(Stepsim("run scenarios/default.yaml --set parallel.zero=9").status == 2);
}

}  // namespace

// Issue 12's reproducers, each through the command as a user runs it: exit 2, the file named,
// in bounded time.
TEST_CASE("inputs that used to abort exit 2 and name the file", "[cli][reliability]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("stepsim-cli-", ::getpid());
  std::filesystem::create_directories(dir);
  auto file = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  auto expect2 = [&](const std::string& args, const std::string& named) {
    INFO(args);
    const Result r = Stepsim(args);
    CHECK(r.status == 2);
    CHECK(absl::StrContains(r.out, named));
  };
  // 1. a scalar document, for every file kind a command reads
  const std::string scalar = file("scalar.yaml", "X");
  expect2("run " + scalar, "scalar.yaml:1:1: expected a mapping");
  expect2("ledger " + scalar, "scalar.yaml:1:1: expected a mapping");
  expect2("validate " + scalar, "scalar.yaml:1:1: expected a mapping");
  expect2("topo " + scalar, "scalar.yaml:1:1: expected a mapping");
  expect2("run scenarios/default.yaml --set cluster.fabric=" + scalar, "scalar.yaml:1:1");
  // 2. damaged plan and sweep shards
  expect2("merge " + file("a.json", R"({"schema_version": 1, "shard": "oops", "pareto": []})"),
          "a.json: model: missing");
  expect2("merge " + file("b.json", R"({"shard": {"begin": 0, "end": 1, "total": 1},
                                        "vary": [], "results": [null, 1]})"),
          "b.json: results: expected 1 configurations");
  // 3. a symlink loop and a name longer than a file name may be
  std::filesystem::create_symlink("loop.yaml", dir / "loop.yaml");
  expect2("run " + (dir / "loop.yaml").string(), "loop.yaml: cannot open file: Too many levels");
  expect2("run scenarios/default.yaml --set model=" + std::string(300, 'x'), "unknown model");
  // 4. a token count typed as sequences, beyond any step (a 4,194,304-sequence batch is folded
  // and answered now; unfolded it is refused before the program is built)
  expect2("run scenarios/default.yaml --set training.global_batch=100000000000",
          "global_batch counts sequences, not tokens");
  expect2("run scenarios/default.yaml --set training.global_batch=4194304 --no-fold",
          "to lower one by one, above the limit of 500000");
  // 6. a nested set: mapping in a validation case is read as dotted keys
  const std::string cases = file(
      "case.yaml", absl::StrCat("schema_version: 1\ncases:\n  - id: a\n    source: s\n",
                                "    measured: {step_s: 1}\n",
                                "    conventions: {flops: stepsim, memory: allocated}\n",
                                "    scenario: {base: ", STEPSIM_SOURCE_DIR,
                                "/tests/golden/zero3.yaml, set: {training: {seq_len: 512}}}\n"));
  CHECK(Stepsim("validate " + cases).status == 0);
  // 7. devices and folders as inputs, and outputs that cannot be written
  expect2("run scenarios/default.yaml --set model=/dev/zero", "/dev/zero: not a regular file");
  expect2("run " + dir.string(), "is a directory");
  expect2("run " + file("empty.yaml", "# nothing\n"), "empty.yaml: empty");
  expect2("run tests/golden/zero3.yaml --json /dev/full", "/dev/full: write failed");
  expect2("sweep tests/golden/zero3.yaml --vary training.seq_len=512 --csv /nonexistent/x.csv",
          "folder /nonexistent does not exist");
  // 8. many unknown keys: linear, and the list stops
  std::string keys = "schema_version: 1\n";
  for (int i = 0; i < 50000; ++i) absl::StrAppend(&keys, "k", i, ": 1\n");
  const auto t0 = std::chrono::steady_clock::now();
  expect2("run " + file("keys.yaml", keys), "more problems in");
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
  // 9. text that is not UTF-8, which the JSON writer threw on (an abort, exit 134): refused
  // where it is read — a --set or --vary value, a YAML file — and a file's name, which cannot
  // be refused, written with U+FFFD in its place
  // (printf's octal escapes: popen's shell is sh, which has no $'...')
  expect2("run tests/golden/zero3.yaml --set \"$(printf 'name=x\\377y')\" --json " +
              (dir / "n.json").string(),
          "--set name: byte 0xff after 'x' in the value is not UTF-8");
  CHECK_FALSE(std::filesystem::exists(dir / "n.json"));
  expect2("run tests/bad/scenario-not-utf8.yaml", "scenario-not-utf8.yaml:4:14: byte 0xe9");
  const Result some = Stepsim(absl::StrCat("sweep tests/golden/zero3.yaml --vary ",
                                           "\"$(printf 'training.recompute=full,\\351')\" ",
                                           "--json ", (dir / "s.json").string()));
  CHECK(some.status == 0);
  const auto sweep = nlohmann::json::parse(Slurp((dir / "s.json").string()));
  CHECK(sweep["results"][1]["error"] ==
        "--set training.recompute: byte 0xe9 after '' in the value is not UTF-8, the text "
        "encoding stepsim reads");
  const std::string latin1 = absl::StrCat(dir.string(), "/zero3-\xe9.yaml");
  std::filesystem::copy_file(STEPSIM_SOURCE_DIR "/tests/golden/zero3.yaml", latin1);
  std::filesystem::copy_file(STEPSIM_SOURCE_DIR "/tests/golden/tiny-model.yaml",
                             dir / "tiny-model.yaml");
  const Result named = Stepsim(absl::StrCat("sweep '", latin1, "' --vary training.seq_len=512 ",
                                            "--json ", (dir / "p.json").string()));
  CHECK(named.status == 0);
  CHECK(nlohmann::json::parse(Slurp((dir / "p.json").string()))["scenario"] ==
        absl::StrCat(dir.string(), "/zero3-\xef\xbf\xbd.yaml"));
  std::filesystem::remove_all(dir);
}

namespace {

// The entries of a catalog file ("  - name: X" lines), or the .yaml files of a folder.
size_t CatalogEntries(const std::string& file) {
  size_t n = 0;
  for (absl::string_view line : absl::StrSplit(Slurp(file), '\n')) {
    n += absl::StartsWith(line, "  - name: ") ? 1 : 0;
  }
  return n;
}
size_t YamlFiles(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    n += e.path().extension() == ".yaml" ? 1 : 0;
  }
  return n;
}

TEST_CASE("list shows every catalog entry, and what each GPU's calibration rests on", "[cli]") {
  const std::string src = STEPSIM_SOURCE_DIR;
  const std::vector<std::pair<std::string, size_t>> expected = {
      {"models", YamlFiles(src + "/models")},
      {"gpus", CatalogEntries(src + "/topologies/gpus.yaml")},
      {"nodes", CatalogEntries(src + "/topologies/nodes.yaml")},
      {"fabrics", YamlFiles(src + "/topologies/fabrics")},
      // The cluster files: topologies/ less its two catalogs, and topologies/systems/.
      {"systems", YamlFiles(src + "/topologies") - 2 + YamlFiles(src + "/topologies/systems")}};
  for (const auto& [catalog, count] : expected) {
    INFO(catalog);
    const Result r = Stepsim("list " + catalog + " --json -");
    REQUIRE(r.status == 0);
    const auto rows = nlohmann::json::parse(r.out)[catalog];
    CHECK(rows.size() == count);
    for (const auto& row : rows) CHECK(row.contains("name"));
    const Result text = Stepsim("list " + catalog);
    CHECK(text.status == 0);
  }
  // The catalog's calibration files say which GPU each fit was made on: a GPU that names its own
  // file was fitted to its own step times, one that names another's borrows it, one with none
  // rests on datasheets.
  const auto gpus = nlohmann::json::parse(Stepsim("list gpus --json -").out)["gpus"];
  for (const auto& g : gpus) {
    const std::string name = g["name"];
    const std::string basis = g["calibration"];
    INFO(name << ": " << basis);
    const bool own = std::filesystem::exists(src + "/topologies/calibrations/" + name + ".yaml");
    if (own) {
      CHECK(absl::StartsWith(basis, "fitted to its own measured step times"));
    } else if (g["calibrated_on"].is_null()) {
      CHECK(basis == "datasheet only, uncalibrated (first estimates)");
    } else {
      CHECK(absl::StartsWith(basis, "not fitted on this GPU: "));
    }
  }
  const Result bad = Stepsim("list gpu");
  CHECK(bad.status == 2);
  CHECK(absl::StrContains(bad.out, "unknown catalog 'gpu' (did you mean 'gpus'?)"));
}

}  // namespace

TEST_CASE("run --trials gives step percentiles, with none described the step itself", "[cli]") {
  // No cluster.variability: every percentile is the step (the JSON goes to standard output).
  const Result plain = Stepsim("run scenarios/default.yaml --trials 5 --json -");
  REQUIRE(plain.status == 0);
  auto j = nlohmann::json::parse(plain.out);
  CHECK(j["time"]["step_s_p50"] == j["time"]["step_s"]);
  CHECK(j["time"]["step_s_p99"] == j["time"]["step_s"]);
  CHECK(j["time"]["variability_slowdown"] == 0);
  CHECK(j["variability"]["trials"] == 5);
  // A spread: ZeRO-3 runs its 32 GPUs in lockstep, so the step is the slowest GPU's: the mean
  // of the largest of 32 draws of cv 3 % is about 2σ above the calibrated speed.
  const Result spread = Stepsim(
      "run scenarios/default.yaml --trials 40 --set cluster.variability.gemm_cv=0.03 "
      "--set cluster.variability.memory_cv=0.03");
  REQUIRE(spread.status == 0);
  CHECK_THAT(spread.out, Catch::Contains("Step over 40 trials (GEMM speed cv 0.03, memory-bound "
                                         "speed cv 0.03 (lognormal); seed 1)"));
  const Result text = Stepsim(
      "run scenarios/default.yaml --trials 40 --json - --set cluster.variability.gemm_cv=0.03 "
      "--set cluster.variability.memory_cv=0.03");
  REQUIRE(text.status == 0);
  auto k = nlohmann::json::parse(text.out);
  CHECK(k["time"]["variability_slowdown"].get<double>() > 0.04);
  CHECK(k["time"]["variability_slowdown"].get<double>() < 0.09);
  CHECK(k["time"]["step_s_p50"].get<double>() <= k["time"]["step_s_p90"].get<double>());
  CHECK(k["variability"]["step_s"].size() == 40);
  // The whole run is priced at the trials' mean step.
  CHECK(k["run"]["productive_days"].get<double>() ==
        Approx(j["run"]["productive_days"].get<double>() * k["time"]["step_s_mean"].get<double>() /
               j["time"]["step_s"].get<double>())
            .epsilon(1e-9));
  // The run page draws the trials' histogram, the ideal step marked, and the percentiles.
  const std::string page = "/tmp/stepsim-cli-trials.html";
  const Result html = Stepsim(absl::StrCat(
      "run scenarios/default.yaml --trials 40 --set cluster.variability.gemm_cv=0.03 --html ",
      page));
  REQUIRE(html.status == 0);
  const std::string body = Slurp(page);
  CHECK_THAT(body, Catch::Contains("<svg id=\"step-histogram\""));
  CHECK_THAT(body, Catch::Contains("<line id=\"ideal-step\""));
  CHECK_THAT(body, Catch::Contains("<table id=\"distribution-table\">"));
  CHECK_THAT(body, Catch::Contains("<h2>The step over 40 trials of the GPUs' speeds</h2>"));
  // Bad counts are refused before anything runs.
  for (const char* bad : {"0", "lots", "100001"}) {
    const Result r = Stepsim(absl::StrCat("run scenarios/default.yaml --trials ", bad));
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Catch::Contains("--trials: expected a whole number of trials from 1 to "
                                      "100000"));
  }
}

TEST_CASE("plan refuses a mixed cluster's scenario, saying what to run instead", "[cli]") {
  const Result r = Stepsim("plan tests/golden/mixed-cluster.yaml --gpus 16");
  CHECK(r.status == 2);
  CHECK_THAT(r.out, Catch::Contains("cluster.nodes lists several node types; plan searches "
                                    "clusters of one type"));
}

namespace {

TEST_CASE("run on a shared fabric reports the step on an idle one", "[cli]") {
  // The default job on 64 nodes (two leaves per rail): its DP collectives cross the spine.
  const std::string base =
      "run scenarios/default.yaml --set cluster.nodes=64 --set training.global_batch=512 --json -";
  Result idle = Stepsim(base);
  Result shared = Stepsim(base + " --set cluster.background_load=0.6");
  REQUIRE(idle.status == 0);
  REQUIRE(shared.status == 0);
  const auto i = nlohmann::json::parse(idle.out), s = nlohmann::json::parse(shared.out);
  CHECK(i["time"]["idle_fabric_step_s"].is_null());
  CHECK(s["cluster"]["background_load"] == 0.6);
  CHECK(s["time"]["idle_fabric_step_s"] == i["time"]["step_s"]);
  CHECK(s["time"]["step_s"].get<double>() > i["time"]["step_s"].get<double>());
  Result text = Stepsim(
      "run scenarios/default.yaml --set cluster.nodes=64 --set training.global_batch=512 "
      "--set cluster.background_load=0.6");
  CHECK(absl::StrContains(text.out, "holds 60 % of every switch-to-switch link"));
  CHECK(absl::StrContains(text.out, "on an idle fabric"));
  // Four nodes sit under one leaf per rail: nothing of theirs crosses a loaded link.
  Result small = Stepsim("run scenarios/default.yaml --set cluster.background_load=0.6 --json -");
  REQUIRE(small.status == 0);
  const auto j = nlohmann::json::parse(small.out);
  CHECK(j["time"]["idle_fabric_step_s"] == j["time"]["step_s"]);
}

}  // namespace
