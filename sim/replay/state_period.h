#pragma once
// A fold on the replay's state (README "Folding"). The first window of a fold replays the
// longest of its programs and forks the shorter ones where they part from it
// (sim/replay/prefix_watch.h): a state F1 where K micro-batches' program parts from the one a
// period longer, and F2 where that one parts from the next. When F2 is F1 one period on —
// every running op, queued event, free time and running collective `ops` tasks and `dt`
// picoseconds later, every ledger and caching allocator alike (their peaks are history) — and
// the programs go on from F2 as the shorter ones did from F1, a period later, then the replay
// repeats itself from F1 on: each further period adds what F1 to F2 added, and the step of
// K + j periods is the step of K + 1 plus j - 1 times the difference between the two forks'
// results. The longest program need not be replayed past F2. Where anything differs the fold
// replays the window as before (sim/replay/fold.cc), so a comparison that refuses costs only
// time.

#include <cstdint>
#include <optional>

#include "sim/base/units.h"
#include "sim/replay/listener_state.h"
#include "sim/workload/program.h"

namespace sim::replay {

// `dt`, when state `b` is state `a` `ops` tasks and dt later, as above; none otherwise. Both
// are states of one replay at boundaries between dispatch rounds, numbered from op 0: `a`'s
// of a program `ops` ops shorter than `program` when a replay of `program` went on from it
// (ReplayAfter), or of `program` too; `b`'s of `program`. With `allocators`, ledgers that hold
// the same tensors but whose caching allocators lay their segments out differently are let
// through, and *allocators says whether any did: nothing but the reserved memory depends on
// the allocator (the replay's timing never does), which the caller then works out otherwise.
std::optional<Duration> StateRepeats(const OpProgram& program, const ReplaySnapshot& a,
                                     const ReplaySnapshot& b, int32_t ops,
                                     bool* allocators = nullptr);

}  // namespace sim::replay
