#pragma once
// Fine-tuning with adapters (training.finetune): which projections of a decoder layer carry a
// LoRA adapter, how many parameters the adapters add, what the frozen base weights cost, and
// the FLOPs the adapters add to the GEMM op that holds their projection.
//
// LoRA (Hu et al. 2021, arXiv 2106.09685; torchtune LoRALinear, PEFT lora.Linear): a frozen
// projection W (in × out) gains A (in × r) and B (r × out), y = x·W + (alpha/r)·(x·A)·B. Only A
// and B are trained: they have gradients and optimizer states, W has neither. In the backward
// a frozen projection computes its input gradient (one GEMM of the forward's size) but no
// weight gradient; PyTorch's autograd then does not save its input for it (the mm backward
// saves `self` only when the weight needs a gradient), so an input that only a frozen,
// adapter-less projection needed is not kept. The adapter keeps x (shared with W's input) and
// x·A (T × r) for B's gradient.
//
// Under tensor parallelism an adapter follows its projection: a column-parallel W shards B by
// columns (A whole on every rank), a row-parallel W shards A by rows (B whole).
//
// QLoRA (Dettmers et al. 2023, arXiv 2305.14314; bitsandbytes Linear4bit, torchao NF4Tensor as
// torchtune uses it): the decoder layers' projections are stored as 4-bit NormalFloat in blocks
// of 64 with one int8 scale per block, the scales double-quantised in blocks of 256 with one
// fp32 scale each: 0.5 + 1/64 + 4/(64·256) bytes per parameter. Embedding, LM head and norms
// stay 16-bit. Each projection is dequantised to bf16 when a GEMM uses it (forward, recompute,
// and the backward's input gradient) and freed after: one projection's 16-bit copy at a time.

#include <array>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "sim/base/units.h"
#include "sim/spec/projections.h"
#include "sim/spec/scenario.h"
#include "sim/workload/layer_ops.h"

namespace sim {

// The layer op (sim/workload/layer_ops.h) that computes a projection: qkv, out_proj, gate_up
// (fc1), down (fc2).
absl::string_view LayerOpOf(const ModelSpec& m, LoraTarget t);

// Adapter parameters of one decoder layer on one GPU (0 for full fine-tuning).
int64_t AdapterParamsPerLayer(const Scenario& s);
// Bytes of a decoder layer's projections in NF4 (QLoRA), per GPU.
Bytes Nf4Bytes(int64_t params);

// What fine-tuning changes about one layer op: whether its weights are frozen (no weight
// gradient: the backward is one GEMM, not two), the adapters' forward FLOPs, the adapters'
// saved x·A, and whether the op's input is kept for a weight gradient at all.
struct OpFinetune {
  bool frozen = false;
  Flops adapter_flops;  // forward; the backward does twice this
  Bytes adapter_saved;  // x·A of each adapter of the op, kept for B's gradient
  bool input_needed = true;
  // QLoRA: the 16-bit copy of the op's projections while it runs (one GEMM's worth at a time).
  Bytes dequantized;
  int64_t quantized_params = 0;  // QLoRA: the op's NF4 weights, all dequantised per run
};
OpFinetune FinetuneOf(const Scenario& s, absl::string_view op_name, int64_t tokens);

// The layer's ops with fine-tuning applied: frozen flags, adapter FLOPs and saved x·A, the
// inputs no longer saved, QLoRA's dequantised copies and the NF4 reads of the dequantisation
// (0.516 + 2 bytes per weight, every time the op runs). `tokens` per GPU per micro-batch.
std::vector<LayerOp> WithFinetune(const Scenario& s, std::vector<LayerOp> ops, int64_t tokens);

}  // namespace sim
