#include "sim/memory/ledger.h"

#include "sim/base/check.h"

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
    live_[{static_cast<int>(category), delta.count()}].push_back(
        allocator_.Allocate(delta.count(), stream));
  } else {
    auto it = live_.find({static_cast<int>(category), -delta.count()});
    if (it == live_.end() || it->second.empty()) {
      ++unmatched_frees_;
    } else {
      allocator_.Free(it->second.back());
      it->second.pop_back();
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

bool MemoryLedger::SameTensors(const MemoryLedger& o) const {
  if (capacity_ != o.capacity_ || current_ != o.current_ || allocated_ != o.allocated_ ||
      persistent_ != o.persistent_ || outside_ != o.outside_ ||
      unmatched_frees_ != o.unmatched_frees_) {
    return false;
  }
  // Keys whose blocks were all freed may stay behind with an empty list: count the others.
  auto held = [](const auto& live) {
    size_t n = 0;
    for (const auto& [key, blocks] : live) n += blocks.empty() ? 0 : 1;
    return n;
  };
  if (held(live_) != held(o.live_)) return false;
  for (const auto& [key, blocks] : live_) {
    if (blocks.empty()) continue;
    const auto it = o.live_.find(key);
    if (it == o.live_.end() || it->second.size() != blocks.size()) return false;
  }
  return true;
}

bool MemoryLedger::SameFuture(const MemoryLedger& o) const {
  if (!SameTensors(o) || !allocator_.SameFuture(o.allocator_)) return false;
  const std::vector<int32_t> mine = allocator_.LiveSegments(), theirs = o.allocator_.LiveSegments();
  for (const auto& [key, blocks] : live_) {
    const auto it = o.live_.find(key);
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (allocator_.Place(blocks[i], mine) != o.allocator_.Place(it->second[i], theirs)) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace sim::memory
