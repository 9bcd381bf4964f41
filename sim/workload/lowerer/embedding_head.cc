// The embedding, the final norm, the LM head and the loss, forward and backward.

#include "sim/workload/lowerer/lowerer.h"

namespace sim::lowering_internal {

void Lowerer::EmbeddingForward(std::vector<int32_t> deps, const GatherFrees& free_gather) {
  const int64_t h = s_.model.hidden;
  const Bytes mask = Bytes::Count(s_.model.dropout > 0 ? tokens_ / rep_ * h : 0);
  MemList mem = {{MemWhen::kStart, MemCategory::kActivations, mask}};
  FreeGathers(free_gather, mem);
  Hooks(0, "embedding", /*backward=*/false, deps, mem);
  WithComms(Compute("embedding", OpPass::kForward, OpClass::kMemoryBound, Flops(),
                    Bytes::Count(2 * kCompute * tokens_ * h), 0),
            deps, std::move(mem), {}, {TpReduce()});
}

void Lowerer::HeadForward(std::vector<int32_t> deps, const GatherFrees& free_gather) {
  const int32_t g = NumGroups() - 1;
  const int64_t h = s_.model.hidden, v = s_.model.vocab / s_.parallel.tp;
  const Bytes hidden = Bytes::Count(kCompute * tokens_ / rep_ * h);
  MemList norm_mem = {{MemWhen::kStart, MemCategory::kActivations, hidden}};
  Hooks(g, "final_norm", /*backward=*/false, deps, norm_mem);
  Add(FinalNorm(OpPass::kForward, g), deps, norm_mem);
  const ModelParallelComm gather = TpGather();
  Op head = Compute("lm_head", OpPass::kForward, OpClass::kGemm,
                    Flops::Count(2.0 * static_cast<double>(tokens_) * static_cast<double>(h) *
                                 static_cast<double>(v)),
                    Bytes::Count(kCompute * (tokens_ * h + h * v + tokens_ * v)), g);
  head.keep_16bit = true;  // the LM head stays 16-bit under fp8 (Megatron-LM, Composer + TE)
  head.inv_k = GemmInvK(tokens_, h, v, OpPass::kForward, false);
  head.waves =
      static_cast<float>(LinearWaveFactor(tokens_, h, v, 1, /*backward=*/false, false, Sms()));
  MemList head_mem = {
      {MemWhen::kStart, MemCategory::kActivations, hidden},
      {MemWhen::kStart, MemCategory::kLogits, loss_.logits16},
      {MemWhen::kStart, MemCategory::kGatheredParams, policy_->CastCopies(HeadParameters())}};
  FreeGathers(free_gather, head_mem);
  std::vector<int32_t> head_deps;
  Hooks(g, "lm_head", /*backward=*/false, head_deps, head_mem);
  if (s_.parallel.sequence_parallel) {
    WithComms(head, head_deps, std::move(head_mem), {gather}, {});
  } else {
    Add(head, head_deps, head_mem);
  }
  // The loss kernel's tensors (sim/workload/loss.h); vocabulary-parallel, it all-reduces the
  // row max, the target logit and the sum of exponentials.
  const Bytes l16 = loss_.logits16;
  WithComms(Compute("cross_entropy", OpPass::kForward, OpClass::kMemoryBound,
                    Flops::Count(5.0 * static_cast<double>(tokens_ * v)), l16 + l16 * 2, g),
            {}, MemList(loss_.forward.begin(), loss_.forward.end()), {},
            {{"tp_all_reduce_loss", CollectiveKind::kAllReduce, Bytes::Count(3 * 4 * tokens_),
              &tp_group_, false}});
}

void Lowerer::HeadBackward(std::vector<int32_t> deps, const GatherFrees& free_gather) {
  const int32_t g = NumGroups() - 1;
  const int64_t h = s_.model.hidden, v = s_.model.vocab / s_.parallel.tp;
  const Bytes hidden = Bytes::Count(kCompute * tokens_ / rep_ * h);
  const Bytes l32 = loss_.logits16 * 2;
  MemList ce(loss_.backward.begin(), loss_.backward.end());
  for (const MemAction& a : BackwardStart()) ce.push_back(a);
  // The head's weight gradient appears with its backward, which a chunked head runs inside the
  // loss's, chunk by chunk.
  MemList head_grads = TransientGradients(g);
  for (const MemAction& a : FirstGradients(g)) head_grads.push_back(a);
  if (loss_.chunked_head) {
    ce.insert(ce.end(), head_grads.begin(), head_grads.end());
    head_grads.clear();
  }
  Add(Compute("cross_entropy", OpPass::kBackward, OpClass::kMemoryBound,
              Flops::Count(3.0 * static_cast<double>(tokens_ * v)), l32 * 2, g),
      deps, ce);
  // With adapters the head is frozen: its backward computes the input gradient only.
  const double gemms = s_.training.finetune.adapters() ? 1.0 : 2.0;
  Op head = Compute(
      "lm_head", OpPass::kBackward, OpClass::kGemm,
      Flops::Count(gemms * 2.0 * static_cast<double>(tokens_) * static_cast<double>(h) *
                   static_cast<double>(v)),
      Bytes::Count(static_cast<int64_t>(gemms) * kCompute * (tokens_ * h + h * v + tokens_ * v)),
      g);
  head.keep_16bit = true;
  head.inv_k = GemmInvK(tokens_, h, v, OpPass::kBackward, s_.training.finetune.adapters());
  head.waves = static_cast<float>(LinearWaveFactor(tokens_, h, v, 1, /*backward=*/true,
                                                   s_.training.finetune.adapters(), Sms()));
  // The input gradient exists while it runs; the saved input and the logits gradient are
  // freed when it ends.
  MemList head_mem = {
      {MemWhen::kStart, MemCategory::kActivations, hidden},
      {MemWhen::kEnd, MemCategory::kLogits, -loss_.head_grad},
      {MemWhen::kEnd, MemCategory::kGatheredParams, -policy_->CastCopies(HeadParameters())},
      {MemWhen::kEnd, MemCategory::kActivations, -hidden},
      {MemWhen::kEnd, MemCategory::kActivations, -hidden}};
  head_mem.insert(head_mem.end(), head_grads.begin(), head_grads.end());
  std::vector<int32_t> head_deps;
  Hooks(g, "lm_head", /*backward=*/true, head_deps, head_mem);
  if (s_.parallel.sequence_parallel) {
    WithComms(head, head_deps, std::move(head_mem), {TpGather()}, {TpReduce()});
  } else {
    WithComms(head, head_deps, std::move(head_mem), {}, {TpReduce()});
  }
  MemList norm_mem = {{MemWhen::kStart, MemCategory::kActivations, hidden},
                      {MemWhen::kEnd, MemCategory::kActivations, -hidden},
                      {MemWhen::kEnd, MemCategory::kActivations, -hidden}};
  FreeGathers(free_gather, norm_mem);
  std::vector<int32_t> norm_deps;
  Hooks(g, "final_norm", /*backward=*/true, norm_deps, norm_mem);
  Add(FinalNorm(OpPass::kBackward, g), norm_deps, norm_mem);
}

void Lowerer::EmbeddingBackward(std::vector<int32_t> deps, const GatherFrees& free_gather) {
  const int64_t h = s_.model.hidden;
  const Bytes mask = Bytes::Count(s_.model.dropout > 0 ? tokens_ / rep_ * h : 0);
  MemList mem = {{MemWhen::kEnd, MemCategory::kActivations, -mask}};
  FreeGathers(free_gather, mem);
  for (const MemAction& a : TransientGradients(0)) mem.push_back(a);
  for (const MemAction& a : FirstGradients(0)) mem.push_back(a);
  Hooks(0, "embedding", /*backward=*/true, deps, mem);
  // A frozen embedding (adapters) has no gradient to scatter.
  const Op emb =
      Compute("embedding", OpPass::kBackward, OpClass::kMemoryBound, Flops(),
              Bytes::Count(s_.training.finetune.adapters() ? 0 : 3 * kCompute * tokens_ * h), 0);
  // With SP the output gradient arrives reduce-scattered: gathered again for the lookup.
  if (s_.parallel.sequence_parallel) {
    WithComms(emb, deps, std::move(mem), {TpGather()}, {});
  } else {
    Add(emb, deps, mem);
  }
}

}  // namespace sim::lowering_internal
