#pragma once
// UTF-8 well-formedness (RFC 3629 §4). Every string stepsim writes into a report or JSON comes
// from text it read: a YAML file, a --set or --vary value, a path. JSON is UTF-8 text, and
// nlohmann's writer throws on a byte that is not, so input text is checked where it is read
// (a located error), and what cannot be refused, a file's name, is written with such bytes
// replaced (sim/report/json_text.h).

#include <cstddef>

#include "absl/strings/string_view.h"

namespace sim {

// The length of the longest prefix of `s` that is well-formed UTF-8 — no overlong form, no
// surrogate, nothing past U+10FFFF, no sequence cut short — s.size() when all of it is.
size_t Utf8ValidPrefix(absl::string_view s);

}  // namespace sim
