#pragma once
// The per-GPU memory ledger of the replay: every allocation and free at its event time, by
// category (sim/spec/memory_category.h) and owner op. It keeps the running total per category,
// the peak of the total with the breakdown at that instant (which sums to the peak exactly), and
// the first moment the total exceeds the GPU's capacity.
//
// Invariants, checked on every change (internal errors, not input errors): no category goes
// negative. At the end of a step, Transient() is zero: everything but the persistent states has
// been freed.

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "sim/base/units.h"
#include "sim/spec/memory_category.h"

namespace sim::memory {

using Breakdown = std::array<Bytes, kNumMemCategories>;

struct MemoryChange {
  Duration time;
  std::optional<int32_t> op;  // nullopt for the persistent states allocated before the step
  MemCategory category;
  Bytes delta;
  Bytes allocated;  // total after the change
};

struct Overflow {
  std::optional<int32_t> op;
  Duration time;
  Bytes excess;  // allocated − capacity at that moment
};

class MemoryLedger {
 public:
  MemoryLedger(Bytes capacity, bool record_changes)
      : capacity_(capacity), record_(record_changes) {}

  void Apply(MemCategory category, Bytes delta, Duration time, std::optional<int32_t> op);
  // Marks the current contents as the persistent level Transient() is measured against.
  void MarkPersistent() { persistent_ = allocated_; }

  Bytes allocated() const { return allocated_; }
  Bytes Transient() const { return allocated_ - persistent_; }
  Bytes peak() const { return peak_; }
  const Breakdown& peak_breakdown() const { return peak_breakdown_; }
  Duration peak_time() const { return peak_time_; }
  std::optional<int32_t> peak_op() const { return peak_op_; }
  const std::optional<Overflow>& first_overflow() const { return first_overflow_; }
  const Breakdown& current() const { return current_; }
  // Each category's own high-water mark over the step (not simultaneous: they need not sum to
  // the peak).
  const Breakdown& category_peaks() const { return category_peaks_; }
  const std::vector<MemoryChange>& changes() const { return changes_; }

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
};

}  // namespace sim::memory
