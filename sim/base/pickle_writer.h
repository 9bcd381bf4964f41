#pragma once
// Python pickle (protocol 2) for the plain data stepsim writes for Python tools: dicts with
// string keys, lists, strings, integers, floats, booleans and None — what
// `torch.cuda.memory._snapshot()` returns and PyTorch's memory viewer reads. Only the opcodes
// that build such values are emitted (no GLOBAL, REDUCE or BUILD: the output names no Python
// object to call), so `pickle.load` of it constructs data and runs nothing.

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace sim {

class PickleWriter {
 public:
  PickleWriter();  // the protocol header

  // Values. A dict is BeginDict, then key and value pairs, then End; a list is BeginList, then
  // its items, then End.
  void Int(int64_t v);
  void Float(double v);
  // A string written before is a reference to the first (the pickle memo: LONG_BINPUT then
  // LONG_BINGET), so repeated keys and frame names cost 5 bytes each.
  void String(absl::string_view utf8);
  void Bool(bool v);
  void None();
  void BeginDict();
  void BeginList();
  void End();  // closes the innermost dict or list

  // The finished pickle (STOP appended once).
  std::string Finish();

 private:
  std::string out_;
  std::string open_;  // 'd' or 'l' per open container, innermost last
  absl::flat_hash_map<std::string, uint32_t> memo_;  // strings written, by memo index
};

}  // namespace sim
