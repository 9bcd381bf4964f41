#pragma once
// Observers of a replay: the run report (docs/model.md "The report") for people and as JSON, the
// Chrome/Perfetto trace and the CSV memory timeline. All output is deterministic: the same replay
// gives the same bytes.

#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "sim/replay/replay.h"
#include "sim/report/run_summary.h"
#include "sim/spec/scenario.h"

namespace sim::report {

// Renderers of a run's summary: the docs/model.md "The report" JSON report and the text report.
// Without `monte_carlo` the whole run's `ettr_monte_carlo` is null (a sweep's rows: its 1,000
// trials per row cost more than the row's replay on a small cluster).
nlohmann::ordered_json RunJson(const RunSummary& r, bool monte_carlo = true);
std::string RunText(const RunSummary& r);

// What part of a step a trace keeps (stepsim run --trace-steps, --trace-stages): the ops of the
// micro-batches in any of `micro_batches` (none = all) — with the step-wide ones (the optimizer,
// the step's reductions) when a range reaches the last micro-batch — on pipeline stages
// [first, last] (absent = all). The memory counters keep the samples inside each range's time
// span, each starting from the level at its start.
struct TraceRange {
  int64_t first = 0, last = 0;
};
struct TraceOptions {
  std::vector<TraceRange> micro_batches;  // ascending, disjoint
  std::optional<TraceRange> stages;
};
// What `stepsim run --trace` keeps when no --trace-steps is given: every micro-batch of a step
// that does not fold (sim/replay/fold.h PlanFold), or else the first K + d micro-batches (the
// pipeline's warm-up and one period of the repeating ones) and the last K (the cool-down, with
// the optimizer): the micro-batches between run the same ops, and a 5-million-event trace is
// more than a viewer opens.
std::vector<TraceRange> DefaultTraceMicroBatches(const Scenario& s);
// "0..2, 30..31 of 0..31": the kept micro-batches, for process names and notes.
std::string TraceRangesText(const std::vector<TraceRange>& ranges, int64_t micro_batches);

// Chrome trace-event JSON: one process per simulated GPU, a thread per stream, a complete ("X")
// event per op with FLOPs and bytes in args, and a counter ("C") track of allocated GiB by
// category. Needs ReplayOptions::record_ops and record_memory.
std::string TraceJson(const Scenario& s, const replay::ReplayResult& r,
                      const TraceOptions& options = {});

// JSON traces above this size do not open in the viewers: chrome://tracing stops at 256 MB
// (google/perfetto#99, citing google/trace-viewer#627), and ui.perfetto.dev parses in browser
// memory, about 2 GB in all at 2-4 times the trace's size ("Visualising large traces",
// perfetto.dev), so a 900 MB JSON trace crashed it in the same report.
inline constexpr Bytes kTraceViewerLimit = Bytes::Count(int64_t{256} << 20);  // 256 MiB
// The warning for a trace of `size` written to `path`, or none up to the limit.
std::optional<std::string> TraceSizeWarning(const std::string& path, Bytes size);

// CSV: time_s,gpu,event,category,delta_bytes,allocated_bytes — one row per ledger change.
// Needs ReplayOptions::record_memory.
std::string TimelineCsv(const replay::ReplayResult& r);

// The op program as text, one op per line (stepsim run --dump-ops).
std::string DumpOps(const OpProgram& p);

}  // namespace sim::report
