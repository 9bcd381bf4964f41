// The walk over groups of one micro-batch and the pipeline schedule with its sends.

#include "sim/workload/lowerer/lowerer.h"

namespace sim::lowering_internal {

void Lowerer::Forward(int32_t first, int32_t last, std::vector<int32_t> entry) {
  b_.SetPass(OpPass::kForward);
  const int32_t pf = static_cast<int32_t>(gather_rule_.layers);
  for (int32_t g = first; g <= last; ++g) {
    std::vector<int32_t> deps;
    if (g == first) deps.swap(entry);
    // The gathered parameters freed when the group's forward ends.
    GatherFrees free_gather;  // the coordinator frees per op instead (Hooks)
    if (policy_->GathersParameters() && !coordinator_) {
      LaunchGathers(g, g + pf, +1);
      for (int32_t d : TakeGather(g)) deps.push_back(d);
      if (policy_->RegathersForBackward()) free_gather = {group_weights_[g]};
    }
    DpEnv env = Env();
    policy_->BeforeForward(env, g, deps);
    if (g == 0) {
      EmbeddingForward(std::move(deps), free_gather);
    } else if (g == NumGroups() - 1) {
      HeadForward(std::move(deps), free_gather);
    } else {
      LayerForward(g, std::move(deps), free_gather);
    }
  }
}

void Lowerer::Backward(int32_t last, int32_t first, std::vector<int32_t> entry) {
  b_.SetPass(OpPass::kBackward);
  const int32_t pf = static_cast<int32_t>(gather_rule_.layers);
  for (int32_t g = last; g >= first; --g) {
    std::vector<int32_t> deps;
    if (g == last) deps.swap(entry);
    GatherFrees free_gather;
    if (policy_->GathersParameters() && !coordinator_) {
      if (policy_->RegathersForBackward()) {
        LaunchGathers(g, g - pf, -1);
        for (int32_t d : TakeGather(g)) deps.push_back(d);
      }
      free_gather = {group_weights_[g]};
    }
    // The policy's reduction buffers come with the micro-batch's first backward op.
    if (!backward_buffers_live_[b_.stage()] && policy_->BackwardBuffers() > Bytes()) {
      backward_start_.push_back(
          {MemWhen::kStart, MemCategory::kCommBuffers, policy_->BackwardBuffers()});
      backward_buffers_live_[b_.stage()] = true;
    }
    // Activation offload: this layer's tensors back before its backward, the next one's
    // prefetched beside it (torchtune OffloadActivations: one layer ahead).
    if (const auto fetch = FetchActivations(g)) deps.push_back(*fetch);
    if (g - 1 >= first) FetchActivations(g - 1);
    if (g == NumGroups() - 1) {
      HeadBackward(std::move(deps), free_gather);
    } else if (g == 0) {
      EmbeddingBackward(std::move(deps), free_gather);
    } else {
      LayerBackward(g, std::move(deps), free_gather);
    }
    DpEnv env = Env();
    policy_->AfterBackward(env, g);
    // Per micro-batch, the reduction buffers go when its last reduction ends.
    if (g == 0 && backward_buffers_live_[b_.stage()] && !policy_->BackwardBuffersPerStep()) {
      AddMemToLast({MemWhen::kEnd, MemCategory::kCommBuffers, -policy_->BackwardBuffers()});
      backward_buffers_live_[b_.stage()] = false;
    }
    if (coordinator_ && g == 0) {
      SIM_CHECK(use_ == static_cast<int32_t>(coordinator_->trace().size()) &&
                    next_hook_op_ == hook_ops_.size(),
                "lowering left DeepSpeed's trace");
      coordinator_->Reset();
      use_ = 0;
      next_hook_op_ = 0;
    }
    if (s_.parallel.offload.activations && g > 0 && g <= layers_) fetched_[g].reset();
    if (s_.training.optimizer_in_backward) {
      // The group's update runs in its gradient hook and frees its gradients.
      const int64_t params = group_trainable_[g];
      Add(Compute("optimizer", OpPass::kStep, OpClass::kMemoryBound,
                  Flops::Count(12.0 * static_cast<double>(params)),
                  Bytes::Count(StepTrafficPerParam() * params), g),
          AnchorDeps(), {{MemWhen::kEnd, MemCategory::kGradients, -GroupGradientBytes(g)}});
    }
  }
}

int32_t Lowerer::Send(int32_t g) {
  ProgramBuilder::DepList deps = AnchorDeps();
  deps.insert(deps.end(), b_.waits().begin(), b_.waits().end());
  deps.insert(deps.end(), b_.overlapped().begin(), b_.overlapped().end());
  Op op = Collective("send_recv", CollectiveKind::kSendRecv, act_bytes_ / s_.parallel.tp,
                     place_.StageNeighbours(), g);
  op.stream = StreamKind::kP2p;
  return Add(op, deps, {});
}

void Lowerer::Pipeline() {
  const int32_t p = static_cast<int32_t>(s_.parallel.pp);
  const int32_t vstages = static_cast<int32_t>(vstage_groups_.size());
  const int32_t m = static_cast<int32_t>(m_);
  const auto order = PipelineOrder(s_.parallel.pp_schedule, p, s_.parallel.pp_chunks, m);
  // sent_*[virtual stage][micro-batch]: the send op that unit produced, once emitted.
  using Sent = std::vector<std::vector<std::optional<int32_t>>>;
  Sent sent_fwd(vstages, std::vector<std::optional<int32_t>>(m));
  Sent sent_bwd(vstages, std::vector<std::optional<int32_t>>(m));
  // Megatron-LM's non-interleaved 1F1B waits for each stage's sends: its send_forward,
  // send_backward and their fused send-and-receive forms call _communicate with wait_on_reqs
  // (and batch_p2p_sync adds torch.cuda.synchronize), so a stage's next unit starts after the
  // send before it has completed, and no compute runs beside a send
  // (megatron/core/pipeline_parallel/p2p_communication.py, schedules.py
  // forward_backward_pipelining_without_interleaving). The interleaved schedule overlaps them
  // (overlap_p2p_comm): its sends run beside the next chunk.
  const bool blocking_sends = s_.parallel.pp_schedule == PipelineSchedule::k1F1B;
  std::vector<std::optional<int32_t>> last_send(p);  // per stage, when blocking_sends
  for (const PipelineSlot& slot : PipelineEmission(order, s_.parallel.pp_chunks)) {
    const int32_t stage = slot.stage;
    const PipelineUnit& u = order[stage][slot.index];
    const int32_t vs = u.chunk * p + stage;
    SetStage(stage);
    std::optional<int32_t> recv;
    if (u.forward && vs > 0) recv = sent_fwd[vs - 1][u.micro_batch];
    if (!u.forward && vs < vstages - 1) recv = sent_bwd[vs + 1][u.micro_batch];
    SIM_CHECK(recv.has_value() == (u.forward ? vs > 0 : vs < vstages - 1),
              "a pipeline unit listed before the send it receives");
    SetMicroBatch(u.micro_batch);
    std::vector<int32_t> entry;
    if (recv) entry.push_back(*recv);
    if (last_send[stage]) entry.push_back(*last_send[stage]);
    const auto [first, last] = vstage_groups_[vs];
    std::optional<int32_t> sent;
    if (u.forward) {
      Forward(first, last, std::move(entry));
      if (vs < vstages - 1) sent = sent_fwd[vs][u.micro_batch] = Send(last);
    } else {
      Backward(last, first, std::move(entry));
      if (vs > 0) sent = sent_bwd[vs][u.micro_batch] = Send(first);
    }
    if (blocking_sends) last_send[stage] = sent;
    if (static_cast<size_t>(slot.index) + 1 == order[stage].size()) FinishStage(last_send[stage]);
  }
}

}  // namespace sim::lowering_internal
