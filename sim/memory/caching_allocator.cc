#include "sim/memory/caching_allocator.h"

#include "sim/base/check.h"

namespace sim::memory {

namespace {

int64_t RoundUp(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

}  // namespace

int64_t CachingAllocator::RoundSize(int64_t bytes) {
  return bytes < kMinBlockSize ? kMinBlockSize : RoundUp(bytes, kMinBlockSize);
}

BlockHandle CachingAllocator::Allocate(int64_t bytes, int32_t stream) {
  SIM_CHECK(bytes > 0, "allocations are positive");
  const int64_t size = RoundSize(bytes);
  const bool small = size <= kSmallSize;
  if (std::optional<BlockHandle> hit = FindFree(small, stream, size)) {
    return Take(hit->segment, hit->offset, size);
  }
  if (!small && options_.expandable_segments) return Expand(stream, size);
  const int64_t segment_size = small                   ? kSmallBuffer
                               : size < kMinLargeAlloc ? kLargeBuffer
                                                       : RoundUp(size, kRoundLarge);
  const BlockHandle segment = NewSegment(small, stream, segment_size);
  return Take(segment.segment, 0, size);
}

std::optional<BlockHandle> CachingAllocator::FindFree(bool small, int32_t stream, int64_t size) {
  const auto it = free_.lower_bound(FreeKey{small, stream, size, 0, 0});
  if (it == free_.end()) return std::nullopt;
  const auto& [s, st, sz, segment, offset] = *it;
  if (s != small || st != stream) return std::nullopt;
  return BlockHandle{segment, offset};
}

BlockHandle CachingAllocator::NewSegment(bool small, int32_t stream, int64_t size) {
  if (reserved_ + size > capacity_) ReleaseCachedSegments();
  Reserve(size);
  Segment seg;
  seg.stream = stream;
  seg.small = small;
  seg.size = size;
  seg.blocks.emplace(0, Block{size, true});
  segments_.push_back(std::move(seg));
  ++live_segments_;
  InsertFree(static_cast<int32_t>(segments_.size()) - 1, 0, size);
  return BlockHandle{static_cast<int32_t>(segments_.size()) - 1, 0};
}

BlockHandle CachingAllocator::Expand(int32_t stream, int64_t size) {
  auto [it, inserted] =
      expandable_of_stream_.emplace(stream, static_cast<int32_t>(segments_.size()));
  if (inserted) {
    Segment seg;
    seg.stream = stream;
    seg.expandable = true;
    segments_.push_back(std::move(seg));
    ++live_segments_;
  }
  const int32_t id = it->second;
  Segment& seg = segments_[id];
  // The free tail (if any) grows; otherwise new pages start a free block at the end.
  int64_t tail_offset = seg.size, tail = 0;
  if (!seg.blocks.empty()) {
    auto last = std::prev(seg.blocks.end());
    if (last->second.free) {
      tail_offset = last->first;
      tail = last->second.size;
      EraseFree(id, tail_offset, tail);
    }
  }
  const int64_t pages = RoundUp(size - tail, kPageSize);
  if (reserved_ + pages > capacity_) ReleaseCachedSegments();
  Reserve(pages);
  Segment& grown = segments_[id];  // ReleaseCachedSegments does not touch expandable segments
  grown.size += pages;
  grown.blocks[tail_offset] = Block{tail + pages, true};
  InsertFree(id, tail_offset, tail + pages);
  return Take(id, tail_offset, size);
}

BlockHandle CachingAllocator::Take(int32_t segment, int64_t offset, int64_t size) {
  Segment& seg = segments_[segment];
  Block& block = seg.blocks.at(offset);
  SIM_CHECK(block.free && block.size >= size, "allocator took a block that does not fit");
  empty_.erase(segment);
  EraseFree(segment, offset, block.size);
  const int64_t remaining = block.size - size;
  const bool split = seg.small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  block.free = false;
  if (split) {
    block.size = size;
    seg.blocks.emplace(offset + size, Block{remaining, true});
    InsertFree(segment, offset + size, remaining);
  }
  allocated_ += block.size;
  return BlockHandle{segment, offset};
}

void CachingAllocator::Free(BlockHandle handle) {
  Segment& seg = segments_.at(handle.segment);
  auto it = seg.blocks.find(handle.offset);
  SIM_CHECK(it != seg.blocks.end() && !it->second.free, "freed a block that is not allocated");
  allocated_ -= it->second.size;
  it->second.free = true;
  // Merge with the free neighbours.
  if (auto next = std::next(it); next != seg.blocks.end() && next->second.free) {
    EraseFree(handle.segment, next->first, next->second.size);
    it->second.size += next->second.size;
    seg.blocks.erase(next);
  }
  if (it != seg.blocks.begin()) {
    auto prev = std::prev(it);
    if (prev->second.free) {
      EraseFree(handle.segment, prev->first, prev->second.size);
      prev->second.size += it->second.size;
      seg.blocks.erase(it);
      it = prev;
    }
  }
  InsertFree(handle.segment, it->first, it->second.size);
  if (!seg.expandable && seg.blocks.size() == 1) empty_.insert(handle.segment);
}

void CachingAllocator::Reserve(int64_t bytes) {
  reserved_ += bytes;
  if (reserved_ > reserved_peak_) reserved_peak_ = reserved_;
  if (reserved_ > capacity_) overflowed_ = true;
}

void CachingAllocator::ReleaseCachedSegments() {
  for (int32_t id : empty_) {
    Segment& seg = segments_[id];
    const Block& only = seg.blocks.begin()->second;
    SIM_CHECK(!seg.released && seg.blocks.size() == 1 && only.free,
              "an empty segment holds a live block");
    EraseFree(id, 0, only.size);
    seg.blocks.clear();
    seg.released = true;
    reserved_ -= seg.size;
    --live_segments_;
  }
  empty_.clear();
}

void CachingAllocator::InsertFree(int32_t segment, int64_t offset, int64_t size) {
  const Segment& seg = segments_[segment];
  free_.insert(FreeKey{seg.small, seg.stream, size, segment, offset});
}

void CachingAllocator::EraseFree(int32_t segment, int64_t offset, int64_t size) {
  const Segment& seg = segments_[segment];
  free_.erase(FreeKey{seg.small, seg.stream, size, segment, offset});
}

}  // namespace sim::memory
