// Fuzz target: the writers that put text from inputs into other languages (docs/security.md).
// The input is split at NUL bytes into labels (a --vary key and its values, a name); each writer
// must keep every one of them as data of its language, whatever bytes it holds:
//   - the sweep plot's gnuplot script: outside its single-quoted strings (where gnuplot
//     substitutes nothing) there is no backquote, double quote or '@', and every line's
//     strings are closed;
//   - the sweep CSV read back as RFC 4180 gives the labels, cell for cell (a formula prefixed
//     with ');
//   - HTML text holds none of < > " ' and no NUL; DOT and YAML strings end only at their close.
// A violation traps (a crash to libFuzzer, a failed test in the corpus replay).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "sim/base/text_escape.h"
#include "sim/report/sweep_report.h"
#include "tests/csv_rows.h"

namespace {

void Require(bool ok) {
  if (!ok) __builtin_trap();
}

// Every line of a gnuplot script: single-quoted strings closed, and outside them nothing that
// gnuplot would substitute or that would open a double-quoted string.
void CheckGnuplot(const std::string& script) {
  for (absl::string_view line : absl::StrSplit(script, '\n')) {
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted) {
        if (c == '\'') {
          if (i + 1 < line.size() && line[i + 1] == '\'') {
            ++i;
          } else {
            quoted = false;
          }
        }
        Require(static_cast<unsigned char>(c) >= 0x20);
      } else if (c == '\'') {
        quoted = true;
      } else {
        Require(c != '`' && c != '"' && c != '@');
      }
    }
    Require(!quoted);
  }
}

// A string literal opened at text[0] by `quote` ends only at the last character, with
// `escape` before every quote inside (DOT and YAML double-quoted strings).
void CheckClosed(const std::string& text, char escape) {
  Require(text.size() >= 2 && text.front() == '"' && text.back() == '"');
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    if (text[i] == escape) {
      ++i;
      continue;
    }
    Require(text[i] != '"');
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts = absl::StrSplit(input, '\0');
  if (parts.size() < 3) return 0;
  const std::vector<std::string> keys = {parts[0], parts[1]};
  std::vector<sim::report::Row> rows;
  for (size_t i = 2; i < parts.size() && rows.size() < 16; ++i) {
    sim::report::Row row;
    row.labels = {parts[i], parts[(i + 1) % parts.size()]};
    row.summary = sim::report::RunSummary{};
    rows.push_back(std::move(row));
  }
  for (const char* metric : {"peak", "step"}) {
    auto job =
        sim::report::PlotSweep(sim::report::PlotFormat::kSvg, parts[2], keys, rows, {metric});
    if (job.ok()) CheckGnuplot(job->script);
  }
  const auto csv =
      sim::testing::CsvRows(sim::report::SweepTable(keys, rows, sim::report::TableFormat::kCsv));
  Require(csv.size() == rows.size() + 1);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t k = 0; k < 2; ++k) {
      const std::string& want = rows[r].labels[k];
      const std::string& got = csv[r + 1][k];
      Require(got == want || got == "'" + want);
    }
  }
  const std::string html = sim::HtmlEscape(input);
  for (char c : {'<', '>', '"', '\'', '\0'}) Require(html.find(c) == std::string::npos);
  CheckClosed(sim::DotString(input), '\\');
  CheckClosed(sim::YamlString(input), '\\');
  return 0;
}
