#pragma once
// The tensors of the loss, kernel by kernel: what the cross-entropy's forward and backward
// allocate and free around the LM head's 16-bit logits L16 = 2·T·V bytes (T tokens, V the
// vocabulary columns of this GPU; L32 = 4·T·V), each tensor at its own size so that the caching
// allocator sees them (sim/memory/caching_allocator.h).
//
//   kernel          forward (after lm_head's L16)            kept         backward peak eager +L32
//   fp32 copy, +L32 log_softmax,        L32          +L32 dlogp (nll), +L32 dlogits 12·T·V
//                   −L32 copy, −L16 (logits dropped)                      −L32 −L32, +L16 cast,
//                   −L32
//   eager_16bit     +L16 shifted copy, +L16 log_softmax,      L16          +L16 dlogp, +L16 dshift
//   6·T·V           −L16 copy, −L16 (logits dropped)                        −L16 −L16, +L16 dlogits
//                                                                           (slice backward), −L16
//   vocab_parallel  +L32 fp32 copy (max, exp in place),      L32          gradient in place; +L16
//   6·T·V
//                   −L16                                                  cast, −L32
//   fused           none: the gradient is written into the   L16          none 2·T·V
//                   logits in the forward
//   compiled,       none (per-row statistics only)            L16          +L16 gradient 4·T·V
//   flash_attn
//   chunked (n)     n × +L32/n log_softmax, +L32/n chunk     L32          per chunk +2·L32/n; −all;
//   (6+4/n)·T·V
//                   copy; −L32/n, −L16                                    +L16 grads
//
// Sources: eager — PyTorch cross_entropy = log_softmax + nll_loss on logits.float() (torchtitan
// and Hugging Face trainers upcast; log_softmax saves its output, nll_loss's backward writes a
// dense gradient, log_softmax's backward a second one, autograd casts it to the logits' dtype).
// eager_16bit — Hugging Face GPT2LMHeadModel.forward (transformers 4.2x): shift_logits =
// lm_logits[..., :-1, :].contiguous(), then CrossEntropyLoss on them in the model's dtype
// (one token of each sequence fewer, counted as T); SliceBackward0 writes the gradient into
// zeros of the logits' shape. vocab_parallel — Megatron-LM
// megatron/core/tensor_parallel/cross_entropy.py: calculate_logits_max() upcasts with .float(), exp
// and the gradient are computed in place in that fp32 buffer (the same for its jit-fused variant).
// fused — Transformer Engine parallel_cross_entropy (Triton): the gradient overwrites the 16-bit
// input in the forward. compiled — torch.compile of PyTorch's cross_entropy(logits.float())
// (torchtitan compiles the loss when compile.components holds "loss", its default since 2025):
// Inductor fuses the upcast into the max/logsumexp reductions, its partitioner saves the graph
// input (the 16-bit logits) and per-row statistics, and the backward writes the 16-bit gradient in
// one kernel. chunked — torchtune CEWithChunkedOutputLoss: the head runs per chunk, each chunk is
// upcast and cross-entropied alone, its log_softmax kept for the backward. chunked_compiled — the
// same under torch.compile (torchtune `compile: True` compiles the loss's per-chunk cross-entropy):
// the upcast fuses into the reductions, the 16-bit chunk logits are what is saved, and one
// chunk's 16-bit gradient exists at a time: peak (2 + 2/n)·T·V. flash_attn — flash-attention's
// CrossEntropyLoss (flash_attn/losses/cross_entropy.py; llm-foundry ComposerMPTCausalLM builds it
// for its default loss_fn 'fused_crossentropy' with inplace_backward=False): the forward kernel
// saves the 16-bit logits and the fp32 log-sum-exp per row, the backward allocates an empty_like
// 16-bit gradient because it may not overwrite the logits: compiled's tensors.

#include <cstdint>
#include <vector>

#include "sim/base/units.h"
#include "sim/spec/scenario.h"
#include "sim/workload/program.h"

namespace sim {

struct LossTensors {
  Bytes logits16;                   // lm_head's output, allocated when it starts
  std::vector<MemAction> forward;   // of the cross_entropy forward op
  std::vector<MemAction> backward;  // of the cross_entropy backward op
  Bytes head_grad;                  // the 16-bit logits gradient lm_head's backward frees
  // The head runs chunk by chunk (torchtune's chunked output): its weight gradient is created by
  // the first chunk's backward, while the other chunks' loss tensors are still held.
  bool chunked_head = false;
};

LossTensors LossTensorsOf(LossKernel kernel, int64_t chunks, int64_t tokens, int64_t vocab);

}  // namespace sim
