#pragma once
// The two halves of Replay (sim/replay/replay.h), for the fold (sim/replay/fold.h): the raw
// replay leaves every additive quantity summed over the pipeline stages, so that the fold can
// extrapolate integers; Finalize averages them and picks the pacing stage.

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/replay/replay.h"

namespace sim::replay {

// Replays the program: times, events, ops, ledgers, per-stage times; collective times and
// bytes summed over stages; no FLOPs yet.
ReplayResult ReplayRaw(OpProgram program, const cost::ComputeCostModel& compute,
                       const cost::CollectiveCostModel& comm, Bytes capacity,
                       const ReplayOptions& options);
// A replay's state where its program parts from another's (ReplayFamily, ReplayAfter).
struct ReplaySnapshot;

// ReplayRaw of each program, the same results, for less: the longest is replayed and each
// shorter one that shares a prefix of ops with it forks from its state before they part
// (sim/replay/prefix_watch.h); one that cannot fork is replayed alone. `forks` (optional)
// counts the forks taken; `keep` (optional) receives the state of the last fork, where the
// longest program parts from the next longest, for ReplayAfter. `shared` (optional): per
// program, the leading ops it is known to share with every longer one (CommonPrefix's `known`).
// `next_shared`: the leading ops of the longest that the next longer program, not given, is
// known to share; `keep` receives instead the state where that program will part from the
// longest — guessed a period on from the last fork, at least `next_shared` — when that is past
// the last fork, with the last fork's kept behind it (ReplayAfter tries both).
//
// `deferred` (optional, with `keep`): the last fork is not replayed but left to the caller,
// its result holding only its program and *deferred set; its state is `keep`, or
// `keep->earlier` when the next program's state was kept in front of it (ReplayFromState forks
// it). A fold that compares the kept states may not need that replay at all
// (sim/replay/state_period.h). `calls` (optional): receives every ledger change of the
// longest program's replay, in order (the kept states say how many came before them).
// Recording (ReplayOptions::record_ops, record_memory), the longest's result holds every
// record and the forks' only those made after their fork.
struct LedgerCall;
std::vector<ReplayResult> ReplayFamily(std::vector<OpProgram> programs,
                                       const cost::ComputeCostModel& compute,
                                       const cost::CollectiveCostModel& comm, Bytes capacity,
                                       const ReplayOptions& options, int* forks = nullptr,
                                       std::shared_ptr<const ReplaySnapshot>* keep = nullptr,
                                       const std::vector<int32_t>* shared = nullptr,
                                       int32_t next_shared = 0, bool* deferred = nullptr,
                                       std::vector<LedgerCall>* calls = nullptr);
// ReplayRaw of `program` gone on from `state` (kept by ReplayFamily or ReplayAfter, of a replay
// whose program shares `program`'s ops that far), or alone when its executor refuses it.
ReplayResult ReplayFromState(OpProgram program, const ReplaySnapshot& state,
                             const cost::ComputeCostModel& compute,
                             const cost::CollectiveCostModel& comm, Bytes capacity,
                             const ReplayOptions& options);
// ReplayRaw of `program`, which extends `previous` (one more micro-batch: a fold's window
// sliding), going on from `snapshot` — a state of previous's replay, kept by ReplayFamily or
// the last ReplayAfter — when program shares previous's ops that far (else replayed alone).
// `snapshot` becomes this replay's state where the next program will part from it — guessed a
// period on from where it parts from `previous`, at least `next_shared` (the leading ops of
// `program` the next one is known to share) — with the state gone on from kept behind it, so
// that a slide replays one period more than the last, not two; else (no guess can be watched)
// its state where it parts from `previous`. `known`: the leading ops `previous` is known to
// share with it (CommonPrefix's). The latest state kept that `program` shares and that its
// executor adopts is the one gone on from (each ReplaySnapshot::earlier in turn); `resumed_at`
// (optional) receives its prefix, 0 when the program was replayed alone. Recording
// (ReplayOptions::record_ops, record_memory), it goes on from a state only given
// `previous_records`, the result of previous's replay, recorded from its start: the result's
// timings and ledger changes then begin with those made before the state; without, it is
// replayed alone.
ReplayResult ReplayAfter(OpProgram program, const OpProgram& previous,
                         const cost::ComputeCostModel& compute,
                         const cost::CollectiveCostModel& comm, Bytes capacity,
                         const ReplayOptions& options,
                         std::shared_ptr<const ReplaySnapshot>& snapshot, int32_t known = 0,
                         int32_t next_shared = 0, int32_t* resumed_at = nullptr,
                         const ReplayResult* previous_records = nullptr);
// The ops of the program a kept state covers (the leading ops a program must share to go on
// from it).
int32_t SnapshotPrefix(const ReplaySnapshot& snapshot);
// FLOPs for `micro_batches` micro-batches per step (one micro-batch's ops times the count),
// averages over the stages, the report's time keys from the pacing stage. False when some
// stage's micro-batches differ in FLOPs (then they were summed as the program holds them, which
// a folded program cannot stand for).
// kAsLowered: as many as the program holds (its highest micro-batch index + 1), found in the
// same pass over its ops.
bool Finalize(ReplayResult& r, int64_t micro_batches);
inline constexpr int64_t kAsLowered = 0;

}  // namespace sim::replay
