// ZeRO-3 / FSDP parameter gathering, with DeepSpeed's parameter coordinator trace.

#include "sim/workload/lowerer/lowerer.h"

namespace sim::lowering_internal {

int32_t Lowerer::EmitGather(int32_t g, Bytes buffer, const MemList& buffers) {
  ProgramBuilder::DepList deps = AnchorDeps();
  Bytes shard;
  if (s_.parallel.offload.params != OffloadTarget::kNone) {
    // The shard comes in from the host first (ZeRO-Infinity, FSDP CPUOffload) and is freed
    // once gathered.
    shard = buffer.CeilDiv(plan_.shard_degree);
    // ZeRO-Infinity reads an NVMe-resident shard into a pinned host buffer first.
    if (s_.parallel.offload.params == OffloadTarget::kNvme) {
      deps = {Add(HostOp("param_from_nvme", OpClass::kNvmeIo, shard, g), deps, {})};
    }
    deps = {Add(HostOp("param_to_gpu", OpClass::kPcieCopy, shard, g), deps,
                {{MemWhen::kStart, MemCategory::kGatheredParams, shard}})};
  }
  MemList mem = buffers;
  // FSDP2 gathers into a communication buffer that TakeGather's copy splits into the
  // parameters.
  const MemCategory into =
      policy_->CopiesAroundCollectives() ? MemCategory::kCommBuffers : MemCategory::kGatheredParams;
  if (buffers.empty()) mem.emplace_back(MemWhen::kIssue, into, buffer);
  mem.emplace_back(MemWhen::kEnd, MemCategory::kGatheredParams, -shard);
  return Add(Collective("all_gather", CollectiveKind::kAllGather, buffer, shard_group_, g), deps,
             mem);
}

Lowerer::Zero3Params Lowerer::MakeZero3Params() const {
  Zero3Params z;
  const ParameterCount c = CountParameters(s_.model);
  const int64_t t = s_.parallel.tp;
  // Adds the parameters of group g with these element counts, sharing its weight bytes.
  auto add = [&](int32_t g, const std::vector<int64_t>& elements) {
    int64_t sum = 0;
    for (int64_t e : elements) sum += e;
    std::vector<int32_t> ids;
    Bytes given;
    for (size_t k = 0; k < elements.size(); ++k) {
      const Bytes share =
          k + 1 == elements.size()
              ? group_weights_[g] - given
              : Bytes::Count(static_cast<int64_t>(static_cast<__int128>(group_weights_[g].count()) *
                                                  elements[k] / std::max<int64_t>(sum, 1)));
      given += share;
      ids.push_back(static_cast<int32_t>(z.elements.size()));
      z.elements.push_back(elements[k]);
      z.bytes.push_back(share);
      z.group.push_back(g);
    }
    return ids;
  };
  z.layer.resize(group_params_.size());
  const std::vector<int32_t> emb =
      c.positions > 0 ? add(0, {c.embedding / t, c.positions}) : add(0, {c.embedding / t});
  z.table = emb[0];
  if (c.positions > 0) z.positions = emb[1];
  std::vector<int64_t> projections;
  z.linear_of.fill(-1);
  for (const LayerLinear& l : LayerLinears(s_.model)) {
    int32_t& k = z.linear_of[static_cast<int>(l.target)];
    if (k < 0) k = static_cast<int32_t>(projections.size());  // the first of its target
    projections.push_back(l.ParamsPerGpu(t));
  }
  for (int32_t g = 1; g < NumGroups() - 1; ++g) z.layer[g] = add(g, projections);
  z.head = s_.model.tied_embeddings ? z.table : add(NumGroups() - 1, {c.lm_head / t})[0];
  return z;
}

int32_t Lowerer::ModulesOf(int32_t g, absl::string_view op, bool backward,
                           std::vector<ModuleUse>& out) const {
  const Zero3Params& z = zero3_;
  const size_t first = out.size();
  auto none = [&] { out.emplace_back(); };
  auto one = [&](int32_t param) { out.push_back(ModuleUse{{param}}); };
  auto proj = [&](LoraTarget target) {
    const int32_t k = z.linear_of[static_cast<int>(target)];
    if (k < 0) {
      none();
    } else {
      one(z.layer[g][k]);
    }
  };
  if (g == 0) {
    if (op == "embedding") {
      one(z.table);
      if (z.positions) one(*z.positions);
      if (s_.model.dropout > 0) none();
    }
  } else if (g == NumGroups() - 1) {
    if (op == "final_norm") none();
    if (op == "lm_head") one(z.head);
  } else if (op == "norm1") {
    none();
    none();
  } else if (op == "qkv") {
    none();
    proj(LoraTarget::kQ);
    proj(LoraTarget::kK);
    proj(LoraTarget::kV);
  } else if (op == "out_proj") {
    proj(LoraTarget::kO);
  } else if (op == "norm2" || op == "swiglu" || op == "gelu") {
    none();
  } else if (op == "gate_up") {
    none();
    proj(LoraTarget::kGate);
    proj(LoraTarget::kUp);
  } else if (op == "fc1") {
    none();
    proj(LoraTarget::kUp);
  } else if (op == "down" || op == "fc2") {
    proj(LoraTarget::kDown);
  }
  if (backward) std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  return static_cast<int32_t>(out.size() - first);
}

std::vector<ModuleUse> Lowerer::Zero3Trace() {
  std::vector<ModuleUse> trace;
  auto add = [&](int32_t g, absl::string_view op, bool backward) {
    if (const int32_t modules = ModulesOf(g, op, backward, trace); modules > 0) {
      hook_ops_.push_back({g, op, backward, modules});
    }
  };
  const int32_t head = NumGroups() - 1;
  add(0, "embedding", false);
  for (int32_t g = 1; g < head; ++g) {
    for (const LayerOp& lo : Ops(g)) add(g, lo.name, false);
  }
  add(head, "final_norm", false);
  add(head, "lm_head", false);
  add(head, "lm_head", true);
  add(head, "final_norm", true);
  for (int32_t g = head - 1; g >= 1; --g) {
    const LayerCheckpoint c = CheckpointOf(g);
    if (c.policy != Recompute::kNone && g == c.group_last) {
      for (int32_t r = c.group_first; r <= c.group_last; ++r) {
        for (const LayerOp& lo : Ops(r)) {
          if (Reruns(CheckpointOf(r), lo)) add(r, lo.name, false);
        }
      }
    }
    for (auto it = Ops(g).rbegin(); it != Ops(g).rend(); ++it) add(g, it->name, true);
  }
  add(0, "embedding", true);
  return trace;
}

void Lowerer::Hooks(int32_t g, absl::string_view op, bool backward, std::vector<int32_t>& deps,
                    MemList& mem) {
  if (!coordinator_ || next_hook_op_ == hook_ops_.size()) return;
  const HookOp& h = hook_ops_[next_hook_op_];
  if (h.group != g || h.op != op || h.backward != backward) return;  // an op without hooks
  ++next_hook_op_;
  const int32_t first = use_;
  for (int32_t k = 0; k < h.modules; ++k) {
    coordinator_->Fetch(use_, zero3_fetched_);
    GatherParams(zero3_fetched_.now);
    GatherParams(zero3_fetched_.ahead);
    for (int32_t p : coordinator_->trace()[use_].params) deps.push_back(gather_op_[p]);
    ++use_;
  }
  for (int32_t u = first; u < use_; ++u) {
    coordinator_->Release(u, released_);
    for (int32_t p : released_) {
      mem.emplace_back(MemWhen::kEnd, MemCategory::kGatheredParams, -zero3_.bytes[p]);
    }
  }
}

void Lowerer::GatherParams(const std::vector<int32_t>& params) {
  if (params.empty()) return;
  MemList buffers;
  Bytes total;
  for (int32_t p : params) {
    buffers.emplace_back(MemWhen::kIssue, MemCategory::kGatheredParams, zero3_.bytes[p]);
    total += zero3_.bytes[p];
  }
  const int32_t id = EmitGather(zero3_.group[params.front()], total, buffers);
  for (int32_t p : params) gather_op_[p] = id;
}

std::vector<int32_t> Lowerer::TakeGather(int32_t g) {
  std::vector<int32_t> deps;
  if (gather_pending_[g] && policy_->CopiesAroundCollectives()) {
    const Bytes w = group_weights_[g];
    ProgramBuilder::DepList after = AnchorDeps();
    after.push_back(*gather_pending_[g]);
    deps.push_back(
        Add(Compute("param_copy_out", b_.pass(), OpClass::kMemoryBound, Flops(), w + w, g), after,
            {{MemWhen::kStart, MemCategory::kGatheredParams, w},
             {MemWhen::kEnd, MemCategory::kCommBuffers, -w}}));
  } else if (gather_pending_[g]) {
    deps.push_back(*gather_pending_[g]);
  }
  gather_pending_[g].reset();
  return deps;
}

}  // namespace sim::lowering_internal
