#pragma once
// What `stepsim import job`'s readers share (job_import.cc, torchtitan_import.cc,
// nemo_import.cc): the scenario text they write, one `key: value  # from ORIGIN` line at a time,
// the header naming the input, and the trailer listing what was read and not mapped. Values and
// origins are escaped for YAML and for a comment line (sim/base/text_escape.h): the input's text
// never becomes structure.

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/base/text_escape.h"
#include "sim/config/job_import.h"

// In a reader returning absl::StatusOr: `var` takes what `expr` (a StatusOr) holds, or the
// reader returns its error.
#define SIM_IMPORT_TRY(var, expr) \
  auto var = (expr);              \
  if (!var.ok()) return var.status()

namespace sim::config::job_import_internal {

// The most GPUs a job may name (as `import job --gpus` allows): products of the input's degrees
// are checked against it, so that no later product of them overflows.
inline constexpr int64_t kMostGpus = int64_t{1} << 20;

// a x b x ..., or none where it leaves int64_t's range (degrees and sizes come from strangers).
inline std::optional<int64_t> CheckedProduct(std::initializer_list<int64_t> factors) {
  int64_t p = 1;
  for (const int64_t f : factors) {
    if (__builtin_mul_overflow(p, f, &p)) return std::nullopt;
  }
  return p;
}

// One `key: value  # from FLAG` line at `indent`.
class Writer {
 public:
  void Line(int indent, const std::string& key, const std::string& value,
            const std::string& from = "") {
    absl::StrAppend(&out_, std::string(indent, ' '), key, ": ", value);
    if (!from.empty()) absl::StrAppend(&out_, "  # ", CommentLine(from));
    out_ += "\n";
  }
  void Raw(const std::string& text) { out_ += text; }
  // The file's first lines: where it came from (`what`: the kind of input) and its name.
  void Header(const std::string& origin, const std::string& what, const std::string& name) {
    Raw(absl::StrCat("# Imported by `stepsim import job` from ", CommentLine(origin), " (", what,
                     ").\n# Each key's origin is in its comment; keys without one are stepsim's "
                     "defaults.\n"));
    Line(0, "schema_version", "1");
    Line(0, "name", YamlString(name));
  }
  // The file's last lines: what was read and not mapped.
  void Unmapped(const std::vector<std::string>& unmapped) {
    if (unmapped.empty()) return;
    Raw("# Not mapped (not priced by stepsim, or not known to it):\n");
    for (const std::string& u : unmapped) Raw(absl::StrCat("#   ", CommentLine(u), "\n"));
  }
  std::string& text() { return out_; }

 private:
  std::string out_;
};

// The scenario's name: the caller's, else the input file's stem.
inline std::string NameOf(const JobContext& context, const std::string& origin) {
  return context.name.empty() ? std::filesystem::path(origin).stem().string() : context.name;
}

}  // namespace sim::config::job_import_internal
