#pragma once
// Shared pieces of the subcommands: exit statuses, error printing and output files.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/config/catalog.h"
#include "tools/stepsim/flags.h"
#include "tools/stepsim/output_files.h"

namespace stepsim_cli {

// docs/model.md "The report": 0 success (a job that does not fit is a successful answer), 2 bad
// input, 1 internal.
constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitBadInput = 2;

// Prints "stepsim CMD: message" to stderr and returns the exit status the error deserves.
int Fail(const std::string& command, const absl::Status& status);

// Whether `path` can be written: not a directory, its folder exists and is writable.
absl::Status CheckOutputPath(const std::string& path);

// A scenario path as given, or, when that does not exist and is relative, the same path under
// the data root (so `stepsim` finds scenarios/default.yaml from any folder).
std::string ResolveScenarioPath(const std::string& path);

// --calibration FILE (repeatable): a calibration file (stepsim calibrate --out) that replaces
// its GPU's catalog calibration for the command (run, sweep, compare, plan, validate).
FlagDef CalibrationFlag();
// The data root with the command's --calibration files read (located errors for bad files).
absl::StatusOr<sim::config::DataRoot> DataRootFor(const FlagSet& flags);

int LedgerCommand(const std::vector<std::string>& args);
int RunCommand(const std::vector<std::string>& args);
int SweepCommand(const std::vector<std::string>& args);
int CompareCommand(const std::vector<std::string>& args);
int MergeCommand(const std::vector<std::string>& args);
int PlanCommand(const std::vector<std::string>& args);
int ValidateCommand(const std::vector<std::string>& args);
int CalibrateCommand(const std::vector<std::string>& args);
int CollectiveCommand(const std::vector<std::string>& args);
int TopoCommand(const std::vector<std::string>& args);
int ListCommand(const std::vector<std::string>& args);
int ImportCommand(const std::vector<std::string>& args);
int MemoryDiffCommand(const std::vector<std::string>& args);

}  // namespace stepsim_cli
