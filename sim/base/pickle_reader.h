#pragma once
// A restricted reader of Python pickles (protocols 0-5 as Python writes plain data) for files
// from others, such as a real run's `torch.cuda.memory._snapshot()`: it builds dicts, lists,
// tuples, strings, bytes, integers, floats, booleans and None, and refuses every opcode that
// names or calls Python code (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ,
// PERSID, EXT...), as Python's documented "restricting globals" approach does by allowing no
// global at all. Malformed or truncated input is an error with its byte offset; nesting is
// bounded (kMaxPickleDepth), the rest by the input's length.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sim {

struct PickleValue;
inline constexpr int kMaxPickleDepth = 256;
using PickleList = std::vector<std::shared_ptr<PickleValue>>;
// Dict keys kept as written when they are strings or integers (others are refused).
using PickleDict =
    std::vector<std::pair<std::shared_ptr<PickleValue>, std::shared_ptr<PickleValue>>>;

struct PickleValue {
  struct None {};
  struct Tuple {
    PickleList items;
  };
  std::variant<None, bool, int64_t, double, std::string, PickleList, PickleDict, Tuple> v;
  // Nesting below this value (0: none), and whether it was placed in a container: the reader
  // refuses nesting deeper than kMaxPickleDepth and additions to a container already placed,
  // so that no input can make the teardown of the tree recurse without bound.
  int depth = 0;
  bool contained = false;

  bool is_none() const { return std::holds_alternative<None>(v); }
  const int64_t* integer() const { return std::get_if<int64_t>(&v); }
  const std::string* string() const { return std::get_if<std::string>(&v); }
  const PickleList* list() const {
    if (auto* l = std::get_if<PickleList>(&v)) return l;
    if (auto* t = std::get_if<Tuple>(&v)) return &t->items;
    return nullptr;
  }
  const PickleDict* dict() const { return std::get_if<PickleDict>(&v); }
  // The value of string key `key` in a dict; null when absent or not a dict.
  const PickleValue* Get(absl::string_view key) const;
};

// `origin` prefixes errors: "FILE: byte N: what".
absl::StatusOr<std::shared_ptr<PickleValue>> ReadPickle(absl::string_view data,
                                                        const std::string& origin);

}  // namespace sim
