#pragma once
// Sweep grids: `--vary KEY=V1,V2,...` lists and ranges, and their cartesian product.
//
// Value forms (one --vary may mix them, comma-separated):
//   4096                 a single value (any scenario value: numbers, names, "25 MB")
//   2..64:x2             geometric range 2, 4, 8, ..., 64 (integers)
//   1..8:+1, 1..8        arithmetic range (integers; default step 1)
// The product runs in the order of the --vary flags, the first key outermost (as nested loops,
// or Python's itertools.product): results come in that order whatever the thread count.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/config/catalog.h"

namespace sim::explore {

struct Vary {
  std::string key;
  std::vector<std::string> values;
};

absl::StatusOr<Vary> ParseVary(absl::string_view key_equals_values);

// The most configurations one sweep runs (an hour at the sweep's ~1,700 a second on two cores).
inline constexpr size_t kMaxSweepConfigurations = 1'000'000;

// How many combinations the lists make, or InvalidArgument when that is above
// kMaxSweepConfigurations (checked before any is built: the product of a few long lists
// outgrows memory).
absl::StatusOr<size_t> ProductSize(const std::vector<Vary>& varies);

// Every combination, each as the overrides that make it, in product order. Call ProductSize
// first: this builds them all.
std::vector<std::vector<config::Override>> Product(const std::vector<Vary>& varies);

// `--shard K/N` (sweep, plan): the K-th (1-based) of N contiguous slices of the work.
struct Shard {
  int64_t k = 1, n = 1;
};
absl::StatusOr<Shard> ParseShard(absl::string_view k_slash_n);

// The half-open index range of shard `s` of [0, total).
struct Slice {
  size_t begin = 0, end = 0;
};
Slice SliceOf(const Shard& s, size_t total);

}  // namespace sim::explore
