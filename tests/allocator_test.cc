// The caching-allocator model against hand-worked sequences (rules in
// sim/memory/caching_allocator.h).

#include <catch2/catch.hpp>
#include <optional>
#include <random>
#include <set>

#include "sim/memory/caching_allocator.h"
#include "sim/memory/free_index.h"
#include "sim/memory/ledger.h"

using sim::Bytes;
using sim::memory::AllocatorOptions;
using sim::memory::CachingAllocator;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

CachingAllocator Allocator(int64_t capacity_mib = 1 << 20, bool expandable = false) {
  return CachingAllocator(Bytes::Count(capacity_mib * kMiB), AllocatorOptions{expandable});
}

}  // namespace

TEST_CASE("requests are rounded to 512 B and small ones share a 2 MiB segment", "[allocator]") {
  CachingAllocator a = Allocator();
  CHECK(CachingAllocator::RoundSize(1) == 512);
  CHECK(CachingAllocator::RoundSize(513) == 1024);
  a.Allocate(1000, 0);  // 1024 B from a new 2 MiB small segment
  a.Allocate(kMiB, 0);  // 1 MiB: still small, split from the same segment
  CHECK(a.allocated().count() == 1024 + kMiB);
  CHECK(a.reserved().count() == 2 * kMiB);
  CHECK(a.segments() == 1);
}

TEST_CASE("a large request below 10 MiB takes a 20 MiB segment, split for the next",
          "[allocator]") {
  CachingAllocator a = Allocator();
  a.Allocate(4 * kMiB, 0);
  CHECK(a.reserved().count() == 20 * kMiB);
  // The remaining 16 MiB (> 1 MiB) was split off and serves the next request.
  a.Allocate(6 * kMiB, 0);
  CHECK(a.reserved().count() == 20 * kMiB);
  CHECK(a.segments() == 1);
  // A request of 10 MiB or more gets its own segment, rounded to 2 MiB.
  a.Allocate(11 * kMiB + 1, 0);
  CHECK(a.reserved().count() == 20 * kMiB + 12 * kMiB);
}

TEST_CASE("a remainder of at most 1 MiB is not split off a large block", "[allocator]") {
  CachingAllocator a = Allocator();
  const auto big = a.Allocate(12 * kMiB, 0);  // a 12 MiB segment
  a.Free(big);
  a.Allocate(11 * kMiB + 512 * 1024, 0);  // 0.5 MiB would remain: the whole block is taken
  CHECK(a.allocated().count() == 12 * kMiB);
  a.Allocate(1536 * 1024, 0);  // 1.5 MiB: a small request? no, > 1 MiB: a new 20 MiB segment
  CHECK(a.reserved().count() == 12 * kMiB + 20 * kMiB);
}

TEST_CASE("freed blocks are reused best-fit and merge with free neighbours", "[allocator]") {
  CachingAllocator a = Allocator();
  const auto x = a.Allocate(30 * kMiB, 0);
  a.Free(x);
  const auto p = a.Allocate(12 * kMiB, 0);  // split: 12 + 18
  const auto q = a.Allocate(18 * kMiB, 0);  // takes the 18
  CHECK(a.reserved().count() == 30 * kMiB);
  a.Free(p);
  a.Free(q);  // merges back into one free 30 MiB block
  a.Allocate(30 * kMiB, 0);
  CHECK(a.reserved().count() == 30 * kMiB);
  CHECK(a.segments() == 1);
}

TEST_CASE("fragmentation: a free hole too small for the request costs a new segment",
          "[allocator]") {
  CachingAllocator a = Allocator();
  const auto first = a.Allocate(40 * kMiB, 0);
  a.Allocate(40 * kMiB, 0);
  a.Free(first);             // 40 MiB cached, free
  a.Allocate(50 * kMiB, 0);  // does not fit the hole
  CHECK(a.allocated().count() == 90 * kMiB);
  CHECK(a.reserved().count() == 130 * kMiB);  // 40 of them reserved but unused
  CHECK(a.reserved_peak().count() == 130 * kMiB);
}

TEST_CASE("a block freed by one stream is not reused by another", "[allocator]") {
  CachingAllocator a = Allocator();
  const auto comm = a.Allocate(64 * kMiB, /*stream=*/1);  // an all-gather buffer
  a.Free(comm);
  a.Allocate(64 * kMiB, /*stream=*/0);  // the compute stream needs its own segment
  CHECK(a.reserved().count() == 128 * kMiB);
  a.Allocate(64 * kMiB, /*stream=*/1);  // the comm stream reuses its cached block
  CHECK(a.reserved().count() == 128 * kMiB);
}

TEST_CASE("at capacity, cached free segments are released before a new one is reserved",
          "[allocator]") {
  CachingAllocator a = Allocator(/*capacity_mib=*/100);
  const auto x = a.Allocate(60 * kMiB, 0);
  a.Free(x);
  a.Allocate(70 * kMiB, 0);  // 60 + 70 > 100: the free 60 MiB segment is released first
  CHECK(a.reserved().count() == 70 * kMiB);
  CHECK(a.reserved_peak().count() == 70 * kMiB);
  CHECK_FALSE(a.overflowed());
  a.Allocate(40 * kMiB, 0);
  CHECK(a.overflowed());
}

TEST_CASE("a segment emptied twice is released once, one refilled since it emptied is kept",
          "[allocator]") {
  CachingAllocator a = Allocator(/*capacity_mib=*/100);
  // Two 30 MiB segments (requests of 10 MiB and more get a segment of their own size).
  const auto x = a.Allocate(30 * kMiB, 0);
  const auto y = a.Allocate(30 * kMiB, 0);
  a.Free(x);  // x's segment is empty
  a.Free(y);  // so is y's
  // Best fit among equal sizes takes the lower segment, x's: it is live again.
  const auto x2 = a.Allocate(30 * kMiB, 0);
  a.Free(x2);                                // x's segment empties a second time
  const auto y2 = a.Allocate(30 * kMiB, 0);  // x's segment again
  CHECK(a.reserved().count() == 60 * kMiB);
  // 60 + 50 > 100: the one empty segment (y's, 30 MiB) is released, once; x's holds y2.
  a.Allocate(50 * kMiB, 0);
  CHECK(a.reserved().count() == 60 * kMiB - 30 * kMiB + 50 * kMiB);
  CHECK(a.segments() == 2);
  CHECK_FALSE(a.overflowed());
  a.Free(y2);  // x's segment empties after the release: listed anew, the next release frees it
  a.Allocate(50 * kMiB, 0);  // 80 + 50 > 100: x's 30 MiB goes, 50 + 50 MiB stay
  CHECK(a.reserved().count() == 100 * kMiB);
  CHECK(a.segments() == 2);
  CHECK_FALSE(a.overflowed());
}

TEST_CASE("expandable segments grow one segment per stream instead of caching holes",
          "[allocator]") {
  CachingAllocator a = Allocator(1 << 20, /*expandable=*/true);
  const auto first = a.Allocate(40 * kMiB, 0);
  a.Allocate(40 * kMiB, 0);
  a.Free(first);
  // The 40 MiB hole at the start cannot hold 50 MiB; the segment's end is mapped further.
  a.Allocate(50 * kMiB, 0);
  CHECK(a.reserved().count() == 130 * kMiB);
  CHECK(a.segments() == 1);
  // A freed tail is extended rather than left beside a new mapping.
  CachingAllocator b = Allocator(1 << 20, true);
  b.Allocate(40 * kMiB, 0);
  const auto tail = b.Allocate(40 * kMiB, 0);
  b.Free(tail);
  b.Allocate(50 * kMiB, 0);  // 40 MiB free tail + 10 MiB mapped
  CHECK(b.reserved().count() == 90 * kMiB);
}

TEST_CASE("the ledger frees a communication buffer only when its collective ends", "[allocator]") {
  // A gradient bucket allocated on the compute stream and reduced on the comm stream is freed
  // at the collective's end (record_stream's delayed free): until then a compute-stream request
  // of the same size cannot reuse it.
  sim::memory::MemoryLedger ledger(Bytes::GiB(1), /*record_changes=*/false);
  using sim::Duration;
  using sim::MemCategory;
  const Bytes bucket = Bytes::Count(25 * kMiB);
  ledger.Apply(MemCategory::kCommBuffers, bucket, Duration::Zero(), 0, /*stream=*/0);
  ledger.Apply(MemCategory::kActivations, bucket, Duration::Zero(), 1, 0);  // before the free
  CHECK(ledger.reserved().count() == 2 * 26 * kMiB);
  ledger.Apply(MemCategory::kCommBuffers, -bucket, Duration::Zero(), 2, 1);  // collective ends
  ledger.Apply(MemCategory::kActivations, bucket, Duration::Zero(), 3, 0);   // reuses it now
  CHECK(ledger.reserved().count() == 2 * 26 * kMiB);
  CHECK(ledger.unmatched_frees() == 0);
}

TEST_CASE("a pool's free index answers as one ordered set", "[allocator]") {
  // sim/memory/free_index.h keeps each size's blocks in a vector of its own, the least last,
  // where an erased block's place stays behind, stale, until it reaches the back or the stale
  // places outnumber the live ones; a size left without blocks keeps its place until empty
  // sizes are half the index. Through ties on one size, sizes emptied and refilled, many sizes
  // emptied at once, and block indices reused (as the allocator reuses merged-away blocks'),
  // every best fit and every erase must be what a std::set of the same keys gives.
  using sim::memory::FreeBlockKey;
  sim::memory::FreeIndex index;
  std::set<FreeBlockKey> ref;
  std::mt19937_64 rng(7);
  int32_t next_block = 0;
  std::vector<int32_t> spare;  // indices of blocks out of the index, reused as the allocator does
  int64_t distinct_sizes = 16;
  auto insert = [&] {
    int32_t block = next_block;
    if (!spare.empty() && rng() % 2) block = spare.back();
    const FreeBlockKey k{static_cast<int64_t>(rng() % distinct_sizes + 1) * 512,
                         static_cast<int32_t>(rng() % 8), block,
                         static_cast<int64_t>(rng() % 4096) * 512};
    if (!ref.insert(k).second) return;
    if (block == next_block) {
      ++next_block;
    } else {
      spare.pop_back();
    }
    index.Insert(k);
  };
  auto take = [&] {
    const int64_t size = static_cast<int64_t>(rng() % (distinct_sizes + 2) + 1) * 512;
    const auto it = ref.lower_bound(FreeBlockKey{size, 0, 0, 0});
    const std::optional<int32_t> want =
        it == ref.end() ? std::nullopt : std::optional<int32_t>(it->block);
    if (it != ref.end()) {
      ref.erase(it);
      spare.push_back(*want);
    }
    CHECK(index.TakeAtLeast(size) == want);
  };
  auto erase = [&] {
    if (ref.empty()) return;
    auto it = ref.begin();
    std::advance(it, static_cast<long>(rng() % ref.size()));
    const FreeBlockKey k = *it;
    ref.erase(it);
    CHECK(index.Erase(k) == k.block);
    CHECK_FALSE(index.Erase(k).has_value());  // gone
    spare.push_back(k.block);
  };
  // Few sizes (ties broken by segment and offset), then hundreds of sizes emptied down to a
  // handful, then few again over the sizes left behind.
  for (const int64_t sizes : {16, 400, 4}) {
    distinct_sizes = sizes;
    for (int i = 0; i < 600; ++i) insert();
    while (ref.size() > 10) (rng() % 2 ? take() : erase());
    for (int i = 0; i < 2000; ++i) (rng() % 3 == 0 ? take() : rng() % 3 == 0 ? erase() : insert());
    REQUIRE(index.size() == ref.size());
  }
  while (!ref.empty()) erase();
  CHECK(index.size() == 0);
  CHECK_FALSE(index.TakeAtLeast(512).has_value());
}
