// One decoder layer's forward, recompute and backward, with activation offload.

#include "sim/workload/lowerer/lowerer.h"

namespace sim::lowering_internal {

void Lowerer::LayerForward(int32_t g, std::vector<int32_t> first_deps,
                           const GatherFrees& free_gather) {
  const LayerCheckpoint c = CheckpointOf(g);
  const Bytes cast = policy_->CastCopies(group_params_[g]);
  std::vector<Bytes> dropped;  // tensors not kept for backward: freed when the forward ends
  const std::vector<LayerOp>& ops = Ops(g);
  if (shape_.te_fp8_weight_cache && b_.micro_batch() == 0) {
    // The step's first forward of the layer casts its weights to fp8 with their transposes.
    Add(Fp8WeightCache(ops, g), first_deps, {});
    first_deps.clear();  // the layer's ops follow it on the compute stream
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    const LayerOp& lo = ops[i];
    // The layer's autocast copies come with its first op.
    MemList mem = {{MemWhen::kStart, MemCategory::kGatheredParams, i == 0 ? cast : Bytes()}};
    for (const SavedTensor& t : lo.saves) {
      if (!Allocated(t, c.policy)) continue;
      mem.emplace_back(MemWhen::kStart, MemCategory::kActivations, t.bytes);
      if (!Kept(g, c, lo, t)) dropped.push_back(t.bytes);
    }
    Dequantized(lo, mem);
    std::vector<int32_t>& deps = OpDeps();
    if (i == 0) deps.assign(first_deps.begin(), first_deps.end());
    Hooks(g, lo.name, /*backward=*/false, deps, mem);
    LayerOpWithComms(lo, FromLayerOp(lo, OpPass::kForward, g), deps, std::move(mem),
                     /*backward=*/false);
  }
  for (Bytes b : dropped) AddMemToLast({MemWhen::kEnd, MemCategory::kActivations, -b});
  // Autocast's copies are saved for the backward only where the layer is not checkpointed.
  if (c.policy != Recompute::kNone) {
    AddMemToLast({MemWhen::kEnd, MemCategory::kGatheredParams, -cast});
  }
  for (Bytes b : free_gather) AddMemToLast({MemWhen::kEnd, MemCategory::kGatheredParams, -b});
  // Activation offload: what the layer keeps goes to the host, freed here when the copy ends.
  if (s_.parallel.offload.activations) {
    const std::vector<Bytes> kept = KeptTensors(g);
    MemList frees;
    Bytes total;
    for (Bytes b : kept) {
      frees.emplace_back(MemWhen::kEnd, MemCategory::kActivations, -b);
      total += b;
    }
    if (total > Bytes()) {
      Add(HostOp("activations_to_host", OpClass::kPcieCopy, total, g), AnchorDeps(), frees);
    }
  }
}

std::vector<Bytes> Lowerer::KeptTensors(int32_t g) const {
  const LayerCheckpoint c = CheckpointOf(g);
  std::vector<Bytes> kept;
  for (const LayerOp& lo : Ops(g)) {
    for (const SavedTensor& t : lo.saves) {
      if (Allocated(t, c.policy) && Kept(g, c, lo, t)) kept.push_back(t.bytes);
    }
  }
  return kept;
}

std::optional<int32_t> Lowerer::FetchActivations(int32_t g) {
  if (!s_.parallel.offload.activations || g <= 0 || g > layers_) return std::nullopt;
  if (fetched_[g]) return fetched_[g];
  MemList mem;
  Bytes total;
  for (Bytes b : KeptTensors(g)) {
    mem.emplace_back(MemWhen::kStart, MemCategory::kActivations, b);
    total += b;
  }
  if (total == Bytes()) return std::nullopt;
  fetched_[g] = Add(HostOp("activations_to_gpu", OpClass::kPcieCopy, total, g), AnchorDeps(), mem);
  return fetched_[g];
}

void Lowerer::RecomputeLayer(int32_t g, std::vector<int32_t>& deps, MemList& first) {
  const LayerCheckpoint c = CheckpointOf(g);
  first.push_back(
      {MemWhen::kStart, MemCategory::kGatheredParams, policy_->CastCopies(group_params_[g])});
  bool emitted = false;
  for (const LayerOp& lo : Ops(g)) {
    MemList mem;
    for (const SavedTensor& t : lo.saves) {
      if (Allocated(t, c.policy) && !Kept(g, c, lo, t)) {
        mem.emplace_back(MemWhen::kStart, MemCategory::kActivations, t.bytes);
      }
    }
    if (!Reruns(c, lo)) {
      // An op that is not re-run (cached by per-op checkpointing, or outside the selective
      // modules): what it dropped is its predecessor's output (a norm's under layernorm, the
      // experts' activation's under moe_act), re-created there.
      for (const MemAction& a : mem) AddMemToLast({MemWhen::kEnd, a.category, a.bytes});
      continue;
    }
    const double share = c.policy == Recompute::kOp ? lo.sac_recompute : 1.0;
    std::vector<int32_t>& op_deps = OpDeps();
    if (!emitted) {
      mem.insert(mem.end(), first.begin(), first.end());
      first.clear();
      op_deps.assign(deps.begin(), deps.end());
      deps.clear();
    }
    Dequantized(lo, mem);
    Op x = FromLayerOp(lo, OpPass::kRecompute, g);
    x.flops = x.flops * share;
    x.bytes_moved = x.bytes_moved * share;
    Hooks(g, lo.name, /*backward=*/false, op_deps, mem);
    LayerOpWithComms(lo, x, op_deps, std::move(mem), /*backward=*/false);
    emitted = true;
  }
}

void Lowerer::LayerBackward(int32_t g, std::vector<int32_t> first_deps,
                            const GatherFrees& free_at_end) {
  const LayerCheckpoint c = CheckpointOf(g);
  MemList grads = TransientGradients(g);
  for (const MemAction& a : FirstGradients(g)) grads.push_back(a);
  // The checkpointed layers (a uniform group at once, when its last layer is reached) re-run
  // their forward first.
  if (c.policy != Recompute::kNone && g == c.group_last) {
    for (int32_t r = c.group_first; r <= c.group_last; ++r) RecomputeLayer(r, first_deps, grads);
  }
  bool first = true;
  const std::vector<LayerOp>& ops = Ops(g);
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    // The op's input gradient (autograd's tensors' size) exists while it runs; every tensor
    // it holds is freed, one by one, when it ends.
    Bytes input_grad;
    for (const SavedTensor& t : it->saves) {
      if (!t.sac_only) input_grad += t.bytes;
    }
    MemList mem;
    mem.emplace_back(MemWhen::kStart, MemCategory::kActivations, input_grad);
    for (const SavedTensor& t : it->saves) {
      if (Allocated(t, c.policy))
        mem.emplace_back(MemWhen::kEnd, MemCategory::kActivations, -t.bytes);
    }
    mem.emplace_back(MemWhen::kEnd, MemCategory::kActivations, -input_grad);
    Dequantized(*it, mem);
    std::vector<int32_t>& deps = OpDeps();
    if (first) {
      mem.insert(mem.end(), grads.begin(), grads.end());
      grads.clear();
      deps.assign(first_deps.begin(), first_deps.end());
    }
    Hooks(g, it->name, /*backward=*/true, deps, mem);
    LayerOpWithComms(*it, FromLayerOp(*it, OpPass::kBackward, g), deps, std::move(mem),
                     /*backward=*/true);
    first = false;
  }
  AddMemToLast(
      {MemWhen::kEnd, MemCategory::kGatheredParams, -policy_->CastCopies(group_params_[g])});
  for (Bytes b : free_at_end) AddMemToLast({MemWhen::kEnd, MemCategory::kGatheredParams, -b});
}

}  // namespace sim::lowering_internal
