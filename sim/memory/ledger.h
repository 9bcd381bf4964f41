#pragma once
// The per-GPU memory ledger of the replay: every allocation and free at its event time, by
// category (sim/spec/memory_category.h) and owner op. It keeps the running total per category,
// the peak of the total with the breakdown at that instant (which sums to the peak exactly), and
// the first moment the total exceeds the GPU's capacity.
//
// Every allocation and free (except the runtime reserve, held outside PyTorch) is also replayed
// through a model of the caching allocator (caching_allocator.h): a free releases the live
// block of its category and size allocated last, so the program must free tensors one by one,
// at the sizes they were allocated with. reserved() is what the allocator holds from the driver
// plus the runtime reserve: the GPU memory the process takes.
//
// Invariants, checked on every change (internal errors, not input errors): no category goes
// negative. At the end of a step, Transient() is zero: everything but the persistent states has
// been freed.

#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "sim/base/units.h"
#include "sim/memory/caching_allocator.h"
#include "sim/spec/memory_category.h"

namespace sim::memory {

using Breakdown = std::array<Bytes, kNumMemCategories>;

struct MemoryChange {
  Duration time;
  std::optional<int32_t> op;  // nullopt for the persistent states allocated before the step
  MemCategory category;
  Bytes delta;
  Bytes allocated;  // total after the change
  Bytes reserved;   // caching allocator's segments + runtime reserve after the change
};

struct Overflow {
  std::optional<int32_t> op;
  Duration time;
  Bytes excess;  // reserved − capacity at that moment
};

class MemoryLedger {
 public:
  MemoryLedger(Bytes capacity, bool record_changes, AllocatorOptions allocator = {})
      : capacity_(capacity), record_(record_changes), allocator_(capacity, allocator) {}
  // The usable memory the ledger holds the step to (its GPU's).
  Bytes capacity() const { return capacity_; }

  // `op`: the op that allocates or frees, kNoOp for the persistent state. `stream`: the stream
  // of that op (blocks are reused within their stream). The op is a plain index, not an
  // optional: building an optional per call stalled the replay (a 64-bit load of a 32-bit and
  // an 8-bit store just made, on every memory action; perf).
  static constexpr int32_t kNoOp = -1;
  void Apply(MemCategory category, Bytes delta, Duration time, int32_t op, int32_t stream = 0);
  // Marks the current contents as the persistent level Transient() is measured against.
  void MarkPersistent() { persistent_ = allocated_; }

  Bytes allocated() const { return allocated_; }
  Bytes Transient() const { return allocated_ - persistent_; }
  Bytes peak() const { return peak_; }
  const Breakdown& peak_breakdown() const { return peak_breakdown_; }
  Duration peak_time() const { return peak_time_; }
  std::optional<int32_t> peak_op() const { return peak_op_; }
  // The first moment the reserved memory exceeds capacity (allocations fail).
  const std::optional<Overflow>& first_overflow() const { return first_overflow_; }
  Bytes reserved() const { return allocator_.reserved() + outside_; }
  Bytes reserved_peak() const { return reserved_peak_; }
  // Frees that matched no live block of their category and size (a program defect; tests
  // require zero).
  int64_t unmatched_frees() const { return unmatched_frees_; }
  const Breakdown& current() const { return current_; }
  // Each category's own high-water mark over the step (not simultaneous: they need not sum to
  // the peak).
  const Breakdown& category_peaks() const { return category_peaks_; }
  const std::vector<MemoryChange>& changes() const { return changes_; }
  // The recorded changes handed out and taken back (a replay's saved state copies its ledgers
  // without them: sim/replay/replay_listener.h), and a state's changes put before those
  // recorded since (a replay gone on from that state).
  std::vector<MemoryChange> TakeChanges() { return std::exchange(changes_, {}); }
  void PutChanges(std::vector<MemoryChange> changes) { changes_ = std::move(changes); }
  void PrependChanges(const MemoryChange* begin, const MemoryChange* end) {
    changes_.insert(changes_.begin(), begin, end);
  }
  // Whether `o` answers every later change as this does (a fold's state one period on:
  // sim/replay/state_period.h): the same totals by category, the same live blocks by category
  // and size in the same order, the same allocator. Peaks, moments and the first overflow are
  // history, not compared.
  bool SameFuture(const MemoryLedger& o) const;
  // Whether `o` holds the same tensors (totals by category, live blocks by category and size,
  // as many of each) as this, wherever its allocator placed them: SameFuture but for the
  // allocator.
  bool SameTensors(const MemoryLedger& o) const;
  // A fold that replayed the allocator alone over the folded periods (sim/replay/fold.cc) sets
  // the reserved peak it found there.
  void SetReservedPeak(Bytes b) { reserved_peak_ = b; }
  // Micro-batch folding (sim/replay/fold.h) moves a peak or overflow that happens after the
  // folded micro-batches (the optimizer's, at the end of the step) by the time they add.
  void ShiftLateMoments(Duration peak, Duration overflow) {
    peak_time_ += peak;
    if (first_overflow_) first_overflow_->time += overflow;
  }

 private:
  Bytes capacity_;
  bool record_;
  Breakdown current_{};
  Breakdown category_peaks_{};
  Bytes allocated_, persistent_, peak_;
  Breakdown peak_breakdown_{};
  Duration peak_time_;
  std::optional<int32_t> peak_op_;
  std::optional<Overflow> first_overflow_;
  std::vector<MemoryChange> changes_;
  CachingAllocator allocator_;
  Bytes outside_;  // the runtime reserve: not the allocator's
  Bytes reserved_peak_;
  int64_t unmatched_frees_ = 0;
  // Live blocks by (category, size), the last allocated at the back: lists_[list_of_[key]],
  // key = LiveKey(category, size). A list, once made, keeps its index (an empty one stays),
  // so that a slot per Fibonacci mix of the key (recent_, sim/base/slot_mix.h) can name it:
  // hashing the key and comparing it in the hash map's probe were half of Apply's cycles
  // (perf, BM_ReplayDefault).
  static uint64_t LiveKey(MemCategory category, int64_t bytes) {
    return static_cast<uint64_t>(bytes) << 4 | static_cast<uint64_t>(category);
  }
  // The list of `key`: made when `make`, else -1 when there is none.
  int32_t ListOf(uint64_t key, bool make);
  struct RecentList {
    uint64_t key = ~uint64_t{0};
    int32_t list = -1;
  };
  absl::flat_hash_map<uint64_t, int32_t> list_of_;
  std::vector<std::vector<BlockHandle>> lists_;
  std::array<RecentList, 64> recent_{};
};

}  // namespace sim::memory
