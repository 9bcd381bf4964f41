#include "sim/memory/ledger.h"

#include "sim/base/check.h"
#include "sim/base/slot_mix.h"

namespace sim::memory {

void MemoryLedger::Apply(MemCategory category, Bytes delta, Duration time, int32_t op_index,
                         int32_t stream) {
  const auto op = [op_index] {
    return op_index == kNoOp ? std::nullopt : std::optional<int32_t>(op_index);
  };
  if (delta == Bytes()) return;
  Bytes& slot = current_[static_cast<int>(category)];
  slot += delta;
  SIM_CHECK(slot >= Bytes(), "a memory category went negative");
  Bytes& high = category_peaks_[static_cast<int>(category)];
  if (slot > high) high = slot;
  allocated_ += delta;
  if (category == MemCategory::kReserved) {
    outside_ += delta;
    allocator_.set_capacity(capacity_ - outside_);
  } else if (delta > Bytes()) {
    const BlockHandle block = allocator_.Allocate(delta.count(), stream);
    lists_[ListOf(LiveKey(category, delta.count()), /*make=*/true)].push_back(block);
  } else {
    const int32_t list = ListOf(LiveKey(category, -delta.count()), /*make=*/false);
    if (list < 0 || lists_[list].empty()) {
      ++unmatched_frees_;
    } else {
      allocator_.Free(lists_[list].back());
      lists_[list].pop_back();
    }
  }
  const Bytes reserved = allocator_.reserved() + outside_;
  if (reserved > reserved_peak_) reserved_peak_ = reserved;
  if (record_) changes_.push_back({time, op(), category, delta, allocated_, reserved});
  // Strictly greater: the first moment a peak is reached is the one reported.
  if (allocated_ > peak_) {
    peak_ = allocated_;
    peak_breakdown_ = current_;
    peak_time_ = time;
    peak_op_ = op();
  }
  if (!first_overflow_ && reserved > capacity_) {
    first_overflow_ = Overflow{op(), time, reserved - capacity_};
  }
}

int32_t MemoryLedger::ListOf(uint64_t key, bool make) {
  RecentList& r = recent_[FibonacciSlot<6>(key)];
  if (r.key == key) return r.list;
  int32_t list = -1;
  if (const auto it = list_of_.find(key); it != list_of_.end()) {
    list = it->second;
  } else if (make) {
    list = static_cast<int32_t>(lists_.size());
    lists_.emplace_back();
    list_of_.emplace(key, list);
  } else {
    return -1;
  }
  r = {key, list};
  return list;
}

bool MemoryLedger::SameTensors(const MemoryLedger& o) const {
  if (capacity_ != o.capacity_ || current_ != o.current_ || allocated_ != o.allocated_ ||
      persistent_ != o.persistent_ || outside_ != o.outside_ ||
      unmatched_frees_ != o.unmatched_frees_) {
    return false;
  }
  // Keys whose blocks were all freed stay behind with an empty list: count the others.
  auto held = [](const MemoryLedger& l) {
    size_t n = 0;
    for (const auto& blocks : l.lists_) n += blocks.empty() ? 0 : 1;
    return n;
  };
  if (held(*this) != held(o)) return false;
  for (const auto& [key, list] : list_of_) {
    const std::vector<BlockHandle>& blocks = lists_[list];
    if (blocks.empty()) continue;
    const auto it = o.list_of_.find(key);
    if (it == o.list_of_.end() || o.lists_[it->second].size() != blocks.size()) return false;
  }
  return true;
}

bool MemoryLedger::SameFuture(const MemoryLedger& o) const {
  if (!SameTensors(o) || !allocator_.SameFuture(o.allocator_)) return false;
  const std::vector<int32_t> mine = allocator_.LiveSegments(), theirs = o.allocator_.LiveSegments();
  for (const auto& [key, list] : list_of_) {
    const std::vector<BlockHandle>& blocks = lists_[list];
    if (blocks.empty()) continue;
    const std::vector<BlockHandle>& others = o.lists_[o.list_of_.find(key)->second];
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (allocator_.Place(blocks[i], mine) != o.allocator_.Place(others[i], theirs)) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace sim::memory
