#include "sim/base/utf8.h"

namespace sim {

size_t Utf8ValidPrefix(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // RFC 3629 §4's table: the lead byte gives the continuation bytes (0x80-0xBF), and a few
    // leads narrow the first of them (overlong forms, surrogates, past U+10FFFF).
    size_t tail = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      tail = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      tail = 2;
      if (lead == 0xE0) lo = 0xA0;
      if (lead == 0xED) hi = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      tail = 3;
      if (lead == 0xF0) lo = 0x90;
      if (lead == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (s.size() - i <= tail) return i;
    for (size_t k = 1; k <= tail; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return i;
    }
    i += tail + 1;
  }
  return i;
}

}  // namespace sim
