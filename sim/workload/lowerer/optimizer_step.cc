// Persistent states, gradients and the optimizer step at each stage's end.

#include <cmath>
#include <set>
#include <utility>

#include "sim/workload/lowerer/lowerer.h"
#include "sim/workload/policy/framework_traits.h"

namespace sim::lowering_internal {

namespace {

// Bytes one optimizer step reads and writes per parameter of the local shard (memory-bound).
// AdamW over an fp32 master: reads grad 2, master 4, m 4, v 4 and writes master, m, v and the
// bf16 weight copy 2. Where the trained parameters themselves hold the update, with gradients
// and moments of `state` bytes (PyTorch DDP's fp32, torchtune's bf16), one fused pass reads
// parameter, gradient, m and v and writes parameter, m and v: 7 · state.
// The foreach and loop updates (torch/optim/adamw.py) run it as separate element-wise passes:
// decay p (r/w), lerp m toward g (r m, g; w m), scale v (r/w), addcmul v with g·g (r v, g; w v),
// sqrt v into t (r v; w t), divide t (r/w), add eps (r/w), addcdiv p by m / t (r p, m, t; w p):
// 20 accesses per parameter, 13 more than one fused pass, of `state` bytes each. Measured on an
// H200 (docs/measurements/h200-2026-12-04, Llama 3.2 3B): foreach − fused = 40 ms under DDP
// (52 B × 3.21e9 at 4.2 TB/s: 40 ms) and 21 ms under torchtune (26 B: 20 ms).
int64_t OptimizerTrafficPerParam(OptimizerKind o, OptimizerImpl impl, int64_t state,
                                 bool in_place) {
  switch (o) {
    case OptimizerKind::kAdamW: {
      const int64_t one_pass = in_place ? 7 * state : (2 + 4 + 4 + 4) + (4 + 4 + 4 + 2);
      return one_pass + (impl == OptimizerImpl::kFused ? 0 : 13 * state);
    }
    case OptimizerKind::kSgd:
      return (2 + 4 + 4) + (4 + 4 + 2);
    case OptimizerKind::kAdam8bit:
    case OptimizerKind::kAdam8bitPaged:
      return (2 + 4 + 1 + 1) + (4 + 1 + 1 + 2);
  }
  return 0;
}

// Host DRAM bytes an offloaded optimizer step reads and writes per parameter (DeepSpeed
// DeepSpeedCPUAdam, torch.optim on CPU tensors): fp32 gradient, parameter and moments read, the
// parameter and moments written, the 16-bit copy for the GPU written: 4·4 + 3·4 + 2.
int64_t HostOptimizerTrafficPerParam(OptimizerKind o) {
  switch (o) {
    case OptimizerKind::kAdamW:
      return 4 * 4 + 3 * 4 + 2;
    case OptimizerKind::kSgd:
      return 3 * 4 + 2 * 4 + 2;
    case OptimizerKind::kAdam8bit:
    case OptimizerKind::kAdam8bitPaged:
      return (4 + 4 + 1 + 1) + (4 + 1 + 1 + 2);
  }
  return 0;
}

}  // namespace

int64_t Lowerer::StepTrafficPerParam() const {
  const BytesPerParam bpp =
      StateBytesPerParam(s_.parallel.framework, s_.training.optimizer, s_.training.precision);
  return OptimizerTrafficPerParam(
      s_.training.optimizer, s_.training.optimizer_impl.value_or(policy_->DefaultOptimizerImpl()),
      bpp.optimizer_m.bytes_per_param, bpp.master_weights.bytes_per_param == 0);
}

std::vector<MemAction> Lowerer::PersistentActions(int32_t stage) const {
  const StateSplit st = PersistentStates(s_, stage);
  return {
      {MemWhen::kIssue, MemCategory::kWeights, st.weights + st.adapters},
      {MemWhen::kIssue, MemCategory::kGradients,
       LazyGradients() ? st.kept_gradients : st.gradients},
      {MemWhen::kIssue, MemCategory::kOptimizer, st.optimizer},
      {MemWhen::kIssue, MemCategory::kCommBuffers, policy_->PersistentBuffers()},
      {MemWhen::kIssue, MemCategory::kWorkspace,
       s_.cluster.gpu.blas_workspace + TeDummyWeightGradients(stage) + TeFp8WeightCopies(stage)},
      {MemWhen::kIssue, MemCategory::kReserved, s_.runtime.reserved}};
}

Bytes Lowerer::TeDummyWeightGradients(int32_t stage) const {
  const TeVersion te = s_.training.te_version;
  if (!TraitsOf(s_.parallel.framework).FusesWeightGradientAccumulation() ||
      KernelLibraryOf(s_) != KernelLibrary::kTransformerEngine ||
      !te.CachesDummyWeightGradients() || s_.training.finetune.adapters()) {
    return {};
  }
  // One placeholder per distinct weight shape (out x in) on the stage, in the parameters'
  // 16-bit dtype: the layers' linear layers (Megatron-Core's router is a plain
  // torch.nn.functional.linear, no TE module) and the output layer, whose
  // ColumnParallelLinear takes its placeholder from the same TE cache where TE is installed
  // (megatron/core/tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication
  // backward, get_dummy_wgrad).
  std::set<std::pair<int64_t, int64_t>> shapes;
  for (size_t vs = static_cast<size_t>(stage); vs < vstage_groups_.size();
       vs += static_cast<size_t>(s_.parallel.pp)) {
    for (int32_t g = vstage_groups_[vs].first; g <= vstage_groups_[vs].second; ++g) {
      if (g == NumGroups() - 1) {
        shapes.insert({s_.model.vocab / s_.parallel.tp, s_.model.hidden});
        continue;
      }
      if (g == 0) continue;  // the embedding's backward returns its own gradient
      for (const LayerOp& op : Ops(g)) {
        if (op.op_class != OpClass::kGemm || op.gemm_cols == 0 || op.frozen ||
            op.name == "router") {
          continue;
        }
        if (op.gemm_groups > 1 && !te.CachesGroupedDummyWeightGradients()) continue;
        shapes.insert({op.gemm_cols, op.gemm_inner});
      }
    }
  }
  int64_t elements = 0;
  for (const auto& [out, in] : shapes) elements += out * in;
  return Bytes::Count(kCompute * elements);
}

Bytes Lowerer::TeFp8WeightCopies(int32_t stage) const {
  if (!shape_.te_fp8_weight_cache || s_.training.fp8_params) return {};
  // Transformer Engine keeps each fp8 linear layer's weight cast to fp8 (with its transpose on
  // Hopper, 1 + 1 B per element; the recipe's bytes, Fp8WeightCopyOf) in the module's workspace
  // from the step's first micro-batch on, and
  // holds it between steps (TransformerEngineBaseModule.get_weight_workspace caching under
  // "weight" when Megatron passes is_first_microbatch: transformer_engine/pytorch/module/
  // base.py, _fp8_workspaces): persistent memory beside the 16-bit weights. The layers'
  // GEMMs only; the LM head and the router stay 16-bit (LayerOp::keep_16bit). With
  // training.fp8_params the fp8 weight is the parameter and its transpose takes the place of the
  // 16-bit copy's second byte: nothing beside the weights.
  int64_t elements = 0;
  for (size_t vs = static_cast<size_t>(stage); vs < vstage_groups_.size();
       vs += static_cast<size_t>(s_.parallel.pp)) {
    for (int32_t g = vstage_groups_[vs].first; g <= vstage_groups_[vs].second; ++g) {
      if (g == 0 || g == NumGroups() - 1) continue;
      for (const LayerOp& op : Ops(g)) {
        if (op.op_class != OpClass::kGemm || op.keep_16bit || op.frozen) continue;
        elements += op.fp8_weight_elements;
      }
    }
  }
  return Bytes::Count(
      std::llround(Fp8WeightCopyOf(shape_).kept_bytes_per_element * static_cast<double>(elements)));
}

Bytes Lowerer::GroupGradientBytes(int32_t g) const {
  if (p_.stage_states.empty() || p_.stage_states[b_.stage()].gradients == Bytes()) return {};
  const int64_t n = plan_.stage >= 2 ? plan_.shard_degree : 1;
  int64_t params = group_trainable_[g];
  // A tied embedding's one gradient is created by the head's backward, which runs first; the
  // embedding's backward accumulates into it (GroupParameters counts the matrix in both).
  if (g == 0 && s_.model.tied_embeddings && s_.parallel.pp == 1 &&
      !s_.training.finetune.adapters()) {
    params -= CountParameters(s_.model).embedding / s_.parallel.tp;
  }
  return Bytes::Count(p_.stage_states[b_.stage()].lazy_gradient_bytes_per_param *
                      ((params + n - 1) / n));
}

std::vector<Bytes> Lowerer::OptimizerTemporaries(StageParams total, int64_t local) const {
  if (s_.training.optimizer != OptimizerKind::kAdamW || local <= 0) return {};
  const int64_t moment =
      StateBytesPerParam(s_.parallel.framework, s_.training.optimizer, s_.training.precision)
          .optimizer_v.bytes_per_param;
  switch (s_.training.optimizer_impl.value_or(policy_->DefaultOptimizerImpl())) {
    case OptimizerImpl::kFused:
      return {};
    case OptimizerImpl::kForeach: {
      // The local share of each group's parameters, in proportion (a sharded optimizer
      // updates 1/n of each).
      std::vector<Bytes> out;
      int64_t left = local;
      for (size_t vs = b_.stage(); vs < vstage_groups_.size(); vs += s_.parallel.pp) {
        for (int32_t g = vstage_groups_[vs].first; g <= vstage_groups_[vs].second; ++g) {
          const int64_t share = std::min(
              left, static_cast<int64_t>(static_cast<double>(group_trainable_[g]) /
                                         static_cast<double>(std::max<int64_t>(1, total.total)) *
                                         static_cast<double>(local)));
          if (share > 0) out.push_back(Bytes::Count(moment * share));
          left -= share;
        }
      }
      if (left > 0) out.push_back(Bytes::Count(moment * left));
      return out;
    }
    case OptimizerImpl::kLoop: {
      if (s_.training.finetune.adapters()) return {};  // adapter matrices: negligible
      const ModelSpec& m = s_.model;
      const bool holds_vocab = b_.stage() == 0 || b_.stage() == s_.parallel.pp - 1;
      const int64_t ffn = std::max(m.ffn_hidden, m.moe ? m.moe->expert_ffn_hidden : 0);
      const int64_t largest =
          std::max(holds_vocab ? m.vocab * m.hidden : 0, std::max(ffn, m.hidden) * m.hidden) /
          s_.parallel.tp;
      // `(exp_avg_sq.sqrt() / bias_correction2_sqrt)`: the root and the quotient coexist.
      const Bytes one = Bytes::Count(moment * std::min(local, largest));
      return {one, one};
    }
  }
  return {};
}

void Lowerer::FinishStage(std::optional<int32_t> blocking_send) {
  SetMicroBatch(static_cast<int32_t>(m_) - 1);
  b_.SetPass(OpPass::kStep);
  DpEnv env = Env();
  policy_->BeforeOptimizer(env);
  const StageParams total{StageTrainable(s_)[b_.stage()], stage_experts_[b_.stage()]};
  const int64_t local = policy_->OptimizerShard(total);
  std::vector<int32_t> deps = policy_->TakeStepReductions(b_.stage());
  if (b_.last_compute()) deps.push_back(*b_.last_compute());
  if (blocking_send) deps.push_back(*blocking_send);
  deps.insert(deps.end(), b_.waits().begin(), b_.waits().end());
  b_.ClearWaits();
  if (s_.training.optimizer_in_backward) return;  // every update ran in the backward
  // Lazy gradients are freed, group by group, when the step ends (zero_grad(set_to_none)).
  MemList frees;
  if (backward_buffers_live_[b_.stage()]) {  // ZeRO-1's buckets: released before the step
    frees.emplace_back(MemWhen::kStart, MemCategory::kCommBuffers, -policy_->BackwardBuffers());
    backward_buffers_live_[b_.stage()] = false;
  }
  if (LazyGradients()) {
    for (size_t vs = b_.stage(); vs < vstage_groups_.size(); vs += s_.parallel.pp) {
      for (int32_t g = vstage_groups_[vs].first; g <= vstage_groups_[vs].second; ++g) {
        if (grads_allocated_[g])
          frees.emplace_back(MemWhen::kEnd, MemCategory::kGradients, -GroupGradientBytes(g));
      }
    }
  }
  const OffloadSpec& off = s_.parallel.offload;
  const StateSplit& st = p_.stage_states[b_.stage()];
  const bool on_host =
      st.optimizer == Bytes() && (st.host > Bytes() || st.nvme > Bytes()) &&
      (off.optimizer != OffloadTarget::kNone || off.params != OffloadTarget::kNone);
  if (!on_host) {
    Op opt = Compute(
        "optimizer", OpPass::kStep, OpClass::kMemoryBound,
        Flops::Count(12.0 * static_cast<double>(local)),
        Bytes::Count(StepTrafficPerParam() * local) + policy_->StepExtraTraffic(total, local),
        std::nullopt);
    const Bytes upcast = policy_->StepTransient(local);
    frees.emplace_back(MemWhen::kStart, MemCategory::kGradients, upcast);
    frees.emplace_back(MemWhen::kEnd, MemCategory::kGradients, -upcast);
    for (const Bytes t : OptimizerTemporaries(total, local)) {
      frees.emplace_back(MemWhen::kStart, MemCategory::kOptimizer, t);
      frees.emplace_back(MemWhen::kEnd, MemCategory::kOptimizer, -t);
    }
    const int32_t id = Add(opt, deps, frees);
    policy_->AfterOptimizer(env, id, total);
    return;
  }
  // The update runs on the host CPU (ZeRO-Offload's DeepSpeedCPUAdam, torch.optim on CPU
  // tensors): gradients that stayed on the GPU go over first (Megatron-Core's main_grad),
  // ZeRO-Infinity reads and writes the NVMe-resident states around it, and the updated 16-bit
  // parameters come back unless they live on the host.
  std::optional<int32_t> last;
  auto chain = [&](Op op, MemList mem) {
    last = Add(op, last ? std::vector<int32_t>{*last} : deps, mem);
  };
  if (!policy_->GradientsToHost()) {
    chain(HostOp("grads_to_host", OpClass::kPcieCopy, Bytes::Count(4 * local), std::nullopt), {});
  }
  if (st.nvme > Bytes()) {
    chain(HostOp("nvme_read", OpClass::kNvmeIo, st.nvme, std::nullopt), {});
  }
  chain(HostOp("optimizer", OpClass::kHostCompute,
               Bytes::Count(HostOptimizerTrafficPerParam(s_.training.optimizer) * local),
               std::nullopt),
        frees);
  if (st.nvme > Bytes()) {
    chain(HostOp("nvme_write", OpClass::kNvmeIo, st.nvme, std::nullopt), {});
  }
  if (off.params == OffloadTarget::kNone) {
    chain(HostOp("params_to_gpu", OpClass::kPcieCopy, Bytes::Count(kCompute * local), std::nullopt),
          {});
  }
  policy_->AfterOptimizer(env, *last, total);
}

}  // namespace sim::lowering_internal
