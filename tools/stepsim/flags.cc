#include "tools/stepsim/flags.h"

#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "sim/base/suggest.h"
#include "tools/stepsim/cli.h"

namespace stepsim_cli {

FlagSet::FlagSet(std::string usage, std::string summary, std::vector<FlagDef> defs)
    : usage_(std::move(usage)), summary_(std::move(summary)), defs_(std::move(defs)) {}

const FlagDef* FlagSet::Find(const std::string& name) const {
  for (const FlagDef& d : defs_) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      help_ = true;
      continue;
    }
    if (!absl::StartsWith(a, "--")) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const FlagDef* def = Find(name);
    if (def == nullptr) {
      std::vector<std::string> names;
      for (const FlagDef& d : defs_) names.push_back(d.name);
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, sim::DidYouMean(name, names), "; see --help"));
    }
    if (def->value_name.empty()) {
      if (value) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      }
      value = "true";
    } else if (!value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value (", def->value_name, ")"));
      }
      value = args[++i];
    }
    auto& slot = values_[name];
    if (!def->repeated && !slot.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " given twice"));
    }
    slot.push_back(*value);
  }
  // Output paths are checked now, before any work, so that a long sweep does not fail at its
  // end on a path it could never have written, and no output is written when another is bad.
  std::map<std::string, std::string> named;  // path (as given) -> the flag that names it
  for (const char* output : kOutputFlags) {
    auto path = Get(output);
    if (!path) continue;
    if (absl::Status st = CheckOutputPath(*path); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", output, " ", st.message()));
    }
    if (*path == "-") continue;
    std::error_code ec;
    std::string key = std::filesystem::weakly_canonical(*path, ec).string();
    if (ec) key = *path;
    if (auto [it, added] = named.emplace(key, output); !added) {
      return absl::InvalidArgumentError(absl::StrCat("--", it->second, " and --", output,
                                                     " both name ", *path, ": give each its own"));
    }
  }
  return absl::OkStatus();
}

std::optional<std::string> FlagSet::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> FlagSet::GetAll(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

namespace {

// One flag's line: the flag in a 28-column field, its help wrapped at 100 columns under itself
// (a flag name longer than the field puts the help on the next line).
void AppendFlagLine(std::string& out, const std::string& left, const std::string& help) {
  constexpr size_t kField = 28, kWidth = 100;
  const std::string indent(kField + 1, ' ');
  std::string line = left.size() < kField + 1 ? left + std::string(kField + 1 - left.size(), ' ')
                                              : left + "\n" + indent;
  size_t column = line.size() - (line.rfind('\n') == std::string::npos ? 0 : line.rfind('\n') + 1);
  bool first = true;
  for (absl::string_view word : absl::StrSplit(help, ' ', absl::SkipEmpty())) {
    if (!first && column + 1 + word.size() > kWidth) {
      absl::StrAppend(&line, "\n", indent);
      column = indent.size();
    } else if (!first) {
      line += ' ';
      ++column;
    }
    absl::StrAppend(&line, word);
    column += word.size();
    first = false;
  }
  absl::StrAppend(&out, line, "\n");
}

}  // namespace

std::string FlagSet::Help() const {
  std::string out = absl::StrCat("usage: ", usage_, "\n\n", summary_, "\n\nflags:\n");
  for (const FlagDef& d : defs_) {
    AppendFlagLine(
        out,
        absl::StrCat("  --", d.name, d.value_name.empty() ? "" : absl::StrCat(" ", d.value_name)),
        absl::StrCat(d.help, d.repeated ? " (repeatable)" : ""));
  }
  AppendFlagLine(out, "  --help", "this text");
  return out;
}

}  // namespace stepsim_cli
