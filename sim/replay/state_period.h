#pragma once
// A fold on the replay's state (docs/folding.md). The replay of a fold's program
// of K + d micro-batches passes a state F1 where the program a period shorter parts from it
// (sim/replay/prefix_watch.h) and, a period on, a state F2 where the program a period longer
// would. When F2 is F1 one period on — every running op, queued event, free time and running
// collective `ops` tasks and `dt` picoseconds later, every ledger and caching allocator alike
// (their peaks are history) — and the program goes on from F2 as the shorter one does from F1
// (ProgramRepeats, sim/replay/prefix_watch.h), the replay repeats itself from F1 on: each
// further period adds what F1 to F2 added, and the step of n more periods is the replay of
// K + d plus n such periods (sim/replay/fold.cc). Where anything differs the fold goes on with
// more short replays, so a comparison that refuses costs only time.

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
