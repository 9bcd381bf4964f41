#include "sim/replay/step_records.h"

#include <algorithm>

namespace sim::replay {

int64_t StepRecords::Count(size_t size, size_t begin, size_t end) const {
  const auto n = static_cast<int64_t>(size);
  if (!folded()) return n;
  return n + (r_.folded_records->windows - 1) * static_cast<int64_t>(end - begin);
}

StepRecords::Source StepRecords::Locate(int64_t i, size_t begin, size_t end) const {
  const auto at = static_cast<size_t>(i);
  if (!folded() || at < begin) return {at, 0};
  const int64_t w = static_cast<int64_t>(end - begin);
  const int64_t copies = r_.folded_records->windows;
  const int64_t into = i - static_cast<int64_t>(begin);
  if (w > 0 && into < copies * w) {
    return {begin + static_cast<size_t>(into % w), into / w};
  }
  return {static_cast<size_t>(i - (copies - 1) * w), copies - 1};
}

Op StepRecords::Moved(int32_t op, int64_t periods) const {
  Op o = r_.program.ops[op];
  if (periods > 0) {
    o.micro_batch += static_cast<int32_t>(periods * r_.folded_records->label_step[op]);
  }
  return o;
}

int64_t StepRecords::timings() const {
  if (!folded()) return static_cast<int64_t>(r_.timings.size());
  const FoldedRecords& f = *r_.folded_records;
  return Count(r_.timings.size(), f.timings_begin, f.timings_end);
}

StepRecords::Timing StepRecords::timing(int64_t i) const {
  if (!folded()) {
    const OpTiming& t = r_.timings[static_cast<size_t>(i)];
    return {t, r_.program.ops[t.op]};
  }
  const FoldedRecords& f = *r_.folded_records;
  const Source src = Locate(i, f.timings_begin, f.timings_end);
  OpTiming t = r_.timings[src.index];
  const Op op = Moved(t.op, src.periods);
  const Duration later = f.period * src.periods;
  t.op += static_cast<int32_t>(src.periods * f.ops);
  t.start += later;
  t.end += later;
  return {t, op};
}

int64_t StepRecords::changes(int32_t gpu) const {
  const auto& c = r_.ledgers[gpu].changes();
  if (!folded()) return static_cast<int64_t>(c.size());
  const auto [begin, end] = r_.folded_records->changes[gpu];
  return Count(c.size(), begin, end);
}

StepRecords::Change StepRecords::change(int32_t gpu, int64_t i) const {
  const auto& changes = r_.ledgers[gpu].changes();
  Source src{static_cast<size_t>(i), 0};
  if (folded()) {
    const auto [begin, end] = r_.folded_records->changes[gpu];
    src = Locate(i, begin, end);
  }
  Change out{changes[src.index], std::nullopt};
  if (out.change.op) {
    out.op = folded() ? Moved(*out.change.op, src.periods) : r_.program.ops[*out.change.op];
    if (src.periods > 0) {
      *out.change.op += static_cast<int32_t>(src.periods * r_.folded_records->ops);
    }
  }
  if (src.periods > 0) {
    const FoldedRecords& f = *r_.folded_records;
    out.change.time += f.period * src.periods;
    // An allocator that did not repeat: its reserved bytes as the fold replayed it alone.
    if (!f.reserved.empty()) {
      const auto [begin, end] = f.changes[gpu];
      const FoldedRecords::Reserved& r = f.reserved[gpu];
      if (src.index >= end) {
        out.change.reserved = r.after[src.index - end];
      } else {
        const auto copy = static_cast<size_t>(std::min<int64_t>(src.periods, r.copies.size()));
        out.change.reserved = r.copies[copy - 1][src.index - begin];
      }
    }
  }
  return out;
}

}  // namespace sim::replay
