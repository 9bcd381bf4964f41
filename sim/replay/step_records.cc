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

memory::MemoryChange StepRecords::bare_change(int32_t gpu, int64_t i) const {
  const auto& changes = r_.ledgers[gpu].changes();
  if (!folded()) return changes[static_cast<size_t>(i)];
  const FoldedRecords& f = *r_.folded_records;
  const auto [begin, end] = f.changes[gpu];
  const Source src = Locate(i, begin, end);
  memory::MemoryChange c = changes[src.index];
  if (src.periods == 0) return c;
  if (c.op) *c.op += static_cast<int32_t>(src.periods * f.ops);
  c.time += f.period * src.periods;
  // An allocator that did not repeat: its reserved bytes as the fold replayed it alone.
  if (!f.reserved.empty()) {
    const FoldedRecords::Reserved& r = f.reserved[gpu];
    if (src.index >= end) {
      c.reserved = r.after[src.index - end];
    } else {
      const auto copy = static_cast<size_t>(std::min<int64_t>(src.periods, r.copies.size()));
      c.reserved = r.copies[copy - 1][src.index - begin];
    }
  }
  return c;
}

StepRecords::Change StepRecords::change(int32_t gpu, int64_t i) const {
  Change out{bare_change(gpu, i), std::nullopt};
  if (!out.change.op) return out;
  if (!folded()) {
    out.op = r_.program.ops[*out.change.op];
    return out;
  }
  const auto [begin, end] = r_.folded_records->changes[gpu];
  const Source src = Locate(i, begin, end);
  out.op = Moved(r_.ledgers[gpu].changes()[src.index].op.value(), src.periods);
  return out;
}

StepRecords::Runs StepRecords::timing_runs() const {
  if (!folded()) return {timings(), 0, 0};
  const FoldedRecords& f = *r_.folded_records;
  return {static_cast<int64_t>(f.timings_begin),
          static_cast<int64_t>(f.timings_end - f.timings_begin), f.windows};
}

StepRecords::Runs StepRecords::change_runs(int32_t gpu) const {
  if (!folded()) return {changes(gpu), 0, 0};
  const auto [begin, end] = r_.folded_records->changes[gpu];
  return {static_cast<int64_t>(begin), static_cast<int64_t>(end - begin),
          r_.folded_records->windows};
}

namespace {

// `ranges` of copies sorted and merged.
std::vector<std::pair<int64_t, int64_t>> Merged(std::vector<std::pair<int64_t, int64_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& r : ranges) {
    if (!out.empty() && r.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

// floor(a / b) and ceil(a / b) for b > 0.
int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0 ? 1 : 0); }
int64_t CeilDiv(int64_t a, int64_t b) { return -FloorDiv(-a, b); }

}  // namespace

std::vector<std::pair<int64_t, int64_t>> StepRecords::CopiesLabelled(
    const std::vector<std::pair<int64_t, int64_t>>& micro_batches, bool step_wide) const {
  if (!folded()) return {};
  const FoldedRecords& f = *r_.folded_records;
  const int64_t last = f.windows - 1;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t i = f.timings_begin; i < f.timings_end; ++i) {
    const int32_t v = r_.timings[i].op;
    const Op& op = r_.program.ops[v];
    const int64_t label = op.micro_batch, step = f.label_step[v];
    // A step below 0 is not met (later periods run later micro-batches): every copy.
    if ((step_wide && (op.pass == OpPass::kStep || !op.group)) || step < 0) return {{0, last}};
    for (const auto& [lo, hi] : micro_batches) {
      if (step == 0) {
        if (label >= lo && label <= hi) return {{0, last}};
        continue;
      }
      // label + c·step in [lo, hi].
      const int64_t from = std::max<int64_t>(0, CeilDiv(lo - label, step));
      const int64_t to = std::min(last, FloorDiv(hi - label, step));
      if (from <= to) ranges.push_back({from, to});
    }
  }
  return Merged(std::move(ranges));
}

std::vector<std::pair<int64_t, int64_t>> StepRecords::CopiesMeeting(int32_t rank, Duration from,
                                                                    Duration to) const {
  if (!folded()) return {};
  const FoldedRecords& f = *r_.folded_records;
  const int64_t last = f.windows - 1;
  const int64_t dt = f.period.picoseconds();
  if (dt <= 0) return {{0, last}};
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t i = f.timings_begin; i < f.timings_end; ++i) {
    const OpTiming& t = r_.timings[i];
    if (t.rank != rank) continue;
    // end + c·dt > from and start + c·dt < to.
    const int64_t first =
        std::max<int64_t>(0, FloorDiv(from.picoseconds() - t.end.picoseconds(), dt) + 1);
    const int64_t after = std::min(last, CeilDiv(to.picoseconds() - t.start.picoseconds(), dt) - 1);
    if (first <= after) ranges.push_back({first, after});
  }
  return Merged(std::move(ranges));
}

}  // namespace sim::replay
