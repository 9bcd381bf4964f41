#pragma once
// Observers of a replay: the run report (SPEC §5) for people and as JSON, the Chrome/Perfetto
// trace and the CSV memory timeline. All output is deterministic: the same replay gives the same
// bytes.

#include <string>

#include "nlohmann/json.hpp"
#include "sim/replay/replay.h"
#include "sim/report/run_summary.h"
#include "sim/spec/scenario.h"

namespace sim::report {

// Renderers of a run's summary: the SPEC §5 JSON report and the text report.
nlohmann::ordered_json RunJson(const RunSummary& r);
std::string RunText(const RunSummary& r);

// Chrome trace-event JSON: one process per simulated GPU, a thread per stream, a complete ("X")
// event per op with FLOPs and bytes in args, and a counter ("C") track of allocated GiB by
// category. Needs ReplayOptions::record_ops and record_memory.
std::string TraceJson(const Scenario& s, const replay::ReplayResult& r);

// CSV: time_s,gpu,event,category,delta_bytes,allocated_bytes — one row per ledger change.
// Needs ReplayOptions::record_memory.
std::string TimelineCsv(const replay::ReplayResult& r);

// The op program as text, one op per line (stepsim run --dump-ops).
std::string DumpOps(const OpProgram& p);

}  // namespace sim::report
