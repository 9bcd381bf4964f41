#pragma once
// The op program of one data-parallel replica for one optimizer step: plain data, no time.
// With pipeline parallelism it holds every stage's ops, each op naming its stage (a distinct
// GPU); TP and CP peers run the same ops and are not listed apart.
//
// Ops are listed in issue order (a stage's ops in its schedule's order; an op only depends on
// earlier ops). Each runs on one stream of its stage's GPU (compute; the data-parallel
// communicator, whose collectives take turns as one NCCL communicator's kernels do; overlapped
// TP/CP collectives; pipeline sends), after the ops it depends on have completed. A stream runs
// its ops one at a time, in list order. Memory actions say what an op allocates or frees and when:
//   kIssue — when its dependencies are met (a prefetched all-gather's buffer is allocated when
//            the framework launches it, not when the stream gets to it),
//   kStart — when it starts running,
//   kEnd   — when it completes.
// Positive bytes allocate, negative bytes free.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "sim/base/units.h"
#include "sim/spec/memory_category.h"
#include "sim/spec/scenario.h"
#include "sim/workload/layer_ops.h"
#include "sim/workload/sharding.h"

namespace sim {

// Streams of one GPU: compute; the data-parallel communicator's collectives; TP/CP collectives
// that overlap compute (Megatron-LM --tp-comm-overlap; without it they run on the compute
// stream); pipeline point-to-point sends; offload's copies between GPU and host over PCIe (the
// copy engines: they take no SMs from compute); the host CPU's work for this GPU (an offloaded
// optimizer step, NVMe swaps).
enum class StreamKind : uint8_t {
  kCompute = 0,
  kComm = 1,
  kTpComm = 2,
  kP2p = 3,
  kPcie = 4,
  kHost = 5
};
inline constexpr int kNumStreams = 6;
// The replay's index of a stage's stream (one simulated replica): stage · kNumStreams + kind.
inline int32_t StreamIndex(int32_t stage, StreamKind kind) {
  return stage * kNumStreams + static_cast<int32_t>(kind);
}
// Streams whose kernels share the GPU's SMs and HBM with compute (NCCL's kernels).
inline bool SharesSms(StreamKind s) {
  return s == StreamKind::kComm || s == StreamKind::kTpComm || s == StreamKind::kP2p;
}

// What an op is (a kernel on the GPU's cores, or a collective / send on its links) and which pass
// of the step it belongs to; the two are independent (a ZeRO-3 gather serves the forward).
enum class OpKind : uint8_t { kCompute, kCollective };
enum class OpPass : uint8_t { kForward, kRecompute, kBackward, kStep };
enum class CollectiveKind : uint8_t {
  kNone,
  kAllGather,
  kReduceScatter,
  kAllReduce,
  kSendRecv,
  kAllToAll
};
inline constexpr int kNumCollectiveKinds = 6;

// Which GPUs a collective spans: `size` ranks on `nodes` distinct nodes, member i of copy q
// being GPU q·copy_offset + i·stride. `copies` identical groups run the same collective at
// the same time (hybrid sharding's per-node groups, or its per-rail groups across nodes), so
// they share links.
struct CommGroup {
  int64_t size = 1;
  int64_t nodes = 1;
  int64_t stride = 1;
  int64_t copies = 1;
  int64_t copy_offset = 0;
};

enum class MemWhen : uint8_t { kIssue, kStart, kEnd };

struct MemAction {
  MemAction() = default;
  // A constructor, so that containers build actions in place (emplace_back): an action built
  // aside and copied in stalled the lowering on every copy (its two one-byte fields stored
  // apart, then read back with its size as one 16-byte load; perf).
  constexpr MemAction(MemWhen w, MemCategory c, Bytes b) : when(w), category(c), bytes(b) {}
  MemWhen when = MemWhen::kIssue;
  MemCategory category = MemCategory::kWeights;
  Bytes bytes;  // > 0 allocate, < 0 free
};

struct Op {
  absl::string_view name;  // static text: "qkv", "all_gather", "optimizer", ...
  OpKind kind = OpKind::kCompute;
  OpPass pass = OpPass::kForward;
  StreamKind stream = StreamKind::kCompute;
  int32_t micro_batch = 0;
  int16_t stage = 0;  // pipeline stage (the simulated GPU) that runs it
  // Parameter group: 0 = embedding, 1..L = decoder layers, L + 1 = final norm and LM head;
  // none for ops that concern the whole model (optimizer, step-wide collectives).
  std::optional<int32_t> group = 0;
  // Compute ops.
  OpClass op_class = OpClass::kMemoryBound;
  Flops flops;
  Bytes bytes_moved;
  // FP8: HBM bytes of the cast kernels that run before this GEMM (LayerOp::fp8_cast_*), and
  // GEMM-class ops that stay 16-bit (eager attention's batched matmuls, the LM head).
  Bytes serial_bytes;
  int16_t serial_kernels = 0;  // the kernels of those casts
  bool keep_16bit = false;
  // The mean of 1 / K over the kernels the op runs, K each one's inner loop length. GEMMs: the
  // reduction length (the forward's inner dimension; a backward's input gradient reduces over
  // the forward's output columns and its weight gradient over the tokens), for
  // GpuCalibration::gemm_k_overhead. Flash attention: the key/value positions a query block
  // visits (the query positions a key/value block visits in the backward), s / 2 under the
  // causal mask, for GpuCalibration::attention_kv_overhead. 0 where unknown (eager attention's
  // batched matmuls) or for other kernels.
  float inv_k = 0;
  // GEMMs: the mean over the op's kernels (weighted by FLOPs) of the time their output tiles
  // take in whole waves over the GPU's SMs, relative to the FLOPs alone (sim/workload/
  // gemm_waves.h); >= 1. 1 for other ops, or where the GPU's SM count is not given.
  float waves = 1;
  // Kernels the op launches in its forward (LayerOp::kernels); a backward launches twice as many.
  int16_t kernels = 1;
  // Collectives: index into OpProgram::collectives (kept apart so that the ops the replay walks
  // stay small); none for compute ops.
  std::optional<int32_t> collective;
  // Index ranges into OpProgram::deps and OpProgram::mem. An op's memory actions are ordered
  // by MemWhen: [mem_begin, mem_start) at issue, [mem_start, mem_finish) at start,
  // [mem_finish, mem_end) at end.
  int32_t deps_begin = 0, deps_end = 0;
  int32_t mem_begin = 0, mem_start = 0, mem_finish = 0, mem_end = 0;
};

// A collective: the full tensor M (docs/model.md "Conventions": ring all-gather/reduce-scatter send
// M(n-1)/n per GPU, all-reduce 2M(n-1)/n) over `group`, launched as `buckets` collectives of equal
// size. kSendRecv: member 0 of each copy sends M to member 1 (a pipeline stage boundary).
// kAllToAll: each member's buffer of M bytes is split in n, member i's j-th slice going to
// member j (expert parallelism's dispatch and combine): M(n-1)/n sent per GPU.
struct CollectiveSpec {
  CollectiveKind kind = CollectiveKind::kNone;
  Bytes tensor;
  CommGroup group;
  int32_t buckets = 1;
};

struct OpProgram {
  std::vector<Op> ops;
  std::vector<CollectiveSpec> collectives;  // of the communication ops
  const CollectiveSpec& CollectiveOf(const Op& op) const { return collectives[*op.collective]; }
  std::vector<int32_t> deps;  // predecessors, by op index (always lower than the op's own)
  std::vector<MemAction> mem;
  // Memory held for the whole step (weights, gradient buffers, optimizer state, the runtime
  // reserve), allocated before the first op; one list per pipeline stage.
  std::vector<std::vector<MemAction>> persistent;
  int32_t stages = 1;              // pipeline stages (each a distinct simulated GPU)
  std::vector<int64_t> stage_gpu;  // the GPU that stands for each stage
  int64_t dp_stride = 1;           // GPUs between DP replicas (placement)
  // What each GPU holds of the model (the framework policy's sharding) and the persistent states
  // of each stage's GPU, so that reports need not derive them again.
  ShardingPlan sharding;
  std::vector<StateSplit> stage_states;
  int32_t layers = 0;  // decoder layers (groups 1..layers)
  int64_t dp = 1;      // data-parallel ranks the program stands for
  int64_t tokens_per_micro_batch = 0;
};

// Bytes each GPU sends for one collective (docs/model.md "Conventions", ring algorithms).
Bytes BytesSentPerGpu(CollectiveKind kind, Bytes tensor, int64_t group_size);

// "mb3 L12 bwd qkv" — for summaries, traces and timelines.
std::string OpLabel(const Op& op, int32_t layers);
absl::string_view Name(OpPass p);
absl::string_view Name(CollectiveKind k);

}  // namespace sim
