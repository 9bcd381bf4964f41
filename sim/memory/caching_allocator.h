#pragma once
// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), replayed over
// every allocation and free of a GPU's ledger, so that the reserved peak — what the process takes
// from the driver, and what runs out first — is simulated rather than estimated. The rules kept:
//
//   - every request is rounded up to a multiple of 512 B (kMinBlockSize);
//   - requests of at most 1 MiB (kSmallSize) come from the small pool, whose segments are 2 MiB
//     (kSmallBuffer); larger ones from the large pool: a 20 MiB segment (kLargeBuffer) for
//     requests below 10 MiB (kMinLargeAlloc), otherwise a segment of the request rounded up to
//     2 MiB (kRoundLarge);
//   - a free block is found best-fit (the smallest that is large enough) among the blocks of the
//     same pool *and stream*; blocks freed by one stream are never handed to another (a tensor
//     used on a second stream is returned only when that stream's work ends, as record_stream
//     makes it: the replay frees it at that moment);
//   - a block larger than the request is split when the remainder is at least 512 B (small
//     pool) or more than 1 MiB (large pool); freed blocks merge with free neighbours of their
//     segment;
//   - segments are kept (cached) until a request cannot be met within capacity: then every
//     segment that is entirely free is released (cudaFree) and the request retried, as
//     release_cached_blocks does before reporting an out-of-memory error;
//   - with `expandable_segments` (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) each
//     stream's large pool is one segment that grows by 2 MiB pages (20 MiB granularity is not
//     kept: pages are mapped as needed), so a request that fits no free block extends the
//     segment's free tail instead of reserving a segment of its own.
//
// Not modelled: max_split_size_mb and garbage_collection_threshold (off by default), the
// oversize-block rules that only apply with them, and empty_cache().

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "sim/base/units.h"
#include "sim/memory/free_index.h"

namespace sim::memory {

struct AllocatorOptions {
  bool expandable_segments = false;
};

// A live allocation: its block (an index the allocator keeps until the block is freed).
struct BlockHandle {
  int32_t block = -1;
};

class CachingAllocator {
 public:
  static constexpr int64_t kMinBlockSize = 512;
  static constexpr int64_t kSmallSize = 1 << 20;
  static constexpr int64_t kSmallBuffer = 2 << 20;
  static constexpr int64_t kLargeBuffer = 20 << 20;
  static constexpr int64_t kMinLargeAlloc = 10 << 20;
  static constexpr int64_t kRoundLarge = 2 << 20;
  static constexpr int64_t kPageSize = 2 << 20;  // expandable segments' mapping granularity

  // `capacity`: what the allocator may reserve in all (usable HBM less what other users of the
  // GPU hold); a request beyond it after releasing cached segments still succeeds (the replay
  // goes on to report the overflow) and is counted in overflowed().
  CachingAllocator(Bytes capacity, AllocatorOptions options)
      : capacity_(capacity.count()), options_(options) {}

  // Allocates `bytes` (> 0) for work on `stream`.
  BlockHandle Allocate(int64_t bytes, int32_t stream);
  void Free(BlockHandle block);

  static int64_t RoundSize(int64_t bytes);
  void set_capacity(Bytes capacity) { capacity_ = capacity.count(); }

  Bytes allocated() const { return Bytes::Count(allocated_); }  // rounded sizes of live blocks
  Bytes reserved() const { return Bytes::Count(reserved_); }
  Bytes reserved_peak() const { return Bytes::Count(reserved_peak_); }
  int64_t segments() const { return live_segments_; }
  bool overflowed() const { return overflowed_; }

  // Whether `o` answers every later sequence of calls as this does (a fold's state one period
  // on: sim/replay/state_period.h): the same capacity and counts, and the same live segments in
  // the same order, each with the same blocks by address, free or not. Block indices, segment
  // ids and the free sets' layout may differ: none decides where a request lands but the
  // segments' order. The peaks so far are history, not compared.
  bool SameFuture(const CachingAllocator& o) const;
  // The ids of the segments not released, in order.
  std::vector<int32_t> LiveSegments() const;
  // Where a live block lies, as SameFuture compares: its segment's place among the live ones
  // (`live`: LiveSegments()) and its offset.
  std::pair<int32_t, int64_t> Place(BlockHandle h, const std::vector<int32_t>& live) const {
    return {Rank(live, blocks_[h.block].segment), blocks_[h.block].offset};
  }

 private:
  // A block of a segment: blocks of a segment tile it in address order, linked both ways as
  // PyTorch's Block prev/next are, so that a free finds its neighbours without a search.
  struct Block {
    int64_t offset = 0, size = 0;
    int32_t segment = -1;
    int32_t prev = -1, next = -1;  // neighbours in the segment (-1 at its ends)
    bool free = true;
  };
  struct Segment {
    int32_t stream = 0;
    bool small = false;
    bool expandable = false;
    bool released = false;
    bool empty = false;   // one free block: what a release frees
    bool listed = false;  // in empty_ (which may still list it after it was taken from)
    int64_t size = 0;
    int32_t first = -1, last = -1;  // its blocks, by address
  };
  // Free blocks of one pool (small or large, one stream), ordered for best fit
  // (sim/memory/free_index.h).
  using FreeKey = FreeBlockKey;
  using FreeSet = FreeIndex;

  FreeSet& Pool(bool small, int32_t stream) {  // inline: called on every allocation and free
    const size_t index = 2 * static_cast<size_t>(stream) + (small ? 1 : 0);
    if (index >= pools_.size()) pools_.resize(index + 1);
    return pools_[index];
  }
  int32_t NewBlock(int32_t segment, int64_t offset, int64_t size);
  void DropBlock(int32_t block);
  BlockHandle NewSegment(bool small, int32_t stream, int64_t size);
  // Expandable segments: grows the stream's large segment so that its free tail holds `size`.
  BlockHandle Expand(int32_t stream, int64_t size);
  // Allocates `size` from the start of free block `block` (already out of its free set).
  BlockHandle Take(int32_t block, int64_t size);
  void Reserve(int64_t bytes);
  void ReleaseCachedSegments();
  void InsertFree(int32_t block);
  // Merges block `absorbed` into its lower neighbour `keep` (both free, out of the free sets).
  void Unlink(int32_t keep, int32_t absorbed);
  void EraseFree(int32_t block);
  // A segment's place among the live ones (`live`: LiveSegments()).
  static int32_t Rank(const std::vector<int32_t>& live, int32_t id) {
    return static_cast<int32_t>(std::lower_bound(live.begin(), live.end(), id) - live.begin());
  }

  int64_t capacity_;
  AllocatorOptions options_;
  std::vector<Segment> segments_;
  std::vector<Block> blocks_;
  std::vector<int32_t> spare_blocks_;  // slots of merged-away blocks, reused
  std::vector<FreeSet> pools_;         // by 2 * stream + small
  absl::btree_map<int32_t, int32_t> expandable_of_stream_;
  // Fixed segments listed when they became entirely free; one taken from since keeps its place
  // with `empty` cleared, and a release skips it. A list, not a sorted set: segments empty and
  // fill on almost every allocation and free, and a release is rare.
  std::vector<int32_t> empty_;
  int64_t allocated_ = 0, reserved_ = 0, reserved_peak_ = 0, live_segments_ = 0;
  bool overflowed_ = false;
};

}  // namespace sim::memory
