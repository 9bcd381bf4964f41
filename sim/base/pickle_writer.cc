#include "sim/base/pickle_writer.h"

#include <cstring>

#include "sim/base/check.h"

namespace sim {

namespace {

// Protocol 2 opcodes (CPython Lib/pickletools.py).
constexpr char kProto = '\x80';
constexpr char kStop = '.';
constexpr char kMark = '(';
constexpr char kEmptyDict = '}';
constexpr char kEmptyList = ']';
constexpr char kSetItems = 'u';
constexpr char kAppends = 'e';
constexpr char kBinInt = 'J';      // 4-byte signed little-endian
constexpr char kLong1 = '\x8a';    // 1-byte length, then two's complement little-endian
constexpr char kBinFloat = 'G';    // 8-byte big-endian IEEE 754
constexpr char kBinUnicode = 'X';  // 4-byte little-endian length, then UTF-8
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kNone = 'N';
constexpr char kLongBinPut = 'r';  // 4-byte little-endian memo index
constexpr char kLongBinGet = 'j';

void LittleEndian(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

PickleWriter::PickleWriter() {
  out_.push_back(kProto);
  out_.push_back('\x02');
}

void PickleWriter::Int(int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX) {
    out_.push_back(kBinInt);
    LittleEndian(out_, static_cast<uint64_t>(static_cast<int64_t>(v)), 4);
    return;
  }
  out_.push_back(kLong1);
  out_.push_back('\x08');
  LittleEndian(out_, static_cast<uint64_t>(v), 8);
}

void PickleWriter::Float(double v) {
  out_.push_back(kBinFloat);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  for (int i = 7; i >= 0; --i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

void PickleWriter::String(absl::string_view utf8) {
  if (auto it = memo_.find(utf8); it != memo_.end()) {
    out_.push_back(kLongBinGet);
    LittleEndian(out_, it->second, 4);
    return;
  }
  out_.push_back(kBinUnicode);
  LittleEndian(out_, utf8.size(), 4);
  out_.append(utf8.data(), utf8.size());
  const auto index = static_cast<uint32_t>(memo_.size());
  memo_.emplace(std::string(utf8), index);
  out_.push_back(kLongBinPut);
  LittleEndian(out_, index, 4);
}

void PickleWriter::Bool(bool v) { out_.push_back(v ? kNewTrue : kNewFalse); }

void PickleWriter::None() { out_.push_back(kNone); }

void PickleWriter::BeginDict() {
  out_.push_back(kEmptyDict);
  out_.push_back(kMark);
  open_.push_back('d');
}

void PickleWriter::BeginList() {
  out_.push_back(kEmptyList);
  out_.push_back(kMark);
  open_.push_back('l');
}

void PickleWriter::End() {
  SIM_CHECK(!open_.empty(), "PickleWriter::End with nothing open");
  out_.push_back(open_.back() == 'd' ? kSetItems : kAppends);
  open_.pop_back();
}

std::string PickleWriter::Finish() {
  SIM_CHECK(open_.empty(), "PickleWriter::Finish with a dict or list open");
  out_.push_back(kStop);
  return std::move(out_);
}

}  // namespace sim
