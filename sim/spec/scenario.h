#pragma once
// One training job (scenarios/NAME.yaml) after loading, resolution of catalog names and
// validation. The member initialisers below are the documented defaults of every optional key
// (README "Scenario files" lists them); no other place in the code writes a default.

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "sim/base/units.h"
#include "sim/spec/fabric.h"
#include "sim/spec/hardware.h"
#include "sim/spec/model.h"

namespace sim {

enum class Precision { kBf16, kFp16, kFp8 };
enum class OptimizerKind { kAdamW, kSgd, kAdam8bit };
enum class Recompute { kNone, kSelective, kFull };
enum class AttentionKernel { kFlash, kEager };
enum class Framework { kDeepSpeed, kFsdp, kMegatron };
// FSDP sharding strategies (torch.distributed.fsdp.ShardingStrategy).
enum class FsdpSharding { kNoShard, kShardGradOp, kFullShard, kHybridShard };
// NCCL's algorithms: ring; (double binary) tree, for all-reduce; hierarchical = intra-node
// reduce-scatter, inter-node all-reduce/all-gather of the shard, intra-node all-gather;
// nvls = NVLink SHARP all-reduce inside one NVSwitch (H100 and later) node; nvls_tree = NVLS
// inside each node pipelined with an inter-node all-reduce of each rail's shard (NCCL 2.18+);
// auto = the fastest for each collective, as NCCL's tuner picks.
enum class CollectiveAlgorithm { kRing, kTree, kHierarchical, kNvls, kNvlsTree, kAuto };
inline constexpr int kNumCollectiveAlgorithms = 5;  // without kAuto
// Pipeline schedules: GPipe (all forwards, then all backwards), 1F1B (PipeDream-Flush,
// Narayanan et al. SC21 §2.2.1) and interleaved 1F1B with `pp_chunks` model chunks per stage
// (Megatron-LM's virtual pipeline, SC21 §2.2.2).
enum class PipelineSchedule { kGpipe, k1F1B, kInterleaved };
// The parallel dimensions in the rank order (innermost first).
enum class ParallelDim { kTp, kCp, kDp, kPp };

struct ClusterSpec {
  GpuSpec gpu;
  NodeSpec node;
  int64_t nodes = 1;
  // The inter-node fabric; absent = a non-blocking rail-optimised two-level fat tree of the
  // node's NICs (the DGX SuperPOD reference design).
  std::optional<FabricSpec> fabric;
  int64_t gpus() const { return nodes * node.gpus_per_node; }
};

struct TrainingSpec {
  int64_t seq_len = 4096;
  int64_t micro_batch = 1;   // sequences per micro-batch per data-parallel rank
  int64_t global_batch = 0;  // 0 = one micro-batch per DP rank (m = 1)
  Precision precision = Precision::kBf16;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  Recompute recompute = Recompute::kNone;
  AttentionKernel attention = AttentionKernel::kFlash;
};

struct ParallelSpec {
  Framework framework = Framework::kDeepSpeed;
  int64_t zero = 0;
  int64_t tp = 1;
  int64_t pp = 1;
  // Context parallelism: the sequence is split over `cp` GPUs; K and V are all-gathered over the
  // CP group before attention (Llama 3's all-gather CP, Dubey et al. 2024 §3.3.2).
  int64_t cp = 1;
  bool sequence_parallel = false;
  // Rank order, innermost first (Megatron-LM --rank-order default tp-cp-ep-dp-pp without ep):
  // consecutive GPUs fill the TP group, then CP, then DP, then PP.
  std::array<ParallelDim, 4> rank_order = {ParallelDim::kTp, ParallelDim::kCp, ParallelDim::kDp,
                                           ParallelDim::kPp};
  PipelineSchedule pp_schedule = PipelineSchedule::k1F1B;
  int64_t pp_chunks = 1;  // model chunks per stage (v); > 1 needs the interleaved schedule
  // Decoder layers of the first and last stage when they differ from the others (Megatron-LM
  // --decoder-first/last-pipeline-num-layers; Llama 3 405B drops one layer from each); with
  // pp_chunks > 1, of the first and the last model chunk. Absent = the layers split evenly.
  std::optional<int64_t> first_stage_layers, last_stage_layers;
  // TP collectives run beside the GEMMs they feed (Megatron-LM --tp-comm-overlap); otherwise
  // the compute stream waits for them.
  bool tp_comm_overlap = false;
  // Gradient reduction overlapped with the backward (buckets launched as layers finish);
  // absent = the framework's default: DeepSpeed and FSDP overlap, Megatron-LM
  // --overlap-grad-reduce is off.
  std::optional<bool> overlap_grad_reduce;
  // Megatron distributed optimizer: the parameter all-gather overlaps the next step's forward
  // (--overlap-param-gather) instead of following the optimizer.
  bool overlap_param_gather = false;
  // ZeRO-3 / FULL_SHARD layers gathered ahead of the one computing (DeepSpeed
  // stage3_prefetch_bucket_size, FSDP forward_prefetch/backward_prefetch).
  int64_t prefetch = 1;
  // Gradient reduction bucket; absent = the framework's (its policy in sim/workload/policy/).
  std::optional<Bytes> bucket;
  // FSDP only: the sharding strategy; when absent it follows `zero` (0 NO_SHARD, 2 SHARD_GRAD_OP,
  // 3 FULL_SHARD).
  std::optional<FsdpSharding> sharding;
  // Gradient reduction dtype; absent = the compute dtype (FSDP MixedPrecision default follows
  // param_dtype; torchtitan sets fp32).
  std::optional<Dtype> reduce_dtype;
  CollectiveAlgorithm collective = CollectiveAlgorithm::kAuto;
};

struct RuntimeSpec {
  Bytes reserved = Bytes::GiB(1);  // CUDA context + library workspaces per GPU
  // First model of the caching allocator: it reserves this fraction above the allocated bytes
  // (rounding and fragmentation). Reported beside the allocated peak; the verdict warns when the
  // estimate exceeds capacity.
  double fragmentation = 0.05;
};

struct Scenario {
  std::string name;
  std::string file;  // where it was loaded from ("" for generated scenarios)
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;
  ParallelSpec parallel;
  RuntimeSpec runtime;

  int64_t dp() const { return cluster.gpus() / (parallel.tp * parallel.pp * parallel.cp); }
  int64_t micro_batches() const { return training.global_batch / (training.micro_batch * dp()); }
};

absl::string_view Name(Precision p);
absl::string_view Name(OptimizerKind o);
absl::string_view Name(Recompute r);
absl::string_view Name(AttentionKernel a);
absl::string_view Name(Framework f);
absl::string_view Name(FsdpSharding s);
absl::string_view Name(Dtype d);
absl::string_view Name(CollectiveAlgorithm a);
absl::string_view Name(PipelineSchedule p);
absl::string_view Name(ParallelDim d);

}  // namespace sim
