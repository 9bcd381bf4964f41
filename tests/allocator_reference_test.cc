// The caching-allocator model (sim/memory/caching_allocator.h) against a plain reference
// implementation of the same rules: blocks in a std::map per segment, one ordered std::set of
// free blocks keyed (small?, stream, size, segment, offset). The model keeps its blocks in
// linked slots and its free blocks in sorted vectors per pool, for speed; both must take the
// same block for every request, so that reserved memory matches after every step of long
// random sequences (several streams, small and large requests, segments released at capacity,
// expandable segments).

#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "sim/memory/caching_allocator.h"

using sim::Bytes;
using sim::memory::AllocatorOptions;
using sim::memory::BlockHandle;
using sim::memory::CachingAllocator;

namespace {

int64_t RoundUp(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// The rules of caching_allocator.h, written for clarity, not speed.
class ReferenceAllocator {
 public:
  using C = CachingAllocator;
  ReferenceAllocator(int64_t capacity, bool expandable)
      : capacity_(capacity), expandable_(expandable) {}

  std::pair<int32_t, int64_t> Allocate(int64_t bytes, int32_t stream) {
    const int64_t size = C::RoundSize(bytes);
    const bool small = size <= C::kSmallSize;
    const auto it = free_.lower_bound(Key{small, stream, size, 0, 0});
    if (it != free_.end() && std::get<0>(*it) == small && std::get<1>(*it) == stream) {
      return Take(std::get<3>(*it), std::get<4>(*it), size);
    }
    if (!small && expandable_) return Expand(stream, size);
    const int64_t segment_size = small                      ? C::kSmallBuffer
                                 : size < C::kMinLargeAlloc ? C::kLargeBuffer
                                                            : RoundUp(size, C::kRoundLarge);
    if (reserved_ + segment_size > capacity_) Release();
    Reserve(segment_size);
    segments_.push_back(Segment{stream, small, false, segment_size, {{0, {segment_size, true}}}});
    const int32_t id = static_cast<int32_t>(segments_.size()) - 1;
    free_.insert(Key{small, stream, segment_size, id, 0});
    return Take(id, 0, size);
  }

  void Free(std::pair<int32_t, int64_t> where) {
    Segment& seg = segments_[where.first];
    auto it = seg.blocks.find(where.second);
    allocated_ -= it->second.size;
    it->second.free = true;
    if (auto next = std::next(it); next != seg.blocks.end() && next->second.free) {
      Erase(where.first, next->first, next->second.size);
      it->second.size += next->second.size;
      seg.blocks.erase(next);
    }
    if (it != seg.blocks.begin()) {
      if (auto prev = std::prev(it); prev->second.free) {
        Erase(where.first, prev->first, prev->second.size);
        prev->second.size += it->second.size;
        seg.blocks.erase(it);
        it = prev;
      }
    }
    free_.insert(Key{seg.small, seg.stream, it->second.size, where.first, it->first});
  }

  int64_t allocated() const { return allocated_; }
  int64_t reserved() const { return reserved_; }
  int64_t reserved_peak() const { return peak_; }

 private:
  using Key = std::tuple<bool, int32_t, int64_t, int32_t, int64_t>;
  struct Block {
    int64_t size;
    bool free;
  };
  struct Segment {
    int32_t stream;
    bool small, expandable;
    int64_t size;
    std::map<int64_t, Block> blocks;
  };

  std::pair<int32_t, int64_t> Take(int32_t id, int64_t offset, int64_t size) {
    Segment& seg = segments_[id];
    Block& b = seg.blocks.at(offset);
    Erase(id, offset, b.size);
    const int64_t remaining = b.size - size;
    const bool split = seg.small ? remaining >= C::kMinBlockSize : remaining > C::kSmallSize;
    b.free = false;
    int64_t taken = b.size;
    if (split) {
      b.size = taken = size;
      seg.blocks.emplace(offset + size, Block{remaining, true});
      free_.insert(Key{seg.small, seg.stream, remaining, id, offset + size});
    }
    allocated_ += taken;
    return {id, offset};
  }

  std::pair<int32_t, int64_t> Expand(int32_t stream, int64_t size) {
    auto [it, inserted] = expandable_of_.emplace(stream, static_cast<int32_t>(segments_.size()));
    if (inserted) segments_.push_back(Segment{stream, false, true, 0, {}});
    const int32_t id = it->second;
    int64_t tail_offset = segments_[id].size, tail = 0;
    if (!segments_[id].blocks.empty()) {
      auto last = std::prev(segments_[id].blocks.end());
      if (last->second.free) {
        tail_offset = last->first;
        tail = last->second.size;
        Erase(id, tail_offset, tail);
      }
    }
    const int64_t pages = RoundUp(size - tail, C::kPageSize);
    if (reserved_ + pages > capacity_) Release();
    Reserve(pages);
    segments_[id].size += pages;
    segments_[id].blocks[tail_offset] = Block{tail + pages, true};
    free_.insert(Key{false, stream, tail + pages, id, tail_offset});
    return Take(id, tail_offset, size);
  }

  // Every fixed segment that is one free block goes back to the driver.
  void Release() {
    for (int32_t id = 0; id < static_cast<int32_t>(segments_.size()); ++id) {
      Segment& seg = segments_[id];
      if (seg.expandable || seg.blocks.size() != 1 || !seg.blocks.begin()->second.free) continue;
      Erase(id, 0, seg.blocks.begin()->second.size);
      seg.blocks.clear();
      reserved_ -= seg.size;
    }
  }
  void Reserve(int64_t bytes) {
    reserved_ += bytes;
    peak_ = std::max(peak_, reserved_);
  }
  void Erase(int32_t id, int64_t offset, int64_t size) {
    const Segment& seg = segments_[id];
    REQUIRE(free_.erase(Key{seg.small, seg.stream, size, id, offset}) == 1);
  }

  int64_t capacity_;
  bool expandable_;
  std::vector<Segment> segments_;
  std::set<Key> free_;
  std::map<int32_t, int32_t> expandable_of_;
  int64_t allocated_ = 0, reserved_ = 0, peak_ = 0;
};

// A deterministic random workload: mostly allocations early, frees later, sizes from 1 B to
// 64 MiB (log-uniform, so that both pools and every segment size are exercised), three streams.
void Compare(uint64_t seed, int64_t capacity, bool expandable) {
  std::mt19937_64 rng(seed);
  CachingAllocator model(Bytes::Count(capacity), AllocatorOptions{expandable});
  ReferenceAllocator ref(capacity, expandable);
  std::vector<std::pair<BlockHandle, std::pair<int32_t, int64_t>>> live;
  std::uniform_real_distribution<double> log_size(0.0, 26.0);
  for (int step = 0; step < 20000; ++step) {
    const bool allocate = live.empty() || rng() % 100 < (step % 4000 < 2500 ? 60 : 40);
    if (allocate) {
      const int64_t bytes = static_cast<int64_t>(std::exp2(log_size(rng))) + 1;
      const int32_t stream = static_cast<int32_t>(rng() % 3);
      live.emplace_back(model.Allocate(bytes, stream), ref.Allocate(bytes, stream));
    } else {
      const size_t k = rng() % live.size();
      model.Free(live[k].first);
      ref.Free(live[k].second);
      live[k] = live.back();
      live.pop_back();
    }
    INFO("seed " << seed << " step " << step);
    REQUIRE(model.allocated().count() == ref.allocated());
    REQUIRE(model.reserved().count() == ref.reserved());
    REQUIRE(model.reserved_peak().count() == ref.reserved_peak());
  }
}

}  // namespace

TEST_CASE("the allocator model takes the block the reference rules take, step by step",
          "[allocator]") {
  constexpr int64_t kGiB = int64_t{1} << 30;
  for (uint64_t seed : {1, 2, 3}) {
    Compare(seed, 64 * kGiB, false);  // never at capacity: segments only accumulate
    Compare(seed, 2 * kGiB, false);   // at capacity: cached segments are released
    Compare(seed, 2 * kGiB, true);    // expandable segments
  }
}
