#pragma once
// The free blocks of one caching-allocator pool (sim/memory/caching_allocator.h), ordered for
// best fit: by size, then segment, then offset (the order that breaks ties between equal sizes;
// it decides the segment a request lands in, hence the reserved peak).
//
// One ordered set kept as two levels: the distinct sizes, sorted, each with its blocks sorted by
// (segment, offset). A pool holds tens of free blocks in a step that fits (32 on average over
// scenarios/llama3-405b-8k.yaml) but hundreds in one that overflows, where every new segment
// first releases the cached ones: 200 to 850 blocks of only 6 to 10 distinct sizes in the
// 144-configuration sweep grid (counted at every insert, README "Benchmarks"), since a step
// frees the same few tensor shapes over and over. A flat sorted vector moved a whole pool per
// insert and erase there, and a B-tree walked nodes; per size, the moves are a tenth as long,
// and most are none: a block freed is most often the least of its size, the one the next
// request of that size takes, and each size keeps its least block last. The sweep grid took
// 437-455 ms with the vector and tree, 385-388 ms with this (tools/bench/replay_bench,
// BM_SweepCheckGrid/1, alternating runs on 2 cores).

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

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
  void Insert(const FreeBlockKey& k) {
    const auto at = std::lower_bound(sizes_.begin(), sizes_.end(), k.size);
    const size_t c = static_cast<size_t>(at - sizes_.begin());
    if (at == sizes_.end() || *at != k.size) {
      // A new size: first drop the empty ones when they are half the index (a step that
      // splits blocks leaves many remainders' sizes behind).
      if (empty_ > sizes_.size() / 2 + 4) {
        Compact();
        Insert(k);
        return;
      }
      sizes_.insert(at, k.size);
      blocks_.emplace(blocks_.begin() + static_cast<std::ptrdiff_t>(c));
    } else if (blocks_[c].empty()) {
      --empty_;
    }
    std::vector<Place>& in = blocks_[c];
    const Place p{k.segment, k.block, k.offset};
    if (in.empty() || Later(in.back(), p)) {
      in.push_back(p);  // the least of its size: most frees (Later)
    } else {
      in.insert(std::upper_bound(in.begin(), in.end(), p, Later), p);
    }
    ++size_;
  }

  // Removes and returns the block of the least key of at least `size` bytes (best fit), or
  // none when no free block is that large.
  std::optional<int32_t> TakeAtLeast(int64_t size) {
    size_t c =
        static_cast<size_t>(std::lower_bound(sizes_.begin(), sizes_.end(), size) - sizes_.begin());
    while (c < blocks_.size() && blocks_[c].empty()) ++c;
    if (c == blocks_.size()) return std::nullopt;
    return Remove(c, blocks_[c].end() - 1);
  }

  // Removes the key that orders as `k`; returns its block, or none when there is none.
  std::optional<int32_t> Erase(const FreeBlockKey& k) {
    const auto at = std::lower_bound(sizes_.begin(), sizes_.end(), k.size);
    if (at == sizes_.end() || *at != k.size) return std::nullopt;
    const size_t c = static_cast<size_t>(at - sizes_.begin());
    std::vector<Place>& in = blocks_[c];
    const Place p{k.segment, k.block, k.offset};
    const auto it = std::lower_bound(in.begin(), in.end(), p, Later);
    if (it == in.end() || Later(p, *it)) return std::nullopt;
    return Remove(c, it);
  }

  size_t size() const { return size_; }

 private:
  // A free block of one size: where it is, and its index in the allocator.
  struct Place {
    int32_t segment = 0;
    int32_t block = 0;  // carried, not compared
    int64_t offset = 0;
  };
  // The order of a size's blocks, the least (the best fit) last: a freed block is most often
  // the least of its size (the one a request of that size just took), so that both ends of
  // the churn are at the back of the vector.
  static bool Later(const Place& a, const Place& b) {
    return a.segment != b.segment ? a.segment > b.segment : a.offset > b.offset;
  }

  // Removes the block at `it` of size class `c`. A size left without blocks keeps its place
  // (it is most often freed again soon) until empty sizes are half the index (Compact).
  int32_t Remove(size_t c, std::vector<Place>::iterator it) {
    const int32_t block = it->block;
    std::vector<Place>& in = blocks_[c];
    in.erase(it);
    --size_;
    if (in.empty()) ++empty_;
    return block;
  }

  void Compact() {
    size_t kept = 0;
    for (size_t c = 0; c < sizes_.size(); ++c) {
      if (blocks_[c].empty()) continue;
      sizes_[kept] = sizes_[c];
      std::swap(blocks_[kept], blocks_[c]);
      ++kept;
    }
    sizes_.resize(kept);
    blocks_.resize(kept);
    empty_ = 0;
  }

  std::vector<int64_t> sizes_;              // the distinct sizes of the free blocks, ascending
  std::vector<std::vector<Place>> blocks_;  // of each size, by (segment, offset) descending
  size_t empty_ = 0;                        // sizes without a block
  size_t size_ = 0;
};

}  // namespace sim::memory
