// Tensor, sequence, context and expert parallelism's collectives around the layer ops.

#include "sim/workload/lowerer/lowerer.h"

namespace sim::lowering_internal {

int32_t Lowerer::WithComms(const Op& x, absl::Span<const int32_t> deps, MemList&& mem,
                           std::initializer_list<ModelParallelComm> pre,
                           std::initializer_list<ModelParallelComm> post, bool async) {
  const bool overlap = s_.parallel.tp_comm_overlap || async;
  bool first = true;
  auto emit = [&](const ModelParallelComm& c) {
    if (c.group->size <= 1) return;
    Op op = Collective(c.name, c.kind, c.tensor, *c.group, x.group);
    op.pass = x.pass;
    op.stream = overlap ? StreamKind::kTpComm : StreamKind::kCompute;
    absl::InlinedVector<int32_t, 8> d;  // AnchorDeps() and `deps`, without a heap vector
    if (overlap) {
      if (const auto anchor = b_.last_compute()) d.push_back(*anchor);
    }
    if (first) {
      for (int32_t x : deps) d.push_back(x);
    }
    first = false;
    const Bytes buffer = c.buffer ? c.tensor : Bytes();
    // Beside x, the buffer exists from launch (x may start before the collective does).
    const int32_t id = Add(
        op, d, {{overlap ? MemWhen::kIssue : MemWhen::kStart, MemCategory::kCommBuffers, buffer}});
    if (overlap) b_.AddOverlapped(id);
    if (c.buffer) mem.emplace_back(MemWhen::kEnd, MemCategory::kCommBuffers, -buffer);
  };
  for (const auto& c : pre) emit(c);
  if (overlap) {
    for (const auto& c : post) emit(c);
  }
  const int32_t id = Add(x, first || overlap ? deps : absl::Span<const int32_t>(), mem);
  if (!overlap) {
    for (const auto& c : post) emit(c);
  }
  return id;
}

int32_t Lowerer::WithExpertAllToAll(const LayerOp& lo, const Op& x, absl::Span<const int32_t> deps,
                                    MemList&& mem, bool backward) {
  const int64_t k = s_.model.moe->top_k, local = tokens_ / rep_;
  const Bytes sent = Bytes::Count(
      kCompute * s_.model.hidden *
      static_cast<int64_t>(std::llround(static_cast<double>(local * k) * shape_.expert_load)));
  const Bytes gathered =
      Bytes::Count(kCompute * s_.model.hidden * RoutedTokenCopies(shape_, local, k));
  const bool toward = (lo.role == ParallelRole::kEpDispatch) != backward;
  auto a2a = [&] {
    Op op = Collective(lo.role == ParallelRole::kEpDispatch ? "ep_dispatch" : "ep_combine",
                       CollectiveKind::kAllToAll, sent, ep_group_, x.group);
    op.pass = x.pass;
    op.stream = StreamKind::kCompute;
    return op;
  };
  auto etp = [&](absl::string_view name, CollectiveKind kind) {
    Op op = Collective(name, kind, gathered, etp_group_, x.group);
    op.pass = x.pass;
    op.stream = StreamKind::kCompute;
    return op;
  };
  if (toward) {
    const int32_t id = Add(x, deps, mem);
    if (ep_group_.size > 1) Add(a2a(), {}, {});
    if (etp_group_.size > 1) Add(etp("etp_all_gather", CollectiveKind::kAllGather), {}, {});
    return id;
  }
  std::vector<int32_t> before(deps.begin(), deps.end());
  if (etp_group_.size > 1) {
    before = {Add(etp("etp_reduce_scatter", CollectiveKind::kReduceScatter), before, {})};
  }
  if (ep_group_.size > 1) {
    Add(a2a(), before, {{MemWhen::kStart, MemCategory::kCommBuffers, sent}});
    mem.emplace_back(MemWhen::kEnd, MemCategory::kCommBuffers, -sent);
    return Add(x, {}, mem);
  }
  return Add(x, before, mem);
}

int32_t Lowerer::LayerOpWithComms(const LayerOp& lo, const Op& x, absl::Span<const int32_t> deps,
                                  MemList&& mem, bool backward) {
  // Without TP and CP no op has collectives of its own (the common, hot case).
  if (lo.role == ParallelRole::kNone ||
      (tp_group_.size <= 1 && cp_group_.size <= 1 && ep_group_.size <= 1 && etp_group_.size <= 1)) {
    return Add(x, deps, mem);
  }
  if (lo.role == ParallelRole::kEpDispatch || lo.role == ParallelRole::kEpCombine) {
    return WithExpertAllToAll(lo, x, deps, std::move(mem), backward);
  }
  const bool sp = s_.parallel.sequence_parallel;
  const CollectiveKind reduce = sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
  const Bytes kv = Bytes::Count(kCompute * 2 * s_.training.seq_len * s_.training.micro_batch *
                                s_.model.kv_heads * s_.model.head_dim() / s_.parallel.tp);
  // A column-parallel GEMM's sequence-parallel input, gathered in fp8 under Transformer Engine:
  // TE casts the norm's output to fp8 before the all-gather (_LayerNormLinear forward gathers
  // ln_out after the cast; its backward gathers the saved fp8 input again for the weight
  // gradient). A row-parallel GEMM's output gradient is gathered in 16 bits.
  const bool fp8_gather = shape_.te_fp8 && lo.role == ParallelRole::kColumn &&
                          lo.op_class == OpClass::kGemm && !lo.keep_16bit;
  const ModelParallelComm gather_in{"tp_all_gather", CollectiveKind::kAllGather,
                                    fp8_gather ? Bytes::Count(act_bytes_.count() / 2) : act_bytes_,
                                    &tp_group_, true};
  const ModelParallelComm reduce_out{sp ? "tp_reduce_scatter" : "tp_all_reduce", reduce, act_bytes_,
                                     &tp_group_, false};
  const ModelParallelComm gather_kv{"cp_all_gather_kv", CollectiveKind::kAllGather, kv, &cp_group_,
                                    true};
  const ModelParallelComm reduce_dkv{"cp_reduce_scatter_dkv", CollectiveKind::kReduceScatter, kv,
                                     &cp_group_, false};
  // Current scaling casts each TP rank's shard of that input with one scale for the group: the
  // ranks' amaxes are reduced first (an all-reduce of one fp32 with MAX, waited on before the
  // cast: Float8CurrentScalingQuantizer with_amax_reduction, transformer_engine/pytorch/csrc/
  // quantizer.cpp).
  const ModelParallelComm amax_reduce{"fp8_amax_all_reduce", CollectiveKind::kAllReduce,
                                      Bytes::Count(4), &tp_group_, false};
  const bool reduce_amax = fp8_gather && shape_.fp8_recipe == Fp8Recipe::kTensorwise;
  switch (lo.role) {
    case ParallelRole::kNone:
      break;
    case ParallelRole::kColumn:
      if (!backward) {
        if (sp && reduce_amax)
          return WithComms(x, deps, std::move(mem), {amax_reduce, gather_in}, {});
        return sp ? WithComms(x, deps, std::move(mem), {gather_in}, {})
                  : WithComms(x, deps, std::move(mem), {}, {});
      }
      // Backward: the input again for the weight gradient (SP), the input gradient reduced.
      // Megatron-LM launches both asynchronously beside the input- and weight-gradient GEMMs
      // (LinearWithGradAccumulationAndAsyncCommunication, on by default since 2021).
      return sp ? WithComms(x, deps, std::move(mem), {gather_in}, {reduce_out},
                            policy_->AsyncTpBackward())
                : WithComms(x, deps, std::move(mem), {}, {reduce_out}, policy_->AsyncTpBackward());
    case ParallelRole::kRow:
      if (!backward) return WithComms(x, deps, std::move(mem), {}, {reduce_out});
      return sp ? WithComms(x, deps, std::move(mem), {gather_in}, {})
                : WithComms(x, deps, std::move(mem), {}, {});
    case ParallelRole::kCpKv:
      if (s_.parallel.cp_kind == CpKind::kUlysses) {
        // Each GPU's s/cp tokens of Q, K and V (of its TP heads) go out by all-to-all and come
        // back as the whole sequence of 1/cp of the heads; the attention output returns the same
        // way. Backward: the output gradient in, the Q, K and V gradients out.
        const int64_t local = kCompute * s_.training.seq_len / s_.parallel.cp *
                              s_.training.micro_batch * s_.model.head_dim() / s_.parallel.tp;
        const Bytes qkv = Bytes::Count(local * (s_.model.heads + 2 * s_.model.kv_heads));
        const Bytes out = Bytes::Count(local * s_.model.heads);
        const ModelParallelComm a2a_qkv{backward ? "cp_all_to_all_dqkv" : "cp_all_to_all_qkv",
                                        CollectiveKind::kAllToAll, qkv, &cp_group_, !backward};
        const ModelParallelComm a2a_out{backward ? "cp_all_to_all_dout" : "cp_all_to_all_out",
                                        CollectiveKind::kAllToAll, out, &cp_group_, backward};
        return backward ? WithComms(x, deps, std::move(mem), {a2a_out}, {a2a_qkv})
                        : WithComms(x, deps, std::move(mem), {a2a_qkv}, {a2a_out});
      }
      if (s_.parallel.cp_kind == CpKind::kRing) {
        // The K, V chunks travel beside the chunk-by-chunk attention (PyTorch issues its K, V
        // all-gather before computing on the local chunk; TE's p2p sends the next chunk while
        // the current one computes): priced as the all-gather beside the kernel. Backward: K, V
        // again, and each chunk's fp32 dK, dV accumulators passed on to the next rank after
        // every chunk (PyTorch's _AllToAllRotater, a one-peer permute), cp hops of a chunk
        // each, priced as the ring all-gather of cp chunks that makes the same hops.
        const ModelParallelComm rotate_dkv{"cp_ring_dkv", CollectiveKind::kAllGather, kv * 2,
                                           &cp_group_, false};
        return backward ? WithComms(x, deps, std::move(mem), {gather_kv}, {rotate_dkv},
                                    /*async=*/true)
                        : WithComms(x, deps, std::move(mem), {gather_kv}, {}, /*async=*/true);
      }
      return backward ? WithComms(x, deps, std::move(mem), {gather_kv}, {reduce_dkv})
                      : WithComms(x, deps, std::move(mem), {gather_kv}, {});
    case ParallelRole::kEpDispatch:
    case ParallelRole::kEpCombine:
      break;  // above
  }
  return Add(x, deps, mem);
}

}  // namespace sim::lowering_internal
