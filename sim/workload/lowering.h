#pragma once
// Lowering: (model, training, parallel layout) -> the op program of one data-parallel rank for
// one optimizer step (sim/workload/program.h). Time-free and deterministic.
//
// Framework semantics (SPEC §3.1, §3.3, §3.4), as explicit ops:
//   ZeRO-0 / fsdp no_shard  gradients accumulate in a full buffer; one bucketed all-reduce per
//                           layer, issued as the last micro-batch's backward finishes that layer.
//   ZeRO-1                  same accumulation; a reduce-scatter per layer in the last
//                           micro-batch; after the optimizer, an all-gather of the updated
//                           compute-dtype parameters (the whole model, bucketed).
//   ZeRO-2                  a reduce-scatter per layer in every micro-batch's backward into the
//                           sharded accumulation buffer; the layer's full gradients live until
//                           their reduce-scatter ends; the post-optimizer all-gather as ZeRO-1.
//   ZeRO-3 / full_shard     per layer: all-gather before forward and again before backward into
//                           a gather buffer, `prefetch` layers ahead: the gather of layer g + p
//                           is launched (and its buffer allocated) when layer g starts; buffers
//                           are freed when their layer's forward (backward) ends; reduce-scatter
//                           per layer in every micro-batch.
//   fsdp shard_grad_op      forward all-gather only; the parameters stay gathered until the
//                           layer's backward ends.
//   fsdp hybrid_shard       full_shard inside a node; the gradient shard is then all-reduced
//                           across nodes.
//   megatron                fp32 main_grad accumulated in a persistent buffer; one reduction
//                           per step in fp32 (all-reduce, or reduce-scatter with the
//                           distributed optimizer = parallel.zero >= 1), after the whole
//                           backward unless overlap_grad_reduce; with the distributed optimizer
//                           the updated bf16 parameters are all-gathered after the optimizer,
//                           or during the next forward with overlap_param_gather.
// Tensor, sequence and context parallelism add their collectives around the layer ops (see
// ParallelRole in layer_ops.h); pipeline parallelism lowers every stage's units in its
// schedule's order (pipeline_schedule.h) with point-to-point sends between stages. Gradient
// reductions and the optimizer run per stage over its own parameters.
// Parameter groups are gathered and reduced as units: the embedding (with learned positions),
// each decoder layer, and the final norm with the LM head (re-gathering the embedding matrix
// when the head is tied to it).

#include <vector>

#include "absl/status/statusor.h"
#include "sim/spec/scenario.h"
#include "sim/workload/program.h"
#include "sim/workload/sharding.h"

namespace sim {

absl::StatusOr<OpProgram> Lower(const Scenario& s);

}  // namespace sim
