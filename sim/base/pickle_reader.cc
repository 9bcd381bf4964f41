#include "sim/base/pickle_reader.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sim {

const PickleValue* PickleValue::Get(absl::string_view key) const {
  const PickleDict* d = dict();
  if (d == nullptr) return nullptr;
  for (const auto& [k, v] : *d) {
    if (const std::string* s = k->string(); s != nullptr && *s == key) return v.get();
  }
  return nullptr;
}

namespace {

using Value = std::shared_ptr<PickleValue>;

// Appends code point `cp` as UTF-8; false for one past Unicode's range or a surrogate.
bool AppendUtf8(uint32_t cp, std::string& out) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return true;
}

// Python's raw-unicode-escape: \uXXXX and \UXXXXXXXX are code points, every other byte is
// Latin-1.
bool RawUnicodeEscape(const std::string& in, std::string& out) {
  for (size_t i = 0; i < in.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(in[i]);
    if (c == '\\' && i + 1 < in.size() && (in[i + 1] == 'u' || in[i + 1] == 'U')) {
      const size_t digits = in[i + 1] == 'u' ? 4 : 8;
      if (i + 2 + digits > in.size()) return false;
      uint32_t cp = 0;
      for (size_t k = 0; k < digits; ++k) {
        const char h = in[i + 2 + k];
        const int v = h >= '0' && h <= '9'   ? h - '0'
                      : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                             : -1;
        if (v < 0) return false;
        cp = cp << 4 | static_cast<uint32_t>(v);
      }
      if (!AppendUtf8(cp, out)) return false;
      i += 1 + digits;
      continue;
    }
    AppendUtf8(c, out);
  }
  return true;
}

class Reader {
 public:
  Reader(absl::string_view data, const std::string& origin) : d_(data), origin_(origin) {}

  absl::StatusOr<Value> Run() {
    while (true) {
      if (pos_ >= d_.size()) return Fail("truncated: no STOP opcode");
      const size_t at = pos_;
      const unsigned char op = static_cast<unsigned char>(d_[pos_++]);
      absl::Status st = Step(op, at);
      if (!st.ok()) return st;
      if (done_) {
        if (stack_.size() != 1) return Fail("STOP with the stack not holding one value", at);
        return stack_.back();
      }
    }
  }

 private:
  absl::Status Fail(absl::string_view what, size_t at = std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin_, ": byte ", at == std::string::npos ? pos_ : at, ": ", what));
  }
  bool Take(size_t n, absl::string_view& out) {
    if (d_.size() - pos_ < n) return false;
    out = d_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool Le(size_t n, uint64_t& v) {
    absl::string_view b;
    if (!Take(n, b)) return false;
    v = 0;
    for (size_t i = 0; i < n; ++i)
      v |= static_cast<uint64_t>(static_cast<unsigned char>(b[i])) << (8 * i);
    return true;
  }
  bool Line(std::string& out) {
    const size_t nl = d_.find('\n', pos_);
    if (nl == absl::string_view::npos) return false;
    out = std::string(d_.substr(pos_, nl - pos_));
    pos_ = nl + 1;
    return true;
  }
  static Value Make(decltype(PickleValue::v) v) {
    auto p = std::make_shared<PickleValue>();
    p->v = std::move(v);
    return p;
  }
  void Push(Value v) { stack_.push_back(std::move(v)); }
  absl::StatusOr<Value> Pop(size_t at) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) {
      return Fail("pops an empty stack", at);
    }
    Value v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  // The values since the last MARK, which is removed.
  absl::StatusOr<PickleList> PopMark(size_t at) {
    if (marks_.empty()) return Fail("needs a MARK and there is none", at);
    const size_t m = marks_.back();
    marks_.pop_back();
    PickleList items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  absl::Status Text(std::string bytes) {
    Push(Make(std::move(bytes)));
    return absl::OkStatus();
  }
  // Marks `items` as placed in `target`, bounding the nesting.
  absl::Status Place(PickleValue& target, const PickleList& items, size_t at) {
    for (const Value& item : items) {
      if (item.get() == &target) return Fail("a container placed inside itself", at);
      target.depth = std::max(target.depth, item->depth + 1);
      item->contained = true;
    }
    if (target.depth > kMaxPickleDepth) {
      return Fail(absl::StrCat("nesting deeper than ", kMaxPickleDepth, " levels"), at);
    }
    return absl::OkStatus();
  }
  absl::Status AddItems(Value target, const PickleList& items, size_t at) {
    if (target->contained) return Fail("adds to a container already placed in another", at);
    if (absl::Status st = Place(*target, items, at); !st.ok()) return st;
    if (auto* l = std::get_if<PickleList>(&target->v)) {
      l->insert(l->end(), items.begin(), items.end());
      return absl::OkStatus();
    }
    if (auto* dict = std::get_if<PickleDict>(&target->v)) {
      if (items.size() % 2 != 0) return Fail("SETITEMS with an odd number of values", at);
      for (size_t i = 0; i < items.size(); i += 2) {
        if (!items[i]->string() && !items[i]->integer()) {
          return Fail("a dict key that is neither a string nor an integer", at);
        }
        dict->push_back({items[i], items[i + 1]});
      }
      return absl::OkStatus();
    }
    return Fail("adds items to a value that is neither a list nor a dict", at);
  }

  absl::Status Step(unsigned char op, size_t at) {
    uint64_t n = 0;
    absl::string_view b;
    std::string line;
    switch (op) {
      case 0x80:  // PROTO
        if (!Le(1, n) || n > 5) return Fail("PROTO of an unknown version", at);
        return absl::OkStatus();
      case 0x95:  // FRAME: a length hint only
        if (!Le(8, n)) return Fail("truncated FRAME", at);
        return absl::OkStatus();
      case '.':
        done_ = true;
        return absl::OkStatus();
      case '(':
        marks_.push_back(stack_.size());
        return absl::OkStatus();
      case '0': {
        auto v = Pop(at);
        return v.ok() ? absl::OkStatus() : v.status();
      }
      case '1': {
        auto v = PopMark(at);
        return v.ok() ? absl::OkStatus() : v.status();
      }
      case '2':
        if (stack_.empty()) return Fail("DUP of an empty stack", at);
        Push(stack_.back());
        return absl::OkStatus();
      case '}':
        Push(Make(PickleDict{}));
        return absl::OkStatus();
      case ']':
      case 0x8f:  // EMPTY_SET: read as a list
        Push(Make(PickleList{}));
        return absl::OkStatus();
      case ')':
        Push(Make(PickleValue::Tuple{}));
        return absl::OkStatus();
      case 'N':
        Push(Make(PickleValue::None{}));
        return absl::OkStatus();
      case 0x88:
      case 0x89:
        Push(Make(op == 0x88));
        return absl::OkStatus();
      case 'J':
        if (!Le(4, n)) return Fail("truncated BININT", at);
        Push(Make(static_cast<int64_t>(static_cast<int32_t>(n))));
        return absl::OkStatus();
      case 'K':
        if (!Le(1, n)) return Fail("truncated BININT1", at);
        Push(Make(static_cast<int64_t>(n)));
        return absl::OkStatus();
      case 'M':
        if (!Le(2, n)) return Fail("truncated BININT2", at);
        Push(Make(static_cast<int64_t>(n)));
        return absl::OkStatus();
      case 0x8a:    // LONG1
      case 0x8b: {  // LONG4
        uint64_t len = 0;
        if (!Le(op == 0x8a ? 1 : 4, len)) return Fail("truncated LONG", at);
        if (len > 8) return Fail("an integer wider than 64 bits", at);
        uint64_t v = 0;
        if (len > 0 && !Le(len, v)) return Fail("truncated LONG", at);
        if (len > 0 && len < 8 && (v >> (8 * len - 1)) & 1) v |= ~uint64_t{0} << (8 * len);
        Push(Make(static_cast<int64_t>(v)));
        return absl::OkStatus();
      }
      case 'I':
      case 'L': {
        if (!Line(line)) return Fail("truncated INT", at);
        if (!line.empty() && line.back() == 'L') line.pop_back();
        if (line == "01" || line == "00") {
          Push(Make(line == "01"));
          return absl::OkStatus();
        }
        int64_t v = 0;
        if (!absl::SimpleAtoi(line, &v)) return Fail("INT that is not a 64-bit integer", at);
        Push(Make(v));
        return absl::OkStatus();
      }
      case 'G': {
        if (!Take(8, b)) return Fail("truncated BINFLOAT", at);
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = bits << 8 | static_cast<unsigned char>(b[i]);
        double v = 0;
        std::memcpy(&v, &bits, sizeof v);
        Push(Make(v));
        return absl::OkStatus();
      }
      case 'F': {
        double v = 0;
        if (!Line(line) || !absl::SimpleAtod(line, &v)) return Fail("bad FLOAT", at);
        Push(Make(v));
        return absl::OkStatus();
      }
      case 'X':    // BINUNICODE
      case 0x8c:   // SHORT_BINUNICODE
      case 0x8d:   // BINUNICODE8
      case 'B':    // BINBYTES
      case 'C':    // SHORT_BINBYTES
      case 0x8e:   // BINBYTES8
      case 'T':    // BINSTRING
      case 'U': {  // SHORT_BINSTRING
        const size_t width = (op == 0x8c || op == 'C' || op == 'U') ? 1
                             : (op == 0x8d || op == 0x8e)           ? 8
                                                                    : 4;
        if (!Le(width, n)) return Fail("truncated string length", at);
        if (n > d_.size() - pos_) return Fail("a string longer than the rest of the file", at);
        Take(static_cast<size_t>(n), b);
        return Text(std::string(b));
      }
      case 'V': {  // UNICODE (protocol 0): a raw-unicode-escape line
        if (!Line(line)) return Fail("truncated UNICODE", at);
        std::string utf8;
        if (!RawUnicodeEscape(line, utf8)) return Fail("UNICODE with a bad escape", at);
        return Text(std::move(utf8));
      }
      case 'p':  // PUT index (text)
      case 'g': {
        int64_t index = 0;
        if (!Line(line) || !absl::SimpleAtoi(line, &index)) return Fail("bad memo index", at);
        return op == 'p' ? Put(static_cast<uint64_t>(index), at)
                         : Get(static_cast<uint64_t>(index), at);
      }
      case 'q':
      case 'r':
        if (!Le(op == 'q' ? 1 : 4, n)) return Fail("truncated memo index", at);
        return Put(n, at);
      case 0x94:  // MEMOIZE
        return Put(memo_.size(), at);
      case 'h':
      case 'j':
        if (!Le(op == 'h' ? 1 : 4, n)) return Fail("truncated memo index", at);
        return Get(n, at);
      case 'a':
      case 's': {
        PickleList items;
        for (int k = op == 'a' ? 1 : 2; k > 0; --k) {
          auto v = Pop(at);
          if (!v.ok()) return v.status();
          items.insert(items.begin(), *v);
        }
        if (stack_.empty()) return Fail("APPEND or SETITEM with no container", at);
        return AddItems(stack_.back(), items, at);
      }
      case 'e':
      case 'u':
      case 0x90: {  // APPENDS, SETITEMS, ADDITEMS
        auto items = PopMark(at);
        if (!items.ok()) return items.status();
        if (stack_.empty()) return Fail("APPENDS or SETITEMS with no container", at);
        return AddItems(stack_.back(), *items, at);
      }
      case 'l':
      case 'd':
      case 't':
      case 0x91: {  // LIST, DICT, TUPLE, FROZENSET from the MARK
        auto items = PopMark(at);
        if (!items.ok()) return items.status();
        if (op == 'd') {
          Value dict = Make(PickleDict{});
          if (absl::Status st = AddItems(dict, *items, at); !st.ok()) return st;
          Push(dict);
        } else {
          Value v = op == 't' ? Make(PickleValue::Tuple{*items}) : Make(*items);
          if (absl::Status st = Place(*v, *items, at); !st.ok()) return st;
          Push(std::move(v));
        }
        return absl::OkStatus();
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        PickleValue::Tuple t;
        for (int k = op - 0x84; k > 0; --k) {
          auto v = Pop(at);
          if (!v.ok()) return v.status();
          t.items.insert(t.items.begin(), *v);
        }
        Value v = Make(t);
        if (absl::Status st = Place(*v, t.items, at); !st.ok()) return st;
        Push(std::move(v));
        return absl::OkStatus();
      }
      default:
        return Fail(absl::StrFormat("opcode 0x%02x is refused: only data is read (no global, "
                                    "no call, no object construction)",
                                    op),
                    at);
    }
  }
  absl::Status Put(uint64_t index, size_t at) {
    if (stack_.empty()) return Fail("memo PUT of an empty stack", at);
    if (index > d_.size()) return Fail("a memo index beyond the file's size", at);
    memo_[index] = stack_.back();
    return absl::OkStatus();
  }
  absl::Status Get(uint64_t index, size_t at) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return Fail(absl::StrCat("memo GET of unset index ", index), at);
    Push(it->second);
    return absl::OkStatus();
  }

  absl::string_view d_;
  const std::string& origin_;
  size_t pos_ = 0;
  bool done_ = false;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value> memo_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<PickleValue>> ReadPickle(absl::string_view data,
                                                        const std::string& origin) {
  return Reader(data, origin).Run();
}

}  // namespace sim
