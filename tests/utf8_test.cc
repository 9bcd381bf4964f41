// UTF-8 well-formedness (sim/base/utf8.h), against RFC 3629 §4's table and the Unicode
// standard's examples of ill-formed sequences (Table 3-8: each sequence cut where it stops
// being a prefix of a well-formed one).
#include "sim/base/utf8.h"

#include <catch2/catch.hpp>
#include <string>

namespace sim {
namespace {

TEST_CASE("well-formed UTF-8 is valid to its end", "[utf8]") {
  for (const std::string& s : {
           std::string(""),
           std::string("llama2-70b: 4,096 tokens"),
           std::string("\xC2\x80"),          // U+0080, the least two-byte form
           std::string("\xDF\xBF"),          // U+07FF
           std::string("\xE0\xA0\x80"),      // U+0800, the least three-byte form
           std::string("\xED\x9F\xBF"),      // U+D7FF, below the surrogates
           std::string("\xEE\x80\x80"),      // U+E000, above them
           std::string("\xEF\xBF\xBD"),      // U+FFFD
           std::string("\xF0\x90\x80\x80"),  // U+10000, the least four-byte form
           std::string("\xF4\x8F\xBF\xBF"),  // U+10FFFF, the last code point
           std::string("x \xC3\xA9t\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x9A\x80"),
       }) {
    INFO(s);
    CHECK(Utf8ValidPrefix(s) == s.size());
  }
}

TEST_CASE("an ill-formed sequence ends the valid prefix where it starts", "[utf8]") {
  const std::pair<std::string, size_t> cases[] = {
      {"ab\xFF", 2},            // never a UTF-8 byte
      {"ab\x80", 2},            // a continuation byte without a lead
      {"\xC0\xAF", 0},          // overlong '/'
      {"\xC1\xBF", 0},          // overlong
      {"\xE0\x80\xAF", 0},      // overlong three-byte form
      {"\xED\xA0\x80", 0},      // U+D800, a surrogate
      {"\xF0\x80\x80\xAF", 0},  // overlong four-byte form
      {"\xF4\x90\x80\x80", 0},  // past U+10FFFF
      {"\xF5\x80\x80\x80", 0},  // lead past U+10FFFF
      {"ok\xE2\x82", 2},        // cut short at the end
      {"ok\xE2\x82x", 2},       // cut short before ASCII
      {"\xC3\xA9\xC3", 2},      // a valid character, then a lead alone
  };
  for (const auto& [s, prefix] : cases) {
    INFO(s);
    CHECK(Utf8ValidPrefix(s) == prefix);
  }
}

}  // namespace
}  // namespace sim
