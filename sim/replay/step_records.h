#pragma once
// The whole step's records — every op's start and end, every ledger change — of a replay that
// recorded them (ReplayOptions::record_ops, record_memory), folded or not. A folded replay
// (sim/replay/fold.h) recorded only its last short replay; its FoldedRecords say how the step
// repeats a window of those records, and this view gives them back as the full replay records
// them, byte for byte, in the same order (tests/step_records_test.cc): the window `windows`
// times, each copy's ops numbered a period's ops further on, its times a period later and its
// micro-batch labels a period's micro-batches further on, then what came after the window.
// Nothing is copied: the outputs (--trace, --timeline, --html, --memory-snapshot) read a step
// of thousands of micro-batches without holding its records.

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "sim/memory/ledger.h"
#include "sim/replay/replay.h"
#include "sim/workload/program.h"

namespace sim::replay {

class StepRecords {
 public:
  explicit StepRecords(const ReplayResult& r) : r_(r) {}

  // An op timing of the step: `timing.op` numbers the op in the whole step's program, and
  // `op` is that op (the replayed program's, with the micro-batch the whole step gives it).
  struct Timing {
    OpTiming timing;
    Op op;
  };
  // A ledger change of the step: `change.op` numbered in the whole step's program, and `op` that
  // op as above (none for the persistent states).
  struct Change {
    memory::MemoryChange change;
    std::optional<Op> op;
  };

  int64_t timings() const;
  Timing timing(int64_t i) const;  // 0 <= i < timings()
  // The changes of simulated GPU `gpu`'s ledger.
  int64_t changes(int32_t gpu) const;
  Change change(int32_t gpu, int64_t i) const;  // 0 <= i < changes(gpu)
  // The same without its op, for readers of the memory alone.
  memory::MemoryChange bare_change(int32_t gpu, int64_t i) const;

  // How many times the step runs the recorded window (1 for a step replayed in full).
  int64_t windows() const { return folded() ? r_.folded_records->windows : 1; }

  // For readers that want part of the step (a micro-batch, a time span): the records in three
  // runs, [0, first) before the window, its copy c at [first + c·size, first + (c + 1)·size)
  // for c < copies, and the rest after. A step replayed in full has no copies. Copy c is copy
  // 0 `c` periods later, with every allocated byte count the same (the state repeats).
  struct Runs {
    int64_t first = 0, size = 0, copies = 0;
  };
  Runs timing_runs() const;
  Runs change_runs(int32_t gpu) const;
  // Ascending, disjoint ranges [from, to] of window copies: those holding a timing whose op is
  // labelled with a micro-batch in one of `micro_batches` ([lo, hi] each), and every copy when
  // `step_wide` and the window holds an op of the whole step (OpPass::kStep, or no parameter
  // group), which a reader files under the last micro-batch. None for a step replayed in full.
  std::vector<std::pair<int64_t, int64_t>> CopiesLabelled(
      const std::vector<std::pair<int64_t, int64_t>>& micro_batches, bool step_wide = false) const;
  // The same for the copies holding a timing on simulated GPU `rank` that ends after `from`
  // and starts before `to`.
  std::vector<std::pair<int64_t, int64_t>> CopiesMeeting(int32_t rank, Duration from,
                                                         Duration to) const;
  // f(i) for every timing index i before the window, in `copies` (CopiesLabelled,
  // CopiesMeeting) and after the window, in order, while f returns true.
  template <class F>
  void ForEachTimingIn(const std::vector<std::pair<int64_t, int64_t>>& copies, F&& f) const {
    const Runs runs = timing_runs();
    const int64_t after = runs.first + runs.copies * runs.size, n = timings();
    for (int64_t i = 0; i < runs.first; ++i) {
      if (!f(i)) return;
    }
    for (const auto& [from, to] : copies) {
      for (int64_t i = runs.first + from * runs.size; i < runs.first + (to + 1) * runs.size; ++i) {
        if (!f(i)) return;
      }
    }
    for (int64_t i = after; i < n; ++i) {
      if (!f(i)) return;
    }
  }

 private:
  // Where record i of a list of `size` records whose window is [begin, end) comes from: its
  // index in the list and the periods it is moved by.
  struct Source {
    size_t index;
    int64_t periods;
  };
  Source Locate(int64_t i, size_t begin, size_t end) const;
  int64_t Count(size_t size, size_t begin, size_t end) const;
  Op Moved(int32_t op, int64_t periods) const;
  bool folded() const { return r_.folded_records.has_value(); }

  const ReplayResult& r_;
};

}  // namespace sim::replay
