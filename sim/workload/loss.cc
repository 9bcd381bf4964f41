#include "sim/workload/loss.h"

#include <algorithm>

namespace sim {

LossTensors LossTensorsOf(LossKernel kernel, int64_t chunks, int64_t tokens, int64_t vocab) {
  constexpr MemCategory kL = MemCategory::kLogits;
  const Bytes l16 = Bytes::Count(2 * tokens * vocab);
  const Bytes l32 = Bytes::Count(4 * tokens * vocab);
  LossTensors t;
  t.logits16 = l16;
  t.head_grad = l16;
  t.chunked_head = kernel == LossKernel::kChunked || kernel == LossKernel::kChunkedCompiled;
  switch (kernel) {
    case LossKernel::kEager:
      t.forward = {{MemWhen::kStart, kL, l32},   // logits.float()
                   {MemWhen::kStart, kL, l32},   // log_softmax output (saved)
                   {MemWhen::kEnd, kL, -l32},    // the copy: needed by no backward
                   {MemWhen::kEnd, kL, -l16}};   // the trainer drops the logits
      t.backward = {{MemWhen::kStart, kL, l32},  // nll_loss backward: d log_softmax
                    {MemWhen::kStart, kL, l32},  // log_softmax backward: d logits (fp32)
                    {MemWhen::kEnd, kL, -l32},   // the saved log_softmax
                    {MemWhen::kEnd, kL, -l32},   // d log_softmax
                    {MemWhen::kEnd, kL, l16},    // cast to the logits' dtype
                    {MemWhen::kEnd, kL, -l32}};  // d logits (fp32)
      break;
    case LossKernel::kEager16:
      t.forward = {{MemWhen::kStart, kL, l16},   // logits[..., :-1, :].contiguous()
                   {MemWhen::kStart, kL, l16},   // log_softmax output, 16-bit (saved)
                   {MemWhen::kEnd, kL, -l16},    // the shifted copy: needed by no backward
                   {MemWhen::kEnd, kL, -l16}};   // the trainer drops the logits
      t.backward = {{MemWhen::kStart, kL, l16},  // nll_loss backward: d log_softmax
                    {MemWhen::kStart, kL, l16},  // log_softmax backward: d shifted logits
                    {MemWhen::kEnd, kL, -l16},   // the saved log_softmax
                    {MemWhen::kEnd, kL, -l16},   // d log_softmax
                    {MemWhen::kEnd, kL, l16},    // slice backward: zeros of the logits' shape
                    {MemWhen::kEnd, kL, -l16}};  // d shifted logits, copied in
      break;
    case LossKernel::kVocabParallel:
      t.forward = {{MemWhen::kStart, kL, l32},  // fp32 copy; exp and softmax in place
                   {MemWhen::kEnd, kL, -l16}};
      t.backward = {{MemWhen::kEnd, kL, l16},  // the in-place fp32 gradient, cast
                    {MemWhen::kEnd, kL, -l32}};
      break;
    case LossKernel::kFused:
      break;  // the gradient lives in the logits' buffer
    case LossKernel::kCompiled:
    case LossKernel::kFlashAttn:
      t.backward = {{MemWhen::kStart, kL, l16},  // the 16-bit gradient
                    {MemWhen::kEnd, kL, -l16}};  // the saved logits
      break;
    case LossKernel::kChunkedCompiled: {
      // Each chunk's compiled cross-entropy keeps only its 16-bit logits (already held) and per
      // row statistics, and writes one chunk's 16-bit gradient at a time, which that chunk's
      // head matmul consumes; lm_head's backward then frees the logits.
      const Bytes chunk16 = l16 / std::max<int64_t>(chunks, 1);
      t.backward = {{MemWhen::kStart, kL, chunk16}, {MemWhen::kEnd, kL, -chunk16}};
      break;
    }
    case LossKernel::kChunked: {
      const int64_t n = std::max<int64_t>(chunks, 1);
      const Bytes chunk32 = l32 / n;
      for (int64_t i = 0; i < n; ++i) t.forward.emplace_back(MemWhen::kStart, kL, chunk32);
      t.forward.emplace_back(MemWhen::kStart, kL, chunk32);  // one chunk's fp32 copy at a time
      t.forward.emplace_back(MemWhen::kEnd, kL, -chunk32);
      t.forward.emplace_back(MemWhen::kEnd, kL, -l16);
      t.backward = {{MemWhen::kStart, kL, chunk32}, {MemWhen::kStart, kL, chunk32}};
      for (int64_t i = 0; i < n; ++i) t.backward.emplace_back(MemWhen::kEnd, kL, -chunk32);
      t.backward.emplace_back(MemWhen::kEnd, kL, -chunk32);
      t.backward.emplace_back(MemWhen::kEnd, kL, -chunk32);
      t.backward.emplace_back(MemWhen::kEnd, kL, l16);
      break;
    }
  }
  return t;
}

}  // namespace sim
