#pragma once
// The free blocks of one caching-allocator pool (sim/memory/caching_allocator.h), ordered for
// best fit: by size, then segment, then offset (the order that breaks ties between equal sizes;
// it decides the segment a request lands in, hence the reserved peak).
//
// Two representations of one ordered set, chosen by its size, so that the order and every
// answer are the same whichever holds it: a sorted vector while the pool is small, a B-tree
// when it is large. A pool holds tens of free blocks in a step that fits (32 on average over
// scenarios/llama3-405b-8k.yaml, 64 at most for most inserts) but hundreds in one that
// overflows (default, no recompute: 400 on average, 807 at most), where every new segment first
// releases the cached ones. On tens of keys the vector's binary search and short moves beat
// the B-tree's node walks; on hundreds its moves make a step 12 % slower (measured with
// tools/bench/replay_bench: the 144-configuration sweep grid, its overflowing steps included).
// The switch has hysteresis (to the tree above kToTree keys, back below kToVector), so a pool
// hovering at one size does not convert back and forth.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/btree_set.h"

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
    if (in_tree_) {
      tree_.insert(k);
      return;
    }
    sorted_.insert(std::lower_bound(sorted_.begin(), sorted_.end(), k), k);
    if (sorted_.size() > kToTree) {
      tree_.insert(sorted_.begin(), sorted_.end());
      sorted_.clear();
      in_tree_ = true;
    }
  }

  // Removes and returns the block of the least key of at least `size` bytes (best fit), or
  // none when no free block is that large.
  std::optional<int32_t> TakeAtLeast(int64_t size) {
    const FreeBlockKey least{size, 0, 0, 0};
    if (in_tree_) return Remove(tree_.lower_bound(least));
    return Remove(std::lower_bound(sorted_.begin(), sorted_.end(), least));
  }

  // Removes the key that orders as `k`; returns its block, or none when there is none.
  std::optional<int32_t> Erase(const FreeBlockKey& k) {
    if (in_tree_) return Remove(tree_.find(k));
    const auto it = std::lower_bound(sorted_.begin(), sorted_.end(), k);
    return Remove(it != sorted_.end() && !(k < *it) ? it : sorted_.end());
  }

  size_t size() const { return in_tree_ ? tree_.size() : sorted_.size(); }

 private:
  static constexpr size_t kToTree = 128, kToVector = 32;

  using Tree = absl::btree_set<FreeBlockKey>;

  // Removes the key at `it` (end: none) and returns its block.
  std::optional<int32_t> Remove(Tree::iterator it) {
    if (it == tree_.end()) return std::nullopt;
    const int32_t block = it->block;
    tree_.erase(it);
    Shrunk();
    return block;
  }
  std::optional<int32_t> Remove(std::vector<FreeBlockKey>::iterator it) {
    if (it == sorted_.end()) return std::nullopt;
    const int32_t block = it->block;
    sorted_.erase(it);
    return block;
  }

  void Shrunk() {
    if (tree_.size() >= kToVector) return;
    sorted_.assign(tree_.begin(), tree_.end());
    tree_.clear();
    in_tree_ = false;
  }

  std::vector<FreeBlockKey> sorted_;  // while !in_tree_
  Tree tree_;
  bool in_tree_ = false;
};

}  // namespace sim::memory
