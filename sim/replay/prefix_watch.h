#pragma once
// Forked replays (docs/folding.md): the short replays of a fold run programs that agree op for
// op over a long prefix (the first micro-batches) and differ after it (one more micro-batch, or
// the optimizer step). Replaying the longest and, at the last moment the prefix alone decides,
// handing a copy of its state to each shorter program gives every replay exactly as it would
// have run alone, for the cost of the longest plus the shorter ones' ends.
//
// "The last moment": an executor boundary (sim/engine/executor.h, Advance) before either
// program touches one of its ops past the prefix — starts it, or makes it ready through its
// predecessors (ops without predecessors are issued at time zero and wait behind their streams'
// earlier ops; their issue must allocate nothing). A watch follows the running replay's starts
// and finishes and says, at each boundary, whether the next dispatch round may touch such an
// op: one whose predecessors are all in the prefix, all running and all due to finish then; or
// the first op after the prefix on a stream that it would start, due when the stream's last
// prefix op finishes. Asking early costs only time, asking late nothing worse:
// Executor::TakeSnapshot and Adopt check the state they copy against both programs, and a fork
// they refuse is replayed alone.

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "sim/base/units.h"
#include "sim/workload/program.h"

namespace sim::replay {

// How many leading ops `a` and `b` share: the same op, dependencies, memory actions and
// collective, in programs with the same stages and persistent memory (0 otherwise). `known`:
// leading ops the caller knows them to share (lowered once and copied into both,
// StepLowering::shared), compared from there on.
int32_t CommonPrefix(const OpProgram& a, const OpProgram& b, int32_t known = 0);

// Whether `longer` runs `shorter`'s ops from `from` on `ops` ops later, one for one and to its
// end: the same ops (but for their micro-batch index, which only labels them) with every
// dependency `ops` later, the same memory actions and collectives (a fold's programs one
// period apart: sim/replay/state_period.h).
bool ProgramRepeats(const OpProgram& shorter, const OpProgram& longer, int32_t from, int32_t ops);

// What a watch over any prefix of one program reads of it (PrefixWatch::Make, MakeForNext),
// gathered once: each op's stream, and per op the least, over it and every later op with
// dependencies, of their latest one. A watch then visits only the ops past its prefix up to
// the last one that depends on the prefix alone — a few, where a longer program's later
// micro-batches hold thousands (the running replay of a fold's first window is watched three
// times).
class PrefixIndex {
 public:
  explicit PrefixIndex(const OpProgram& p);

 private:
  friend class PrefixWatch;
  // f(stream, op) for each stream with an op from `from` on, with the first such op.
  template <class F>
  void FirstOfStreams(int32_t from, F&& f) const;
  // f(stream, op) for each stream with an op before `to`, with the last such op.
  template <class F>
  void LastOfStreams(int32_t to, F&& f) const;

  std::vector<uint16_t> stream_;       // per op
  std::vector<int32_t> first_, last_;  // per stream: its first and last op (-1: none)
  std::vector<int32_t> least_latest_;  // per op, and one past the last
  int32_t last_issuing_ = -1;  // the last op without dependencies that allocates when issued
};

class PrefixWatch {
 public:
  // The watch of `running`'s replay (`index` of it) for a fork of `other` at `prefix`
  // (CommonPrefix); none when one of them touches an op past the prefix at time zero (so no fork
  // can be taken). One simulated replica: task t is op t, on stream stage · kNumStreams + kind.
  static std::optional<PrefixWatch> Make(const PrefixIndex& index, const OpProgram& running,
                                         const OpProgram& other, int32_t prefix);
  // The watch of `running`'s replay for a program not lowered yet, guessed to share `prefix`
  // ops with it and to go on as running's last `period` ops before the prefix and after it do,
  // moved a period on (a fold's next window: one micro-batch more). A guess, which the next
  // program's executor checks when it adopts the state (Executor::Adopt).
  static std::optional<PrefixWatch> MakeForNext(const PrefixIndex& index, const OpProgram& running,
                                                int32_t prefix, int32_t period);

  int32_t prefix() const { return prefix_; }
  // Each set of prefix ops whose all finishing touches an op past the prefix, in the order
  // found (tests).
  std::vector<std::vector<int32_t>> Items() const;

  // The running replay started / finished task t.
  void Started(int32_t t) {
    if (t >= prefix_) return;
    for (int32_t i = feeds_begin_[t]; i < feeds_begin_[t + 1]; ++i) {
      if (--unstarted_[feeds_[i]] == 0) armed_.push_back(feeds_[i]);
    }
  }
  void Finished(int32_t t) {
    if (t >= prefix_) return;
    for (int32_t i = feeds_begin_[t]; i < feeds_begin_[t + 1]; ++i) {
      if (--unfinished_[feeds_[i]] == 0) touched_ = true;
    }
  }

  // The running replay went on from a state (Executor::Adopt): what it had started and
  // finished by then. Exec: started(t), finished(t).
  template <class Exec>
  void CatchUp(const Exec& e) {
    for (int32_t t = 0; t < prefix_; ++t) {
      if (e.started(t)) Started(t);
      if (e.finished(t)) Finished(t);
    }
  }

  // At a boundary of the running executor whose next event is at `next`: whether the next round
  // may touch an op past the prefix (fork now). Exec: finished(t), finish_at(t).
  template <class Exec>
  bool Due(Duration next, const Exec& e) const {
    if (touched_) return true;
    for (int32_t item : armed_) {
      bool all = true;
      for (int32_t i = preds_begin_[item]; i < preds_begin_[item + 1] && all; ++i) {
        const int32_t p = preds_[i];
        all = e.finished(p) || e.finish_at(p) <= next;
      }
      if (all) return true;
    }
    return false;
  }

 private:
  // The last prefix op of each stream (-1: none).
  std::vector<int32_t> LastOfStreams(const PrefixIndex& index) const;
  // The items of `running`'s ops from `from` on, found through `index`, as a program whose op
  // t + (prefix - from) is running's op t and depends on shifted(d) for each of its
  // dependencies d, which is below the prefix exactly when d is below `from`. False when one
  // touches an op past the prefix at time zero (no fork can be taken).
  template <class Shifted>
  bool AddRunning(const PrefixIndex& index, const OpProgram& running,
                  const std::vector<int32_t>& last, int32_t from, Shifted&& shifted);
  // The items of `other`'s ops past the prefix, visited one by one (a fork's short tail).
  bool AddOther(const OpProgram& other, const std::vector<int32_t>& last);
  // Items: each a set of prefix ops whose all finishing touches an op past the prefix.
  void AddItem(absl::Span<const int32_t> preds);
  void Index();

  int32_t prefix_ = 0;
  std::vector<int32_t> preds_begin_{0}, preds_;  // CSR: item -> its prefix ops
  std::vector<int32_t> feeds_begin_, feeds_;     // CSR: prefix op -> the items it is in
  std::vector<int32_t> unstarted_, unfinished_;  // per item
  std::vector<int32_t> armed_;                   // items whose ops have all started
  bool touched_ = false;
};

}  // namespace sim::replay
