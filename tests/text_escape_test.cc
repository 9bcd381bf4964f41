// Text from inputs written into other languages (sim/base/text_escape.h): each function's output
// checked against the language's own rules, for the characters an attacker would use.
#include "sim/base/text_escape.h"

#include <catch2/catch.hpp>
#include <string>

namespace sim {
namespace {

// A hostile text: shell, gnuplot, HTML, CSV and DOT metacharacters, a newline and a NUL.
const std::string kHostile =
    std::string("x`touch r`\" ; system \"touch r\" ; '<script>a</script>") + "=cmd|x\\\n" +
    std::string(1, '\0') + "@m";

TEST_CASE("a gnuplot string is single-quoted, quotes doubled, no control character", "[escape]") {
  const std::string q = GnuplotString(kHostile);
  REQUIRE(q.front() == '\'');
  REQUIRE(q.back() == '\'');
  const std::string inner = q.substr(1, q.size() - 2);
  // Inside, a ' only ever appears doubled, so the literal ends at the last character alone.
  for (size_t i = 0; i < inner.size(); ++i) {
    if (inner[i] == '\'') {
      REQUIRE(i + 1 < inner.size());
      CHECK(inner[i + 1] == '\'');
      ++i;
    }
  }
  for (char c : inner) CHECK(static_cast<unsigned char>(c) >= 0x20);
  CHECK(GnuplotString("it's") == "'it''s'");
  CHECK(GnuplotString("a\nb") == "'a b'");
}

TEST_CASE("HTML text escapes the five metacharacters and replaces controls", "[escape]") {
  const std::string h = HtmlEscape(kHostile);
  for (char c : {'<', '>', '"', '\'', '\0'}) CHECK(h.find(c) == std::string::npos);
  CHECK(HtmlEscape("<a href='x'>&") == "&lt;a href=&#39;x&#39;&gt;&amp;");
  CHECK(HtmlEscape(std::string(1, '\0')) == "\xEF\xBF\xBD");
  CHECK(HtmlEscape("a\tb\nc") == "a\tb\nc");
}

TEST_CASE("a CSV cell is quoted as RFC 4180 says and never starts a formula", "[escape]") {
  CHECK(CsvCell("plain") == "plain");
  CHECK(CsvCell("a,b") == "\"a,b\"");
  CHECK(CsvCell("say \"hi\"") == "\"say \"\"hi\"\"\"");
  for (const char* formula : {"=cmd|' /C calc'!A0", "+1+cmd", "-2+3", "@SUM(A1)", "\tx", "\rx"}) {
    INFO(formula);
    const std::string cell = CsvCell(formula);
    const size_t first = cell.front() == '"' ? 1 : 0;
    CHECK(cell[first] == '\'');
  }
  // Numbers and the table's "-" placeholder stay as they are.
  CHECK(CsvCell("-0.5") == "-0.5");
  CHECK(CsvCell("+3") == "+3");
  CHECK(CsvCell("-") == "-");
  CHECK(CsvCell("") == "");
}

TEST_CASE("a DOT string escapes quotes and backslashes", "[escape]") {
  CHECK(DotString("tor-a") == "\"tor-a\"");
  CHECK(DotString("a\"b\\") == "\"a\\\"b\\\\\"");
  const std::string d = DotString(kHostile);
  // Every quote inside is escaped: the string ends only at its last character.
  bool escaped = false;
  for (size_t i = 1; i + 1 < d.size(); ++i) {
    if (!escaped) CHECK(d[i] != '"');
    escaped = !escaped && d[i] == '\\';
    CHECK(static_cast<unsigned char>(d[i]) >= 0x20);
  }
}

TEST_CASE("a YAML string escapes quotes, backslashes and controls", "[escape]") {
  CHECK(YamlString("plain") == "\"plain\"");
  CHECK(YamlString("a\"b\\c: #d") == "\"a\\\"b\\\\c: #d\"");
  CHECK(YamlString("line\nnext") == "\"line\\x0anext\"");
  CHECK(CommentLine("a\nschema_version: 9") == "a schema_version: 9");
}

}  // namespace
}  // namespace sim
