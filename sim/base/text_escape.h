#pragma once
// Text from inputs (a model's name, a --vary value, a switch's name) written into another
// language: each function returns the text as a literal of that language, so that nothing in it
// can end the literal or be read as code. Scenario, model, fabric and case files may come from
// strangers (docs/security.md); every writer that puts such text into a script, a page, a CSV
// cell or a graph description goes through one of these.

#include <string>

#include "absl/strings/string_view.h"

namespace sim {

// HTML text and attribute values (double- or single-quoted): & < > " ' as character
// references; NUL and other C0 controls but tab and newline as U+FFFD (HTML forbids them).
std::string HtmlEscape(absl::string_view text);

// A gnuplot string literal, quotes included. Single-quoted, because gnuplot substitutes
// backquoted shell commands and @macros and reads backslash escapes only inside double quotes
// (gnuplot 5.4 manual, "Substitution and Command line macros", "Quote marks"); a ' inside is
// doubled. Control characters (newline, NUL, ...) cannot stand in a gnuplot line: each becomes
// a space.
std::string GnuplotString(absl::string_view text);

// One CSV cell (RFC 4180): quoted when it holds a comma, quote, CR or LF, with quotes doubled.
// A cell that a spreadsheet would read as a formula (first character = + - @, tab or CR, OWASP
// "CSV Injection") is prefixed with ' unless it is a plain number (-0.5) or a lone "-".
std::string CsvCell(absl::string_view text);

// A Graphviz DOT string literal, quotes included: " and \ escaped, control characters as a
// space (the DOT language, "ID": a double-quoted string in which \" is the only escape).
std::string DotString(absl::string_view text);

// A YAML double-quoted scalar, quotes included (YAML 1.2 §7.3.1): \ and " escaped, control
// characters as \xNN, so that a name read back is the name written.
std::string YamlString(absl::string_view text);

// Text for one line of a comment in a YAML or shell file: control characters (a newline
// would end the comment and start content) as a space.
std::string CommentLine(absl::string_view text);

}  // namespace sim
