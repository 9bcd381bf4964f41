#include "sim/workload/finetune.h"

#include <algorithm>

namespace sim {

absl::string_view LayerOpOf(const ModelSpec& m, LoraTarget t) {
  const bool gelu = m.mlp == MlpKind::kGelu;
  switch (t) {
    case LoraTarget::kQ:
    case LoraTarget::kK:
    case LoraTarget::kV:
      return "qkv";
    case LoraTarget::kO:
      return "out_proj";
    case LoraTarget::kGate:
    case LoraTarget::kUp:
      return gelu ? "fc1" : "gate_up";
    case LoraTarget::kDown:
      return gelu ? "fc2" : "down";
  }
  return "";
}

int64_t AdapterParamsPerLayer(const Scenario& s) {
  const FinetuneSpec& ft = s.training.finetune;
  if (!ft.adapters()) return 0;
  int64_t n = 0;
  for (const LayerLinear& l : LayerLinears(s.model)) {
    if (ft.targets[static_cast<int>(l.target)]) n += l.AdapterParamsPerGpu(ft.rank, s.parallel.tp);
  }
  return n;
}

Bytes Nf4Bytes(int64_t params) {
  // 4 bits per weight, an int8 scale per 64 weights, an fp32 scale per 256 of those scales;
  // rounded up per block as the quantiser pads.
  const int64_t blocks = (params + 63) / 64;
  return Bytes::Count((params + 1) / 2 + blocks + 4 * ((blocks + 255) / 256));
}

OpFinetune FinetuneOf(const Scenario& s, absl::string_view op_name, int64_t tokens) {
  const FinetuneSpec& ft = s.training.finetune;
  OpFinetune o;
  if (!ft.adapters()) return o;
  const int64_t tp = s.parallel.tp;
  bool any_linear = false, any_adapter = false;
  int64_t params = 0, largest = 0;
  for (const LayerLinear& l : LayerLinears(s.model)) {
    if (LayerOpOf(s.model, l.target) != op_name) continue;
    any_linear = true;
    params += l.ParamsPerGpu(tp);
    largest = std::max(largest, l.ParamsPerGpu(tp));
    if (!ft.targets[static_cast<int>(l.target)]) continue;
    any_adapter = true;
    const int64_t r = ft.rank;
    // x·A then (x·A)·B, on this GPU's shard of whichever side TP splits.
    const int64_t in = l.column ? l.in : l.in / tp, out = l.column ? l.out / tp : l.out;
    o.adapter_flops += Flops::Count(2.0 * static_cast<double>(tokens) * static_cast<double>(r) *
                                    static_cast<double>(in + out));
    o.adapter_saved += Bytes::Count(2 * tokens * r);
  }
  if (!any_linear) return o;
  o.frozen = true;
  o.input_needed = any_adapter;
  // bitsandbytes/torchao dequantise a fused projection's weights one Linear at a time.
  if (ft.method == FinetuneMethod::kQlora) {
    o.dequantized = Bytes::Count(2 * largest);
    o.quantized_params = params;
  }
  return o;
}

std::vector<LayerOp> WithFinetune(const Scenario& s, std::vector<LayerOp> ops, int64_t tokens) {
  if (!s.training.finetune.adapters()) return ops;
  for (LayerOp& op : ops) {
    const OpFinetune ft = FinetuneOf(s, op.name, tokens);
    if (!ft.frozen) continue;
    op.frozen = true;
    op.adapter_flops = ft.adapter_flops;
    op.dequantized = ft.dequantized;
    if (ft.quantized_params > 0) {
      // Read the NF4 weights and write their 16-bit copies: (0.516 + 2) bytes per weight.
      op.bytes_moved += Nf4Bytes(ft.quantized_params) + Bytes::Count(2 * ft.quantized_params);
    }
    for (SavedTensor& t : op.saves) {
      if (t.weight_grad_input && !ft.input_needed) t.not_saved = true;
    }
    if (ft.adapter_saved > Bytes()) op.saves.push_back({"lora_xa", ft.adapter_saved});
  }
  return ops;
}

}  // namespace sim
