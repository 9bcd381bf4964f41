#include "sim/report/table.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace sim::report {

std::string Table::Render(int indent) const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  const std::string pad(indent, ' ');
  auto line = [&](const std::vector<std::string>& row) {
    std::string out = pad;
    for (size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      const std::string fill(width[i] - cell.size(), ' ');
      if (i > 0) out += "  ";
      out += i == 0 ? cell + fill : fill + cell;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header_);
  size_t total = 0;
  for (size_t w : width) total += w;
  out += pad + std::string(total + 2 * (width.size() - 1), '-') + "\n";
  for (const auto& r : rows_) out += line(r);
  return out;
}

std::string Table::Markdown() const {
  auto line = [&](const std::vector<std::string>& row) {
    std::string out = "|";
    for (size_t i = 0; i < header_.size(); ++i) {
      absl::StrAppend(&out, " ", absl::StrReplaceAll(i < row.size() ? row[i] : "", {{"|", "\\|"}}),
                      " |");
    }
    return out + "\n";
  };
  std::string out = line(header_) + "|";
  for (size_t i = 0; i < header_.size(); ++i) out += i == 0 ? " --- |" : " ---: |";
  out += "\n";
  for (const auto& r : rows_) out += line(r);
  return out;
}

std::string FormatGB(double bytes, int decimals) {
  return absl::StrFormat("%.*f GB", decimals, bytes / 1e9);
}

std::string FormatGiB(double bytes, int decimals) {
  return absl::StrFormat("%.*f GiB", decimals, bytes / 1073741824.0);
}

std::string FormatSeconds(double s) {
  if (s >= 1) return absl::StrFormat("%.3f s", s);
  if (s >= 1e-3) return absl::StrFormat("%.2f ms", s * 1e3);
  return absl::StrFormat("%.1f us", s * 1e6);
}

std::string FormatCount(double n) {
  if (n >= 1e12) return absl::StrFormat("%.2f T", n / 1e12);
  if (n >= 1e9) return absl::StrFormat("%.2f B", n / 1e9);
  if (n >= 1e6) return absl::StrFormat("%.2f M", n / 1e6);
  return absl::StrFormat("%.0f", n);
}

}  // namespace sim::report
