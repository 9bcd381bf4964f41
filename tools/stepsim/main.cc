// stepsim: the command line. Dispatches to one subcommand; flags live only in tools/.

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/base/heap_tuning.h"
#include "sim/base/suggest.h"
#include "tools/stepsim/cli.h"

namespace {

constexpr char kDefaultScenario[] = "scenarios/default.yaml";

std::string TopHelp() {
  return absl::StrCat(
      "usage: stepsim [COMMAND] [ARGS...]\n\n"
      "stepsim replays one LLM training step layer by layer over a modeled GPU cluster and\n"
      "reports per-GPU peak memory and step time.\n\n"
      "commands:\n"
      "  run SCENARIO     replay one training step of a scenario (",
      kDefaultScenario,
      "\n                   when no command is given): fits or not, peak memory and its\n"
      "                   breakdown, step time, MFU, bytes sent per collective\n"
      "  ledger [MODEL]   the static ledger: bytes per parameter, ZeRO 0-3 per GPU, activations\n"
      "                   per layer for none/selective/full recompute\n"
      "  sweep SCENARIO   replay the product of --vary values in parallel: table, CSV, plot\n"
      "  compare SCENARIO ZeRO 0/1/2/3 (or the FSDP strategies) side by side\n"
      "  plan MODEL|SCENARIO  the smallest cluster per GPU type that fits or meets a\n"
      "                   deadline, and the Pareto set of time-to-train against cost\n"
      "  merge SHARDS...  join the JSON of `sweep --shard K/N` runs\n"
      "  validate [CASES] predictions against published measurements, per case and as MAPE\n"
      "  calibrate CASES  fit a GPU type's calibration to measured step times (--gpu, --out)\n"
      "  topo CLUSTER     the cluster graph: switches, links, bisection, collective bus "
      "bandwidth\n"
      "  collective KIND  one collective across message sizes, as nccl-tests prints it\n"
      "  list CATALOG     what models/ and topologies/ hold: models, gpus (with what each\n"
      "                   GPU's time calibration rests on), nodes, fabrics, systems\n"
      "  import model CONFIG.json  a Hugging Face config.json as a model file\n"
      "  memory-diff SNAPSHOT SCENARIO  a PyTorch memory snapshot beside the replay\n\n"
      "Each command has --help. Exit status: 0 success (a job that does not fit is an answer),\n"
      "2 bad input, 1 internal failure. Data files (models/, topologies/) are read from\n"
      "$STEPSIM_DATA_DIR, or the source tree stepsim was built from.\n");
}

}  // namespace

namespace {

int Dispatch(const std::vector<std::string>& args) {
  if (args.empty()) return stepsim_cli::RunCommand({kDefaultScenario});
  const std::string command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "-h" || command == "--help" || command == "help") {
    std::cout << TopHelp();
    return stepsim_cli::kExitOk;
  }
  if (command == "run") return stepsim_cli::RunCommand(rest);
  if (command == "ledger") return stepsim_cli::LedgerCommand(rest);
  if (command == "sweep") return stepsim_cli::SweepCommand(rest);
  if (command == "compare") return stepsim_cli::CompareCommand(rest);
  if (command == "plan") return stepsim_cli::PlanCommand(rest);
  if (command == "merge") return stepsim_cli::MergeCommand(rest);
  if (command == "validate") return stepsim_cli::ValidateCommand(rest);
  if (command == "calibrate") return stepsim_cli::CalibrateCommand(rest);
  if (command == "topo") return stepsim_cli::TopoCommand(rest);
  if (command == "collective") return stepsim_cli::CollectiveCommand(rest);
  if (command == "list") return stepsim_cli::ListCommand(rest);
  if (command == "import") return stepsim_cli::ImportCommand(rest);
  if (command == "memory-diff") return stepsim_cli::MemoryDiffCommand(rest);
  if (command.rfind("--", 0) == 0) return stepsim_cli::RunCommand(args);
  std::cerr << "stepsim: unknown command '" << command << "'"
            << sim::DidYouMean(command,
                               {"run", "ledger", "sweep", "compare", "plan", "merge", "validate",
                                "calibrate", "topo", "collective", "list", "import"})
            << "; see stepsim --help\n";
  return stepsim_cli::kExitBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  sim::KeepHeapForReplays();
  const int status = Dispatch(std::vector<std::string>(argv + 1, argv + argc));
  // Text still in standard output's buffer is written now: a full disk or a closed pipe turns
  // an exit 0 into an error, so lost text is never reported as success. (A command that failed
  // has said why; its exit status stands.)
  if (status != stepsim_cli::kExitOk) return status;
  if (absl::Status st = stepsim_cli::FlushStandardOutput(); !st.ok()) {
    std::cerr << "stepsim: " << st.message() << "\n";
    return stepsim_cli::kExitBadInput;
  }
  return status;
}
