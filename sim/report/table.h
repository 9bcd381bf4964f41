#pragma once
// Aligned plain-text tables for people: the first column left-aligned, the rest right-aligned
// (numbers), columns separated by two spaces. Rows are strings already formatted with units.

#include <string>
#include <vector>

#include "sim/base/units.h"

namespace sim::report {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // Renders with `indent` spaces before each line; a rule under the header.
  std::string Render(int indent = 2) const;
  // As a Markdown table: the first column left-aligned, the rest right-aligned; a `|` in a cell
  // is escaped, so that text from a catalog file cannot open a column.
  std::string Markdown() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// "1120.00 GB" style helpers with fixed decimals.
std::string FormatGB(double bytes, int decimals = 2);
std::string FormatGiB(double bytes, int decimals = 2);
inline std::string FormatGB(Bytes b, int decimals = 2) {
  return FormatGB(static_cast<double>(b.count()), decimals);
}
inline std::string FormatGiB(Bytes b, int decimals = 2) {
  return FormatGiB(static_cast<double>(b.count()), decimals);
}
std::string FormatSeconds(double s);
std::string FormatCount(double n);  // 68.98e9 -> "68.98 B", 1.2e6 -> "1.20 M"

}  // namespace sim::report
