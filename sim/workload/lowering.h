#pragma once
// Lowering: (model, training, parallel layout) -> the op program of one data-parallel rank for
// one optimizer step (sim/workload/program.h). Time-free and deterministic.
//
// What a framework gathers, reduces and does at the step's end (docs/model.md "Model states",
// docs/model.md "Communication per optimizer step", docs/model.md "ZeRO-3 transients") is its
// data-parallel policy's (sim/workload/policy/: deepspeed.cc, fsdp.cc, megatron.cc); lowering
// asks the policy and never branches on the framework. The mechanics it drives: ZeRO-3 gathers
// `prefetch` groups ahead (the gather of group g + p is launched, and its buffer allocated, when
// group g starts; buffers are freed when their group's forward or backward ends), per-group
// reductions after each backward, the optimizer over the stage's shard.
// Tensor, sequence and context parallelism add their collectives around the layer ops (see
// ParallelRole in layer_ops.h); pipeline parallelism lowers every stage's units in its
// schedule's order (pipeline_schedule.h) with point-to-point sends between stages. Gradient
// reductions and the optimizer run per stage over its own parameters.
// Parameter groups are gathered and reduced as units: the embedding (with learned positions),
// each decoder layer, and the final norm with the LM head (re-gathering the embedding matrix
// when the head is tied to it).

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/spec/scenario.h"
#include "sim/workload/program.h"
#include "sim/workload/sharding.h"

namespace sim {

// Micro-batches x (layers + 2) one program may hold: about 40 ops for each (some 6 KB), so this
// bounds a program near 3 GB. Larger steps are folded (sim/replay/fold.h), which lowers a few
// micro-batches only; Lower refuses a larger program with InvalidArgument.
inline constexpr int64_t kMaxGroupPasses = 500'000;

absl::StatusOr<OpProgram> Lower(const Scenario& s);

// The programs of one scenario's step at several lengths, in increasing order: Lower(m) is
// what sim::Lower gives for `s` with m micro-batches (its global batch m · micro_batch · dp),
// and what the steps share is lowered once. One stage: the first micro-batches are lowered
// once and the lowering is copied (program, builder, policy, ZeRO-3 coordinator) after the
// forward of each step's last micro-batch, whose backward (its reductions) parts from the
// longer steps' (a fold's window, sim/replay/fold.h);
// with a pipeline, whose schedule depends on the step's length, each is lowered whole.
// `s` must outlive it.
class StepLowering {
 public:
  // The scenario's policy refuses it (as Lower).
  static absl::StatusOr<StepLowering> Start(const Scenario& s);
  StepLowering(StepLowering&&) noexcept;
  StepLowering& operator=(StepLowering&&) noexcept;
  ~StepLowering();

  // The step of `micro_batches`, more than the last call's; InvalidArgument as Lower.
  absl::StatusOr<OpProgram> Lower(int64_t micro_batches);
  // Whether a longer step lowers only what it adds (one stage), not the whole step (pipeline).
  bool incremental() const;
  // The leading ops the last program Lower gave shares with every longer step's: those lowered
  // once and copied into each (0 with a pipeline).
  int32_t shared() const;

 private:
  struct State;
  explicit StepLowering(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace sim
