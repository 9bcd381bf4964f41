#include "sim/base/text_escape.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sim {

namespace {

bool IsControl(char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }

}  // namespace

std::string HtmlEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '\t':
      case '\n':
        out += c;
        break;
      default:
        if (IsControl(c)) {
          out += "\xEF\xBF\xBD";  // U+FFFD
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string GnuplotString(absl::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "''";
    } else if (IsControl(c)) {
      out += ' ';
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

std::string CsvCell(absl::string_view text) {
  std::string cell(text);
  if (!cell.empty() && cell != "-") {
    const char c = cell[0];
    double number = 0;
    const bool formula = c == '=' || c == '+' || c == '-' || c == '@' || c == '\t' || c == '\r';
    if (formula && !absl::SimpleAtod(cell, &number)) cell = absl::StrCat("'", cell);
  }
  if (cell.find_first_of(",\"\r\n") == std::string::npos) return cell;
  std::string out = "\"";
  for (char c : cell) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

namespace {

// A double-quoted string in which \ escapes " and \ (DOT and YAML alike); each control
// character is written by `control`.
template <class Control>
std::string BackslashQuoted(absl::string_view text, Control control) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (IsControl(c)) {
      control(out, c);
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

}  // namespace

std::string DotString(absl::string_view text) {
  return BackslashQuoted(text, [](std::string& out, char) { out += ' '; });
}

std::string YamlString(absl::string_view text) {
  return BackslashQuoted(text, [](std::string& out, char c) {
    absl::StrAppend(&out, "\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
  });
}

std::string CommentLine(absl::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (IsControl(c)) c = ' ';
  }
  return out;
}

}  // namespace sim
