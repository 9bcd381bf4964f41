#pragma once
// Appends ops to an op program (sim/workload/program.h) in issue order, with their dependencies
// and memory actions, for the stage and micro-batch being lowered. Lowering (the layers, the
// pipeline schedule) and the data-parallel policies (what is gathered and reduced, when) both
// emit through it; it knows nothing of either.
//
// Per stage it remembers the last compute op (collectives launched "now" are anchored after it)
// and the TP/CP collectives running beside the compute stream: a compute op waits for those
// launched beside the compute op before it (Add does this), and hands on its own.

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "sim/workload/program.h"

namespace sim {

// An op's memory actions: a handful, kept inline so that lowering allocates nothing per op.
using MemList = absl::InlinedVector<MemAction, 8>;

class ProgramBuilder {
 public:
  ProgramBuilder(OpProgram& program, int32_t stages);
  // Appends to `program` from now on (a copy of the builder and of its program: a lowering
  // forked mid-step, lowering.cc StepLowering).
  void Rebind(OpProgram& program) { program_ = &program; }

  // The stage (simulated GPU) and micro-batch new ops belong to.
  void SetStage(int32_t stage) { stage_ = stage; }
  int32_t stage() const { return stage_; }
  void SetMicroBatch(int32_t mb, bool last) {
    mb_ = mb;
    last_micro_batch_ = last;
  }
  int32_t micro_batch() const { return mb_; }
  // The pass new collectives serve (compute ops carry their own).
  void SetPass(OpPass pass) { pass_ = pass; }
  OpPass pass() const { return pass_; }
  bool last_micro_batch() const { return last_micro_batch_; }

  // Appends `op` after `deps`, with its memory actions (zero-byte actions dropped, ordered by
  // MemWhen); returns its index. A compute-stream compute op also waits for the overlapped
  // TP/CP collectives of the compute op before it.
  int32_t Add(const Op& op, absl::Span<const int32_t> deps, absl::Span<const MemAction> mem);
  // Appends an end-of-op action to the newest op (frees decided after it was emitted).
  void AddMemToLast(MemAction a);

  // A communication op on the data-parallel stream and its collective, recorded now
  // (`Spec(op).buckets` may be set before the op is added).
  Op Collective(absl::string_view name, CollectiveKind kind, Bytes tensor, CommGroup group,
                std::optional<int32_t> g);
  CollectiveSpec& Spec(const Op& op) { return program_->collectives[*op.collective]; }

  // The current stage's last compute op, as a dependency list (empty before the first); inline
  // room for the few ops callers add, so that no list is a heap allocation (a ZeRO-3 step makes
  // one per gather).
  using DepList = absl::InlinedVector<int32_t, 6>;
  DepList AnchorDeps() const;
  std::optional<int32_t> last_compute() const { return st_[stage_].last_compute; }

  // TP/CP collectives launched beside the next compute op.
  void AddOverlapped(int32_t id) { st_[stage_].overlapped.push_back(id); }
  const std::vector<int32_t>& overlapped() const { return st_[stage_].overlapped; }
  // Those the next compute op must wait for.
  const std::vector<int32_t>& waits() const { return st_[stage_].wait; }
  void ClearWaits() { st_[stage_].wait.clear(); }

 private:
  struct StageState {
    std::optional<int32_t> last_compute;
    std::vector<int32_t> overlapped;  // TP/CP ops beside the next compute op
    std::vector<int32_t> wait;        // ... which the compute op after it waits for
  };

  OpProgram* program_;
  std::vector<StageState> st_;
  int32_t stage_ = 0;
  int32_t mb_ = 0;
  bool last_micro_batch_ = false;
  OpPass pass_ = OpPass::kForward;
};

}  // namespace sim
