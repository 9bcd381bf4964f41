#include "sim/workload/lowering.h"

#include "sim/workload/lowerer/lowerer.h"

namespace sim {

using lowering_internal::Lowerer;

namespace {

// InvalidArgument when a step of `micro_batches` is too long to lower one by one.
absl::Status CheckLength(const Scenario& s, int64_t micro_batches) {
  const int64_t passes = micro_batches * (s.model.layers + 2);
  if (passes <= kMaxGroupPasses) return absl::OkStatus();
  // The program holds every micro-batch's ops (~40 per layer and micro-batch, some 6 KB).
  return absl::InvalidArgumentError(absl::StrCat(
      "training.global_batch: ", micro_batches, " micro-batches x ", s.model.layers + 2,
      " layer groups = ", passes, " to lower one by one, above the limit of ", kMaxGroupPasses,
      ": the step is replayed micro-batch by micro-batch when folding is off (--no-fold), when "
      "its micro-batches do not repeat (GPipe's memory grows with them), or when a trace, "
      "timeline, page or memory snapshot is written and the step does not fold on the states of "
      "its short replays (docs/folding.md); fewer micro-batches (raise training.micro_batch) or a "
      "folded run answer it"));
}

// The scenario's policy, checked.
absl::StatusOr<std::unique_ptr<DataParallelPolicy>> CheckedPolicy(const Scenario& s) {
  std::unique_ptr<DataParallelPolicy> policy = MakeDataParallelPolicy(s);
  if (absl::Status st = policy->Check(); !st.ok()) return st;
  return policy;
}

}  // namespace

absl::StatusOr<OpProgram> Lower(const Scenario& s) {
  if (absl::Status st = CheckLength(s, s.micro_batches()); !st.ok()) return st;
  auto policy = CheckedPolicy(s);
  if (!policy.ok()) return policy.status();
  return Lowerer(s, *std::move(policy), s.micro_batches()).Run();
}

// The lowering of the first `lowered` micro-batches, none of them the step's last, and of the
// next one's forward when `forward` (one stage); none with a pipeline, whose schedule depends
// on the step's length.
struct StepLowering::State {
  const Scenario& s;
  std::unique_ptr<Lowerer> main;
  int64_t lowered = 0;
  bool forward = false;
  int32_t shared = 0;  // of the last program
};

StepLowering::StepLowering(std::unique_ptr<State> state) : state_(std::move(state)) {}
StepLowering::StepLowering(StepLowering&&) noexcept = default;
StepLowering& StepLowering::operator=(StepLowering&&) noexcept = default;
StepLowering::~StepLowering() = default;

absl::StatusOr<StepLowering> StepLowering::Start(const Scenario& s) {
  auto state = std::unique_ptr<State>(new State{s, nullptr});
  if (s.parallel.pp == 1) {
    auto policy = CheckedPolicy(s);
    if (!policy.ok()) return policy.status();
    // Never the last: the step's length is each Lower's.
    state->main =
        std::make_unique<Lowerer>(s, *std::move(policy), std::numeric_limits<int64_t>::max());
    state->main->Begin(/*micro_batches=*/4);  // room for a fold's first window; grows after
  }
  return StepLowering(std::move(state));
}

bool StepLowering::incremental() const { return state_->main != nullptr; }

int32_t StepLowering::shared() const { return state_->shared; }

absl::StatusOr<OpProgram> StepLowering::Lower(int64_t micro_batches) {
  State& st = *state_;
  if (!st.main) return sim::Lower(st.s.WithMicroBatches(micro_batches));
  SIM_CHECK(micro_batches > st.lowered, "StepLowering lowers steps of increasing length");
  if (absl::Status s = CheckLength(st.s, micro_batches); !s.ok()) return s;
  if (st.main->LastBackwardLikeAny()) {
    // Every micro-batch, the last's backward included, is this step's and every longer one's:
    // lowered once, the last marked as such in a copy that ends the step.
    while (st.lowered < micro_batches) {
      const auto mb = static_cast<int32_t>(st.lowered++);
      st.main->LowerForward(mb);
      st.main->LowerBackward(mb);
    }
    std::unique_ptr<Lowerer> last = st.main->Fork(micro_batches);
    st.shared = last->ops();
    last->MarkLastBackward();
    return last->Finish();
  }
  // The shorter steps' micro-batches, and the last one's forward, are this step's too; its
  // backward is its own.
  while (st.lowered < micro_batches - 1) {
    const auto mb = static_cast<int32_t>(st.lowered++);
    if (!st.forward) st.main->LowerForward(mb);
    st.main->LowerBackward(mb);
    st.forward = false;
  }
  const auto last_mb = static_cast<int32_t>(micro_batches - 1);
  if (!st.forward) st.main->LowerForward(last_mb);
  st.forward = true;
  std::unique_ptr<Lowerer> last = st.main->Fork(micro_batches);
  st.shared = last->ops();
  last->LowerBackward(last_mb);
  return last->Finish();
}

}  // namespace sim
