#pragma once
// The free blocks of one caching-allocator pool (sim/memory/caching_allocator.h), ordered for
// best fit: by size, then segment, then offset (the order that breaks ties between equal sizes;
// it decides the segment a request lands in, hence the reserved peak).
//
// One ordered set kept as two levels: the distinct sizes, sorted, each with its blocks sorted by
// (segment, offset). A pool holds tens of free blocks in a step that fits (32 on average over
// scenarios/llama3-405b-8k.yaml) but hundreds in one that overflows, where every new segment
// first releases the cached ones: 200 to 850 blocks of only 6 to 10 distinct sizes in the
// 144-configuration sweep grid (counted at every insert, docs/benchmarks.md), since a step
// frees the same few tensor shapes over and over. A flat sorted vector moved a whole pool per
// insert and erase there, and a B-tree walked nodes. Per size, most moves are none: a block
// freed is most often the least of its size, the one the next request of that size takes
// (1.66 of 1.83 million inserts over the grid), and each size keeps its least block last; an
// erase only marks its place stale (Removed). The sweep grid took 440-464 ms with the vector
// and tree, 376-377 ms with this (tools/bench/replay_bench, BM_SweepCheckGrid/1, median of 3,
// three rounds alternating with the old binary on the 2-core development machine).

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "sim/base/check.h"
#include "sim/base/slot_mix.h"

namespace sim::memory {

struct FreeBlockKey {
  int64_t size = 0;
  int32_t segment = 0;
  int32_t block = 0;  // carried, not compared: (segment, offset) names the block
  int64_t offset = 0;
  bool operator<(const FreeBlockKey& o) const {
    if (size != o.size) return size < o.size;
    if (segment != o.segment) return segment < o.segment;
    return offset < o.offset;
  }
};

class FreeIndex {
 public:
  // `k.block` is not in the index (the allocator inserts a block only while it is out).
  void Insert(const FreeBlockKey& k) {
    SIM_CHECK(k.block >= 0, "a free block without an index");
    if (static_cast<size_t>(k.block) >= blocks_.size()) blocks_.resize(k.block + 1);
    BlockState& b = blocks_[k.block];
    SIM_CHECK(b.stamp % 2 == 0, "a block inserted twice into its pool's free index");
    ++b.stamp;  // odd: in the index
    b.size = k.size;
    b.segment = k.segment;
    b.offset = k.offset;
    size_t c = ClassAtLeast(k.size);
    if (c == sizes_.size() || sizes_[c] != k.size) {
      // A new size: first drop the empty ones when they are half the index (a step that
      // splits blocks leaves many remainders' sizes behind).
      if (empty_ > sizes_.size() / 2 + 4) {
        Compact();
        c = FirstSizeAtLeast(k.size);
      }
      sizes_.insert(sizes_.begin() + static_cast<std::ptrdiff_t>(c), k.size);
      classes_.emplace(classes_.begin() + static_cast<std::ptrdiff_t>(c));
      ++empty_;
    }
    SizeClass& in = classes_[c];
    if (in.live++ == 0) --empty_;
    const Place p{k.offset, k.segment, k.block, b.stamp};
    if (in.places.empty() || Later(in.places.back(), p)) {
      in.places.push_back(p);  // the least of its size: most frees (Later)
    } else {
      in.places.insert(std::upper_bound(in.places.begin(), in.places.end(), p, Later), p);
    }
    ++size_;
  }

  // Removes and returns the block of the least key of at least `size` bytes (best fit), or
  // none when no free block is that large.
  std::optional<int32_t> TakeAtLeast(int64_t size) {
    size_t c = ClassAtLeast(size);
    while (c < classes_.size() && classes_[c].live == 0) ++c;
    if (c == classes_.size()) return std::nullopt;
    std::vector<Place>& places = classes_[c].places;
    while (!Valid(places.back())) places.pop_back();  // a live one is left: live > 0
    const int32_t block = places.back().block;
    places.pop_back();
    Removed(c, block);
    return block;
  }

  // Removes the key that orders as `k`; returns its block, or none when there is none. The
  // block's place stays behind, marked stale, until a take or a sweep passes it.
  std::optional<int32_t> Erase(const FreeBlockKey& k) {
    if (k.block < 0 || static_cast<size_t>(k.block) >= blocks_.size()) return std::nullopt;
    const BlockState& b = blocks_[k.block];
    if (b.stamp % 2 == 0 || b.size != k.size || b.segment != k.segment || b.offset != k.offset) {
      return std::nullopt;
    }
    const size_t c = ClassAtLeast(k.size);
    Removed(c, k.block);
    return k.block;
  }

  size_t size() const { return size_; }

 private:
  // A free block of one size, where it is; `stamp` tells a block's place from the stale
  // places of its earlier stays in the index (of this size or another, under the same index:
  // the allocator reuses the indices of merged-away blocks).
  struct Place {
    int64_t offset = 0;
    int32_t segment = 0;
    int32_t block = 0;
    uint32_t stamp = 0;
  };
  // The order of a size's places, the least (the best fit) last: a freed block is most often
  // the least of its size (the one a request of that size just took), so that both ends of
  // the churn are at the back of the vector.
  static bool Later(const Place& a, const Place& b) {
    return a.segment != b.segment ? a.segment > b.segment : a.offset > b.offset;
  }
  struct SizeClass {
    std::vector<Place> places;  // by (segment, offset) descending, stale ones among them
    int64_t live = 0;           // places not stale
  };
  // A block's key while it is in the index, and how often it entered or left (odd: in; 32
  // bits wrap only after 2^31 stays of one block index, far beyond any replay).
  struct BlockState {
    int64_t size = 0, offset = 0;
    int32_t segment = 0;
    uint32_t stamp = 0;
  };

  bool Valid(const Place& p) const { return blocks_[p.block].stamp == p.stamp; }

  // Block `block` of size class `c` leaves the index. Its place, when not taken already,
  // goes stale. A stale place is dropped when it reaches the back, or when a size holds more
  // stale places than live ones: erasing them one by one moved 59 places on average per erase
  // over the 144-configuration sweep grid (53 million in all; the freed block's neighbours,
  // merged, lie in newer segments than the least).
  void Removed(size_t c, int32_t block) {
    ++blocks_[block].stamp;  // even: out
    --size_;
    SizeClass& in = classes_[c];
    if (--in.live == 0) {
      in.places.clear();
      ++empty_;
      return;
    }
    while (!Valid(in.places.back())) in.places.pop_back();
    if (in.places.size() > 2 * static_cast<size_t>(in.live) + 16) {
      in.places.erase(std::remove_if(in.places.begin(), in.places.end(),
                                     [&](const Place& p) { return !Valid(p); }),
                      in.places.end());
    }
  }

  // The index of the least size at least `size` (sizes_.size() when none). A binary search
  // forced free of branches (the compare as a multiplier) made the sweep grid 5 % slower: a
  // pool's few sizes come back in the same order, and the branches are predicted.
  size_t FirstSizeAtLeast(int64_t size) const {
    return static_cast<size_t>(std::lower_bound(sizes_.begin(), sizes_.end(), size) -
                               sizes_.begin());
  }

  // FirstSizeAtLeast, remembered for sizes that have a class: a slot per multiplicative mix of
  // the size holds the class it was found at, right while sizes_ holds that size there (sizes
  // are distinct, so an index that still holds the size is still its class). A pool's few
  // sizes recur on every allocation and free, and the binary search's branches, taken one way
  // or the other by sizes close together, were a good part of Insert's cycles (perf).
  size_t ClassAtLeast(int64_t size) {
    Recent& r = recent_[FibonacciSlot<6>(static_cast<uint64_t>(size))];
    if (r.size == size && r.c < sizes_.size() && sizes_[r.c] == size) return r.c;
    const size_t c = FirstSizeAtLeast(size);
    if (c < sizes_.size() && sizes_[c] == size) r = {size, c};
    return c;
  }

  // Drops the sizes without a live block.
  void Compact() {
    size_t kept = 0;
    for (size_t c = 0; c < sizes_.size(); ++c) {
      if (classes_[c].live == 0) continue;
      sizes_[kept] = sizes_[c];
      std::swap(classes_[kept], classes_[c]);
      ++kept;
    }
    sizes_.resize(kept);
    classes_.resize(kept);
    empty_ = 0;
  }

  struct Recent {
    int64_t size = -1;
    size_t c = 0;
  };
  std::array<Recent, 64> recent_{};  // ClassAtLeast's, by FibonacciSlot<6> of the size
  std::vector<int64_t> sizes_;       // the sizes that have (or had) free blocks, ascending
  std::vector<SizeClass> classes_;   // of each size
  std::vector<BlockState> blocks_;   // by block index
  size_t empty_ = 0;                 // sizes without a live block
  size_t size_ = 0;
};

}  // namespace sim::memory
