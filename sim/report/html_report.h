#pragma once
// `stepsim run --html FILE`: one self-contained page (inline CSS and SVG, nothing fetched) for
// people who read charts: the verdict and headroom; the peak GPU's memory over the step as a
// stacked area by category with the peak marked and its breakdown; one micro-batch period of
// that GPU's streams (compute, recompute, communication, pipeline sends, offload copies; the
// gaps are the bubble and exposed waits); the time split and the collective table. Every
// series carries a pattern and a label besides its colour, so the page reads in grey print.
// Needs a replay that recorded ops and memory (ReplayOptions::record_ops / record_memory).

#include <string>

#include "sim/replay/replay.h"
#include "sim/report/run_summary.h"
#include "sim/spec/scenario.h"

namespace sim::report {

std::string RunHtml(const Scenario& s, const replay::ReplayResult& r, const RunSummary& summary);

}  // namespace sim::report
