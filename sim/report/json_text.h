#pragma once
// JSON as text, for every report stepsim writes. nlohmann's writer throws on a string that is
// not UTF-8 (type_error 316), which on a report's path would end the process. Input text is
// checked where it is read (sim/base/utf8.h); a file's name cannot be refused, and a byte of it
// that is not UTF-8 is written as U+FFFD.

#include <string>

namespace sim::report {

// j.dump(indent), each byte that is not UTF-8 replaced by U+FFFD; -1: on one line.
template <class Json>
std::string JsonText(const Json& j, int indent = 2) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace sim::report
