#pragma once
// The command line's flag parser: one FlagSet per subcommand, so each has its own --help and
// rejects the others' flags. (absl::flags is process-global and keeps only the last value of a
// repeated flag, while `--set K=V` repeats; so flags live here, in tools/, and nowhere else.)
//
// Accepted forms: --name VALUE, --name=VALUE, and bare --name for switches. A lone "-" is a
// positional argument (standard output/input). Unknown flags are InvalidArgument with the
// nearest valid name.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace stepsim_cli {

// The flags that name an output file, in every command: Parse checks each before any work
// (its folder exists and is writable, no two name one file).
inline constexpr const char* kOutputFlags[] = {"json", "csv", "trace", "timeline",
                                               "plot", "dot", "html",  "out"};

struct FlagDef {
  std::string name;        // without the leading dashes
  std::string value_name;  // "" for a switch
  std::string help;
  bool repeated = false;
};

class FlagSet {
 public:
  FlagSet(std::string usage, std::string summary, std::vector<FlagDef> defs);

  absl::Status Parse(const std::vector<std::string>& args);

  bool help_requested() const { return help_; }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  std::vector<std::string> GetAll(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  std::string Help() const;

 private:
  const FlagDef* Find(const std::string& name) const;

  std::string usage_, summary_;
  std::vector<FlagDef> defs_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

}  // namespace stepsim_cli
