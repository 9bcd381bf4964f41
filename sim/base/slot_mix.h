#pragma once
// A direct-mapped slot for a key, in front of a slower lookup that the replay makes on every
// change (the ledger's live blocks, the caching allocator's size classes, collective prices, op
// times): Fibonacci hashing (Knuth, TAOCP vol. 3 §6.4) multiplies by 2^64/φ and keeps the top
// bits, so that keys differing only in their low bits (sizes, counts) spread over the slots.

#include <cstddef>
#include <cstdint>

namespace sim {

inline constexpr uint64_t kFibonacciMix = 0x9E3779B97F4A7C15ULL;  // 2^64 / golden ratio

// The slot of `key` among 2^kBits.
template <int kBits>
constexpr size_t FibonacciSlot(uint64_t key) {
  static_assert(kBits > 0 && kBits < 64);
  return static_cast<size_t>((key * kFibonacciMix) >> (64 - kBits));
}

}  // namespace sim
