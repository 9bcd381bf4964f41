#include "sim/memory/ledger.h"

#include "sim/base/check.h"

namespace sim::memory {

void MemoryLedger::Apply(MemCategory category, Bytes delta, Duration time,
                         std::optional<int32_t> op) {
  Bytes& slot = current_[static_cast<int>(category)];
  slot += delta;
  SIM_CHECK(slot >= Bytes(), "a memory category went negative");
  Bytes& high = category_peaks_[static_cast<int>(category)];
  if (slot > high) high = slot;
  allocated_ += delta;
  if (record_) changes_.push_back({time, op, category, delta, allocated_});
  // Strictly greater: the first moment a peak is reached is the one reported.
  if (allocated_ > peak_) {
    peak_ = allocated_;
    peak_breakdown_ = current_;
    peak_time_ = time;
    peak_op_ = op;
  }
  if (!first_overflow_ && allocated_ > capacity_) {
    first_overflow_ = Overflow{op, time, allocated_ - capacity_};
  }
}

}  // namespace sim::memory
