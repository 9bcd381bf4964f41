#include "sim/memory/caching_allocator.h"

#include <algorithm>

#include "sim/base/check.h"

namespace sim::memory {

namespace {

int64_t RoundUp(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

}  // namespace

int64_t CachingAllocator::RoundSize(int64_t bytes) {
  return bytes < kMinBlockSize ? kMinBlockSize : RoundUp(bytes, kMinBlockSize);
}

BlockHandle CachingAllocator::Allocate(int64_t bytes, int32_t stream) {
  SIM_CHECK(bytes > 0 && stream >= 0, "allocations are positive, streams numbered from 0");
  const int64_t size = RoundSize(bytes);
  const bool small = size <= kSmallSize;
  FreeSet& pool = Pool(small, stream);
  if (const std::optional<int32_t> block = pool.TakeAtLeast(size)) return Take(*block, size);
  if (!small && options_.expandable_segments) return Expand(stream, size);
  const int64_t segment_size = small                   ? kSmallBuffer
                               : size < kMinLargeAlloc ? kLargeBuffer
                                                       : RoundUp(size, kRoundLarge);
  return Take(NewSegment(small, stream, segment_size).block, size);
}

int32_t CachingAllocator::NewBlock(int32_t segment, int64_t offset, int64_t size) {
  int32_t id = static_cast<int32_t>(blocks_.size());
  if (!spare_blocks_.empty()) {
    id = spare_blocks_.back();
    spare_blocks_.pop_back();
  } else {
    blocks_.emplace_back();
  }
  blocks_[id] = Block{offset, size, segment, -1, -1, true};
  return id;
}

void CachingAllocator::DropBlock(int32_t block) {
  blocks_[block].segment = -1;
  spare_blocks_.push_back(block);
}

BlockHandle CachingAllocator::NewSegment(bool small, int32_t stream, int64_t size) {
  if (reserved_ + size > capacity_) ReleaseCachedSegments();
  Reserve(size);
  const int32_t id = static_cast<int32_t>(segments_.size());
  Segment seg;
  seg.stream = stream;
  seg.small = small;
  seg.size = size;
  seg.first = seg.last = NewBlock(id, 0, size);
  segments_.push_back(seg);
  ++live_segments_;
  return BlockHandle{seg.first};  // free, and not in the free set: Take takes it
}

BlockHandle CachingAllocator::Expand(int32_t stream, int64_t size) {
  auto [it, inserted] =
      expandable_of_stream_.emplace(stream, static_cast<int32_t>(segments_.size()));
  if (inserted) {
    Segment seg;
    seg.stream = stream;
    seg.expandable = true;
    segments_.push_back(seg);
    ++live_segments_;
  }
  const int32_t id = it->second;
  // The free tail (if any) grows; otherwise new pages start a free block at the end.
  int32_t tail = -1;
  int64_t tail_size = 0;
  if (const int32_t last = segments_[id].last; last >= 0 && blocks_[last].free) {
    tail = last;
    tail_size = blocks_[last].size;
    EraseFree(tail);
  }
  const int64_t pages = RoundUp(size - tail_size, kPageSize);
  if (reserved_ + pages > capacity_) ReleaseCachedSegments();
  Reserve(pages);
  Segment& seg = segments_[id];  // ReleaseCachedSegments does not touch expandable segments
  if (tail < 0) {
    tail = NewBlock(id, seg.size, 0);
    blocks_[tail].prev = seg.last;
    if (seg.last >= 0) blocks_[seg.last].next = tail;
    if (seg.first < 0) seg.first = tail;
    seg.last = tail;
  }
  seg.size += pages;
  blocks_[tail].size = tail_size + pages;
  return Take(tail, size);
}

BlockHandle CachingAllocator::Take(int32_t id, int64_t size) {
  Block& block = blocks_[id];
  SIM_CHECK(block.free && block.size >= size, "allocator took a block that does not fit");
  const int32_t segment = block.segment;
  segments_[segment].empty = false;
  const int64_t remaining = block.size - size;
  const bool split = segments_[segment].small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  block.free = false;
  if (split) {
    block.size = size;
    const int64_t rest_offset = block.offset + size;
    const int32_t rest = NewBlock(segment, rest_offset, remaining);  // may move blocks_
    Block& taken = blocks_[id];
    Block& r = blocks_[rest];
    r.prev = id;
    r.next = taken.next;
    if (taken.next >= 0) {
      blocks_[taken.next].prev = rest;
    } else {
      segments_[segment].last = rest;
    }
    taken.next = rest;
    InsertFree(rest);
  }
  allocated_ += blocks_[id].size;
  return BlockHandle{id};
}

void CachingAllocator::Free(BlockHandle handle) {
  SIM_CHECK(handle.block >= 0 && handle.block < static_cast<int32_t>(blocks_.size()) &&
                blocks_[handle.block].segment >= 0 && !blocks_[handle.block].free,
            "freed a block that is not allocated");
  const int32_t id = handle.block;
  const int32_t segment = blocks_[id].segment;
  allocated_ -= blocks_[id].size;
  blocks_[id].free = true;
  // Merge with the free neighbours: the next one into this, this into the previous one.
  int32_t merged = id;
  if (const int32_t next = blocks_[id].next; next >= 0 && blocks_[next].free) {
    EraseFree(next);
    Unlink(id, next);
  }
  if (const int32_t prev = blocks_[id].prev; prev >= 0 && blocks_[prev].free) {
    EraseFree(prev);
    Unlink(prev, id);
    merged = prev;
  }
  InsertFree(merged);
  Segment& seg = segments_[segment];
  if (!seg.expandable && seg.first == seg.last) {
    seg.empty = true;
    if (!seg.listed) {
      seg.listed = true;
      empty_.push_back(segment);
    }
  }
}

void CachingAllocator::Unlink(int32_t keep, int32_t absorbed) {
  Block& k = blocks_[keep];
  const Block& a = blocks_[absorbed];
  k.size += a.size;
  k.next = a.next;
  if (a.next >= 0) {
    blocks_[a.next].prev = keep;
  } else {
    segments_[k.segment].last = keep;
  }
  DropBlock(absorbed);
}

void CachingAllocator::Reserve(int64_t bytes) {
  reserved_ += bytes;
  if (reserved_ > reserved_peak_) reserved_peak_ = reserved_;
  if (reserved_ > capacity_) overflowed_ = true;
}

void CachingAllocator::ReleaseCachedSegments() {
  for (int32_t id : empty_) {
    Segment& seg = segments_[id];
    seg.listed = false;
    if (!seg.empty) continue;
    SIM_CHECK(!seg.released && seg.first >= 0 && seg.first == seg.last && blocks_[seg.first].free,
              "an empty segment holds a live block");
    EraseFree(seg.first);
    DropBlock(seg.first);
    seg.first = seg.last = -1;
    seg.released = true;
    seg.empty = false;
    reserved_ -= seg.size;
    --live_segments_;
  }
  empty_.clear();
}

void CachingAllocator::InsertFree(int32_t id) {
  const Block& b = blocks_[id];
  const Segment& seg = segments_[b.segment];
  FreeSet& pool = Pool(seg.small, seg.stream);
  const FreeKey key{b.size, b.segment, id, b.offset};
  pool.Insert(key);
}

void CachingAllocator::EraseFree(int32_t id) {
  const Block& b = blocks_[id];
  const Segment& seg = segments_[b.segment];
  FreeSet& pool = Pool(seg.small, seg.stream);
  const std::optional<int32_t> erased = pool.Erase(FreeKey{b.size, b.segment, id, b.offset});
  SIM_CHECK(erased == id, "a free block missing from its pool");
}

std::vector<int32_t> CachingAllocator::LiveSegments() const {
  std::vector<int32_t> live;
  for (size_t id = 0; id < segments_.size(); ++id) {
    if (!segments_[id].released) live.push_back(static_cast<int32_t>(id));
  }
  return live;
}

bool CachingAllocator::SameFuture(const CachingAllocator& o) const {
  if (capacity_ != o.capacity_ || options_.expandable_segments != o.options_.expandable_segments ||
      allocated_ != o.allocated_ || reserved_ != o.reserved_ ||
      live_segments_ != o.live_segments_ || overflowed_ != o.overflowed_ ||
      expandable_of_stream_.size() != o.expandable_of_stream_.size()) {
    return false;
  }
  // Segment ids only order the free blocks of equal size (FreeBlockKey), so the live segments
  // are compared in id order, whatever ids they have (an allocator that overflows releases its
  // cached segments and reserves new ones, with new ids, every micro-batch).
  const std::vector<int32_t> mine = LiveSegments(), theirs = o.LiveSegments();
  if (mine.size() != theirs.size()) return false;
  for (size_t i = 0; i < mine.size(); ++i) {
    const Segment &a = segments_[mine[i]], &b = o.segments_[theirs[i]];
    // `listed` only says whether the empty list names it; a release frees the `empty` ones.
    if (a.stream != b.stream || a.small != b.small || a.expandable != b.expandable ||
        a.empty != b.empty || a.size != b.size) {
      return false;
    }
    int32_t x = a.first, y = b.first;
    for (; x >= 0 && y >= 0; x = blocks_[x].next, y = o.blocks_[y].next) {
      const Block &p = blocks_[x], &q = o.blocks_[y];
      if (p.offset != q.offset || p.size != q.size || p.free != q.free) return false;
    }
    if (x >= 0 || y >= 0) return false;
  }
  for (auto a = expandable_of_stream_.begin(), b = o.expandable_of_stream_.begin();
       a != expandable_of_stream_.end(); ++a, ++b) {
    if (a->first != b->first || Rank(mine, a->second) != Rank(theirs, b->second)) return false;
  }
  return true;
}

}  // namespace sim::memory
